#include "timm/layers/pos_embed.hpp"

#include <cmath>
#include <vector>

#include "timm/base/error.hpp"

namespace timm::layers {

at::Tensor interpolate_grid(const at::Tensor& grid, std::array<int64_t, 2> size, const std::string& interpolation,
                            bool align_corners, bool antialias) {
  const std::vector<int64_t> output_size = {size[0], size[1]};
  if (interpolation == "bicubic") {
    return antialias ? at::_upsample_bicubic2d_aa(grid, output_size, align_corners, std::nullopt, std::nullopt)
                     : at::upsample_bicubic2d(grid, output_size, align_corners, std::nullopt, std::nullopt);
  }
  if (interpolation == "bilinear") {
    return antialias ? at::_upsample_bilinear2d_aa(grid, output_size, align_corners, std::nullopt, std::nullopt)
                     : at::upsample_bilinear2d(grid, output_size, align_corners, std::nullopt, std::nullopt);
  }
  throw UsageError("interpolation " + in_quotes(interpolation) + ": expected 'bicubic' or 'bilinear'");
}

at::Tensor resample_abs_pos_embed(const at::Tensor& posemb, std::array<int64_t, 2> new_size,
                                  std::optional<std::array<int64_t, 2>> old_size, int64_t num_prefix_tokens,
                                  const std::string& interpolation, bool antialias) {
  if (posemb.dim() != 3 || posemb.size(0) != 1) {
    throw UsageError("resample_abs_pos_embed: expected a (1, tokens, dim) embedding, got shape " +
                     std::string(c10::str(posemb.sizes())));
  }
  const int64_t num_pos_tokens = posemb.size(1);
  if (num_prefix_tokens < 0 || num_prefix_tokens > num_pos_tokens || new_size[0] < 1 || new_size[1] < 1) {
    throw UsageError("resample_abs_pos_embed: num_prefix_tokens " + std::to_string(num_prefix_tokens) +
                     " and new size " + std::to_string(new_size[0]) + "x" + std::to_string(new_size[1]) +
                     " do not fit an embedding of " + std::to_string(num_pos_tokens) + " tokens");
  }
  const int64_t num_new_tokens = new_size[0] * new_size[1] + num_prefix_tokens;
  if (num_new_tokens == num_pos_tokens) {
    if (old_size && (*old_size)[0] == new_size[0] && (*old_size)[1] == new_size[1]) return posemb;
    if (!old_size && new_size[0] == new_size[1]) return posemb;
  }
  if (!old_size) {
    // timm: int(math.sqrt(n)), a square grid.
    const auto hw = static_cast<int64_t>(std::sqrt(static_cast<double>(num_pos_tokens - num_prefix_tokens)));
    old_size = std::array<int64_t, 2>{hw, hw};
  }
  const auto [old_h, old_w] = *old_size;
  if (old_h < 1 || old_w < 1 || old_h * old_w != num_pos_tokens - num_prefix_tokens) {
    throw UsageError("resample_abs_pos_embed: a " + std::to_string(old_h) + "x" + std::to_string(old_w) +
                     " grid does not match the embedding's " + std::to_string(num_pos_tokens - num_prefix_tokens) +
                     " grid tokens");
  }
  const at::Tensor prefix = posemb.slice(1, 0, num_prefix_tokens);
  const int64_t embed_dim = posemb.size(2);
  // F.interpolate needs float32; the grid is (1, C, H, W) for it.
  const at::Tensor grid =
      posemb.slice(1, num_prefix_tokens).to(at::kFloat).reshape({1, old_h, old_w, -1}).permute({0, 3, 1, 2});
  at::Tensor resized = interpolate_grid(grid, new_size, interpolation, /*align_corners=*/false, antialias);
  resized = resized.permute({0, 2, 3, 1}).reshape({1, -1, embed_dim}).to(posemb.scalar_type());
  return num_prefix_tokens > 0 ? at::cat({prefix, resized}, 1) : resized;
}

}  // namespace timm::layers
