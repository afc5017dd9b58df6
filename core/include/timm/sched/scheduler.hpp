// The LR scheduler interface with timm's semantics, and creation by name.
//
// Like timm's Scheduler, a scheduler is stateless in time: the training loop
// calls step(epoch + 1, metric) at the end of each epoch and
// step_update(num_updates, metric) after every optimizer update; exactly one
// of the two has an effect, depending on --sched-on-updates. The base class
// holds what every timm scheduler shares (warmup, noise, per-group lr_scale);
// plugins implement lr_at().
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "timm/optim/optimizer.hpp"

namespace timm {

// scheduler_kwargs(args) of timm, plus updates_per_epoch.
struct SchedulerArgs {
  std::string sched = "cosine";
  int64_t num_epochs = 300;
  double decay_epochs = 90;
  std::vector<int64_t> decay_milestones{90, 180, 270};
  int64_t warmup_epochs = 5;
  int64_t cooldown_epochs = 0;
  int64_t patience_epochs = 10;
  double decay_rate = 0.1;
  double min_lr = 0.0;
  double warmup_lr = 1e-5;
  bool warmup_prefix = false;
  std::vector<double> noise;  // --lr-noise; empty: off
  double noise_pct = 0.67;
  double noise_std = 1.0;
  int64_t noise_seed = 42;
  double cycle_mul = 1.0;
  double cycle_decay = 0.5;
  int64_t cycle_limit = 1;
  double k_decay = 1.0;
  std::string plateau_mode = "max";
  bool step_on_epochs = true;
  int64_t updates_per_epoch = 0;
};

class Scheduler {
 public:
  virtual ~Scheduler() = default;

  // End of epoch: call with epoch + 1.
  virtual void step(int64_t epoch, std::optional<double> metric = std::nullopt);
  // After each optimizer update: call with the global update count.
  virtual void step_update(int64_t num_updates, std::optional<double> metric = std::nullopt);

  // The number of epochs to train, as create_scheduler_v2 returns it
  // (epochs + cooldown, cycles, warmup prefix).
  virtual int64_t num_epochs() const = 0;

  // The per-group lr at time t (epochs or updates), before noise and lr_scale.
  virtual std::vector<double> lr_at(int64_t t) const = 0;

 protected:
  // Sets every group to warmup_lr_init when warmup is on, as timm does at
  // construction. `t_in_epochs` is true unless --sched-on-updates.
  Scheduler(Optimizer& optimizer, bool t_in_epochs, std::vector<double> noise_range_t, double noise_pct,
            double noise_std, int64_t noise_seed);

  // Initial lr of each group (timm's base_values).
  const std::vector<double>& base_values() const { return base_values_; }
  Optimizer& optimizer() { return optimizer_; }
  // Applies lrs (noise, then lr_scale) to the groups.
  void update_groups(std::vector<double> values, int64_t t);

 private:
  Optimizer& optimizer_;
  bool t_in_epochs_;
  std::vector<double> base_values_;
  std::vector<double> noise_range_t_;
  double noise_pct_;
  double noise_std_;
  int64_t noise_seed_;
};

using SchedulerPtr = std::unique_ptr<Scheduler>;
using SchedulerFactory = std::function<SchedulerPtr(Optimizer&, const SchedulerArgs&)>;

// Creates the scheduler named args.sched from the registry, converting epoch
// lengths to updates when !step_on_epochs, as timm's create_scheduler_v2.
SchedulerPtr create_scheduler(Optimizer& optimizer, const SchedulerArgs& args);

}  // namespace timm
