// Transforms: the interface augmentation plugins implement, and timm's
// create_transform that composes them.
//
// Image transforms run per sample in the loader's worker threads on uint8
// images; batch transforms run on the float batch on the training device
// (as timm's prefetcher normalises there). Randomness comes from an Rng the
// loader seeds per sample, so the same seed gives the same batches whatever
// the number of workers.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "timm/data/image.hpp"

namespace timm {

class Rng {
 public:
  explicit Rng(std::uint64_t seed) : engine_(seed) {}
  // Uniform in [lo, hi).
  double uniform(double lo = 0.0, double hi = 1.0) { return std::uniform_real_distribution<double>(lo, hi)(engine_); }
  // Uniform integer in [lo, hi], both inclusive (Python's random.randint).
  int64_t randint(int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(engine_); }
  bool bernoulli(double p) { return uniform() < p; }
  std::mt19937_64& engine() { return engine_; }

 private:
  std::mt19937_64 engine_;
};

// A JPEG sample not yet decoded, as the loader gives it to the first image
// stage with --jpeg-dct-scale (LoaderOptions::jpeg_dct_scale).
struct JpegSample {
  std::span<const std::uint8_t> bytes;  // the JPEG file
  int64_t height = 0;                   // its size, from its header (jpeg_dimensions)
  int64_t width = 0;
  int64_t channels = 3;  // what decoding converts to: 1 (L) or 3 (RGB)
  std::string source;    // the sample, for messages (Dataset::describe)
  // --jpeg-dct-scale: the stage may decode at a DCT scale (1/2 to 1/8; not
  // PIL's pixels). Without it, the pixels it uses equal the whole decode's.
  bool dct_scale = false;
};

class ImageTransform {
 public:
  virtual ~ImageTransform() = default;
  virtual void apply(Image& image, Rng& rng) const = 0;
  // timm's repr, e.g. "RandomHorizontalFlip(p=0.5)".
  virtual std::string repr() const = 0;
  // Whether apply_jpeg() stands in for decoding a JPEG and apply(). A crop
  // that resamples a window of the image (RandomResizedCrop) can, and decodes
  // only that window; the loader asks the pipeline's first stage only.
  // Default: false.
  virtual bool takes_jpeg() const { return false; }
  // What apply() makes of the decoded `jpeg`, with the same draws from `rng`
  // as apply() on a jpeg.height x jpeg.width image (so the same window),
  // decoding only what it needs (jpeg_dct_resized_crop): apply()'s pixels
  // exactly, unless jpeg.dct_scale (then close to them, not equal). Throws
  // Error for a bad file (decode_image's errors, pixel
  // limit included) as for a bad image: the loader skips the sample. Called
  // only when takes_jpeg(); the default fails an internal check.
  virtual Image apply_jpeg(const JpegSample& jpeg, Rng& rng) const;
};

class BatchTransform {
 public:
  virtual ~BatchTransform() = default;
  // `batch` is floating-point (N, C, H, W) on the training device: float32,
  // or --model-dtype's (bfloat16, float16: timm's img_dtype); keep its dtype.
  virtual void apply(at::Tensor& batch, Rng& rng) const = 0;
  virtual std::string repr() const = 0;
};

// One NaFlex transform choice (--naflex-loader; timm's create_transform with
// naflex=True, patch_size, max_seq_len): images keep their aspect ratio and are
// sized to at most max_seq_len patches of patch_size, each side a multiple of
// the patch, instead of to input_size.
struct NaFlexTransformArgs {
  std::array<int64_t, 2> patch_size{16, 16};  // (height, width)
  int64_t max_seq_len = 576;
};

// create_transform's arguments (the resolved data config plus the train flags).
struct TransformArgs {
  bool is_training = false;
  std::vector<int64_t> input_size{3, 224, 224};  // C, H, W
  std::string interpolation = "bilinear";        // train: --train-interpolation
  std::vector<double> mean{0.485, 0.456, 0.406};
  std::vector<double> std{0.229, 0.224, 0.225};
  double crop_pct = 0.875;
  // The eval crop and the train crop, named as timm's crop_mode and
  // --train-crop-mode ("rrc", "rkrc", "rkrr"); empty: timm's default crop.
  std::string crop_mode;
  std::string train_crop_mode;
  // validate.py's --crop-border-pixels: the eval transform first trims this
  // many pixels off each side of the image (timm's TrimBorder); 0 trims none.
  int64_t crop_border_pixels = 0;
  // --scale and --ratio: RandomResizedCrop's area and aspect ranges; with
  // "rkrc" / "rkrr", ResizeKeepRatio's random scale (as an area) and aspect
  // ranges, as timm passes them.
  std::vector<double> scale{0.08, 1.0};
  std::vector<double> ratio{3.0 / 4.0, 4.0 / 3.0};
  double hflip = 0.5;
  double vflip = 0.0;
  // --color-jitter: brightness, contrast and saturation factor range
  // [max(0, 1 - j), 1 + j]; unset or 0 turns colour jitter off.
  std::optional<double> color_jitter = 0.4;
  // --color-jitter-prob: set, colour jitter (when on) runs with this
  // probability, as timm's RandomApply([ColorJitter], p); unset: always.
  std::optional<double> color_jitter_prob;
  // --grayscale-prob: timm's RandomGrayscale(p) after colour jitter; 0 (or
  // unset) leaves it out.
  double grayscale_prob = 0.0;
  // --gaussian-blur-prob: timm's RandomApply([GaussianBlur(kernel_size=23,
  // sigma=(0.1, 2.0))], p) after grayscale; 0 (or unset) leaves it out.
  double gaussian_blur_prob = 0.0;
  bool no_aug = false;
  // --aa: timm's auto-augment config ("rand-m9-mstd0.5-inc1", "augmix-m5-w4-d2",
  // "original", "v0", "3a", ...); empty turns it off. Except with "3a" in it,
  // it turns colour jitter off, as timm's create_transform.
  std::string auto_augment;
  // Random erasing of the normalised batch, as timm's PrefetchLoader:
  // --reprob, --remode, --recount and the clean first 1/splits of the batch
  // (train.py's --resplit: --aug-splits or 2).
  double re_prob = 0.0;
  std::string re_mode = "const";
  int64_t re_count = 1;
  int64_t re_num_splits = 0;
  // --aug-splits (0 or >= 2): timm's AugMixDataset. Each sample gives a clean
  // split (the crop and flips only) and aug_splits - 1 splits that also run
  // the auto-augment and colour stages.
  int64_t aug_splits = 0;
  // Set: the NaFlex crops (training: RandomResizedCropToSequence; eval and
  // --no-aug: ResizeToSequence) in place of the crop, and no batch
  // normalisation (NaFlex batches are normalised as patches).
  std::optional<NaFlexTransformArgs> naflex;

  // Training with augmentation: timm's train transform, not --no-aug's.
  bool augmenting() const { return is_training && !no_aug; }
};

// What an augmentation factory makes: one of the two.
struct Augmentation {
  std::shared_ptr<const ImageTransform> image;
  std::shared_ptr<const BatchTransform> batch;
};
using AugmentationFactory = std::function<Augmentation(const TransformArgs&)>;

// The parts of timm's create_transform, in order: what comes before the
// crop (the eval transform's TrimBorder), the crop (exactly one), timm's
// other primary transforms (flips), the secondary ones (auto-augment, colour
// jitter: with --aug-splits only the augmented splits run them) and the
// final batch transforms (normalize, random erasing).
enum class AugmentationStage { kPrepare, kCrop, kPrimary, kSecondary, kFinal };

// What an augmentation plugin declares about a stage when it registers it
// (PluginRegistrar::add_augmentation), so that create_transform composes the
// registered stages without knowing their names.
struct AugmentationTraits {
  AugmentationStage stage = AugmentationStage::kPrimary;
  // The position within the stage, ascending; equal ones in name order. The
  // built-in plugins number their stages 10, 20, ... in timm's order
  // (docs/augmentation.md), leaving room between them.
  int order = 0;
  // Whether create_transform uses the stage for these arguments (timm's
  // conditions: "--hflip > 0", "crop mode is mine", ...). Empty: never; the
  // stage is then made only by name.
  std::function<bool(const TransformArgs&)> applies;
};

// A composed pipeline: per-sample image transforms, then batch transforms.
struct TransformPipeline {
  std::vector<std::shared_ptr<const ImageTransform>> image;
  std::vector<std::shared_ptr<const BatchTransform>> batch;
  // image[secondary_begin...] are timm's secondary stages (auto-augment,
  // colour jitter), which AugMixDataset runs on the augmented splits only.
  std::size_t secondary_begin = 0;
  int64_t aug_splits = 0;

  void apply(Image& image, Rng& rng) const;
  // The images of one sample: with aug_splits > 1, the primary stages once,
  // then the clean image and aug_splits - 1 copies through the secondary
  // stages (AugMixDataset); otherwise every stage on the one image.
  std::vector<Image> apply_splits(Image image, Rng& rng) const;
  // --jpeg-dct-scale: whether the first image stage takes a JPEG before it
  // is decoded (ImageTransform::takes_jpeg) and runs once per sample (it is
  // not one of the per-split secondary stages).
  bool takes_jpeg() const;
  // apply_splits() of the decoded `jpeg`, with the first stage's apply_jpeg
  // in place of decoding and its apply(). Only when takes_jpeg().
  std::vector<Image> apply_splits_jpeg(const JpegSample& jpeg, Rng& rng) const;
  int64_t num_splits() const { return aug_splits > 1 ? aug_splits : 1; }
  void apply(at::Tensor& batch, Rng& rng) const;
  // timm's Compose repr of the per-sample stages (ending in
  // MaybePILToTensor(), as with timm's prefetcher), then the batch stages
  // that timm's PrefetchLoader applies, as "Batch(...)".
  std::string repr() const;
};

// Where and how prepare_input puts a batch: the training device, the model's
// input dtype (float32, or --model-dtype's: timm's img_dtype) and
// --channels-last.
struct InputOptions {
  c10::Device device = c10::kCPU;
  c10::ScalarType dtype = c10::ScalarType::Float;
  bool channels_last = false;
};

// The model's input from a loader batch, as timm's PrefetchLoader makes it:
// the uint8 (N, C, H, W) `images` moved to the device as the dtype, the
// pipeline's batch stages applied there in that dtype
// (x.to(img_dtype).sub_(mean).div_(std), then random erasing), then
// channels_last when asked (train.py's input.contiguous(memory_format=...)).
// On the CPU it runs on the calling thread alone, leaving the cores to the
// loader's workers (see transform.cpp).
at::Tensor prepare_input(const at::Tensor& images, const TransformPipeline& transform, Rng& rng,
                         const InputOptions& options);

// timm's create_transform: the registered augmentations whose traits apply
// to `args`, by stage and order. The pipeline's secondary stages begin after
// the crop and primary ones. No crop that applies (an unknown crop mode)
// throws UsageError; two crops that apply throw Error naming both plugins.
TransformPipeline create_transform(const TransformArgs& args);

}  // namespace timm
