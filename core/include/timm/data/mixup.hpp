// Mixup and CutMix with timm's semantics (timm/data/mixup.py `Mixup`): applied
// per batch after the loader, on the float (N, C, H, W) batch on the training
// device, returning the mixed soft targets (label smoothing included) that a
// soft-target cross-entropy or BCE loss takes.
//
// All randomness goes through MixupRandom, in the same order and with the
// same shapes as timm's numpy draws, so a test can replay timm's draws.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>

#include "timm/data/transform.hpp"

namespace timm {

// The random draws Mixup makes, one scalar at a time. An array draw of numpy
// (np.random.rand(n)) is n calls in index order.
class MixupRandom {
 public:
  virtual ~MixupRandom() = default;
  // np.random.rand(): uniform in [0, 1).
  virtual double rand() = 0;
  // np.random.beta(alpha, alpha).
  virtual double beta(double alpha) = 0;
  // np.random.randint(lo, hi): uniform integer in [lo, hi), hi exclusive.
  virtual int64_t randint(int64_t lo, int64_t hi) = 0;
};

// Draws from an Rng (the beta as the ratio of two gamma draws). Same
// distributions as numpy's, not the same numbers.
class RngMixupRandom : public MixupRandom {
 public:
  explicit RngMixupRandom(Rng& rng) : rng_(rng) {}
  double rand() override;
  double beta(double alpha) override;
  int64_t randint(int64_t lo, int64_t hi) override;

 private:
  Rng& rng_;
};

// A CutMix box: rows [yl, yh) and columns [xl, xh).
struct CutmixBox {
  int64_t yl = 0;
  int64_t yh = 0;
  int64_t xl = 0;
  int64_t xh = 0;
};

// timm's rand_bbox: a box of side sqrt(1 - lam) times the image's, centred
// at a random point, clipped by the image.
// The float overload computes the side in float32, as timm does when lam is
// an np.float32 (pair and elem modes).
CutmixBox rand_bbox(int64_t img_h, int64_t img_w, double lam, MixupRandom& random);
CutmixBox rand_bbox(int64_t img_h, int64_t img_w, float lam, MixupRandom& random);

// timm's rand_bbox_minmax: each side a random fraction in [min, max) of the
// image's, placed at random inside it.
CutmixBox rand_bbox_minmax(int64_t img_h, int64_t img_w, std::pair<double, double> minmax, MixupRandom& random);

// timm's cutmix_bbox_and_lam: the box and lam, corrected to 1 - box area /
// image area when correct_lam or minmax is set.
// The float overload as rand_bbox's.
std::pair<CutmixBox, double> cutmix_bbox_and_lam(int64_t img_h, int64_t img_w, double lam,
                                                 const std::optional<std::pair<double, double>>& minmax,
                                                 bool correct_lam, MixupRandom& random);
std::pair<CutmixBox, double> cutmix_bbox_and_lam(int64_t img_h, int64_t img_w, float lam,
                                                 const std::optional<std::pair<double, double>>& minmax,
                                                 bool correct_lam, MixupRandom& random);

// timm's mixup_target: one-hot with off = smoothing / num_classes and
// on = 1 - smoothing + off, mixed with its batch-reversed copy:
// y * lam + y.flip(0) * (1 - lam). `lam` is a scalar or an (N, 1) tensor.
at::Tensor mixup_target(const at::Tensor& target, int64_t num_classes, double lam, double smoothing);
at::Tensor mixup_target(const at::Tensor& target, int64_t num_classes, const at::Tensor& lam, double smoothing);

struct MixupOptions {
  double mixup_alpha = 1.0;                                  // --mixup
  double cutmix_alpha = 0.0;                                 // --cutmix
  std::optional<std::pair<double, double>> cutmix_minmax{};  // --cutmix-minmax
  double prob = 1.0;                                         // --mixup-prob
  double switch_prob = 0.5;                                  // --mixup-switch-prob
  std::string mode = "batch";                                // --mixup-mode: batch | pair | elem
  bool correct_lam = true;
  double label_smoothing = 0.1;  // --smoothing
  int64_t num_classes = 1000;
};

// What one call returns: the soft targets (N, num_classes) float on the
// targets' device, and the lam used per sample (N values; all equal in
// batch mode).
struct MixupResult {
  at::Tensor targets;
  std::vector<double> lam;
};

// The draws of one batch before any box: lam and use_cutmix per mixing unit
// (one in batch mode, N / 2 pairs in pair mode, N elements in elem mode).
struct MixupParams {
  std::vector<double> lam;
  std::vector<bool> use_cutmix;
};

class Mixup {
 public:
  // Throws UsageError on an unknown mode, no active mix, a minmax that is
  // not 0 <= min < max <= 1, or num_classes < 1.
  explicit Mixup(MixupOptions options);

  // Mixes `images` (float (N, C, H, W), N even) in place and returns the
  // soft targets of `targets` (int64 class indices (N)).
  MixupResult apply(at::Tensor& images, const at::Tensor& targets, Rng& rng) const;
  MixupResult apply(at::Tensor& images, const at::Tensor& targets, MixupRandom& random) const;

  // timm's _params_per_batch (count 0) / _params_per_elem(count).
  MixupParams draw_params(int64_t count, MixupRandom& random) const;

  // --mixup-off-epoch: timm's train loop sets mixup_enabled = False from
  // that epoch on; then apply() returns the smoothed one-hot targets only.
  void set_enabled(bool enabled) { enabled_ = enabled; }
  bool enabled() const { return enabled_; }
  const MixupOptions& options() const { return options_; }

 private:
  std::vector<double> mix_batch(at::Tensor& images, MixupRandom& random) const;
  std::vector<double> mix_pair(at::Tensor& images, MixupRandom& random) const;
  std::vector<double> mix_elem(at::Tensor& images, MixupRandom& random) const;

  MixupOptions options_;
  bool enabled_ = true;
};

// timm's mixup_active: --mixup > 0 or --cutmix > 0 or --cutmix-minmax set.
bool mixup_active(const MixupOptions& options);

}  // namespace timm
