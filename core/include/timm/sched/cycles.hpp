// timm's restart cycles (SGDR), shared by the cosine, tanh and poly
// schedulers: where a time step falls in its cycle, and the length of all
// cycles together.
#pragma once

#include <cstdint>

#include "timm/sched/scheduler.hpp"

namespace timm {

struct CycleOptions {
  int64_t t_initial = 0;  // first cycle's length, in epochs or updates
  double lr_min = 0.0;
  double cycle_mul = 1.0;
  double cycle_decay = 0.5;
  int64_t cycle_limit = 1;
};

// The cycle options of `params`, checked: t_initial > 0 and lr_min >= 0,
// else a UsageError naming the scheduler and the flag.
CycleOptions cycle_options(const SchedulerParams& params, const char* scheduler);

struct CyclePosition {
  bool past_limit = false;  // beyond cycle_limit (the cooldown): lr is lr_min
  double gamma = 1.0;       // cycle_decay ** cycle index
  double t_curr = 0.0;      // time since the cycle started
  double t_i = 0.0;         // this cycle's length
};

// Where `t` (already shifted past a warmup prefix) falls, as timm's
// _get_lr computes i, t_i and t_curr.
CyclePosition cycle_position(const CycleOptions& cycles, int64_t t);

// timm's get_cycle_length(): the cycles' total length, plus the warmup when it
// is a prefix.
int64_t cycles_length(const CycleOptions& cycles, const WarmupOptions& warmup);

}  // namespace timm
