// Parity of "adafactor" with timm's Adafactor through create_optimizer_v2:
// 10 steps on a model with tensors large enough to factor (a linear weight,
// a conv weight, a 3-D tensor factored on its trailing dims) and the small
// ones (full second moments), weight-decay groups, lr changes and a
// parameter without gradient on some steps; parameters and state compared.
#include "optim_parity.hpp"
#include "test_support.hpp"
#include "timm/base/error.hpp"

#include <doctest/doctest.h>

namespace test_adafactor {

namespace {

using timm::test::StateCase;

// Measured 0: timm's per-tensor CPU kernels in timm's order (kSameKernelsTolerance).
constexpr double kTolerance = timm::test::kSameKernelsTolerance;

StateCase make(const std::string& name, double lr, double wd, std::map<std::string, std::string> kwargs = {},
               const std::string& opt = "adafactor") {
  StateCase m = timm::test::state_case(name, opt, lr, wd, std::move(kwargs));
  m.big = true;
  return m;
}

std::vector<StateCase> make_cases() {
  std::vector<StateCase> cases;
  cases.push_back(make("adafactor", 1e-2, 0.05));
  cases.push_back(make("adafactor first moment", 1e-2, 0.05));
  cases.back().c.betas = std::vector<double>{0.9, 0.999};
  cases.back().c.eps = 1e-20;
  cases.push_back(make("adafactor kwargs", 3e-2, 0.0,
                       {{"clip_threshold", "0.5"}, {"decay_rate", "-0.5"}, {"min_dim_size_to_factor", "2"}}));
  cases.push_back(make("adafactor caution", 1e-2, 0.1, {{"betas", "(0.8,0.99)"}, {"caution", "True"}}));
  cases.push_back(make("cadafactor", 1e-2, 0.05, {}, "cadafactor"));
  cases.push_back(make("cadafactor --opt-betas", 1e-2, 0.05, {}, "cadafactor"));
  cases.back().c.betas = std::vector<double>{0.8, 0.99};
  // AdafactorBigVision: the big model's 2-D and 4-D weights are factored
  // (two dims of at least 16), the rest keep a full second moment.
  cases.push_back(make("adafactorbv", 1e-2, 0.05, {}, "adafactorbv"));
  cases.push_back(make("adafactorbvc", 1e-2, 0.05, {}, "adafactorbvc"));
  cases.push_back(make("cadafactorbv", 1e-2, 0.05, {}, "cadafactorbv"));
  cases.push_back(make("cadafactorbvc unscaled", 1e-2, 0.05, {{"unscaled_wd", "True"}}, "cadafactorbvc"));
  cases.push_back(make("adafactorbv kwargs", 3e-2, 0.1,
                       {{"clipping_threshold", "1.0"},
                        {"decay_offset", "3"},
                        {"beta2_cap", "0.99"},
                        {"momentum_dtype", "'float32'"},
                        {"min_dim_size_to_factor", "4"}},
                       "adafactorbv"));
  cases.back().c.momentum = 0.8;
  cases.back().c.eps = 1e-20;
  cases.push_back(make("adafactorbv unscaled float16 momentum", 1e-2, 0.05,
                       {{"unscaled_wd", "True"}, {"momentum_dtype", "'float16'"}, {"decay_rate", "0.5"}},
                       "adafactorbv"));
  return cases;
}

timm::test::StateOracle oracle(make_cases());

}  // namespace

TEST_CASE("adafactor matches timm") {
  oracle.expect_parity_each({"adafactor", "adafactor first moment", "adafactor kwargs", "adafactor caution"},
                            kTolerance);
}

TEST_CASE("cadafactor matches timm") {
  oracle.expect_parity_each({"cadafactor", "cadafactor --opt-betas"}, kTolerance);
}

TEST_CASE("adafactorbv and its variants match timm's AdafactorBigVision") {
  oracle.expect_parity_each({"adafactorbv", "adafactorbvc", "cadafactorbv", "cadafactorbvc unscaled",
                             "adafactorbv kwargs", "adafactorbv unscaled float16 momentum"},
                            kTolerance);
}

TEST_CASE("adafactorbv rejects bad arguments") {
  timm::test::load_builtin_plugins();
  timm::test::ParityModel model;
  timm::OptimizerArgs args;
  args.opt = "adafactorbv";
  args.kwargs = {{"momentum_dtype", "'int8'"}};
  CHECK_THROWS_WITH_AS(timm::create_optimizer(model, {}, args), doctest::Contains("momentum_dtype must be"),
                       timm::UsageError);
  args.kwargs = {{"relative_step", "True"}};
  CHECK_THROWS_WITH_AS(timm::create_optimizer(model, {}, args), doctest::Contains("'relative_step'"), timm::UsageError);
  args.opt = "adafactorbvc";
  args.kwargs = {};
  args.lr = 0;
  CHECK_THROWS_WITH_AS(timm::create_optimizer(model, {}, args), doctest::Contains("positive max lr"), timm::UsageError);
}

TEST_CASE("adafactor state survives save and load") {
  oracle.expect_round_trips({"adafactor", "adafactor first moment", "adafactorbv", "adafactorbv kwargs"});
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

}  // namespace test_adafactor
