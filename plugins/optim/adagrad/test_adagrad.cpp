// Parity of "adagrad", "adadelta" and "adamax" with torch.optim's classes as
// timm's create_optimizer_v2 binds them: 10 steps with weight-decay and
// layer-decay groups, lr changes, a parameter without gradient on some
// steps; the final parameters, the state, the groups and the log line
// compared. Adadelta and Adamax: the one-pass loops (float32 CPU
// parameters, the default) and torch's ops (foreach=False) both.
#include "optim_parity.hpp"
#include "test_support.hpp"
#include "timm/base/error.hpp"

#include <doctest/doctest.h>

namespace test_adagrad {

namespace {

using timm::test::optim_case;
using timm::test::OptimCase;

// torch's single-tensor CPU kernels in torch's order, or loops with ATen's
// formulas per element (within float32 rounding).
constexpr double kTolerance = timm::test::kSameKernelsTolerance;
constexpr double kStateTolerance = 1e-5;

std::vector<OptimCase> make_cases() {
  std::vector<OptimCase> cases;
  cases.push_back(optim_case("adagrad", "adagrad", 1e-2, 0.05));
  cases.push_back(optim_case("adagrad kwargs", "adagrad", 1e-2, 0.05,
                             {{"lr_decay", "0.1"}, {"initial_accumulator_value", "0.5"}, {"eps", "1e-6"}}));
  cases.push_back(optim_case("adagrad --opt-eps", "adagrad", 3e-2, 0.0));
  cases.back().eps = 1e-3;
  cases.back().betas = std::vector<double>{0.8, 0.9};  // dropped, as timm (has_betas False)
  cases.push_back(optim_case("adadelta", "adadelta", 1.0, 0.05));
  cases.push_back(optim_case("adadelta kwargs", "adadelta", 0.5, 0.1, {{"rho", "0.95"}}));
  cases.back().eps = 1e-4;
  cases.push_back(optim_case("adamax", "adamax", 2e-3, 0.05));
  cases.push_back(optim_case("adamax betas eps", "adamax", 2e-3, 0.05));
  cases.back().betas = std::vector<double>{0.8, 0.99};
  cases.back().eps = 1e-5;
  cases.push_back(optim_case("adamax kwargs betas", "adamax", 1e-3, 0.0, {{"betas", "(0.5, 0.9)"}}));
  cases.push_back(optim_case("adagrad layer-decay", "adagrad", 1e-2, 0.05));
  cases.back().layer_decay = 0.8;
  // Ours run torch's fused CPU kernel unless fused=False (the per-tensor ops).
  cases.push_back(optim_case("adagrad fused=False", "adagrad", 1e-2, 0.05, {{"fused", "False"}, {"lr_decay", "0.1"}}));
  cases.push_back(optim_case("adagrad fused=True", "adagrad", 1e-2, 0.05, {{"fused", "True"}}));
  cases.push_back(optim_case("adamax layer-decay", "adamax", 2e-3, 0.05));
  cases.back().layer_decay = 0.7;
  cases.push_back(optim_case("adadelta foreach=False", "adadelta", 1.0, 0.05, {{"foreach", "False"}}));
  cases.push_back(optim_case("adamax foreach=False", "adamax", 2e-3, 0.05, {{"foreach", "False"}}));
  return cases;
}

timm::test::OptimOracle oracle(make_cases());  // runs timm on first use

}  // namespace

TEST_CASE("adagrad matches torch.optim.Adagrad through timm") {
  oracle.expect_parity_each({"adagrad", "adagrad kwargs", "adagrad --opt-eps", "adagrad layer-decay"}, kTolerance,
                            kStateTolerance);
}

TEST_CASE("adagrad runs torch's per-tensor ops with fused=False, its fused kernel by default or with True") {
  oracle.expect_parity_each({"adagrad fused=False", "adagrad fused=True"}, kTolerance, kStateTolerance);
}

TEST_CASE("adadelta and adamax with foreach=False run torch's ops one by one") {
  oracle.expect_parity_each({"adadelta foreach=False", "adamax foreach=False"}, kTolerance, kStateTolerance);
}

// The parity cases' parameters fit in one of the loops' ranges; this one
// spans several: the float32 loops against float64 ops, 5 steps, the same
// gradients. Measured 5.4e-7 and 6.8e-7.
TEST_CASE("adadelta's and adamax's loops agree with their ops over several ranges") {
  timm::test::load_builtin_plugins();
  using timm::test::one_pass_case;
  timm::test::expect_one_pass_near_float64_ops(
      {one_pass_case("adadelta", 1.0, 0.05), one_pass_case("adamax", 2e-3, 0.05)});
}

TEST_CASE("adadelta matches torch.optim.Adadelta through timm") {
  oracle.expect_parity_each({"adadelta", "adadelta kwargs"}, kTolerance, kStateTolerance);
}

TEST_CASE("adamax matches torch.optim.Adamax through timm") {
  oracle.expect_parity_each({"adamax", "adamax betas eps", "adamax kwargs betas", "adamax layer-decay"}, kTolerance,
                            kStateTolerance);
}

TEST_CASE("adagrad, adadelta and adamax state survives save and load") {
  oracle.expect_round_trips({"adagrad kwargs", "adadelta", "adamax betas eps"});
}

TEST_CASE("adagrad, adadelta and adamax reject bad arguments") {
  timm::test::load_builtin_plugins();
  timm::test::ParityModel model;
  timm::OptimizerArgs args;
  args.opt = "adagrad";
  args.kwargs = {{"lr_decay", "-0.1"}};
  CHECK_THROWS_WITH_AS(timm::create_optimizer(model, {}, args), doctest::Contains("invalid lr_decay value -0.1"),
                       timm::UsageError);
  args.kwargs = {{"rho", "0.9"}};
  CHECK_THROWS_WITH_AS(timm::create_optimizer(model, {}, args), doctest::Contains("'rho'"), timm::UsageError);
  args.kwargs = {{"maximize", "True"}};
  CHECK_THROWS_WITH_AS(timm::create_optimizer(model, {}, args), doctest::Contains("maximize=True"), timm::UsageError);
  args.opt = "adadelta";
  args.kwargs = {{"rho", "1.5"}};
  CHECK_THROWS_WITH_AS(timm::create_optimizer(model, {}, args), doctest::Contains("invalid rho value 1.5"),
                       timm::UsageError);
  args.opt = "adamax";
  args.kwargs = {};
  args.betas = std::vector<double>{0.9, 1.0};
  CHECK_THROWS_AS(timm::create_optimizer(model, {}, args), timm::UsageError);
  args.betas.reset();
  args.eps = -1.0;
  CHECK_THROWS_WITH_AS(timm::create_optimizer(model, {}, args), doctest::Contains("invalid epsilon"), timm::UsageError);
}

}  // namespace test_adagrad
