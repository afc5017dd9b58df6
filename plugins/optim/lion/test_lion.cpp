// Parity of "lion", "clion", "lionc" and "clionc" with timm's Lion through
// create_optimizer_v2: 10 steps with weight-decay and layer-decay groups, lr
// changes, a parameter without gradient on some steps; the final
// parameters, the state, the groups and the log line compared; the one-pass
// loops (float32 CPU parameters, the default) and timm's ops
// (foreach=False) both.
#include "optim_parity.hpp"
#include "test_support.hpp"
#include "timm/base/error.hpp"

#include <doctest/doctest.h>

namespace test_lion {

namespace {

using timm::test::optim_case;
using timm::test::OptimCase;

// The loops compute each element as ATen's kernels do (lerp's two forms, the
// sign), the ops are timm's in its order; the update is a sign, so any
// difference in the momentum would show as a whole lr step.
constexpr double kTolerance = 1e-6;
constexpr double kStateTolerance = 1e-5;

std::vector<OptimCase> make_cases() {
  std::vector<OptimCase> cases;
  cases.push_back(optim_case("lion", "lion", 1e-3, 0.1));
  cases.push_back(optim_case("clion", "clion", 1e-3, 0.1));
  cases.push_back(optim_case("lionc", "lionc", 1e-3, 1.0));
  cases.push_back(optim_case("clionc", "clionc", 1e-3, 1.0));
  // --opt-eps is dropped (timm: has_eps False); betas from the flag.
  cases.push_back(optim_case("lion eps+betas", "lion", 3e-4, 0.05));
  cases.back().eps = 1e-3;
  cases.back().betas = std::vector<double>{0.95, 0.98};
  cases.push_back(optim_case("lion kwargs betas", "lion", 3e-4, 0.05, {{"betas", "(0.9,0.999)"}}));
  cases.push_back(optim_case("lion layer-decay", "lion", 1e-3, 0.1));
  cases.back().layer_decay = 0.8;
  // lerp's other form (weight >= 0.5) in the update.
  cases.push_back(optim_case("lion small beta1", "lion", 1e-3, 0.1, {{"betas", "(0.3,0.99)"}}));
  cases.push_back(optim_case("lion foreach=False", "lion", 1e-3, 0.1, {{"foreach", "False"}}));
  cases.push_back(optim_case("clionc foreach=False", "clionc", 1e-3, 1.0, {{"foreach", "False"}}));
  return cases;
}

timm::test::OptimOracle oracle(make_cases());  // runs timm on first use

}  // namespace

TEST_CASE("lion and its variants match timm's Lion") {
  oracle.expect_parity_each({"lion", "clion", "lionc", "clionc", "lion eps+betas", "lion kwargs betas",
                             "lion layer-decay", "lion small beta1"},
                            kTolerance, kStateTolerance);
}

TEST_CASE("lion with foreach=False runs timm's ops") {
  oracle.expect_parity_each({"lion foreach=False", "clionc foreach=False"}, kTolerance, kStateTolerance);
}

// The parity cases' parameters fit in one of the loops' ranges; this one
// spans several (caution counts over all of them): float32 loops against
// float64 ops, 5 steps, the same gradients. A sign that rounding flipped
// would differ by 2 lr (2e-3); measured below 1e-6.
TEST_CASE("lion's loops agree with its ops over several ranges") {
  timm::test::load_builtin_plugins();
  using timm::test::one_pass_case;
  timm::test::expect_one_pass_near_float64_ops(
      {one_pass_case("lion", 1e-3, 0.1), one_pass_case("clion", 1e-3, 0.1), one_pass_case("clionc", 1e-3, 0.1)});
}

TEST_CASE("lion state survives save and load") { oracle.expect_round_trips({"lion", "clionc"}); }

TEST_CASE("lion rejects bad arguments") {
  timm::test::load_builtin_plugins();
  timm::test::ParityModel model;
  timm::OptimizerArgs args;
  args.opt = "lion";
  args.kwargs = {{"amsgrad", "True"}};
  CHECK_THROWS_AS(timm::create_optimizer(model, {}, args), timm::UsageError);
  args.kwargs = {};
  args.betas = std::vector<double>{0.9};
  CHECK_THROWS_AS(timm::create_optimizer(model, {}, args), timm::UsageError);
}

}  // namespace test_lion
