// "tanh": timm's TanhLRScheduler (arXiv 1806.01593): hyperbolic-tangent
// decay from lb = -7 to ub = 3 with warmup, cycles (cycle_mul, cycle_decay,
// cycle_limit) and noise. Epochs past the last cycle run at lr_min.
//
// timm's quirk, kept: without a warmup prefix the warmup climbs linearly to
// the tanh schedule's value at warmup_t, not to the base lr.
#include <cmath>

#include "timm/base/error.hpp"
#include "timm/base/python_repr.hpp"
#include "timm/plugin/plugin.hpp"
#include "timm/sched/cycles.hpp"
#include "timm/sched/scheduler.hpp"

namespace timm {
namespace {

class TanhLRScheduler : public Scheduler {
 public:
  TanhLRScheduler(Optimizer& optimizer, const SchedulerParams& p)
      : Scheduler(optimizer, p.t_in_epochs, p.noise), cycles_(cycle_options(p, "tanh")) {
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

  std::optional<int64_t> cycle_length() const override { return cycles_length(cycles_, warmup()); }

 private:
  static constexpr double kLb = -7.0;
  static constexpr double kUb = 3.0;

  // timm's _get_lr past the warmup branch (t >= warmup_t).
  std::vector<double> decay_lrs(int64_t t) const {
    const CyclePosition at = cycle_position(cycles_, after_warmup(t));
    if (at.past_limit) return std::vector<double>(base_values().size(), cycles_.lr_min);
    const double tr = at.t_curr / at.t_i;
    const double th = std::tanh(kLb * (1. - tr) + kUb * tr);
    std::vector<double> lrs;
    for (double base : base_values()) {
      const double lr_max = base * at.gamma;
      lrs.push_back(cycles_.lr_min + 0.5 * (lr_max - cycles_.lr_min) * (1 - th));
    }
    return lrs;
  }

  CycleOptions cycles_;
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
