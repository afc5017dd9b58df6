// "wsd" and "rsqrt": timm's WSDLRScheduler as create_scheduler_v2 builds it.
// A linear warmup (always a prefix), a stable phase (constant for "wsd",
// (1 + t_s / timescale) ** -0.5 for "rsqrt") and a decay to lr_min over the
// last decay_t steps of the stable + decay length:
//   lr(t) = lr_min + (max(base * stable(t_s), lr_min) - lr_min) * decay(frac)
// --decay-epochs is the decay length, a value in (0, 1) a fraction of the
// stable + decay length (unset: 0.2); --lr-decay-fn the decay shape (unset:
// 1-sqrt for wsd, linear for rsqrt); --lr-stable-timescale the rsqrt
// timescale in epochs (unset: the warmup length). Without --warmup-prefix the
// stable + decay phases fit within --epochs.
#include <algorithm>
#include <cmath>
#include <numbers>
#include <string>

#include "timm/base/error.hpp"
#include "timm/base/python_repr.hpp"
#include "timm/plugin/plugin.hpp"
#include "timm/sched/scheduler.hpp"

namespace timm {
namespace {

enum class DecayFn { kLinear, kOneMinusSqrt, kCosine, kPower, kExp };

DecayFn parse_decay_fn(const std::string& sched, const std::string& name) {
  if (name == "linear") return DecayFn::kLinear;
  if (name == "1-sqrt") return DecayFn::kOneMinusSqrt;
  if (name == "cosine") return DecayFn::kCosine;
  if (name == "power") return DecayFn::kPower;
  if (name == "exp") return DecayFn::kExp;
  throw UsageError("scheduler '" + sched + "': --lr-decay-fn must be one of linear, 1-sqrt, cosine, power, exp, got " +
                   in_quotes(name));
}

// WSDLRScheduler's defaults that create_scheduler_v2 does not pass.
constexpr double kDecayPower = 0.5;
constexpr double kDecayRatio = 0.1;
constexpr double kStablePower = 0.5;  // "rsqrt"

class WSDLRScheduler : public Scheduler {
 public:
  WSDLRScheduler(Optimizer& optimizer, const SchedulerParams& p, const std::string& sched)
      : Scheduler(optimizer, p.t_in_epochs, p.noise), rsqrt_(sched == "rsqrt"), lr_min_(p.args.min_lr) {
    const int64_t upe = p.t_in_epochs ? 1 : p.args.updates_per_epoch;
    const int64_t warmup_t = p.warmup.t;
    // The warmup is always a prefix; without --warmup-prefix the stable +
    // decay phases fit within --epochs.
    t_initial_ = p.args.warmup_prefix ? p.t_initial : p.t_initial - warmup_t;
    const double decay_epochs = p.args.decay_epochs.value_or(0.2);
    double decay_t = decay_epochs * static_cast<double>(upe);
    if (0 < decay_epochs && decay_epochs < 1) decay_t = decay_epochs * static_cast<double>(t_initial_);
    decay_t_ = static_cast<int64_t>(std::nearbyint(decay_t));  // Python's round(): half to even
    if (!(0 < decay_t_ && decay_t_ <= t_initial_)) {
      throw UsageError("scheduler '" + sched + "': needs 0 < --decay-epochs <= --epochs" +
                       (p.args.warmup_prefix ? "" : " - --warmup-epochs") + ", got a decay length of " +
                       std::to_string(decay_t_) + " and a stable + decay length of " + std::to_string(t_initial_) +
                       (p.t_in_epochs ? " epochs" : " updates"));
    }
    if (lr_min_ < 0) {
      throw UsageError("scheduler '" + sched + "': --min-lr must be >= 0, got " + python_float_repr(lr_min_));
    }
    const std::string fn = p.args.decay_fn.value_or("");  // Python's `decay_fn or default`: '' is unset
    decay_fn_ = parse_decay_fn(sched, fn.empty() ? (rsqrt_ ? "linear" : "1-sqrt") : fn);
    if (rsqrt_) {
      timescale_ =
          p.args.stable_timescale ? *p.args.stable_timescale * static_cast<double>(upe) : static_cast<double>(warmup_t);
      if (!(timescale_ > 0)) {
        throw UsageError("scheduler 'rsqrt': --lr-stable-timescale must be > 0, got " +
                         (p.args.stable_timescale ? python_float_repr(*p.args.stable_timescale)
                                                  : "none, and the warmup it defaults to is 0 epochs") +
                         "; set it when there is no warmup");
      }
    }
    init_warmup({.lr_init = p.warmup.lr_init, .t = warmup_t, .prefix = true});
  }

  std::vector<double> lr_at(int64_t t) const override {
    if (in_warmup(t)) return warmup_lrs(t);
    const int64_t t_s = t - warmup().t;
    const double stable = rsqrt_ ? std::pow(1.0 + static_cast<double>(t_s) / timescale_, -kStablePower) : 1.0;
    std::vector<double> lrs;
    for (double base : base_values()) lrs.push_back(std::max(base * stable, lr_min_));
    const int64_t t_decay = t_s - (t_initial_ - decay_t_);
    if (t_decay <= 0) return lrs;
    const double d = decay(std::min(static_cast<double>(t_decay) / static_cast<double>(decay_t_), 1.0));
    for (double& lr : lrs) lr = lr_min_ + (lr - lr_min_) * d;
    return lrs;
  }

  std::optional<int64_t> cycle_length() const override { return warmup().t + t_initial_; }

 private:
  double decay(double frac) const {
    switch (decay_fn_) {
      case DecayFn::kLinear:
        return 1.0 - frac;
      case DecayFn::kOneMinusSqrt:
        return 1.0 - std::sqrt(frac);
      case DecayFn::kCosine:
        return 0.5 * (1.0 + std::cos(std::numbers::pi * frac));
      case DecayFn::kPower:
        return 1.0 - std::pow(frac, kDecayPower);
      case DecayFn::kExp:
        break;
    }
    // r ** frac decays to r at frac == 1, normalized to reach 0.
    const double r = kDecayRatio;
    return (std::pow(r, frac) - r) / (1.0 - r);
  }

  bool rsqrt_;
  double lr_min_;
  int64_t t_initial_ = 0;  // the stable + decay length
  int64_t decay_t_ = 0;
  DecayFn decay_fn_ = DecayFn::kOneMinusSqrt;
  double timescale_ = 0.0;
};

}  // namespace
}  // namespace timm

TIMM_PLUGIN("wsd") {
  registrar.add_scheduler(
      "wsd", "Warmup, constant stable phase, decay to min_lr over the last decay epochs (timm WSDLRScheduler)",
      [](timm::Optimizer& optimizer, const timm::SchedulerParams& params) -> timm::SchedulerPtr {
        return std::make_unique<timm::WSDLRScheduler>(optimizer, params, "wsd");
      });
  registrar.add_scheduler("rsqrt",
                          "Warmup, reciprocal square root stable phase, linear decay to min_lr (timm WSDLRScheduler)",
                          [](timm::Optimizer& optimizer, const timm::SchedulerParams& params) -> timm::SchedulerPtr {
                            return std::make_unique<timm::WSDLRScheduler>(optimizer, params, "rsqrt");
                          });
}
