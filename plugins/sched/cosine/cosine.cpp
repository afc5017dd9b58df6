// "cosine": timm's CosineLRScheduler (SGDR, arXiv 1608.03983) with warmup,
// cycles (cycle_mul, cycle_decay, cycle_limit), k-decay and noise. Epochs
// past the last cycle (cooldown) run at lr_min.
#include <cmath>
#include <numbers>

#include "timm/plugin/plugin.hpp"
#include "timm/sched/cycles.hpp"
#include "timm/sched/scheduler.hpp"

namespace timm {
namespace {

class CosineLRScheduler : public Scheduler {
 public:
  CosineLRScheduler(Optimizer& optimizer, const SchedulerParams& p)
      : Scheduler(optimizer, p.t_in_epochs, p.noise), cycles_(cycle_options(p, "cosine")), k_decay_(p.args.k_decay) {
    init_warmup(p.warmup);
  }

  std::vector<double> lr_at(int64_t t) const override {
    if (in_warmup(t)) return warmup_lrs(t);
    const CyclePosition at = cycle_position(cycles_, after_warmup(t));
    std::vector<double> lrs;
    for (double base : base_values()) {
      if (at.past_limit) {
        lrs.push_back(cycles_.lr_min);
        continue;
      }
      const double lr_max = base * at.gamma;
      const double c = std::cos(std::numbers::pi * std::pow(at.t_curr, k_decay_) / std::pow(at.t_i, k_decay_));
      lrs.push_back(cycles_.lr_min + 0.5 * (lr_max - cycles_.lr_min) * (1 + c));
    }
    return lrs;
  }

  std::optional<int64_t> cycle_length() const override { return cycles_length(cycles_, warmup()); }

 private:
  CycleOptions cycles_;
  double k_decay_;
};

}  // namespace
}  // namespace timm

TIMM_PLUGIN("cosine") {
  registrar.add_scheduler("cosine", "Cosine decay with restarts and warmup (timm CosineLRScheduler)",
                          [](timm::Optimizer& optimizer, const timm::SchedulerParams& params) -> timm::SchedulerPtr {
                            return std::make_unique<timm::CosineLRScheduler>(optimizer, params);
                          });
}
