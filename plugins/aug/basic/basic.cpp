// The basic augmentations of timm's transforms_factory: the train crops
// (RandomResizedCropAndInterpolation; ResizeKeepRatio with CenterCropOrPad or
// RandomCropOrPad for --train-crop-mode rkrc / rkrr), flips, ColorJitter (in
// a RandomApply with --color-jitter-prob), RandomGrayscale, the RandomApply'd
// GaussianBlur, TrimBorder and the eval crops (center, squash, border), the no-aug train
// resize and the batch Normalize that timm's PrefetchLoader applies. Pixel
// work goes through the SDK's image_ops, which match PIL, except the blur
// and the reflect padding, which follow torchvision's and numpy's.
#include <ATen/ATen.h>

#include <array>
#include <atomic>
#include <cctype>
#include <charconv>
#include <cmath>
#include <numeric>

#include "timm/base/error.hpp"
#include "timm/data/image_ops.hpp"
#include "timm/data/naflex.hpp"
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

  // The window and the interpolation of one call, drawn in apply()'s order.
  std::pair<Params, Interpolation> draw(int64_t img_h, int64_t img_w, Rng& rng) const {
    const Params p = get_params(img_h, img_w, rng);
    const Interpolation interpolation =
        random_ ? (rng.randint(0, 1) == 0 ? Interpolation::kBilinear : Interpolation::kBicubic) : interpolation_;
    // A zero-sized crop (images of 1 pixel) cannot be resampled; PIL fails too.
    if (p.height <= 0 || p.width <= 0) {
      throw Error("rrc: image of " + std::to_string(img_h) + "x" + std::to_string(img_w) + " is too small to crop");
    }
    return {p, interpolation};
  }

  void apply(Image& image, Rng& rng) const override {
    const auto [p, interpolation] = draw(image.height, image.width, rng);
    image = resized_crop(image, p.top, p.left, p.height, p.width, size_.h, size_.w, interpolation);
  }

  // A JPEG undecoded: the same draws from its header's size (so the same
  // window), then a decode of that window only (apply()'s pixels), with
  // --jpeg-dct-scale at the DCT scale that still covers the window at the
  // output size.
  bool takes_jpeg() const override { return true; }
  Image apply_jpeg(const JpegSample& jpeg, Rng& rng) const override {
    const auto [p, interpolation] = draw(jpeg.height, jpeg.width, rng);
    return jpeg_dct_resized_crop(jpeg.bytes, jpeg.source, jpeg.channels, p.top, p.left, p.height, p.width, size_.h,
                                 size_.w, interpolation, jpeg.dct_scale);
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

// ---- NaFlex crops ----------------------------------------------------------

// timm's ResizeToSequence (NaFlex eval and --no-aug training): the image
// resized, aspect kept, to the largest size whose patch grid has at most
// max_seq_len patches (timm's get_image_size_for_seq), each side a multiple
// of the patch.
class ResizeToSequence final : public ImageTransform {
 public:
  explicit ResizeToSequence(const TransformArgs& args)
      : naflex_(*args.naflex), interpolation_(fixed_interpolation(args)) {}

  void apply(Image& image, Rng& /*rng*/) const override {
    const auto size = image_size_for_seq({image.height, image.width}, naflex_.patch_size, naflex_.max_seq_len).size;
    image = resize(image, size[0], size[1], interpolation_);
  }

  std::string repr() const override {
    return "ResizeToSequence()";  // timm's (an nn.Module without its own repr)
  }

 private:
  NaFlexTransformArgs naflex_;
  Interpolation interpolation_;
};

// timm's RandomResizedCropToSequence (NaFlex training): a crop of random area
// (--scale) and aspect relative to the image's (--ratio, log-uniform), then
// resized, aspect kept, to the largest size within max_seq_len patches.
class RandomResizedCropToSequence final : public ImageTransform {
 public:
  explicit RandomResizedCropToSequence(const TransformArgs& args) : naflex_(*args.naflex) {
    if (args.scale.size() != 2 || args.ratio.size() != 2) {
      throw UsageError("naflex_rrc: scale and ratio need two values each");
    }
    scale_ = {args.scale[0], args.scale[1]};
    ratio_ = {args.ratio[0], args.ratio[1]};
    random_ = args.interpolation == "random";
    if (!random_) interpolation_ = interpolation_from_name(args.interpolation);
  }

  void apply(Image& image, Rng& rng) const override {
    const int64_t img_h = image.height, img_w = image.width;
    const auto [top, left, h, w] = window(img_h, img_w, rng);
    const auto size = image_size_for_seq({h, w}, naflex_.patch_size, naflex_.max_seq_len).size;
    const Interpolation interpolation =
        random_ ? (rng.randint(0, 1) == 0 ? Interpolation::kBilinear : Interpolation::kBicubic) : interpolation_;
    image = resized_crop(image, top, left, h, w, size[0], size[1], interpolation);
  }

  std::string repr() const override {
    const std::string interp =
        random_ ? "BILINEAR, BICUBIC" : "InterpolationMode." + upper(std::string(interpolation_name(interpolation_)));
    return "RandomResizedCropToSequence(patch_size=" + int_pair(naflex_.patch_size[0], naflex_.patch_size[1]) +
           ", max_seq_len=" + std::to_string(naflex_.max_seq_len) + ", scale=" + py_pair(scale_[0], scale_[1]) +
           ", ratio=" + py_pair(ratio_[0], ratio_[1]) + ", interpolation=[" + interp +
           "], divisible_by_patch=True, max_ratio=None, final_scale_range=None, attempts=10)";
  }

 private:
  struct Window {
    int64_t top, left, height, width;
  };

  // timm's get_params: ten tries at a window inside the image, else a
  // central one of the aspect nearest the ratio range (relative to the image's).
  Window window(int64_t img_h, int64_t img_w, Rng& rng) const {
    const double area = static_cast<double>(img_h) * static_cast<double>(img_w);
    const double aspect = static_cast<double>(img_w) / static_cast<double>(img_h);
    const double log_lo = std::log(ratio_[0]), log_hi = std::log(ratio_[1]);
    for (int attempt = 0; attempt < 10; ++attempt) {
      const double target_area = area * rng.uniform(scale_[0], scale_[1]);
      const double target_aspect = aspect * std::exp(rng.uniform(log_lo, log_hi));
      const int64_t h = round_half_even(std::sqrt(target_area / target_aspect));
      const int64_t w = round_half_even(std::sqrt(target_area * target_aspect));
      if (0 < w && w <= img_w && 0 < h && h <= img_h) {
        const int64_t top = rng.randint(0, img_h - h);
        const int64_t left = rng.randint(0, img_w - w);
        return {top, left, h, w};
      }
    }
    int64_t h = img_h, w = img_w;
    if (aspect < aspect * ratio_[0]) {
      h = std::min(round_half_even(static_cast<double>(w) / (aspect * ratio_[0])), img_h);
    } else if (aspect > aspect * ratio_[1]) {
      w = std::min(round_half_even(static_cast<double>(h) * (aspect * ratio_[1])), img_w);
    }
    h = std::max<int64_t>(1, h);
    w = std::max<int64_t>(1, w);
    return {(img_h - h) / 2, (img_w - w) / 2, h, w};
  }

  static std::string upper(std::string s) {
    for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    return s;
  }

  NaFlexTransformArgs naflex_;
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

// ---- RandomApply, RandomGrayscale, GaussianBlur ----------------------------

// Python's random.uniform(a, b): a + (b - a) * random(). Equal to
// Rng::uniform(a, b) for a < b (libstdc++ computes the same expression) and
// defined for a >= b too, as Python's.
double py_uniform(Rng& rng, double a, double b) { return a + (b - a) * rng.uniform(); }

// torchvision's RandomApply([t], p): the transform runs when a uniform draw
// is below p (torchvision: unless p < torch.rand(1)).
class RandomApply final : public ImageTransform {
 public:
  RandomApply(std::shared_ptr<const ImageTransform> inner, double p) : inner_(std::move(inner)), p_(p) {}
  void apply(Image& image, Rng& rng) const override {
    if (rng.bernoulli(p_)) inner_->apply(image, rng);
  }
  // torchvision's repr, whose lines Compose does not indent further.
  std::string repr() const override {
    return "RandomApply(\n    p=" + py_float(p_) + "\n    " + inner_->repr() + "\n)";
  }

 private:
  std::shared_ptr<const ImageTransform> inner_;
  double p_;
};

// torchvision's RandomGrayscale(p): PIL's convert('L') with as many channels
// as the image had (an L image stays as it is).
class RandomGrayscale final : public ImageTransform {
 public:
  explicit RandomGrayscale(double p) : p_(p) {}
  void apply(Image& image, Rng& rng) const override {
    if (!rng.bernoulli(p_)) return;
    if (image.channels == 3) image = convert_channels(convert_channels(image, 1), 3);
  }
  std::string repr() const override { return "RandomGrayscale(p=" + py_float(p_) + ")"; }

 private:
  double p_;
};

// numpy's and torch's 'reflect' index (no edge repeat), periodic beyond one
// reflection as numpy's pad; a single pixel repeats.
int64_t reflect_index(int64_t i, int64_t n) {
  if (n == 1) return 0;
  const int64_t period = 2 * (n - 1);
  int64_t m = i % period;
  if (m < 0) m += period;
  return m >= n ? period - m : m;
}

// torchvision's F.pad(img, [left, top, right, bottom], padding_mode='reflect')
// on a PIL image (numpy's pad).
Image reflect_pad(const Image& src, int64_t left, int64_t top, int64_t right, int64_t bottom) {
  const int64_t c = src.channels;
  Image out(src.height + top + bottom, src.width + left + right, c);
  for (int64_t y = 0; y < out.height; ++y) {
    const std::uint8_t* in = src.row(reflect_index(y - top, src.height));
    std::uint8_t* row = out.row(y);
    for (int64_t x = 0; x < out.width; ++x) {
      const int64_t sx = reflect_index(x - left, src.width);
      for (int64_t k = 0; k < c; ++k) row[x * c + k] = in[sx * c + k];
    }
  }
  return out;
}

// torchvision's GaussianBlur(kernel_size=23, sigma=(0.1, 2.0)) as timm's
// transforms_imagenet_train makes it: sigma uniform in the range (drawn in
// float32, as torch's uniform_), torchvision's normalised float32 kernel,
// reflect padding by 11 pixels and the result rounded half to even. The
// convolution runs separably in double, where torch's conv2d sums the 23x23
// kernel in float32: values may differ by 1 where the exact value lies within
// float rounding of a half.
class GaussianBlur final : public ImageTransform {
 public:
  static constexpr int64_t kKernel = 23;
  static constexpr double kSigmaMin = 0.1, kSigmaMax = 2.0;

  void apply(Image& image, Rng& rng) const override {
    const auto sigma = static_cast<float>(rng.uniform(kSigmaMin, kSigmaMax));
    blur(image, sigma);
  }

  static void blur(Image& image, float sigma) {
    constexpr int64_t half = kKernel / 2;
    // torch's reflect padding needs more pixels than it pads.
    if (image.height <= half || image.width <= half) {
      throw Error("gaussian_blur: an image of " + std::to_string(image.height) + "x" + std::to_string(image.width) +
                  " is too small for the 23-pixel kernel (torch's reflect padding needs 12 pixels a side)");
    }
    // torchvision's _get_gaussian_kernel1d in float32.
    std::array<float, kKernel> kernel{};
    double sum = 0.0;
    for (int64_t i = 0; i < kKernel; ++i) {
      const float t = static_cast<float>(i - half) / sigma;
      kernel[i] = std::exp(-0.5F * (t * t));
      sum += kernel[i];
    }
    for (float& k : kernel) k = k / static_cast<float>(sum);

    const int64_t h = image.height, w = image.width, c = image.channels;
    std::vector<double> rows(static_cast<std::size_t>(h * w * c));
    for (int64_t y = 0; y < h; ++y) {
      const std::uint8_t* in = image.row(y);
      for (int64_t x = 0; x < w; ++x) {
        for (int64_t k = 0; k < c; ++k) {
          double acc = 0.0;
          for (int64_t j = 0; j < kKernel; ++j) acc += kernel[j] * in[reflect_index(x + j - half, w) * c + k];
          rows[(y * w + x) * c + k] = acc;
        }
      }
    }
    for (int64_t y = 0; y < h; ++y) {
      std::uint8_t* out = image.row(y);
      for (int64_t i = 0; i < w * c; ++i) {
        double acc = 0.0;
        for (int64_t j = 0; j < kKernel; ++j) acc += kernel[j] * rows[reflect_index(y + j - half, h) * w * c + i];
        out[i] = static_cast<std::uint8_t>(std::clamp(std::nearbyint(acc), 0.0, 255.0));
      }
    }
  }

  std::string repr() const override {
    return "GaussianBlur(kernel_size=" + int_pair(kKernel, kKernel) + ", sigma=" + py_pair(kSigmaMin, kSigmaMax) + ")";
  }
};

// ---- TrimBorder --------------------------------------------------------------

// timm's TrimBorder (validate.py --crop-border-pixels): the eval transform
// first cuts `border` pixels off each side. timm would crop an image with
// nothing inside the border to 0 pixels and fail in the resize after it;
// here that is an error naming the sizes.
class TrimBorder final : public ImageTransform {
 public:
  explicit TrimBorder(int64_t border) : border_(border) {
    if (border < 0) throw UsageError("--crop-border-pixels must be >= 0, got " + std::to_string(border));
  }
  void apply(Image& image, Rng&) const override {
    // A pixel is left inside iff side - 2 * border >= 1 (written so that no border overflows).
    if (border_ > (std::min(image.height, image.width) - 1) / 2) {
      throw Error("TrimBorder(" + std::to_string(border_) + "): a " + std::to_string(image.height) + "x" +
                  std::to_string(image.width) + " image has no pixels inside a border of " + std::to_string(border_));
    }
    image = crop(image, border_, border_, image.height - 2 * border_, image.width - 2 * border_);
  }
  std::string repr() const override { return "TrimBorder()"; }

 private:
  int64_t border_;
};

// ---- Eval crops and the no-aug train resize --------------------------------

Size2 scale_size(const TransformArgs& args) {
  const Size2 size = image_size(args);
  const double crop_pct = args.crop_pct > 0 ? args.crop_pct : 0.875;
  return {static_cast<int64_t>(std::floor(size.h / crop_pct)), static_cast<int64_t>(std::floor(size.w / crop_pct))};
}

// timm's ResizeKeepRatio.get_params with the random factors drawn
// (factor_h, factor_w; 1 without random scale or aspect). A side that rounds
// to 0 is kept at 1 pixel, where PIL would fail.
Size2 keep_ratio_size(int64_t img_h, int64_t img_w, Size2 target, double longest, double factor_h = 1.0,
                      double factor_w = 1.0) {
  const double ratio_h = static_cast<double>(img_h) / target.h, ratio_w = static_cast<double>(img_w) / target.w;
  const double ratio = std::max(ratio_h, ratio_w) * longest + std::min(ratio_h, ratio_w) * (1.0 - longest);
  return {std::max<int64_t>(1, round_half_even(static_cast<double>(img_h) * factor_h / ratio)),
          std::max<int64_t>(1, round_half_even(static_cast<double>(img_w) * factor_w / ratio))};
}

struct KeepRatioRandom {
  double scale_prob = 0.0;
  std::array<double, 2> scale_range{0.85, 1.05};
  double aspect_prob = 0.0;
  std::array<double, 2> aspect_range{0.9, 1.11};
};

std::string keep_ratio_repr(Size2 size, const std::string& interpolation, double longest,
                            const KeepRatioRandom& r = {}) {
  return "ResizeKeepRatio(size=" + int_pair(size.h, size.w) + ", interpolation=" + interpolation +
         ", longest=" + fixed3(longest) + ", random_scale_prob=" + fixed3(r.scale_prob) + ", random_scale_range=(" +
         fixed3(r.scale_range[0]) + ", " + fixed3(r.scale_range[1]) + "), random_aspect_prob=" + fixed3(r.aspect_prob) +
         ", random_aspect_range=(" + fixed3(r.aspect_range[0]) + ", " + fixed3(r.aspect_range[1]) + "))";
}
std::string keep_ratio_repr(Size2 size, Interpolation interpolation, double longest) {
  return keep_ratio_repr(size, std::string(interpolation_name(interpolation)), longest);
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

// ---- Train crops rkrc / rkrr -----------------------------------------------

// timm's center_crop_or_pad with padding_mode='reflect'.
Image center_crop_or_pad_reflect(Image image, int64_t crop_h, int64_t crop_w) {
  if (crop_w > image.width || crop_h > image.height) {
    const int64_t dw = crop_w - image.width, dh = crop_h - image.height;
    image = reflect_pad(image, dw > 0 ? dw / 2 : 0, dh > 0 ? dh / 2 : 0, dw > 0 ? (dw + 1) / 2 : 0,
                        dh > 0 ? (dh + 1) / 2 : 0);
    if (image.width == crop_w && image.height == crop_h) return image;
  }
  const int64_t top = round_half_even(static_cast<double>(image.height - crop_h) / 2.0);
  const int64_t left = round_half_even(static_cast<double>(image.width - crop_w) / 2.0);
  return crop(image, top, left, crop_h, crop_w);
}

// timm's crop_or_pad with padding_mode='reflect': top / left may be negative.
Image crop_or_pad_reflect(Image image, int64_t top, int64_t left, int64_t height, int64_t width) {
  const int64_t right = left + width, bottom = top + height;
  if (left < 0 || top < 0 || right > image.width || bottom > image.height) {
    image = reflect_pad(image, std::max<int64_t>(-left + std::min<int64_t>(0, right), 0),
                        std::max<int64_t>(-top + std::min<int64_t>(0, bottom), 0),
                        std::max<int64_t>(right - std::max(image.width, left), 0),
                        std::max<int64_t>(bottom - std::max(image.height, top), 0));
  }
  return crop(image, std::max<int64_t>(top, 0), std::max<int64_t>(left, 0), height, width);
}

// --train-crop-mode rkrc / rkrr as timm's transforms_imagenet_train builds
// them: ResizeKeepRatio(size, interpolation, random_scale_prob=0.5,
// random_scale_range=scale, random_scale_area=True, random_aspect_prob=0.5,
// random_aspect_range=ratio), then CenterCropOrPad (rkrc) or RandomCropOrPad
// (rkrr) to the input size with reflect padding. Draws, in timm's order:
// uniform() < 0.5 then the scale (uniform in --scale), uniform() < 0.5 then
// the log aspect (uniform in log --ratio), with 'random' interpolation
// randint(0, 1) (bilinear, bicubic), and for rkrr randint(0, |dh|) then
// randint(0, |dw|), negated where the image is smaller than the crop.
class ResizeKeepRatioCrop final : public ImageTransform {
 public:
  ResizeKeepRatioCrop(const TransformArgs& args, bool random_crop)
      : size_(image_size(args)), random_crop_(random_crop) {
    const std::string mode = random_crop ? "rkrr" : "rkrc";
    if (args.scale.size() != 2 || args.ratio.size() != 2) {
      throw UsageError(mode + ": --scale and --ratio need two values each");
    }
    for (double v : {args.scale[0], args.scale[1], args.ratio[0], args.ratio[1]}) {
      if (!(v > 0.0) || !std::isfinite(v)) {
        throw UsageError(mode + ": --scale and --ratio values must be finite and > 0, got " + py_float(v));
      }
    }
    random_.scale_prob = 0.5;
    random_.scale_range = {args.scale[0], args.scale[1]};
    random_.aspect_prob = 0.5;
    random_.aspect_range = {args.ratio[0], args.ratio[1]};
    if (args.interpolation == "random") {
      random_interpolation_ = true;
    } else {
      interpolation_ = interpolation_from_name(args.interpolation);
    }
  }

  void apply(Image& image, Rng& rng) const override {
    double factor_h = 1.0, factor_w = 1.0;
    if (rng.uniform() < random_.scale_prob) {
      // random_scale_area: the factor of an area, as RandomResizedCrop's scale.
      const double factor = 1.0 / std::sqrt(py_uniform(rng, random_.scale_range[0], random_.scale_range[1]));
      factor_h = factor_w = factor;
    }
    if (rng.uniform() < random_.aspect_prob) {
      const double log_aspect = py_uniform(rng, std::log(random_.aspect_range[0]), std::log(random_.aspect_range[1]));
      const double aspect = std::sqrt(std::exp(log_aspect));
      factor_h = factor_h / aspect;
      factor_w = factor_w * aspect;
    }
    const Size2 s = keep_ratio_size(image.height, image.width, size_, 0.0, factor_h, factor_w);
    const Interpolation interpolation =
        random_interpolation_ ? (rng.randint(0, 1) == 0 ? Interpolation::kBilinear : Interpolation::kBicubic)
                              : interpolation_;
    image = resize(image, s.h, s.w, interpolation);
    if (!random_crop_) {
      image = center_crop_or_pad_reflect(std::move(image), size_.h, size_.w);
      return;
    }
    // timm's RandomCropOrPad.get_params: copysign(randint(0, |d|), d).
    const int64_t dh = image.height - size_.h, dw = image.width - size_.w;
    const int64_t top = rng.randint(0, std::abs(dh)) * (dh < 0 ? -1 : 1);
    const int64_t left = rng.randint(0, std::abs(dw)) * (dw < 0 ? -1 : 1);
    image = crop_or_pad_reflect(std::move(image), top, left, size_.h, size_.w);
  }

  std::string repr() const override {
    const std::string interp =
        random_interpolation_ ? "bilinear bicubic" : std::string(interpolation_name(interpolation_));
    return two_lines(keep_ratio_repr(size_, interp, 0.0, random_),
                     std::string(random_crop_ ? "RandomCropOrPad" : "CenterCropOrPad") +
                         "(size=" + int_pair(size_.h, size_.w) + ")");
  }

 private:
  Size2 size_;
  bool random_crop_;
  KeepRatioRandom random_;
  bool random_interpolation_ = false;
  Interpolation interpolation_ = Interpolation::kBilinear;
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
    auto scaled = [&](const std::vector<double>& v, const char* what) {
      std::vector<double> out = adapt_to_channels(v, c, what, v.data() == mean_.data() ? warned_mean_ : warned_std_);
      for (double& x : out) x *= 255.0;
      return out;
    };
    const std::vector<double> mean = scaled(mean_, "mean");
    const std::vector<double> std = scaled(std_, "std");
    if (batch.device().is_cpu() && batch.scalar_type() == at::kFloat && batch.is_contiguous()) {
      normalize_in_one_pass(batch, mean, std);
      return;
    }
    auto as_tensor = [&](const std::vector<double>& v) {
      return at::tensor(v, at::kDouble).to(batch.device(), batch.scalar_type()).view({1, c, 1, 1});
    };
    batch.sub_(as_tensor(mean)).div_(as_tensor(std));
  }

  std::string repr() const override { return "Normalize(mean=" + py_tuple(mean_) + ", std=" + py_tuple(std_) + ")"; }

 private:
  // (x - mean) / std per element in float32: the roundings of sub_ and div_,
  // bit for bit, in one pass over the batch instead of two.
  static void normalize_in_one_pass(at::Tensor& batch, const std::vector<double>& mean,
                                    const std::vector<double>& std) {
    const int64_t channels = batch.size(1);
    const int64_t plane = batch.size(2) * batch.size(3);
    float* data = batch.data_ptr<float>();
    at::parallel_for(0, batch.size(0) * channels, std::max<int64_t>(1, at::internal::GRAIN_SIZE / plane),
                     [&](int64_t begin, int64_t end) {
                       for (int64_t p = begin; p < end; ++p) {
                         const auto m = static_cast<float>(mean[static_cast<std::size_t>(p % channels)]);
                         const auto s = static_cast<float>(std[static_cast<std::size_t>(p % channels)]);
                         float* x = data + p * plane;
                         for (int64_t i = 0; i < plane; ++i) x[i] = (x[i] - m) / s;
                       }
                     });
  }

  std::vector<double> mean_, std_;
  // timm warns once, when it builds the loader.
  mutable std::atomic<bool> warned_mean_{false}, warned_std_{false};
};

// The crop of timm's create_transform: --no-aug training resizes and
// centre-crops (transforms_noaug_train); training crops by --train-crop-mode
// (default: RandomResizedCrop), eval by the data config's crop_mode (default:
// center).
std::string crop_of(const TransformArgs& a) {
  if (a.naflex) return a.augmenting() ? "naflex_rrc" : "naflex_resize";
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
  registrar.add_augmentation("trim_border", "eval: TrimBorder, --crop-border-pixels off each side before the crop",
                             [](const TransformArgs& a) { return image_stage<TrimBorder>(a.crop_border_pixels); },
                             {.stage = Stage::kPrepare, .order = 10, .applies = [](const TransformArgs& a) {
                                return !a.is_training && a.crop_border_pixels != 0;
                              }});
  registrar.add_augmentation(
      "rrc", "RandomResizedCropAndInterpolation: random area/aspect crop resized to the input size",
      [](const TransformArgs& a) { return image_stage<RandomResizedCrop>(a); }, crop("rrc"));
  registrar.add_augmentation(
      "rkrc", "ResizeKeepRatio (random scale and aspect by --scale, --ratio), then CenterCropOrPad (reflect)",
      [](const TransformArgs& a) { return image_stage<ResizeKeepRatioCrop>(a, false); }, crop("rkrc"));
  registrar.add_augmentation(
      "rkrr", "ResizeKeepRatio (random scale and aspect by --scale, --ratio), then RandomCropOrPad (reflect)",
      [](const TransformArgs& a) { return image_stage<ResizeKeepRatioCrop>(a, true); }, crop("rkrr"));
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
      "color_jitter",
      "ColorJitter of brightness, contrast and saturation by --color-jitter (RandomApply with --color-jitter-prob)",
      [](const TransformArgs& a) {
        auto jitter = std::make_shared<const ColorJitter>(a.color_jitter.value_or(0.0));
        if (!a.color_jitter_prob) return Augmentation{jitter, nullptr};
        return image_stage<RandomApply>(jitter, *a.color_jitter_prob);
      },
      {.stage = Stage::kSecondary, .order = 20, .applies = [](const TransformArgs& a) {
         // timm: colour jitter is off with --aa, except for 3-Augment.
         const bool off_by_aa = !a.auto_augment.empty() && a.auto_augment.find("3a") == std::string::npos;
         return a.augmenting() && !off_by_aa && a.color_jitter.has_value() && *a.color_jitter > 0.0;
       }});
  // After colour jitter, as timm's secondary transforms; whatever --aa is.
  registrar.add_augmentation("grayscale", "RandomGrayscale with probability --grayscale-prob",
                             [](const TransformArgs& a) { return image_stage<RandomGrayscale>(a.grayscale_prob); },
                             {.stage = Stage::kSecondary, .order = 30, .applies = [](const TransformArgs& a) {
                                return a.augmenting() && a.grayscale_prob != 0.0;
                              }});
  registrar.add_augmentation(
      "gaussian_blur", "GaussianBlur (kernel 23, sigma 0.1-2.0) with probability --gaussian-blur-prob",
      [](const TransformArgs& a) {
        const Size2 size = image_size(a);
        if (size.h < 12 || size.w < 12) {
          throw UsageError("--gaussian-blur-prob needs an input size of at least 12x12 (timm's 23-pixel kernel), got " +
                           std::to_string(size.h) + "x" + std::to_string(size.w));
        }
        return image_stage<RandomApply>(std::make_shared<const GaussianBlur>(), a.gaussian_blur_prob);
      },
      {.stage = Stage::kSecondary, .order = 40, .applies = [](const TransformArgs& a) {
         return a.augmenting() && a.gaussian_blur_prob != 0.0;
       }});
  registrar.add_augmentation(
      "naflex_rrc",
      "NaFlex train: RandomResizedCropToSequence, a random crop resized (aspect kept) to at most the sequence length",
      [](const TransformArgs& a) { return image_stage<RandomResizedCropToSequence>(a); }, crop("naflex_rrc"));
  registrar.add_augmentation(
      "naflex_resize", "NaFlex eval / no-aug: ResizeToSequence, aspect kept, to at most the sequence length in patches",
      [](const TransformArgs& a) { return image_stage<ResizeToSequence>(a); }, crop("naflex_resize"));
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
      // NaFlex batches are normalised as patches (normalize_patches).
      {.stage = Stage::kFinal, .order = 10, .applies = [](const TransformArgs& a) { return !a.naflex; }});
}
