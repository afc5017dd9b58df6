// Parity of "step" with timm's create_scheduler_v2: the lr of every group at
// every epoch (or update) of whole runs, and num_epochs, within 1e-9
// relative.
#include <doctest/doctest.h>

#include "sched_parity.hpp"
#include "test_support.hpp"

namespace test_step {

namespace {

using timm::test::SchedCase;

timm::SchedulerArgs step(int64_t epochs, double decay_epochs, double decay_rate) {
  timm::SchedulerArgs a;
  a.sched = "step";
  a.num_epochs = epochs;
  a.decay_epochs = decay_epochs;
  a.decay_rate = decay_rate;
  return a;
}

std::vector<SchedCase> make_cases() {
  std::vector<SchedCase> cases;
  auto a = step(450, 2.4, 0.97);
  a.warmup_epochs = 5;
  a.warmup_lr = 1e-6;
  cases.push_back({"effnet-b2", a, 0.016});

  a = step(100, 2.4, 0.97);
  a.noise = {0.42, 0.9};
  cases.push_back({"noise", a, 0.1});

  a = step(60, 30, 0.1);
  a.warmup_prefix = true;
  cases.push_back({"warmup prefix", a, 0.1});

  a = timm::SchedulerArgs();
  a.sched = "step";
  cases.push_back({"defaults", a, 0.1});

  a = step(6, 1.5, 0.5);
  a.warmup_epochs = 1;
  a.step_on_epochs = false;
  a.updates_per_epoch = 7;
  a.noise = {0.5};
  cases.push_back({"per-update", a, 0.1});
  return cases;
}

void check(const std::string& name) {
  static timm::test::SchedOracle oracle(make_cases());
  oracle.expect_parity(name);
}

}  // namespace

TEST_CASE("EfficientNet-B2 recipe: 450 epochs, decay 2.4 at 0.97, warmup 5 from 1e-6") { check("effnet-b2"); }

TEST_CASE("step with noise, warmup prefix and train.py defaults") {
  check("noise");
  check("warmup prefix");
  check("defaults");
}

TEST_CASE("step per update with a fractional decay_t") { check("per-update"); }

TEST_CASE("Python's floor division of floats") {
  CHECK(timm::py_floordiv(7.0, 2.4) == 2.0);
  CHECK(timm::py_floordiv(4.8, 2.4) == 2.0);
  CHECK(timm::py_floordiv(0.0, 2.4) == 0.0);
  CHECK(timm::py_floordiv(-1.0, 2.4) == -1.0);
  CHECK(timm::py_floordiv(1.0, 0.1) == 9.0);  // as Python: 1 // 0.1 == 9.0
}

}  // namespace test_step
