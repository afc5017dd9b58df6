// "sgd" / "nesterov" and "momentum": torch.optim.SGD as timm's registry binds
// it (nesterov=True / False), with momentum from --momentum and weight decay
// per parameter group (coupled L2, torch's SGD semantics), on the update
// SGDW shares (sgdw.cpp); and timm's SGDW names: "sgdw" / "nesterovw",
// "csgdw", "sgdc", "csgdc".
#include "sgdw.hpp"
#include "timm/base/error.hpp"
#include "timm/optim/foreach_optimizer.hpp"
#include "timm/optim/optimizer.hpp"
#include "timm/plugin/plugin.hpp"

namespace timm {
namespace {

// eps and betas are accepted and dropped (timm: has_eps/has_betas False);
// foreach and fused only pick an implementation (fused=False: the
// per-tensor ops; the values are the same).
const std::vector<std::string> kKnownKwargs{"dampening", "nesterov", "foreach", "fused", "eps", "betas"};

OptimizerPtr make_sgd(std::vector<ParamGroup> groups, const OptimizerArgs& args, bool nesterov_default) {
  const OptimizerKwargs kwargs(args, kKnownKwargs);
  const double momentum = args.momentum;
  const double dampening = kwargs.get_double("dampening", 0.0);
  const bool nesterov = kwargs.get_bool("nesterov", nesterov_default);
  const std::string opt = timm::in_quotes(args.opt);
  if (args.lr < 0) throw UsageError("optimizer " + opt + ": invalid learning rate " + python_float_repr(args.lr));
  if (momentum < 0) throw UsageError("optimizer " + opt + ": invalid --momentum " + python_float_repr(momentum));
  if (nesterov && (momentum <= 0 || dampening != 0)) {
    throw UsageError("optimizer " + opt + ": Nesterov momentum requires a momentum and zero dampening (--momentum " +
                     python_float_repr(momentum) + ", dampening " + python_float_repr(dampening) + ")");
  }

  sgd::SgdConfig config;
  config.momentum = momentum;
  config.dampening = dampening;
  config.nesterov = nesterov;
  config.decoupled_weight_decay = false;  // torch's SGD: L2 added to the gradient
  config.fused = fused_requested(kwargs);

  // train.py logs optimizer.defaults with weight_decay replaced by the flag.
  const std::string description = describe_optimizer("SGD", args.opt,
                                                     {{"lr", python_float_repr(args.lr)},
                                                      {"momentum", python_float_repr(momentum)},
                                                      {"dampening", kwargs.repr("dampening", "0")},
                                                      {"weight_decay", python_float_repr(args.weight_decay)},
                                                      {"nesterov", py_bool(nesterov)},
                                                      {"maximize", "False"},
                                                      {"foreach", kwargs.repr("foreach", "None")},
                                                      {"differentiable", "False"},
                                                      {"fused", kwargs.repr("fused", "None")}});
  return sgd::make_sgd_optimizer(std::move(groups), args.lr, description, config);
}

}  // namespace
}  // namespace timm

TIMM_PLUGIN("sgd") {
  using timm::OptimizerArgs;
  using timm::ParamGroup;
  auto nesterov = [](std::vector<ParamGroup> groups, const OptimizerArgs& args) {
    return timm::make_sgd(std::move(groups), args, /*nesterov_default=*/true);
  };
  auto classic = [](std::vector<ParamGroup> groups, const OptimizerArgs& args) {
    return timm::make_sgd(std::move(groups), args, /*nesterov_default=*/false);
  };
  registrar.add_optimizer("sgd", "torch.Optim Stochastic Gradient Descent (SGD) with Nesterov momentum", nesterov);
  registrar.add_optimizer("nesterov", "alias of sgd", nesterov);
  registrar.add_optimizer("momentum", "torch.Optim Stochastic Gradient Descent (SGD) with classical momentum", classic);

  using timm::bind_defaults;
  const auto sgdw = bind_defaults(timm::sgd::make_sgdw, {{"nesterov", "True"}});
  registrar.add_optimizer("sgdw", "SGD with decoupled weight decay and Nesterov momentum", sgdw);
  registrar.add_optimizer("nesterovw", "alias of sgdw", sgdw);
  registrar.add_optimizer("csgdw", "Cautious SGD with decoupled weight decay and Nesterov momentum",
                          bind_defaults(sgdw, {{"caution", "True"}}));
  registrar.add_optimizer("sgdc", "SGD with corrected decoupled weight decay (lr²/max_lr scaling)",
                          bind_defaults(sgdw, {{"corrected_weight_decay", "True"}}));
  registrar.add_optimizer("csgdc", "Cautious SGD with corrected decoupled weight decay (lr²/max_lr scaling)",
                          bind_defaults(sgdw, {{"caution", "True"}, {"corrected_weight_decay", "True"}}));
}
