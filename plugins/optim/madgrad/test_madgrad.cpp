// Parity of "madgrad" / "madgradw" with timm's MADGRAD through
// create_optimizer_v2: 10 steps with weight-decay groups, lr changes and a
// parameter without gradient on some steps (its own step count);
// parameters and state compared.
#include "optim_parity.hpp"
#include "test_support.hpp"
#include "timm/base/error.hpp"

#include <doctest/doctest.h>

namespace test_madgrad {

namespace {

using timm::test::state_case;
using timm::test::StateCase;

// Measured 0: timm's per-tensor CPU kernels in timm's order (kSameKernelsTolerance).
constexpr double kTolerance = timm::test::kSameKernelsTolerance;

std::vector<StateCase> make_cases() {
  std::vector<StateCase> cases;
  cases.push_back(state_case("madgrad", "madgrad", 1e-2, 0.05));
  cases.push_back(state_case("madgrad no momentum", "madgrad", 1e-2, 0.05));
  cases.back().c.momentum = 0.0;
  cases.back().c.eps = 1e-4;
  cases.push_back(state_case("madgradw", "madgradw", 3e-3, 0.1));
  cases.back().c.momentum = 0.5;
  cases.push_back(state_case("madgrad kwargs", "madgrad", 3e-3, 0.1, {{"decoupled_decay", "True"}, {"eps", "1e-3"}}));
  return cases;
}

timm::test::StateOracle oracle(make_cases());

}  // namespace

TEST_CASE("madgrad matches timm") {
  oracle.expect_parity_each({"madgrad", "madgrad no momentum", "madgradw", "madgrad kwargs"}, kTolerance);
}

TEST_CASE("madgrad state survives save and load") { oracle.expect_round_trips({"madgrad", "madgrad no momentum"}); }

TEST_CASE("madgrad rejects bad arguments") {
  timm::test::load_builtin_plugins();
  timm::test::ParityModel model;
  timm::OptimizerArgs args;
  args.opt = "madgrad";
  args.momentum = 1.0;
  CHECK_THROWS_WITH_AS(timm::create_optimizer(model, {}, args), doctest::Contains("must be in [0, 1)"),
                       timm::UsageError);
}

}  // namespace test_madgrad
