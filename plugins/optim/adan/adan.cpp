// "adan", "adanw", "cadan", "cadanw": timm.optim.Adan (Adaptive Nesterov
// Momentum, arXiv 2208.06677): moments of the gradient, of the gradient
// difference and of the squared Nesterov-corrected gradient, with three
// betas and a group-level step; the weight decay as a proximal division
// (adan) or decoupled (adanw, no_prox); optional caution on the first
// moment.
#include <cmath>

#include "timm/base/error.hpp"
#include "timm/optim/foreach_optimizer.hpp"
#include "timm/plugin/plugin.hpp"

namespace timm {
namespace {

using Tensors = std::vector<at::Tensor>;

struct AdanConfig {
  double beta1 = 0.98;
  double beta2 = 0.92;
  double beta3 = 0.99;
  double eps = 1e-8;
  bool no_prox = false;
  bool caution = false;
};

class Adan : public ForeachOptimizer {
 public:
  Adan(std::vector<ParamGroup> groups, double lr, std::string description, AdanConfig config)
      : ForeachOptimizer(std::move(groups), lr, std::move(description)), c_(config) {}

  void step() override {
    // timm counts group['step'] (a Python int) for every group, also one
    // without gradients this step.
    for (std::size_t g = 0; g < num_groups(); ++g) {
      State& state = mutable_group_state(g);
      if (state.count("step") == 0) state["step"] = at::zeros({}, at::kDouble);
      state["step"].add_(1);
    }
    ForeachOptimizer::step();
  }

 private:
  bool updates_parameters_independently() const override { return true; }
  void step_group(GroupStep& g) override {
    const double step = group_state(g.index).at("step").item<double>();
    for (std::size_t i = 0; i < g.params.size(); ++i) {
      State& state = *g.states[i];
      if (state.empty()) {
        state["exp_avg"] = at::zeros_like(g.params[i]);
        state["exp_avg_sq"] = at::zeros_like(g.params[i]);
        state["exp_avg_diff"] = at::zeros_like(g.params[i]);
      }
      // The previous gradient, negated; the current one on a parameter's
      // first step (so that the first difference is zero) and on the group's.
      if (state.count("neg_pre_grad") == 0 || step == 1) state["neg_pre_grad"] = at::neg(g.grads[i]);
    }
    const double bias_correction1 = 1.0 - std::pow(c_.beta1, step);
    const double bias_correction2 = 1.0 - std::pow(c_.beta2, step);
    const double bias_correction3_sqrt = std::sqrt(1.0 - std::pow(c_.beta3, step));
    // Each tensor's update is its own: in chunks, timm's _single_tensor_adan
    // (the CPU path) op by op.
    update(g, bias_correction1, bias_correction2, bias_correction3_sqrt);
  }

  void update(const GroupStep& a, double bias_correction1, double bias_correction2, double bias_correction3_sqrt) {
    Tensors exp_avgs = state_list(a, "exp_avg");
    const Tensors exp_avg_sqs = state_list(a, "exp_avg_sq");
    const Tensors exp_avg_diffs = state_list(a, "exp_avg_diff");
    const Tensors neg_pre_grads = state_list(a, "neg_pre_grad");

    // neg_pre_grads hold the gradient difference, then the Nesterov term.
    at::_foreach_add_(neg_pre_grads, a.grads);
    at::_foreach_lerp_(exp_avgs, a.grads, 1 - c_.beta1);  // m_t
    at::_foreach_mul_(exp_avg_diffs, c_.beta2);
    at::_foreach_add_(exp_avg_diffs, neg_pre_grads, 1 - c_.beta2);  // diff_t
    at::_foreach_mul_(neg_pre_grads, c_.beta2);
    at::_foreach_add_(neg_pre_grads, a.grads);
    at::_foreach_mul_(exp_avg_sqs, c_.beta3);
    at::_foreach_addcmul_(exp_avg_sqs, neg_pre_grads, neg_pre_grads, 1 - c_.beta3);  // n_t

    Tensors denom = at::_foreach_sqrt(exp_avg_sqs);
    at::_foreach_div_(denom, bias_correction3_sqrt);
    at::_foreach_add_(denom, c_.eps);
    const double lr = a.lr;
    const double step_size_diff = lr * c_.beta2 / bias_correction2;
    const double step_size = lr / bias_correction1;
    // Caution masks a copy: the state keeps the unmasked moment.
    if (c_.caution) exp_avgs = cautioned(exp_avgs, a.grads);

    if (c_.no_prox) {
      at::_foreach_mul_(a.params, 1 - lr * a.weight_decay);
      at::_foreach_addcdiv_(a.params, exp_avgs, denom, -step_size);
      at::_foreach_addcdiv_(a.params, exp_avg_diffs, denom, -step_size_diff);
    } else {
      at::_foreach_addcdiv_(a.params, exp_avgs, denom, -step_size);
      at::_foreach_addcdiv_(a.params, exp_avg_diffs, denom, -step_size_diff);
      at::_foreach_div_(a.params, 1 + lr * a.weight_decay);
    }
    at::_foreach_zero_(neg_pre_grads);
    at::_foreach_add_(neg_pre_grads, a.grads, -1.0);
  }

  AdanConfig c_;
};

OptimizerPtr make_adan(std::vector<ParamGroup> groups, const OptimizerArgs& args) {
  const OptimizerKwargs kwargs(args, {"betas", "eps", "no_prox", "caution", "foreach"});
  check_lr(args);
  const std::vector<double> betas = resolve_betas(args, kwargs, {0.98, 0.92, 0.99}, 3);
  const EpsArg eps = resolve_eps(args, kwargs, 1e-8);
  AdanConfig c;
  c.beta1 = betas[0];
  c.beta2 = betas[1];
  c.beta3 = betas[2];
  c.eps = eps.value;
  c.no_prox = kwargs.get_bool("no_prox", false);
  c.caution = kwargs.get_bool("caution", false);
  const std::string description = describe_optimizer("Adan", args.opt,
                                                     {{"lr", python_float_repr(args.lr)},
                                                      {"betas", betas_repr(args, betas, /*always_tuple=*/false)},
                                                      {"eps", eps.repr},
                                                      {"weight_decay", python_float_repr(args.weight_decay)},
                                                      {"no_prox", kwargs.repr("no_prox", "False")},
                                                      {"caution", kwargs.repr("caution", "False")},
                                                      {"foreach", kwargs.repr("foreach", "None")}});
  return std::make_unique<Adan>(std::move(groups), args.lr, description, c);
}

}  // namespace
}  // namespace timm

TIMM_PLUGIN("adan") {
  using timm::bind_defaults;
  // train.py scales --lr-base by the square root for names containing "ada".
  const timm::OptimizerTraits sqrt_lr{.lr_base_scale = timm::LrBaseScale::kSqrt};
  registrar.add_optimizer("adan", "Adaptive Nesterov Momentum Algorithm",
                          bind_defaults(timm::make_adan, {{"no_prox", "False"}}), sqrt_lr);
  registrar.add_optimizer("adanw", "Adaptive Nesterov Momentum with decoupled weight decay",
                          bind_defaults(timm::make_adan, {{"no_prox", "True"}}), sqrt_lr);
  registrar.add_optimizer("cadan", "Cautious Adaptive Nesterov Momentum Algorithm",
                          bind_defaults(timm::make_adan, {{"caution", "True"}, {"no_prox", "False"}}), sqrt_lr);
  registrar.add_optimizer("cadanw", "Cautious Adaptive Nesterov Momentum with decoupled weight decay",
                          bind_defaults(timm::make_adan, {{"caution", "True"}, {"no_prox", "True"}}), sqrt_lr);
}
