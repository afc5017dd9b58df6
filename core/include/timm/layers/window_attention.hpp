// Window attention of the Swin Transformer, as timm's models/swin_transformer.py:
// window_partition / window_reverse over channels-last (B, H, W, C) maps, the
// pair-wise relative position index of a window, the attention mask of
// shifted windows, and WindowAttention (W-MSA / SW-MSA: multi-head attention
// inside each window plus a learnt relative position bias).
//
// State_dict keys of WindowAttention: relative_position_bias_table, qkv.*,
// proj.*, as timm's. timm's relative_position_index is a non-persistent
// buffer (not in its state_dict); here it is a plain member, computed at
// construction on the CPU and moved to the table's device on first use, so
// state_dicts stay equal. The same holds for a block's attention mask.
#pragma once

#include <array>
#include <cstdint>

#include <ATen/ATen.h>
#include <torch/arg.h>
#include <torch/nn/cloneable.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/pimpl.h>

#include "timm/layers/linear.hpp"

namespace timm::layers {

// A window's (height, width), in tokens.
using WindowSize = std::array<int64_t, 2>;

// timm's window_partition: (B, H, W, C), H and W multiples of the window, to
// (B * num_windows, win_h, win_w, C), windows in row-major order per image.
at::Tensor window_partition(const at::Tensor& x, WindowSize window);

// timm's window_reverse, the inverse of window_partition: (B * num_windows,
// win_h, win_w, C) to (B, height, width, C).
at::Tensor window_reverse(const at::Tensor& windows, WindowSize window, int64_t height, int64_t width);

// timm's get_relative_position_index: (win_h * win_w, win_h * win_w) int64,
// entry (i, j) the row of the (2 * win_h - 1) * (2 * win_w - 1) bias table
// holding token i's bias towards token j (their offset, shifted to >= 0).
at::Tensor relative_position_index(int64_t win_h, int64_t win_w);

// timm's SwinTransformerBlock.get_attn_mask for a height x width map
// (rounded up to multiples of the window, as the block pads) cyclically
// shifted by `shift`: (num_windows, win_h * win_w, win_h * win_w), 0 between
// tokens of the same region before the shift and -100 between tokens of
// different ones, in `options`' dtype and device. Undefined when the shift is
// zero (no mask).
at::Tensor shifted_window_attn_mask(int64_t height, int64_t width, WindowSize window, WindowSize shift,
                                    const at::TensorOptions& options = {});

struct WindowAttentionOptions {
  WindowAttentionOptions(int64_t dim, int64_t num_heads, WindowSize window_size)
      : dim_(dim), num_heads_(num_heads), window_size_(window_size) {}
  TORCH_ARG(int64_t, dim);
  TORCH_ARG(int64_t, num_heads);
  TORCH_ARG(WindowSize, window_size);
  TORCH_ARG(int64_t, head_dim) = 0;  // 0: dim / num_heads
  TORCH_ARG(bool, qkv_bias) = true;
  TORCH_ARG(double, attn_drop) = 0.0;  // dropout on the attention weights (training only)
  TORCH_ARG(double, proj_drop) = 0.0;
};

// timm's WindowAttention, on its default (non-fused) path: qkv, q scaled by
// head_dim^-0.5, q k^T plus the relative position bias plus the mask,
// softmax, attn_drop, times v, proj, proj_drop. relative_position_bias_table
// ((2 * win_h - 1) * (2 * win_w - 1), num_heads) is trunc_normal(.02) at
// construction, as timm's reset_parameters.
class WindowAttentionImpl : public torch::nn::Cloneable<WindowAttentionImpl> {
 public:
  // Throws UsageError for a non-positive size, a num_heads that does not
  // divide dim (without head_dim) or a dropout outside [0, 1].
  explicit WindowAttentionImpl(const WindowAttentionOptions& options);
  void reset() override;
  void pretty_print(std::ostream& stream) const override;
  // x: (B * num_windows, win_h * win_w, dim); mask: undefined or
  // (num_windows, N, N) added to the logits of every image's windows
  // (shifted_window_attn_mask). Returns (B * num_windows, N, dim).
  at::Tensor forward(const at::Tensor& x, const at::Tensor& mask = {});
  // timm's _get_rel_pos_bias: the table gathered to (1, num_heads, N, N).
  at::Tensor relative_position_bias();

  int64_t head_dim() const { return options.head_dim() > 0 ? options.head_dim() : options.dim() / options.num_heads(); }
  int64_t window_area() const { return options.window_size()[0] * options.window_size()[1]; }

  WindowAttentionOptions options;
  at::Tensor relative_position_bias_table;
  at::Tensor relative_position_index;  // not registered: timm's non-persistent buffer
  layers::Linear qkv{nullptr};
  torch::nn::Dropout attn_drop{nullptr};
  layers::Linear proj{nullptr};
  torch::nn::Dropout proj_drop{nullptr};
};
TORCH_MODULE(WindowAttention);

}  // namespace timm::layers
