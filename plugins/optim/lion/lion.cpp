// "lion" (and "clion", "lionc", "clionc"): timm.optim.Lion, the sign of an
// interpolated momentum as the update, decoupled weight decay (lr, or lr² /
// max_lr corrected), optional caution. No eps (timm drops --opt-eps).
#include <cmath>

#include "timm/base/error.hpp"
#include "timm/optim/foreach_optimizer.hpp"
#include "timm/plugin/plugin.hpp"

namespace timm {
namespace {

using Tensors = std::vector<at::Tensor>;

struct LionConfig {
  double beta1 = 0.9;
  double beta2 = 0.99;
  bool caution = false;
  std::optional<double> max_lr;  // set with corrected_weight_decay
};

class Lion : public ForeachOptimizer {
 public:
  Lion(std::vector<ParamGroup> groups, double lr, std::string description, LionConfig config)
      : ForeachOptimizer(std::move(groups), lr, std::move(description)), c_(config) {}

 private:
  bool updates_parameters_independently() const override { return true; }
  void step_group(GroupStep& g) override {
    init_zero_states(g, {"exp_avg"});
    const Tensors exp_avgs = state_list(g, "exp_avg");
    const double wd_scale = c_.max_lr ? std::pow(g.lr, 2) / *c_.max_lr : g.lr;
    at::_foreach_mul_(g.params, 1 - wd_scale * g.weight_decay);
    Tensors updates = at::_foreach_lerp(exp_avgs, g.grads, 1 - c_.beta1);
    at::_foreach_sign_(updates);
    if (c_.caution) updates = cautioned(updates, g.grads);
    at::_foreach_add_(g.params, updates, -g.lr);
    at::_foreach_lerp_(exp_avgs, g.grads, 1 - c_.beta2);
  }

  LionConfig c_;
};

OptimizerPtr make_lion(std::vector<ParamGroup> groups, const OptimizerArgs& args) {
  // timm drops eps (has_eps False); foreach / maximize as Lion takes them.
  const OptimizerKwargs kwargs(args, {"betas", "eps", "caution", "corrected_weight_decay", "foreach", "maximize"});
  check_lr(args);
  reject_true_kwargs(args, kwargs, {"maximize"});
  const std::vector<double> betas = resolve_betas(args, kwargs, {0.9, 0.99});
  const bool corrected = corrected_weight_decay(args, kwargs);
  LionConfig c;
  c.beta1 = betas[0];
  c.beta2 = betas[1];
  c.caution = kwargs.get_bool("caution", false);
  if (corrected) c.max_lr = args.lr;
  const std::string description = describe_optimizer("Lion", args.opt,
                                                     {{"lr", python_float_repr(args.lr)},
                                                      {"betas", betas_repr(args, betas, /*always_tuple=*/false)},
                                                      {"weight_decay", python_float_repr(args.weight_decay)},
                                                      {"caution", py_bool(c.caution)},
                                                      {"corrected_weight_decay", py_bool(corrected)},
                                                      {"max_lr_snapshot", python_float_repr(args.lr)},
                                                      {"foreach", kwargs.repr("foreach", "None")},
                                                      {"maximize", "False"}});
  return std::make_unique<Lion>(std::move(groups), args.lr, description, c);
}

}  // namespace
}  // namespace timm

TIMM_PLUGIN("lion") {
  using timm::bind_defaults;
  registrar.add_optimizer("lion", "Evolved Sign Momentum optimizer for improved convergence", timm::make_lion);
  registrar.add_optimizer("clion", "Cautious Lion", bind_defaults(timm::make_lion, {{"caution", "True"}}));
  registrar.add_optimizer("lionc", "Lion with corrected weight decay (lr²/max_lr scaling)",
                          bind_defaults(timm::make_lion, {{"corrected_weight_decay", "True"}}));
  registrar.add_optimizer("clionc", "Cautious Lion with corrected weight decay (lr²/max_lr scaling)",
                          bind_defaults(timm::make_lion, {{"caution", "True"}, {"corrected_weight_decay", "True"}}));
}
