// Parity of "tanh" with timm's create_scheduler_v2: the lr of every group at
// every epoch (or update) of whole runs, and num_epochs, within 1e-9
// relative. Includes the spec's reference recipe (§4.6) and timm's warmup
// quirk without a warmup prefix (the warmup climbs to the schedule's value
// at warmup_t).
#include <doctest/doctest.h>

#include "sched_parity.hpp"
#include "test_support.hpp"

namespace test_tanh {

namespace {

using timm::test::sched_args;
using timm::test::SchedCase;

std::vector<SchedCase> make_cases() {
  std::vector<SchedCase> cases;
  auto a = sched_args("tanh", 100, 3);
  a.warmup_lr = 1e-4;
  cases.push_back({"spec", a, 0.1});

  a = sched_args("tanh", 100, 5);
  a.warmup_prefix = true;
  a.cooldown_epochs = 10;
  a.min_lr = 1e-6;
  cases.push_back({"prefix+cooldown+min_lr", a, 0.1});

  a = sched_args("tanh", 30, 0);
  a.cycle_mul = 2;
  a.cycle_decay = 0.5;
  a.cycle_limit = 3;
  cases.push_back({"cycle_mul 2", a, 0.1});
  a.warmup_epochs = 3;
  a.cooldown_epochs = 4;
  cases.push_back({"cycle_mul 2+warmup+cooldown", a, 0.1});

  a = sched_args("tanh", 20, 2);
  a.cycle_limit = 3;
  a.cycle_decay = 0.7;
  a.min_lr = 1e-5;
  cases.push_back({"3 cycles", a, 0.1});

  a = sched_args("tanh", 100, 5);
  a.noise = {0.42, 0.9};
  cases.push_back({"noise range", a, 0.1});

  a = sched_args("tanh", 6, 1);
  a.warmup_lr = 0;
  a.step_on_epochs = false;
  a.updates_per_epoch = 7;
  a.noise = {0.5};
  cases.push_back({"per-update", a, 1.0});
  a.warmup_prefix = true;
  a.cooldown_epochs = 2;
  cases.push_back({"per-update+prefix+cooldown", a, 1.0});
  return cases;
}

void check(const std::string& name) {
  static timm::test::SchedOracle oracle(make_cases());
  oracle.expect_parity(name);
}

}  // namespace

TEST_CASE("spec recipe: 100 epochs, warmup 3 from 1e-4 without prefix, lr 0.1") { check("spec"); }

TEST_CASE("warmup prefix, cooldown and min_lr") { check("prefix+cooldown+min_lr"); }

TEST_CASE("cycles: cycle_mul 2, cycle_limit 3, and three equal cycles") {
  check("cycle_mul 2");
  check("cycle_mul 2+warmup+cooldown");
  check("3 cycles");
}

TEST_CASE("noise [0.42, 0.9]") { check("noise range"); }

TEST_CASE("per-update with warmup, noise threshold, prefix and cooldown") {
  check("per-update");
  check("per-update+prefix+cooldown");
}

}  // namespace test_tanh
