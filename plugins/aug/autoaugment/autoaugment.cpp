// timm's auto-augmentations behind --aa: RandAugment ("rand-..."), AugMix
// ("augmix-...") and the AutoAugment policies ("original", "originalr", "v0",
// "v0r", "3a"), with timm's config grammar. The ops, policies and parsers
// live in the SDK (timm/data/auto_augment.hpp).
#include "timm/core/plugin.hpp"
#include "timm/data/auto_augment.hpp"

TIMM_PLUGIN("aug_autoaugment") {
  using namespace timm;
  registrar.add_augmentation(
      "auto_augment",
      "--aa: RandAugment (rand-m9-mstd0.5-inc1), AugMix (augmix-m5-w4-d2) or an AutoAugment policy "
      "(original, originalr, v0, v0r, 3a)",
      [](const TransformArgs& a) {
        return Augmentation{auto_augment_from_args(a), nullptr};
      });
}
