// timm.optim.AdaBelief ("adabelief": rectify False; "radabelief": True):
// Adam whose second moment tracks the variance of the gradient around its
// mean, eps added into that state every step (as timm does), with the
// RAdam-style rectification when `rectify`.
#include <cmath>

#include "adam_family.hpp"
#include "timm/base/error.hpp"
#include "timm/optim/foreach_optimizer.hpp"

namespace timm::adam {
namespace {

using Tensors = std::vector<at::Tensor>;

struct AdaBeliefConfig {
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-16;
  bool amsgrad = false;
  bool decoupled_decay = true;
  bool fixed_decay = false;
  bool rectify = true;
  bool degenerated_to_sgd = true;
};

class AdaBelief : public ForeachOptimizer {
 public:
  AdaBelief(std::vector<ParamGroup> groups, double lr, std::string description, AdaBeliefConfig config)
      : ForeachOptimizer(std::move(groups), lr, std::move(description)), c_(config) {}

 private:
  bool updates_parameters_independently() const override { return true; }
  void step_group(GroupStep& g) override {
    for (std::size_t i = 0; i < g.params.size(); ++i) {
      if (!g.states[i]->empty()) continue;
      for (const char* key : {"exp_avg", "exp_avg_var"}) (*g.states[i])[key] = at::zeros_like(g.params[i]);
      if (c_.amsgrad) (*g.states[i])["max_exp_avg_var"] = at::zeros_like(g.params[i]);
    }
    // timm counts steps in a Python int.
    const std::vector<double> steps = increment_steps(g, at::kDouble);
    const Tensors exp_avgs = state_list(g, "exp_avg");
    const Tensors exp_avg_vars = state_list(g, "exp_avg_var");

    Tensors grads = g.grads;
    if (c_.decoupled_decay) {
      const double decay = c_.fixed_decay ? g.weight_decay : g.lr * g.weight_decay;
      if (decay != 0) at::_foreach_mul_(g.params, 1.0 - decay);
    } else if (g.weight_decay != 0) {
      grads = at::_foreach_add(grads, g.params, g.weight_decay);
    }
    at::_foreach_lerp_(exp_avgs, grads, 1 - c_.beta1);
    const Tensors residuals = at::_foreach_sub(grads, exp_avgs);
    at::_foreach_mul_(exp_avg_vars, c_.beta2);
    at::_foreach_addcmul_(exp_avg_vars, residuals, residuals, 1 - c_.beta2);
    at::_foreach_add_(exp_avg_vars, c_.eps);
    if (c_.amsgrad) at::_foreach_maximum_(state_list(g, "max_exp_avg_var"), exp_avg_vars);

    if (c_.rectify) {
      rectified_update(g, steps, exp_avgs, exp_avg_vars);
      return;
    }
    std::vector<c10::Scalar> bias_correction2_sqrts;
    std::vector<c10::Scalar> step_sizes;
    for (double step : steps) {
      bias_correction2_sqrts.emplace_back(std::sqrt(1 - std::pow(c_.beta2, step)));
      step_sizes.emplace_back(-g.lr / (1 - std::pow(c_.beta1, step)));
    }
    Tensors denom = at::_foreach_sqrt(c_.amsgrad ? state_list(g, "max_exp_avg_var") : exp_avg_vars);
    at::_foreach_div_(denom, bias_correction2_sqrts);
    at::_foreach_add_(denom, c_.eps);
    at::_foreach_addcdiv_(g.params, exp_avgs, denom, step_sizes);
  }

  // RAdam's rule: adaptive where the variance is tractable (num_sma >= 5),
  // else SGD with momentum (degenerated_to_sgd) or no update.
  void rectified_update(const GroupStep& g, const std::vector<double>& steps, const Tensors& exp_avgs,
                        const Tensors& exp_avg_vars) const {
    std::vector<std::size_t> adaptive;
    std::vector<c10::Scalar> adaptive_sizes;
    std::vector<std::size_t> sgd;
    std::vector<c10::Scalar> sgd_sizes;
    const double num_sma_max = 2 / (1 - c_.beta2) - 1;
    for (std::size_t i = 0; i < steps.size(); ++i) {
      const double beta2_t = std::pow(c_.beta2, steps[i]);
      const double num_sma = num_sma_max - 2 * steps[i] * beta2_t / (1 - beta2_t);
      const double bias_correction1 = 1 - std::pow(c_.beta1, steps[i]);
      if (num_sma >= 5) {
        const double step_size = std::sqrt((1 - beta2_t) * (num_sma - 4) / (num_sma_max - 4) * (num_sma - 2) / num_sma *
                                           num_sma_max / (num_sma_max - 2)) /
                                 bias_correction1;
        adaptive.push_back(i);
        adaptive_sizes.emplace_back(-step_size * g.lr);
      } else if (c_.degenerated_to_sgd) {
        sgd.push_back(i);
        sgd_sizes.emplace_back(-(1.0 / bias_correction1) * g.lr);
      }
    }
    if (!adaptive.empty()) {
      Tensors denom = at::_foreach_sqrt(select(exp_avg_vars, adaptive));
      at::_foreach_add_(denom, c_.eps);
      at::_foreach_addcdiv_(select(g.params, adaptive), select(exp_avgs, adaptive), denom, adaptive_sizes);
    }
    // The first steps only; per tensor, as timm's single-tensor path (its
    // step sizes differ per parameter).
    for (std::size_t k = 0; k < sgd.size(); ++k) g.params[sgd[k]].add_(exp_avgs[sgd[k]], sgd_sizes[k]);
  }

  AdaBeliefConfig c_;
};

}  // namespace

OptimizerPtr make_adabelief(std::vector<ParamGroup> groups, const OptimizerArgs& args) {
  const OptimizerKwargs kwargs(
      args, {"betas", "eps", "amsgrad", "decoupled_decay", "fixed_decay", "rectify", "degenerated_to_sgd", "foreach"});
  check_lr(args);
  const std::vector<double> betas = resolve_betas(args, kwargs, {0.9, 0.999});
  const EpsArg eps = resolve_eps(args, kwargs, 1e-16);
  AdaBeliefConfig c;
  c.beta1 = betas[0];
  c.beta2 = betas[1];
  c.eps = eps.value;
  c.amsgrad = kwargs.get_bool("amsgrad", false);
  c.decoupled_decay = kwargs.get_bool("decoupled_decay", true);
  c.fixed_decay = kwargs.get_bool("fixed_decay", false);
  c.rectify = kwargs.get_bool("rectify", true);
  c.degenerated_to_sgd = kwargs.get_bool("degenerated_to_sgd", true);
  const std::string description = describe_optimizer("AdaBelief", args.opt,
                                                     {{"lr", python_float_repr(args.lr)},
                                                      {"betas", betas_repr(args, betas, /*always_tuple=*/false)},
                                                      {"eps", eps.repr},
                                                      {"weight_decay", python_float_repr(args.weight_decay)},
                                                      {"amsgrad", py_bool(c.amsgrad)},
                                                      {"degenerated_to_sgd", py_bool(c.degenerated_to_sgd)},
                                                      {"decoupled_decay", py_bool(c.decoupled_decay)},
                                                      {"rectify", py_bool(c.rectify)},
                                                      {"fixed_decay", py_bool(c.fixed_decay)},
                                                      {"foreach", kwargs.repr("foreach", "None")}});
  return std::make_unique<AdaBelief>(std::move(groups), args.lr, description, c);
}

}  // namespace timm::adam
