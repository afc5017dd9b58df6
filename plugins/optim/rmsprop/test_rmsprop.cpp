// Parity of "rmsprop" (torch.optim.RMSprop as timm binds it) and "rmsproptf" /
// "rmsproptfw" (timm's RMSpropTF) with timm's create_optimizer_v2: 10 steps
// with weight-decay groups, lr changes between steps and a parameter without
// gradient on some steps; parameters and optimizer state compared.
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
  cases.push_back(make("rmsprop", "rmsprop", 1e-2, 0.05));
  cases.push_back(make("rmsprop centered", "rmsprop", 3e-3, 0.1, {{"alpha", "0.99"}, {"centered", "True"}}));
  cases.back().c.eps = 1e-6;
  cases.back().c.momentum = 0.0;
  cases.push_back(make("rmsproptf", "rmsproptf", 1e-2, 0.05));
  cases.push_back(make("rmsproptf decoupled centered", "rmsproptf", 1e-2, 0.05,
                       {{"decoupled_decay", "True"}, {"centered", "True"}}));
  cases.back().c.eps = 1e-3;
  cases.push_back(make("rmsproptf caution", "RMSpropTF", 1e-2, 0.0,
                       {{"lr_in_momentum", "False"}, {"caution", "True"}, {"alpha", "0.5"}}));
  cases.back().c.momentum = 0.8;
  cases.push_back(make("rmsproptf no momentum", "rmsproptf", 1e-2, 0.05));
  cases.back().c.momentum = 0.0;
  cases.push_back(make("rmsproptfw corrected", "rmsproptfw", 1e-2, 0.05, {{"corrected_weight_decay", "True"}}));
  return cases;
}

timm::test::MoreOracle oracle(make_cases());

}  // namespace

TEST_CASE("rmsprop matches timm") {
  oracle.expect_parity("rmsprop", kTolerance);
  oracle.expect_parity("rmsprop centered", kTolerance);
}

TEST_CASE("rmsproptf matches timm") {
  oracle.expect_parity("rmsproptf", kTolerance);
  oracle.expect_parity("rmsproptf decoupled centered", kTolerance);
  oracle.expect_parity("rmsproptf caution", kTolerance);
  oracle.expect_parity("rmsproptf no momentum", kTolerance);
  oracle.expect_parity("rmsproptfw corrected", kTolerance);
}

TEST_CASE("rmsprop state survives save and load") {
  timm::test::load_builtin_plugins();
  for (const char* name : {"rmsprop centered", "rmsproptf", "rmsproptf decoupled centered"}) {
    const double diff = timm::test::save_load_round_trip_more(oracle.get(name));
    MESSAGE(std::string(name) << " resumed vs uninterrupted: max diff = " << diff);
    CHECK(diff == 0.0);
  }
}

TEST_CASE("rmsprop rejects bad arguments") {
  timm::test::load_builtin_plugins();
  timm::test::ParityModel model;
  timm::OptimizerArgs args;
  args.opt = "rmsproptf";
  args.kwargs = {{"nesterov", "True"}};
  CHECK_THROWS_WITH_AS(timm::create_optimizer(model, {}, args), doctest::Contains("has no argument 'nesterov'"),
                       timm::UsageError);
  args.kwargs = {{"alpha", "-1"}};
  CHECK_THROWS_AS(timm::create_optimizer(model, {}, args), timm::UsageError);
  args.kwargs = {};
  args.momentum = -0.5;
  CHECK_THROWS_AS(timm::create_optimizer(model, {}, args), timm::UsageError);
}
