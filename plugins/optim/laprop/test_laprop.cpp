// Parity of "laprop", "lapropc" and "claprop" with timm's LaProp through
// create_optimizer_v2: 10 steps with weight-decay and layer-decay groups, lr
// changes (LaProp's first-moment correction averages the lrs), a parameter
// without gradient on some steps (its step and lr averages fall behind the
// group's); the final parameters, the state, the groups and the log line
// compared.
#include "optim_parity.hpp"
#include "test_support.hpp"
#include "timm/base/error.hpp"

#include <doctest/doctest.h>

namespace test_laprop {

namespace {

using timm::test::optim_case;
using timm::test::OptimCase;

// timm's CPU path (_single_tensor_laprop) in one pass per parameter (by
// default) or op by op with the same ATen kernels (foreach=False), the scalar
// state in timm's dtypes. The ops agree to the last bit, the one pass to a few
// float32 ulps; 1e-6 (parameters are O(1)) and 1e-5 relative on the state
// leave room for float32 rounding on other builds.
constexpr double kTolerance = timm::test::kSameKernelsTolerance;
constexpr double kStateTolerance = 1e-5;

std::vector<OptimCase> make_cases() {
  std::vector<OptimCase> cases;
  cases.push_back(optim_case("laprop", "laprop", 1e-3, 0.05));
  cases.push_back(optim_case("lapropc", "lapropc", 1e-3, 0.5));
  cases.push_back(optim_case("claprop", "claprop", 1e-3, 0.05));
  // --opt-eps and --opt-betas.
  cases.push_back(optim_case("laprop eps+betas", "laprop", 3e-4, 0.1));
  cases.back().eps = 1e-8;
  cases.back().betas = std::vector<double>{0.8, 0.95};
  // --opt-kwargs: betas as a tuple, eps, caution and corrected decay together.
  cases.push_back(optim_case(
      "laprop kwargs", "laprop", 3e-4, 0.1,
      {{"betas", "(0.85,0.99)"}, {"eps", "1e-10"}, {"caution", "True"}, {"corrected_weight_decay", "True"}}));
  cases.push_back(optim_case("laprop layer-decay", "laprop", 1e-3, 0.05));
  cases.back().layer_decay = 0.8;
  // timm's ops one by one instead of the one-pass update.
  cases.push_back(optim_case("laprop foreach=False", "laprop", 1e-3, 0.05, {{"foreach", "False"}}));
  cases.push_back(optim_case("lapropc foreach=False", "lapropc", 1e-3, 0.5, {{"foreach", "False"}}));
  cases.push_back(optim_case("claprop foreach=False", "claprop", 1e-3, 0.05, {{"foreach", "False"}}));
  return cases;
}

timm::test::OptimOracle oracle(make_cases());  // runs timm on first use

}  // namespace

TEST_CASE("laprop and its variants match timm's LaProp") {
  oracle.expect_parity_each({"laprop", "lapropc", "claprop", "laprop eps+betas", "laprop kwargs", "laprop layer-decay"},
                            kTolerance, kStateTolerance);
}

TEST_CASE("laprop with foreach=False runs timm's ops one by one") {
  oracle.expect_parity_each({"laprop foreach=False", "lapropc foreach=False", "claprop foreach=False"}, kTolerance,
                            kStateTolerance);
}

TEST_CASE("laprop state survives save and load") { oracle.expect_round_trips({"laprop", "laprop kwargs"}); }

TEST_CASE("laprop rejects bad arguments") {
  timm::test::load_builtin_plugins();
  timm::test::ParityModel model;
  timm::OptimizerArgs args;
  args.opt = "laprop";
  args.kwargs = {{"amsgrad", "True"}};
  CHECK_THROWS_WITH_AS(timm::create_optimizer(model, {}, args), doctest::Contains("'laprop' has no argument 'amsgrad'"),
                       timm::UsageError);
  args.kwargs = {};
  args.betas = std::vector<double>{0.9};
  CHECK_THROWS_WITH_AS(timm::create_optimizer(model, {}, args), doctest::Contains("betas needs 2 values"),
                       timm::UsageError);
  args.betas = std::vector<double>{0.9, 1.5};
  CHECK_THROWS_WITH_AS(timm::create_optimizer(model, {}, args), doctest::Contains("invalid beta parameter at index 1"),
                       timm::UsageError);
  args.betas.reset();
  args.eps = -1.0;
  CHECK_THROWS_WITH_AS(timm::create_optimizer(model, {}, args), doctest::Contains("invalid epsilon"), timm::UsageError);
  args.eps.reset();
  // timm's _max_lr_snapshot: the corrected decay divides by the lr given.
  args.opt = "lapropc";
  args.lr = 0.0;
  CHECK_THROWS_WITH_AS(timm::create_optimizer(model, {}, args), doctest::Contains("requires a positive max lr"),
                       timm::UsageError);
  args.opt = "laprop";
  args.lr = -1e-3;
  CHECK_THROWS_WITH_AS(timm::create_optimizer(model, {}, args), doctest::Contains("invalid learning rate"),
                       timm::UsageError);
}

}  // namespace test_laprop
