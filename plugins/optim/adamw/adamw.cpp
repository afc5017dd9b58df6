// The names timm binds to its AdamWLegacy (adamw_legacy.cpp): "adamwlegacy",
// "cadamw", "adamc", "cadamc". "adamw" itself, torch.optim.AdamW, is torch's
// Adam with decoupled decay and lives with it in the "adam" plugin.
#include "adamw_legacy.hpp"
#include "timm/optim/foreach_optimizer.hpp"
#include "timm/plugin/plugin.hpp"

TIMM_PLUGIN("adamw") {
  // train.py scales --lr-base by the square root of the batch ratio for
  // timm's adaptive optimizers.
  using timm::bind_defaults;
  const timm::OptimizerTraits sqrt_lr{.lr_base_scale = timm::LrBaseScale::kSqrt};
  const auto legacy = timm::adamw::make_adamw_legacy;
  registrar.add_optimizer("adamwlegacy", "legacy impl of AdamW that pre-dates inclusion to torch.optim", legacy,
                          sqrt_lr);
  registrar.add_optimizer("cadamw", "Cautious AdamW", bind_defaults(legacy, {{"caution", "True"}}), sqrt_lr);
  registrar.add_optimizer("adamc", "AdamW with corrected weight decay (lr²/max_lr scaling)",
                          bind_defaults(legacy, {{"corrected_weight_decay", "True"}}), sqrt_lr);
  registrar.add_optimizer("cadamc", "Cautious AdamW with corrected weight decay (lr²/max_lr scaling)",
                          bind_defaults(legacy, {{"caution", "True"}, {"corrected_weight_decay", "True"}}), sqrt_lr);
}
