// The classic CIFAR training crop as a third-party augmentation plugin:
// resize to the input size, then torchvision's RandomCrop(size, padding=4),
// a window of the input size shifted by up to 4 pixels each way, the pixels
// outside the image zero. Everything it needs comes from the installed SDK
// headers.
//
// It registers as a crop, the stage timm's create_transform has exactly one
// of, and applies when training with `--train-crop-mode example_pad_crop`:
// loading the plugin alone changes no run's transform.
#include <cstdint>
#include <memory>
#include <string>

#include "timm/base/error.hpp"
#include "timm/data/image_ops.hpp"
#include "timm/data/transform.hpp"
#include "timm/plugin/plugin.hpp"

namespace example {

constexpr const char* kName = "example_pad_crop";

class PadCrop final : public timm::ImageTransform {
 public:
  explicit PadCrop(const timm::TransformArgs& args) {
    if (args.input_size.size() != 3) {
      throw timm::UsageError(std::string(kName) + ": the input size needs 3 values (C, H, W), got " +
                             std::to_string(args.input_size.size()));
    }
    height_ = args.input_size[1];
    width_ = args.input_size[2];
    // timm's default --train-interpolation "random" picks one per image; a
    // fixed one keeps the example short.
    interpolation_ = args.interpolation == "random" ? timm::Interpolation::kBilinear
                                                    : timm::interpolation_from_name(args.interpolation);
  }

  // Runs in the loader's worker threads: all randomness comes from `rng`,
  // which the loader seeds per sample, so a seed gives the same batches
  // whatever the number of workers.
  void apply(timm::Image& image, timm::Rng& rng) const override {
    timm::Image resized = timm::resize(image, height_, width_, interpolation_);
    const int64_t top = rng.randint(-kPadding, kPadding);
    const int64_t left = rng.randint(-kPadding, kPadding);
    image = timm::crop(resized, top, left, height_, width_);
  }

  // What the trainer logs in "Train transform: Compose(...)".
  std::string repr() const override {
    return "ExamplePadCrop(size=(" + std::to_string(height_) + ", " + std::to_string(width_) +
           "), padding=" + std::to_string(kPadding) +
           ", interpolation=" + std::string(timm::interpolation_name(interpolation_)) + ")";
  }

 private:
  static constexpr int64_t kPadding = 4;
  int64_t height_ = 0;
  int64_t width_ = 0;
  timm::Interpolation interpolation_ = timm::Interpolation::kBilinear;
};

}  // namespace example

TIMM_PLUGIN("example_pad_crop") {
  registrar.add_augmentation(
      example::kName, "Resize to the input size, then RandomCrop with padding 4 (--train-crop-mode example_pad_crop)",
      [](const timm::TransformArgs& args) {
        return timm::Augmentation{std::make_shared<const example::PadCrop>(args), nullptr};
      },
      // The traits tell create_transform where the stage goes and when it
      // applies. --no-aug training keeps its own crop (resize_center).
      timm::AugmentationTraits{.stage = timm::AugmentationStage::kCrop, .applies = [](const timm::TransformArgs& a) {
                                 return a.augmenting() && a.train_crop_mode == example::kName;
                               }});
}
