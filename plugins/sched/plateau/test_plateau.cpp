// Parity of "plateau" with timm's create_scheduler_v2 (PlateauLRScheduler on
// torch's ReduceLROnPlateau): the lr of every group at every epoch of whole
// runs, and num_epochs, within 1e-9 relative, with the same scripted metric
// sequence passed to step(epoch + 1, metric) on both sides (gaps: no metric).
#include <doctest/doctest.h>

#include <cmath>

#include "sched_parity.hpp"
#include "test_support.hpp"
#include "timm/base/error.hpp"

namespace test_plateau {

namespace {

using timm::test::SchedCase;
using Metrics = std::vector<std::optional<double>>;

timm::SchedulerArgs plateau(int64_t epochs, const std::string& mode, int64_t patience, double decay_rate,
                            int64_t warmup_epochs) {
  timm::SchedulerArgs a = timm::test::sched_args("plateau", epochs, warmup_epochs);
  a.plateau_mode = mode;
  a.patience_epochs = patience;
  a.decay_rate = decay_rate;
  return a;
}

// An accuracy that rises, then creeps up by less than the 1e-4 relative
// threshold, rises again and falls back.
Metrics accuracy(int64_t n) {
  Metrics m;
  for (int64_t e = 0; e < n; ++e) {
    if (e < 8) {
      m.push_back(50.0 + 2.0 * static_cast<double>(e));
    } else if (e < 20) {
      m.push_back(64.0 + 0.001 * static_cast<double>(e - 8));  // below threshold: not better
    } else if (e < 24) {
      m.push_back(66.0 + 0.5 * static_cast<double>(e - 20));
    } else {
      m.push_back(60.0 - 0.1 * static_cast<double>(e));
    }
  }
  return m;
}

// A loss with plateaus and epochs without a metric.
Metrics loss_with_gaps(int64_t n) {
  Metrics m;
  for (int64_t e = 0; e < n; ++e) {
    if (e % 7 == 3) {
      m.push_back(std::nullopt);
    } else {
      m.push_back(3.0 * std::exp(-0.1 * static_cast<double>(e / 4 * 4)) + 0.25);
    }
  }
  return m;
}

std::vector<SchedCase> make_cases() {
  std::vector<SchedCase> cases;
  auto a = plateau(40, "max", 2, 0.5, 3);
  a.min_lr = 0.01;
  cases.push_back({"max+warmup+min_lr", a, 0.1, accuracy(40)});

  a = plateau(30, "min", 0, 0.3, 0);
  a.noise = {0.3, 0.8};
  cases.push_back({"min+gaps+noise", a, 0.1, loss_with_gaps(30)});
  a.patience_epochs = 1;
  a.warmup_epochs = 2;
  a.noise = {0.5};
  a.noise_pct = 0.3;
  a.noise_seed = 7;
  cases.push_back({"min+warmup+noise threshold", a, 0.1, loss_with_gaps(30)});

  // Group 1's lr (x0.5) would drop by less than ReduceLROnPlateau's eps 1e-8.
  a = plateau(12, "max", 1, 0.5, 0);
  cases.push_back({"eps", a, 3e-8, Metrics(12, 1.0)});

  a = timm::SchedulerArgs();
  a.sched = "plateau";
  a.num_epochs = 40;
  a.warmup_prefix = true;  // ignored by the scheduler, counted in num_epochs
  a.noise = {0.5};
  cases.push_back({"defaults+prefix+noise", a, 0.1, accuracy(45)});

  a = plateau(10, "max", 0, 0.1, 2);
  a.noise = {0.2};
  cases.push_back({"no metric", a, 0.1, {}});
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

TEST_CASE("mode max: patience 2, factor 0.5, warmup 3, min_lr, sub-threshold improvements") {
  check("max+warmup+min_lr");
}

TEST_CASE("mode min: epochs without a metric, noise applied and removed before the next step") {
  check("min+gaps+noise");
  check("min+warmup+noise threshold");
}

TEST_CASE("reductions smaller than eps 1e-8 are skipped per group") { check("eps"); }

TEST_CASE("train.py defaults with a warmup prefix, and no metric at all") {
  check("defaults+prefix+noise");
  check("no metric");
}

TEST_CASE("plateau refuses --sched-on-updates and a factor >= 1 as usage errors") {
  timm::test::load_builtin_plugins();
  auto a = plateau(10, "max", 2, 0.5, 1);
  a.step_on_epochs = false;
  a.updates_per_epoch = 10;
  auto optimizer = make_optimizer();
  CHECK_THROWS_WITH_AS(timm::create_scheduler(optimizer, a), doctest::Contains("plateau"), timm::UsageError);
  a = plateau(10, "max", 2, 1.0, 1);
  CHECK_THROWS_AS(timm::create_scheduler(optimizer, a), timm::UsageError);
  a = plateau(10, "mean", 2, 0.5, 1);
  CHECK_THROWS_AS(timm::create_scheduler(optimizer, a), timm::UsageError);
}

}  // namespace test_plateau
