// timm's auto-augmentations behind --aa: RandAugment ("rand-..."), AugMix
// ("augmix-...") and the AutoAugment policies ("original", "originalr", "v0",
// "v0r", "3a"), with timm's config grammar. The ops, policies and parsers
// are this plugin's own (auto_augment.hpp, on the PIL ops of pil_ops.hpp).
#include "auto_augment.hpp"
#include "timm/plugin/plugin.hpp"

TIMM_PLUGIN("aug_autoaugment") {
  using namespace timm;
  using timm::autoaugment::auto_augment_from_args;
  registrar.add_augmentation(
      "auto_augment",
      "--aa: RandAugment (rand-m9-mstd0.5-inc1), AugMix (augmix-m5-w4-d2) or an AutoAugment policy "
      "(original, originalr, v0, v0r, 3a)",
      [](const TransformArgs& a) {
        return Augmentation{auto_augment_from_args(a), nullptr};
      },
      // timm's secondary transforms, before colour jitter (20).
      {.stage = AugmentationStage::kSecondary, .order = 10, .applies = [](const TransformArgs& a) {
         return a.augmenting() && !a.auto_augment.empty();
       }});
}
