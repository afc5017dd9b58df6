// timm.optim.NAdamW ("nadamw" and its cautious / corrected-decay variants):
// AdamW whose update uses the Nesterov look-ahead of the first moment,
// with timm's caution, corrected weight decay (lr² / max_lr) and optional
// StableAdamW RMS clipping. On the CPU in one pass per parameter (two with
// caution; clipping runs the ops) instead of timm's ten ops; foreach=False
// runs the ops.
#include <ATen/Parallel.h>

#include <cmath>

#include "adam_family.hpp"
#include "timm/base/error.hpp"
#include "timm/base/simd.hpp"
#include "timm/optim/elementwise.hpp"
#include "timm/optim/foreach_optimizer.hpp"

namespace timm::adam {
namespace {

using Tensors = std::vector<at::Tensor>;

struct NAdamWConfig {
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  bool caution = false;
  DecayLr decay_lr;  // lr, or lr² / max_lr (corrected_weight_decay)
  std::optional<double> clipping_threshold;
  bool one_pass = true;  // --opt-kwargs foreach=False: timm's ops one by one
};

// The float32 scalars of one parameter's update, as the ops cast them.
struct NAdamWScalars {
  float param_factor;  // 1 - wd_scale * weight_decay
  float lerp_weight;   // 1 - beta1
  float beta2;
  float one_minus_beta2;
  float bias_correction2_sqrt;
  float eps;
  float step;  // -lr / bias_correction1
};

// The decayed parameter moved along `update`.
inline float nadamw_stepped(float param, float update, float exp_avg_sq, const NAdamWScalars& s) {
  return aten_adamw_step(param, update, exp_avg_sq, s.param_factor, s.bias_correction2_sqrt, s.eps, s.step);
}

// The loops below make timm's update one element after another, each value
// read and written once where the ten ops read or write about 25 values per
// element. They vectorise (the plugin builds with -fno-math-errno for sqrt),
// with an AVX2 clone where the CPU has it.

// The whole update without caution: the step along the Nesterov look-ahead
// lerp(m_t, g, 1 - beta1).
TIMM_AVX2_CLONES
void nadamw_one_pass(float* __restrict param, const float* __restrict grad, float* __restrict exp_avg,
                     float* __restrict exp_avg_sq, int64_t n, const NAdamWScalars s) {
  for (int64_t i = 0; i < n; ++i) {
    float m = exp_avg[i];
    float v = exp_avg_sq[i];
    aten_adam_moments(grad[i], m, v, s.lerp_weight, s.beta2, s.one_minus_beta2);
    param[i] = nadamw_stepped(param[i], aten_lerp(m, grad[i], s.lerp_weight), v, s);
    exp_avg[i] = m;
    exp_avg_sq[i] = v;
  }
}

// Caution's first pass: the moments, and how many look-aheads agree in sign
// with their gradient (timm's mask, update * grad > 0).
TIMM_AVX2_CLONES
int64_t nadamw_moments(const float* __restrict /*param*/, const float* __restrict grad, float* __restrict exp_avg,
                       float* __restrict exp_avg_sq, int64_t n, const NAdamWScalars s) {
  int64_t agreeing = 0;
  for (int64_t i = 0; i < n; ++i) {
    float m = exp_avg[i];
    float v = exp_avg_sq[i];
    aten_adam_moments(grad[i], m, v, s.lerp_weight, s.beta2, s.one_minus_beta2);
    exp_avg[i] = m;
    exp_avg_sq[i] = v;
    agreeing += aten_lerp(m, grad[i], s.lerp_weight) * grad[i] > 0;
  }
  return agreeing;
}

// Caution's second pass: the step along the look-ahead where it agrees with
// the gradient, times `mask_value`, 0 elsewhere.
TIMM_AVX2_CLONES
void nadamw_cautious_step(float* __restrict param, const float* __restrict grad, const float* __restrict exp_avg,
                          const float* __restrict exp_avg_sq, int64_t n, float mask_value, const NAdamWScalars s) {
  for (int64_t i = 0; i < n; ++i) {
    const float look_ahead = aten_lerp(exp_avg[i], grad[i], s.lerp_weight);
    const float update = look_ahead * (look_ahead * grad[i] > 0 ? mask_value : 0.0f);
    param[i] = nadamw_stepped(param[i], update, exp_avg_sq[i], s);
  }
}

class NAdamW : public ForeachOptimizer {
 public:
  NAdamW(std::vector<ParamGroup> groups, double lr, std::string description, NAdamWConfig config)
      : ForeachOptimizer(std::move(groups), lr, std::move(description)), c_(config) {}

 private:
  bool updates_parameters_independently() const override { return true; }
  void step_group(GroupStep& g) override {
    init_zero_states(g, {"exp_avg", "exp_avg_sq"});
    const std::vector<double> steps = increment_steps(g);
    const Tensors exp_avgs = state_list(g, "exp_avg");
    const Tensors exp_avg_sqs = state_list(g, "exp_avg_sq");

    const double wd_scale = c_.decay_lr(g.lr);
    if (c_.one_pass && !c_.clipping_threshold && fused_cpu_kernels_apply({g.params, g.grads, exp_avgs, exp_avg_sqs})) {
      for (std::size_t i = 0; i < g.params.size(); ++i) {
        update_in_passes(g.params[i], g.grads[i], exp_avgs[i], exp_avg_sqs[i], scalars(g, wd_scale, steps[i]));
      }
      return;
    }
    at::_foreach_mul_(g.params, 1. - wd_scale * g.weight_decay);
    at::_foreach_lerp_(exp_avgs, g.grads, 1 - c_.beta1);
    at::_foreach_mul_(exp_avg_sqs, c_.beta2);
    at::_foreach_addcmul_(exp_avg_sqs, g.grads, g.grads, 1 - c_.beta2);

    std::vector<c10::Scalar> step_sizes;
    std::vector<c10::Scalar> bias_correction2_sqrts;
    for (double step : steps) {
      step_sizes.emplace_back(-(g.lr / (1 - std::pow(c_.beta1, step))));
      bias_correction2_sqrts.emplace_back(std::pow(1 - std::pow(c_.beta2, step), 0.5));
    }
    // The Nesterov look-ahead, a new tensor: the state keeps m_t.
    Tensors nesterov = at::_foreach_lerp(exp_avgs, g.grads, 1 - c_.beta1);
    Tensors denom = at::_foreach_sqrt(exp_avg_sqs);
    at::_foreach_div_(denom, bias_correction2_sqrts);
    at::_foreach_add_(denom, c_.eps);
    if (c_.clipping_threshold) rms_clip_denominators(denom, g.grads, *c_.clipping_threshold);
    if (c_.caution) nesterov = cautioned(nesterov, g.grads);
    at::_foreach_addcdiv_(g.params, nesterov, denom, step_sizes);
  }

  NAdamWScalars scalars(const GroupStep& g, double wd_scale, double step) const {
    const auto f = [](double x) { return static_cast<float>(x); };
    return {f(1. - wd_scale * g.weight_decay),
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
                        const at::Tensor& exp_avg_sq, const NAdamWScalars& s) const {
    if (c_.caution) {
      run_cautious_loops(param, grad, exp_avg, exp_avg_sq, nadamw_moments, nadamw_cautious_step, s);
    } else {
      run_one_pass_loop(param, grad, exp_avg, exp_avg_sq, nadamw_one_pass, s);
    }
  }

  NAdamWConfig c_;
};

}  // namespace

OptimizerPtr make_nadamw(std::vector<ParamGroup> groups, const OptimizerArgs& args) {
  const OptimizerKwargs kwargs(args, {"betas", "eps", "caution", "corrected_weight_decay", "foreach", "maximize",
                                      "capturable", "clipping_threshold"});
  check_lr(args);
  reject_true_kwargs(args, kwargs, {"maximize", "capturable"});
  const std::vector<double> betas = resolve_betas(args, kwargs, {0.9, 0.999});
  const EpsArg eps = resolve_eps(args, kwargs, 1e-8);
  const DecayLr decay_lr(args, kwargs);
  const OptionalFloatArg clip = optional_float_kwarg(args, kwargs, "clipping_threshold", std::nullopt);
  NAdamWConfig c;
  c.beta1 = betas[0];
  c.beta2 = betas[1];
  c.eps = eps.value;
  c.caution = kwargs.get_bool("caution", false);
  c.decay_lr = decay_lr;
  c.clipping_threshold = clip.value;
  c.one_pass = one_pass_requested(kwargs);
  const std::string description = describe_optimizer("NAdamW", args.opt,
                                                     {{"lr", python_float_repr(args.lr)},
                                                      {"betas", betas_repr(args, betas, /*always_tuple=*/false)},
                                                      {"eps", eps.repr},
                                                      {"weight_decay", python_float_repr(args.weight_decay)},
                                                      {"caution", py_bool(c.caution)},
                                                      {"corrected_weight_decay", py_bool(decay_lr.corrected())},
                                                      {"max_lr_snapshot", python_float_repr(args.lr)},
                                                      {"foreach", kwargs.repr("foreach", "None")},
                                                      {"maximize", "False"},
                                                      {"capturable", "False"},
                                                      {"clipping_threshold", clip.repr}});
  return std::make_unique<NAdamW>(std::move(groups), args.lr, description, c);
}

}  // namespace timm::adam
