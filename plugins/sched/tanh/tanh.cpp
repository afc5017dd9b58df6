// "tanh": timm's TanhLRScheduler (arXiv 1806.01593): hyperbolic-tangent
// decay from lb = -7 to ub = 3 with warmup, cycles (cycle_mul, cycle_decay,
// cycle_limit) and noise. Epochs past the last cycle run at lr_min.
//
// timm's quirk, kept: without a warmup prefix the warmup climbs linearly to
// the tanh schedule's value at warmup_t, not to the base lr.
#include <cmath>

#include "timm/core/error.hpp"
#include "timm/core/plugin.hpp"
#include "timm/core/python_repr.hpp"
#include "timm/sched/scheduler.hpp"

namespace timm {
namespace {

class TanhLRScheduler : public Scheduler {
 public:
  TanhLRScheduler(Optimizer& optimizer, const SchedulerParams& p)
      : Scheduler(optimizer, p.t_in_epochs, p.noise),
        t_initial_(p.t_initial),
        lr_min_(p.args.min_lr),
        cycle_mul_(p.args.cycle_mul),
        cycle_decay_(p.args.cycle_decay),
        cycle_limit_(p.args.cycle_limit) {
    if (t_initial_ <= 0) throw UsageError("scheduler 'tanh': --epochs must be > 0, got " + std::to_string(t_initial_));
    if (lr_min_ < 0) throw UsageError("scheduler 'tanh': --min-lr must be >= 0, got " + python_float_repr(lr_min_));
    if (cycle_limit_ < 0) {
      throw UsageError("scheduler 'tanh': --lr-cycle-limit must be >= 0, got " + std::to_string(cycle_limit_));
    }
    if (p.warmup.t < 0) {
      throw UsageError("scheduler 'tanh': --warmup-epochs must be >= 0, got " + std::to_string(p.warmup.t));
    }
    if (p.warmup.lr_init < 0) {
      throw UsageError("scheduler 'tanh': --warmup-lr must be >= 0, got " + python_float_repr(p.warmup.lr_init));
    }
    init_warmup(p.warmup);
    if (p.warmup.t > 0) {
      // t_v = base_values if warmup_prefix else _get_lr(warmup_t)
      const std::vector<double> target = p.warmup.prefix ? base_values() : decay_lrs(p.warmup.t);
      for (double v : target) warmup_steps_.push_back((v - p.warmup.lr_init) / static_cast<double>(p.warmup.t));
    }
  }

  std::vector<double> lr_at(int64_t t) const override {
    if (in_warmup(t)) {
      std::vector<double> lrs;
      for (double s : warmup_steps_) lrs.push_back(warmup().lr_init + static_cast<double>(t) * s);
      return lrs;
    }
    return decay_lrs(t);
  }

  std::optional<int64_t> cycle_length() const override {
    const int64_t cycles = std::max<int64_t>(1, cycle_limit_);
    int64_t t = 0;
    if (cycle_mul_ == 1.0) {
      t = t_initial_ * cycles;
    } else {
      const double c = static_cast<double>(cycles);
      t = static_cast<int64_t>(
          std::floor(-static_cast<double>(t_initial_) * (std::pow(cycle_mul_, c) - 1) / (1 - cycle_mul_)));
    }
    return warmup().prefix ? t + warmup().t : t;
  }

 private:
  static constexpr double kLb = -7.0;
  static constexpr double kUb = 3.0;

  // timm's _get_lr past the warmup branch (t >= warmup_t).
  std::vector<double> decay_lrs(int64_t t_in) const {
    const int64_t t = after_warmup(t_in);
    const double T = static_cast<double>(t_initial_);
    double i = 0;
    double t_i = T;
    double t_curr = 0;
    if (cycle_mul_ != 1.0) {
      i = std::floor(std::log(1 - static_cast<double>(t) / T * (1 - cycle_mul_)) / std::log(cycle_mul_));
      t_i = std::pow(cycle_mul_, i) * T;
      t_curr = static_cast<double>(t) - (1 - std::pow(cycle_mul_, i)) / (1 - cycle_mul_) * T;
    } else {
      const int64_t cycle = floor_div(t, t_initial_);
      i = static_cast<double>(cycle);
      t_curr = static_cast<double>(t - t_initial_ * cycle);
    }
    std::vector<double> lrs;
    if (i < static_cast<double>(cycle_limit_)) {
      const double gamma = std::pow(cycle_decay_, i);
      const double tr = t_curr / t_i;
      const double th = std::tanh(kLb * (1. - tr) + kUb * tr);
      for (double base : base_values()) {
        const double lr_max = base * gamma;
        lrs.push_back(lr_min_ + 0.5 * (lr_max - lr_min_) * (1 - th));
      }
    } else {
      lrs.assign(base_values().size(), lr_min_);
    }
    return lrs;
  }

  static int64_t floor_div(int64_t a, int64_t b) {
    const int64_t q = a / b;
    return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
  }

  int64_t t_initial_;
  double lr_min_;
  double cycle_mul_;
  double cycle_decay_;
  int64_t cycle_limit_;
  std::vector<double> warmup_steps_;
};

}  // namespace
}  // namespace timm

TIMM_PLUGIN("tanh") {
  registrar.add_scheduler("tanh", "Hyperbolic-tangent decay with restarts and warmup (timm TanhLRScheduler)",
                          [](timm::Optimizer& optimizer, const timm::SchedulerParams& params) -> timm::SchedulerPtr {
                            return std::make_unique<timm::TanhLRScheduler>(optimizer, params);
                          });
}
