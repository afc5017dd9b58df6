// The per-sample and per-batch pieces of timm's NaFlex input pipeline
// (timm/data/naflex_transforms.py, naflex_dataset.py, naflex_loader.py): the
// image size that fits a sequence length, an image cut into patches, patches
// padded into a batch, and the batch normalised as timm's prefetcher does.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <vector>

#include <ATen/ATen.h>

#include "timm/data/image.hpp"

namespace timm {

struct SeqImageSize {
  double ratio = 0.0;                 // the scale applied to the image
  std::array<int64_t, 2> size{0, 0};  // (height, width)
};

// timm's get_image_size_for_seq: the largest scale of `image_hw` (found by
// timm's bisection, to within 1e-5) whose patch grid has at most
// max_seq_len patches, each side rounded up to a multiple of the patch (with
// divisible_by_patch) and at least one patch; the scale capped at max_ratio.
// Throws UsageError for non-positive sizes and, as timm's ValueError, when no
// scale in (1e-5, 100) fits.
SeqImageSize image_size_for_seq(std::array<int64_t, 2> image_hw, std::array<int64_t, 2> patch_size, int64_t max_seq_len,
                                bool divisible_by_patch = true, std::optional<double> max_ratio = std::nullopt);

// One image as patches (timm's Patchify, channels last: each patch's pixels
// flat as (Ph, Pw, C)).
struct ImagePatches {
  at::Tensor patches;      // uint8 (N, Ph * Pw * C), N = its grid's rows * columns
  at::Tensor patch_coord;  // int64 (N, 2), each patch's (y, x), row-major
};

// timm's patchify_image: `image` zero-padded at the bottom and right to
// multiples of the patch, then cut into its grid. Throws UsageError for an
// empty image or a non-positive patch size.
ImagePatches patchify_image(const Image& image, std::array<int64_t, 2> patch_size);

// A NaFlex batch as timm's NaFlexCollator lays it out.
struct NaFlexBatch {
  at::Tensor patches;      // uint8 (B, seq_len, Ph * Pw * C), zero past each sample's patches
  at::Tensor patch_coord;  // int64 (B, seq_len, 2), (0, 0) past them
  at::Tensor patch_valid;  // bool (B, seq_len)
};

// timm's NaFlexCollator(seq_len): each sample's first seq_len patches (a
// longer one is cut, as timm's), the rest padding. Throws UsageError for no
// samples, seq_len < 1 or samples of different patch widths.
NaFlexBatch collate_patches(const std::vector<ImagePatches>& samples, int64_t seq_len);

// timm's NaFlexPrefetchLoader normalisation: (B, N, P*P*C) uint8 patches,
// channels last, to `dtype` as (x - 255 * mean) / (255 * std) per channel
// (padding patches too, as timm's). mean and std have one value per channel.
at::Tensor normalize_patches(const at::Tensor& patches, const std::vector<double>& mean, const std::vector<double>& std,
                             at::ScalarType dtype = at::kFloat);

// (B, N, P*P*C) patches laid out channels last, each patch's pixels flat as
// (Ph, Pw, C), relaid channels first, (C, Ph, Pw) (timm's Patchify with
// channels_last=False), contiguous. Throws UsageError when the last
// dimension is not a multiple of `channels`.
at::Tensor patches_channels_first(const at::Tensor& patches, int64_t channels);

}  // namespace timm
