// Rotary position embeddings (RoPE) over a 2-D token grid, as timm's
// layers/pos_embed_sincos.py, which EVA-02 and timm's RoPE ViTs use:
// - the frequency bands: rope_freq_bands (timm's freq_bands with step 1,
//   temperature^-(i / num_bands)) or rope_pixel_freq_bands (pixel_freq_bands);
// - build_rotary_pos_embed: per grid position the sin and cos of each
//   coordinate (row, column) times each band, the two axes concatenated and
//   every value repeated for a channel pair (interleaved) or the halves
//   repeated (rotate_half), as timm's;
// - apply_rot_embed_cat: q or k rotated by a [sin | cos] table, channel pairs
//   (x0, x1) -> (x0 cos - x1 sin, x1 cos + x0 sin), as timm's apply_rot_embed_cat;
// - RotaryEmbeddingCat: timm's module of that name (rope_type 'cat'), the
//   table (N, 2 * dim) = [sin | cos] for a fixed grid (cached) or built per call
//   for the grid of the input (dynamic image sizes).
// Everything here is computed in float32 as timm's buffers are. timm's
// module holds only non-persistent buffers (bands, pos_embed): it adds no
// state_dict keys, and here the tables are plain members, not buffers.
// Not here: timm's coordinate augmentation (shift / jitter / rescale_coords),
// the 'centered' grid and the mixed, DINOv3 and MRoPE variants.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include <ATen/ATen.h>
#include <torch/arg.h>
#include <torch/nn/cloneable.h>
#include <torch/nn/pimpl.h>

namespace timm::layers {

// A token grid's (height, width).
using GridShape = std::array<int64_t, 2>;

// timm's freq_bands(num_bands, temperature, step=1): 1 / temperature^(i / num_bands)
// for i in [0, num_bands), float32.
at::Tensor rope_freq_bands(int64_t num_bands, double temperature = 10000.0);

// timm's pixel_freq_bands(num_bands, max_freq, linear_bands): pi times
// linspace(1, max_freq / 2, num_bands), or with linear_bands false pi times
// 2^linspace(0, log2(max_freq) - 1, num_bands), float32.
at::Tensor rope_pixel_freq_bands(int64_t num_bands, double max_freq = 224.0, bool linear_bands = true);

struct RotaryEmbeddingCatOptions {
  /* implicit */ RotaryEmbeddingCatOptions(int64_t dim) : dim_(dim) {}
  // The channels rotated: the attention head's dim, a multiple of 4 (dim / 4
  // bands per axis, each used for two channels of each of the two axes).
  TORCH_ARG(int64_t, dim);
  TORCH_ARG(int64_t, max_res) = 224;  // pixel bands only
  TORCH_ARG(double, temperature) = 10000.0;
  // true: pixel bands over coordinates in [-1, 1] (timm's default); false:
  // temperature bands over integer indices (EVA-02's).
  TORCH_ARG(bool, in_pixels) = true;
  TORCH_ARG(bool, linear_bands) = false;  // pixel bands only
  // The grid of the cached table; unset: no cache, build_embed per grid.
  TORCH_ARG(std::optional<GridShape>, feat_shape) = std::nullopt;
  // EVA's fine-tune rescaling: positions scaled so that the grid spans this
  // (pretraining) grid, index * ref / size per axis.
  TORCH_ARG(std::optional<GridShape>, ref_feat_shape) = std::nullopt;
  TORCH_ARG(double, grid_offset) = 0.0;          // added to index coordinates
  TORCH_ARG(std::string, grid_indexing) = "ij";  // "ij" (row, column) or "xy" (column, row)
  TORCH_ARG(bool, rotate_half) = false;          // the half layout instead of interleaved pairs
};

// timm's build_rotary_pos_embed(feat_shape, bands, ...) with the options'
// grid settings: (sin, cos), each (H * W, 4 * bands.numel()) float32 on
// bands' device, positions in row-major order of the grid.
std::pair<at::Tensor, at::Tensor> build_rotary_pos_embed(const GridShape& feat_shape, const at::Tensor& bands,
                                                         const RotaryEmbeddingCatOptions& options);

// timm's apply_rot_embed_cat(x, emb, half): `emb` (..., N, 2 * D) is
// [sin | cos] for the last dimension D of `x` (..., N, D);
// x * cos + rot(x) * sin with rot the pair rotation (-x1, x0, -x3, x2, ...),
// or with `half` the half rotation (-x[D/2:], x[:D/2]); computed with the
// usual type promotion, returned in x's dtype.
at::Tensor apply_rot_embed_cat(const at::Tensor& x, const at::Tensor& emb, bool half = false);

class RotaryEmbeddingCatImpl : public torch::nn::Cloneable<RotaryEmbeddingCatImpl> {
 public:
  // Throws UsageError unless dim is a positive multiple of 4, the grids
  // positive and grid_indexing "ij" or "xy".
  explicit RotaryEmbeddingCatImpl(const RotaryEmbeddingCatOptions& options);
  void reset() override;
  void pretty_print(std::ostream& stream) const override;

  // The cached table (needs feat_shape): (H * W, 2 * dim) [sin | cos] in
  // `options`' dtype and device. timm's table is a buffer that follows
  // model.to(dtype / device): pass the options of the model's parameters.
  // The conversion is kept until other options are asked for.
  at::Tensor get_embed(const at::TensorOptions& options);
  // A table built for `shape` on `device`, float32 (timm's get_embed(shape),
  // which its dynamic-size models call per forward).
  at::Tensor build_embed(const GridShape& shape, const c10::Device& device) const;

  RotaryEmbeddingCatOptions options;
  at::Tensor bands;  // (dim / 4) float32, CPU: timm's non-persistent buffer, not registered

 private:
  at::Tensor pos_embed_;  // float32 CPU cache, undefined without feat_shape
  at::Tensor converted_;  // pos_embed_ in the options last asked for
};
TORCH_MODULE(RotaryEmbeddingCat);

}  // namespace timm::layers
