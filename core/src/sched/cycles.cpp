#include "timm/sched/cycles.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "timm/base/error.hpp"
#include "timm/base/python_repr.hpp"

namespace timm {
namespace {

// Python's // on integers: rounds toward negative infinity.
int64_t floor_div(int64_t a, int64_t b) {
  const int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

}  // namespace

CycleOptions cycle_options(const SchedulerParams& params, const char* scheduler) {
  CycleOptions cycles{params.t_initial, params.args.min_lr, params.args.cycle_mul, params.args.cycle_decay,
                      params.args.cycle_limit};
  const std::string where = std::string("scheduler '") + scheduler + "': ";
  if (cycles.t_initial <= 0) throw UsageError(where + "--epochs must be > 0, got " + std::to_string(cycles.t_initial));
  if (cycles.lr_min < 0) throw UsageError(where + "--min-lr must be >= 0, got " + python_float_repr(cycles.lr_min));
  if (cycles.cycle_limit < 0) {
    throw UsageError(where + "--lr-cycle-limit must be >= 0, got " + std::to_string(cycles.cycle_limit));
  }
  return cycles;
}

CyclePosition cycle_position(const CycleOptions& cycles, int64_t t) {
  const double T = static_cast<double>(cycles.t_initial);
  double index = 0;
  CyclePosition position;
  position.t_i = T;
  if (cycles.cycle_mul != 1.0) {
    // Python's math.log(x, base) is log(x) / log(base).
    index = std::floor(std::log(1 - static_cast<double>(t) / T * (1 - cycles.cycle_mul)) / std::log(cycles.cycle_mul));
    position.t_i = std::pow(cycles.cycle_mul, index) * T;
    position.t_curr = static_cast<double>(t) - (1 - std::pow(cycles.cycle_mul, index)) / (1 - cycles.cycle_mul) * T;
  } else {
    const int64_t cycle = floor_div(t, cycles.t_initial);
    index = static_cast<double>(cycle);
    position.t_curr = static_cast<double>(t - cycles.t_initial * cycle);
  }
  position.past_limit = index >= static_cast<double>(cycles.cycle_limit);
  position.gamma = std::pow(cycles.cycle_decay, index);
  return position;
}

int64_t cycles_length(const CycleOptions& cycles, const WarmupOptions& warmup) {
  const int64_t count = std::max<int64_t>(1, cycles.cycle_limit);
  int64_t t = 0;
  if (cycles.cycle_mul == 1.0) {
    t = cycles.t_initial * count;
  } else {
    t = static_cast<int64_t>(std::floor(-static_cast<double>(cycles.t_initial) *
                                        (std::pow(cycles.cycle_mul, static_cast<double>(count)) - 1) /
                                        (1 - cycles.cycle_mul)));
  }
  return warmup.prefix ? t + warmup.t : t;
}

}  // namespace timm
