// torchvision.utils' make_grid and save_image, for train.py's --save-images
// (debugging pictures of the input batches).
#pragma once

#include <cstdint>
#include <filesystem>

#include <ATen/core/Tensor.h>

namespace timm {

// torchvision's make_grid options (value_range None, scale_each False).
struct GridOptions {
  int64_t nrow = 8;        // images per row
  int64_t padding = 2;     // pixels between and around the images
  bool normalize = false;  // scale the whole grid by its min and max to [0, 1]
  double pad_value = 0.0;
};

// torchvision.utils.make_grid of a float (N, C, H, W) batch, a (C, H, W)
// image or an (H, W) one: 1-channel images repeated to 3 channels; with
// `normalize`, a copy clamped to [min, max] of the whole tensor, minus min,
// divided by max(max - min, 1e-5); a single image returned as itself
// (C, H, W); else the images in rows of min(nrow, N), each in a cell of
// (H + padding) x (W + padding), on a (C, rows * (H + padding) + padding,
// cols * (W + padding) + padding) grid filled with pad_value. Computed on
// the batch's device in torchvision's operations. Throws Error for another
// rank or an empty batch.
at::Tensor make_grid(const at::Tensor& images, const GridOptions& options = {});

// torchvision.utils.save_image: make_grid, then x * 255 + 0.5 clamped to
// [0, 255] and truncated to uint8, written by PIL's rules for the file's
// extension. Only JPEG (.jpg, .jpeg: PIL's quality 75, 4:2:0) here; a grid
// of other than 1 or 3 channels, or another extension, throws Error. The
// file is written atomically.
void save_image(const at::Tensor& images, const std::filesystem::path& path, const GridOptions& options = {});

}  // namespace timm
