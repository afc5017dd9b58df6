// Parity of "madgrad" / "madgradw" with timm's MADGRAD through
// create_optimizer_v2: 10 steps with weight-decay groups, lr changes and a
// parameter without gradient on some steps (its own step count);
// parameters and state compared.
#include <doctest/doctest.h>

#include "optim_parity_more.hpp"
#include "test_support.hpp"
#include "timm/core/error.hpp"

namespace {

using timm::test::MoreCase;
using timm::test::OptimCase;

// Measured 0: the same CPU kernels as timm's per-tensor path (the foreach
// ops run them tensor by tensor on the CPU), in the same order. 1e-6 leaves
// room for float32 rounding on other builds; parameters are O(1).
constexpr double kTolerance = 1e-6;

MoreCase make(const std::string& name, const std::string& opt, double lr, double wd,
              std::map<std::string, std::string> kwargs = {}) {
  MoreCase m{OptimCase(name, opt, lr, wd)};
  m.c.kwargs = std::move(kwargs);
  return m;
}

std::vector<MoreCase> make_cases() {
  std::vector<MoreCase> cases;
  cases.push_back(make("madgrad", "madgrad", 1e-2, 0.05));
  cases.push_back(make("madgrad no momentum", "madgrad", 1e-2, 0.05));
  cases.back().c.momentum = 0.0;
  cases.back().c.eps = 1e-4;
  cases.push_back(make("madgradw", "madgradw", 3e-3, 0.1));
  cases.back().c.momentum = 0.5;
  cases.push_back(make("madgrad kwargs", "madgrad", 3e-3, 0.1, {{"decoupled_decay", "True"}, {"eps", "1e-3"}}));
  return cases;
}

timm::test::MoreOracle oracle(make_cases());

}  // namespace

TEST_CASE("madgrad matches timm") {
  oracle.expect_parity("madgrad", kTolerance);
  oracle.expect_parity("madgrad no momentum", kTolerance);
  oracle.expect_parity("madgradw", kTolerance);
  oracle.expect_parity("madgrad kwargs", kTolerance);
}

TEST_CASE("madgrad state survives save and load") {
  timm::test::load_builtin_plugins();
  for (const char* name : {"madgrad", "madgrad no momentum"}) {
    const double diff = timm::test::save_load_round_trip_more(oracle.get(name));
    MESSAGE(std::string(name) << " resumed vs uninterrupted: max diff = " << diff);
    CHECK(diff == 0.0);
  }
}

TEST_CASE("madgrad rejects bad arguments") {
  timm::test::load_builtin_plugins();
  timm::test::ParityModel model;
  timm::OptimizerArgs args;
  args.opt = "madgrad";
  args.momentum = 1.0;
  CHECK_THROWS_WITH_AS(timm::create_optimizer(model, {}, args), doctest::Contains("must be in [0, 1)"),
                       timm::UsageError);
}
