// "adamw": torch.optim.AdamW (decoupled weight decay per parameter group),
// betas (0.9, 0.999) and eps 1e-8 unless --opt-betas / --opt-eps; and the
// names timm binds to its AdamWLegacy (adamw_legacy.cpp): "adamwlegacy",
// "cadamw", "adamc", "cadamc".
#include <torch/optim/adamw.h>

#include "adamw_legacy.hpp"
#include "timm/base/error.hpp"
#include "timm/optim/foreach_optimizer.hpp"
#include "timm/optim/optimizer.hpp"
#include "timm/plugin/plugin.hpp"

namespace timm {
namespace {

const std::vector<std::string> kKnownKwargs{"betas", "eps", "amsgrad", "foreach"};

OptimizerPtr make_adamw(std::vector<ParamGroup> groups, const OptimizerArgs& args) {
  const OptimizerKwargs kwargs(args, kKnownKwargs);
  const std::string opt = timm::in_quotes(args.opt);
  const std::vector<double> betas = args.betas ? *args.betas : kwargs.get_doubles("betas", {0.9, 0.999});
  const double eps = args.eps ? *args.eps : kwargs.get_double("eps", 1e-8);
  const bool amsgrad = kwargs.get_bool("amsgrad", false);
  if (betas.size() != 2) {
    throw UsageError("optimizer " + opt + ": betas needs 2 values, got " + std::to_string(betas.size()));
  }
  // torch's argument checks, as usage errors.
  if (args.lr < 0) throw UsageError("optimizer " + opt + ": invalid learning rate " + python_float_repr(args.lr));
  if (eps < 0) throw UsageError("optimizer " + opt + ": invalid epsilon value " + python_float_repr(eps));
  for (std::size_t i = 0; i < 2; ++i) {
    if (betas[i] < 0 || betas[i] >= 1) {
      throw UsageError("optimizer " + opt + ": invalid beta parameter at index " + std::to_string(i) + ": " +
                       python_float_repr(betas[i]));
    }
  }

  auto defaults =
      torch::optim::AdamWOptions(args.lr).betas({betas[0], betas[1]}).eps(eps).amsgrad(amsgrad).weight_decay(0.0);
  const std::vector<double> scales = lr_scales(groups);
  auto impl = std::make_unique<torch::optim::AdamW>(torch_param_groups(groups, defaults), defaults);

  const std::string description = describe_optimizer("AdamW", args.opt,
                                                     {{"lr", python_float_repr(args.lr)},
                                                      {"betas", std::string("(")
                                                                    .append(python_float_repr(betas[0]))
                                                                    .append(", ")
                                                                    .append(python_float_repr(betas[1]))
                                                                    .append(")")},
                                                      {"eps", python_float_repr(eps)},
                                                      {"weight_decay", python_float_repr(args.weight_decay)},
                                                      {"amsgrad", py_bool(amsgrad)},
                                                      {"maximize", "False"},
                                                      {"foreach", kwargs.repr("foreach", "None")},
                                                      {"capturable", "False"},
                                                      {"differentiable", "False"},
                                                      {"fused", "None"},
                                                      {"decoupled_weight_decay", "True"}});
  return std::make_unique<TorchOptimizer>(std::move(impl), scales, description);
}

}  // namespace
}  // namespace timm

TIMM_PLUGIN("adamw") {
  // train.py scales --lr-base by the square root of the batch ratio for
  // timm's adaptive optimizers.
  using timm::bind_defaults;
  const timm::OptimizerTraits sqrt_lr{.lr_base_scale = timm::LrBaseScale::kSqrt};
  registrar.add_optimizer("adamw", "torch.optim.AdamW, Adam with decoupled weight decay", timm::make_adamw, sqrt_lr);
  const auto legacy = timm::adamw::make_adamw_legacy;
  registrar.add_optimizer("adamwlegacy", "legacy impl of AdamW that pre-dates inclusion to torch.optim", legacy,
                          sqrt_lr);
  registrar.add_optimizer("cadamw", "Cautious AdamW", bind_defaults(legacy, {{"caution", "True"}}), sqrt_lr);
  registrar.add_optimizer("adamc", "AdamW with corrected weight decay (lr²/max_lr scaling)",
                          bind_defaults(legacy, {{"corrected_weight_decay", "True"}}), sqrt_lr);
  registrar.add_optimizer("cadamc", "Cautious AdamW with corrected weight decay (lr²/max_lr scaling)",
                          bind_defaults(legacy, {{"caution", "True"}, {"corrected_weight_decay", "True"}}), sqrt_lr);
}
