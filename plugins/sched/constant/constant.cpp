// "constant": what timm's create_scheduler_v2 builds for it, a
// StepLRScheduler with decay_t 1 and decay_rate 1 (a step schedule that
// never decays): the warmup, then the base lr, with noise and, unlike
// "none", the groups' lr_scale applied.
#include "timm/plugin/plugin.hpp"
#include "timm/sched/scheduler.hpp"

namespace timm {
namespace {

class ConstantLRScheduler : public Scheduler {
 public:
  ConstantLRScheduler(Optimizer& optimizer, const SchedulerParams& p) : Scheduler(optimizer, p.t_in_epochs, p.noise) {
    init_warmup(p.warmup);
  }

  // base * 1.0 ** (t // 1) is base.
  std::vector<double> lr_at(int64_t t) const override { return in_warmup(t) ? warmup_lrs(t) : base_values(); }
};

}  // namespace
}  // namespace timm

TIMM_PLUGIN("constant") {
  registrar.add_scheduler("constant",
                          "The base lr after warmup, with noise and lr_scale (timm StepLRScheduler, "
                          "decay_t 1, decay_rate 1)",
                          [](timm::Optimizer& optimizer, const timm::SchedulerParams& params) -> timm::SchedulerPtr {
                            return std::make_unique<timm::ConstantLRScheduler>(optimizer, params);
                          });
}
