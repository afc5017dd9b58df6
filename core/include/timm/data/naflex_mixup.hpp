// timm's NaFlexMixup (timm/data/naflex_mixup.py): Mixup and CutMix of a NaFlex
// batch's images, which differ in size, before they are cut into patches.
// Images are paired by nearest aspect ratio (sorted, then shuffled within
// windows of local_shuffle) and each mixes only the central overlap it shares
// with its partner; the soft targets weigh each pair by the pixels it took.
//
//   timm::NaFlexMixup mixup({.num_classes = 10, .mixup_alpha = 0.8, .cutmix_alpha = 1.0});
//   at::Tensor targets = mixup.apply(images, labels, epoch, rng);  // (B, 10) float
#pragma once

#include <cstdint>
#include <vector>

#include <ATen/core/Tensor.h>

#include "timm/data/image.hpp"
#include "timm/data/transform.hpp"

namespace timm {

struct NaFlexMixupOptions {
  int64_t num_classes = 1000;
  double mixup_alpha = 0.8;   // --mixup; 0 turns Mixup off
  double cutmix_alpha = 1.0;  // --cutmix; 0 turns CutMix off
  double switch_prob = 0.5;   // --mixup-switch-prob: CutMix's share when both are on
  double prob = 1.0;          // --mixup-prob: the chance a batch is mixed
  int64_t local_shuffle = 4;  // the window the aspect-sorted order is shuffled in
  double label_smoothing = 0.0;
  int64_t mixup_off_epoch = 0;  // --mixup-off-epoch: no mixing from it on; 0: never off
};

// The draws NaFlexMixup makes, in timm's order: Python's random.random(),
// random.randint(lo, hi) (both inclusive) and random.shuffle's
// _randbelow(n), and torch's rand(()) and Beta(alpha, alpha).sample().
class NaFlexMixDraws {
 public:
  virtual ~NaFlexMixDraws() = default;
  virtual double random() = 0;
  virtual int64_t randint(int64_t lo, int64_t hi) = 0;
  virtual int64_t randbelow(int64_t n) = 0;
  virtual double torch_rand() = 0;
  virtual double beta(double alpha) = 0;
};

// The draws from an Rng: timm's distributions, not its numbers.
class RngNaFlexMixDraws final : public NaFlexMixDraws {
 public:
  explicit RngNaFlexMixDraws(Rng& rng) : rng_(rng) {}
  double random() override { return rng_.uniform(); }
  int64_t randint(int64_t lo, int64_t hi) override { return rng_.randint(lo, hi); }
  int64_t randbelow(int64_t n) override { return rng_.randint(0, n - 1); }
  double torch_rand() override { return rng_.uniform(); }
  double beta(double alpha) override;

 private:
  Rng& rng_;
};

class NaFlexMixup {
 public:
  // Throws UsageError naming the flag for both alphas 0 (or one negative),
  // a probability outside [0, 1], num_classes < 1 or local_shuffle < 0.
  explicit NaFlexMixup(NaFlexMixupOptions options);

  // timm's __call__ in `epoch`: mixes `images` (uint8 HWC, each its own
  // size, same channels) in place and returns their soft targets, float32
  // (B, num_classes), from `targets` (int64 class indices (B)). Unmixed
  // (fewer than 2 images, past mixup_off_epoch, or the batch's prob draw):
  // the smoothed one-hot targets.
  at::Tensor apply(std::vector<Image>& images, const at::Tensor& targets, int64_t epoch, NaFlexMixDraws& draws) const;
  at::Tensor apply(std::vector<Image>& images, const at::Tensor& targets, int64_t epoch, Rng& rng) const;

  const NaFlexMixupOptions& options() const { return options_; }

 private:
  // timm's mix_batch_variable_size: each image's share of its own pixels
  // (1 for the odd one out) and its partner (-1: none).
  struct Mix {
    std::vector<double> lam;
    std::vector<int64_t> partner;
  };
  Mix mix_images(std::vector<Image>& images, NaFlexMixDraws& draws) const;
  std::vector<std::size_t> pair_order(const std::vector<Image>& images, NaFlexMixDraws& draws) const;

  NaFlexMixupOptions options_;
};

}  // namespace timm
