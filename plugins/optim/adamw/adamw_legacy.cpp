// timm.optim.AdamWLegacy ("adamwlegacy", and "cadamw", "adamc", "cadamc",
// which timm's registry binds to it with caution / corrected weight decay):
// AdamW with decoupled weight decay (lr, or lr² / max_lr corrected), optional
// AMSGrad, caution on the first moment and StableAdamW RMS clipping. On the
// CPU in one pass per parameter (two with caution; not with AMSGrad or
// clipping, which run the ops) instead of timm's nine ops; foreach=False runs
// the ops.
#include <ATen/Parallel.h>

#include <cmath>

#include "adamw_legacy.hpp"
#include "timm/base/error.hpp"
#include "timm/base/simd.hpp"
#include "timm/optim/elementwise.hpp"
#include "timm/optim/foreach_optimizer.hpp"

namespace timm::adamw {
namespace {

using Tensors = std::vector<at::Tensor>;

struct AdamWLegacyConfig {
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  bool amsgrad = false;
  bool caution = false;
  bool maximize = false;
  DecayLr decay_lr;  // lr, or lr² / max_lr (corrected_weight_decay)
  std::optional<double> clipping_threshold;
  bool one_pass = true;  // --opt-kwargs foreach=False: timm's ops one by one
};

// The float32 scalars of one parameter's update, as the ops cast them.
struct OnePassScalars {
  float grad_sign;     // maximize: -1; else 1
  float param_factor;  // 1 - wd_scale * weight_decay
  float lerp_weight;   // 1 - beta1
  float beta2;
  float one_minus_beta2;
  float bias_correction2_sqrt;
  float eps;
  float step;  // -lr / bias_correction1
};

// One element's new moments, from its (signed) gradient.
inline void update_moments(float g, float& exp_avg, float& exp_avg_sq, const OnePassScalars& s) {
  aten_adam_moments(g, exp_avg, exp_avg_sq, s.lerp_weight, s.beta2, s.one_minus_beta2);
}

// The decayed parameter moved along `update`.
inline float stepped(float param, float update, float exp_avg_sq, const OnePassScalars& s) {
  return aten_adamw_step(param, update, exp_avg_sq, s.param_factor, s.bias_correction2_sqrt, s.eps, s.step);
}

// The loops below make timm's update one element after another, each value
// read and written once where the nine ops read or write about 22 values per
// element. They vectorise (the plugin builds with -fno-math-errno for sqrt),
// with an AVX2 clone where the CPU has it.

// The whole update without caution.
TIMM_AVX2_CLONES
void adamw_one_pass(float* __restrict param, const float* __restrict grad, float* __restrict exp_avg,
                    float* __restrict exp_avg_sq, int64_t n, const OnePassScalars s) {
  for (int64_t i = 0; i < n; ++i) {
    float m = exp_avg[i];
    float v = exp_avg_sq[i];
    update_moments(grad[i] * s.grad_sign, m, v, s);
    param[i] = stepped(param[i], m, v, s);
    exp_avg[i] = m;
    exp_avg_sq[i] = v;
  }
}

// Caution's first pass: the moments, and how many new exp_avg values agree
// in sign with their gradient (timm's mask, exp_avg * grad > 0).
TIMM_AVX2_CLONES
int64_t adamw_moments(const float* __restrict /*param*/, const float* __restrict grad, float* __restrict exp_avg,
                      float* __restrict exp_avg_sq, int64_t n, const OnePassScalars s) {
  int64_t agreeing = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float g = grad[i] * s.grad_sign;
    float m = exp_avg[i];
    float v = exp_avg_sq[i];
    update_moments(g, m, v, s);
    exp_avg[i] = m;
    exp_avg_sq[i] = v;
    agreeing += m * g > 0;
  }
  return agreeing;
}

// Caution's second pass: the step along exp_avg where it agrees with the
// gradient, times `mask_value`, 0 elsewhere.
TIMM_AVX2_CLONES
void adamw_cautious_step(float* __restrict param, const float* __restrict grad, const float* __restrict exp_avg,
                         const float* __restrict exp_avg_sq, int64_t n, float mask_value, const OnePassScalars s) {
  for (int64_t i = 0; i < n; ++i) {
    const float m = exp_avg[i];
    const float update = m * (m * (grad[i] * s.grad_sign) > 0 ? mask_value : 0.0f);
    param[i] = stepped(param[i], update, exp_avg_sq[i], s);
  }
}

class AdamWLegacy : public ForeachOptimizer {
 public:
  AdamWLegacy(std::vector<ParamGroup> groups, double lr, std::string description, AdamWLegacyConfig config)
      : ForeachOptimizer(std::move(groups), lr, std::move(description)), c_(config) {}

 private:
  // timm's _single_tensor_adamw (its CPU path), as foreach ops in its order.
  bool updates_parameters_independently() const override { return true; }
  void step_group(GroupStep& g) override {
    if (c_.amsgrad) {
      init_zero_states(g, {"exp_avg", "exp_avg_sq", "max_exp_avg_sq"});
    } else {
      init_zero_states(g, {"exp_avg", "exp_avg_sq"});
    }
    const std::vector<double> steps = increment_steps(g);
    const Tensors exp_avgs = state_list(g, "exp_avg");
    const Tensors exp_avg_sqs = state_list(g, "exp_avg_sq");
    const double wd_scale = c_.decay_lr(g.lr);
    if (c_.one_pass && !c_.amsgrad && !c_.clipping_threshold &&
        fused_cpu_kernels_apply({g.params, g.grads, exp_avgs, exp_avg_sqs})) {
      for (std::size_t i = 0; i < g.params.size(); ++i) {
        update_in_passes(g.params[i], g.grads[i], exp_avgs[i], exp_avg_sqs[i], scalars(g, wd_scale, steps[i]));
      }
      return;
    }

    const Tensors grads = c_.maximize ? at::_foreach_neg(g.grads) : g.grads;
    at::_foreach_mul_(g.params, 1. - wd_scale * g.weight_decay);
    at::_foreach_lerp_(exp_avgs, grads, 1 - c_.beta1);
    at::_foreach_mul_(exp_avg_sqs, c_.beta2);
    at::_foreach_addcmul_(exp_avg_sqs, grads, grads, 1 - c_.beta2);

    std::vector<c10::Scalar> step_sizes;
    std::vector<c10::Scalar> bias_correction2_sqrts;
    for (double step : steps) {
      step_sizes.emplace_back(-(g.lr / (1 - std::pow(c_.beta1, step))));
      bias_correction2_sqrts.emplace_back(std::pow(1 - std::pow(c_.beta2, step), 0.5));
    }
    Tensors denom;
    if (c_.amsgrad) {
      const Tensors max_exp_avg_sqs = state_list(g, "max_exp_avg_sq");
      at::_foreach_maximum_(max_exp_avg_sqs, exp_avg_sqs);
      denom = at::_foreach_sqrt(max_exp_avg_sqs);
    } else {
      denom = at::_foreach_sqrt(exp_avg_sqs);
    }
    at::_foreach_div_(denom, bias_correction2_sqrts);
    at::_foreach_add_(denom, c_.eps);
    if (c_.clipping_threshold) rms_clip_denominators(denom, grads, *c_.clipping_threshold);
    const Tensors updates = c_.caution ? cautioned(exp_avgs, grads) : exp_avgs;
    at::_foreach_addcdiv_(g.params, updates, denom, step_sizes);
  }

  OnePassScalars scalars(const GroupStep& g, double wd_scale, double step) const {
    const auto f = [](double x) { return static_cast<float>(x); };
    return {c_.maximize ? -1.0f : 1.0f,
            f(1. - wd_scale * g.weight_decay),
            f(1 - c_.beta1),
            f(c_.beta2),
            f(1 - c_.beta2),
            f(std::pow(1 - std::pow(c_.beta2, step), 0.5)),
            f(c_.eps),
            f(-(g.lr / (1 - std::pow(c_.beta1, step))))};
  }

  // The loops over one contiguous float32 parameter, in ranges across the
  // intra-op threads.
  void update_in_passes(const at::Tensor& param, const at::Tensor& grad, const at::Tensor& exp_avg,
                        const at::Tensor& exp_avg_sq, const OnePassScalars& s) const {
    if (c_.caution) {
      run_cautious_loops(param, grad, exp_avg, exp_avg_sq, adamw_moments, adamw_cautious_step, s);
    } else {
      run_one_pass_loop(param, grad, exp_avg, exp_avg_sq, adamw_one_pass, s);
    }
  }

  AdamWLegacyConfig c_;
};

}  // namespace

OptimizerPtr make_adamw_legacy(std::vector<ParamGroup> groups, const OptimizerArgs& args) {
  const OptimizerKwargs kwargs(args, {"betas", "eps", "amsgrad", "caution", "corrected_weight_decay", "maximize",
                                      "foreach", "capturable", "clipping_threshold"});
  check_lr(args);
  reject_true_kwargs(args, kwargs, {"capturable"});
  const std::vector<double> betas = resolve_betas(args, kwargs, {0.9, 0.999});
  const EpsArg eps = resolve_eps(args, kwargs, 1e-8);
  const DecayLr decay_lr(args, kwargs);
  const OptionalFloatArg clip = optional_float_kwarg(args, kwargs, "clipping_threshold", std::nullopt);
  AdamWLegacyConfig c;
  c.beta1 = betas[0];
  c.beta2 = betas[1];
  c.eps = eps.value;
  c.amsgrad = kwargs.get_bool("amsgrad", false);
  c.caution = kwargs.get_bool("caution", false);
  c.maximize = kwargs.get_bool("maximize", false);
  c.decay_lr = decay_lr;
  c.clipping_threshold = clip.value;
  c.one_pass = one_pass_requested(kwargs);
  const std::string description = describe_optimizer("AdamWLegacy", args.opt,
                                                     {{"lr", python_float_repr(args.lr)},
                                                      {"betas", betas_repr(args, betas, /*always_tuple=*/false)},
                                                      {"eps", eps.repr},
                                                      {"weight_decay", python_float_repr(args.weight_decay)},
                                                      {"amsgrad", py_bool(c.amsgrad)},
                                                      {"caution", py_bool(c.caution)},
                                                      {"corrected_weight_decay", py_bool(decay_lr.corrected())},
                                                      {"max_lr_snapshot", python_float_repr(args.lr)},
                                                      {"foreach", kwargs.repr("foreach", "None")},
                                                      {"maximize", py_bool(c.maximize)},
                                                      {"capturable", "False"},
                                                      {"clipping_threshold", clip.repr}});
  return std::make_unique<AdamWLegacy>(std::move(groups), args.lr, description, c);
}

}  // namespace timm::adamw
