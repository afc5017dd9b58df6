// Parity of "lars", "larc", "nlars", "nlarc" with timm's Lars through
// create_optimizer_v2: 10 steps with weight-decay groups (the trust ratio only
// where there is decay, unless always_adapt), lr changes, a parameter without
// gradient on some steps; parameters and momentum buffers compared.
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
  cases.push_back(make("lars", "lars", 1.0, 0.05));
  cases.push_back(make("lars always adapt", "lars", 0.5, 0.05,
                       {{"always_adapt", "True"}, {"trust_coeff", "0.02"}, {"dampening", "0.1"}}));
  cases.back().c.eps = 1e-3;
  cases.push_back(make("larc", "larc", 0.1, 0.05));
  cases.back().c.momentum = 0.8;
  cases.push_back(make("nlars", "nlars", 1.0, 0.05));
  cases.push_back(make("nlarc", "nlarc", 0.1, 0.1, {{"trust_coeff", "0.01"}}));
  cases.push_back(make("lars no momentum", "lars", 1.0, 0.05));
  cases.back().c.momentum = 0.0;
  return cases;
}

timm::test::MoreOracle oracle(make_cases());

}  // namespace

TEST_CASE("lars and larc match timm") {
  oracle.expect_parity("lars", kTolerance);
  oracle.expect_parity("lars always adapt", kTolerance);
  oracle.expect_parity("lars no momentum", kTolerance);
  oracle.expect_parity("larc", kTolerance);
}

TEST_CASE("nlars and nlarc match timm") {
  oracle.expect_parity("nlars", kTolerance);
  oracle.expect_parity("nlarc", kTolerance);
}

TEST_CASE("lars state survives save and load") {
  timm::test::load_builtin_plugins();
  for (const char* name : {"lars", "nlarc"}) {
    const double diff = timm::test::save_load_round_trip_more(oracle.get(name));
    MESSAGE(std::string(name) << " resumed vs uninterrupted: max diff = " << diff);
    CHECK(diff == 0.0);
  }
}

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
