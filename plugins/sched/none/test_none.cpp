// Parity of "none" with timm's create_scheduler_v2, which returns no
// scheduler: the lr of every group stays the optimizer's (no warmup, noise or
// lr_scale) at every epoch (or update) of whole runs, and num_epochs (plus
// the warmup with a warmup prefix), within 1e-9 relative.
#include <doctest/doctest.h>

#include "sched_parity.hpp"
#include "test_support.hpp"

namespace test_none {

namespace {

using timm::test::sched_args;
using timm::test::SchedCase;

std::vector<SchedCase> make_cases() {
  std::vector<SchedCase> cases;
  cases.push_back({"defaults", sched_args("none", 10, 5), 0.1});
  auto a = sched_args("none", 8, 3);
  a.warmup_prefix = true;
  a.cooldown_epochs = 2;
  a.noise = {0.1};
  cases.push_back({"prefix+noise", a, 0.1});
  a = sched_args("none", 3, 1);
  a.step_on_epochs = false;
  a.updates_per_epoch = 5;
  cases.push_back({"per-update", a, 0.5});
  return cases;
}

void check(const std::string& name) {
  static timm::test::SchedOracle oracle(make_cases());
  oracle.expect_parity(name);
}

}  // namespace

TEST_CASE("the optimizer's lr for the whole run, no lr_scale") { check("defaults"); }

TEST_CASE("warmup prefix adds epochs, noise and warmup are ignored") { check("prefix+noise"); }

TEST_CASE("per update") { check("per-update"); }

}  // namespace test_none
