// Parity of "rmsprop" (torch.optim.RMSprop as timm binds it) and "rmsproptf" /
// "rmsproptfw" (timm's RMSpropTF) with timm's create_optimizer_v2: 10 steps
// with weight-decay groups, lr changes between steps and a parameter without
// gradient on some steps; parameters and optimizer state compared. Without
// centered, the one-pass loops (float32 CPU parameters, the default) and the
// ops (foreach=False) both.
#include "optim_parity.hpp"
#include "test_support.hpp"
#include "timm/base/error.hpp"

#include <doctest/doctest.h>

namespace test_rmsprop {

namespace {

using timm::test::state_case;
using timm::test::StateCase;

// The ops: timm's per-tensor CPU kernels in timm's order, measured 0; the
// loops: ATen's formulas per element, within float32 rounding of them.
constexpr double kTolerance = timm::test::kSameKernelsTolerance;

std::vector<StateCase> make_cases() {
  std::vector<StateCase> cases;
  cases.push_back(state_case("rmsprop", "rmsprop", 1e-2, 0.05));
  cases.push_back(state_case("rmsprop centered", "rmsprop", 3e-3, 0.1, {{"alpha", "0.99"}, {"centered", "True"}}));
  cases.back().c.eps = 1e-6;
  cases.back().c.momentum = 0.0;
  cases.push_back(state_case("rmsproptf", "rmsproptf", 1e-2, 0.05));
  cases.push_back(state_case("rmsproptf decoupled centered", "rmsproptf", 1e-2, 0.05,
                             {{"decoupled_decay", "True"}, {"centered", "True"}}));
  cases.back().c.eps = 1e-3;
  cases.push_back(state_case("rmsproptf caution", "RMSpropTF", 1e-2, 0.0,
                             {{"lr_in_momentum", "False"}, {"caution", "True"}, {"alpha", "0.5"}}));
  cases.back().c.momentum = 0.8;
  cases.push_back(state_case("rmsproptf no momentum", "rmsproptf", 1e-2, 0.05));
  cases.back().c.momentum = 0.0;
  cases.push_back(state_case("rmsproptfw corrected", "rmsproptfw", 1e-2, 0.05, {{"corrected_weight_decay", "True"}}));
  cases.push_back(state_case("rmsproptfc", "rmsproptfc", 1e-2, 0.05));
  cases.push_back(state_case("crmsproptf", "crmsproptf", 1e-2, 0.05));
  cases.push_back(state_case("rmsproptfc alpha kwarg", "rmsproptfc", 1e-2, 0.05, {{"alpha", "0.95"}}));
  cases.push_back(state_case("rmsprop no momentum", "rmsprop", 1e-2, 0.05));
  cases.back().c.momentum = 0.0;
  cases.push_back(state_case("rmsprop foreach=False", "rmsprop", 1e-2, 0.05, {{"foreach", "False"}}));
  cases.push_back(state_case("crmsproptf foreach=False", "crmsproptf", 1e-2, 0.05, {{"foreach", "False"}}));
  return cases;
}

timm::test::StateOracle oracle(make_cases());

}  // namespace

TEST_CASE("rmsprop matches timm") {
  oracle.expect_parity_each({"rmsprop", "rmsprop centered", "rmsprop no momentum"}, kTolerance);
}

TEST_CASE("rmsprop and rmsproptf with foreach=False run the ops one by one") {
  oracle.expect_parity_each({"rmsprop foreach=False", "crmsproptf foreach=False"}, kTolerance);
}

// The parity cases' parameters fit in one of the loops' ranges; this one
// spans several (caution counts over all of them): the float32 loops against
// float64 ops, 5 steps, the same gradients. Measured 4.9e-7 to 1.3e-6.
TEST_CASE("rmsprop's loops agree with its ops over several ranges") {
  timm::test::load_builtin_plugins();
  using timm::test::one_pass_case;
  timm::test::expect_one_pass_near_float64_ops(
      {one_pass_case("rmsprop", 1e-2, 0.05), one_pass_case("rmsproptf", 1e-2, 0.05),
       one_pass_case("rmsproptfw", 1e-2, 0.05), one_pass_case("crmsproptf", 1e-2, 0.05),
       one_pass_case("rmsproptf", 1e-2, 0.05, {{"lr_in_momentum", "False"}, {"caution", "True"}})});
}

TEST_CASE("rmsproptf matches timm") {
  oracle.expect_parity("rmsproptf", kTolerance);
  oracle.expect_parity("rmsproptf decoupled centered", kTolerance);
  oracle.expect_parity("rmsproptf caution", kTolerance);
  oracle.expect_parity("rmsproptf no momentum", kTolerance);
  oracle.expect_parity("rmsproptfw corrected", kTolerance);
}

TEST_CASE("rmsproptfc and crmsproptf match timm") {
  oracle.expect_parity_each({"rmsproptfc", "crmsproptf", "rmsproptfc alpha kwarg"}, kTolerance);
}

TEST_CASE("rmsprop state survives save and load") {
  oracle.expect_round_trips({"rmsprop centered", "rmsproptf", "rmsproptf decoupled centered"});
}

TEST_CASE("rmsprop rejects bad arguments") {
  timm::test::load_builtin_plugins();
  timm::test::ParityModel model;
  timm::OptimizerArgs args;
  args.opt = "rmsproptf";
  args.kwargs = {{"nesterov", "True"}};
  CHECK_THROWS_WITH_AS(timm::create_optimizer(model, {}, args), doctest::Contains("has no argument 'nesterov'"),
                       timm::UsageError);
  args.kwargs = {{"alpha", "-1"}};
  CHECK_THROWS_AS(timm::create_optimizer(model, {}, args), timm::UsageError);
  args.kwargs = {};
  args.momentum = -0.5;
  CHECK_THROWS_AS(timm::create_optimizer(model, {}, args), timm::UsageError);
}

}  // namespace test_rmsprop
