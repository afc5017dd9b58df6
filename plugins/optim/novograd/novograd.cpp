// "novograd" (and "novogradw", "novogradc"): timm.optim.NvNovoGrad, Adam
// whose second moment is one number per tensor (the running average of the
// gradient's squared L2 norm), the gradient normalized by it before the
// momentum; weight decay added to the normalized gradient (L2, as in the
// paper) or, with decoupled_decay, applied to the weights (lr, or lr² /
// max_lr corrected).
#include <cmath>

#include "timm/base/error.hpp"
#include "timm/optim/foreach_optimizer.hpp"
#include "timm/plugin/plugin.hpp"

namespace timm {
namespace {

struct NovoGradConfig {
  double beta1 = 0.95;
  double beta2 = 0.98;
  double eps = 1e-8;
  bool grad_averaging = false;
  bool amsgrad = false;
  bool decoupled_decay = false;
  std::optional<double> max_lr;  // set with corrected_weight_decay
};

class NvNovoGrad : public ForeachOptimizer {
 public:
  NvNovoGrad(std::vector<ParamGroup> groups, double lr, std::string description, NovoGradConfig config)
      : ForeachOptimizer(std::move(groups), lr, std::move(description)), c_(config) {}

 private:
  // timm's step, tensor by tensor as timm runs it (the norms are per tensor).
  bool updates_parameters_independently() const override { return true; }
  void step_group(GroupStep& g) override {
    for (std::size_t i = 0; i < g.params.size(); ++i) {
      State& state = *g.states[i];
      if (!state.empty()) continue;
      state["exp_avg"] = at::zeros_like(g.params[i]);
      // timm: torch.zeros([]) (the default dtype) on the parameter's device.
      const auto scalar = at::TensorOptions().dtype(at::kFloat).device(g.params[i].device());
      state["exp_avg_sq"] = at::zeros({}, scalar);
      if (c_.amsgrad) state["max_exp_avg_sq"] = at::zeros({}, scalar);
    }
    increment_steps(g);  // timm counts steps (a Python int) but does not use them
    for (std::size_t i = 0; i < g.params.size(); ++i) {
      State& state = *g.states[i];
      const at::Tensor& p = g.params[i];
      const at::Tensor& grad = g.grads[i];
      at::Tensor exp_avg = state.at("exp_avg");
      at::Tensor exp_avg_sq = state.at("exp_avg_sq");

      const at::Tensor norm = at::sum(at::pow(grad, 2));
      if (exp_avg_sq.item<double>() == 0) {
        exp_avg_sq.copy_(norm);
      } else {
        exp_avg_sq.mul_(c_.beta2).add_(norm, 1 - c_.beta2);
      }
      at::Tensor denom;
      if (c_.amsgrad) {
        at::Tensor max_exp_avg_sq = state.at("max_exp_avg_sq");
        at::max_out(max_exp_avg_sq, max_exp_avg_sq, exp_avg_sq);
        denom = max_exp_avg_sq.sqrt().add_(c_.eps);
      } else {
        denom = exp_avg_sq.sqrt().add_(c_.eps);
      }
      // A new tensor: the gradient is left as it was.
      at::Tensor update = grad / denom;
      if (g.weight_decay != 0) {
        if (c_.decoupled_decay) {
          const double wd_scale = c_.max_lr ? std::pow(g.lr, 2) / *c_.max_lr : g.lr;
          p.mul_(1. - wd_scale * g.weight_decay);
        } else {
          update.add_(p, g.weight_decay);
        }
      }
      if (c_.grad_averaging) update.mul_(1 - c_.beta1);
      exp_avg.mul_(c_.beta1).add_(update);
      p.add_(exp_avg, -g.lr);
    }
  }

  NovoGradConfig c_;
};

OptimizerPtr make_novograd(std::vector<ParamGroup> groups, const OptimizerArgs& args) {
  const OptimizerKwargs kwargs(
      args, {"betas", "eps", "grad_averaging", "amsgrad", "decoupled_decay", "corrected_weight_decay"});
  check_lr(args);
  const std::vector<double> betas = resolve_betas(args, kwargs, {0.95, 0.98});
  const EpsArg eps = resolve_eps(args, kwargs, 1e-8);
  const bool corrected = corrected_weight_decay(args, kwargs);
  NovoGradConfig c;
  c.beta1 = betas[0];
  c.beta2 = betas[1];
  c.eps = eps.value;
  c.grad_averaging = kwargs.get_bool("grad_averaging", false);
  c.amsgrad = kwargs.get_bool("amsgrad", false);
  c.decoupled_decay = kwargs.get_bool("decoupled_decay", false);
  // timm corrects the decay only when it is decoupled.
  if (corrected) c.max_lr = args.lr;
  const std::string description = describe_optimizer("NvNovoGrad", args.opt,
                                                     {{"lr", python_float_repr(args.lr)},
                                                      {"betas", betas_repr(args, betas, /*always_tuple=*/false)},
                                                      {"eps", eps.repr},
                                                      {"weight_decay", python_float_repr(args.weight_decay)},
                                                      {"grad_averaging", py_bool(c.grad_averaging)},
                                                      {"amsgrad", py_bool(c.amsgrad)},
                                                      {"decoupled_decay", py_bool(c.decoupled_decay)},
                                                      {"corrected_weight_decay", py_bool(corrected)},
                                                      {"max_lr_snapshot", python_float_repr(args.lr)}});
  return std::make_unique<NvNovoGrad>(std::move(groups), args.lr, description, c);
}

}  // namespace
}  // namespace timm

TIMM_PLUGIN("novograd") {
  using timm::bind_defaults;
  // train.py's --lr-base scaling is linear for these names (no "ada" in them).
  registrar.add_optimizer("novograd", "Normalized Adam with L2 norm gradient normalization", timm::make_novograd);
  registrar.add_optimizer("novogradw", "NovoGrad with decoupled weight decay",
                          bind_defaults(timm::make_novograd, {{"decoupled_decay", "True"}}));
  registrar.add_optimizer(
      "novogradc", "NovoGrad with corrected decoupled weight decay (lr²/max_lr scaling)",
      bind_defaults(timm::make_novograd, {{"decoupled_decay", "True"}, {"corrected_weight_decay", "True"}}));
}
