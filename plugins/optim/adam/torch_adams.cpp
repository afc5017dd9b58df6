// torch.optim.Adam, AdamW, NAdam and RAdam as timm's registry binds them
// ("adam", "adamw", "nadam", "radam", "radamw"): torch's update with its operations in its
// order (the single-tensor path, which Python runs on CPU, and the
// multi-tensor path, the same ops over lists), per-parameter float32 step
// counts kept as torch keeps them.
#include <cmath>

#include "adam_family.hpp"
#include "timm/base/error.hpp"
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

void init_moments(ForeachOptimizer::State& state, const at::Tensor& param) {
  state["exp_avg"] = at::zeros_like(param, at::MemoryFormat::Preserve);
  state["exp_avg_sq"] = at::zeros_like(param, at::MemoryFormat::Preserve);
}

// ---- Adam -------------------------------------------------------------------

class Adam : public ForeachOptimizer {
 public:
  Adam(std::vector<ParamGroup> groups, double lr, std::string description, MomentsConfig config, bool amsgrad,
       bool fused)
      : ForeachOptimizer(std::move(groups), lr, std::move(description)),
        c_(config),
        amsgrad_(amsgrad),
        fused_(fused) {}

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
    const Tensors grads = apply_weight_decay(g.params, g.grads, g.lr, g.weight_decay, c_.decoupled_weight_decay);

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
    const Tensors grads = apply_weight_decay(g.params, g.grads, g.lr, g.weight_decay, c_.decoupled_weight_decay);
    update_moments(exp_avgs, exp_avg_sqs, grads, c_);

    // The variance is tractable (rho_t > 5) per parameter: its step count.
    std::vector<std::size_t> rectified;
    std::vector<std::size_t> plain;
    std::vector<double> bias_corrections1;
    std::vector<double> rect_bc2_sqrts;
    std::vector<double> rects;
    const double rho_inf = 2 / (1 - c_.beta2) - 1;
    for (std::size_t i = 0; i < steps.size(); ++i) {
      const double step = steps[i];
      bias_corrections1.push_back(1 - std::pow(c_.beta1, step));
      const double bias_correction2 = 1 - std::pow(c_.beta2, step);
      const double rho_t = rho_inf - 2 * step * std::pow(c_.beta2, step) / bias_correction2;
      if (rho_t > 5.0) {
        rectified.push_back(i);
        rect_bc2_sqrts.push_back(std::pow(bias_correction2, 0.5));
        rects.push_back(std::pow((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t), 0.5));
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
