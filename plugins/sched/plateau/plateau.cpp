// "plateau": timm's PlateauLRScheduler, a wrapper of torch's
// ReduceLROnPlateau (factor = --decay-rate, patience = --patience-epochs,
// threshold 1e-4 relative, cooldown 0, min_lr = --min-lr, eps 1e-8, mode
// --plateau-mode) with a linear warmup and noise.
//
// timm's semantics, kept:
// - step(epoch, metric) with epoch <= warmup_t sets the warmup lr
//   warmup_lr + epoch * step (so the last warmup epoch reaches the base lr);
// - past warmup, the lrs from before the last noise perturbation are
//   restored, ReduceLROnPlateau steps on the groups' current lrs (lr_scale
//   included) only when a metric is given, then noise multiplies the lrs and
//   the unperturbed ones are kept for the next step;
// - step_update is a no-op; stepping on updates is refused (timm asserts).
#include <cmath>
#include <limits>

#include "timm/base/error.hpp"
#include "timm/base/python_repr.hpp"
#include "timm/plugin/plugin.hpp"
#include "timm/sched/scheduler.hpp"

namespace timm {
namespace {

class PlateauLRScheduler : public Scheduler {
 public:
  PlateauLRScheduler(Optimizer& optimizer, const SchedulerParams& p)
      : Scheduler(optimizer, /*t_in_epochs=*/true, p.noise),
        factor_(p.args.decay_rate),
        patience_(p.args.patience_epochs),
        min_lr_(p.args.min_lr),
        warmup_t_(p.warmup.t),
        warmup_lr_init_(p.warmup.lr_init),
        noise_range_(p.noise.range_t) {
    if (!p.t_in_epochs)
      throw UsageError("scheduler 'plateau' only supports stepping per epoch, not --sched-on-updates");
    if (factor_ >= 1.0) {
      throw UsageError("scheduler 'plateau': --decay-rate must be < 1.0, got " + python_float_repr(factor_));
    }
    if (p.args.plateau_mode == "min") {
      mode_max_ = false;
    } else if (p.args.plateau_mode == "max") {
      mode_max_ = true;
    } else {
      throw UsageError("scheduler 'plateau': --plateau-mode must be 'min' or 'max', got " +
                       in_quotes(p.args.plateau_mode));
    }
    best_ = mode_max_ ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity();
    // warmup_prefix does not apply: timm drops it for plateau.
    if (warmup_t_ > 0) {
      for (double v : base_values()) warmup_steps_.push_back((v - warmup_lr_init_) / static_cast<double>(warmup_t_));
      update_groups(std::vector<double>(base_values().size(), warmup_lr_init_));
    } else {
      warmup_steps_.assign(base_values().size(), 1.0);
    }
  }

  void step(int64_t epoch, std::optional<double> metric) override {
    if (epoch <= warmup_t_) {
      std::vector<double> lrs;
      for (double s : warmup_steps_) lrs.push_back(warmup_lr_init_ + static_cast<double>(epoch) * s);
      update_groups(lrs);
      return;
    }
    Optimizer& opt = optimizer();
    if (!restore_lr_.empty()) {
      for (std::size_t i = 0; i < restore_lr_.size(); ++i) opt.set_lr(i, restore_lr_[i]);
      restore_lr_.clear();
    }
    if (metric) plateau_step(*metric);
    if (noise_on(epoch)) {
      const double noise = noise_at(epoch);
      for (std::size_t i = 0; i < opt.num_groups(); ++i) {
        const double old_lr = opt.lr(i);
        restore_lr_.push_back(old_lr);
        opt.set_lr(i, old_lr + old_lr * noise);
      }
    }
  }

  void step_update(int64_t /*num_updates*/, std::optional<double> /*metric*/) override {}

  // Not a function of t: step() is overridden. The base lrs.
  std::vector<double> lr_at(int64_t /*t*/) const override { return base_values(); }

 private:
  static constexpr double kThreshold = 1e-4;
  static constexpr double kEps = 1e-8;
  static constexpr int64_t kCooldown = 0;  // create_scheduler_v2 passes cooldown_t=0

  bool noise_on(int64_t t) const {
    // timm's _is_apply_noise: one value is a threshold, two a range.
    const auto& range = noise_range_;
    const double td = static_cast<double>(t);
    return range.size() == 1 ? td >= range[0] : range.size() >= 2 && range[0] <= td && td < range[1];
  }

  // torch.optim.lr_scheduler.ReduceLROnPlateau.step(metric), rel threshold.
  void plateau_step(double current) {
    const bool better = mode_max_ ? current > best_ * (kThreshold + 1.0) : current < best_ * (1.0 - kThreshold);
    if (better) {
      best_ = current;
      num_bad_epochs_ = 0;
    } else {
      ++num_bad_epochs_;
    }
    if (cooldown_counter_ > 0) {
      --cooldown_counter_;
      num_bad_epochs_ = 0;
    }
    if (num_bad_epochs_ > patience_) {
      Optimizer& opt = optimizer();
      for (std::size_t i = 0; i < opt.num_groups(); ++i) {
        const double old_lr = opt.lr(i);
        const double new_lr = std::max(old_lr * factor_, min_lr_);
        if (old_lr - new_lr > kEps) opt.set_lr(i, new_lr);
      }
      cooldown_counter_ = kCooldown;
      num_bad_epochs_ = 0;
    }
  }

  double factor_;
  int64_t patience_;
  double min_lr_;
  int64_t warmup_t_;
  double warmup_lr_init_;
  bool mode_max_ = true;
  double best_ = 0.0;
  int64_t num_bad_epochs_ = 0;
  int64_t cooldown_counter_ = 0;
  std::vector<double> warmup_steps_;
  std::vector<double> noise_range_;
  std::vector<double> restore_lr_;
};

}  // namespace
}  // namespace timm

TIMM_PLUGIN("plateau") {
  registrar.add_scheduler("plateau", "Decay when the eval metric plateaus, with warmup (timm PlateauLRScheduler)",
                          [](timm::Optimizer& optimizer, const timm::SchedulerParams& params) -> timm::SchedulerPtr {
                            return std::make_unique<timm::PlateauLRScheduler>(optimizer, params);
                          });
}
