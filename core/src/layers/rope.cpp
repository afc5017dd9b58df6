#include "timm/layers/rope.hpp"

#include <cmath>
#include <numbers>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "timm/base/error.hpp"

namespace timm::layers {
namespace {

void check_grid(const GridShape& shape, const char* what) {
  if (shape[0] < 1 || shape[1] < 1) {
    throw UsageError(std::string("RotaryEmbeddingCat: ") + what + " must be positive, got " + std::to_string(shape[0]) +
                     "x" + std::to_string(shape[1]));
  }
}

// timm's _rope_layout: per-band values (N, B) to the (N, 2 * B) layout
// apply_rot_embed_cat expects.
at::Tensor rope_layout(const at::Tensor& x, bool rotate_half) {
  return rotate_half ? at::cat({x, x}, -1) : x.repeat_interleave(2, -1);
}

}  // namespace

at::Tensor rope_freq_bands(int64_t num_bands, double temperature) {
  // As timm: float32 exponents, temperature ** exp in float32, then its reciprocal.
  const at::Tensor exponent = at::arange(0, num_bands, 1, at::kLong).to(at::kFloat) / num_bands;
  return at::reciprocal(at::pow(temperature, exponent));
}

at::Tensor rope_pixel_freq_bands(int64_t num_bands, double max_freq, bool linear_bands) {
  const at::Tensor bands = linear_bands ? at::linspace(1.0, max_freq / 2, num_bands, at::kFloat)
                                        : at::pow(2, at::linspace(0.0, std::log2(max_freq) - 1, num_bands, at::kFloat));
  return bands * std::numbers::pi;
}

std::pair<at::Tensor, at::Tensor> build_rotary_pos_embed(const GridShape& feat_shape, const at::Tensor& bands,
                                                         const RotaryEmbeddingCatOptions& options) {
  GridShape shape = feat_shape;
  std::optional<GridShape> ref = options.ref_feat_shape();
  const bool xy = options.grid_indexing() == "xy";
  // timm's _build_grid: 'xy' swaps the axes of both shapes before the meshgrid.
  if (xy) {
    std::swap(shape[0], shape[1]);
    if (ref) std::swap((*ref)[0], (*ref)[1]);
  }
  const auto float_options = at::TensorOptions().dtype(at::kFloat).device(bands.device());
  std::vector<at::Tensor> axes;
  for (size_t i = 0; i < 2; ++i) {
    at::Tensor t = options.in_pixels()
                       ? at::linspace(-1.0, 1.0, shape[i], float_options)
                       : at::arange(shape[i], float_options.dtype(at::kLong)).to(at::kFloat) + options.grid_offset();
    // EVA's rescaling to the reference (pretraining) grid, in timm's order of operations.
    if (ref) t = t / shape[i] * (*ref)[i];
    axes.push_back(t);
  }
  const at::Tensor grid = at::stack(at::meshgrid(axes, xy ? "xy" : "ij"), -1);  // (H, W, 2)
  const at::Tensor pos = grid.unsqueeze(-1) * bands;                            // (H, W, 2, bands)
  const at::Tensor sin = pos.sin().flatten(-2).flatten(0, -2);
  const at::Tensor cos = pos.cos().flatten(-2).flatten(0, -2);
  return {rope_layout(sin, options.rotate_half()), rope_layout(cos, options.rotate_half())};
}

at::Tensor apply_rot_embed_cat(const at::Tensor& x, const at::Tensor& emb, bool half) {
  const auto sin_cos = emb.chunk(2, -1);
  at::Tensor rotated;
  if (half) {
    const auto halves = x.chunk(2, -1);
    rotated = at::cat({-halves[1], halves[0]}, -1);
  } else {
    // timm's rot: [x0, x1, x2, x3, ...] -> [-x1, x0, -x3, x2, ...]
    rotated = at::stack({-x.slice(-1, 1, std::nullopt, 2), x.slice(-1, 0, std::nullopt, 2)}, -1).reshape(x.sizes());
  }
  return (x * sin_cos[1] + rotated * sin_cos[0]).to(x.scalar_type());
}

RotaryEmbeddingCatImpl::RotaryEmbeddingCatImpl(const RotaryEmbeddingCatOptions& options_) : options(options_) {
  if (options.dim() < 4 || options.dim() % 4 != 0) {
    throw UsageError("RotaryEmbeddingCat: dim must be a positive multiple of 4 (dim / 4 bands per axis), got " +
                     std::to_string(options.dim()));
  }
  if (options.grid_indexing() != "ij" && options.grid_indexing() != "xy") {
    throw UsageError("RotaryEmbeddingCat: grid_indexing " + in_quotes(options.grid_indexing()) +
                     " is not supported (expected 'ij' or 'xy')");
  }
  if (options.in_pixels() && options.max_res() < 2) {
    throw UsageError("RotaryEmbeddingCat: max_res must be >= 2, got " + std::to_string(options.max_res()));
  }
  if (options.feat_shape()) check_grid(*options.feat_shape(), "feat_shape");
  if (options.ref_feat_shape()) check_grid(*options.ref_feat_shape(), "ref_feat_shape");
  reset();
}

void RotaryEmbeddingCatImpl::reset() {
  const int64_t num_bands = options.dim() / 4;
  bands = options.in_pixels()
              ? rope_pixel_freq_bands(num_bands, static_cast<double>(options.max_res()), options.linear_bands())
              : rope_freq_bands(num_bands, options.temperature());
  pos_embed_ = at::Tensor();
  converted_ = at::Tensor();
  if (options.feat_shape()) {
    auto [sin, cos] = build_rotary_pos_embed(*options.feat_shape(), bands, options);
    pos_embed_ = at::cat({sin, cos}, -1);
  }
}

void RotaryEmbeddingCatImpl::pretty_print(std::ostream& stream) const {
  stream << "timm::layers::RotaryEmbeddingCat(dim=" << options.dim() << (options.in_pixels() ? ", in_pixels" : "");
  if (options.feat_shape())
    stream << ", feat_shape=" << (*options.feat_shape())[0] << "x" << (*options.feat_shape())[1];
  if (options.ref_feat_shape()) {
    stream << ", ref_feat_shape=" << (*options.ref_feat_shape())[0] << "x" << (*options.ref_feat_shape())[1];
  }
  stream << ")";
}

at::Tensor RotaryEmbeddingCatImpl::get_embed(const at::TensorOptions& tensor_options) {
  if (!pos_embed_.defined()) {
    throw Error("RotaryEmbeddingCat: get_embed() needs a feat_shape (use build_embed for a given grid)");
  }
  if (!converted_.defined() || converted_.device() != tensor_options.device() ||
      converted_.dtype() != tensor_options.dtype()) {
    converted_ = pos_embed_.to(tensor_options.device(), tensor_options.dtype().toScalarType());
  }
  return converted_;
}

at::Tensor RotaryEmbeddingCatImpl::build_embed(const GridShape& shape, const c10::Device& device) const {
  check_grid(shape, "grid");
  auto [sin, cos] = build_rotary_pos_embed(shape, bands.to(device), options);
  return at::cat({sin, cos}, -1);
}

}  // namespace timm::layers
