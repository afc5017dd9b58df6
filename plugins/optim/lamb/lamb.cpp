// "lamb", "lambc", "lambw", "lambcw": timm's Lamb (timm/optim/lamb.py, the
// NVLAMB variant of apex's FusedLAMB): gradients divided by the global grad
// norm over max_grad_norm (when above one), Adam moments with a group-level
// step, and the layer-wise trust ratio |p| / |update| on groups with weight
// decay (always with always_adapt); lambc clips the ratio at one, lambw
// decouples the weight decay.
//
// A float32 CPU parameter without caution steps in two loops of timm-cpp's
// own instead of the dozen ops (--opt-kwargs foreach=False: the ops): the
// first updates the moments (and a decoupled decay) and writes the update;
// ATen then takes the norms of the parameter and the update, as the ops path
// does; the second moves the parameter by the update times its trust ratio.
#include <cmath>
#include <optional>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include "timm/base/error.hpp"
#include "timm/base/simd.hpp"
#include "timm/optim/elementwise.hpp"
#include "timm/optim/foreach_optimizer.hpp"
#include "timm/optim/optimizer.hpp"
#include "timm/plugin/plugin.hpp"

namespace timm {
namespace {

using Tensors = std::vector<at::Tensor>;

struct LambSettings {
  bool bias_correction = true;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-6;
  bool grad_averaging = true;
  std::optional<double> max_grad_norm = 1.0;
  bool trust_clip = false;
  bool always_adapt = false;
  bool caution = false;
  bool decoupled_decay = false;
  DecayLr decay_lr;      // lr, or lr² / max_lr (corrected_weight_decay)
  bool one_pass = true;  // --opt-kwargs foreach=False: the ops one by one
};

// The scalars of lamb_moments_and_update, as the ops path rounds them to
// float32.
struct LambScalars {
  float clip;  // the global grad-norm divisor, 1 without clipping
  bool lerp;   // grad averaging with beta3 = 1 - beta1: exp_avg.lerp_(grad, beta3)
  float beta1;
  float beta3;
  float beta2;
  float one_minus_beta2;
  float bias_correction1;
  float bias_correction2_sqrt;
  float eps;
  bool decoupled;  // param + decay_factor * param first
  float decay_factor;
  bool coupled;  // update + coupled_decay * param
  float coupled_decay;
};

// The first loop, one element after another: the clipped gradient's
// moments, the parameter's decoupled decay, and the update
// (exp_avg / bc1) / (sqrt(exp_avg_sq) / sqrt(bc2) + eps) [+ wd * param],
// each with ATen's per-element formula. Arms are selected rather than
// branched so that the loop vectorises.
TIMM_AVX2_CLONES
void lamb_moments_and_update(float* __restrict param, const float* __restrict grad, float* __restrict exp_avg,
                             float* __restrict exp_avg_sq, float* __restrict update, int64_t n, const LambScalars s) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = grad[i] / s.clip;
    const float lerped = aten_lerp(exp_avg[i], g, s.beta3);
    const float scaled = exp_avg[i] * s.beta1 + s.beta3 * g;
    const float m = s.lerp ? lerped : scaled;
    const float v = exp_avg_sq[i] * s.beta2 + s.one_minus_beta2 * g * g;
    const float denom = std::sqrt(v) / s.bias_correction2_sqrt + s.eps;
    const float p = s.decoupled ? param[i] + s.decay_factor * param[i] : param[i];
    const float adam = m / s.bias_correction1 / denom;
    update[i] = s.coupled ? adam + s.coupled_decay * p : adam;
    param[i] = p;
    exp_avg[i] = m;
    exp_avg_sq[i] = v;
  }
}

// The second loop: param - lr * (update * trust_ratio).
TIMM_AVX2_CLONES
void lamb_apply(float* __restrict param, const float* __restrict update, int64_t n, float trust_ratio, float neg_lr) {
  for (int64_t i = 0; i < n; ++i) param[i] = param[i] + neg_lr * (update[i] * trust_ratio);
}

// timm's _lamb_trust_ratio per tensor: |p| / |u|, one where either is zero,
// at most one with trust_clip; computed for all tensors in one stacked op.
Tensors trust_ratios(const Tensors& params, const Tensors& updates, bool trust_clip) {
  const at::Tensor w = at::stack(at::_foreach_norm(params));
  const at::Tensor g = at::stack(at::_foreach_norm(updates));
  at::Tensor ratio = at::where(w > 0, at::where(g > 0, w / g, 1.0), 1.0);
  if (trust_clip) ratio = at::clamp_max(ratio, 1.0);
  return ratio.unbind(0);
}

class Lamb : public ForeachOptimizer {
 public:
  Lamb(std::vector<ParamGroup> groups, double lr, std::string description, LambSettings settings)
      : ForeachOptimizer(std::move(groups), lr, std::move(description)), s_(settings) {}

  void step() override {
    at::NoGradGuard no_grad;
    clip_ = clip_grad_norm();
    // The step is the group's, counted even when no parameter has a gradient.
    for (std::size_t g = 0; g < num_groups(); ++g) {
      State& state = mutable_group_state(g);
      if (state.count("step") == 0) state["step"] = at::zeros({}, at::kFloat);
      state["step"].add_(1);
    }
    ForeachOptimizer::step();
    clip_.reset();
  }

 private:
  // max(global grad norm / max_grad_norm, 1) over all groups.
  std::optional<at::Tensor> clip_grad_norm() const {
    if (!s_.max_grad_norm) return std::nullopt;
    Tensors grads;
    for (std::size_t g = 0; g < num_groups(); ++g) {
      for (const at::Tensor& param : param_group(g).params) {
        if (param.grad().defined()) grads.push_back(param.grad());
      }
    }
    if (grads.empty()) return std::nullopt;
    const at::Tensor global_norm = at::linalg_vector_norm(at::stack(at::_foreach_norm(grads)));
    return (global_norm / *s_.max_grad_norm).clamp_(1.0);
  }

  bool updates_parameters_independently() const override { return true; }
  void step_group(GroupStep& group) override {
    const double step = group_state(group.index).at("step").item<double>();
    const double bias_correction1 = s_.bias_correction ? 1 - std::pow(s_.beta1, step) : 1.0;
    const double bias_correction2 = s_.bias_correction ? 1 - std::pow(s_.beta2, step) : 1.0;
    const double beta3 = s_.grad_averaging ? 1 - s_.beta1 : 1.0;
    for (std::size_t i = 0; i < group.params.size(); ++i) {
      if (!group.states[i]->empty()) continue;
      (*group.states[i])["exp_avg"] = at::zeros_like(group.params[i]);
      (*group.states[i])["exp_avg_sq"] = at::zeros_like(group.params[i]);
    }
    // Each tensor's update is its own (the clip factor is global): in chunks.
    update(group, bias_correction1, bias_correction2, beta3);
  }

  void update(const GroupStep& a, double bias_correction1, double bias_correction2, double beta3) {
    const Tensors exp_avgs = state_list(a, "exp_avg");
    const Tensors exp_avg_sqs = state_list(a, "exp_avg_sq");
    if (s_.one_pass && !s_.caution && fused_cpu_kernels_apply({a.params, a.grads, exp_avgs, exp_avg_sqs})) {
      return update_in_loops(a, exp_avgs, exp_avg_sqs, scalars(a, bias_correction1, bias_correction2, beta3));
    }
    update_with_ops(a, exp_avgs, exp_avg_sqs, bias_correction1, bias_correction2, beta3);
  }

  // Layer-wise adaptation, by default only where there is weight decay.
  bool adapts(const GroupStep& a) const { return a.weight_decay != 0 || s_.always_adapt; }

  LambScalars scalars(const GroupStep& a, double bias_correction1, double bias_correction2, double beta3) const {
    LambScalars out{};
    out.clip = clip_ ? clip_->item<float>() : 1.0f;
    out.lerp = beta3 == 1 - s_.beta1;
    out.beta1 = static_cast<float>(s_.beta1);
    out.beta3 = static_cast<float>(beta3);
    out.beta2 = static_cast<float>(s_.beta2);
    out.one_minus_beta2 = static_cast<float>(1 - s_.beta2);
    out.bias_correction1 = static_cast<float>(bias_correction1);
    out.bias_correction2_sqrt = static_cast<float>(std::pow(bias_correction2, 0.5));
    out.eps = static_cast<float>(s_.eps);
    out.decoupled = a.weight_decay != 0 && s_.decoupled_decay;
    out.decay_factor = static_cast<float>(-s_.decay_lr(a.lr) * a.weight_decay);
    out.coupled = a.weight_decay != 0 && !s_.decoupled_decay;
    out.coupled_decay = static_cast<float>(a.weight_decay);
    return out;
  }

  void update_in_loops(const GroupStep& a, const Tensors& exp_avgs, const Tensors& exp_avg_sqs, const LambScalars& s) {
    Tensors updates;
    for (std::size_t i = 0; i < a.params.size(); ++i) {
      updates.push_back(at::empty_like(a.params[i]));
      float* p = a.params[i].data_ptr<float>();
      const float* g = a.grads[i].data_ptr<float>();
      float* m = exp_avgs[i].data_ptr<float>();
      float* v = exp_avg_sqs[i].data_ptr<float>();
      float* u = updates[i].data_ptr<float>();
      at::parallel_for(0, a.params[i].numel(), at::internal::GRAIN_SIZE, [&](int64_t begin, int64_t end) {
        lamb_moments_and_update(p + begin, g + begin, m + begin, v + begin, u + begin, end - begin, s);
      });
    }
    const bool adapt = adapts(a);
    const Tensors ratios = adapt ? trust_ratios(a.params, updates, s_.trust_clip) : Tensors{};
    const auto neg_lr = static_cast<float>(-a.lr);
    for (std::size_t i = 0; i < a.params.size(); ++i) {
      const float ratio = adapt ? ratios[i].item<float>() : 1.0f;
      float* p = a.params[i].data_ptr<float>();
      const float* u = updates[i].data_ptr<float>();
      at::parallel_for(0, a.params[i].numel(), at::internal::GRAIN_SIZE, [&](int64_t begin, int64_t end) {
        lamb_apply(p + begin, u + begin, end - begin, ratio, neg_lr);
      });
      bump_versions({a.params[i], exp_avgs[i], exp_avg_sqs[i]});
    }
  }

  void update_with_ops(const GroupStep& a, const Tensors& exp_avgs, const Tensors& exp_avg_sqs, double bias_correction1,
                       double bias_correction2, double beta3) {
    const Tensors grads = clip_ ? at::_foreach_div(a.grads, *clip_) : a.grads;  // p.grad left unmodified
    if (beta3 == 1 - s_.beta1) {
      at::_foreach_lerp_(exp_avgs, grads, beta3);
    } else {
      at::_foreach_mul_(exp_avgs, s_.beta1);
      at::_foreach_add_(exp_avgs, grads, beta3);
    }
    at::_foreach_mul_(exp_avg_sqs, s_.beta2);
    at::_foreach_addcmul_(exp_avg_sqs, grads, grads, 1 - s_.beta2);

    Tensors denom = at::_foreach_sqrt(exp_avg_sqs);
    at::_foreach_div_(denom, std::pow(bias_correction2, 0.5));
    at::_foreach_add_(denom, s_.eps);
    Tensors updates = at::_foreach_div(exp_avgs, bias_correction1);
    at::_foreach_div_(updates, denom);
    if (s_.caution) updates = cautioned(updates, grads);

    const double lr = a.lr;
    const double wd = a.weight_decay;
    if (wd != 0) {
      if (s_.decoupled_decay) {
        at::_foreach_add_(a.params, a.params, -s_.decay_lr(lr) * wd);
      } else {
        at::_foreach_add_(updates, a.params, wd);
      }
    }
    if (adapts(a)) at::_foreach_mul_(updates, trust_ratios(a.params, updates, s_.trust_clip));
    at::_foreach_add_(a.params, updates, -lr);
  }

  LambSettings s_;
  std::optional<at::Tensor> clip_;  // clip_grad_norm() of the step in progress
};

OptimizerPtr make_lamb(std::vector<ParamGroup> groups, const OptimizerArgs& args, bool trust_clip_default,
                       bool decoupled_default) {
  const OptimizerKwargs kwargs(
      args, {"bias_correction", "betas", "eps", "grad_averaging", "max_grad_norm", "trust_clip", "always_adapt",
             "caution", "decoupled_decay", "corrected_weight_decay", "foreach"});
  const std::string opt = timm::in_quotes(args.opt);
  LambSettings s;
  const std::vector<double> betas = args.betas ? *args.betas : kwargs.get_doubles("betas", {0.9, 0.999});
  if (betas.size() != 2) {
    throw UsageError("optimizer " + opt + ": betas needs 2 values, got " + std::to_string(betas.size()));
  }
  s.beta1 = betas[0];
  s.beta2 = betas[1];
  s.bias_correction = kwargs.get_bool("bias_correction", true);
  s.eps = args.eps ? *args.eps : kwargs.get_double("eps", 1e-6);
  s.grad_averaging = kwargs.get_bool("grad_averaging", true);
  const bool no_clip = kwargs.has("max_grad_norm") && kwargs.repr("max_grad_norm", "") == "'None'";
  s.max_grad_norm = no_clip ? std::nullopt : std::optional<double>(kwargs.get_double("max_grad_norm", 1.0));
  s.trust_clip = kwargs.get_bool("trust_clip", trust_clip_default);
  s.always_adapt = kwargs.get_bool("always_adapt", false);
  s.caution = kwargs.get_bool("caution", false);
  s.decoupled_decay = kwargs.get_bool("decoupled_decay", decoupled_default);
  s.decay_lr = DecayLr(args, kwargs);
  s.one_pass = one_pass_requested(kwargs);
  check_lr(args);
  if (s.eps < 0) throw UsageError("optimizer " + opt + ": invalid epsilon " + python_float_repr(s.eps));
  if (args.weight_decay < 0) {
    throw UsageError("optimizer " + opt + ": invalid --weight-decay " + python_float_repr(args.weight_decay));
  }
  const std::string description =
      describe_optimizer("Lamb", args.opt,
                         {{"lr", python_float_repr(args.lr)},
                          {"bias_correction", kwargs.repr("bias_correction", "True")},
                          {"betas", betas_repr(args, betas, /*always_tuple=*/false)},
                          {"eps", args.eps ? python_float_repr(*args.eps) : kwargs.repr("eps", "1e-06")},
                          {"weight_decay", python_float_repr(args.weight_decay)},
                          {"grad_averaging", kwargs.repr("grad_averaging", "True")},
                          {"max_grad_norm", no_clip ? "None" : kwargs.repr("max_grad_norm", "1.0")},
                          {"trust_clip", kwargs.repr("trust_clip", py_bool(trust_clip_default))},
                          {"always_adapt", kwargs.repr("always_adapt", "False")},
                          {"caution", kwargs.repr("caution", "False")},
                          {"decoupled_decay", kwargs.repr("decoupled_decay", py_bool(decoupled_default))},
                          {"corrected_weight_decay", kwargs.repr("corrected_weight_decay", "False")},
                          {"max_lr_snapshot", python_float_repr(args.lr)},
                          {"foreach", kwargs.repr("foreach", "None")}});
  return std::make_unique<Lamb>(std::move(groups), args.lr, description, s);
}

}  // namespace
}  // namespace timm

TIMM_PLUGIN("lamb") {
  using timm::bind_defaults;
  using timm::OptimizerArgs;
  using timm::ParamGroup;
  auto lamb = [](bool trust_clip, bool decoupled) -> timm::OptimizerFactory {
    return [trust_clip, decoupled](std::vector<ParamGroup> groups, const OptimizerArgs& args) {
      return timm::make_lamb(std::move(groups), args, trust_clip, decoupled);
    };
  };
  // train.py scales --lr-base by the square root of the batch ratio for
  // timm's adaptive optimizers ("lamb" in the name).
  const timm::OptimizerTraits sqrt_lr{.lr_base_scale = timm::LrBaseScale::kSqrt};
  registrar.add_optimizer("lamb", "Layer-wise Adaptive Moments for batch optimization", lamb(false, false), sqrt_lr);
  registrar.add_optimizer("lambc", "LAMB with trust ratio clipping for stability", lamb(true, false), sqrt_lr);
  registrar.add_optimizer("lambw", "LAMB with decoupled weight decay", lamb(false, true), sqrt_lr);
  registrar.add_optimizer("lambcw", "LAMB with trust ratio clipping for stability and decoupled decay",
                          lamb(true, true), sqrt_lr);
  // timm binds these through OptimInfo.defaults (Lamb's keyword arguments).
  registrar.add_optimizer(
      "lambcd", "LAMB with corrected decoupled weight decay (lr²/max_lr scaling)",
      bind_defaults(lamb(false, false), {{"decoupled_decay", "True"}, {"corrected_weight_decay", "True"}}), sqrt_lr);
  registrar.add_optimizer("clamb", "Cautious LAMB", bind_defaults(lamb(false, false), {{"caution", "True"}}), sqrt_lr);
  registrar.add_optimizer("clambw", "Cautious LAMB with decoupled weight decay",
                          bind_defaults(lamb(false, false), {{"caution", "True"}, {"decoupled_decay", "True"}}),
                          sqrt_lr);
}
