// timm.optim.Adopt ("adopt" and its decoupled / cautious / corrected
// variants): the gradient normalised by the previous second moment (clipped
// to (step - 1)^clip_exp) feeds the first moment; a parameter's first step
// only initialises the second moment.
#include <cmath>

#include "adam_family.hpp"
#include "timm/base/error.hpp"
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
  std::optional<double> max_lr;  // set with corrected_weight_decay
  bool caution = false;
};

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
    Tensors grads = g.grads;
    if (g.weight_decay != 0 && !c_.decoupled) grads = at::_foreach_add(grads, g.params, g.weight_decay);

    std::vector<std::size_t> first;
    std::vector<std::size_t> later;
    for (std::size_t i = 0; i < steps.size(); ++i) (steps[i] == 1 ? first : later).push_back(i);
    const Tensors exp_avg_sqs_all = state_list(g, "exp_avg_sq");
    if (!first.empty()) {
      const Tensors first_grads = select(grads, first);
      at::_foreach_addcmul_(select(exp_avg_sqs_all, first), first_grads, first_grads);
    }
    if (later.empty()) return;

    const Tensors params = select(g.params, later);
    const Tensors later_grads = select(grads, later);
    Tensors exp_avgs = select(state_list(g, "exp_avg"), later);
    const Tensors exp_avg_sqs = select(exp_avg_sqs_all, later);
    if (g.weight_decay != 0 && c_.decoupled) {
      const double wd_scale = c_.max_lr ? std::pow(g.lr, 2) / *c_.max_lr : g.lr;
      at::_foreach_add_(params, params, -wd_scale * g.weight_decay);
    }
    Tensors denom = at::_foreach_sqrt(exp_avg_sqs);
    at::_foreach_maximum_(denom, c_.eps);
    Tensors normed = at::_foreach_div(later_grads, denom);
    if (c_.clip_exp) {
      std::vector<c10::Scalar> lows;
      std::vector<c10::Scalar> highs;
      for (std::size_t i : later) {
        const double clip = std::pow(steps[i] - 1, *c_.clip_exp);
        lows.emplace_back(-clip);
        highs.emplace_back(clip);
      }
      at::_foreach_maximum_(normed, lows);
      at::_foreach_minimum_(normed, highs);
    }
    at::_foreach_lerp_(exp_avgs, normed, 1 - c_.beta1);
    // Caution masks a copy: the state keeps the unmasked moment.
    if (c_.caution) exp_avgs = cautioned(exp_avgs, later_grads);
    at::_foreach_add_(params, exp_avgs, -g.lr);
    at::_foreach_mul_(exp_avg_sqs, c_.beta2);
    at::_foreach_addcmul_(exp_avg_sqs, later_grads, later_grads, 1 - c_.beta2);
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
  const bool corrected = corrected_weight_decay(args, kwargs);
  AdoptConfig c;
  c.beta1 = betas[0];
  c.beta2 = betas[1];
  c.eps = eps.value;
  c.clip_exp = clip_exp.value;
  c.decoupled = kwargs.get_bool("decoupled", false);
  if (corrected) c.max_lr = args.lr;
  c.caution = kwargs.get_bool("caution", false);
  const std::string description = describe_optimizer("Adopt", args.opt,
                                                     {{"lr", python_float_repr(args.lr)},
                                                      {"betas", betas_repr(args, betas, /*always_tuple=*/false)},
                                                      {"eps", eps.repr},
                                                      {"weight_decay", python_float_repr(args.weight_decay)},
                                                      {"clip_exp", clip_exp.repr},
                                                      {"decoupled", py_bool(c.decoupled)},
                                                      {"corrected_weight_decay", py_bool(corrected)},
                                                      {"max_lr_snapshot", python_float_repr(args.lr)},
                                                      {"caution", py_bool(c.caution)},
                                                      {"maximize", "False"},
                                                      {"foreach", kwargs.repr("foreach", "None")},
                                                      {"capturable", "False"},
                                                      {"differentiable", "False"}});
  return std::make_unique<Adopt>(std::move(groups), args.lr, description, c);
}

}  // namespace timm::adam
