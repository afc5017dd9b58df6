// Parity of "adan", "adanw", "cadan" and "cadanw" with timm's Adan through
// create_optimizer_v2: 10 steps with weight-decay and layer-decay groups, lr
// changes, a parameter without gradient on some steps (its neg_pre_grad
// waits for its next gradient); the final parameters, the state, the groups
// and the log line compared, and the group-level step. The one-pass loops
// (float32 CPU parameters, the default) and timm's ops (foreach=False) both.
#include "optim_parity.hpp"
#include "test_support.hpp"
#include "timm/base/error.hpp"

#include <doctest/doctest.h>

namespace test_adan {

namespace {

using timm::test::optim_case;
using timm::test::OptimCase;
using timm::test::state_case;
using timm::test::StateCase;

// timm's CPU path (_single_tensor_adan) op by op with the same ATen kernels
// (foreach=False): equal to the last bit; the loops: ATen's formulas per
// element, within float32 rounding. 1e-6 (parameters are O(1)) and 1e-5
// relative on the state.
constexpr double kTolerance = timm::test::kSameKernelsTolerance;
constexpr double kStateTolerance = 1e-5;

std::vector<OptimCase> make_cases() {
  std::vector<OptimCase> cases;
  cases.push_back(optim_case("adan", "adan", 1e-2, 0.05));
  cases.push_back(optim_case("adanw", "adanw", 1e-2, 0.05));
  cases.push_back(optim_case("cadan", "cadan", 1e-2, 0.05));
  cases.push_back(optim_case("cadanw", "cadanw", 1e-2, 0.05));
  // --opt-eps and three --opt-betas.
  cases.push_back(optim_case("adan eps+betas", "adan", 3e-3, 0.1));
  cases.back().eps = 1e-4;
  cases.back().betas = std::vector<double>{0.9, 0.9, 0.95};
  // --opt-kwargs: a list of betas, eps, the name's no_prox default overridden.
  cases.push_back(optim_case("adan kwargs", "adan", 3e-3, 0.1,
                             {{"betas", "[0.95,0.8,0.999]"}, {"eps", "1e-6"}, {"no_prox", "True"}}));
  cases.push_back(optim_case("cadanw layer-decay", "cadanw", 1e-2, 0.05));
  cases.back().layer_decay = 0.8;
  cases.push_back(optim_case("adan foreach=False", "adan", 1e-2, 0.05, {{"foreach", "False"}}));
  cases.push_back(optim_case("cadanw foreach=False", "cadanw", 1e-2, 0.05, {{"foreach", "False"}}));
  return cases;
}

timm::test::OptimOracle oracle(make_cases());  // runs timm on first use

// timm's group['step'] against our group state.
std::vector<StateCase> make_state_cases() {
  std::vector<StateCase> cases;
  cases.push_back(state_case("adanw group step", "adanw", 1e-2, 0.05));
  return cases;
}

timm::test::StateOracle state_oracle(make_state_cases());

}  // namespace

TEST_CASE("adan and its variants match timm's Adan") {
  oracle.expect_parity_each({"adan", "adanw", "cadan", "cadanw", "adan eps+betas", "adan kwargs", "cadanw layer-decay"},
                            kTolerance, kStateTolerance);
}

TEST_CASE("adan with foreach=False runs timm's ops one by one") {
  oracle.expect_parity_each({"adan foreach=False", "cadanw foreach=False"}, kTolerance, kStateTolerance);
}

// The parity cases' parameters fit in one of the loops' ranges; this one
// spans several (caution counts over all of them): the float32 loops against
// float64 ops, 5 steps, the same gradients. Measured 1.2e-6 to 1.7e-6.
TEST_CASE("adan's loops agree with its ops over several ranges") {
  timm::test::load_builtin_plugins();
  std::vector<timm::OptimizerArgs> cases;
  for (const char* opt : {"adan", "adanw", "cadan", "cadanw"})
    cases.push_back(timm::test::one_pass_case(opt, 1e-2, 0.05));
  timm::test::expect_one_pass_near_float64_ops(cases);
}

TEST_CASE("adan's group step matches timm's") { state_oracle.expect_parity("adanw group step", kTolerance); }

TEST_CASE("adan state survives save and load") { oracle.expect_round_trips({"adan", "cadanw"}); }

TEST_CASE("adan rejects bad arguments") {
  timm::test::load_builtin_plugins();
  timm::test::ParityModel model;
  timm::OptimizerArgs args;
  args.opt = "adan";
  args.kwargs = {{"amsgrad", "True"}};
  CHECK_THROWS_WITH_AS(timm::create_optimizer(model, {}, args), doctest::Contains("'adan' has no argument 'amsgrad'"),
                       timm::UsageError);
  args.kwargs = {};
  args.betas = std::vector<double>{0.9, 0.99};  // Adan takes three
  CHECK_THROWS_WITH_AS(timm::create_optimizer(model, {}, args), doctest::Contains("betas needs 3 values"),
                       timm::UsageError);
  args.betas = std::vector<double>{0.9, 0.9, 1.0};
  CHECK_THROWS_WITH_AS(timm::create_optimizer(model, {}, args), doctest::Contains("invalid beta parameter at index 2"),
                       timm::UsageError);
  args.betas.reset();
  args.eps = -1e-8;
  CHECK_THROWS_WITH_AS(timm::create_optimizer(model, {}, args), doctest::Contains("invalid epsilon"), timm::UsageError);
  args.eps.reset();
  args.lr = -1.0;
  CHECK_THROWS_WITH_AS(timm::create_optimizer(model, {}, args), doctest::Contains("invalid learning rate"),
                       timm::UsageError);
}

}  // namespace test_adan
