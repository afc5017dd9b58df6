// An exponential lr decay as a third-party scheduler plugin: everything it
// needs comes from the installed SDK headers.
//
//   lr(t) = base_lr * decay_rate ** (t / decay_t)
//
// a smooth version of timm's "step" scheduler (which decays by decay_rate
// once every decay_t), reading the same flags: --decay-rate, --decay-epochs,
// and the warmup and noise flags every timm scheduler shares.
#include <cmath>

#include "timm/base/error.hpp"
#include "timm/plugin/plugin.hpp"
#include "timm/sched/scheduler.hpp"

namespace example {

class ExpScheduler : public timm::Scheduler {
 public:
  // `p` has every length already in t units (epochs, or updates with
  // --sched-on-updates), so the same code serves both clocks.
  ExpScheduler(timm::Optimizer& optimizer, const timm::SchedulerParams& p)
      : Scheduler(optimizer, p.t_in_epochs, p.noise), decay_t_(p.decay_t), decay_rate_(p.args.decay_rate) {
    if (decay_t_ <= 0.0) throw timm::UsageError("scheduler 'example_exp': --decay-epochs must be positive");
    if (decay_rate_ <= 0.0) throw timm::UsageError("scheduler 'example_exp': --decay-rate must be positive");
    init_warmup(p.warmup);
  }

  // A pure function of t: the trainer calls step()/step_update() with the
  // epoch or update count, also after --resume, so there is no state to save.
  std::vector<double> lr_at(int64_t t) const override {
    if (in_warmup(t)) return warmup_lrs(t);
    const double factor = std::pow(decay_rate_, static_cast<double>(after_warmup(t)) / decay_t_);
    std::vector<double> lrs;
    for (double base : base_values()) lrs.push_back(base * factor);
    return lrs;
  }

 private:
  double decay_t_;
  double decay_rate_;
};

}  // namespace example

TIMM_PLUGIN("example_exp") {
  registrar.add_scheduler("example_exp", "Exponential decay by --decay-rate every --decay-epochs, built out of tree",
                          [](timm::Optimizer& optimizer, const timm::SchedulerParams& params) -> timm::SchedulerPtr {
                            return std::make_unique<example::ExpScheduler>(optimizer, params);
                          });
}
