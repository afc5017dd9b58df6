// The LR scheduler interface with timm's semantics, and creation by name.
//
// Like timm's Scheduler, a scheduler is stateless in time: the training loop
// calls step(epoch + 1, metric) at the end of each epoch and
// step_update(num_updates, metric) after every optimizer update; exactly one
// of the two has an effect, depending on --sched-on-updates. The base class
// holds what every timm scheduler shares (initial lrs, warmup, noise,
// per-group lr_scale); plugins implement lr_at().
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
  // timm's None (nullopt): the scheduler's default, 90 for decay_t; a
  // scheduler may read args.decay_epochs for a default of its own.
  std::optional<double> decay_epochs = 90;
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
  std::optional<std::string> decay_fn;     // --lr-decay-fn; nullopt: the scheduler's default
  std::optional<double> stable_timescale;  // --lr-stable-timescale, in epochs; nullopt: the scheduler's default
  std::string plateau_mode = "max";
  bool step_on_epochs = true;
  int64_t updates_per_epoch = 0;
};

// timm's noise arguments, lengths in t units (epochs or updates).
struct NoiseOptions {
  // Empty: no noise; one value: on for t >= range_t[0]; two: on for
  // range_t[0] <= t < range_t[1].
  std::vector<double> range_t;
  double pct = 0.67;
  double std = 1.0;  // timm multiplies the N(0,1) draw by it
  int64_t seed = 42;
};

// timm's warmup arguments, in t units.
struct WarmupOptions {
  double lr_init = 0.0;
  int64_t t = 0;  // 0: no warmup
  bool prefix = false;
};

// What create_scheduler hands a scheduler factory: the flags, plus every
// length converted to t units (x updates_per_epoch when !step_on_epochs), as
// timm's create_scheduler_v2 does before it calls a constructor.
struct SchedulerParams {
  SchedulerArgs args;
  bool t_in_epochs = true;
  int64_t t_initial = 0;  // num_epochs in t units
  double decay_t = 0.0;   // decay_epochs (90 when unset) in t units (may be fractional)
  std::vector<int64_t> decay_milestones;
  int64_t cooldown_t = 0;
  WarmupOptions warmup;
  NoiseOptions noise;
};

class Scheduler {
 public:
  virtual ~Scheduler() = default;

  // End of epoch: call with epoch + 1. No effect when stepping on updates.
  virtual void step(int64_t epoch, std::optional<double> metric = std::nullopt);
  // After each optimizer update: call with the global update count. No
  // effect when stepping on epochs.
  virtual void step_update(int64_t num_updates, std::optional<double> metric = std::nullopt);

  // The per-group lr at time t (epochs or updates), before noise and lr_scale.
  virtual std::vector<double> lr_at(int64_t t) const = 0;

  // timm's get_cycle_length() for cycle-based schedulers (cosine, tanh,
  // poly): the cycles' length in t units, warmup prefix included. nullopt for
  // the others.
  virtual std::optional<int64_t> cycle_length() const { return std::nullopt; }

  // The number of epochs to train, as create_scheduler_v2 returns it (epochs
  // + cooldown, cycles, warmup prefix); set by create_scheduler.
  int64_t num_epochs() const { return num_epochs_; }

  // True when t counts epochs (step() is effective), false for updates.
  bool t_in_epochs() const { return t_in_epochs_; }

  // Initial lr of each group (timm's base_values).
  const std::vector<double>& base_values() const { return base_values_; }

  // The noise multiplier (n in lr + lr * n) at t, or 0 outside the range.
  double noise_at(int64_t t) const;

 protected:
  // As timm's Scheduler.__init__: every group's initial_lr defaults to its
  // current lr, base_values are the initial lrs, and the groups are set to
  // them (x lr_scale).
  Scheduler(Optimizer& optimizer, bool t_in_epochs, NoiseOptions noise);

  Optimizer& optimizer() { return optimizer_; }

  // Applies lrs (times lr_scale) to the groups.
  void update_groups(const std::vector<double>& values);

  // timm's warmup, shared by its schedulers: warmup_steps from base_values,
  // and the groups set to warmup.lr_init when warmup.t > 0.
  void init_warmup(const WarmupOptions& warmup);
  const WarmupOptions& warmup() const { return warmup_; }
  bool in_warmup(int64_t t) const { return t < warmup_.t; }
  std::vector<double> warmup_lrs(int64_t t) const;
  // t on the decay clock: shifted by warmup.t with a warmup prefix.
  int64_t after_warmup(int64_t t) const { return warmup_.prefix ? t - warmup_.t : t; }

 private:
  friend std::unique_ptr<Scheduler> create_scheduler(Optimizer& optimizer, const SchedulerArgs& args);

  void apply(int64_t t);

  Optimizer& optimizer_;
  bool t_in_epochs_;
  std::vector<double> base_values_;
  NoiseOptions noise_;
  WarmupOptions warmup_;
  std::vector<double> warmup_steps_;
  int64_t num_epochs_ = 0;
};

using SchedulerPtr = std::unique_ptr<Scheduler>;
using SchedulerFactory = std::function<SchedulerPtr(Optimizer&, const SchedulerParams&)>;

// The lengths of `args` in t units, as create_scheduler_v2 computes them.
// Throws UsageError when stepping on updates without updates_per_epoch.
SchedulerParams scheduler_params(const SchedulerArgs& args);

// Creates the scheduler named args.sched from the registry, as timm's
// create_scheduler_v2, and sets its num_epochs(). Unknown names throw
// UsageError with the nearest known names.
SchedulerPtr create_scheduler(Optimizer& optimizer, const SchedulerArgs& args);

// Python's floor division of floats (t // decay_t), which can differ from
// floor(a / b) by one where a / b rounds up to an integer.
double py_floordiv(double a, double b);

}  // namespace timm
