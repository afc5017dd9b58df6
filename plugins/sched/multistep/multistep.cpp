// "multistep": timm's MultiStepLRScheduler, lr = base * decay_rate ** n with
// n = bisect_right(milestones, t + 1), with warmup and noise.
//
// timm's convention, kept: milestones are compared against t + 1, so
// milestone m takes effect at t == m - 1 (on the decay clock, which a warmup
// prefix shifts by warmup_t). The milestones are assumed sorted, as in timm.
#include <algorithm>
#include <cmath>

#include "timm/plugin/plugin.hpp"
#include "timm/sched/scheduler.hpp"

namespace timm {
namespace {

class MultiStepLRScheduler : public Scheduler {
 public:
  MultiStepLRScheduler(Optimizer& optimizer, const SchedulerParams& p)
      : Scheduler(optimizer, p.t_in_epochs, p.noise), milestones_(p.decay_milestones), decay_rate_(p.args.decay_rate) {
    init_warmup(p.warmup);
  }

  std::vector<double> lr_at(int64_t t_in) const override {
    if (in_warmup(t_in)) return warmup_lrs(t_in);
    const int64_t t = after_warmup(t_in);
    // bisect.bisect_right(decay_t, t + 1)
    const auto n = std::upper_bound(milestones_.begin(), milestones_.end(), t + 1) - milestones_.begin();
    const double factor = std::pow(decay_rate_, static_cast<double>(n));
    std::vector<double> lrs;
    for (double base : base_values()) lrs.push_back(base * factor);
    return lrs;
  }

 private:
  std::vector<int64_t> milestones_;
  double decay_rate_;
};

}  // namespace
}  // namespace timm

TIMM_PLUGIN("multistep") {
  registrar.add_scheduler("multistep", "Decay by decay_rate at each milestone with warmup (timm MultiStepLRScheduler)",
                          [](timm::Optimizer& optimizer, const timm::SchedulerParams& params) -> timm::SchedulerPtr {
                            return std::make_unique<timm::MultiStepLRScheduler>(optimizer, params);
                          });
}
