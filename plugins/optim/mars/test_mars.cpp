// Parity of "mars" and "cmars" with timm's Mars through create_optimizer_v2:
// 10 steps with weight-decay and layer-decay groups, lr changes, a 1-D
// parameter without gradient on some steps (its own step count and last
// gradient); 2-D+ parameters take MARS steps, 1-D ones AdamW steps unless
// optimize_1d; both mars types. The final parameters, the state, the groups
// and the log line compared. Without caution, 2-D+ float32 parameters take
// timm-cpp's loop after the norm; the ops run otherwise.
#include "optim_parity.hpp"
#include "test_support.hpp"
#include "timm/base/error.hpp"

#include <doctest/doctest.h>

namespace test_mars {

namespace {

using timm::test::optim_case;
using timm::test::OptimCase;

// timm's per-tensor step (_mars_single_tensor_step) op by op with the same
// ATen kernels (the CPU foreach ops run them tensor by tensor), or the loop
// with ATen's formulas per element: float32 rounding; 1e-6 (parameters are
// O(1)) and 1e-5 relative on the state.
constexpr double kTolerance = timm::test::kSameKernelsTolerance;
constexpr double kStateTolerance = 1e-5;

std::vector<OptimCase> make_cases() {
  std::vector<OptimCase> cases;
  cases.push_back(optim_case("mars", "mars", 3e-3, 0.05));
  cases.push_back(optim_case("cmars", "cmars", 3e-3, 0.05));
  // --opt-eps and --opt-betas (betas_1d follows betas).
  cases.push_back(optim_case("mars eps+betas", "mars", 1e-3, 0.1));
  cases.back().eps = 1e-6;
  cases.back().betas = std::vector<double>{0.8, 0.95};
  // --opt-kwargs: the Lion update, gamma, the 1-D AdamW's own betas and lr factor.
  cases.push_back(
      optim_case("mars kwargs lion", "mars", 1e-3, 0.1,
                 {{"mars_type", "lion"}, {"gamma", "0.05"}, {"betas_1d", "(0.8,0.9)"}, {"lr_1d_factor", "0.5"}}));
  // MARS steps for 1-D parameters too; a quoted mars_type; betas_1d unused.
  cases.push_back(optim_case("cmars kwargs optimize_1d", "cmars", 1e-3, 0.1,
                             {{"mars_type", "'adamw'"}, {"optimize_1d", "True"}, {"betas_1d", "[0.8,0.9]"}}));
  cases.push_back(optim_case("cmars lion", "cmars", 1e-3, 0.05, {{"mars_type", "lion"}}));
  cases.push_back(optim_case("mars layer-decay", "mars", 3e-3, 0.05));
  cases.back().layer_decay = 0.8;
  return cases;
}

timm::test::OptimOracle oracle(make_cases());  // runs timm on first use

}  // namespace

TEST_CASE("mars and cmars match timm's Mars") {
  oracle.expect_parity_each({"mars", "cmars", "mars eps+betas", "mars kwargs lion", "cmars kwargs optimize_1d",
                             "cmars lion", "mars layer-decay"},
                            kTolerance, kStateTolerance);
}

// The parity cases' parameters fit in one of the loop's ranges; this one
// spans several: the float32 loop against float64 ops (1-D, so optimize_1d
// for MARS steps), 5 steps, the same gradients; measured 5.1e-7. mars_type
// "lion" is left to the parity cases: its update is a sign, which float32
// and float64 moments near zero flip (a 2 lr difference) whatever the loop.
TEST_CASE("mars's loop agrees with its ops over several ranges") {
  timm::test::load_builtin_plugins();
  timm::test::expect_one_pass_near_float64_ops(
      {timm::test::one_pass_case("mars", 3e-3, 0.05, {{"optimize_1d", "True"}})});
}

TEST_CASE("mars state survives save and load") { oracle.expect_round_trips({"mars", "mars kwargs lion"}); }

TEST_CASE("mars rejects bad arguments") {
  timm::test::load_builtin_plugins();
  timm::test::ParityModel model;
  timm::OptimizerArgs args;
  args.opt = "mars";
  // Mars takes no foreach (timm's __init__ has none).
  args.kwargs = {{"foreach", "True"}};
  CHECK_THROWS_WITH_AS(timm::create_optimizer(model, {}, args), doctest::Contains("'mars' has no argument 'foreach'"),
                       timm::UsageError);
  args.kwargs = {{"mars_type", "sgd"}};
  CHECK_THROWS_WITH_AS(timm::create_optimizer(model, {}, args),
                       doctest::Contains("mars_type must be 'adamw' or 'lion'"), timm::UsageError);
  args.kwargs = {{"betas_1d", "(0.9,0.99,0.999)"}};
  CHECK_THROWS_WITH_AS(timm::create_optimizer(model, {}, args), doctest::Contains("betas_1d needs 2 values"),
                       timm::UsageError);
  args.kwargs = {{"gamma", "high"}};
  CHECK_THROWS_WITH_AS(timm::create_optimizer(model, {}, args), doctest::Contains("expected a number"),
                       timm::UsageError);
  args.kwargs = {};
  args.betas = std::vector<double>{1.0, 0.99};
  CHECK_THROWS_WITH_AS(timm::create_optimizer(model, {}, args), doctest::Contains("invalid beta parameter at index 0"),
                       timm::UsageError);
  args.betas.reset();
  args.eps = -1e-8;
  CHECK_THROWS_WITH_AS(timm::create_optimizer(model, {}, args), doctest::Contains("invalid epsilon"), timm::UsageError);
}

}  // namespace test_mars
