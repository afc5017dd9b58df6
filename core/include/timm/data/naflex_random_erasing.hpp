// timm's PatchRandomErasing (timm/data/naflex_random_erasing.py): random
// erasing of a NaFlex batch's normalised patches, whole patches at a time,
// as timm's NaFlexPrefetchLoader applies it for --reprob with
// --naflex-loader.
//
//   timm::PatchRandomErasing erasing({.erasing = {.probability = 0.25}});
//   erasing.apply(patches, patch_coord, patch_valid, /*channels=*/3, rng);
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "timm/data/random_erasing.hpp"
#include "timm/data/transform.hpp"

namespace timm {

struct PatchRandomErasingOptions {
  // timm's erase_prob, min/max_area, min/max_aspect, mode (--remode),
  // min/max_count (--recount) and num_splits, as RandomErasing's.
  RandomErasingOptions erasing;
  // "region": rectangles of the sample's patch grid; "patch": patches picked
  // at random among the valid ones (timm's spatial_mode).
  std::string spatial_mode = "region";
};

class PatchRandomErasing {
 public:
  // A mode other than const, rand or pixel, a spatial mode other than region
  // or patch, or bounds out of order throw UsageError.
  explicit PatchRandomErasing(PatchRandomErasingOptions options);

  // One sample's erased patches, as timm's _erase_region / _erase_patches
  // draw them: each set holds the indices into the sequence that one erasure
  // fills with one value (const, rand) or per-pixel noise (pixel).
  // `patch_coord` (N, 2) int64 (y, x) and `patch_valid` (N) bool, on the CPU;
  // padding is never erased.
  std::vector<std::vector<int64_t>> plan(const at::Tensor& patch_coord, const at::Tensor& patch_valid,
                                         PatchEraseDraws& draws) const;

  // Erases, in place, samples [start, B) of normalised float `patches`
  // (B, N, P*P*C), channels last (start = B / num_splits when num_splits > 1):
  // const writes 0, rand one normal value per channel for each erasure,
  // pixel a normal value per pixel. `patch_coord` and `patch_valid` (B, N, 2)
  // and (B, N) may be on the CPU or with the patches.
  void apply(at::Tensor& patches, const at::Tensor& patch_coord, const at::Tensor& patch_valid, int64_t channels,
             Rng& rng) const;

  // timm's repr: "PatchRandomErasing(p=0.25, mode=const, spatial=region,
  // area=(0.02, 0.3333333333333333)), count=(1, 1))".
  std::string repr() const;

 private:
  std::vector<std::vector<int64_t>> plan_region(const at::Tensor& coord, const at::Tensor& valid,
                                                EraseDraws& draws) const;
  std::vector<std::vector<int64_t>> plan_patches(const at::Tensor& valid, PatchEraseDraws& draws) const;

  PatchRandomErasingOptions options_;
  double log_aspect_lo_, log_aspect_hi_;
};

}  // namespace timm
