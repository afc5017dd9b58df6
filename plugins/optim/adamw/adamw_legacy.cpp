// timm.optim.AdamWLegacy ("adamwlegacy", and "cadamw", "adamc", "cadamc",
// which timm's registry binds to it with caution / corrected weight decay):
// AdamW with decoupled weight decay (lr, or lr² / max_lr corrected), optional
// AMSGrad, caution on the first moment and StableAdamW RMS clipping.
#include <cmath>

#include "adamw_legacy.hpp"
#include "timm/base/error.hpp"
#include "timm/optim/foreach_optimizer.hpp"

namespace timm::adamw {
namespace {

using Tensors = std::vector<at::Tensor>;

struct AdamWLegacyConfig {
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  bool amsgrad = false;
  bool caution = false;
  bool maximize = false;
  std::optional<double> max_lr;  // set with corrected_weight_decay
  std::optional<double> clipping_threshold;
};

class AdamWLegacy : public ForeachOptimizer {
 public:
  AdamWLegacy(std::vector<ParamGroup> groups, double lr, std::string description, AdamWLegacyConfig config)
      : ForeachOptimizer(std::move(groups), lr, std::move(description)), c_(config) {}

 private:
  // timm's _single_tensor_adamw (its CPU path), as foreach ops in its order.
  bool updates_parameters_independently() const override { return true; }
  void step_group(GroupStep& g) override {
    if (c_.amsgrad) {
      init_zero_states(g, {"exp_avg", "exp_avg_sq", "max_exp_avg_sq"});
    } else {
      init_zero_states(g, {"exp_avg", "exp_avg_sq"});
    }
    const Tensors grads = c_.maximize ? at::_foreach_neg(g.grads) : g.grads;
    const std::vector<double> steps = increment_steps(g);
    const Tensors exp_avgs = state_list(g, "exp_avg");
    const Tensors exp_avg_sqs = state_list(g, "exp_avg_sq");

    const double wd_scale = c_.max_lr ? std::pow(g.lr, 2) / *c_.max_lr : g.lr;
    at::_foreach_mul_(g.params, 1. - wd_scale * g.weight_decay);
    at::_foreach_lerp_(exp_avgs, grads, 1 - c_.beta1);
    at::_foreach_mul_(exp_avg_sqs, c_.beta2);
    at::_foreach_addcmul_(exp_avg_sqs, grads, grads, 1 - c_.beta2);

    std::vector<c10::Scalar> step_sizes;
    std::vector<c10::Scalar> bias_correction2_sqrts;
    for (double step : steps) {
      step_sizes.emplace_back(-(g.lr / (1 - std::pow(c_.beta1, step))));
      bias_correction2_sqrts.emplace_back(std::pow(1 - std::pow(c_.beta2, step), 0.5));
    }
    Tensors denom;
    if (c_.amsgrad) {
      const Tensors max_exp_avg_sqs = state_list(g, "max_exp_avg_sq");
      at::_foreach_maximum_(max_exp_avg_sqs, exp_avg_sqs);
      denom = at::_foreach_sqrt(max_exp_avg_sqs);
    } else {
      denom = at::_foreach_sqrt(exp_avg_sqs);
    }
    at::_foreach_div_(denom, bias_correction2_sqrts);
    at::_foreach_add_(denom, c_.eps);
    if (c_.clipping_threshold) rms_clip_denominators(denom, grads, *c_.clipping_threshold);
    const Tensors updates = c_.caution ? cautioned(exp_avgs, grads) : exp_avgs;
    at::_foreach_addcdiv_(g.params, updates, denom, step_sizes);
  }

  AdamWLegacyConfig c_;
};

}  // namespace

OptimizerPtr make_adamw_legacy(std::vector<ParamGroup> groups, const OptimizerArgs& args) {
  const OptimizerKwargs kwargs(args, {"betas", "eps", "amsgrad", "caution", "corrected_weight_decay", "maximize",
                                      "foreach", "capturable", "clipping_threshold"});
  check_lr(args);
  reject_true_kwargs(args, kwargs, {"capturable"});
  const std::vector<double> betas = resolve_betas(args, kwargs, {0.9, 0.999});
  const EpsArg eps = resolve_eps(args, kwargs, 1e-8);
  const bool corrected = corrected_weight_decay(args, kwargs);
  const OptionalFloatArg clip = optional_float_kwarg(args, kwargs, "clipping_threshold", std::nullopt);
  AdamWLegacyConfig c;
  c.beta1 = betas[0];
  c.beta2 = betas[1];
  c.eps = eps.value;
  c.amsgrad = kwargs.get_bool("amsgrad", false);
  c.caution = kwargs.get_bool("caution", false);
  c.maximize = kwargs.get_bool("maximize", false);
  if (corrected) c.max_lr = args.lr;
  c.clipping_threshold = clip.value;
  const std::string description = describe_optimizer("AdamWLegacy", args.opt,
                                                     {{"lr", python_float_repr(args.lr)},
                                                      {"betas", betas_repr(args, betas, /*always_tuple=*/false)},
                                                      {"eps", eps.repr},
                                                      {"weight_decay", python_float_repr(args.weight_decay)},
                                                      {"amsgrad", py_bool(c.amsgrad)},
                                                      {"caution", py_bool(c.caution)},
                                                      {"corrected_weight_decay", py_bool(corrected)},
                                                      {"max_lr_snapshot", python_float_repr(args.lr)},
                                                      {"foreach", kwargs.repr("foreach", "None")},
                                                      {"maximize", py_bool(c.maximize)},
                                                      {"capturable", "False"},
                                                      {"clipping_threshold", clip.repr}});
  return std::make_unique<AdamWLegacy>(std::move(groups), args.lr, description, c);
}

}  // namespace timm::adamw
