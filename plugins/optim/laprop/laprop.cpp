// "laprop", "lapropc", "claprop": timm.optim.LaProp (arXiv 2002.04839):
// the gradient normalised by the root of its (bias-corrected) second moment
// feeds a momentum that carries the lr; the first moment's bias correction is
// an average of the past lrs (exp_avg_lr_1), so that lr changes are
// corrected too. Decoupled weight decay after the update (lr, or lr² / max_lr
// corrected), optional caution.
#include <cmath>
#include <map>
#include <optional>

#include "timm/base/error.hpp"
#include "timm/optim/foreach_optimizer.hpp"
#include "timm/plugin/plugin.hpp"

namespace timm {
namespace {

using Tensors = std::vector<at::Tensor>;

struct LapropConfig {
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-15;
  bool caution = false;
  std::optional<double> max_lr;  // set with corrected_weight_decay
};

class Laprop : public ForeachOptimizer {
 public:
  Laprop(std::vector<ParamGroup> groups, double lr, std::string description, LapropConfig config)
      : ForeachOptimizer(std::move(groups), lr, std::move(description)), c_(config) {}

 private:
  bool updates_parameters_independently() const override { return true; }
  void step_group(GroupStep& g) override {
    const double one_minus_beta1 = 1 - c_.beta1;
    const double one_minus_beta2 = 1 - c_.beta2;
    for (std::size_t i = 0; i < g.params.size(); ++i) {
      State& state = *g.states[i];
      if (state.empty()) {
        state["step"] = at::zeros({}, at::kFloat);  // timm's _init_scalar: float32 on the CPU
        state["exp_avg"] = at::zeros_like(g.params[i]);
        // A Python float in timm (float lr): a float64 here.
        state["exp_avg_lr_1"] = at::zeros({}, at::kDouble);
        state["exp_avg_lr_2"] = at::zeros({}, at::kFloat);
        state["exp_avg_sq"] = at::zeros_like(g.params[i]);
      }
      // Per parameter: the parameters of a group can be at different steps.
      state["step"].add_(1);
      const double exp_avg_lr_1 = state["exp_avg_lr_1"].item<double>();
      state["exp_avg_lr_1"].fill_(exp_avg_lr_1 * c_.beta1 + one_minus_beta1 * g.lr);
      // float32 tensor arithmetic, as timm's.
      state["exp_avg_lr_2"] = state["exp_avg_lr_2"] * c_.beta2 + one_minus_beta2;
    }
    update(g);
  }

  // timm's _single_tensor_laprop (its CPU path), op by op over the tensors.
  void update(const GroupStep& a) {
    const double lr = a.lr;
    std::vector<c10::Scalar> bias_corrections2;
    std::map<double, std::vector<std::size_t>> by_step_size;  // usually one: the same steps and lr
    for (std::size_t i = 0; i < a.params.size(); ++i) {
      const State& state = *a.states[i];
      bias_corrections2.emplace_back(state.at("exp_avg_lr_2").item<double>());
      // 1 / bias_correction1 with bias_correction1 = exp_avg_lr_1 / lr; 0 when lr is.
      const double exp_avg_lr_1 = state.at("exp_avg_lr_1").item<double>();
      by_step_size[exp_avg_lr_1 != 0 ? lr / exp_avg_lr_1 : 0.0].push_back(i);
    }
    const Tensors exp_avgs = state_list(a, "exp_avg");
    const Tensors exp_avg_sqs = state_list(a, "exp_avg_sq");

    at::_foreach_mul_(exp_avg_sqs, c_.beta2);
    at::_foreach_addcmul_(exp_avg_sqs, a.grads, a.grads, 1 - c_.beta2);
    Tensors denom = at::_foreach_div(exp_avg_sqs, bias_corrections2);
    at::_foreach_sqrt_(denom);
    at::_foreach_add_(denom, c_.eps);
    const Tensors step_of_this_grad = at::_foreach_div(a.grads, denom);
    at::_foreach_mul_(exp_avgs, c_.beta1);
    at::_foreach_add_(exp_avgs, step_of_this_grad, lr * (1 - c_.beta1));

    // Caution masks a copy: the state keeps the unmasked moment.
    const Tensors updates = c_.caution ? cautioned(exp_avgs, a.grads) : exp_avgs;
    for (const auto& [step_size, indices] : by_step_size) {
      at::_foreach_add_(select(a.params, indices), select(updates, indices), -step_size);
    }
    if (a.weight_decay != 0) {
      const double wd_scale = c_.max_lr ? std::pow(lr, 2) / *c_.max_lr : lr;
      at::_foreach_add_(a.params, a.params, -wd_scale * a.weight_decay);
    }
  }

  LapropConfig c_;
};

OptimizerPtr make_laprop(std::vector<ParamGroup> groups, const OptimizerArgs& args) {
  const OptimizerKwargs kwargs(args, {"betas", "eps", "caution", "corrected_weight_decay", "foreach"});
  check_lr(args);
  const std::vector<double> betas = resolve_betas(args, kwargs, {0.9, 0.999});
  const EpsArg eps = resolve_eps(args, kwargs, 1e-15);
  const bool corrected = corrected_weight_decay(args, kwargs);
  LapropConfig c;
  c.beta1 = betas[0];
  c.beta2 = betas[1];
  c.eps = eps.value;
  c.caution = kwargs.get_bool("caution", false);
  if (corrected) c.max_lr = args.lr;
  const std::string description =
      describe_optimizer("LaProp", args.opt,
                         {{"lr", python_float_repr(args.lr)},
                          {"betas", betas_repr(args, betas, /*always_tuple=*/false)},
                          {"eps", eps.repr},
                          {"weight_decay", python_float_repr(args.weight_decay)},
                          {"caution", kwargs.repr("caution", "False")},
                          {"corrected_weight_decay", kwargs.repr("corrected_weight_decay", "False")},
                          {"max_lr_snapshot", python_float_repr(args.lr)},
                          {"foreach", kwargs.repr("foreach", "None")}});
  return std::make_unique<Laprop>(std::move(groups), args.lr, description, c);
}

}  // namespace
}  // namespace timm

TIMM_PLUGIN("laprop") {
  using timm::bind_defaults;
  registrar.add_optimizer("laprop", "Separating Momentum and Adaptivity in Adam", timm::make_laprop);
  registrar.add_optimizer("lapropc", "LaProp with corrected weight decay (lr²/max_lr scaling)",
                          bind_defaults(timm::make_laprop, {{"corrected_weight_decay", "True"}}));
  registrar.add_optimizer("claprop", "Cautious LaProp", bind_defaults(timm::make_laprop, {{"caution", "True"}}));
}
