// "poly": timm's PolyLRScheduler, lr = lr_min + (lr_max - lr_min) *
// (1 - t^k / T^k) ** power with power = --decay-rate, k = --k-decay
// (arXiv 2004.05909), warmup, cycles (cycle_mul, cycle_decay, cycle_limit)
// and noise. Epochs past the last cycle run at lr_min.
#include <cmath>

#include "timm/plugin/plugin.hpp"
#include "timm/sched/cycles.hpp"
#include "timm/sched/scheduler.hpp"

namespace timm {
namespace {

class PolyLRScheduler : public Scheduler {
 public:
  PolyLRScheduler(Optimizer& optimizer, const SchedulerParams& p)
      : Scheduler(optimizer, p.t_in_epochs, p.noise),
        cycles_(cycle_options(p, "poly")),
        power_(p.args.decay_rate),  // timm overloads --decay-rate as the power
        k_decay_(p.args.k_decay) {
    init_warmup(p.warmup);
  }

  std::vector<double> lr_at(int64_t t) const override {
    if (in_warmup(t)) return warmup_lrs(t);
    const CyclePosition at = cycle_position(cycles_, after_warmup(t));
    if (at.past_limit) return std::vector<double>(base_values().size(), cycles_.lr_min);
    const double f = std::pow(1 - std::pow(at.t_curr, k_decay_) / std::pow(at.t_i, k_decay_), power_);
    std::vector<double> lrs;
    for (double base : base_values()) {
      const double lr_max = base * at.gamma;
      lrs.push_back(cycles_.lr_min + (lr_max - cycles_.lr_min) * f);
    }
    return lrs;
  }

  std::optional<int64_t> cycle_length() const override { return cycles_length(cycles_, warmup()); }

 private:
  CycleOptions cycles_;
  double power_;
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
