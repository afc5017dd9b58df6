// Parity of "cosine" with timm's create_scheduler_v2: the lr of every group
// at every epoch (or update) of whole runs, and num_epochs, within 1e-9
// relative. The cases are the recipes of the spec's reference values (§4.6).
#include <doctest/doctest.h>

#include "sched_parity.hpp"
#include "test_support.hpp"
#include "timm/base/error.hpp"

namespace test_cosine {

namespace {

using timm::test::sched_args;
using timm::test::SchedCase;

std::vector<SchedCase> make_cases() {
  std::vector<SchedCase> cases;
  auto a = sched_args("cosine", 150, 5);
  a.warmup_lr = 1e-5;
  cases.push_back({"seresnet34", a, 0.4});

  a = sched_args("cosine", 100, 5);
  a.warmup_prefix = true;
  a.cooldown_epochs = 10;
  a.min_lr = 1e-6;
  cases.push_back({"prefix+cooldown+min_lr", a, 0.1});

  a = sched_args("cosine", 30, 0);
  a.cycle_mul = 2;
  a.cycle_decay = 0.5;
  a.cycle_limit = 3;
  cases.push_back({"cycle_mul 2", a, 0.1});
  a.warmup_epochs = 3;
  a.warmup_prefix = true;
  a.cooldown_epochs = 4;
  cases.push_back({"cycle_mul 2+prefix+cooldown", a, 0.1});
  a = sched_args("cosine", 20, 2);
  a.cycle_limit = 3;
  a.cycle_decay = 0.7;
  cases.push_back({"3 cycles", a, 0.1});

  a = sched_args("cosine", 100, 0);
  a.k_decay = 2;
  cases.push_back({"k_decay 2", a, 0.1});

  a = sched_args("cosine", 100, 5);
  a.noise = {0.42, 0.9};
  a.noise_pct = 0.67;
  a.noise_seed = 42;
  cases.push_back({"noise range", a, 0.1});
  a.noise = {0.5};
  a.noise_pct = 0.3;
  a.noise_std = 0.8;
  a.noise_seed = 7;
  cases.push_back({"noise threshold", a, 0.1});

  a = sched_args("cosine", 10, 1);
  a.warmup_lr = 0;
  a.step_on_epochs = false;
  a.updates_per_epoch = 100;
  cases.push_back({"per-update", a, 1.0});
  a.warmup_prefix = true;
  a.cooldown_epochs = 2;
  a.noise = {0.3, 0.8};
  a.updates_per_epoch = 7;
  cases.push_back({"per-update+prefix+cooldown+noise", a, 1.0});
  return cases;
}

void check(const std::string& name) {
  static timm::test::SchedOracle oracle(make_cases());
  oracle.expect_parity(name);
}

}  // namespace

TEST_CASE("SE-ResNet34 recipe: 150 epochs, warmup 5 from 1e-5") { check("seresnet34"); }

TEST_CASE("warmup prefix, cooldown and min_lr") { check("prefix+cooldown+min_lr"); }

TEST_CASE("cycles: cycle_mul 2, cycle_decay 0.5, cycle_limit 3") {
  check("cycle_mul 2");
  check("cycle_mul 2+prefix+cooldown");
  check("3 cycles");
}

TEST_CASE("k_decay 2") { check("k_decay 2"); }

TEST_CASE("noise [0.42, 0.9], pct 0.67, seed 42, and a noise threshold") {
  check("noise range");
  check("noise threshold");
}

TEST_CASE("per-update: 10 epochs x 100 updates, warmup 1 epoch from 0") {
  check("per-update");
  check("per-update+prefix+cooldown+noise");
}

TEST_CASE("stepping on updates needs updates_per_epoch; unknown names are usage errors") {
  timm::test::load_builtin_plugins();
  auto a = sched_args("cosine", 10, 1);
  a.step_on_epochs = false;
  CHECK_THROWS_AS(timm::scheduler_params(a), timm::UsageError);
  a = sched_args("cosine", 10, 1);
  a.sched = "cosin";
  timm::ParamGroup group;
  group.params = {at::zeros({1}).requires_grad_()};
  const auto defaults = torch::optim::SGDOptions(0.1);
  timm::TorchOptimizer optimizer(
      std::make_unique<torch::optim::SGD>(timm::torch_param_groups({group}, defaults), defaults), {1.0}, "SGD");
  CHECK_THROWS_WITH_AS(timm::create_scheduler(optimizer, a), doctest::Contains("cosine"), timm::UsageError);
}

}  // namespace test_cosine
