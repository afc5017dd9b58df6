// Parity of "adamw" with timm's create_optimizer_v2 (torch.optim.AdamW): 10
// steps with weight-decay groups, lr changes between steps and a parameter
// without gradient on some steps.
#include "optim_parity.hpp"
#include "test_support.hpp"
#include "timm/base/error.hpp"

#include <doctest/doctest.h>

namespace test_adamw {

namespace {

using timm::test::OptimCase;

// torch's Python AdamW uses lerp for the first moment where LibTorch uses
// mul/add: a few float32 ulps over 10 steps.
constexpr double kTolerance = 1e-6;

std::vector<OptimCase> make_cases() {
  std::vector<OptimCase> cases{OptimCase("adamw", "adamw", 1e-2, 0.05)};
  cases.emplace_back("opt-eps+opt-betas", "adamw", 1e-2, 0.05);
  cases.back().eps = 1e-6;
  cases.back().betas = std::vector<double>{0.8, 0.99};
  cases.emplace_back("amsgrad", "adamw", 3e-3, 0.1);
  cases.back().kwargs = {{"amsgrad", "True"}};
  cases.emplace_back("kwargs betas+eps", "adamw", 3e-3, 0.1);
  cases.back().kwargs = {{"betas", "(0.5,0.9)"}, {"eps", "1e-3"}};
  return cases;
}

timm::test::OptimOracle oracle(make_cases());  // runs timm on first use

void check_parity(const std::string& name) { oracle.expect_parity(name, kTolerance); }

}  // namespace

TEST_CASE("adamw matches timm") { check_parity("adamw"); }

TEST_CASE("adamw with --opt-eps, --opt-betas and --opt-kwargs matches timm") {
  check_parity("opt-eps+opt-betas");
  check_parity("amsgrad");
  check_parity("kwargs betas+eps");
}

TEST_CASE("adamw state survives save and load") { oracle.expect_round_trips({"adamw"}); }

TEST_CASE("adamw rejects bad arguments") {
  timm::test::load_builtin_plugins();
  timm::test::ParityModel model;
  timm::OptimizerArgs args;
  args.opt = "adamw";
  args.kwargs = {{"nesterov", "True"}};
  CHECK_THROWS_WITH_AS(timm::create_optimizer(model, {}, args), doctest::Contains("'adamw' has no argument 'nesterov'"),
                       timm::UsageError);
  args.kwargs = {};
  args.betas = std::vector<double>{0.9};
  CHECK_THROWS_AS(timm::create_optimizer(model, {}, args), timm::UsageError);
  args.betas = std::vector<double>{0.9, 0.999};
  args.kwargs = {{"betas", "(0.9,0.99)"}};
  CHECK_THROWS_AS(timm::create_optimizer(model, {}, args), timm::UsageError);
}

}  // namespace test_adamw
