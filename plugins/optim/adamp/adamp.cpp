// "adamp" / "sgdp" (and the cautious "cadamp" / "csgdp"): timm.optim.AdamP
// and SGDP. Adam / SGD whose update of a multi-dimensional weight is projected
// onto the tangent space of the weight (per output channel, else for the
// whole tensor) when weight and gradient are nearly orthogonal, with the
// weight decay then scaled by wd_ratio (scale-invariant weights, arXiv
// 2006.08217). The moments are updated over the whole group with foreach
// ops; the projection decides per tensor, as timm.
#include <array>
#include <cmath>

#include "timm/base/error.hpp"
#include "timm/optim/foreach_optimizer.hpp"
#include "timm/plugin/plugin.hpp"

namespace timm {
namespace {

using Tensors = std::vector<at::Tensor>;

struct ProjectionConfig {
  double eps = 1e-8;
  double delta = 0.1;
  double wd_ratio = 0.1;
  bool caution = false;
};

// timm's caution on one tensor, in place.
void caution_(at::Tensor& update, const at::Tensor& grad) {
  at::Tensor mask = update.mul(grad).gt(0).to(grad.scalar_type());
  mask.div_(mask.mean().clamp_min_(1e-3));
  update.mul_(mask);
}

// x.reshape(x.size(0), -1) or x.reshape(1, -1).
at::Tensor view_as(const at::Tensor& x, bool channel) {
  return channel ? x.reshape({x.size(0), -1}) : x.reshape({1, -1});
}

// |F.cosine_similarity(grad_view, param_view, dim=1, eps)| of timm's two
// views: per output channel, and over the whole tensor. Each call makes six
// passes over the tensor (two norms, two divisions, a product, a sum); here
// one product and sum and two norms per channel serve both, as the whole
// tensor's dot product and squared norms are the sums of the channels'.
// The same cosines up to float32 rounding, which can only move a weight whose
// cosine lies within a few ulps of timm's threshold to the other branch.
std::array<at::Tensor, 2> abs_cosines(const at::Tensor& p, const at::Tensor& grad, double eps) {
  const at::Tensor param_rows = view_as(p, /*channel=*/true);
  const at::Tensor grad_rows = view_as(grad, /*channel=*/true);
  const at::Tensor dots = grad_rows.mul(param_rows).sum(1);
  const at::Tensor grad_norms = at::linalg_vector_norm(grad_rows, 2, {1});
  const at::Tensor param_norms = at::linalg_vector_norm(param_rows, 2, {1});
  auto cosine = [eps](const at::Tensor& dot, const at::Tensor& grad_norm, const at::Tensor& param_norm) {
    return dot.div(grad_norm.clamp_min(eps).mul(param_norm.clamp_min(eps))).abs_();
  };
  return {cosine(dots, grad_norms, param_norms),
          cosine(dots.sum(), grad_norms.square().sum().sqrt(), param_norms.square().sum().sqrt())};
}

// timm.optim.adamp.projection: projects `perturb` in place where the weight
// is nearly orthogonal to its gradient; returns the weight-decay ratio.
double project_(const at::Tensor& p, const at::Tensor& grad, at::Tensor& perturb, const ProjectionConfig& c) {
  std::vector<int64_t> expand_size(static_cast<std::size_t>(p.dim()), 1);
  expand_size[0] = -1;
  const std::array<at::Tensor, 2> cosines = abs_cosines(p, grad, c.eps);
  for (bool channel : {true, false}) {
    const at::Tensor param_view = view_as(p, channel);
    const at::Tensor& cosine = cosines[channel ? 0 : 1];
    if (!cosine.max().lt(c.delta / std::sqrt(static_cast<double>(param_view.size(1)))).item<bool>()) continue;
    const at::Tensor p_n = p / param_view.norm(2, {1}).add_(c.eps).reshape(expand_size);
    perturb -= p_n * view_as(p_n * perturb, channel).sum(1).reshape(expand_size);
    if (c.caution) {
      const at::Tensor grad_radial = p_n * view_as(p_n * grad, channel).sum(1).reshape(expand_size);
      const at::Tensor grad_perp = grad - grad_radial;
      caution_(perturb, grad_perp);
      perturb -= p_n * view_as(p_n * perturb, channel).sum(1).reshape(expand_size);
    }
    return c.wd_ratio;
  }
  if (c.caution) caution_(perturb, grad);
  return 1.0;
}

// What timm does after the update direction: projection or caution.
double shape_update_(const at::Tensor& p, const at::Tensor& grad, at::Tensor& update, const ProjectionConfig& c) {
  if (p.dim() > 1) return project_(p, grad, update, c);
  if (c.caution) caution_(update, grad);
  return 1.0;
}

// ---- AdamP ------------------------------------------------------------------

struct AdamPConfig {
  double beta1 = 0.9;
  double beta2 = 0.999;
  bool nesterov = false;
  ProjectionConfig projection;
};

class AdamP : public ForeachOptimizer {
 public:
  AdamP(std::vector<ParamGroup> groups, double lr, std::string description, AdamPConfig config)
      : ForeachOptimizer(std::move(groups), lr, std::move(description)), c_(config) {}

 private:
  bool updates_parameters_independently() const override { return true; }
  void step_group(GroupStep& g) override {
    for (std::size_t i = 0; i < g.params.size(); ++i) {
      if (!g.states[i]->empty()) continue;
      (*g.states[i])["exp_avg"] = at::zeros_like(g.params[i]);
      (*g.states[i])["exp_avg_sq"] = at::zeros_like(g.params[i]);
    }
    const std::vector<double> steps = increment_steps(g, at::kDouble);  // a Python int in timm
    const Tensors exp_avgs = state_list(g, "exp_avg");
    const Tensors exp_avg_sqs = state_list(g, "exp_avg_sq");
    at::_foreach_mul_(exp_avgs, c_.beta1);
    at::_foreach_add_(exp_avgs, g.grads, 1 - c_.beta1);
    at::_foreach_mul_(exp_avg_sqs, c_.beta2);
    at::_foreach_addcmul_(exp_avg_sqs, g.grads, g.grads, 1 - c_.beta2);

    std::vector<c10::Scalar> bias_correction2_sqrts;
    for (double step : steps) bias_correction2_sqrts.emplace_back(std::sqrt(1 - std::pow(c_.beta2, step)));
    Tensors denom = at::_foreach_sqrt(exp_avg_sqs);
    at::_foreach_div_(denom, bias_correction2_sqrts);
    at::_foreach_add_(denom, c_.projection.eps);
    Tensors perturbs;
    if (c_.nesterov) {
      perturbs = at::_foreach_mul(exp_avgs, c_.beta1);
      at::_foreach_add_(perturbs, at::_foreach_mul(g.grads, 1 - c_.beta1));
      at::_foreach_div_(perturbs, denom);
    } else {
      perturbs = at::_foreach_div(exp_avgs, denom);
    }
    for (std::size_t i = 0; i < g.params.size(); ++i) {
      const double wd_ratio = shape_update_(g.params[i], g.grads[i], perturbs[i], c_.projection);
      if (g.weight_decay > 0) g.params[i].mul_(1. - g.lr * g.weight_decay * wd_ratio);
      const double step_size = g.lr / (1 - std::pow(c_.beta1, steps[i]));
      g.params[i].add_(perturbs[i], -step_size);
    }
  }

  AdamPConfig c_;
};

// ---- SGDP -------------------------------------------------------------------

struct SGDPConfig {
  double momentum = 0.0;
  double dampening = 0.0;
  bool nesterov = false;
  ProjectionConfig projection;
};

class SGDP : public ForeachOptimizer {
 public:
  SGDP(std::vector<ParamGroup> groups, double lr, std::string description, SGDPConfig config)
      : ForeachOptimizer(std::move(groups), lr, std::move(description)), c_(config) {}

 private:
  bool updates_parameters_independently() const override { return true; }
  void step_group(GroupStep& g) override {
    for (std::size_t i = 0; i < g.params.size(); ++i) {
      if (g.states[i]->empty()) (*g.states[i])["momentum"] = at::zeros_like(g.params[i]);
    }
    const Tensors bufs = state_list(g, "momentum");
    at::_foreach_mul_(bufs, c_.momentum);
    at::_foreach_add_(bufs, g.grads, 1. - c_.dampening);
    Tensors updates;
    if (c_.nesterov) {
      updates = at::_foreach_add(g.grads, at::_foreach_mul(bufs, c_.momentum));
    } else {
      updates = at::_foreach_mul(bufs, 1.0);  // buf.clone()
    }
    for (std::size_t i = 0; i < g.params.size(); ++i) {
      const double wd_ratio = shape_update_(g.params[i], g.grads[i], updates[i], c_.projection);
      if (g.weight_decay != 0) g.params[i].mul_(1. - g.lr * g.weight_decay * wd_ratio / (1 - c_.momentum));
    }
    at::_foreach_add_(g.params, updates, -g.lr);
  }

  SGDPConfig c_;
};

// ---- Factories --------------------------------------------------------------

ProjectionConfig projection_config(const OptimizerArgs& args, const OptimizerKwargs& kwargs, EpsArg& eps,
                                   double wd_ratio_default) {
  eps = resolve_eps(args, kwargs, 1e-8);
  ProjectionConfig c;
  c.eps = eps.value;
  c.delta = kwargs.get_double("delta", 0.1);
  c.wd_ratio = kwargs.get_double("wd_ratio", wd_ratio_default);
  c.caution = kwargs.get_bool("caution", false);
  return c;
}

OptimizerPtr make_adamp(std::vector<ParamGroup> groups, const OptimizerArgs& args) {
  const OptimizerKwargs kwargs(args, {"betas", "eps", "delta", "wd_ratio", "nesterov", "caution"});
  check_lr(args);
  AdamPConfig c;
  const std::vector<double> betas = resolve_betas(args, kwargs, {0.9, 0.999});
  c.beta1 = betas[0];
  c.beta2 = betas[1];
  c.nesterov = kwargs.get_bool("nesterov", false);
  EpsArg eps;
  c.projection = projection_config(args, kwargs, eps, 0.1);
  const std::string description = describe_optimizer("AdamP", args.opt,
                                                     {{"lr", python_float_repr(args.lr)},
                                                      {"betas", betas_repr(args, betas, /*always_tuple=*/false)},
                                                      {"eps", eps.repr},
                                                      {"weight_decay", python_float_repr(args.weight_decay)},
                                                      {"delta", kwargs.repr("delta", "0.1")},
                                                      {"wd_ratio", kwargs.repr("wd_ratio", "0.1")},
                                                      {"nesterov", py_bool(c.nesterov)},
                                                      {"caution", py_bool(c.projection.caution)}});
  return std::make_unique<AdamP>(std::move(groups), args.lr, description, c);
}

OptimizerPtr make_sgdp(std::vector<ParamGroup> groups, const OptimizerArgs& args) {
  // betas are accepted and dropped (timm: has_betas False).
  const OptimizerKwargs kwargs(args, {"betas", "eps", "dampening", "delta", "wd_ratio", "nesterov", "caution"});
  check_lr(args);
  SGDPConfig c;
  c.momentum = args.momentum;
  c.dampening = kwargs.get_double("dampening", 0.0);
  c.nesterov = kwargs.get_bool("nesterov", false);
  EpsArg eps;
  c.projection = projection_config(args, kwargs, eps, 0.1);
  const std::string description = describe_optimizer("SGDP", args.opt,
                                                     {{"lr", python_float_repr(args.lr)},
                                                      {"momentum", python_float_repr(c.momentum)},
                                                      {"dampening", kwargs.repr("dampening", "0")},
                                                      {"weight_decay", python_float_repr(args.weight_decay)},
                                                      {"nesterov", py_bool(c.nesterov)},
                                                      {"eps", eps.repr},
                                                      {"delta", kwargs.repr("delta", "0.1")},
                                                      {"wd_ratio", kwargs.repr("wd_ratio", "0.1")},
                                                      {"caution", py_bool(c.projection.caution)}});
  return std::make_unique<SGDP>(std::move(groups), args.lr, description, c);
}

}  // namespace
}  // namespace timm

TIMM_PLUGIN("adamp") {
  using timm::bind_defaults;
  // train.py scales --lr-base by the square root of the batch ratio for
  // timm's Adam-type names ("ada" in them), linearly for the SGD ones.
  const timm::OptimizerTraits sqrt_lr{.lr_base_scale = timm::LrBaseScale::kSqrt};
  registrar.add_optimizer("adamp", "Adam with built-in projection to unit norm sphere",
                          bind_defaults(timm::make_adamp, {{"wd_ratio", "0.01"}, {"nesterov", "True"}}), sqrt_lr);
  registrar.add_optimizer(
      "cadamp", "Add the spherical cautious optimizer and the standard cautious optimizer to AdamP",
      bind_defaults(timm::make_adamp, {{"wd_ratio", "0.01"}, {"nesterov", "True"}, {"caution", "True"}}), sqrt_lr);
  registrar.add_optimizer("sgdp", "SGD with built-in projection to unit norm sphere",
                          bind_defaults(timm::make_sgdp, {{"nesterov", "True"}}));
  registrar.add_optimizer("csgdp", "Add the spherical cautious optimizer and the standard cautious optimizer to SGDP",
                          bind_defaults(timm::make_sgdp, {{"nesterov", "True"}, {"caution", "True"}}));
}
