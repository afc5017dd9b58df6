// timm.optim.NAdamW ("nadamw" and its cautious / corrected-decay variants):
// AdamW whose update uses the Nesterov look-ahead of the first moment,
// with timm's caution, corrected weight decay (lr² / max_lr) and optional
// StableAdamW RMS clipping.
#include <cmath>

#include "adam_family.hpp"
#include "timm/base/error.hpp"
#include "timm/optim/foreach_optimizer.hpp"

namespace timm::adam {
namespace {

using Tensors = std::vector<at::Tensor>;

struct NAdamWConfig {
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  bool caution = false;
  std::optional<double> max_lr;  // set with corrected_weight_decay
  std::optional<double> clipping_threshold;
};

class NAdamW : public ForeachOptimizer {
 public:
  NAdamW(std::vector<ParamGroup> groups, double lr, std::string description, NAdamWConfig config)
      : ForeachOptimizer(std::move(groups), lr, std::move(description)), c_(config) {}

 private:
  bool updates_parameters_independently() const override { return true; }
  void step_group(GroupStep& g) override {
    init_zero_states(g, {"exp_avg", "exp_avg_sq"});
    const std::vector<double> steps = increment_steps(g);
    const Tensors exp_avgs = state_list(g, "exp_avg");
    const Tensors exp_avg_sqs = state_list(g, "exp_avg_sq");

    const double wd_scale = c_.max_lr ? std::pow(g.lr, 2) / *c_.max_lr : g.lr;
    at::_foreach_mul_(g.params, 1. - wd_scale * g.weight_decay);
    at::_foreach_lerp_(exp_avgs, g.grads, 1 - c_.beta1);
    at::_foreach_mul_(exp_avg_sqs, c_.beta2);
    at::_foreach_addcmul_(exp_avg_sqs, g.grads, g.grads, 1 - c_.beta2);

    std::vector<c10::Scalar> step_sizes;
    std::vector<c10::Scalar> bias_correction2_sqrts;
    for (double step : steps) {
      step_sizes.emplace_back(-(g.lr / (1 - std::pow(c_.beta1, step))));
      bias_correction2_sqrts.emplace_back(std::pow(1 - std::pow(c_.beta2, step), 0.5));
    }
    // The Nesterov look-ahead, a new tensor: the state keeps m_t.
    Tensors nesterov = at::_foreach_lerp(exp_avgs, g.grads, 1 - c_.beta1);
    Tensors denom = at::_foreach_sqrt(exp_avg_sqs);
    at::_foreach_div_(denom, bias_correction2_sqrts);
    at::_foreach_add_(denom, c_.eps);
    if (c_.clipping_threshold) rms_clip_denominators(denom, g.grads, *c_.clipping_threshold);
    if (c_.caution) nesterov = cautioned(nesterov, g.grads);
    at::_foreach_addcdiv_(g.params, nesterov, denom, step_sizes);
  }

  NAdamWConfig c_;
};

}  // namespace

OptimizerPtr make_nadamw(std::vector<ParamGroup> groups, const OptimizerArgs& args) {
  const OptimizerKwargs kwargs(args, {"betas", "eps", "caution", "corrected_weight_decay", "foreach", "maximize",
                                      "capturable", "clipping_threshold"});
  check_lr(args);
  reject_true_kwargs(args, kwargs, {"maximize", "capturable"});
  const std::vector<double> betas = resolve_betas(args, kwargs, {0.9, 0.999});
  const EpsArg eps = resolve_eps(args, kwargs, 1e-8);
  const bool corrected = corrected_weight_decay(args, kwargs);
  const OptionalFloatArg clip = optional_float_kwarg(args, kwargs, "clipping_threshold", std::nullopt);
  NAdamWConfig c;
  c.beta1 = betas[0];
  c.beta2 = betas[1];
  c.eps = eps.value;
  c.caution = kwargs.get_bool("caution", false);
  if (corrected) c.max_lr = args.lr;
  c.clipping_threshold = clip.value;
  const std::string description = describe_optimizer("NAdamW", args.opt,
                                                     {{"lr", python_float_repr(args.lr)},
                                                      {"betas", betas_repr(args, betas, /*always_tuple=*/false)},
                                                      {"eps", eps.repr},
                                                      {"weight_decay", python_float_repr(args.weight_decay)},
                                                      {"caution", py_bool(c.caution)},
                                                      {"corrected_weight_decay", py_bool(corrected)},
                                                      {"max_lr_snapshot", python_float_repr(args.lr)},
                                                      {"foreach", kwargs.repr("foreach", "None")},
                                                      {"maximize", "False"},
                                                      {"capturable", "False"},
                                                      {"clipping_threshold", clip.repr}});
  return std::make_unique<NAdamW>(std::move(groups), args.lr, description, c);
}

}  // namespace timm::adam
