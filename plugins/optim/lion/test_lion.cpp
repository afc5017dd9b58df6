// Parity of "lion", "clion", "lionc" and "clionc" with timm's Lion through
// create_optimizer_v2: 10 steps with weight-decay and layer-decay groups, lr
// changes, a parameter without gradient on some steps; the final
// parameters, the state, the groups and the log line compared.
#include "optim_parity.hpp"
#include "test_support.hpp"
#include "timm/base/error.hpp"

#include <doctest/doctest.h>

namespace test_lion {

namespace {

using timm::test::optim_case;
using timm::test::OptimCase;

// The same ATen ops in timm's order; the update is a sign, so any
// difference in the momentum would show as a whole lr step.
constexpr double kTolerance = 1e-6;
constexpr double kStateTolerance = 1e-5;

std::vector<OptimCase> make_cases() {
  std::vector<OptimCase> cases;
  cases.push_back(optim_case("lion", "lion", 1e-3, 0.1));
  cases.push_back(optim_case("clion", "clion", 1e-3, 0.1));
  cases.push_back(optim_case("lionc", "lionc", 1e-3, 1.0));
  cases.push_back(optim_case("clionc", "clionc", 1e-3, 1.0));
  // --opt-eps is dropped (timm: has_eps False); betas from the flag.
  cases.push_back(optim_case("lion eps+betas", "lion", 3e-4, 0.05));
  cases.back().eps = 1e-3;
  cases.back().betas = std::vector<double>{0.95, 0.98};
  cases.push_back(optim_case("lion kwargs betas", "lion", 3e-4, 0.05, {{"betas", "(0.9,0.999)"}}));
  cases.push_back(optim_case("lion layer-decay", "lion", 1e-3, 0.1));
  cases.back().layer_decay = 0.8;
  return cases;
}

timm::test::OptimOracle oracle(make_cases());  // runs timm on first use

}  // namespace

TEST_CASE("lion and its variants match timm's Lion") {
  oracle.expect_parity_each(
      {"lion", "clion", "lionc", "clionc", "lion eps+betas", "lion kwargs betas", "lion layer-decay"}, kTolerance,
      kStateTolerance);
}

TEST_CASE("lion state survives save and load") { oracle.expect_round_trips({"lion", "clionc"}); }

TEST_CASE("lion rejects bad arguments") {
  timm::test::load_builtin_plugins();
  timm::test::ParityModel model;
  timm::OptimizerArgs args;
  args.opt = "lion";
  args.kwargs = {{"amsgrad", "True"}};
  CHECK_THROWS_AS(timm::create_optimizer(model, {}, args), timm::UsageError);
  args.kwargs = {};
  args.betas = std::vector<double>{0.9};
  CHECK_THROWS_AS(timm::create_optimizer(model, {}, args), timm::UsageError);
}

}  // namespace test_lion
