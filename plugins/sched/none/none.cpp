// "none": timm's create_scheduler_v2 returns no scheduler, and train.py then
// leaves the optimizer's lr untouched: no warmup, no noise, no lr_scale. The
// trainer always holds a scheduler, so this one restores the groups' lr that
// the Scheduler base class set and does nothing at step() and
// step_update(). One difference from timm: the groups' initial_lr is set (the
// base class does so), which only shows in the optimizer's checkpoint state.
#include <cstddef>
#include <vector>

#include "timm/plugin/plugin.hpp"
#include "timm/sched/scheduler.hpp"

namespace timm {
namespace {

// The groups' lr before the Scheduler base class changes them: a base that
// is constructed first.
struct GroupLrs {
  explicit GroupLrs(const Optimizer& optimizer) {
    for (std::size_t i = 0; i < optimizer.num_groups(); ++i) lrs.push_back(optimizer.lr(i));
  }
  std::vector<double> lrs;
};

class NoScheduler : private GroupLrs, public Scheduler {
 public:
  NoScheduler(Optimizer& optimizer, const SchedulerParams& p)
      : GroupLrs(optimizer), Scheduler(optimizer, p.t_in_epochs, NoiseOptions{}) {
    for (std::size_t i = 0; i < lrs.size(); ++i) this->optimizer().set_lr(i, lrs[i]);
  }

  void step(int64_t /*epoch*/, std::optional<double> /*metric*/) override {}
  void step_update(int64_t /*num_updates*/, std::optional<double> /*metric*/) override {}

  // Never applied; the lr that the groups keep, before lr_scale.
  std::vector<double> lr_at(int64_t /*t*/) const override { return base_values(); }
};

}  // namespace
}  // namespace timm

TIMM_PLUGIN("none") {
  registrar.add_scheduler("none", "No scheduler: the optimizer's lr is left untouched (timm's sched 'none')",
                          [](timm::Optimizer& optimizer, const timm::SchedulerParams& params) -> timm::SchedulerPtr {
                            return std::make_unique<timm::NoScheduler>(optimizer, params);
                          });
}
