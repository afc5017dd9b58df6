// Parity of "poly" with timm's create_scheduler_v2: the lr of every group at
// every epoch (or update) of whole runs, and num_epochs, within 1e-9
// relative. The power is --decay-rate; includes the spec's reference recipe
// (§4.6).
#include <doctest/doctest.h>

#include "sched_parity.hpp"
#include "test_support.hpp"

namespace test_poly {

namespace {

using timm::test::SchedCase;

timm::SchedulerArgs poly(int64_t epochs, double power, int64_t warmup_epochs) {
  timm::SchedulerArgs a = timm::test::sched_args("poly", epochs, warmup_epochs);
  a.decay_rate = power;
  return a;
}

std::vector<SchedCase> make_cases() {
  std::vector<SchedCase> cases;
  cases.push_back({"spec", poly(100, 0.5, 0), 0.1});

  auto a = poly(100, 2.0, 5);
  a.k_decay = 2;
  a.min_lr = 1e-5;
  cases.push_back({"power 2+k_decay 2+warmup", a, 0.1});

  a = poly(50, 0.9, 5);
  a.k_decay = 0.5;
  a.warmup_prefix = true;
  a.cooldown_epochs = 5;
  cases.push_back({"k_decay 0.5+prefix+cooldown", a, 0.1});

  a = poly(30, 1.0, 0);
  a.cycle_mul = 2;
  a.cycle_decay = 0.5;
  a.cycle_limit = 3;
  cases.push_back({"cycle_mul 2", a, 0.1});
  a = poly(20, 0.5, 2);
  a.cycle_limit = 3;
  a.cycle_decay = 0.7;
  a.cooldown_epochs = 3;
  cases.push_back({"3 cycles+cooldown", a, 0.1});

  a = poly(100, 0.5, 5);
  a.noise = {0.42, 0.9};
  cases.push_back({"noise range", a, 0.1});

  a = poly(6, 0.5, 1);
  a.warmup_lr = 0;
  a.step_on_epochs = false;
  a.updates_per_epoch = 7;
  a.noise = {0.5};
  a.k_decay = 1.5;
  cases.push_back({"per-update", a, 1.0});
  return cases;
}

void check(const std::string& name) {
  static timm::test::SchedOracle oracle(make_cases());
  oracle.expect_parity(name);
}

}  // namespace

TEST_CASE("spec recipe: power 0.5, 100 epochs, lr 0.1") { check("spec"); }

TEST_CASE("power and k_decay, with warmup, prefix, cooldown and min_lr") {
  check("power 2+k_decay 2+warmup");
  check("k_decay 0.5+prefix+cooldown");
}

TEST_CASE("cycles") {
  check("cycle_mul 2");
  check("3 cycles+cooldown");
}

TEST_CASE("noise [0.42, 0.9]") { check("noise range"); }

TEST_CASE("per-update with warmup, noise threshold and k_decay") { check("per-update"); }

}  // namespace test_poly
