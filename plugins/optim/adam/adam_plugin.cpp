// "adam": the Adam family of timm's registry, each name bound to the class
// and defaults timm binds it to (timm/optim/_optim_factory.py).
#include "adam_family.hpp"
#include "timm/optim/foreach_optimizer.hpp"
#include "timm/plugin/plugin.hpp"

TIMM_PLUGIN("adam") {
  using timm::bind_defaults;
  namespace adam = timm::adam;
  // train.py scales --lr-base by the square root of the batch ratio for
  // timm's Adam-type names (those with "ada" in them); the Adopt names keep
  // the default, linear, as in timm.
  const timm::OptimizerTraits sqrt_lr{.lr_base_scale = timm::LrBaseScale::kSqrt};
  registrar.add_optimizer("adam", "torch.optim.Adam, Adaptive Moment Estimation", adam::make_adam, sqrt_lr);
  registrar.add_optimizer("adamw", "torch.optim.AdamW, Adam with decoupled weight decay", adam::make_adamw, sqrt_lr);
  registrar.add_optimizer("nadam", "torch.optim.NAdam, Adam with Nesterov momentum", adam::make_nadam, sqrt_lr);
  registrar.add_optimizer("radam", "torch.optim.RAdam, Rectified Adam with variance adaptation", adam::make_radam,
                          sqrt_lr);
  registrar.add_optimizer("nadamlegacy", "legacy impl of NAdam that pre-dates inclusion in torch.optim",
                          adam::make_nadam_legacy, sqrt_lr);
  registrar.add_optimizer("radamlegacy", "legacy impl of RAdam that predates inclusion in torch.optim",
                          adam::make_radam_legacy, sqrt_lr);
  registrar.add_optimizer("radamw",
                          "torch.optim.RAdamW, Rectified Adam with variance adaptation and decoupled weight decay",
                          bind_defaults(adam::make_radam, {{"decoupled_weight_decay", "True"}}), sqrt_lr);
  registrar.add_optimizer(
      "nadamw", "Adam with Nesterov momentum and decoupled weight decay, mlcommons/algorithmic-efficiency impl",
      adam::make_nadamw, sqrt_lr);
  registrar.add_optimizer("cnadamw", "Cautious NAdamW", bind_defaults(adam::make_nadamw, {{"caution", "True"}}),
                          sqrt_lr);
  registrar.add_optimizer("nadamc", "NAdamW with corrected weight decay (lr²/max_lr scaling)",
                          bind_defaults(adam::make_nadamw, {{"corrected_weight_decay", "True"}}), sqrt_lr);
  registrar.add_optimizer("cnadamc", "Cautious NAdamW with corrected weight decay (lr²/max_lr scaling)",
                          bind_defaults(adam::make_nadamw, {{"caution", "True"}, {"corrected_weight_decay", "True"}}),
                          sqrt_lr);
  registrar.add_optimizer("adabelief", "Adapts learning rate based on gradient prediction error",
                          bind_defaults(adam::make_adabelief, {{"rectify", "False"}}), sqrt_lr);
  registrar.add_optimizer("radabelief", "Rectified AdaBelief with variance adaptation",
                          bind_defaults(adam::make_adabelief, {{"rectify", "True"}}), sqrt_lr);
  registrar.add_optimizer("adopt", "Modified Adam that can converge with any β2 with the optimal rate",
                          adam::make_adopt);
  registrar.add_optimizer("adoptw",
                          "Modified AdamW (decoupled decay) that can converge with any β2 with the optimal rate",
                          bind_defaults(adam::make_adopt, {{"decoupled", "True"}}));
  registrar.add_optimizer("cadopt", "Cautious Adopt", bind_defaults(adam::make_adopt, {{"caution", "True"}}));
  registrar.add_optimizer("cadoptw", "Cautious AdoptW (decoupled decay)",
                          bind_defaults(adam::make_adopt, {{"decoupled", "True"}, {"caution", "True"}}));
  registrar.add_optimizer("adoptc", "Adopt with corrected decoupled weight decay (lr²/max_lr scaling)",
                          bind_defaults(adam::make_adopt, {{"decoupled", "True"}, {"corrected_weight_decay", "True"}}));
  registrar.add_optimizer(
      "cadoptc", "Cautious Adopt with corrected decoupled weight decay (lr²/max_lr scaling)",
      bind_defaults(adam::make_adopt,
                    {{"decoupled", "True"}, {"caution", "True"}, {"corrected_weight_decay", "True"}}));
}
