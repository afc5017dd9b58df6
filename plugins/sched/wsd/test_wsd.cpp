// Parity of "wsd" and "rsqrt" with timm's create_scheduler_v2
// (WSDLRScheduler): the lr of every group at every epoch (or update) of whole
// runs, and num_epochs, within 1e-9 relative, over the decay shapes, the
// decay length (unset: 0.2 of the stable + decay length, a fraction, or
// epochs), warmup with and without prefix, min_lr, cooldown, noise and the
// rsqrt timescale; and the errors for bad arguments.
#include <doctest/doctest.h>

#include <torch/optim/sgd.h>

#include "sched_parity.hpp"
#include "test_support.hpp"
#include "timm/base/error.hpp"

namespace test_wsd {

namespace {

using timm::test::SchedCase;

timm::SchedulerArgs wsd(const std::string& sched, int64_t epochs, int64_t warmup_epochs) {
  timm::SchedulerArgs a = timm::test::sched_args(sched, epochs, warmup_epochs);
  a.decay_epochs = std::nullopt;  // timm's None
  return a;
}

std::vector<SchedCase> make_cases() {
  std::vector<SchedCase> cases;
  cases.push_back({"wsd defaults", wsd("wsd", 100, 5), 0.1});
  for (const char* fn : {"linear", "1-sqrt", "cosine", "power", "exp"}) {
    auto a = wsd("wsd", 50, 3);
    a.decay_fn = fn;
    a.decay_epochs = 0.3;
    a.min_lr = 1e-4;
    cases.push_back({std::string("wsd ") + fn, a, 0.1});
  }
  auto a = wsd("wsd", 40, 4);
  a.decay_epochs = 10;  // epochs, not a fraction
  a.warmup_prefix = true;
  a.cooldown_epochs = 3;
  cases.push_back({"wsd 10 epochs+prefix+cooldown", a, 0.1});

  a = wsd("wsd", 30, 0);
  a.decay_epochs = 0.25;  // 7.5 rounds half to even: 8
  a.noise = {0.3, 0.9};
  cases.push_back({"wsd no warmup+noise", a, 0.1});

  a = wsd("wsd", 6, 1);
  a.step_on_epochs = false;
  a.updates_per_epoch = 7;
  a.decay_epochs = 2;
  a.warmup_lr = 0;
  a.decay_fn = "cosine";
  cases.push_back({"wsd per-update", a, 1.0});

  cases.push_back({"rsqrt defaults", wsd("rsqrt", 100, 5), 0.1});
  a = wsd("rsqrt", 60, 0);
  a.stable_timescale = 2.5;
  a.decay_fn = "1-sqrt";
  a.min_lr = 0.02;  // above the decaying stable lr at the end: max(.., lr_min)
  a.warmup_prefix = true;
  cases.push_back({"rsqrt timescale+min_lr+prefix", a, 0.1});

  a = wsd("rsqrt", 5, 1);
  a.step_on_epochs = false;
  a.updates_per_epoch = 9;
  a.stable_timescale = 0.5;
  a.cooldown_epochs = 1;
  a.noise = {0.5};
  cases.push_back({"rsqrt per-update+noise+cooldown", a, 0.1});
  return cases;
}

void check(const std::string& name) {
  static timm::test::SchedOracle oracle(make_cases());
  oracle.expect_parity(name);
}

timm::TorchOptimizer make_optimizer() {
  timm::ParamGroup group;
  group.params = {at::zeros({1}).requires_grad_()};
  const auto defaults = torch::optim::SGDOptions(0.1);
  return timm::TorchOptimizer(
      std::make_unique<torch::optim::SGD>(timm::torch_param_groups({group}, defaults), defaults), {1.0}, "SGD");
}

}  // namespace

TEST_CASE("wsd with timm's defaults: decay over the last 0.2, 1-sqrt") { check("wsd defaults"); }

TEST_CASE("wsd decay shapes: linear, 1-sqrt, cosine, power, exp") {
  for (const char* fn : {"linear", "1-sqrt", "cosine", "power", "exp"}) check(std::string("wsd ") + fn);
}

TEST_CASE("wsd decay in epochs, warmup prefix, cooldown") { check("wsd 10 epochs+prefix+cooldown"); }

TEST_CASE("wsd without warmup, with noise, decay length rounded half to even") { check("wsd no warmup+noise"); }

TEST_CASE("wsd per update") { check("wsd per-update"); }

TEST_CASE("rsqrt with timm's defaults: timescale the warmup, linear decay") { check("rsqrt defaults"); }

TEST_CASE("rsqrt with a timescale, min_lr above the stable lr, warmup prefix") {
  check("rsqrt timescale+min_lr+prefix");
}

TEST_CASE("rsqrt per update with noise and cooldown") { check("rsqrt per-update+noise+cooldown"); }

TEST_CASE("bad arguments") {
  timm::test::load_builtin_plugins();
  auto optimizer = make_optimizer();
  auto a = wsd("wsd", 10, 5);
  a.decay_epochs = 6;  // more than epochs - warmup
  CHECK_THROWS_WITH_AS(timm::create_scheduler(optimizer, a),
                       doctest::Contains("needs 0 < --decay-epochs <= --epochs - --warmup-epochs, got a decay length "
                                         "of 6 and a stable + decay length of 5 epochs"),
                       timm::UsageError);
  a.decay_epochs = 0;
  CHECK_THROWS_WITH_AS(timm::create_scheduler(optimizer, a), doctest::Contains("decay length of 0"), timm::UsageError);
  a = wsd("wsd", 10, 2);
  a.decay_fn = "sqrt";
  CHECK_THROWS_WITH_AS(timm::create_scheduler(optimizer, a),
                       doctest::Contains("--lr-decay-fn must be one of linear, 1-sqrt, cosine, power, exp, got 'sqrt'"),
                       timm::UsageError);
  a = wsd("wsd", 10, 2);
  a.min_lr = -1e-3;
  CHECK_THROWS_WITH_AS(timm::create_scheduler(optimizer, a), doctest::Contains("--min-lr must be >= 0, got -0.001"),
                       timm::UsageError);
  a = wsd("rsqrt", 10, 0);  // the timescale defaults to the warmup: 0
  CHECK_THROWS_WITH_AS(timm::create_scheduler(optimizer, a), doctest::Contains("--lr-stable-timescale must be > 0"),
                       timm::UsageError);
  a.stable_timescale = -1;
  CHECK_THROWS_WITH_AS(timm::create_scheduler(optimizer, a),
                       doctest::Contains("--lr-stable-timescale must be > 0, got -1.0"), timm::UsageError);
}

}  // namespace test_wsd
