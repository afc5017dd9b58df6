// Signum (signSGD with momentum, Bernstein et al. 2018, arXiv 1802.04434) as a
// third-party optimizer plugin: everything it needs comes from the installed
// SDK headers.
//
//   m = momentum * m + (1 - momentum) * grad
//   p = p * (1 - lr * weight_decay) - lr * sign(m)
//
// ForeachOptimizer, the SDK's base for optimizers written with ATen's
// multi-tensor ops, keeps the parameter groups, the lr the scheduler sets and
// the per-parameter state, and saves and loads them for --resume: the
// subclass only updates one group's parameters in step_group().
#include <ATen/ATen.h>

#include "timm/base/error.hpp"
#include "timm/base/python_repr.hpp"
#include "timm/optim/foreach_optimizer.hpp"
#include "timm/plugin/plugin.hpp"

namespace example {

class Signum : public timm::ForeachOptimizer {
 public:
  Signum(std::vector<timm::ParamGroup> groups, double lr, std::string description, double momentum)
      : ForeachOptimizer(std::move(groups), lr, std::move(description)), momentum_(momentum) {}

 private:
  void step_group(GroupStep& g) override {
    // The state is created at a parameter's first step with a gradient, as
    // torch does; whatever is put in it is saved in checkpoints under its key.
    for (std::size_t i = 0; i < g.params.size(); ++i) {
      if (g.states[i]->empty()) {
        (*g.states[i])["momentum_buffer"] = at::zeros_like(g.params[i], at::MemoryFormat::Preserve);
      }
    }
    // Shares storage with the state: the in-place ops below update it.
    const std::vector<at::Tensor> buffers = state_list(g, "momentum_buffer");
    at::_foreach_lerp_(buffers, g.grads, 1.0 - momentum_);
    // Decoupled weight decay: the sign update alone would ignore its scale.
    if (g.weight_decay != 0.0) at::_foreach_mul_(g.params, 1.0 - g.lr * g.weight_decay);
    std::vector<at::Tensor> updates = at::_foreach_sign(buffers);
    at::_foreach_add_(g.params, updates, -g.lr);
  }

  double momentum_;
};

timm::OptimizerPtr make_signum(std::vector<timm::ParamGroup> groups, const timm::OptimizerArgs& args) {
  // No --opt-kwargs of its own: any key is a usage error naming it, as
  // Python would reject an unexpected keyword argument.
  const timm::OptimizerKwargs kwargs(args, {});
  timm::check_lr(args);
  if (args.momentum < 0.0 || args.momentum >= 1.0) {
    throw timm::UsageError("optimizer " + timm::in_quotes(args.opt) + ": --momentum must be in [0, 1), got " +
                           timm::python_float_repr(args.momentum));
  }
  // The line the trainer logs after "Created ", in timm's style.
  const std::string description =
      timm::describe_optimizer("Signum", args.opt,
                               {{"lr", timm::python_float_repr(args.lr)},
                                {"momentum", timm::python_float_repr(args.momentum)},
                                {"weight_decay", timm::python_float_repr(args.weight_decay)}});
  return std::make_unique<Signum>(std::move(groups), args.lr, description, args.momentum);
}

}  // namespace example

TIMM_PLUGIN("example_signum") {
  // A sign update has a fixed size per step, like SGD's and unlike Adam's, so
  // --lr-base scales linearly with the batch size (train.py's rule for sgd).
  registrar.add_optimizer("example_signum", "Signum: signSGD with momentum, built out of tree against the SDK",
                          example::make_signum, timm::OptimizerTraits{.lr_base_scale = timm::LrBaseScale::kLinear});
}
