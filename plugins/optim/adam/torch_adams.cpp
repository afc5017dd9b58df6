// torch.optim.Adam, AdamW, NAdam and RAdam as timm's registry binds them
// ("adam", "adamw", "nadam", "radam", "radamw"): torch's update with its operations in its
// order (the single-tensor path, which Python runs on CPU, and the
// multi-tensor path, the same ops over lists), per-parameter float32 step
// counts kept as torch keeps them. On the CPU, Adam and AdamW run torch's
// fused kernels, NAdam and RAdam loops of timm-cpp's own, one pass per
// parameter (foreach=False: the ops).
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

// What Adam, NAdam and RAdam share.
struct MomentsConfig {
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  bool decoupled_weight_decay = false;
  bool one_pass = true;  // NAdam, RAdam: --opt-kwargs foreach=False runs the ops
};

// Coupled L2 (grad + wd * p, new tensors) or decoupled decay (p *= 1 - lr * wd).
Tensors apply_weight_decay(const Tensors& params, const Tensors& grads, double lr, double weight_decay,
                           bool decoupled) {
  if (weight_decay == 0) return grads;
  if (decoupled) {
    at::_foreach_mul_(params, 1 - lr * weight_decay);
    return grads;
  }
  return at::_foreach_add(grads, params, weight_decay);
}

// exp_avg.lerp_(g, 1 - beta1); exp_avg_sq.mul_(beta2).addcmul_(g, g, 1 - beta2).
void update_moments(const Tensors& exp_avgs, const Tensors& exp_avg_sqs, const Tensors& grads, const MomentsConfig& c) {
  at::_foreach_lerp_(exp_avgs, grads, 1 - c.beta1);
  at::_foreach_mul_(exp_avg_sqs, c.beta2);
  at::_foreach_addcmul_(exp_avg_sqs, grads, grads, 1 - c.beta2);
}

// ---- One-pass loops -----------------------------------------------------------
//
// NAdam's and RAdam's updates one element after another, each value read and
// written once where their eight to ten ops read or write about 25 values per
// element; within float32 rounding of the ops (ATen's formulas per element:
// addcmul self + v * t1 * t2, addcdiv self + v * t1 / t2). They vectorise
// (the plugin builds with -fno-math-errno for sqrt), with an AVX2 clone
// where the CPU has it.

// The float32 scalars of the weight decay and the moments.
struct MomentScalars {
  float grad_decay;    // coupled: grad + grad_decay * param; 0 otherwise
  float param_factor;  // decoupled: 1 - lr * wd; 1 otherwise
  float lerp_weight;   // 1 - beta1
  float beta2;
  float one_minus_beta2;
};

MomentScalars moment_scalars(const MomentsConfig& c, double lr, double weight_decay) {
  MomentScalars s{0.0f, 1.0f, static_cast<float>(1 - c.beta1), static_cast<float>(c.beta2),
                  static_cast<float>(1 - c.beta2)};
  if (weight_decay != 0 && c.decoupled_weight_decay) s.param_factor = static_cast<float>(1 - lr * weight_decay);
  if (weight_decay != 0 && !c.decoupled_weight_decay) s.grad_decay = static_cast<float>(weight_decay);
  return s;
}

// One element's decayed gradient and parameter and new moments.
struct Element {
  float grad;
  float param;
  float exp_avg;
  float exp_avg_sq;
};
inline Element decay_and_moments(float grad, float param, float exp_avg, float exp_avg_sq, const MomentScalars& s) {
  const float coupled = grad + s.grad_decay * param;  // then selected: no branch in the loops
  const float g = s.grad_decay != 0 ? coupled : grad;
  aten_adam_moments(g, exp_avg, exp_avg_sq, s.lerp_weight, s.beta2, s.one_minus_beta2);
  return {g, param * s.param_factor, exp_avg, exp_avg_sq};
}

struct NAdamScalars {
  MomentScalars moments;
  float bias_correction2;
  float eps;
  float grad_coef;
  float exp_avg_coef;
};

TIMM_AVX2_CLONES
void nadam_one_pass(float* __restrict param, const float* __restrict grad, float* __restrict exp_avg,
                    float* __restrict exp_avg_sq, int64_t n, const NAdamScalars s) {
  for (int64_t i = 0; i < n; ++i) {
    const Element e = decay_and_moments(grad[i], param[i], exp_avg[i], exp_avg_sq[i], s.moments);
    const float denom = std::sqrt(e.exp_avg_sq / s.bias_correction2) + s.eps;
    const float p = e.param + s.grad_coef * e.grad / denom;
    param[i] = p + s.exp_avg_coef * e.exp_avg / denom;
    exp_avg[i] = e.exp_avg;
    exp_avg_sq[i] = e.exp_avg_sq;
  }
}

struct RAdamScalars {
  MomentScalars moments;
  float bias_correction1;
  float lr;
  bool rectified;  // rho_t > 5: the adaptive, rectified step
  float eps;
  float bias_correction2_sqrt;
  float rect;
};

TIMM_AVX2_CLONES
void radam_one_pass(float* __restrict param, const float* __restrict grad, float* __restrict exp_avg,
                    float* __restrict exp_avg_sq, int64_t n, const RAdamScalars s) {
  for (int64_t i = 0; i < n; ++i) {
    const Element e = decay_and_moments(grad[i], param[i], exp_avg[i], exp_avg_sq[i], s.moments);
    const float update = e.exp_avg / s.bias_correction1 * s.lr;
    // torch's float / tensor: the reciprocal times the float.
    const float adaptive = 1.0f / (std::sqrt(e.exp_avg_sq) + s.eps) * s.bias_correction2_sqrt;
    param[i] = e.param - (s.rectified ? update * adaptive * s.rect : update);
    exp_avg[i] = e.exp_avg;
    exp_avg_sq[i] = e.exp_avg_sq;
  }
}

void init_moments(ForeachOptimizer::State& state, const at::Tensor& param) {
  state["exp_avg"] = at::zeros_like(param, at::MemoryFormat::Preserve);
  state["exp_avg_sq"] = at::zeros_like(param, at::MemoryFormat::Preserve);
}

// ---- Adam -------------------------------------------------------------------

class Adam : public ForeachOptimizer {
 public:
  Adam(std::vector<ParamGroup> groups, double lr, std::string description, MomentsConfig config, bool amsgrad,
       bool fused)
      : ForeachOptimizer(std::move(groups), lr, std::move(description)), c_(config), amsgrad_(amsgrad), fused_(fused) {}

 private:
  bool updates_parameters_independently() const override { return true; }
  void step_group(GroupStep& g) override {
    for (std::size_t i = 0; i < g.params.size(); ++i) {
      if (!g.states[i]->empty()) continue;
      init_moments(*g.states[i], g.params[i]);
      if (amsgrad_) (*g.states[i])["max_exp_avg_sq"] = at::zeros_like(g.params[i], at::MemoryFormat::Preserve);
    }
    const std::vector<double> steps = increment_steps(g);
    const Tensors exp_avgs = state_list(g, "exp_avg");
    const Tensors exp_avg_sqs = state_list(g, "exp_avg_sq");
    const Tensors max_exp_avg_sqs = amsgrad_ ? state_list(g, "max_exp_avg_sq") : Tensors{};
    const Tensors steps_list = state_list(g, "step");
    if (fused_ && fused_cpu_kernels_apply({g.params, g.grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps_list})) {
      // torch's fused=True: one pass per parameter, within a few float32
      // ulps of the per-tensor ops below (2.4e-7 after 10 steps).
      if (c_.decoupled_weight_decay) {
        at::_fused_adamw_(g.params, g.grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps_list, g.lr, c_.beta1,
                          c_.beta2, g.weight_decay, c_.eps, amsgrad_, /*maximize=*/false);
      } else {
        at::_fused_adam_(g.params, g.grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps_list, g.lr, c_.beta1,
                         c_.beta2, g.weight_decay, c_.eps, amsgrad_, /*maximize=*/false);
      }
      return;
    }
    const Tensors grads = apply_weight_decay(g.params, g.grads, g.lr, g.weight_decay, c_.decoupled_weight_decay);
    update_moments(exp_avgs, exp_avg_sqs, grads, c_);

    std::vector<double> step_sizes;
    std::vector<double> bias_correction2_sqrts;
    for (double step : steps) {
      step_sizes.push_back((g.lr / (1 - std::pow(c_.beta1, step))) * -1);
      bias_correction2_sqrts.push_back(std::pow(1 - std::pow(c_.beta2, step), 0.5));
    }
    Tensors denom;
    if (amsgrad_) {
      at::_foreach_maximum_(max_exp_avg_sqs, exp_avg_sqs);
      denom = at::_foreach_sqrt(max_exp_avg_sqs);
    } else {
      denom = at::_foreach_sqrt(exp_avg_sqs);
    }
    at::_foreach_div_(denom, to_scalars(bias_correction2_sqrts));
    at::_foreach_add_(denom, c_.eps);
    at::_foreach_addcdiv_(g.params, exp_avgs, denom, to_scalars(step_sizes));
  }

  MomentsConfig c_;
  bool amsgrad_;
  bool fused_;  // --opt-kwargs fused not False
};

// ---- NAdam ------------------------------------------------------------------

class NAdam : public ForeachOptimizer {
 public:
  NAdam(std::vector<ParamGroup> groups, double lr, std::string description, MomentsConfig config, double momentum_decay)
      : ForeachOptimizer(std::move(groups), lr, std::move(description)), c_(config), momentum_decay_(momentum_decay) {}

 private:
  bool updates_parameters_independently() const override { return true; }
  void step_group(GroupStep& g) override {
    for (std::size_t i = 0; i < g.params.size(); ++i) {
      if (!g.states[i]->empty()) continue;
      init_moments(*g.states[i], g.params[i]);
      // torch keeps the product of the momentum schedule as a float32 scalar.
      (*g.states[i])["mu_product"] = at::ones({}, at::kFloat);
    }
    const std::vector<double> steps = increment_steps(g);
    const Tensors exp_avgs = state_list(g, "exp_avg");
    const Tensors exp_avg_sqs = state_list(g, "exp_avg_sq");

    std::vector<double> bias_corrections2;
    std::vector<double> grad_coefs;
    std::vector<double> exp_avg_coefs;
    for (std::size_t i = 0; i < steps.size(); ++i) {
      const double step = steps[i];
      bias_corrections2.push_back(1 - std::pow(c_.beta2, step));
      const double mu = c_.beta1 * (1.0 - 0.5 * std::pow(0.96, step * momentum_decay_));
      const double mu_next = c_.beta1 * (1.0 - 0.5 * std::pow(0.96, (step + 1) * momentum_decay_));
      at::Tensor& mu_product = g.states[i]->at("mu_product");
      mu_product.mul_(mu);
      const double product = mu_product.item<double>();
      const double product_next = product * mu_next;
      grad_coefs.push_back(-g.lr * (1.0 - mu) / (1.0 - product));
      exp_avg_coefs.push_back((-g.lr * mu_next) / (1.0 - product_next));
    }
    if (c_.one_pass && fused_cpu_kernels_apply({g.params, g.grads, exp_avgs, exp_avg_sqs})) {
      const MomentScalars moments = moment_scalars(c_, g.lr, g.weight_decay);
      for (std::size_t i = 0; i < steps.size(); ++i) {
        const NAdamScalars s{moments, static_cast<float>(bias_corrections2[i]), static_cast<float>(c_.eps),
                             static_cast<float>(grad_coefs[i]), static_cast<float>(exp_avg_coefs[i])};
        run_one_pass_loop(g.params[i], g.grads[i], exp_avgs[i], exp_avg_sqs[i], nadam_one_pass, s);
      }
      return;
    }
    const Tensors grads = apply_weight_decay(g.params, g.grads, g.lr, g.weight_decay, c_.decoupled_weight_decay);
    update_moments(exp_avgs, exp_avg_sqs, grads, c_);
    Tensors denom = at::_foreach_div(exp_avg_sqs, to_scalars(bias_corrections2));
    at::_foreach_sqrt_(denom);
    at::_foreach_add_(denom, c_.eps);
    at::_foreach_addcdiv_(g.params, grads, denom, to_scalars(grad_coefs));
    at::_foreach_addcdiv_(g.params, exp_avgs, denom, to_scalars(exp_avg_coefs));
  }

  MomentsConfig c_;
  double momentum_decay_;
};

// ---- RAdam ------------------------------------------------------------------

class RAdam : public ForeachOptimizer {
 public:
  RAdam(std::vector<ParamGroup> groups, double lr, std::string description, MomentsConfig config)
      : ForeachOptimizer(std::move(groups), lr, std::move(description)), c_(config) {}

 private:
  bool updates_parameters_independently() const override { return true; }
  void step_group(GroupStep& g) override {
    for (std::size_t i = 0; i < g.params.size(); ++i) {
      if (g.states[i]->empty()) init_moments(*g.states[i], g.params[i]);
    }
    const std::vector<double> steps = increment_steps(g);
    const Tensors exp_avgs = state_list(g, "exp_avg");
    const Tensors exp_avg_sqs = state_list(g, "exp_avg_sq");
    if (c_.one_pass && fused_cpu_kernels_apply({g.params, g.grads, exp_avgs, exp_avg_sqs})) {
      const MomentScalars moments = moment_scalars(c_, g.lr, g.weight_decay);
      for (std::size_t i = 0; i < steps.size(); ++i) {
        run_one_pass_loop(g.params[i], g.grads[i], exp_avgs[i], exp_avg_sqs[i], radam_one_pass,
                          scalars(moments, g.lr, steps[i]));
      }
      return;
    }
    const Tensors grads = apply_weight_decay(g.params, g.grads, g.lr, g.weight_decay, c_.decoupled_weight_decay);
    update_moments(exp_avgs, exp_avg_sqs, grads, c_);

    // The variance is tractable (rho_t > 5) per parameter: its step count.
    std::vector<std::size_t> rectified;
    std::vector<std::size_t> plain;
    std::vector<double> bias_corrections1;
    std::vector<double> rect_bc2_sqrts;
    std::vector<double> rects;
    for (std::size_t i = 0; i < steps.size(); ++i) {
      bias_corrections1.push_back(1 - std::pow(c_.beta1, steps[i]));
      if (const std::optional<Rectification> r = rectification(steps[i])) {
        rectified.push_back(i);
        rect_bc2_sqrts.push_back(r->bias_correction2_sqrt);
        rects.push_back(r->rect);
      } else {
        plain.push_back(i);
      }
    }
    // torch: param.add_(exp_avg / bc1 * lr [* (sqrt(bc2) / (sqrt(v) + eps)) * rect], alpha=-1)
    Tensors updates = at::_foreach_div(exp_avgs, to_scalars(bias_corrections1));
    at::_foreach_mul_(updates, g.lr);
    if (!rectified.empty()) {
      Tensors adaptive = at::_foreach_sqrt(select(exp_avg_sqs, rectified));
      at::_foreach_add_(adaptive, c_.eps);
      at::_foreach_reciprocal_(adaptive);  // float / tensor is reciprocal * float in torch
      at::_foreach_mul_(adaptive, to_scalars(rect_bc2_sqrts));
      Tensors scaled = at::_foreach_mul(select(updates, rectified), adaptive);
      at::_foreach_mul_(scaled, to_scalars(rects));
      at::_foreach_add_(select(g.params, rectified), scaled, -1.0);
    }
    if (!plain.empty()) at::_foreach_add_(select(g.params, plain), select(updates, plain), -1.0);
  }

  // torch's rectification at `step` where the variance is tractable
  // (rho_t > 5), else none.
  struct Rectification {
    double bias_correction2_sqrt;
    double rect;
  };
  std::optional<Rectification> rectification(double step) const {
    const double rho_inf = 2 / (1 - c_.beta2) - 1;
    const double bias_correction2 = 1 - std::pow(c_.beta2, step);
    const double rho_t = rho_inf - 2 * step * std::pow(c_.beta2, step) / bias_correction2;
    if (!(rho_t > 5.0)) return std::nullopt;
    return Rectification{std::pow(bias_correction2, 0.5),
                         std::pow((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t), 0.5)};
  }

  RAdamScalars scalars(const MomentScalars& moments, double lr, double step) const {
    RAdamScalars s{moments,
                   static_cast<float>(1 - std::pow(c_.beta1, step)),
                   static_cast<float>(lr),
                   false,
                   static_cast<float>(c_.eps),
                   1.0f,
                   1.0f};
    if (const std::optional<Rectification> r = rectification(step)) {
      s.rectified = true;
      s.bias_correction2_sqrt = static_cast<float>(r->bias_correction2_sqrt);
      s.rect = static_cast<float>(r->rect);
    }
    return s;
  }

  MomentsConfig c_;
};

// ---- Factories --------------------------------------------------------------

const std::vector<std::string> kTorchCommon{
    "betas", "eps", "foreach", "maximize", "capturable", "differentiable", "decoupled_weight_decay"};

std::vector<std::string> known(std::vector<std::string> extra) {
  extra.insert(extra.end(), kTorchCommon.begin(), kTorchCommon.end());
  return extra;
}

MomentsConfig moments_config(const OptimizerArgs& args, const OptimizerKwargs& kwargs, EpsArg& eps) {
  check_lr(args);
  // torch's implementation choices, accepted at their defaults.
  reject_true_kwargs(args, kwargs, {"maximize", "capturable", "differentiable"});
  const std::vector<double> betas = resolve_betas(args, kwargs, {0.9, 0.999});
  eps = resolve_eps(args, kwargs, 1e-8);
  MomentsConfig c;
  c.beta1 = betas[0];
  c.beta2 = betas[1];
  c.eps = eps.value;
  c.decoupled_weight_decay = kwargs.get_bool("decoupled_weight_decay", false);
  c.one_pass = one_pass_requested(kwargs);
  return c;
}

// torch.optim.Adam, or its subclass AdamW: decoupled decay, always on (no
// decoupled_weight_decay argument).
OptimizerPtr make_adam_or_adamw(std::vector<ParamGroup> groups, const OptimizerArgs& args, bool adamw) {
  std::vector<std::string> names = known({"amsgrad", "fused"});
  if (adamw) std::erase(names, "decoupled_weight_decay");
  const OptimizerKwargs kwargs(args, names);
  EpsArg eps;
  MomentsConfig c = moments_config(args, kwargs, eps);
  if (adamw) c.decoupled_weight_decay = true;
  const bool amsgrad = kwargs.get_bool("amsgrad", false);
  const std::string description =
      describe_optimizer(adamw ? "AdamW" : "Adam", args.opt,
                         {{"lr", python_float_repr(args.lr)},
                          {"betas", betas_repr(args, {c.beta1, c.beta2}, /*always_tuple=*/true)},
                          {"eps", eps.repr},
                          {"weight_decay", python_float_repr(args.weight_decay)},
                          {"amsgrad", py_bool(amsgrad)},
                          {"maximize", "False"},
                          {"foreach", kwargs.repr("foreach", "None")},
                          {"capturable", "False"},
                          {"differentiable", "False"},
                          {"fused", kwargs.repr("fused", "None")},
                          {"decoupled_weight_decay", py_bool(c.decoupled_weight_decay)}});
  return std::make_unique<Adam>(std::move(groups), args.lr, description, c, amsgrad, fused_requested(kwargs));
}

}  // namespace

OptimizerPtr make_adam(std::vector<ParamGroup> groups, const OptimizerArgs& args) {
  return make_adam_or_adamw(std::move(groups), args, /*adamw=*/false);
}

OptimizerPtr make_adamw(std::vector<ParamGroup> groups, const OptimizerArgs& args) {
  return make_adam_or_adamw(std::move(groups), args, /*adamw=*/true);
}

OptimizerPtr make_nadam(std::vector<ParamGroup> groups, const OptimizerArgs& args) {
  const OptimizerKwargs kwargs(args, known({"momentum_decay"}));
  EpsArg eps;
  const MomentsConfig c = moments_config(args, kwargs, eps);
  const double momentum_decay = kwargs.get_double("momentum_decay", 4e-3);
  if (momentum_decay < 0) {
    throw UsageError("optimizer " + in_quotes(args.opt) + ": invalid momentum_decay value " +
                     python_float_repr(momentum_decay));
  }
  const std::string description =
      describe_optimizer("NAdam", args.opt,
                         {{"lr", python_float_repr(args.lr)},
                          {"betas", betas_repr(args, {c.beta1, c.beta2}, /*always_tuple=*/false)},
                          {"eps", eps.repr},
                          {"weight_decay", python_float_repr(args.weight_decay)},
                          {"momentum_decay", kwargs.repr("momentum_decay", "0.004")},
                          {"decoupled_weight_decay", py_bool(c.decoupled_weight_decay)},
                          {"maximize", "False"},
                          {"foreach", kwargs.repr("foreach", "None")},
                          {"capturable", "False"},
                          {"differentiable", "False"}});
  return std::make_unique<NAdam>(std::move(groups), args.lr, description, c, momentum_decay);
}

OptimizerPtr make_radam(std::vector<ParamGroup> groups, const OptimizerArgs& args) {
  const OptimizerKwargs kwargs(args, known({}));
  EpsArg eps;
  const MomentsConfig c = moments_config(args, kwargs, eps);
  const std::string description =
      describe_optimizer("RAdam", args.opt,
                         {{"lr", python_float_repr(args.lr)},
                          {"betas", betas_repr(args, {c.beta1, c.beta2}, /*always_tuple=*/false)},
                          {"eps", eps.repr},
                          {"weight_decay", python_float_repr(args.weight_decay)},
                          {"maximize", "False"},
                          {"foreach", kwargs.repr("foreach", "None")},
                          {"capturable", "False"},
                          {"decoupled_weight_decay", py_bool(c.decoupled_weight_decay)},
                          {"differentiable", "False"}});
  return std::make_unique<RAdam>(std::move(groups), args.lr, description, c);
}

}  // namespace timm::adam
