// Parity of "adamwlegacy", "cadamw", "adamc" and "cadamc" with timm's
// create_optimizer_v2 (timm's AdamWLegacy, parameters and state): 10 steps
// with weight-decay groups, lr changes between steps and a parameter without
// gradient on some steps. ("adamw", torch's AdamW, is tested with Adam.)
// The one-pass loops (float32 CPU parameters, the default) and timm's ops
// (foreach=False, AMSGrad, clipping) both.
#include "optim_parity.hpp"
#include "test_support.hpp"
#include "timm/base/error.hpp"

#include <doctest/doctest.h>

namespace test_adamw {

namespace {

using timm::test::optim_case;
using timm::test::OptimCase;

// The same ATen ops in timm's order, or loops with ATen's formulas per
// element: float32 rounding over 10 steps.
constexpr double kTolerance = 1e-6;
// AdamWLegacy runs timm's ops in timm's order: the moments agree to float32
// rounding relative to their largest value.
constexpr double kStateTolerance = 1e-5;

std::vector<OptimCase> make_cases() {
  std::vector<OptimCase> cases;
  // timm's AdamWLegacy, and the names timm binds to it.
  for (const char* name : {"adamwlegacy", "cadamw"}) cases.push_back(optim_case(name, name, 1e-2, 0.05));
  // lr² / max_lr scaled decay; a larger decay so that it shows.
  for (const char* name : {"adamc", "cadamc"}) cases.push_back(optim_case(name, name, 1e-2, 0.5));
  cases.push_back(optim_case("adamwlegacy kwargs", "adamwlegacy", 3e-3, 0.1,
                             {{"amsgrad", "True"},
                              {"betas", "[0.8,0.99]"},
                              {"eps", "1e-6"},
                              {"maximize", "True"},
                              {"clipping_threshold", "1.0"}}));
  cases.push_back(optim_case("cadamw flags", "cadamw", 3e-3, 0.1));
  cases.back().eps = 1e-6;
  cases.back().betas = std::vector<double>{0.8, 0.99};
  // timm takes its multi-tensor path: the same values.
  cases.push_back(optim_case("adamwlegacy foreach", "adamwlegacy", 1e-2, 0.05, {{"foreach", "True"}}));
  cases.push_back(optim_case("adamwlegacy layer-decay", "adamwlegacy", 1e-2, 0.05));
  cases.back().layer_decay = 0.8;
  cases.push_back(optim_case("adamwlegacy maximize", "adamwlegacy", 1e-2, 0.05, {{"maximize", "True"}}));
  cases.push_back(optim_case("cadamc foreach=False", "cadamc", 1e-2, 0.5, {{"foreach", "False"}}));
  return cases;
}

timm::test::OptimOracle oracle(make_cases());  // runs timm on first use

}  // namespace

TEST_CASE("adamwlegacy and the names timm binds to it match timm's AdamWLegacy") {
  oracle.expect_parity_each({"adamwlegacy", "cadamw", "adamc", "cadamc", "adamwlegacy kwargs", "cadamw flags",
                             "adamwlegacy foreach", "adamwlegacy layer-decay", "adamwlegacy maximize"},
                            kTolerance, kStateTolerance);
}

TEST_CASE("adamwlegacy with foreach=False runs timm's ops one by one") {
  oracle.expect_parity_each({"cadamc foreach=False"}, kTolerance, kStateTolerance);
}

// The parity cases' parameters fit in one of the loops' ranges; this one
// spans several (caution counts over all of them): the float32 loops against
// float64 ops, 5 steps, the same gradients. Measured 1.3e-6 to 1.4e-6.
TEST_CASE("adamwlegacy's loops agree with its ops over several ranges") {
  timm::test::load_builtin_plugins();
  std::vector<timm::OptimizerArgs> cases;
  for (const char* opt : {"adamwlegacy", "cadamw", "adamc", "cadamc"}) {
    cases.push_back(timm::test::one_pass_case(opt, 1e-2, 0.05));
  }
  timm::test::expect_one_pass_near_float64_ops(cases);
}

TEST_CASE("adamwlegacy state survives save and load") {
  oracle.expect_round_trips({"adamwlegacy", "cadamc", "adamwlegacy kwargs"});
}

TEST_CASE("adamwlegacy rejects bad arguments") {
  timm::test::load_builtin_plugins();
  timm::test::ParityModel model;
  timm::OptimizerArgs args;
  args.opt = "adamwlegacy";
  args.kwargs = {{"nesterov", "True"}};
  CHECK_THROWS_WITH_AS(timm::create_optimizer(model, {}, args),
                       doctest::Contains("'adamwlegacy' has no argument 'nesterov'"), timm::UsageError);
  args.kwargs = {{"betas", "(0.9,1.0)"}};
  CHECK_THROWS_WITH_AS(timm::create_optimizer(model, {}, args), doctest::Contains("invalid beta parameter at index 1"),
                       timm::UsageError);
  args.kwargs = {{"eps", "-1e-8"}};
  CHECK_THROWS_WITH_AS(timm::create_optimizer(model, {}, args), doctest::Contains("invalid epsilon value"),
                       timm::UsageError);
  args.kwargs = {{"capturable", "True"}};
  CHECK_THROWS_AS(timm::create_optimizer(model, {}, args), timm::UsageError);
  args.kwargs = {};
  args.betas = std::vector<double>{0.9};
  CHECK_THROWS_AS(timm::create_optimizer(model, {}, args), timm::UsageError);
  args.betas.reset();
  args.lr = -1e-3;
  CHECK_THROWS_WITH_AS(timm::create_optimizer(model, {}, args), doctest::Contains("invalid learning rate"),
                       timm::UsageError);
  args.opt = "cadamc";
  args.lr = 0.0;
  CHECK_THROWS_WITH_AS(timm::create_optimizer(model, {}, args), doctest::Contains("requires a positive max lr"),
                       timm::UsageError);
}

TEST_CASE("adamwlegacy's names take the square-root lr scaling, as train.py") {
  timm::test::load_builtin_plugins();
  for (const char* name : {"adamwlegacy", "cadamw", "adamc", "cadamc"}) {
    CAPTURE(name);
    CHECK(timm::optimizer_traits(name).lr_base_scale == timm::LrBaseScale::kSqrt);
  }
}

}  // namespace test_adamw
