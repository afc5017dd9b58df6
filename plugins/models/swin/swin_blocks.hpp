// The blocks of the swin plugin (swin.cpp builds the models from them):
// Swin v1's (timm/models/swin_transformer.py) and SwinV2's
// (timm/models/swin_transformer_v2.py) transformer blocks and patch merging,
// SwinV2's window attention, the stage both versions share and the pieces
// both blocks use (window clamping, the shifted-window partition around an
// attention). Module names are timm's, so state_dict keys equal timm's.
// Internal to this plugin.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <utility>

#include <ATen/ATen.h>
#include <torch/arg.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/container/any.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/pimpl.h>

#include "timm/layers/drop_path.hpp"
#include "timm/layers/linear.hpp"
#include "timm/layers/mlp.hpp"
#include "timm/layers/norm.hpp"
#include "timm/layers/window_attention.hpp"

namespace timm::swin {

namespace nn = torch::nn;
using layers::WindowSize;

// timm's Swin norm_layer (v1 and v2): torch.nn.LayerNorm.
inline layers::LayerNorm make_norm(int64_t dim) { return layers::LayerNorm(layers::torch_layer_norm_options(dim)); }

struct BlockArgs {
  int64_t dim = 0;
  int64_t num_heads = 0;
  std::array<int64_t, 2> resolution{};  // the block's input (H, W)
  WindowSize window{};                  // the stage's window before clamping
  // SwinV2's pretrained_window_size: the window its relative coordinates are
  // normalised by; {0, 0} uses the (clamped) window itself. Unused by v1.
  WindowSize pretrained_window{};
  bool shifted = false;  // odd blocks: shift by half a window
  bool always_partition = false;
  double mlp_ratio = 4.0;
  double drop_path = 0.0;
};

// timm's SwinTransformerBlock._calc_window_shift (v1 and v2 alike): unless
// always_partition, a window larger than the map shrinks to it, and a map
// that fits in one window is not shifted. Returns (window, shift).
std::pair<WindowSize, WindowSize> window_and_shift(const BlockArgs& a);

// The window layout of one block and timm's _attn around its attention:
// cyclic shift, pad to whole windows, attention per window (with the
// shifted-window mask), merge, crop, shift back. The mask is timm's
// non-persistent attn_mask buffer, a plain member here (out of the
// state_dict).
class ShiftedWindows {
 public:
  // (B * num_windows, window area, C) windows and the mask (undefined
  // without a shift) to the attention's output of the same shape.
  using Attention = std::function<at::Tensor(const at::Tensor& windows, const at::Tensor& mask)>;

  explicit ShiftedWindows(const BlockArgs& a);
  // x: (B, H, W, C), H and W the block's resolution. Returns (B, H, W, C).
  at::Tensor apply(const at::Tensor& x, const Attention& attention);
  const WindowSize& window() const { return window_; }

 private:
  const at::Tensor& mask_for(const at::Tensor& x);

  WindowSize window_{};
  WindowSize shift_{};
  at::Tensor attn_mask_;  // undefined without a shift
};

// timm's PatchMerging (v1 and v2) before its norm and reduction: each 2x2
// neighbourhood's channels concatenated, odd sizes padded by one:
// (B, H, W, C) to (B, ceil(H / 2), ceil(W / 2), 4 * C).
at::Tensor merge_patches(const at::Tensor& x);

// A residual branch through the block's DropPath, or as it is where the
// block has none (rate 0, timm's Identity).
inline at::Tensor drop_path_or_identity(const at::Tensor& y, layers::DropPath& drop_path) {
  return drop_path ? drop_path(y) : y;
}

// Swin v1's SwinTransformerBlock on (B, H, W, C): x + drop_path(attn over
// the (shifted) windows of norm1(x)), then x + drop_path(mlp(norm2(x))).
class SwinTransformerBlockImpl : public nn::Module {
 public:
  explicit SwinTransformerBlockImpl(const BlockArgs& a);
  at::Tensor forward(const at::Tensor& input);

  layers::LayerNorm norm1{nullptr};
  layers::WindowAttention attn{nullptr};
  layers::DropPath drop_path1{nullptr};  // null at rate 0, timm's Identity
  layers::LayerNorm norm2{nullptr};
  layers::Mlp mlp{nullptr};
  layers::DropPath drop_path2{nullptr};

 private:
  ShiftedWindows windows_;
};
TORCH_MODULE(SwinTransformerBlock);

// Swin v1's PatchMerging: merge_patches, norm, then a bias-free Linear
// 4 * dim -> out_dim.
class PatchMergingImpl : public nn::Module {
 public:
  PatchMergingImpl(int64_t dim, int64_t out_dim);
  at::Tensor forward(const at::Tensor& input);

  layers::LayerNorm norm{nullptr};
  layers::Linear reduction{nullptr};
};
TORCH_MODULE(PatchMerging);

struct WindowAttentionV2Options {
  WindowAttentionV2Options(int64_t dim, int64_t num_heads, WindowSize window_size)
      : dim_(dim), num_heads_(num_heads), window_size_(window_size) {}
  TORCH_ARG(int64_t, dim);
  TORCH_ARG(int64_t, num_heads);
  TORCH_ARG(WindowSize, window_size);
  TORCH_ARG(WindowSize, pretrained_window_size) = {0, 0};  // {0, 0}: normalise by window_size
};

// SwinV2's WindowAttention (qkv_bias, no dropout): cosine attention, q and k
// scaled to unit length and their products by exp(logit_scale) per head,
// capped at 100; plus a continuous relative position bias, 16 * sigmoid of
// cpb_mlp (Linear 2 -> 512, ReLU, bias-free Linear 512 -> num_heads) over
// the log-spaced offsets of the window. qkv has no bias of its own: q_bias,
// a zero k bias (timm's non-persistent k_bias) and v_bias are added.
// State_dict keys as timm's: logit_scale, q_bias, v_bias, cpb_mlp.{0,2}.*,
// qkv.weight, proj.*; the coordinates table and the index are plain members
// (timm's non-persistent buffers).
class WindowAttentionV2Impl : public nn::Module {
 public:
  explicit WindowAttentionV2Impl(const WindowAttentionV2Options& options);
  // x: (B * num_windows, N, dim); mask: undefined or (num_windows, N, N),
  // added to every image's windows. Returns (B * num_windows, N, dim).
  at::Tensor forward(const at::Tensor& x, const at::Tensor& mask = {});
  // The bias added to the attention logits: (num_heads, N, N).
  at::Tensor relative_position_bias();

  WindowAttentionV2Options options;
  at::Tensor logit_scale;  // (num_heads, 1, 1), log(10) at construction
  at::Tensor q_bias;
  at::Tensor v_bias;
  nn::Sequential cpb_mlp{nullptr};
  layers::Linear qkv{nullptr};
  layers::Linear proj{nullptr};

 private:
  at::Tensor coords_table_;    // (1, 2 * win_h - 1, 2 * win_w - 1, 2) float32, timm's relative_coords_table
  at::Tensor position_index_;  // (N, N) int64, timm's relative_position_index
};
TORCH_MODULE(WindowAttentionV2);

// SwinV2's SwinTransformerV2Block on (B, H, W, C), with res-post-norm: x +
// drop_path(norm1(attn over the (shifted) windows of x)), then x +
// drop_path(norm2(mlp(x))).
class SwinTransformerV2BlockImpl : public nn::Module {
 public:
  explicit SwinTransformerV2BlockImpl(const BlockArgs& a);
  at::Tensor forward(const at::Tensor& input);

  WindowAttentionV2 attn{nullptr};
  layers::LayerNorm norm1{nullptr};
  layers::DropPath drop_path1{nullptr};  // null at rate 0, timm's Identity
  layers::Mlp mlp{nullptr};
  layers::LayerNorm norm2{nullptr};
  layers::DropPath drop_path2{nullptr};

 private:
  ShiftedWindows windows_;
};
TORCH_MODULE(SwinTransformerV2Block);

// SwinV2's PatchMerging: merge_patches, a bias-free Linear 4 * dim ->
// out_dim, then the norm (over out_dim; v1 norms before the reduction).
class PatchMergingV2Impl : public nn::Module {
 public:
  PatchMergingV2Impl(int64_t dim, int64_t out_dim);
  at::Tensor forward(const at::Tensor& input);

  layers::Linear reduction{nullptr};
  layers::LayerNorm norm{nullptr};
};
TORCH_MODULE(PatchMergingV2);

// timm's SwinTransformerStage / SwinTransformerV2Stage: "downsample" (a
// patch merging; empty in stage 0, timm's Identity), then "blocks".
class SwinTransformerStageImpl : public nn::Module {
 public:
  SwinTransformerStageImpl(nn::AnyModule downsample, nn::Sequential blocks);
  // With grad_checkpointing each block is checkpointed (timm's checkpoint_seq
  // over the stage's blocks, v2's checkpoint per block), the downsample not.
  at::Tensor forward(const at::Tensor& input);

  nn::AnyModule downsample;  // empty in stage 0
  nn::Sequential blocks{nullptr};
  bool grad_checkpointing = false;  // timm's per-stage attribute, set by the model's set_grad_checkpointing
};
TORCH_MODULE(SwinTransformerStage);

}  // namespace timm::swin
