// timm.optim.Adopt ("adopt" and its decoupled / cautious / corrected
// variants): the gradient normalised by the previous second moment (clipped
// to (step - 1)^clip_exp) feeds the first moment; a parameter's first step
// only initialises the second moment. On the CPU in one pass per parameter
// (two with caution) instead of timm's eight ops; foreach=False runs the ops.
#include <ATen/Parallel.h>

#include <cmath>
#include <limits>

#include "adam_family.hpp"
#include "timm/base/error.hpp"
#include "timm/base/simd.hpp"
#include "timm/optim/elementwise.hpp"
#include "timm/optim/foreach_optimizer.hpp"

namespace timm::adam {
namespace {

using Tensors = std::vector<at::Tensor>;

struct AdoptConfig {
  double beta1 = 0.9;
  double beta2 = 0.9999;
  double eps = 1e-6;
  std::optional<double> clip_exp = 0.333;
  bool decoupled = false;
  DecayLr decay_lr;  // lr, or lr² / max_lr (corrected_weight_decay)
  bool caution = false;
  bool one_pass = true;  // --opt-kwargs foreach=False: timm's ops one by one
};

// The float32 scalars of one parameter's update after its first step, as
// timm's per-tensor ops cast them.
struct OnePassScalars {
  float grad_decay;   // coupled weight decay, added to the gradient; 0 otherwise
  float param_decay;  // decoupled: p += param_decay * p; 0 otherwise
  float eps;
  float clip;         // (step - 1)^clip_exp; infinity without clip_exp
  float lerp_weight;  // 1 - beta1
  float minus_lr;
  float beta2;
  float one_minus_beta2;
};

inline float decayed_grad(float grad, float param, const OnePassScalars& s) {
  const float decayed = grad + s.grad_decay * param;  // then selected: no branch in the loops
  return s.grad_decay != 0 ? decayed : grad;
}

inline float decayed_param(float param, const OnePassScalars& s) {
  const float decayed = param + s.param_decay * param;
  return s.param_decay != 0 ? decayed : param;
}

// timm's new exp_avg: the gradient over max(sqrt(exp_avg_sq), eps), clamped
// to +-clip, then exp_avg.lerp_(normed, 1 - beta1) as torch's lerp (NaN kept
// throughout, as torch's clamp keeps it).
inline float new_exp_avg(float g, float exp_avg, float exp_avg_sq, const OnePassScalars& s) {
  const float root = std::sqrt(exp_avg_sq);
  const float normed = g / (root < s.eps ? s.eps : root);
  const float clipped = normed < -s.clip ? -s.clip : (normed > s.clip ? s.clip : normed);
  return aten_lerp(exp_avg, clipped, s.lerp_weight);
}

inline float new_exp_avg_sq(float g, float exp_avg_sq, const OnePassScalars& s) {
  return exp_avg_sq * s.beta2 + s.one_minus_beta2 * g * g;
}

// The loops below make timm's update one element after another, each value
// read and written once where the eight per-tensor ops make about 22
// accesses per element. They vectorise (the plugin builds with
// -fno-math-errno for sqrt), with an AVX2 clone where the CPU has it.

// The whole update without caution.
TIMM_AVX2_CLONES
void adopt_one_pass(float* __restrict param, const float* __restrict grad, float* __restrict exp_avg,
                    float* __restrict exp_avg_sq, int64_t n, const OnePassScalars s) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = decayed_grad(grad[i], param[i], s);
    const float m = new_exp_avg(g, exp_avg[i], exp_avg_sq[i], s);
    exp_avg[i] = m;
    exp_avg_sq[i] = new_exp_avg_sq(g, exp_avg_sq[i], s);
    param[i] = decayed_param(param[i], s) + s.minus_lr * m;
  }
}

// Caution's first pass: the moments, and how many new exp_avg values agree
// in sign with their gradient (timm's mask, exp_avg * grad > 0).
TIMM_AVX2_CLONES
int64_t adopt_moments(const float* __restrict param, const float* __restrict grad, float* __restrict exp_avg,
                      float* __restrict exp_avg_sq, int64_t n, const OnePassScalars s) {
  int64_t agreeing = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float g = decayed_grad(grad[i], param[i], s);
    const float m = new_exp_avg(g, exp_avg[i], exp_avg_sq[i], s);
    exp_avg[i] = m;
    exp_avg_sq[i] = new_exp_avg_sq(g, exp_avg_sq[i], s);
    agreeing += m * g > 0;
  }
  return agreeing;
}

// Caution's second pass: the step along exp_avg where it agrees with the
// gradient, times `mask_value`, 0 elsewhere.
TIMM_AVX2_CLONES
void adopt_cautious_step(float* __restrict param, const float* __restrict grad, const float* __restrict exp_avg,
                         const float* __restrict /*exp_avg_sq*/, int64_t n, float mask_value, const OnePassScalars s) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = decayed_grad(grad[i], param[i], s);
    const float m = exp_avg[i];
    const float update = m * (m * g > 0 ? mask_value : 0.0f);
    param[i] = decayed_param(param[i], s) + s.minus_lr * update;
  }
}

class Adopt : public ForeachOptimizer {
 public:
  Adopt(std::vector<ParamGroup> groups, double lr, std::string description, AdoptConfig config)
      : ForeachOptimizer(std::move(groups), lr, std::move(description)), c_(config) {}

 private:
  bool updates_parameters_independently() const override { return true; }
  void step_group(GroupStep& g) override {
    for (std::size_t i = 0; i < g.params.size(); ++i) {
      if (!g.states[i]->empty()) continue;
      (*g.states[i])["exp_avg"] = at::zeros_like(g.grads[i], at::MemoryFormat::Preserve);
      (*g.states[i])["exp_avg_sq"] = at::zeros_like(g.grads[i], at::MemoryFormat::Preserve);
    }
    const std::vector<double> steps = increment_steps(g);
    std::vector<std::size_t> first;
    std::vector<std::size_t> later;
    for (std::size_t i = 0; i < steps.size(); ++i) (steps[i] == 1 ? first : later).push_back(i);
    const Tensors exp_avg_sqs_all = state_list(g, "exp_avg_sq");
    if (!first.empty()) {
      const Tensors first_grads = decayed_grads(g, first);
      at::_foreach_addcmul_(select(exp_avg_sqs_all, first), first_grads, first_grads);
    }
    if (later.empty()) return;

    const Tensors params = select(g.params, later);
    const Tensors exp_avgs = select(state_list(g, "exp_avg"), later);
    const Tensors exp_avg_sqs = select(exp_avg_sqs_all, later);
    const Tensors grads = select(g.grads, later);  // without the coupled decay
    if (c_.one_pass && fused_cpu_kernels_apply({params, grads, exp_avgs, exp_avg_sqs})) {
      for (std::size_t k = 0; k < later.size(); ++k) {
        update_in_passes(params[k], grads[k], exp_avgs[k], exp_avg_sqs[k], scalars(g, steps[later[k]]));
      }
      return;
    }
    update_with_ops(g, params, decayed_grads(g, later), exp_avgs, exp_avg_sqs, select_steps(steps, later));
  }

  // The gradients of `indices` plus the coupled weight decay (p.grad left
  // unmodified).
  Tensors decayed_grads(const GroupStep& g, const std::vector<std::size_t>& indices) const {
    const Tensors grads = select(g.grads, indices);
    if (g.weight_decay == 0 || c_.decoupled) return grads;
    return at::_foreach_add(grads, select(g.params, indices), g.weight_decay);
  }

  static std::vector<double> select_steps(const std::vector<double>& steps, const std::vector<std::size_t>& indices) {
    std::vector<double> out;
    for (std::size_t i : indices) out.push_back(steps[i]);
    return out;
  }

  // timm's update after the first step, op by op over the tensors.
  void update_with_ops(const GroupStep& g, const Tensors& params, const Tensors& grads, Tensors exp_avgs,
                       const Tensors& exp_avg_sqs, const std::vector<double>& steps) const {
    if (g.weight_decay != 0 && c_.decoupled) at::_foreach_add_(params, params, -c_.decay_lr(g.lr) * g.weight_decay);
    Tensors denom = at::_foreach_sqrt(exp_avg_sqs);
    at::_foreach_maximum_(denom, c_.eps);
    Tensors normed = at::_foreach_div(grads, denom);
    if (c_.clip_exp) {
      std::vector<c10::Scalar> lows;
      std::vector<c10::Scalar> highs;
      for (double step : steps) {
        const double clip = std::pow(step - 1, *c_.clip_exp);
        lows.emplace_back(-clip);
        highs.emplace_back(clip);
      }
      at::_foreach_maximum_(normed, lows);
      at::_foreach_minimum_(normed, highs);
    }
    at::_foreach_lerp_(exp_avgs, normed, 1 - c_.beta1);
    // Caution masks a copy: the state keeps the unmasked moment.
    if (c_.caution) exp_avgs = cautioned(exp_avgs, grads);
    at::_foreach_add_(params, exp_avgs, -g.lr);
    at::_foreach_mul_(exp_avg_sqs, c_.beta2);
    at::_foreach_addcmul_(exp_avg_sqs, grads, grads, 1 - c_.beta2);
  }

  OnePassScalars scalars(const GroupStep& g, double step) const {
    const bool decays = g.weight_decay != 0;
    return {static_cast<float>(decays && !c_.decoupled ? g.weight_decay : 0.0),
            static_cast<float>(decays && c_.decoupled ? -c_.decay_lr(g.lr) * g.weight_decay : 0.0),
            static_cast<float>(c_.eps),
            c_.clip_exp ? static_cast<float>(std::pow(step - 1, *c_.clip_exp)) : std::numeric_limits<float>::infinity(),
            static_cast<float>(1 - c_.beta1),
            static_cast<float>(-g.lr),
            static_cast<float>(c_.beta2),
            static_cast<float>(1 - c_.beta2)};
  }

  // The loops over one contiguous float32 parameter, in ranges across the
  // intra-op threads.
  void update_in_passes(const at::Tensor& param, const at::Tensor& grad, const at::Tensor& exp_avg,
                        const at::Tensor& exp_avg_sq, const OnePassScalars& s) const {
    if (c_.caution) {
      run_cautious_loops(param, grad, exp_avg, exp_avg_sq, adopt_moments, adopt_cautious_step, s);
    } else {
      run_one_pass_loop(param, grad, exp_avg, exp_avg_sq, adopt_one_pass, s);
    }
  }

  AdoptConfig c_;
};

}  // namespace

OptimizerPtr make_adopt(std::vector<ParamGroup> groups, const OptimizerArgs& args) {
  const OptimizerKwargs kwargs(args, {"betas", "eps", "clip_exp", "decoupled", "corrected_weight_decay", "caution",
                                      "foreach", "maximize", "capturable", "differentiable"});
  check_lr(args);
  reject_true_kwargs(args, kwargs, {"maximize", "capturable", "differentiable"});
  const std::vector<double> betas = resolve_betas(args, kwargs, {0.9, 0.9999});
  const EpsArg eps = resolve_eps(args, kwargs, 1e-6);
  const OptionalFloatArg clip_exp = optional_float_kwarg(args, kwargs, "clip_exp", 0.333);
  const DecayLr decay_lr(args, kwargs);
  AdoptConfig c;
  c.beta1 = betas[0];
  c.beta2 = betas[1];
  c.eps = eps.value;
  c.clip_exp = clip_exp.value;
  c.decoupled = kwargs.get_bool("decoupled", false);
  c.decay_lr = decay_lr;
  c.caution = kwargs.get_bool("caution", false);
  c.one_pass = one_pass_requested(kwargs);
  const std::string description = describe_optimizer("Adopt", args.opt,
                                                     {{"lr", python_float_repr(args.lr)},
                                                      {"betas", betas_repr(args, betas, /*always_tuple=*/false)},
                                                      {"eps", eps.repr},
                                                      {"weight_decay", python_float_repr(args.weight_decay)},
                                                      {"clip_exp", clip_exp.repr},
                                                      {"decoupled", py_bool(c.decoupled)},
                                                      {"corrected_weight_decay", py_bool(decay_lr.corrected())},
                                                      {"max_lr_snapshot", python_float_repr(args.lr)},
                                                      {"caution", py_bool(c.caution)},
                                                      {"maximize", "False"},
                                                      {"foreach", kwargs.repr("foreach", "None")},
                                                      {"capturable", "False"},
                                                      {"differentiable", "False"}});
  return std::make_unique<Adopt>(std::move(groups), args.lr, description, c);
}

}  // namespace timm::adam
