// Parity of "lars", "larc", "nlars", "nlarc" with timm's Lars through
// create_optimizer_v2: 10 steps with weight-decay groups (the trust ratio only
// where there is decay, unless always_adapt), lr changes, a parameter without
// gradient on some steps; parameters and momentum buffers compared.
#include "optim_parity.hpp"
#include "test_support.hpp"
#include "timm/base/error.hpp"

#include <doctest/doctest.h>

namespace test_lars {

namespace {

using timm::test::state_case;
using timm::test::StateCase;

// Measured 0: timm's per-tensor CPU kernels in timm's order (kSameKernelsTolerance).
constexpr double kTolerance = timm::test::kSameKernelsTolerance;

std::vector<StateCase> make_cases() {
  std::vector<StateCase> cases;
  cases.push_back(state_case("lars", "lars", 1.0, 0.05));
  cases.push_back(state_case("lars always adapt", "lars", 0.5, 0.05,
                             {{"always_adapt", "True"}, {"trust_coeff", "0.02"}, {"dampening", "0.1"}}));
  cases.back().c.eps = 1e-3;
  cases.push_back(state_case("larc", "larc", 0.1, 0.05));
  cases.back().c.momentum = 0.8;
  cases.push_back(state_case("nlars", "nlars", 1.0, 0.05));
  cases.push_back(state_case("nlarc", "nlarc", 0.1, 0.1, {{"trust_coeff", "0.01"}}));
  cases.push_back(state_case("lars no momentum", "lars", 1.0, 0.05));
  cases.back().c.momentum = 0.0;
  return cases;
}

timm::test::StateOracle oracle(make_cases());

}  // namespace

TEST_CASE("lars and larc match timm") {
  oracle.expect_parity_each({"lars", "lars always adapt", "lars no momentum", "larc"}, kTolerance);
}

TEST_CASE("nlars and nlarc match timm") { oracle.expect_parity_each({"nlars", "nlarc"}, kTolerance); }

TEST_CASE("lars state survives save and load") { oracle.expect_round_trips({"lars", "nlarc"}); }

TEST_CASE("lars rejects bad arguments") {
  timm::test::load_builtin_plugins();
  timm::test::ParityModel model;
  timm::OptimizerArgs args;
  args.opt = "nlars";
  args.momentum = 0.0;
  CHECK_THROWS_WITH_AS(timm::create_optimizer(model, {}, args), doctest::Contains("Nesterov"), timm::UsageError);
  args.opt = "lars";
  args.kwargs = {{"max_grad_norm", "1.0"}};
  CHECK_THROWS_AS(timm::create_optimizer(model, {}, args), timm::UsageError);
}

}  // namespace test_lars
