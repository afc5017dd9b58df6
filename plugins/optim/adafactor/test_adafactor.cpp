// Parity of "adafactor" with timm's Adafactor through create_optimizer_v2:
// 10 steps on a model with tensors large enough to factor (a linear weight,
// a conv weight, a 3-D tensor factored on its trailing dims) and the small
// ones (full second moments), weight-decay groups, lr changes and a
// parameter without gradient on some steps; parameters and state compared.
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

MoreCase make(const std::string& name, double lr, double wd, std::map<std::string, std::string> kwargs = {}) {
  MoreCase m{OptimCase(name, "adafactor", lr, wd)};
  m.c.kwargs = std::move(kwargs);
  m.big = true;
  return m;
}

std::vector<MoreCase> make_cases() {
  std::vector<MoreCase> cases;
  cases.push_back(make("adafactor", 1e-2, 0.05));
  cases.push_back(make("adafactor first moment", 1e-2, 0.05));
  cases.back().c.betas = std::vector<double>{0.9, 0.999};
  cases.back().c.eps = 1e-20;
  cases.push_back(make("adafactor kwargs", 3e-2, 0.0,
                       {{"clip_threshold", "0.5"}, {"decay_rate", "-0.5"}, {"min_dim_size_to_factor", "2"}}));
  cases.push_back(make("adafactor caution", 1e-2, 0.1, {{"betas", "(0.8,0.99)"}, {"caution", "True"}}));
  return cases;
}

timm::test::MoreOracle oracle(make_cases());

}  // namespace

TEST_CASE("adafactor matches timm") {
  oracle.expect_parity("adafactor", kTolerance);
  oracle.expect_parity("adafactor first moment", kTolerance);
  oracle.expect_parity("adafactor kwargs", kTolerance);
  oracle.expect_parity("adafactor caution", kTolerance);
}

TEST_CASE("adafactor state survives save and load") {
  timm::test::load_builtin_plugins();
  for (const char* name : {"adafactor", "adafactor first moment"}) {
    const double diff = timm::test::save_load_round_trip_more(oracle.get(name));
    MESSAGE(std::string(name) << " resumed vs uninterrupted: max diff = " << diff);
    CHECK(diff == 0.0);
  }
}

TEST_CASE("adafactor rejects bad arguments") {
  timm::test::load_builtin_plugins();
  timm::test::ParityModel model;
  timm::OptimizerArgs args;
  args.opt = "adafactor";
  args.kwargs = {{"warmup_init", "True"}};
  CHECK_THROWS_WITH_AS(timm::create_optimizer(model, {}, args), doctest::Contains("warmup_init"), timm::UsageError);
  args.kwargs = {{"momentum", "0.9"}};
  CHECK_THROWS_AS(timm::create_optimizer(model, {}, args), timm::UsageError);
}
