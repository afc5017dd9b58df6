// timm's AutoAugment, RandAugment and AugMix (timm/data/auto_augment.py):
// the op table with its magnitude -> argument mapping (LEVEL_TO_ARG), the
// named policies and timm's config-string parsers. The pixel work goes
// through pil_ops, which equal PIL's.
//
// Randomness comes from the per-sample Rng; the draws follow timm's (the
// probability test, the magnitude noise, the sign, the resampling choice),
// so the distributions are timm's while the streams differ.
//
// Private to the autoaugment plugin (its test links it too); built on the
// SDK's image, image ops and transform headers.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "timm/data/image.hpp"
#include "timm/data/image_ops.hpp"
#include "timm/data/transform.hpp"

namespace timm::autoaugment {

// The hparams dict of auto_augment.py.
struct AugmentHparams {
  int64_t translate_const = 250;
  std::vector<std::uint8_t> img_mean{128, 128, 128};  // the fill of geometric ops
  std::optional<Interpolation> interpolation;         // unset: bilinear or bicubic per call
  double translate_pct = 0.45;
  // 'magnitude_std' (unset: 0, printed "0"; infinity: uniform in [0, m]).
  std::optional<double> magnitude_std;
  std::optional<int64_t> magnitude_max;  // 'magnitude_max' (0 or unset: 10)
};

// What transforms_factory passes: translate_const = int(min(H, W) * 0.45),
// img_mean = min(255, round(255 * mean)), the interpolation unless "random";
// AugMix adds translate_pct = 0.3.
AugmentHparams augment_hparams(const TransformArgs& args, bool augmix);

// timm's AugmentOp: one named op with its probability and magnitude.
class AugmentOp {
 public:
  // `name` is timm's (e.g. "Rotate", "PosterizeIncreasing"); an unknown name
  // throws UsageError. `magnitude_is_int` keeps timm's repr ("m=9" / "m=10.0").
  AugmentOp(std::string name, double prob, double magnitude, const AugmentHparams& hparams,
            bool magnitude_is_int = true);

  // LEVEL_TO_ARG[name](magnitude): the op's arguments, with `negate` the
  // outcome of _randomly_negate for the ops that draw a sign.
  std::vector<double> level_args(double magnitude, bool negate) const;
  // NAME_TO_OP[name](img, *args) with the fill of the hparams and `resample`
  // for geometric ops. GaussianBlurRand's radius draw comes from `rng`.
  Image apply_args(const Image& image, const std::vector<double>& args, Interpolation resample, Rng& rng) const;
  // AugmentOp.__call__: the probability test, magnitude noise and clipping,
  // the sign, the resampling choice, then the op.
  void apply(Image& image, Rng& rng) const;

  const std::string& name() const { return name_; }
  double prob() const { return prob_; }
  double magnitude() const { return magnitude_; }
  const AugmentHparams& hparams() const { return hparams_; }
  // Whether the op draws a random sign (_randomly_negate).
  bool signed_level() const;
  // Whether the op resamples (takes fill and resample).
  bool geometric() const;
  // timm's repr: "AugmentOp(name=Rotate, p=0.5, m=9, mstd=0.5)".
  std::string repr() const;

 private:
  std::string name_;
  double prob_;
  double magnitude_;
  bool magnitude_is_int_;
  AugmentHparams hparams_;
  int kind_;
};

// The op names of timm's LEVEL_TO_ARG, in its order.
const std::vector<std::string>& augment_op_names();

class RandAugment final : public ImageTransform {
 public:
  RandAugment(std::vector<AugmentOp> ops, int64_t num_layers, std::vector<double> choice_weights);
  // np.random.choice(ops, n, replace=weights is None, p=weights), then each op.
  void apply(Image& image, Rng& rng) const override;
  std::string repr() const override;
  const std::vector<AugmentOp>& ops() const { return ops_; }
  int64_t num_layers() const { return num_layers_; }
  const std::vector<double>& choice_weights() const { return choice_weights_; }

 private:
  std::vector<AugmentOp> ops_;
  int64_t num_layers_;
  std::vector<double> choice_weights_;  // empty: uniform, with replacement
};

class AutoAugment final : public ImageTransform {
 public:
  explicit AutoAugment(std::vector<std::vector<AugmentOp>> policy);
  // random.choice(policy), then each op of the sub-policy.
  void apply(Image& image, Rng& rng) const override;
  std::string repr() const override;
  const std::vector<std::vector<AugmentOp>>& policy() const { return policy_; }

 private:
  std::vector<std::vector<AugmentOp>> policy_;
};

class AugMixAugment final : public ImageTransform {
 public:
  AugMixAugment(std::vector<AugmentOp> ops, double alpha, int64_t width, int64_t depth, bool blended);
  // Dirichlet mixing weights and a Beta blend factor (float32, as timm),
  // `width` chains of `depth` (or 1-3) random ops, mixed and blended.
  void apply(Image& image, Rng& rng) const override;
  std::string repr() const override;
  const std::vector<AugmentOp>& ops() const { return ops_; }
  double alpha() const { return alpha_; }
  int64_t width() const { return width_; }
  int64_t depth() const { return depth_; }
  bool blended() const { return blended_; }

 private:
  std::vector<AugmentOp> ops_;
  double alpha_;
  int64_t width_, depth_;
  bool blended_;
};

// AugMixAugment._apply_basic's mix: sum of weight * chain in float32,
// clipped, truncated to uint8, then Image.blend(image, mixed, m).
Image augmix_mix(const Image& image, const std::vector<Image>& chains, const std::vector<float>& weights, float m);
// _apply_blended: Image.blend(acc, chain_i, w_i) with timm's blended weights.
Image augmix_blend(const Image& image, const std::vector<Image>& chains, const std::vector<float>& weights, float m);

// timm's parsers. A bad config string throws UsageError naming the section;
// every number is bounded (n <= 100 ops, w and d <= 16, ...: auto_augment.cpp)
// where timm's int() and float() are not, so no string can hang a run.
// rand_augment_transform: "rand-m9-n2-mstd0.5-mmax10-inc1-p0.5-t<set>".
std::shared_ptr<RandAugment> rand_augment_transform(std::string_view config, AugmentHparams hparams);
// auto_augment_transform: "original|originalr|v0|v0r|3a[-mstd<f>]".
std::shared_ptr<AutoAugment> auto_augment_transform(std::string_view config, AugmentHparams hparams);
// augment_and_mix_transform: "augmix-m3-w3-d0-a1-b0-mstd<f>" (d0: random depth 1-3).
std::shared_ptr<AugMixAugment> augment_and_mix_transform(std::string_view config, AugmentHparams hparams);
// transforms_factory's choice by prefix ("rand", "augmix", else a policy),
// with hparams from `args`.
std::shared_ptr<ImageTransform> auto_augment_from_args(const TransformArgs& args);

}  // namespace timm::autoaugment
