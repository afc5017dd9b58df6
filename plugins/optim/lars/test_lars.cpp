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

// foreach=False: timm's per-tensor CPU kernels in timm's order, measured 0
// (kSameKernelsTolerance). By default one pass per parameter after the same
// norms: float32 rounding of the same formula, measured 1.9e-6 (lars) and
// 3.8e-6 (nlars) after 10 steps at lr 1.0: 2^-19 and 2^-18, one float32 ulp
// of a parameter between 16 and 64.
constexpr double kTolerance = timm::test::kSameKernelsTolerance;
constexpr double kOnePassTolerance = 1e-5;

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
  // timm's ops one by one instead of the one-pass update.
  cases.push_back(state_case("lars foreach=False", "lars", 1.0, 0.05, {{"foreach", "False"}}));
  cases.push_back(
      state_case("nlarc foreach=False", "nlarc", 0.1, 0.1, {{"trust_coeff", "0.01"}, {"foreach", "False"}}));
  return cases;
}

timm::test::StateOracle oracle(make_cases());

}  // namespace

TEST_CASE("lars and larc match timm") {
  oracle.expect_parity_each({"lars", "lars always adapt", "lars no momentum", "larc"}, kOnePassTolerance);
}

TEST_CASE("nlars and nlarc match timm") { oracle.expect_parity_each({"nlars", "nlarc"}, kOnePassTolerance); }

TEST_CASE("lars with foreach=False runs timm's ops one by one") {
  oracle.expect_parity_each({"lars foreach=False", "nlarc foreach=False"}, kTolerance);
}

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
