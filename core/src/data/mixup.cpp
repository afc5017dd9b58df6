#include "timm/data/mixup.hpp"

#include <algorithm>
#include <cmath>
#include <random>

#include <ATen/ATen.h>

#include "timm/base/error.hpp"
#include "timm/log/log.hpp"

namespace timm {

double RngMixupRandom::rand() { return rng_.uniform(); }

double RngMixupRandom::beta(double alpha) {
  std::gamma_distribution<double> gamma(alpha, 1.0);
  const double x = gamma(rng_.engine());
  const double y = gamma(rng_.engine());
  return x / (x + y);
}

int64_t RngMixupRandom::randint(int64_t lo, int64_t hi) { return rng_.randint(lo, hi - 1); }

namespace {

// `Real` is the type of timm's lam: double (a Python float) or float (an
// np.float32), which decides the precision of the side length.
template <typename Real>
CutmixBox rand_bbox_impl(int64_t img_h, int64_t img_w, Real lam, MixupRandom& random) {
  const Real ratio = std::sqrt(Real(1) - lam);
  const auto cut_h = static_cast<int64_t>(static_cast<Real>(img_h) * ratio);
  const auto cut_w = static_cast<int64_t>(static_cast<Real>(img_w) * ratio);
  const int64_t cy = random.randint(0, img_h);
  const int64_t cx = random.randint(0, img_w);
  // Python's floor division; cut_h >= 0 so / is floor here.
  return {std::clamp<int64_t>(cy - cut_h / 2, 0, img_h), std::clamp<int64_t>(cy + (cut_h + 1) / 2, 0, img_h),
          std::clamp<int64_t>(cx - cut_w / 2, 0, img_w), std::clamp<int64_t>(cx + (cut_w + 1) / 2, 0, img_w)};
}

template <typename Real>
std::pair<CutmixBox, double> cutmix_bbox_and_lam_impl(int64_t img_h, int64_t img_w, Real lam,
                                                      const std::optional<std::pair<double, double>>& minmax,
                                                      bool correct_lam, MixupRandom& random) {
  const CutmixBox box =
      minmax ? rand_bbox_minmax(img_h, img_w, *minmax, random) : rand_bbox_impl(img_h, img_w, lam, random);
  if (!correct_lam && !minmax) return {box, static_cast<double>(lam)};
  const double area = static_cast<double>((box.yh - box.yl) * (box.xh - box.xl));
  return {box, 1.0 - area / static_cast<double>(img_h * img_w)};
}

at::Tensor one_hot(const at::Tensor& target, int64_t num_classes, double on_value, double off_value) {
  const at::Tensor index = target.to(at::kLong).view({-1, 1});
  return at::full({index.size(0), num_classes}, off_value, index.options().dtype(at::kFloat))
      .scatter_(1, index, on_value);
}

at::Tensor smoothed_one_hot(const at::Tensor& target, int64_t num_classes, double smoothing) {
  const double off_value = smoothing / static_cast<double>(num_classes);
  const double on_value = 1.0 - smoothing + off_value;
  return one_hot(target, num_classes, on_value, off_value);
}

using at::indexing::Slice;

// x[..., yl:yh, xl:xh] of a (C, H, W) or (N, C, H, W) tensor.
at::Tensor box_of(const at::Tensor& x, const CutmixBox& b) {
  return x.index({"...", Slice(b.yl, b.yh), Slice(b.xl, b.xh)});
}

}  // namespace

CutmixBox rand_bbox(int64_t img_h, int64_t img_w, double lam, MixupRandom& random) {
  return rand_bbox_impl(img_h, img_w, lam, random);
}

CutmixBox rand_bbox(int64_t img_h, int64_t img_w, float lam, MixupRandom& random) {
  return rand_bbox_impl(img_h, img_w, lam, random);
}

CutmixBox rand_bbox_minmax(int64_t img_h, int64_t img_w, std::pair<double, double> minmax, MixupRandom& random) {
  const int64_t cut_h =
      random.randint(static_cast<int64_t>(img_h * minmax.first), static_cast<int64_t>(img_h * minmax.second));
  const int64_t cut_w =
      random.randint(static_cast<int64_t>(img_w * minmax.first), static_cast<int64_t>(img_w * minmax.second));
  const int64_t yl = random.randint(0, img_h - cut_h + 1);
  const int64_t xl = random.randint(0, img_w - cut_w + 1);
  return {yl, yl + cut_h, xl, xl + cut_w};
}

std::pair<CutmixBox, double> cutmix_bbox_and_lam(int64_t img_h, int64_t img_w, double lam,
                                                 const std::optional<std::pair<double, double>>& minmax,
                                                 bool correct_lam, MixupRandom& random) {
  return cutmix_bbox_and_lam_impl(img_h, img_w, lam, minmax, correct_lam, random);
}

std::pair<CutmixBox, double> cutmix_bbox_and_lam(int64_t img_h, int64_t img_w, float lam,
                                                 const std::optional<std::pair<double, double>>& minmax,
                                                 bool correct_lam, MixupRandom& random) {
  return cutmix_bbox_and_lam_impl(img_h, img_w, lam, minmax, correct_lam, random);
}

at::Tensor mixup_target(const at::Tensor& target, int64_t num_classes, double lam, double smoothing) {
  const at::Tensor y1 = smoothed_one_hot(target, num_classes, smoothing);
  return y1 * lam + y1.flip(0) * (1.0 - lam);
}

at::Tensor mixup_target(const at::Tensor& target, int64_t num_classes, const at::Tensor& lam, double smoothing) {
  const at::Tensor y1 = smoothed_one_hot(target, num_classes, smoothing);
  return y1 * lam + y1.flip(0) * (1.0 - lam);
}

bool mixup_active(const MixupOptions& options) {
  return options.mixup_alpha > 0.0 || options.cutmix_alpha > 0.0 || options.cutmix_minmax.has_value();
}

Mixup::Mixup(MixupOptions options) : options_(std::move(options)) {
  if (options_.mode != "batch" && options_.mode != "pair" && options_.mode != "elem") {
    throw UsageError("--mixup-mode " + in_quotes(options_.mode) + ": expected batch, pair or elem");
  }
  if (options_.cutmix_minmax) {
    const auto [lo, hi] = *options_.cutmix_minmax;
    if (!(lo >= 0.0 && lo < hi && hi <= 1.0)) {
      throw UsageError("--cutmix-minmax " + format("%g %g", lo, hi) +
                       ": expected min and max with 0 <= min < max <= 1");
    }
    // timm forces the alpha to 1 so that the per-batch draw logic stays the same.
    options_.cutmix_alpha = 1.0;
  }
  if (!mixup_active(options_)) {
    throw UsageError("mixup: expected --mixup > 0, --cutmix > 0 or --cutmix-minmax");
  }
  if (options_.num_classes < 1) {
    throw UsageError("mixup: --num-classes " + std::to_string(options_.num_classes) + ": expected at least 1");
  }
}

MixupParams Mixup::draw_params(int64_t count, MixupRandom& random) const {
  const bool per_batch = count == 0;
  const int64_t n = per_batch ? 1 : count;
  MixupParams params{std::vector<double>(n, 1.0), std::vector<bool>(n, false)};
  if (!enabled_) return params;
  const bool both = options_.mixup_alpha > 0.0 && options_.cutmix_alpha > 0.0;
  const double alpha_if_single = options_.mixup_alpha > 0.0 ? options_.mixup_alpha : options_.cutmix_alpha;
  if (per_batch) {
    // _params_per_batch: the prob draw first, the rest only when it passes.
    if (!(random.rand() < options_.prob)) return params;
    if (both) {
      params.use_cutmix[0] = random.rand() < options_.switch_prob;
      params.lam[0] = random.beta(params.use_cutmix[0] ? options_.cutmix_alpha : options_.mixup_alpha);
    } else {
      params.use_cutmix[0] = !(options_.mixup_alpha > 0.0);
      params.lam[0] = random.beta(alpha_if_single);
    }
    return params;
  }
  // _params_per_elem: whole arrays in numpy's order; both beta arrays are
  // drawn when both mixes are active; lam is float32.
  std::vector<double> lam_mix(n);
  if (both) {
    for (int64_t i = 0; i < n; ++i) params.use_cutmix[i] = random.rand() < options_.switch_prob;
    std::vector<double> cutmix_lam(n);
    for (auto& v : cutmix_lam) v = random.beta(options_.cutmix_alpha);
    for (int64_t i = 0; i < n; ++i) {
      const double mixup_lam = random.beta(options_.mixup_alpha);
      lam_mix[i] = params.use_cutmix[i] ? cutmix_lam[i] : mixup_lam;
    }
  } else {
    for (int64_t i = 0; i < n; ++i) {
      params.use_cutmix[i] = !(options_.mixup_alpha > 0.0);
      lam_mix[i] = random.beta(alpha_if_single);
    }
  }
  for (int64_t i = 0; i < n; ++i) {
    if (random.rand() < options_.prob) params.lam[i] = static_cast<float>(lam_mix[i]);
  }
  return params;
}

std::vector<double> Mixup::mix_batch(at::Tensor& x, MixupRandom& random) const {
  const int64_t n = x.size(0);
  const MixupParams params = draw_params(0, random);
  double lam = params.lam[0];
  if (lam == 1.0) return std::vector<double>(n, 1.0);
  if (params.use_cutmix[0]) {
    const auto [box, corrected] =
        cutmix_bbox_and_lam(x.size(-2), x.size(-1), lam, options_.cutmix_minmax, options_.correct_lam, random);
    box_of(x, box).copy_(box_of(x.flip(0), box));
    lam = corrected;
  } else {
    const at::Tensor flipped = x.flip(0).mul_(1.0 - lam);
    x.mul_(lam).add_(flipped);
  }
  return std::vector<double>(n, lam);
}

std::vector<double> Mixup::mix_pair(at::Tensor& x, MixupRandom& random) const {
  const int64_t n = x.size(0);
  const MixupParams params = draw_params(n / 2, random);
  std::vector<double> lam_batch = params.lam;
  const at::Tensor x_orig = x.clone();
  for (int64_t i = 0; i < n / 2; ++i) {
    const int64_t j = n - i - 1;
    const auto lam = static_cast<float>(lam_batch[i]);
    if (lam == 1.0f) continue;
    if (params.use_cutmix[i]) {
      const auto [box, corrected] =
          cutmix_bbox_and_lam(x.size(-2), x.size(-1), lam, options_.cutmix_minmax, options_.correct_lam, random);
      box_of(x[i], box).copy_(box_of(x_orig[j], box));
      box_of(x[j], box).copy_(box_of(x_orig[i], box));
      lam_batch[i] = static_cast<float>(corrected);
    } else {
      x[i].copy_(x[i] * lam + x_orig[j] * (1.0f - lam));
      x[j].copy_(x[j] * lam + x_orig[i] * (1.0f - lam));
    }
  }
  lam_batch.insert(lam_batch.end(), lam_batch.rbegin(), lam_batch.rend());
  return lam_batch;
}

std::vector<double> Mixup::mix_elem(at::Tensor& x, MixupRandom& random) const {
  const int64_t n = x.size(0);
  const MixupParams params = draw_params(n, random);
  std::vector<double> lam_batch = params.lam;
  const at::Tensor x_orig = x.clone();
  for (int64_t i = 0; i < n; ++i) {
    const int64_t j = n - i - 1;
    const auto lam = static_cast<float>(lam_batch[i]);
    if (lam == 1.0f) continue;
    if (params.use_cutmix[i]) {
      const auto [box, corrected] =
          cutmix_bbox_and_lam(x.size(-2), x.size(-1), lam, options_.cutmix_minmax, options_.correct_lam, random);
      box_of(x[i], box).copy_(box_of(x_orig[j], box));
      lam_batch[i] = static_cast<float>(corrected);
    } else {
      x[i].copy_(x[i] * lam + x_orig[j] * (1.0f - lam));
    }
  }
  return lam_batch;
}

MixupResult Mixup::apply(at::Tensor& images, const at::Tensor& targets, Rng& rng) const {
  RngMixupRandom random(rng);
  return apply(images, targets, random);
}

MixupResult Mixup::apply(at::Tensor& images, const at::Tensor& targets, MixupRandom& random) const {
  TORCH_CHECK(images.dim() == 4, "mixup expects an (N, C, H, W) batch, got ", images.sizes());
  if (images.size(0) % 2 != 0) {
    throw Error("mixup: batch size " + std::to_string(images.size(0)) +
                " is odd; Mixup/CutMix pair sample i with N - 1 - i and need an even batch (use --batch-size "
                "even, and drop the last batch)");
  }
  MixupResult result;
  if (options_.mode == "batch") {
    result.lam = mix_batch(images, random);
    result.targets = mixup_target(targets, options_.num_classes, result.lam[0], options_.label_smoothing);
  } else {
    result.lam = options_.mode == "pair" ? mix_pair(images, random) : mix_elem(images, random);
    // timm mixes the targets with lam as a tensor of the images' dtype.
    const at::Tensor lam = at::tensor(result.lam, at::TensorOptions().dtype(at::kDouble))
                               .to(targets.device(), images.scalar_type())
                               .unsqueeze(1);
    result.targets = mixup_target(targets, options_.num_classes, lam, options_.label_smoothing);
  }
  return result;
}

}  // namespace timm
