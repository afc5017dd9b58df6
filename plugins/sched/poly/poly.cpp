// "poly": timm's PolyLRScheduler, lr = lr_min + (lr_max - lr_min) *
// (1 - t^k / T^k) ** power with power = --decay-rate, k = --k-decay
// (arXiv 2004.05909), warmup, cycles (cycle_mul, cycle_decay, cycle_limit)
// and noise. Epochs past the last cycle run at lr_min.
#include <cmath>

#include "timm/core/error.hpp"
#include "timm/core/plugin.hpp"
#include "timm/core/python_repr.hpp"
#include "timm/sched/scheduler.hpp"

namespace timm {
namespace {

class PolyLRScheduler : public Scheduler {
 public:
  PolyLRScheduler(Optimizer& optimizer, const SchedulerParams& p)
      : Scheduler(optimizer, p.t_in_epochs, p.noise),
        t_initial_(p.t_initial),
        power_(p.args.decay_rate),  // timm overloads --decay-rate as the power
        lr_min_(p.args.min_lr),
        cycle_mul_(p.args.cycle_mul),
        cycle_decay_(p.args.cycle_decay),
        cycle_limit_(p.args.cycle_limit),
        k_decay_(p.args.k_decay) {
    if (t_initial_ <= 0) throw UsageError("scheduler 'poly': --epochs must be > 0, got " + std::to_string(t_initial_));
    if (lr_min_ < 0) throw UsageError("scheduler 'poly': --min-lr must be >= 0, got " + python_float_repr(lr_min_));
    init_warmup(p.warmup);
  }

  std::vector<double> lr_at(int64_t t_in) const override {
    if (in_warmup(t_in)) return warmup_lrs(t_in);
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
    const double gamma = std::pow(cycle_decay_, i);
    std::vector<double> lrs;
    if (i < static_cast<double>(cycle_limit_)) {
      const double f = std::pow(1 - std::pow(t_curr, k_decay_) / std::pow(t_i, k_decay_), power_);
      for (double base : base_values()) {
        const double lr_max = base * gamma;
        lrs.push_back(lr_min_ + (lr_max - lr_min_) * f);
      }
    } else {
      lrs.assign(base_values().size(), lr_min_);
    }
    return lrs;
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
  static int64_t floor_div(int64_t a, int64_t b) {
    const int64_t q = a / b;
    return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
  }

  int64_t t_initial_;
  double power_;
  double lr_min_;
  double cycle_mul_;
  double cycle_decay_;
  int64_t cycle_limit_;
  double k_decay_;
};

}  // namespace
}  // namespace timm

TIMM_PLUGIN("poly") {
  registrar.add_scheduler("poly", "Polynomial decay with k-decay, cycles and warmup (timm PolyLRScheduler)",
                          [](timm::Optimizer& optimizer, const timm::SchedulerParams& params) -> timm::SchedulerPtr {
                            return std::make_unique<timm::PolyLRScheduler>(optimizer, params);
                          });
}
