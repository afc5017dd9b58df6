// The basic augmentations of timm's transforms_factory: the train crop
// (RandomResizedCropAndInterpolation), flips, ColorJitter, the eval crops
// (center, squash, border), the no-aug train resize and the batch Normalize
// that timm's PrefetchLoader applies. Pixel work goes through the SDK's
// image_ops, which match PIL.
#include <ATen/ATen.h>

#include <atomic>
#include <charconv>
#include <cmath>
#include <numeric>

#include "timm/base/error.hpp"
#include "timm/data/image_ops.hpp"
#include "timm/log/log.hpp"
#include "timm/plugin/plugin.hpp"

namespace timm {
namespace {

// ---- Python-style formatting for the reprs ---------------------------------

// Python's repr(float): the shortest round-tripping digits, "1.0" not "1".
std::string py_float(double v) {
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), v);
  std::string s(buf, end);
  if (s.find_first_of(".en") == std::string::npos) s += ".0";
  return s;
}

double py_round(double v, int digits) {
  const double scale = std::pow(10.0, digits);
  return std::nearbyint(v * scale) / scale;
}

// Appends rather than chains operator+, which trips GCC 12's -Wstringop-overflow.
std::string pair_repr(const std::string& a, const std::string& b) {
  std::string s = "(";
  s.append(a).append(", ").append(b).append(")");
  return s;
}
std::string py_pair(double a, double b) { return pair_repr(py_float(a), py_float(b)); }
std::string int_pair(int64_t a, int64_t b) { return pair_repr(std::to_string(a), std::to_string(b)); }
std::string fixed3(double v) { return format("%.3f", v); }

std::string py_tuple(const std::vector<double>& v) {
  std::string s = "(";
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (i > 0) s += ", ";
    s += py_float(v[i]);
  }
  return s + (v.size() == 1 ? ",)" : ")");
}

// ---- Arguments -------------------------------------------------------------

struct Size2 {
  int64_t h, w;
};

Size2 image_size(const TransformArgs& args) {
  if (args.input_size.size() != 3 || args.input_size[1] <= 0 || args.input_size[2] <= 0) {
    throw UsageError("input size must be C,H,W with positive H and W");
  }
  return {args.input_size[1], args.input_size[2]};
}

// Eval and no-aug train have no per-call choice: 'random' means bilinear,
// as in timm's transforms_noaug_train.
Interpolation fixed_interpolation(const TransformArgs& args) {
  return args.interpolation == "random" ? Interpolation::kBilinear : interpolation_from_name(args.interpolation);
}

std::string resize_repr(const std::string& size, Interpolation interpolation) {
  return "Resize(size=" + size + ", interpolation=" + std::string(interpolation_name(interpolation)) +
         ", max_size=None, antialias=True)";
}

// Lines after the first are indented as Compose prints its members, so one
// stage that stands for two torchvision transforms prints like timm.
std::string two_lines(const std::string& a, const std::string& b) { return a + "\n    " + b; }

// ---- Train crop ------------------------------------------------------------

class RandomResizedCrop final : public ImageTransform {
 public:
  explicit RandomResizedCrop(const TransformArgs& args) : size_(image_size(args)) {
    if (args.scale.size() != 2 || args.ratio.size() != 2) throw UsageError("rrc: scale and ratio need two values each");
    scale_ = {args.scale[0], args.scale[1]};
    ratio_ = {args.ratio[0], args.ratio[1]};
    if (args.interpolation == "random") {
      random_ = true;
    } else {
      interpolation_ = interpolation_from_name(args.interpolation);
    }
  }

  struct Params {
    int64_t top, left, height, width;
  };

  // timm's RandomResizedCropAndInterpolation.get_params.
  Params get_params(int64_t img_h, int64_t img_w, Rng& rng) const {
    const double area = static_cast<double>(img_w) * static_cast<double>(img_h);
    const double log_lo = std::log(ratio_[0]), log_hi = std::log(ratio_[1]);
    for (int attempt = 0; attempt < 10; ++attempt) {
      const double target_area = rng.uniform(scale_[0], scale_[1]) * area;
      const double aspect = std::exp(rng.uniform(log_lo, log_hi));
      const int64_t w = round_half_even(std::sqrt(target_area * aspect));
      const int64_t h = round_half_even(std::sqrt(target_area / aspect));
      if (w <= img_w && h <= img_h) {
        const int64_t top = rng.randint(0, img_h - h);
        const int64_t left = rng.randint(0, img_w - w);
        return {top, left, h, w};
      }
    }
    // Fallback: a central crop of the aspect ratio nearest the image's.
    const double in_ratio = static_cast<double>(img_w) / static_cast<double>(img_h);
    const double min_ratio = std::min(ratio_[0], ratio_[1]), max_ratio = std::max(ratio_[0], ratio_[1]);
    int64_t w = img_w, h = img_h;
    if (in_ratio < min_ratio) {
      h = round_half_even(static_cast<double>(w) / min_ratio);
    } else if (in_ratio > max_ratio) {
      w = round_half_even(static_cast<double>(h) * max_ratio);
    }
    return {(img_h - h) / 2, (img_w - w) / 2, h, w};
  }

  void apply(Image& image, Rng& rng) const override {
    const Params p = get_params(image.height, image.width, rng);
    const Interpolation interpolation =
        random_ ? (rng.randint(0, 1) == 0 ? Interpolation::kBilinear : Interpolation::kBicubic) : interpolation_;
    // A zero-sized crop (images of 1 pixel) cannot be resampled; PIL fails too.
    if (p.height <= 0 || p.width <= 0) {
      throw Error("rrc: image of " + std::to_string(image.height) + "x" + std::to_string(image.width) +
                  " is too small to crop");
    }
    image = resized_crop(image, p.top, p.left, p.height, p.width, size_.h, size_.w, interpolation);
  }

  std::string repr() const override {
    const std::string interp = random_ ? "bilinear bicubic" : std::string(interpolation_name(interpolation_));
    return "RandomResizedCropAndInterpolation(size=" + int_pair(size_.h, size_.w) +
           ", scale=" + py_pair(py_round(scale_[0], 4), py_round(scale_[1], 4)) +
           ", ratio=" + py_pair(py_round(ratio_[0], 4), py_round(ratio_[1], 4)) + ", interpolation=" + interp + ")";
  }

 private:
  Size2 size_;
  std::array<double, 2> scale_{}, ratio_{};
  bool random_ = false;
  Interpolation interpolation_ = Interpolation::kBilinear;
};

// ---- Flips -----------------------------------------------------------------

class RandomFlip final : public ImageTransform {
 public:
  RandomFlip(double p, bool horizontal) : p_(p), horizontal_(horizontal) {}
  void apply(Image& image, Rng& rng) const override {
    // torchvision: flip when torch.rand(1) < p.
    if (!rng.bernoulli(p_)) return;
    horizontal_ ? hflip(image) : vflip(image);
  }
  std::string repr() const override {
    return std::string(horizontal_ ? "RandomHorizontalFlip" : "RandomVerticalFlip") + "(p=" + py_float(p_) + ")";
  }

 private:
  double p_;
  bool horizontal_;
};

// ---- ColorJitter -----------------------------------------------------------

class ColorJitter final : public ImageTransform {
 public:
  explicit ColorJitter(double jitter) {
    if (jitter < 0) throw UsageError("color_jitter must be >= 0, got " + py_float(jitter));
    lo_ = std::max(0.0, 1.0 - jitter);
    hi_ = 1.0 + jitter;
  }

  void apply(Image& image, Rng& rng) const override {
    // torchvision draws the order (randperm) and then the three factors.
    std::array<int, 3> order{0, 1, 2};
    for (int i = 2; i > 0; --i) std::swap(order[i], order[rng.randint(0, i)]);
    const std::array<double, 3> factor{rng.uniform(lo_, hi_), rng.uniform(lo_, hi_), rng.uniform(lo_, hi_)};
    for (int op : order) {
      if (op == 0) adjust_brightness(image, factor[0]);
      if (op == 1) adjust_contrast(image, factor[1]);
      if (op == 2) adjust_saturation(image, factor[2]);
    }
  }

  std::string repr() const override {
    const std::string range = py_pair(lo_, hi_);
    return "ColorJitter(brightness=" + range + ", contrast=" + range + ", saturation=" + range + ", hue=None)";
  }

 private:
  double lo_ = 1.0, hi_ = 1.0;
};

// ---- Eval crops and the no-aug train resize --------------------------------

Size2 scale_size(const TransformArgs& args) {
  const Size2 size = image_size(args);
  const double crop_pct = args.crop_pct > 0 ? args.crop_pct : 0.875;
  return {static_cast<int64_t>(std::floor(size.h / crop_pct)), static_cast<int64_t>(std::floor(size.w / crop_pct))};
}

// timm's ResizeKeepRatio.get_params (no random scale or aspect).
Size2 keep_ratio_size(int64_t img_h, int64_t img_w, Size2 target, double longest) {
  const double ratio_h = static_cast<double>(img_h) / target.h, ratio_w = static_cast<double>(img_w) / target.w;
  const double ratio = std::max(ratio_h, ratio_w) * longest + std::min(ratio_h, ratio_w) * (1.0 - longest);
  return {std::max<int64_t>(1, round_half_even(img_h * 1.0 / ratio)),
          std::max<int64_t>(1, round_half_even(img_w * 1.0 / ratio))};
}

std::string keep_ratio_repr(Size2 size, Interpolation interpolation, double longest) {
  return "ResizeKeepRatio(size=" + int_pair(size.h, size.w) +
         ", interpolation=" + std::string(interpolation_name(interpolation)) + ", longest=" + fixed3(longest) +
         ", random_scale_prob=0.000, random_scale_range=(0.850, 1.050), random_aspect_prob=0.000, "
         "random_aspect_range=(0.900, 1.110))";
}

enum class EvalMode { kCenter, kSquash, kBorder, kNoAugTrain };

class EvalCrop final : public ImageTransform {
 public:
  EvalCrop(const TransformArgs& args, EvalMode mode)
      : mode_(mode), size_(image_size(args)), scale_(scale_size(args)), interpolation_(fixed_interpolation(args)) {
    for (double m : args.mean)
      fill_.push_back(static_cast<std::uint8_t>(std::clamp<int64_t>(round_half_even(255 * m), 0, 255)));
    if (mode_ == EvalMode::kNoAugTrain) scale_ = size_;  // Resize(img_size) with a (H, W) tuple
  }

  void apply(Image& image, Rng&) const override {
    switch (mode_) {
      case EvalMode::kCenter:
        if (scale_.h == scale_.w) {
          const auto [h, w] = shorter_side_size(image.height, image.width, scale_.h);
          image = resize(image, h, w, interpolation_);
        } else {
          const Size2 s = keep_ratio_size(image.height, image.width, scale_, 0.0);
          image = resize(image, s.h, s.w, interpolation_);
        }
        image = center_crop(image, size_.h, size_.w);
        break;
      case EvalMode::kSquash:
      case EvalMode::kNoAugTrain:
        image = center_crop(resize(image, scale_.h, scale_.w, interpolation_), size_.h, size_.w);
        break;
      case EvalMode::kBorder: {
        const Size2 s = keep_ratio_size(image.height, image.width, scale_, 1.0);
        image = center_crop_or_pad(resize(image, s.h, s.w, interpolation_), size_.h, size_.w, fill_);
        break;
      }
    }
  }

  std::string repr() const override {
    const std::string crop = "CenterCrop(size=" + int_pair(size_.h, size_.w) + ")";
    switch (mode_) {
      case EvalMode::kCenter:
        if (scale_.h == scale_.w) return two_lines(resize_repr(std::to_string(scale_.h), interpolation_), crop);
        return two_lines(keep_ratio_repr(scale_, interpolation_, 0.0), crop);
      case EvalMode::kSquash:
      case EvalMode::kNoAugTrain:
        return two_lines(resize_repr(int_pair(scale_.h, scale_.w), interpolation_), crop);
      case EvalMode::kBorder:
        return two_lines(keep_ratio_repr(scale_, interpolation_, 1.0),
                         "CenterCropOrPad(size=" + int_pair(size_.h, size_.w) + ")");
    }
    return "";
  }

 private:
  EvalMode mode_;
  Size2 size_, scale_;
  Interpolation interpolation_;
  std::vector<std::uint8_t> fill_;
};

// ---- Batch normalisation (timm's PrefetchLoader) ----------------------------

// timm's adapt_to_chs: a length mismatch uses the mean of the values.
std::vector<double> adapt_to_channels(const std::vector<double>& v, int64_t channels, const char* what,
                                      std::atomic<bool>& warned) {
  if (static_cast<int64_t>(v.size()) == channels) return v;
  if (v.empty()) throw UsageError(std::string("normalize: empty ") + what);
  const double avg = std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
  if (v.size() != 1 && !warned.exchange(true)) {
    log_warning(format("Pretrained %s different shape than model, using avg value %g.", what, avg));
  }
  return std::vector<double>(channels, avg);
}

class Normalize final : public BatchTransform {
 public:
  explicit Normalize(const TransformArgs& args) : mean_(args.mean), std_(args.std) {
    for (double s : std_) {
      if (s == 0.0) throw UsageError("normalize: std must not be 0");
    }
  }

  void apply(at::Tensor& batch, Rng&) const override {
    TORCH_CHECK(batch.dim() == 4, "normalize expects an (N, C, H, W) batch, got ", batch.sizes());
    if (!batch.is_floating_point()) batch = batch.to(at::kFloat);
    const int64_t c = batch.size(1);
    auto as_tensor = [&](const std::vector<double>& v, const char* what) {
      std::vector<double> scaled = adapt_to_channels(v, c, what, v.data() == mean_.data() ? warned_mean_ : warned_std_);
      for (double& x : scaled) x *= 255.0;
      return at::tensor(scaled, at::kDouble).to(batch.device(), batch.scalar_type()).view({1, c, 1, 1});
    };
    batch.sub_(as_tensor(mean_, "mean")).div_(as_tensor(std_, "std"));
  }

  std::string repr() const override { return "Normalize(mean=" + py_tuple(mean_) + ", std=" + py_tuple(std_) + ")"; }

 private:
  std::vector<double> mean_, std_;
  // timm warns once, when it builds the loader.
  mutable std::atomic<bool> warned_mean_{false}, warned_std_{false};
};

// The crop of timm's create_transform: --no-aug training resizes and
// centre-crops (transforms_noaug_train); training crops by --train-crop-mode
// (default: RandomResizedCrop), eval by the data config's crop_mode (default:
// center).
std::string crop_of(const TransformArgs& a) {
  if (a.is_training && a.no_aug) return "resize_center";
  if (a.is_training) return a.train_crop_mode.empty() ? "rrc" : a.train_crop_mode;
  return a.crop_mode.empty() ? "center" : a.crop_mode;
}

template <class T, class... A>
Augmentation image_stage(A&&... a) {
  return Augmentation{std::make_shared<const T>(std::forward<A>(a)...), nullptr};
}

}  // namespace
}  // namespace timm

TIMM_PLUGIN("aug_basic") {
  using namespace timm;
  using Stage = AugmentationStage;
  // The crops: each applies when create_transform's crop is its name (crop_of).
  auto crop = [](const char* name) {
    return AugmentationTraits{.stage = Stage::kCrop,
                              .applies = [name](const TransformArgs& a) { return crop_of(a) == name; }};
  };
  registrar.add_augmentation(
      "rrc", "RandomResizedCropAndInterpolation: random area/aspect crop resized to the input size",
      [](const TransformArgs& a) { return image_stage<RandomResizedCrop>(a); }, crop("rrc"));
  registrar.add_augmentation("hflip", "RandomHorizontalFlip with probability --hflip",
                             [](const TransformArgs& a) { return image_stage<RandomFlip>(a.hflip, true); },
                             {.stage = Stage::kPrimary, .order = 10, .applies = [](const TransformArgs& a) {
                                return a.augmenting() && a.hflip > 0.0;
                              }});
  registrar.add_augmentation("vflip", "RandomVerticalFlip with probability --vflip",
                             [](const TransformArgs& a) { return image_stage<RandomFlip>(a.vflip, false); },
                             {.stage = Stage::kPrimary, .order = 20, .applies = [](const TransformArgs& a) {
                                return a.augmenting() && a.vflip > 0.0;
                              }});
  // After auto-augment (10, its own plugin), as timm's secondary transforms.
  registrar.add_augmentation(
      "color_jitter", "ColorJitter of brightness, contrast and saturation by --color-jitter",
      [](const TransformArgs& a) { return image_stage<ColorJitter>(a.color_jitter.value_or(0.0)); },
      {.stage = Stage::kSecondary, .order = 20, .applies = [](const TransformArgs& a) {
         // timm: colour jitter is off with --aa, except for 3-Augment.
         const bool off_by_aa = !a.auto_augment.empty() && a.auto_augment.find("3a") == std::string::npos;
         return a.augmenting() && !off_by_aa && a.color_jitter.has_value() && *a.color_jitter > 0.0;
       }});
  registrar.add_augmentation(
      "center", "eval: Resize the shorter side to size / crop_pct, then CenterCrop",
      [](const TransformArgs& a) { return image_stage<EvalCrop>(a, EvalMode::kCenter); }, crop("center"));
  registrar.add_augmentation(
      "squash", "eval: Resize both sides to size / crop_pct (aspect not kept), then CenterCrop",
      [](const TransformArgs& a) { return image_stage<EvalCrop>(a, EvalMode::kSquash); }, crop("squash"));
  registrar.add_augmentation(
      "border", "eval: ResizeKeepRatio of the longest side, then CenterCropOrPad with the mean",
      [](const TransformArgs& a) { return image_stage<EvalCrop>(a, EvalMode::kBorder); }, crop("border"));
  registrar.add_augmentation(
      "resize_center", "no-aug train: Resize to the input size, then CenterCrop",
      [](const TransformArgs& a) { return image_stage<EvalCrop>(a, EvalMode::kNoAugTrain); }, crop("resize_center"));
  registrar.add_augmentation(
      "normalize", "batch: (x - mean*255) / (std*255) on the device, as timm's prefetcher",
      [](const TransformArgs& a) {
        return Augmentation{nullptr, std::make_shared<const Normalize>(a)};
      },
      {.stage = Stage::kFinal, .order = 10, .applies = [](const TransformArgs&) { return true; }});
}
