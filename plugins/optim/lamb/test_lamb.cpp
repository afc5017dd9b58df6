// Parity of "lamb", "lambc", "lambw" with timm's Lamb through
// create_optimizer_v2: 10 steps with weight-decay groups (the trust ratio only
// where there is decay), lr changes, a parameter without gradient on some
// steps, global grad-norm clipping on and off; parameters and state compared.
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
  cases.push_back(make("lamb", "lamb", 1e-2, 0.05));
  cases.push_back(make("lamb betas eps", "lamb", 1e-2, 0.05));
  cases.back().c.eps = 1e-4;
  cases.back().c.betas = std::vector<double>{0.8, 0.99};
  cases.push_back(make("lamb no clip, always adapt", "lamb", 3e-3, 0.1,
                       {{"max_grad_norm", "None"}, {"always_adapt", "True"}, {"grad_averaging", "False"}}));
  cases.push_back(make("lamb small clip, caution", "lamb", 3e-3, 0.1,
                       {{"max_grad_norm", "0.5"}, {"caution", "True"}, {"betas", "(0.5,0.9)"}}));
  cases.push_back(make("lambc", "lambc", 1e-2, 0.05));
  cases.push_back(make("lambc no bias correction", "lambc", 1e-2, 0.0, {{"bias_correction", "False"}}));
  cases.push_back(make("lambw", "lambw", 1e-2, 0.05, {{"corrected_weight_decay", "True"}}));
  return cases;
}

timm::test::MoreOracle oracle(make_cases());

}  // namespace

TEST_CASE("lamb matches timm") {
  oracle.expect_parity("lamb", kTolerance);
  oracle.expect_parity("lamb betas eps", kTolerance);
  oracle.expect_parity("lamb no clip, always adapt", kTolerance);
  oracle.expect_parity("lamb small clip, caution", kTolerance);
}

TEST_CASE("lambc and lambw match timm") {
  oracle.expect_parity("lambc", kTolerance);
  oracle.expect_parity("lambc no bias correction", kTolerance);
  oracle.expect_parity("lambw", kTolerance);
}

TEST_CASE("lamb state survives save and load") {
  timm::test::load_builtin_plugins();
  for (const char* name : {"lamb", "lambc"}) {
    const double diff = timm::test::save_load_round_trip_more(oracle.get(name));
    MESSAGE(std::string(name) << " resumed vs uninterrupted: max diff = " << diff);
    CHECK(diff == 0.0);
  }
}

TEST_CASE("lamb rejects bad arguments") {
  timm::test::load_builtin_plugins();
  timm::test::ParityModel model;
  timm::OptimizerArgs args;
  args.opt = "lamb";
  args.kwargs = {{"momentum", "0.9"}};
  CHECK_THROWS_AS(timm::create_optimizer(model, {}, args), timm::UsageError);
  args.kwargs = {{"trust_coeff", "0.1"}};
  CHECK_THROWS_WITH_AS(timm::create_optimizer(model, {}, args), doctest::Contains("has no argument 'trust_coeff'"),
                       timm::UsageError);
  args.kwargs = {};
  args.betas = std::vector<double>{0.9};
  CHECK_THROWS_AS(timm::create_optimizer(model, {}, args), timm::UsageError);
}
