// Parity of "novograd", "novogradw" and "novogradc" with timm's NvNovoGrad
// through create_optimizer_v2: 10 steps with weight-decay and layer-decay
// groups, lr changes, a parameter without gradient on some steps; the final
// parameters, the state (incl. the per-tensor second moment), the groups and
// the log line compared.
#include "optim_parity.hpp"
#include "test_support.hpp"
#include "timm/base/error.hpp"
#include "timm/optim/optimizer.hpp"

#include <map>
#include <string>
#include <utility>
#include <vector>

#include <doctest/doctest.h>

namespace test_novograd {

namespace {

using timm::test::optim_case;
using timm::test::OptimCase;

// timm's per-tensor ops in timm's order: float32 rounding only (parameters
// are O(1)).
constexpr double kTolerance = 1e-6;
// The moments relative to their largest value.
constexpr double kStateTolerance = 1e-5;

std::vector<OptimCase> make_cases() {
  std::vector<OptimCase> cases;
  // L2 decay added to the normalized gradient (the paper's).
  cases.push_back(optim_case("novograd", "novograd", 1e-2, 0.05));
  cases.push_back(optim_case("novogradw", "novogradw", 1e-2, 0.05));
  // lr² / max_lr scaled decay; a larger decay so that it shows.
  cases.push_back(optim_case("novogradc", "novogradc", 1e-2, 0.5));
  // corrected_weight_decay without decoupled_decay changes nothing in timm.
  cases.push_back(optim_case("novograd corrected L2", "novograd", 1e-2, 0.5, {{"corrected_weight_decay", "True"}}));
  cases.push_back(
      optim_case("novograd kwargs", "novograd", 3e-3, 0.1,
                 {{"amsgrad", "True"}, {"betas", "[0.8,0.99]"}, {"eps", "1e-6"}, {"grad_averaging", "True"}}));
  cases.push_back(optim_case("novogradw flags", "novogradw", 3e-3, 0.1));
  cases.back().eps = 1e-6;
  cases.back().betas = std::vector<double>{0.9, 0.999};
  cases.push_back(optim_case("novograd layer-decay", "novograd", 1e-2, 0.05));
  cases.back().layer_decay = 0.8;
  cases.push_back(optim_case("novogradc layer-decay", "novogradc", 1e-2, 0.5));
  cases.back().layer_decay = 0.8;
  return cases;
}

timm::test::OptimOracle oracle(make_cases());  // runs timm on first use

}  // namespace

TEST_CASE("novograd and its variants match timm's NvNovoGrad") {
  oracle.expect_parity_each({"novograd", "novogradw", "novogradc", "novograd corrected L2", "novograd kwargs",
                             "novogradw flags", "novograd layer-decay", "novogradc layer-decay"},
                            kTolerance, kStateTolerance);
}

// The parity cases above run the two passes (float32 CPU parameters, each
// smaller than a chunk); float64 parameters run timm's ops. One parameter over
// four chunks and a part, both ways, 5 steps: the float32 passes within
// float32 rounding of the float64 ops (measured 5.0e-7 to 1.2e-6).
TEST_CASE("novograd's chunked passes agree with its ops") {
  timm::test::load_builtin_plugins();
  using timm::test::one_pass_case;
  timm::test::expect_one_pass_near_float64_ops(
      {one_pass_case("novograd", 1e-2, 0.05), one_pass_case("novogradw", 1e-2, 0.05),
       one_pass_case("novogradc", 1e-2, 0.05),
       one_pass_case("novograd", 1e-2, 0.05, {{"amsgrad", "True"}, {"grad_averaging", "True"}})});
}

TEST_CASE("novograd state survives save and load") {
  oracle.expect_round_trips({"novograd", "novogradc", "novograd kwargs"});
}

TEST_CASE("novograd rejects bad arguments") {
  timm::test::load_builtin_plugins();
  timm::test::ParityModel model;
  timm::OptimizerArgs args;
  args.opt = "novograd";
  args.kwargs = {{"foreach", "True"}};  // NvNovoGrad takes no foreach
  CHECK_THROWS_WITH_AS(timm::create_optimizer(model, {}, args),
                       doctest::Contains("'novograd' has no argument 'foreach'"), timm::UsageError);
  args.kwargs = {{"betas", "(1.0,0.98)"}};
  CHECK_THROWS_WITH_AS(timm::create_optimizer(model, {}, args), doctest::Contains("invalid beta parameter at index 0"),
                       timm::UsageError);
  args.kwargs = {{"eps", "-1.0"}};
  CHECK_THROWS_WITH_AS(timm::create_optimizer(model, {}, args), doctest::Contains("invalid epsilon value"),
                       timm::UsageError);
  args.kwargs = {};
  args.betas = std::vector<double>{0.9, 0.98, 0.99};
  CHECK_THROWS_AS(timm::create_optimizer(model, {}, args), timm::UsageError);
  args.betas.reset();
  args.lr = -1e-3;
  CHECK_THROWS_WITH_AS(timm::create_optimizer(model, {}, args), doctest::Contains("invalid learning rate"),
                       timm::UsageError);
  args.opt = "novogradc";
  args.lr = 0.0;
  CHECK_THROWS_WITH_AS(timm::create_optimizer(model, {}, args), doctest::Contains("requires a positive max lr"),
                       timm::UsageError);
}

TEST_CASE("novograd's names take train.py's linear lr scaling") {
  timm::test::load_builtin_plugins();
  for (const char* name : {"novograd", "novogradw", "novogradc"}) {
    CAPTURE(name);
    CHECK(timm::optimizer_traits(name).lr_base_scale == timm::LrBaseScale::kLinear);
  }
}

}  // namespace test_novograd
