// Parity of "constant" with timm's create_scheduler_v2 (a StepLRScheduler
// that never decays): the lr of every group at every epoch (or update) of
// whole runs, and num_epochs, within 1e-9 relative: warmup, warmup prefix,
// noise, per update.
#include <doctest/doctest.h>

#include "sched_parity.hpp"
#include "test_support.hpp"

namespace test_constant {

namespace {

using timm::test::sched_args;
using timm::test::SchedCase;

std::vector<SchedCase> make_cases() {
  std::vector<SchedCase> cases;
  cases.push_back({"defaults", sched_args("constant", 20, 5), 0.1});
  cases.push_back({"no warmup", sched_args("constant", 10, 0), 0.1});
  auto a = sched_args("constant", 15, 3);
  a.warmup_prefix = true;
  a.cooldown_epochs = 4;  // not counted: not a cycle-based scheduler
  a.noise = {0.2, 0.8};
  cases.push_back({"prefix+noise", a, 0.1});
  a = sched_args("constant", 4, 1);
  a.step_on_epochs = false;
  a.updates_per_epoch = 6;
  a.warmup_lr = 0;
  a.noise = {0.5};
  cases.push_back({"per-update", a, 1.0});
  return cases;
}

void check(const std::string& name) {
  static timm::test::SchedOracle oracle(make_cases());
  oracle.expect_parity(name);
}

}  // namespace

TEST_CASE("warmup 5 epochs from 1e-5, then the base lr") { check("defaults"); }

TEST_CASE("without warmup") { check("no warmup"); }

TEST_CASE("warmup prefix, cooldown and noise") { check("prefix+noise"); }

TEST_CASE("per update with warmup and noise") { check("per-update"); }

}  // namespace test_constant
