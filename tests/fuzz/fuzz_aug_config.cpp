// Fuzz target: --aa, timm's augmentation config strings ("rand-m9-n2-mstd0.5",
// "original", "v0", "augmix-m5-w4-d2"), parsed as the autoaugment plugin
// parses them and, when the result is small, applied to a tiny image.
//
// The parsers are private to the plugin; like its tests, this links the
// plugin's object library (timm_aug_autoaugment_ops) instead of loading it.
#include <algorithm>
#include <memory>

#include "auto_augment.hpp"
#include "fuzz_target.hpp"
#include "timm/data/transform.hpp"

namespace {

// Transforms up to this much work are applied (an --aa string may ask for
// AugMix chains of any width and depth; a user typed it, so its cost is theirs).
constexpr int64_t kMaxOpsApplied = 64;

bool small_enough(const timm::ImageTransform& transform) {
  if (const auto* rand = dynamic_cast<const timm::autoaugment::RandAugment*>(&transform)) {
    return rand->num_layers() <= kMaxOpsApplied;
  }
  if (const auto* augmix = dynamic_cast<const timm::autoaugment::AugMixAugment*>(&transform)) {
    // depth < 1 draws 1 to 3 ops per chain.
    return augmix->width() <= kMaxOpsApplied && augmix->depth() <= kMaxOpsApplied &&
           augmix->width() * std::max<int64_t>(augmix->depth(), 3) <= kMaxOpsApplied;
  }
  return true;  // AutoAugment: a policy's sub-policy has two ops
}

}  // namespace

TIMM_FUZZ_TARGET(aug_config) {
  timm::TransformArgs args;
  args.is_training = true;
  args.input_size = {3, 8, 8};
  args.auto_augment = timm::fuzz::as_text(data);
  const std::shared_ptr<timm::ImageTransform> transform = timm::autoaugment::auto_augment_from_args(args);
  if (transform == nullptr) timm::fuzz::broken_promise("no transform for '" + args.auto_augment + "'");
  transform->repr();
  if (!small_enough(*transform)) return;
  timm::Image image(8, 8, 3);
  for (std::size_t i = 0; i < image.pixels.size(); ++i) image.pixels[i] = static_cast<std::uint8_t>(i * 37);
  timm::Rng rng(0);
  transform->apply(image, rng);
  timm::fuzz::check_image(image, 3, "the augmented image");
}
