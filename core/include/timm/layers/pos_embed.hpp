// Absolute position embedding resampling, as timm's layers/pos_embed.py
// resample_abs_pos_embed: a (1, prefix + H*W, C) embedding whose grid part is
// interpolated to a new grid size (ViTs at another image size, checkpoints
// trained at another resolution); the `num_prefix_tokens` leading entries
// (class, register tokens) are kept as they are.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>

#include <ATen/ATen.h>

namespace timm::layers {

// F.interpolate(grid, size, mode=interpolation, align_corners, antialias)
// of a float (N, C, H, W) grid, for "bicubic" or "bilinear" (the modes timm
// resamples position embeddings with). Throws UsageError on another mode.
at::Tensor interpolate_grid(const at::Tensor& grid, std::array<int64_t, 2> size, const std::string& interpolation,
                            bool align_corners, bool antialias);

// `posemb` (1, num_prefix_tokens + old_h * old_w, C) resampled to
// (1, num_prefix_tokens + new_h * new_w, C): the grid part, read as
// old_size = {h, w} (a square from its length when unset), interpolated in
// float32 with `interpolation` ("bicubic" or "bilinear", align_corners
// false, antialiased when `antialias`), then cast
// back to posemb's dtype. Returned unchanged (the same tensor) when the token
// count matches and the grid is the old one (or, without old_size, square), as
// timm. Throws UsageError on an unknown interpolation, a grid that does not
// fit the embedding or a non-positive size.
at::Tensor resample_abs_pos_embed(const at::Tensor& posemb, std::array<int64_t, 2> new_size,
                                  std::optional<std::array<int64_t, 2>> old_size = std::nullopt,
                                  int64_t num_prefix_tokens = 1, const std::string& interpolation = "bicubic",
                                  bool antialias = true);

}  // namespace timm::layers
