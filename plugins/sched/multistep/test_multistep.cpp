// Parity of "multistep" with timm's create_scheduler_v2: the lr of every
// group at every epoch (or update) of whole runs, and num_epochs, within
// 1e-9 relative. Milestone m takes effect at t == m - 1 (timm's
// bisect_right(milestones, t + 1)); includes the spec's reference recipe
// (§4.6).
#include <doctest/doctest.h>

#include "sched_parity.hpp"
#include "test_support.hpp"

namespace test_multistep {

namespace {

using timm::test::SchedCase;

timm::SchedulerArgs multistep(int64_t epochs, std::vector<int64_t> milestones, double rate, int64_t warmup_epochs) {
  timm::SchedulerArgs a = timm::test::sched_args("multistep", epochs, warmup_epochs);
  a.decay_milestones = std::move(milestones);
  a.decay_rate = rate;
  return a;
}

std::vector<SchedCase> make_cases() {
  std::vector<SchedCase> cases;
  cases.push_back({"spec", multistep(300, {90, 180, 270}, 0.1, 0), 0.1});

  auto a = multistep(15, {3, 7, 12}, 0.5, 4);
  a.warmup_lr = 1e-4;
  cases.push_back({"warmup", a, 0.1});
  a.warmup_prefix = true;
  cases.push_back({"warmup prefix", a, 0.1});

  a = multistep(20, {1, 5, 5, 10}, 0.3, 0);
  a.noise = {0.2, 0.8};
  cases.push_back({"repeated milestone+noise", a, 0.1});

  a = multistep(6, {2, 4}, 0.5, 1);
  a.step_on_epochs = false;
  a.updates_per_epoch = 5;
  a.noise = {0.5};
  cases.push_back({"per-update", a, 1.0});
  a.warmup_prefix = true;
  cases.push_back({"per-update+prefix", a, 1.0});
  return cases;
}

void check(const std::string& name) {
  static timm::test::SchedOracle oracle(make_cases());
  oracle.expect_parity(name);
}

}  // namespace

TEST_CASE("spec recipe: milestones [90, 180, 270], rate 0.1") { check("spec"); }

TEST_CASE("warmup with and without prefix") {
  check("warmup");
  check("warmup prefix");
}

TEST_CASE("a repeated milestone, milestone 1, and noise") { check("repeated milestone+noise"); }

TEST_CASE("per-update milestones in updates, with noise threshold") {
  check("per-update");
  check("per-update+prefix");
}

}  // namespace test_multistep
