// Parity of "madgrad" / "madgradw" with timm's MADGRAD through
// create_optimizer_v2: 10 steps with weight-decay groups, lr changes and a
// parameter without gradient on some steps (its own step count);
// parameters and state compared. The one pass over several chunks against
// the ops.
#include "optim_parity.hpp"
#include "test_support.hpp"
#include "timm/base/error.hpp"

#include <doctest/doctest.h>

namespace test_madgrad {

namespace {

using timm::test::state_case;
using timm::test::StateCase;

// timm's update in one pass per chunk, the cube root by timm's op (torch's
// pow): measured 2.4e-7 on the parameters, 6e-8 on the state (a few
// float32 ulps); kSameKernelsTolerance leaves room for other builds.
constexpr double kTolerance = timm::test::kSameKernelsTolerance;

std::vector<StateCase> make_cases() {
  std::vector<StateCase> cases;
  cases.push_back(state_case("madgrad", "madgrad", 1e-2, 0.05));
  cases.push_back(state_case("madgrad no momentum", "madgrad", 1e-2, 0.05));
  cases.back().c.momentum = 0.0;
  cases.back().c.eps = 1e-4;
  cases.push_back(state_case("madgradw", "madgradw", 3e-3, 0.1));
  cases.back().c.momentum = 0.5;
  cases.push_back(state_case("madgradw no momentum", "madgradw", 3e-3, 0.1));
  cases.back().c.momentum = 0.0;
  cases.push_back(state_case("madgrad kwargs", "madgrad", 3e-3, 0.1, {{"decoupled_decay", "True"}, {"eps", "1e-3"}}));
  return cases;
}

timm::test::StateOracle oracle(make_cases());

}  // namespace

TEST_CASE("madgrad matches timm") {
  oracle.expect_parity_each({"madgrad", "madgrad no momentum", "madgradw", "madgradw no momentum", "madgrad kwargs"},
                            kTolerance);
}

// The parity cases above run the one pass (float32 CPU parameters, each
// smaller than a chunk); float64 parameters run the foreach ops. One
// parameter over four chunks and a part, both ways, 5 steps: the float32 pass
// within float32 rounding of the float64 ops (measured 1.4e-6 at most for
// parameters up to 4.5; the decay alone moves p by 5e-4 of itself per step).
TEST_CASE("madgrad's chunked one pass agrees with its foreach ops") {
  timm::test::load_builtin_plugins();
  std::vector<timm::OptimizerArgs> cases;
  for (const char* opt : {"madgrad", "madgradw"}) {
    for (const double momentum : {0.9, 0.0}) {
      cases.push_back(timm::test::one_pass_case(opt, 1e-2, 0.05));
      cases.back().momentum = momentum;
    }
  }
  timm::test::expect_one_pass_near_float64_ops(cases);
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
