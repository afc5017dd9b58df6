// timm's RandomErasing (timm/data/random_erasing.py), applied per sample to
// the normalised float batch as timm's PrefetchLoader does.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "timm/data/transform.hpp"

namespace timm {

struct RandomErasingOptions {
  double probability = 0.5;
  double min_area = 0.02;
  double max_area = 1.0 / 3.0;
  double min_aspect = 0.3;
  std::optional<double> max_aspect;  // unset: 1 / min_aspect
  std::string mode = "const";        // const (zeros) | rand (normal per channel) | pixel (normal per pixel)
  int64_t min_count = 1;
  std::optional<int64_t> max_count;  // unset: min_count
  int64_t num_splits = 0;            // > 1: the first batch / num_splits samples stay clean
};

// One erased rectangle.
struct EraseRect {
  int64_t top, left, height, width;
};

// The random draws _erase makes, in Python's terms: random.random() and
// random.randint(lo, hi) (random.uniform(a, b) is a + (b - a) * random()).
class EraseDraws {
 public:
  virtual ~EraseDraws() = default;
  virtual double random() = 0;
  virtual int64_t randint(int64_t lo, int64_t hi) = 0;
};

// The draws of PatchRandomErasing (timm/data/naflex_random_erasing.hpp):
// EraseDraws' and torch.randperm(n), the patch mode's choice of patches.
class PatchEraseDraws : public EraseDraws {
 public:
  virtual std::vector<int64_t> randperm(int64_t n) = 0;
};

// The draws from an Rng: random() and randint() with Python's distributions
// (not its numbers), randperm from a CPU generator seeded by the Rng.
class RngEraseDraws final : public PatchEraseDraws {
 public:
  explicit RngEraseDraws(Rng& rng) : rng_(rng) {}
  double random() override { return rng_.uniform(); }
  int64_t randint(int64_t lo, int64_t hi) override { return rng_.randint(lo, hi); }
  std::vector<int64_t> randperm(int64_t n) override;

 private:
  Rng& rng_;
};

class RandomErasing {
 public:
  // A mode other than const, rand or pixel, or bounds out of order, throw UsageError.
  explicit RandomErasing(RandomErasingOptions options);

  // _erase's geometry for one (img_h x img_w) image: the probability test,
  // the count, then up to 10 attempts per rectangle at an area in
  // [min_area, max_area] * area / count and a log-uniform aspect.
  std::vector<EraseRect> plan(int64_t img_h, int64_t img_w, EraseDraws& draws) const;

  // Erases samples [start, N) of a float (N, C, H, W) batch, start =
  // N / num_splits when num_splits > 1: const writes 0, rand a normal value
  // per channel, pixel a normal value per pixel.
  void apply(at::Tensor& batch, Rng& rng) const;

  // timm's repr: "RandomErasing(p=0.25, mode=pixel, count=(1, 1))".
  std::string repr() const;
  const RandomErasingOptions& options() const { return options_; }

 private:
  RandomErasingOptions options_;
  double log_aspect_lo_, log_aspect_hi_;
};

}  // namespace timm
