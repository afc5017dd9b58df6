// "rmsprop": torch.optim.RMSprop with timm's alpha 0.9; "rmsproptf" and
// "rmsproptfw": timm's RMSpropTF (timm/optim/rmsprop_tf.py), TensorFlow's
// RMSprop: eps inside the square root, square_avg starting at one, lr folded
// into the momentum buffer; rmsproptfw decouples the weight decay.
#include <ATen/ATen.h>

#include "timm/base/error.hpp"
#include "timm/optim/foreach_optimizer.hpp"
#include "timm/optim/optimizer.hpp"
#include "timm/plugin/plugin.hpp"

namespace timm {
namespace {

using Tensors = std::vector<at::Tensor>;

struct RmspropSettings {
  double alpha = 0.9;
  double eps = 1e-8;
  double momentum = 0.9;
  bool centered = false;
  bool maximize = false;         // torch's only
  bool decoupled_decay = false;  // RMSpropTF's only
  bool corrected_weight_decay = false;
  bool lr_in_momentum = true;
  bool caution = false;
  double max_lr = 0.0;  // the lr at creation (timm's max_lr_snapshot)
};

void check_common(const OptimizerArgs& args, const RmspropSettings& s) {
  const std::string opt = timm::in_quotes(args.opt);
  check_lr(args);
  if (s.eps < 0) throw UsageError("optimizer " + opt + ": invalid epsilon value " + python_float_repr(s.eps));
  if (s.momentum < 0) throw UsageError("optimizer " + opt + ": invalid --momentum " + python_float_repr(s.momentum));
  if (args.weight_decay < 0) {
    throw UsageError("optimizer " + opt + ": invalid --weight-decay " + python_float_repr(args.weight_decay));
  }
  if (s.alpha < 0) throw UsageError("optimizer " + opt + ": invalid alpha value " + python_float_repr(s.alpha));
}

// The state of a parameter's first step.
void init_state(ForeachOptimizer::State& state, const at::Tensor& param, const RmspropSettings& s,
                bool square_avg_ones) {
  if (!state.empty()) return;
  state["step"] = at::zeros({}, at::kFloat);
  state["square_avg"] = square_avg_ones ? at::ones_like(param) : at::zeros_like(param);
  if (s.momentum > 0) state["momentum_buffer"] = at::zeros_like(param);
  if (s.centered) state["grad_avg"] = at::zeros_like(param);
}

// torch.optim.RMSprop's _single_tensor_rmsprop, with foreach ops.
class RMSprop : public ForeachOptimizer {
 public:
  RMSprop(std::vector<ParamGroup> groups, double lr, std::string description, RmspropSettings settings)
      : ForeachOptimizer(std::move(groups), lr, std::move(description)), s_(settings) {}

 private:
  bool updates_parameters_independently() const override { return true; }
  void step_group(GroupStep& group) override {
    for (std::size_t i = 0; i < group.params.size(); ++i) init_state(*group.states[i], group.params[i], s_, false);
    update(group);
  }

  void update(const GroupStep& a) {
    at::_foreach_add_(state_list(a, "step"), 1);
    Tensors grads = s_.maximize ? at::_foreach_neg(a.grads) : a.grads;
    if (a.weight_decay != 0) grads = at::_foreach_add(grads, a.params, a.weight_decay);
    const Tensors square_avgs = state_list(a, "square_avg");
    at::_foreach_mul_(square_avgs, s_.alpha);
    at::_foreach_addcmul_(square_avgs, grads, grads, 1 - s_.alpha);
    Tensors avg;
    if (s_.centered) {
      const Tensors grad_avgs = state_list(a, "grad_avg");
      at::_foreach_lerp_(grad_avgs, grads, 1 - s_.alpha);
      avg = at::_foreach_addcmul(square_avgs, grad_avgs, grad_avgs, -1);
      at::_foreach_sqrt_(avg);
    } else {
      avg = at::_foreach_sqrt(square_avgs);
    }
    at::_foreach_add_(avg, s_.eps);
    if (s_.momentum > 0) {
      const Tensors bufs = state_list(a, "momentum_buffer");
      at::_foreach_mul_(bufs, s_.momentum);
      at::_foreach_addcdiv_(bufs, grads, avg);
      at::_foreach_add_(a.params, bufs, -a.lr);
    } else {
      at::_foreach_addcdiv_(a.params, grads, avg, -a.lr);
    }
  }

  RmspropSettings s_;
};

// timm's RMSpropTF (_single_tensor_rmsprop_tf), with foreach ops.
class RMSpropTF : public ForeachOptimizer {
 public:
  RMSpropTF(std::vector<ParamGroup> groups, double lr, std::string description, RmspropSettings settings)
      : ForeachOptimizer(std::move(groups), lr, std::move(description)), s_(settings) {}

 private:
  bool updates_parameters_independently() const override { return true; }
  void step_group(GroupStep& group) override {
    for (std::size_t i = 0; i < group.params.size(); ++i) init_state(*group.states[i], group.params[i], s_, true);
    update(group);
  }

  void update(const GroupStep& a) {
    at::_foreach_add_(state_list(a, "step"), 1);
    const double lr = a.lr;
    Tensors grads = a.grads;
    if (a.weight_decay != 0) {
      if (s_.decoupled_decay) {
        const double wd_scale = s_.corrected_weight_decay ? lr * lr / s_.max_lr : lr;
        at::_foreach_mul_(a.params, 1. - wd_scale * a.weight_decay);
      } else {
        grads = at::_foreach_add(grads, a.params, a.weight_decay);
      }
    }
    const double one_minus_alpha = 1. - s_.alpha;
    const Tensors square_avgs = state_list(a, "square_avg");
    Tensors delta = at::_foreach_mul(grads, grads);
    at::_foreach_sub_(delta, square_avgs);
    at::_foreach_add_(square_avgs, delta, one_minus_alpha);
    Tensors avg;
    if (s_.centered) {
      const Tensors grad_avgs = state_list(a, "grad_avg");
      const Tensors grad_delta = at::_foreach_sub(grads, grad_avgs);
      at::_foreach_add_(grad_avgs, grad_delta, one_minus_alpha);
      avg = at::_foreach_addcmul(square_avgs, grad_avgs, grad_avgs, -1);
      at::_foreach_add_(avg, s_.eps);
    } else {
      avg = at::_foreach_add(square_avgs, s_.eps);
    }
    at::_foreach_sqrt_(avg);  // eps inside the square root
    if (s_.momentum > 0) {
      const Tensors bufs = state_list(a, "momentum_buffer");
      at::_foreach_mul_(bufs, s_.momentum);
      if (s_.lr_in_momentum) {
        at::_foreach_addcdiv_(bufs, grads, avg, lr);
        at::_foreach_sub_(a.params, s_.caution ? cautioned(bufs, grads) : bufs);
      } else {
        at::_foreach_addcdiv_(bufs, grads, avg);
        at::_foreach_add_(a.params, s_.caution ? cautioned(bufs, grads) : bufs, -lr);
      }
    } else {
      at::_foreach_addcdiv_(a.params, grads, avg, -lr);
    }
  }

  RmspropSettings s_;
};

OptimizerPtr make_rmsprop(std::vector<ParamGroup> groups, const OptimizerArgs& args) {
  const OptimizerKwargs kwargs(
      args, {"alpha", "eps", "centered", "capturable", "foreach", "maximize", "differentiable", "betas"});
  RmspropSettings s;
  s.alpha = kwargs.get_double("alpha", 0.9);
  s.eps = args.eps ? *args.eps : kwargs.get_double("eps", 1e-8);
  s.momentum = args.momentum;
  s.centered = kwargs.get_bool("centered", false);
  s.maximize = kwargs.get_bool("maximize", false);
  check_common(args, s);
  if (kwargs.get_bool("capturable", false) || kwargs.get_bool("differentiable", false)) {
    throw UsageError("optimizer " + timm::in_quotes(args.opt) + ": capturable and differentiable are not supported");
  }
  const std::string description =
      describe_optimizer("RMSprop", args.opt,
                         {{"lr", python_float_repr(args.lr)},
                          {"momentum", python_float_repr(s.momentum)},
                          {"alpha", kwargs.repr("alpha", "0.9")},
                          {"eps", args.eps ? python_float_repr(*args.eps) : kwargs.repr("eps", "1e-08")},
                          {"centered", kwargs.repr("centered", "False")},
                          {"weight_decay", python_float_repr(args.weight_decay)},
                          {"capturable", kwargs.repr("capturable", "False")},
                          {"foreach", kwargs.repr("foreach", "None")},
                          {"maximize", kwargs.repr("maximize", "False")},
                          {"differentiable", kwargs.repr("differentiable", "False")}});
  return std::make_unique<RMSprop>(std::move(groups), args.lr, description, s);
}

OptimizerPtr make_rmsproptf(std::vector<ParamGroup> groups, const OptimizerArgs& args, bool decoupled_default) {
  const OptimizerKwargs kwargs(args, {"alpha", "eps", "centered", "decoupled_decay", "corrected_weight_decay",
                                      "lr_in_momentum", "caution", "foreach", "betas"});
  RmspropSettings s;
  s.alpha = kwargs.get_double("alpha", 0.9);
  s.eps = args.eps ? *args.eps : kwargs.get_double("eps", 1e-10);
  s.momentum = args.momentum;
  s.centered = kwargs.get_bool("centered", false);
  s.decoupled_decay = kwargs.get_bool("decoupled_decay", decoupled_default);
  s.corrected_weight_decay = corrected_weight_decay(args, kwargs);
  s.lr_in_momentum = kwargs.get_bool("lr_in_momentum", true);
  s.caution = kwargs.get_bool("caution", false);
  s.max_lr = args.lr;
  check_common(args, s);
  const std::string description =
      describe_optimizer("RMSpropTF", args.opt,
                         {{"lr", python_float_repr(args.lr)},
                          {"momentum", python_float_repr(s.momentum)},
                          {"alpha", kwargs.repr("alpha", "0.9")},
                          {"eps", args.eps ? python_float_repr(*args.eps) : kwargs.repr("eps", "1e-10")},
                          {"centered", kwargs.repr("centered", "False")},
                          {"weight_decay", python_float_repr(args.weight_decay)},
                          {"decoupled_decay", kwargs.repr("decoupled_decay", py_bool(decoupled_default))},
                          {"corrected_weight_decay", kwargs.repr("corrected_weight_decay", "False")},
                          {"max_lr_snapshot", python_float_repr(args.lr)},
                          {"lr_in_momentum", kwargs.repr("lr_in_momentum", "True")},
                          {"caution", kwargs.repr("caution", "False")},
                          {"foreach", kwargs.repr("foreach", "None")}});
  return std::make_unique<RMSpropTF>(std::move(groups), args.lr, description, s);
}

}  // namespace
}  // namespace timm

TIMM_PLUGIN("rmsprop") {
  using timm::bind_defaults;
  using timm::OptimizerArgs;
  using timm::ParamGroup;
  auto rmsproptf = [](bool decoupled) -> timm::OptimizerFactory {
    return [decoupled](std::vector<ParamGroup> groups, const OptimizerArgs& args) {
      return timm::make_rmsproptf(std::move(groups), args, decoupled);
    };
  };
  registrar.add_optimizer("rmsprop", "torch.optim.RMSprop, Root Mean Square Propagation", timm::make_rmsprop);
  registrar.add_optimizer("rmsproptf", "TensorFlow-style RMSprop implementation, Root Mean Square Propagation",
                          rmsproptf(false));
  registrar.add_optimizer("rmsproptfw", "TensorFlow-style RMSprop with decoupled weight decay", rmsproptf(true));
  // timm binds these through OptimInfo.defaults (RMSpropTF's keyword arguments).
  registrar.add_optimizer(
      "rmsproptfc", "RMSprop TF-style with corrected decoupled weight decay (lr²/max_lr scaling)",
      bind_defaults(rmsproptf(false),
                    {{"alpha", "0.9"}, {"decoupled_decay", "True"}, {"corrected_weight_decay", "True"}}));
  registrar.add_optimizer("crmsproptf", "Cautious TensorFlow-style RMSprop",
                          bind_defaults(rmsproptf(false), {{"alpha", "0.9"}, {"caution", "True"}}));
}
