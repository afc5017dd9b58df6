// Parity helpers for the scheduler tests: runs whole schedules through our
// create_scheduler and through timm's create_scheduler_v2
// (tests/oracle/sched_oracle.py, all cases of a test in one Python start) and
// compares the lr of every group at every epoch (or update), and num_epochs.
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include <torch/optim/sgd.h>
#include <nlohmann/json.hpp>

#include "test_support.hpp"
#include "timm/optim/optimizer.hpp"
#include "timm/sched/scheduler.hpp"

namespace timm::test {

// The groups the schedules run on: lr_scale 1 and, as layer decay would set
// it, 0.5.
inline constexpr double kGroupLrScales[] = {1.0, 0.5};

struct Schedule {
  int64_t num_epochs = 0;
  std::vector<std::vector<double>> lrs;  // [t][group], t = 0 .. num_epochs (x updates)
};

// The flags every scheduler test starts from: the name, the run's length and
// its warmup; each case sets the rest.
inline SchedulerArgs sched_args(const std::string& sched, int64_t num_epochs, int64_t warmup_epochs) {
  SchedulerArgs a;
  a.sched = sched;
  a.num_epochs = num_epochs;
  a.warmup_epochs = warmup_epochs;
  return a;
}

inline nlohmann::json to_json(const SchedulerArgs& a) {
  nlohmann::json j = {{"sched", a.sched},
                      {"num_epochs", a.num_epochs},
                      {"decay_epochs", nullptr},
                      {"decay_milestones", a.decay_milestones},
                      {"warmup_epochs", a.warmup_epochs},
                      {"cooldown_epochs", a.cooldown_epochs},
                      {"patience_epochs", a.patience_epochs},
                      {"decay_rate", a.decay_rate},
                      {"min_lr", a.min_lr},
                      {"warmup_lr", a.warmup_lr},
                      {"warmup_prefix", a.warmup_prefix},
                      {"noise", nullptr},
                      {"noise_pct", a.noise_pct},
                      {"noise_std", a.noise_std},
                      {"noise_seed", a.noise_seed},
                      {"cycle_mul", a.cycle_mul},
                      {"cycle_decay", a.cycle_decay},
                      {"cycle_limit", a.cycle_limit},
                      {"k_decay", a.k_decay},
                      {"plateau_mode", a.plateau_mode},
                      {"step_on_epochs", a.step_on_epochs},
                      {"updates_per_epoch", a.updates_per_epoch}};
  if (!a.noise.empty()) j["noise"] = a.noise;  // --lr-noise is a list
  if (a.decay_epochs) j["decay_epochs"] = *a.decay_epochs;
  if (a.decay_fn) j["decay_fn"] = *a.decay_fn;
  if (a.stable_timescale) j["stable_timescale"] = *a.stable_timescale;
  return j;
}

// A named schedule: the flags and the optimizer's lr, and optionally the
// metric passed to step(epoch + 1, metric) after each epoch (metrics[epoch];
// nullopt, or past the end: no metric), as train.py passes the eval metric.
struct SchedCase {
  std::string name;
  SchedulerArgs args;
  double lr = 0.1;
  std::vector<std::optional<double>> metrics = {};
};

inline nlohmann::json metrics_json(const std::vector<std::optional<double>>& metrics) {
  nlohmann::json j = nlohmann::json::array();
  for (const auto& m : metrics) j.push_back(m ? nlohmann::json(*m) : nlohmann::json(nullptr));
  return j;
}

// timm's schedules for all `cases`, in one Python start.
inline std::vector<Schedule> python_schedules(const std::vector<SchedCase>& cases) {
  nlohmann::json request = nlohmann::json::array();
  for (const auto& c : cases) {
    nlohmann::json r = {{"kwargs", to_json(c.args)}, {"lr", c.lr}};
    if (!c.metrics.empty()) r["metrics"] = metrics_json(c.metrics);
    request.push_back(r);
  }
  const nlohmann::json j = nlohmann::json::parse(run_oracle("sched_oracle.py", {request.dump()}));
  std::vector<Schedule> out;
  for (const auto& s : j) {
    out.push_back({s.at("num_epochs").get<int64_t>(), s.at("lrs").get<std::vector<std::vector<double>>>()});
  }
  return out;
}

// The loop of train.py: step_update(num_updates) after every update and
// step(epoch + 1) after every epoch; only one of them has an effect.
inline Schedule cpp_schedule(const SchedulerArgs& args, double lr,
                             const std::vector<std::optional<double>>& metrics = {}) {
  std::vector<ParamGroup> groups;
  for (double scale : kGroupLrScales) {
    ParamGroup group;
    group.params = {at::zeros({2}).requires_grad_()};
    group.lr_scale = scale;
    groups.push_back(std::move(group));
  }
  const auto defaults = torch::optim::SGDOptions(lr);
  TorchOptimizer optimizer(std::make_unique<torch::optim::SGD>(torch_param_groups(groups, defaults), defaults),
                           lr_scales(groups), "SGD");
  SchedulerPtr scheduler = create_scheduler(optimizer, args);
  Schedule s;
  s.num_epochs = scheduler->num_epochs();
  const int64_t upe = args.step_on_epochs ? 1 : args.updates_per_epoch;
  auto record = [&] {
    std::vector<double> lrs;
    for (std::size_t g = 0; g < optimizer.num_groups(); ++g) lrs.push_back(optimizer.lr(g));
    s.lrs.push_back(lrs);
  };
  record();
  for (int64_t t = 1; t <= s.num_epochs * upe; ++t) {
    scheduler->step_update(t);
    if (t % upe == 0) {
      const auto epoch = static_cast<std::size_t>(t / upe - 1);
      scheduler->step(t / upe, epoch < metrics.size() ? metrics[epoch] : std::nullopt);
    }
    record();
  }
  return s;
}

// Where two schedules differ: the largest relative difference over every
// step and group (NaN when an lr is NaN, so that `worst <= tol` fails) and
// the entries beyond the tolerance. Schedules of different shapes differ
// everywhere (`same_shape` false).
struct ScheduleDiff {
  struct Entry {
    std::size_t t = 0, group = 0;
    double ours = 0.0, timm = 0.0;
  };
  bool same_shape = true;
  double worst = 0.0;
  std::vector<Entry> beyond_tolerance;
};

inline ScheduleDiff compare_schedules(const Schedule& got, const Schedule& want, double rel_tol) {
  ScheduleDiff d;
  d.same_shape = got.num_epochs == want.num_epochs && got.lrs.size() == want.lrs.size();
  for (std::size_t t = 0; d.same_shape && t < want.lrs.size(); ++t) {
    d.same_shape = got.lrs[t].size() == want.lrs[t].size();
    for (std::size_t g = 0; d.same_shape && g < want.lrs[t].size(); ++g) {
      const double rel = relative_diff(got.lrs[t][g], want.lrs[t][g]);
      d.worst = worst_diff(d.worst, rel);
      if (!(rel <= rel_tol)) d.beyond_tolerance.push_back({t, g, got.lrs[t][g], want.lrs[t][g]});
    }
  }
  return d;
}

// Checks our schedule for `c` against timm's (`want`) within `rel_tol`
// (relative) and returns the largest relative difference.
inline double check_schedule(const SchedCase& c, const Schedule& want, double rel_tol = 1e-9) {
  const Schedule got = cpp_schedule(c.args, c.lr, c.metrics);
  const ScheduleDiff d = compare_schedules(got, want, rel_tol);
  REQUIRE_MESSAGE(d.same_shape, "epochs " << got.num_epochs << " vs timm " << want.num_epochs << ", steps "
                                          << got.lrs.size() << " vs timm " << want.lrs.size());
  for (const ScheduleDiff::Entry& e : d.beyond_tolerance) {
    FAIL_CHECK("t " << e.t << " group " << e.group << ": lr " << e.ours << " vs timm " << e.timm);
  }
  return d.worst;
}

// Runs every case of a test file through timm once, on first use.
class SchedOracle {
 public:
  explicit SchedOracle(std::vector<SchedCase> cases) : cases_(std::move(cases)) {}

  // Checks the case named `name` and returns the largest relative difference.
  double check(const std::string& name) {
    if (!ran_) {
      want_ = python_schedules(cases_);
      ran_ = true;
    }
    for (std::size_t i = 0; i < cases_.size(); ++i) {
      if (cases_[i].name == name) return check_schedule(cases_[i], want_.at(i));
    }
    FAIL("no schedule case named " << name);
    return 0.0;
  }

  // The test of one case: loads the built plugins, checks the case named
  // `name` and reports its largest relative difference from timm.
  void expect_parity(const std::string& name) {
    load_builtin_plugins();
    const double worst = check(name);
    MESSAGE(name << ": max relative lr difference " << worst);
  }

 private:
  std::vector<SchedCase> cases_;
  std::vector<Schedule> want_;
  bool ran_ = false;
};

}  // namespace timm::test
