#include "timm/data/naflex_mixup.hpp"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "timm/base/error.hpp"
#include "timm/base/python_repr.hpp"
#include "timm/data/mixup.hpp"

namespace timm {
namespace {

// An image's pixels as a (H, W, C) uint8 tensor, sharing its memory.
at::Tensor pixels_of(Image& image) {
  return at::from_blob(image.pixels.data(), {image.height, image.width, image.channels}, at::kByte);
}

// The window [top, top + h) x [left, left + w) of an (H, W, C) tensor.
at::Tensor window(const at::Tensor& pixels, int64_t top, int64_t left, int64_t h, int64_t w) {
  return pixels.slice(0, top, top + h).slice(1, left, left + w);
}

}  // namespace

double RngNaFlexMixDraws::beta(double alpha) { return RngMixupRandom(rng_).beta(alpha); }

NaFlexMixup::NaFlexMixup(NaFlexMixupOptions options) : options_(options) {
  const NaFlexMixupOptions& o = options_;
  if (o.mixup_alpha < 0 || o.cutmix_alpha < 0 || (o.mixup_alpha == 0 && o.cutmix_alpha == 0)) {
    throw UsageError("--mixup " + python_float_repr(o.mixup_alpha) + " and --cutmix " +
                     python_float_repr(o.cutmix_alpha) +
                     ": NaFlex mixing needs a positive Mixup or CutMix alpha and no negative one");
  }
  if (!(o.prob >= 0 && o.prob <= 1)) {
    throw UsageError("--mixup-prob " + python_float_repr(o.prob) + ": expected a probability in [0, 1]");
  }
  if (!(o.switch_prob >= 0 && o.switch_prob <= 1)) {
    throw UsageError("--mixup-switch-prob " + python_float_repr(o.switch_prob) + ": expected a probability in [0, 1]");
  }
  if (o.num_classes < 1) throw UsageError("NaFlex mixing: num_classes must be >= 1");
  if (o.local_shuffle < 0) throw UsageError("NaFlex mixing: local_shuffle must be >= 0");
}

// timm's pairing: indices sorted (stably) by aspect ratio W / H, then each
// window of local_shuffle shuffled by random.shuffle (Fisher-Yates from the
// back, one _randbelow(i + 1) per position).
std::vector<std::size_t> NaFlexMixup::pair_order(const std::vector<Image>& images, NaFlexMixDraws& draws) const {
  std::vector<std::size_t> order(images.size());
  std::iota(order.begin(), order.end(), 0);
  const auto aspect = [&](std::size_t i) {
    return static_cast<double>(images[i].width) / static_cast<double>(images[i].height);
  };
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return aspect(a) < aspect(b); });
  const auto window_size = static_cast<std::size_t>(options_.local_shuffle);
  if (window_size <= 1) return order;
  for (std::size_t start = 0; start < order.size(); start += window_size) {
    const std::size_t end = std::min(order.size(), start + window_size);
    for (std::size_t i = end - start - 1; i >= 1; --i) {
      const auto j = static_cast<std::size_t>(draws.randbelow(static_cast<int64_t>(i + 1)));
      std::swap(order[start + i], order[start + j]);
    }
  }
  return order;
}

NaFlexMixup::Mix NaFlexMixup::mix_images(std::vector<Image>& images, NaFlexMixDraws& draws) const {
  const NaFlexMixupOptions& o = options_;
  bool use_cutmix = o.mixup_alpha <= 0;
  if (o.mixup_alpha > 0 && o.cutmix_alpha > 0) use_cutmix = draws.torch_rand() < o.switch_prob;
  const double lam_raw = std::clamp(draws.beta(use_cutmix ? o.cutmix_alpha : o.mixup_alpha), 0.0, 1.0);
  const std::vector<std::size_t> order = pair_order(images, draws);
  const std::size_t n = images.size();
  Mix mix{std::vector<double>(n, 1.0), std::vector<int64_t>(n, -1)};
  for (std::size_t k = 0; k + 1 < n; k += 2) {
    mix.partner[order[k]] = static_cast<int64_t>(order[k + 1]);
    mix.partner[order[k + 1]] = static_cast<int64_t>(order[k]);
  }
  // Each image mixes with its partner's original pixels.
  std::vector<Image> originals = images;
  for (std::size_t i = 0; i < n; ++i) {
    if (mix.partner[i] < 0) continue;  // the odd one out stays as it is
    Image& dest = images[i];
    Image& other = originals[static_cast<std::size_t>(mix.partner[i])];
    if (dest.channels != other.channels) {
      throw Error("NaFlex mixing: images of " + std::to_string(dest.channels) + " and " +
                  std::to_string(other.channels) + " channels in one batch");
    }
    const int64_t hi = dest.height, wi = dest.width, hj = other.height, wj = other.width;
    const auto dest_area = static_cast<double>(hi * wi);
    // The central overlap of the two.
    const int64_t oh = std::min(hi, hj), ow = std::min(wi, wj);
    const int64_t top_i = (hi - oh) / 2, left_i = (wi - ow) / 2;
    const int64_t top_j = (hj - oh) / 2, left_j = (wj - ow) / 2;
    const at::Tensor xi = pixels_of(dest);
    const at::Tensor xj = pixels_of(other);
    if (use_cutmix) {
      // A random rectangle of the overlap, its side sqrt(1 - lam) of it.
      const double cut_ratio = std::sqrt(1.0 - lam_raw);
      const auto ch = static_cast<int64_t>(static_cast<double>(oh) * cut_ratio);
      const auto cw = static_cast<int64_t>(static_cast<double>(ow) * cut_ratio);
      const int64_t y_off = draws.randint(0, oh - ch);
      const int64_t x_off = draws.randint(0, ow - cw);
      window(xi, top_i + y_off, left_i + x_off, ch, cw).copy_(window(xj, top_j + y_off, left_j + x_off, ch, cw));
      mix.lam[i] = 1.0 - static_cast<double>(ch * cw) / dest_area;
    } else {
      // timm's float blend of the overlap, cast back to uint8 by truncation.
      const at::Tensor patch_i = window(xi, top_i, left_i, oh, ow);
      const at::Tensor blended = patch_i.mul(lam_raw).add_(window(xj, top_j, left_j, oh, ow), 1.0 - lam_raw);
      patch_i.copy_(blended);
      const auto overlap_area = static_cast<double>(oh * ow);
      mix.lam[i] = (dest_area - overlap_area) / dest_area + lam_raw * overlap_area / dest_area;
    }
  }
  return mix;
}

at::Tensor NaFlexMixup::apply(std::vector<Image>& images, const at::Tensor& targets, int64_t epoch,
                              NaFlexMixDraws& draws) const {
  const NaFlexMixupOptions& o = options_;
  TORCH_CHECK(targets.dim() == 1 && targets.size(0) == static_cast<int64_t>(images.size()),
              "NaFlex mixing: expected one class index per image, got targets of shape ", targets.sizes(), " for ",
              images.size(), " images");
  const at::Tensor encoded = mixup_target(targets, o.num_classes, 1.0, o.label_smoothing);
  const bool enabled = o.mixup_off_epoch == 0 || epoch < o.mixup_off_epoch;
  // timm's order of tests: the prob draw only for a batch that could mix.
  if (images.size() < 2 || !enabled || draws.random() > o.prob) return encoded;
  const Mix mix = mix_images(images, draws);
  at::Tensor soft = encoded.clone();
  for (std::size_t i = 0; i < images.size(); ++i) {
    if (mix.partner[i] < 0) continue;
    soft[static_cast<int64_t>(i)].mul_(mix.lam[i]).add_(encoded[mix.partner[i]], 1.0 - mix.lam[i]);
  }
  return soft;
}

at::Tensor NaFlexMixup::apply(std::vector<Image>& images, const at::Tensor& targets, int64_t epoch, Rng& rng) const {
  RngNaFlexMixDraws draws(rng);
  return apply(images, targets, epoch, draws);
}

}  // namespace timm
