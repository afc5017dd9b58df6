// Parity of "adamp", "cadamp", "sgdp" and "csgdp" with timm's AdamP / SGDP
// through create_optimizer_v2: 10 steps with weight-decay and layer-decay
// groups, lr changes, a parameter without gradient on some steps; the
// final parameters, the state, the groups and the log line compared. The
// gradients are random, so some weights take the projected branch and some
// not (cosine against delta / sqrt(dim)); both are exercised.
#include "optim_parity.hpp"
#include "test_support.hpp"
#include "timm/base/error.hpp"

#include <doctest/doctest.h>

namespace test_adamp {

namespace {

using timm::test::optim_case;
using timm::test::OptimCase;

// The same ATen ops in timm's order: a few float32 ulps.
constexpr double kTolerance = 1e-6;
constexpr double kStateTolerance = 1e-5;

std::vector<OptimCase> make_cases() {
  std::vector<OptimCase> cases;
  cases.push_back(optim_case("adamp", "adamp", 1e-2, 0.05));
  cases.push_back(optim_case("cadamp", "cadamp", 1e-2, 0.05));
  // A large delta: every weight takes the projection.
  cases.push_back(optim_case("adamp delta+wd_ratio", "adamp", 1e-2, 0.1, {{"delta", "10.0"}, {"wd_ratio", "0.5"}}));
  cases.push_back(optim_case("adamp no nesterov", "adamp", 1e-2, 0.05, {{"nesterov", "False"}, {"delta", "10.0"}}));
  cases.back().betas = std::vector<double>{0.8, 0.99};
  cases.push_back(optim_case("cadamp projected", "cadamp", 1e-2, 0.05, {{"delta", "10.0"}}));
  cases.push_back(optim_case("adamp layer-decay", "adamp", 1e-2, 0.05));
  cases.back().layer_decay = 0.7;
  cases.push_back(optim_case("sgdp", "sgdp", 0.1, 1e-4));
  cases.push_back(optim_case("csgdp", "csgdp", 0.1, 1e-4));
  cases.push_back(optim_case("sgdp projected", "sgdp", 0.1, 1e-3, {{"delta", "10.0"}}));
  cases.back().momentum = 0.8;
  cases.push_back(optim_case("csgdp projected", "csgdp", 0.1, 1e-3,
                             {{"delta", "10.0"}, {"dampening", "0.1"}, {"nesterov", "False"}}));
  cases.push_back(optim_case("sgdp layer-decay", "sgdp", 0.1, 1e-4));
  cases.back().layer_decay = 0.5;
  return cases;
}

timm::test::OptimOracle oracle(make_cases());  // runs timm on first use

}  // namespace

TEST_CASE("adamp and cadamp match timm's AdamP") {
  oracle.expect_parity_each(
      {"adamp", "cadamp", "adamp delta+wd_ratio", "adamp no nesterov", "cadamp projected", "adamp layer-decay"},
      kTolerance, kStateTolerance);
}

TEST_CASE("sgdp and csgdp match timm's SGDP") {
  oracle.expect_parity_each({"sgdp", "csgdp", "sgdp projected", "csgdp projected", "sgdp layer-decay"}, kTolerance,
                            kStateTolerance);
}

TEST_CASE("adamp and sgdp state survives save and load") {
  oracle.expect_round_trips({"cadamp projected", "csgdp projected"});
}

TEST_CASE("sgdp drops betas as timm does, and rejects unknown arguments") {
  timm::test::load_builtin_plugins();
  timm::test::ParityModel model;
  timm::OptimizerArgs args;
  args.opt = "sgdp";
  args.betas = std::vector<double>{0.9, 0.999};
  CHECK_NOTHROW(timm::create_optimizer(model, {}, args));
  args.betas.reset();
  args.kwargs = {{"amsgrad", "True"}};
  CHECK_THROWS_WITH_AS(timm::create_optimizer(model, {}, args), doctest::Contains("'sgdp' has no argument 'amsgrad'"),
                       timm::UsageError);
}

}  // namespace test_adamp
