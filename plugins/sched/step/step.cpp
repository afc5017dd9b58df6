// "step": timm's StepLRScheduler, lr = base * decay_rate ** (t // decay_t),
// with warmup and noise; decay_t may be fractional (--decay-epochs 2.4).
#include <cmath>

#include "timm/base/error.hpp"
#include "timm/plugin/plugin.hpp"
#include "timm/sched/scheduler.hpp"

namespace timm {
namespace {

class StepLRScheduler : public Scheduler {
 public:
  StepLRScheduler(Optimizer& optimizer, const SchedulerParams& p)
      : Scheduler(optimizer, p.t_in_epochs, p.noise), decay_t_(p.decay_t), decay_rate_(p.args.decay_rate) {
    // Python would raise ZeroDivisionError at the first step after warmup.
    if (decay_t_ == 0.0) throw UsageError("scheduler 'step': --decay-epochs must not be 0");
    init_warmup(p.warmup);
  }

  std::vector<double> lr_at(int64_t t_in) const override {
    if (in_warmup(t_in)) return warmup_lrs(t_in);
    const double t = static_cast<double>(after_warmup(t_in));
    const double factor = std::pow(decay_rate_, py_floordiv(t, decay_t_));
    std::vector<double> lrs;
    for (double base : base_values()) lrs.push_back(base * factor);
    return lrs;
  }

 private:
  double decay_t_;
  double decay_rate_;
};

}  // namespace
}  // namespace timm

TIMM_PLUGIN("step") {
  registrar.add_scheduler("step", "Step decay every decay_t with warmup (timm StepLRScheduler)",
                          [](timm::Optimizer& optimizer, const timm::SchedulerParams& params) -> timm::SchedulerPtr {
                            return std::make_unique<timm::StepLRScheduler>(optimizer, params);
                          });
}
