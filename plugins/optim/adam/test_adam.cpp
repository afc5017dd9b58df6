// Parity of the Adam family ("adam", "adamw", "nadam", "radam", "radamw", "nadamw" and
// variants, "adabelief", "radabelief", "adopt" and variants, "nadamlegacy",
// "radamlegacy") with timm's create_optimizer_v2: 10-12 steps on the same
// parameters and gradients, weight-decay groups (no decay on 1-D / bias /
// no_weight_decay), lr changes between steps, a parameter without gradient
// on some steps, --layer-decay groups; the final parameters, every state
// tensor, the groups and the log line compared. Then save / load / resume.
#include <torch/optim/adamw.h>

#include "optim_parity.hpp"
#include "test_support.hpp"
#include "timm/base/error.hpp"

#include <doctest/doctest.h>

namespace test_adam {

namespace {

using timm::test::OptimCase;

// The same ATen ops in the same order as timm / torch on CPU: the runs agree
// to a few float32 ulps of the parameters (|p| ~ 1), the states to a few ulps
// relative to their largest value. The one-pass loops of Adopt, AdaBelief,
// NAdam, RAdam, NAdamW and the legacy NAdam and RAdam (timm-cpp's, on the
// CPU by default) are within float32 rounding of the same ops.
constexpr double kTolerance = 1e-6;
constexpr double kStateTolerance = 1e-5;

OptimCase make(const std::string& name, const std::string& opt, double lr, double wd,
               std::map<std::string, std::string> kwargs = {}, int steps = 10) {
  OptimCase c = timm::test::optim_case(name, opt, lr, wd, std::move(kwargs));
  c.steps = steps;
  return c;
}

std::vector<OptimCase> make_cases() {
  std::vector<OptimCase> cases;
  // torch.optim.Adam
  cases.push_back(make("adam", "adam", 1e-2, 0.05));
  cases.push_back(make("adam amsgrad", "adam", 3e-3, 0.1, {{"amsgrad", "True"}}));
  cases.push_back(make("adam decoupled", "adam", 1e-2, 0.05, {{"decoupled_weight_decay", "True"}}));
  cases.push_back(make("adam eps+betas", "adam", 1e-2, 0.0));
  cases.back().eps = 1e-6;
  cases.back().betas = std::vector<double>{0.8, 0.99};
  cases.push_back(make("adam layer-decay", "adam", 1e-2, 0.05));
  cases.back().layer_decay = 0.6;
  // torch.optim.AdamW
  cases.push_back(make("adamw", "adamw", 1e-2, 0.05));
  cases.push_back(make("adamw opt-eps+opt-betas", "adamw", 1e-2, 0.05));
  cases.back().eps = 1e-6;
  cases.back().betas = std::vector<double>{0.8, 0.99};
  cases.push_back(make("adamw amsgrad", "adamw", 3e-3, 0.1, {{"amsgrad", "True"}}));
  cases.push_back(make("adamw kwargs betas+eps", "adamw", 3e-3, 0.1, {{"betas", "(0.5,0.9)"}, {"eps", "1e-3"}}));
  cases.push_back(make("adamw layer-decay", "adamw", 1e-2, 0.05));
  cases.back().layer_decay = 0.7;
  // Ours run torch's fused CPU kernels unless fused=False (the per-tensor
  // ops, as torch's default path); timm's fused=True runs the same kernels.
  cases.push_back(make("adamw fused=False", "adamw", 1e-2, 0.05, {{"fused", "False"}}));
  cases.push_back(make("adam amsgrad fused=False", "adam", 3e-3, 0.1, {{"amsgrad", "True"}, {"fused", "False"}}));
  cases.push_back(make("adamw fused=True", "adamw", 1e-2, 0.05, {{"fused", "True"}}));
  // torch.optim.NAdam
  cases.push_back(make("nadam", "nadam", 2e-3, 0.05));
  cases.push_back(make("nadam betas+momentum_decay", "nadam", 1e-2, 0.01, {{"momentum_decay", "0.01"}}));
  cases.back().betas = std::vector<double>{0.85, 0.99};
  cases.push_back(make("nadam decoupled", "nadam", 1e-2, 0.05, {{"decoupled_weight_decay", "True"}}));
  // torch.optim.RAdam: the first steps unrectified, the later rectified.
  cases.push_back(make("radam", "radam", 1e-2, 0.05, {}, 12));
  cases.push_back(make("radamw", "radamw", 1e-2, 0.05, {}, 12));
  cases.push_back(make("radam betas", "radam", 1e-2, 0.0, {{"betas", "[0.9,0.99]"}}, 12));
  // NAdam's and RAdam's ops one by one instead of the one-pass loops.
  cases.push_back(make("nadam foreach=False", "nadam", 2e-3, 0.05, {{"foreach", "False"}}));
  cases.push_back(make("cnadamw foreach=False", "cnadamw", 1e-2, 0.05, {{"foreach", "False"}}));
  cases.push_back(make("radamw foreach=False", "radamw", 1e-2, 0.05, {{"foreach", "False"}}, 12));
  // timm NAdamW
  cases.push_back(make("nadamw", "nadamw", 1e-2, 0.05));
  cases.push_back(make("cnadamw", "cnadamw", 1e-2, 0.05));
  cases.push_back(make("nadamc", "nadamc", 1e-2, 0.05));
  cases.push_back(make("nadamw clipping", "nadamw", 1e-2, 0.05, {{"clipping_threshold", "1.0"}}));
  cases.push_back(make("nadamw layer-decay", "nadamw", 1e-2, 0.05));
  cases.back().layer_decay = 0.75;
  cases.back().layer_decay_min_scale = 0.5;
  // timm AdaBelief
  cases.push_back(make("adabelief", "adabelief", 1e-2, 0.05));
  cases.push_back(make("adabelief amsgrad", "adabelief", 1e-2, 0.05, {{"amsgrad", "True"}}));
  cases.push_back(make("adabelief coupled", "adabelief", 1e-2, 0.05, {{"decoupled_decay", "False"}}));
  cases.push_back(make("adabelief fixed", "adabelief", 1e-2, 0.05, {{"fixed_decay", "True"}}));
  cases.back().eps = 1e-8;
  cases.push_back(make("radabelief", "radabelief", 1e-2, 0.05, {}, 12));
  cases.push_back(make("radabelief no-sgd", "radabelief", 1e-2, 0.05, {{"degenerated_to_sgd", "False"}}, 12));
  // timm's ops one by one instead of the one-pass update (by default on the CPU).
  cases.push_back(make("adabelief foreach=False", "adabelief", 1e-2, 0.05, {{"foreach", "False"}}));
  cases.push_back(make("radabelief foreach=False", "radabelief", 1e-2, 0.05, {{"foreach", "False"}}, 12));
  // timm Adopt
  cases.push_back(make("adopt", "adopt", 1e-2, 0.05));
  cases.push_back(make("adoptw", "adoptw", 1e-2, 0.05));
  cases.push_back(make("cadoptw", "cadoptw", 1e-2, 0.05));
  cases.push_back(make("adoptc", "adoptc", 1e-2, 0.05));
  cases.push_back(make("adopt clip_exp=None", "adopt", 1e-2, 0.05, {{"clip_exp", "None"}}));
  cases.back().betas = std::vector<double>{0.9, 0.999};
  cases.push_back(make("adopt layer-decay", "adopt", 1e-2, 0.05));
  cases.back().layer_decay = 0.5;
  // Caution with the coupled decay; timm's ops one by one instead of the
  // one-pass update (by default on the CPU).
  cases.push_back(make("cadopt", "cadopt", 1e-2, 0.05));
  cases.push_back(make("adopt foreach=False", "adopt", 1e-2, 0.05, {{"foreach", "False"}}));
  cases.push_back(make("cadoptw foreach=False", "cadoptw", 1e-2, 0.05, {{"foreach", "False"}}));
  // timm NAdamLegacy
  cases.push_back(make("nadamlegacy", "nadamlegacy", 2e-3, 0.05));
  cases.push_back(make("nadamlegacy flags+schedule_decay", "nadamlegacy", 1e-2, 0.01, {{"schedule_decay", "0.01"}}));
  cases.back().eps = 1e-6;
  cases.back().betas = std::vector<double>{0.85, 0.99};
  cases.push_back(make("nadamlegacy layer-decay", "nadamlegacy", 2e-3, 0.05));
  cases.back().layer_decay = 0.75;
  // timm RAdamLegacy: the first steps unrectified, the later rectified.
  cases.push_back(make("radamlegacy", "radamlegacy", 1e-2, 0.05, {}, 12));
  cases.push_back(make("radamlegacy kwargs", "radamlegacy", 1e-2, 0.0, {{"betas", "[0.9,0.99]"}, {"eps", "1e-6"}}, 12));
  cases.push_back(make("radamlegacy layer-decay", "radamlegacy", 1e-2, 0.05, {}, 12));
  cases.back().layer_decay = 0.75;
  return cases;
}

timm::test::OptimOracle oracle(make_cases());  // runs timm on first use

}  // namespace

TEST_CASE("adam matches torch.optim.Adam") {
  oracle.expect_parity_each({"adam", "adam amsgrad", "adam decoupled", "adam eps+betas", "adam layer-decay"},
                            kTolerance, kStateTolerance);
}

TEST_CASE("adamw matches torch.optim.AdamW") {
  oracle.expect_parity_each(
      {"adamw", "adamw opt-eps+opt-betas", "adamw amsgrad", "adamw kwargs betas+eps", "adamw layer-decay"}, kTolerance,
      kStateTolerance);
}

TEST_CASE("adam and adamw run torch's per-tensor ops with fused=False, its fused kernels by default or with True") {
  oracle.expect_parity_each({"adamw fused=False", "adam amsgrad fused=False", "adamw fused=True"}, kTolerance,
                            kStateTolerance);
}

// Until 2026-12-05 "adamw" wrapped LibTorch's AdamW (TorchOptimizer), and
// checkpoints hold that optimizer's archive: moments keyed by TensorImpl
// address, int64 step counts. The resumed run ends within float32 rounding of
// ours uninterrupted (LibTorch's first moment is mul/add, torch's lerp);
// state not carried over would put it lr-sized steps away.
TEST_CASE("adamw resumes from the state of LibTorch's AdamW") {
  timm::test::load_builtin_plugins();
  for (const char* name : {"adamw", "adamw amsgrad"}) {
    CAPTURE(name);
    const timm::test::OptimCase& c = oracle.get(name);
    const auto defaults = torch::optim::AdamWOptions(c.lr).amsgrad(c.kwargs.contains("amsgrad"));
    const auto libtorch_adamw = timm::test::libtorch_optimizer<torch::optim::AdamW>(c, defaults);
    CHECK(timm::test::save_load_round_trip(c, 5, 8, libtorch_adamw) <= kTolerance);
  }
}

TEST_CASE("adamw rejects bad arguments") {
  timm::test::load_builtin_plugins();
  timm::test::ParityModel model;
  timm::OptimizerArgs args;
  args.opt = "adamw";
  args.kwargs = {{"nesterov", "True"}};
  CHECK_THROWS_WITH_AS(timm::create_optimizer(model, {}, args), doctest::Contains("'adamw' has no argument 'nesterov'"),
                       timm::UsageError);
  // torch's AdamW always decouples: no such argument.
  args.kwargs = {{"decoupled_weight_decay", "False"}};
  CHECK_THROWS_WITH_AS(timm::create_optimizer(model, {}, args),
                       doctest::Contains("'adamw' has no argument 'decoupled_weight_decay'"), timm::UsageError);
  args.kwargs = {};
  args.betas = std::vector<double>{0.9};
  CHECK_THROWS_AS(timm::create_optimizer(model, {}, args), timm::UsageError);
  args.betas = std::vector<double>{0.9, 0.999};
  args.kwargs = {{"betas", "(0.9,0.99)"}};
  CHECK_THROWS_AS(timm::create_optimizer(model, {}, args), timm::UsageError);
  CHECK(timm::optimizer_traits("adamw").lr_base_scale == timm::LrBaseScale::kSqrt);
}

TEST_CASE("nadam matches torch.optim.NAdam") {
  oracle.expect_parity_each({"nadam", "nadam betas+momentum_decay", "nadam decoupled"}, kTolerance, kStateTolerance);
}

TEST_CASE("radam and radamw match torch.optim.RAdam") {
  oracle.expect_parity_each({"radam", "radamw", "radam betas"}, kTolerance, kStateTolerance);
}

TEST_CASE("nadam, radam and nadamw with foreach=False run the ops one by one") {
  oracle.expect_parity_each({"nadam foreach=False", "radamw foreach=False", "cnadamw foreach=False"}, kTolerance,
                            kStateTolerance);
}

TEST_CASE("nadamw and its variants match timm's NAdamW") {
  oracle.expect_parity_each({"nadamw", "cnadamw", "nadamc", "nadamw clipping", "nadamw layer-decay"}, kTolerance,
                            kStateTolerance);
}

TEST_CASE("adabelief and radabelief match timm's AdaBelief") {
  oracle.expect_parity_each(
      {"adabelief", "adabelief amsgrad", "adabelief coupled", "adabelief fixed", "radabelief", "radabelief no-sgd"},
      kTolerance, kStateTolerance);
}

TEST_CASE("adabelief with foreach=False runs timm's ops one by one") {
  oracle.expect_parity_each({"adabelief foreach=False", "radabelief foreach=False"}, kTolerance, kStateTolerance);
}

// The parity cases' parameters fit in one of the loops' ranges; this one
// spans several: each float32 loop against float64 ops, the same gradients,
// 8 steps (the rectified optimizers' first 5 or 6 are unrectified). Measured
// 6.9e-7 to 1.8e-6.
TEST_CASE("the Adam family's one-pass loops agree with their ops over several ranges") {
  timm::test::load_builtin_plugins();
  std::vector<timm::OptimizerArgs> cases;
  const std::vector<std::pair<std::string, std::map<std::string, std::string>>> names = {
      {"adabelief", {}},  {"adabelief", {{"decoupled_decay", "False"}}},
      {"radabelief", {}}, {"radabelief", {{"degenerated_to_sgd", "False"}}},
      {"nadam", {}},      {"nadam", {{"decoupled_weight_decay", "True"}}},
      {"radam", {}},      {"radamw", {}},
      {"nadamw", {}},     {"cnadamw", {}},
      {"cnadamc", {}},    {"nadamlegacy", {}},
      {"radamlegacy", {}}};
  for (const auto& [opt, kwargs] : names) cases.push_back(timm::test::one_pass_case(opt, 1e-2, 0.05, kwargs));
  timm::test::expect_one_pass_near_float64_ops(cases, /*steps=*/8);
}

TEST_CASE("adopt and its variants match timm's Adopt") {
  oracle.expect_parity_each(
      {"adopt", "adoptw", "cadoptw", "adoptc", "adopt clip_exp=None", "adopt layer-decay", "cadopt"}, kTolerance,
      kStateTolerance);
}

TEST_CASE("adopt with foreach=False runs timm's ops one by one") {
  oracle.expect_parity_each({"adopt foreach=False", "cadoptw foreach=False"}, kTolerance, kStateTolerance);
}

TEST_CASE("nadamlegacy and radamlegacy match timm's NAdamLegacy and RAdamLegacy") {
  oracle.expect_parity_each({"nadamlegacy", "nadamlegacy flags+schedule_decay", "nadamlegacy layer-decay",
                             "radamlegacy", "radamlegacy kwargs", "radamlegacy layer-decay"},
                            kTolerance, kStateTolerance);
}

TEST_CASE("nadamlegacy and radamlegacy state survives save and load") {
  oracle.expect_round_trips({"nadamlegacy", "nadamlegacy flags+schedule_decay", "radamlegacy"});
}

TEST_CASE("nadamlegacy and radamlegacy reject bad arguments, and take the square-root lr scaling") {
  timm::test::load_builtin_plugins();
  timm::test::ParityModel model;
  timm::OptimizerArgs args;
  args.opt = "nadamlegacy";
  args.kwargs = {{"amsgrad", "True"}};
  CHECK_THROWS_WITH_AS(timm::create_optimizer(model, {}, args),
                       doctest::Contains("'nadamlegacy' has no argument 'amsgrad'"), timm::UsageError);
  args.kwargs = {{"schedule_decay", "abc"}};
  CHECK_THROWS_AS(timm::create_optimizer(model, {}, args), timm::UsageError);
  args.kwargs = {};
  args.lr = -1e-3;
  CHECK_THROWS_WITH_AS(timm::create_optimizer(model, {}, args), doctest::Contains("invalid learning rate"),
                       timm::UsageError);
  args.lr = 1e-3;
  args.opt = "radamlegacy";
  args.kwargs = {{"schedule_decay", "0.01"}};
  CHECK_THROWS_WITH_AS(timm::create_optimizer(model, {}, args),
                       doctest::Contains("'radamlegacy' has no argument 'schedule_decay'"), timm::UsageError);
  args.kwargs = {};
  args.betas = std::vector<double>{0.9};
  CHECK_THROWS_AS(timm::create_optimizer(model, {}, args), timm::UsageError);
  args.betas.reset();
  for (const char* name : {"nadamlegacy", "radamlegacy"}) {
    CAPTURE(name);
    CHECK(timm::optimizer_traits(name).lr_base_scale == timm::LrBaseScale::kSqrt);
  }
}

TEST_CASE("the Adam family's state survives save and load") {
  oracle.expect_round_trips({"adam amsgrad", "adamw", "adamw amsgrad", "nadam", "radam", "cnadamw", "radabelief",
                             "adabelief amsgrad", "cadoptw", "adopt layer-decay"});
}

TEST_CASE("the Adam family rejects bad arguments") {
  timm::test::load_builtin_plugins();
  timm::test::ParityModel model;
  timm::OptimizerArgs args;
  args.opt = "nadamw";
  args.kwargs = {{"amsgrad", "True"}};
  CHECK_THROWS_WITH_AS(timm::create_optimizer(model, {}, args), doctest::Contains("'nadamw' has no argument 'amsgrad'"),
                       timm::UsageError);
  args.opt = "adam";
  args.kwargs = {};
  args.betas = std::vector<double>{0.9, 1.0};
  CHECK_THROWS_WITH_AS(timm::create_optimizer(model, {}, args), doctest::Contains("invalid beta parameter at index 1"),
                       timm::UsageError);
  args.betas.reset();
  args.eps = -1.0;
  CHECK_THROWS_AS(timm::create_optimizer(model, {}, args), timm::UsageError);
  args.eps.reset();
  args.opt = "adopt";
  args.kwargs = {{"clip_exp", "abc"}};
  CHECK_THROWS_AS(timm::create_optimizer(model, {}, args), timm::UsageError);
  // --layer-decay needs a group_matcher.
  args.kwargs = {};
  args.layer_decay = 0.7;
  CHECK_THROWS_WITH_AS(timm::create_optimizer(model, {}, args, {}, "mymodel"), doctest::Contains("'mymodel'"),
                       timm::UsageError);
}

}  // namespace test_adam
