// Parity of "lamb", "lambc", "lambw" with timm's Lamb through
// create_optimizer_v2: 10 steps with weight-decay groups (the trust ratio only
// where there is decay), lr changes, a parameter without gradient on some
// steps, global grad-norm clipping on and off; parameters and state compared.
#include "optim_parity.hpp"
#include "test_support.hpp"
#include "timm/base/error.hpp"

#include <doctest/doctest.h>

namespace test_lamb {

namespace {

using timm::test::state_case;
using timm::test::StateCase;

// Measured 0: timm's per-tensor CPU kernels in timm's order (kSameKernelsTolerance).
constexpr double kTolerance = timm::test::kSameKernelsTolerance;

std::vector<StateCase> make_cases() {
  std::vector<StateCase> cases;
  cases.push_back(state_case("lamb", "lamb", 1e-2, 0.05));
  cases.push_back(state_case("lamb betas eps", "lamb", 1e-2, 0.05));
  cases.back().c.eps = 1e-4;
  cases.back().c.betas = std::vector<double>{0.8, 0.99};
  cases.push_back(state_case("lamb no clip, always adapt", "lamb", 3e-3, 0.1,
                             {{"max_grad_norm", "None"}, {"always_adapt", "True"}, {"grad_averaging", "False"}}));
  cases.push_back(state_case("lamb small clip, caution", "lamb", 3e-3, 0.1,
                             {{"max_grad_norm", "0.5"}, {"caution", "True"}, {"betas", "(0.5,0.9)"}}));
  cases.push_back(state_case("lambc", "lambc", 1e-2, 0.05));
  cases.push_back(state_case("lambc no bias correction", "lambc", 1e-2, 0.0, {{"bias_correction", "False"}}));
  cases.push_back(state_case("lambw", "lambw", 1e-2, 0.05, {{"corrected_weight_decay", "True"}}));
  cases.push_back(state_case("lambcd", "lambcd", 1e-2, 0.05));
  cases.push_back(state_case("clamb", "clamb", 1e-2, 0.05));
  cases.push_back(state_case("clambw", "clambw", 1e-2, 0.05));
  cases.push_back(state_case("clamb trust_clip", "clamb", 3e-3, 0.1, {{"trust_clip", "True"}}));
  cases.push_back(state_case("lamb foreach=False", "lamb", 1e-2, 0.05, {{"foreach", "False"}}));
  cases.push_back(state_case("lambw foreach=False", "lambw", 1e-2, 0.05, {{"foreach", "False"}}));
  return cases;
}

timm::test::StateOracle oracle(make_cases());

}  // namespace

TEST_CASE("lamb matches timm") {
  oracle.expect_parity_each({"lamb", "lamb betas eps", "lamb no clip, always adapt", "lamb small clip, caution"},
                            kTolerance);
}

TEST_CASE("lambc and lambw match timm") {
  oracle.expect_parity_each({"lambc", "lambc no bias correction", "lambw"}, kTolerance);
}

TEST_CASE("lambcd, clamb and clambw match timm") {
  oracle.expect_parity_each({"lambcd", "clamb", "clambw", "clamb trust_clip"}, kTolerance);
}

TEST_CASE("lamb and lambw with foreach=False (the ops) match timm") {
  oracle.expect_parity_each({"lamb foreach=False", "lambw foreach=False"}, kTolerance);
}

TEST_CASE("lamb's loops agree with its ops over several ranges") {
  using timm::test::one_pass_case;
  timm::test::load_builtin_plugins();
  timm::test::expect_one_pass_near_float64_ops(
      {one_pass_case("lamb", 1e-2, 0.05), one_pass_case("lambw", 1e-2, 0.05),
       one_pass_case("lambc", 3e-3, 0.1, {{"betas", "(0.8,0.99)"}}),
       one_pass_case("lamb", 3e-3, 0.0, {{"always_adapt", "True"}, {"grad_averaging", "False"}}),
       one_pass_case("lambcd", 1e-2, 0.05, {{"max_grad_norm", "None"}})});
}

TEST_CASE("lamb state survives save and load") { oracle.expect_round_trips({"lamb", "lambc"}); }

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

}  // namespace test_lamb
