#include "swin_blocks.hpp"

#include <algorithm>
#include <cmath>
#include <tuple>
#include <utility>

#include <c10/core/GradMode.h>
#include <torch/nn/modules/activation.h>

#include "timm/layers/linear.hpp"
#include "timm/models/grad_checkpoint.hpp"

namespace timm::swin {

std::pair<WindowSize, WindowSize> window_and_shift(const BlockArgs& a) {
  WindowSize shift{0, 0};
  if (a.shifted) shift = {a.window[0] / 2, a.window[1] / 2};
  if (a.always_partition) return {a.window, shift};
  WindowSize window{};
  for (size_t i = 0; i < 2; ++i) {
    window[i] = a.resolution[i] <= a.window[i] ? a.resolution[i] : a.window[i];
    if (a.resolution[i] <= window[i]) shift[i] = 0;
  }
  return {window, shift};
}

ShiftedWindows::ShiftedWindows(const BlockArgs& a) {
  std::tie(window_, shift_) = window_and_shift(a);
  attn_mask_ = layers::shifted_window_attn_mask(a.resolution[0], a.resolution[1], window_, shift_);
}

at::Tensor ShiftedWindows::apply(const at::Tensor& x, const Attention& attention) {
  const int64_t height = x.size(1), width = x.size(2), channels = x.size(3);
  const bool has_shift = shift_[0] != 0 || shift_[1] != 0;
  at::Tensor shifted = has_shift ? at::roll(x, {-shift_[0], -shift_[1]}, {1, 2}) : x;
  const int64_t pad_h = (window_[0] - height % window_[0]) % window_[0];
  const int64_t pad_w = (window_[1] - width % window_[1]) % window_[1];
  shifted = at::constant_pad_nd(shifted, {0, 0, 0, pad_w, 0, pad_h}, 0.0);
  const int64_t padded_h = shifted.size(1), padded_w = shifted.size(2);
  const at::Tensor windows = layers::window_partition(shifted, window_).view({-1, window_[0] * window_[1], channels});
  const at::Tensor out = attention(windows, mask_for(x)).view({-1, window_[0], window_[1], channels});
  shifted =
      layers::window_reverse(out, window_, padded_h, padded_w).slice(1, 0, height).slice(2, 0, width).contiguous();
  return has_shift ? at::roll(shifted, {shift_[0], shift_[1]}, {1, 2}) : shifted;
}

// The mask on x's device and dtype, converted once (the module's .to() does not see it).
const at::Tensor& ShiftedWindows::mask_for(const at::Tensor& x) {
  if (attn_mask_.defined() && (attn_mask_.device() != x.device() || attn_mask_.scalar_type() != x.scalar_type())) {
    attn_mask_ = attn_mask_.to(x.device(), x.scalar_type());
  }
  return attn_mask_;
}

at::Tensor merge_patches(const at::Tensor& input) {
  const int64_t batch = input.size(0), channels = input.size(3);
  const at::Tensor x = at::constant_pad_nd(input, {0, 0, 0, input.size(2) % 2, 0, input.size(1) % 2}, 0.0);
  const int64_t height = x.size(1), width = x.size(2);
  return x.reshape({batch, height / 2, 2, width / 2, 2, channels}).permute({0, 1, 3, 4, 2, 5}).flatten(3);
}

// Swin v1.

SwinTransformerBlockImpl::SwinTransformerBlockImpl(const BlockArgs& a) : windows_(a) {
  norm1 = register_module("norm1", make_norm(a.dim));
  attn = register_module(
      "attn", layers::WindowAttention(layers::WindowAttentionOptions(a.dim, a.num_heads, windows_.window())));
  if (a.drop_path > 0.0) drop_path1 = register_module("drop_path1", layers::DropPath(a.drop_path));
  norm2 = register_module("norm2", make_norm(a.dim));
  mlp = register_module(
      "mlp", layers::Mlp(layers::MlpOptions(a.dim).hidden_features(static_cast<int64_t>(a.dim * a.mlp_ratio))));
  if (a.drop_path > 0.0) drop_path2 = register_module("drop_path2", layers::DropPath(a.drop_path));
}

at::Tensor SwinTransformerBlockImpl::forward(const at::Tensor& input) {
  const int64_t batch = input.size(0), height = input.size(1), width = input.size(2), channels = input.size(3);
  const at::Tensor attended = windows_.apply(
      norm1(input), [this](const at::Tensor& windows, const at::Tensor& mask) { return attn(windows, mask); });
  at::Tensor x = input + drop_path_or_identity(attended, drop_path1);
  x = x.reshape({batch, -1, channels});
  x = x + drop_path_or_identity(mlp(norm2(x)), drop_path2);
  return x.reshape({batch, height, width, channels});
}

PatchMergingImpl::PatchMergingImpl(int64_t dim, int64_t out_dim) {
  norm = register_module("norm", make_norm(4 * dim));
  reduction = register_module("reduction", layers::Linear(nn::LinearOptions(4 * dim, out_dim).bias(false)));
}

at::Tensor PatchMergingImpl::forward(const at::Tensor& input) { return reduction(norm(merge_patches(input))); }

// SwinV2.

namespace {

constexpr int64_t kCpbHidden = 512;  // cpb_mlp's hidden width
// timm's logit_scale cap, log(1 / 0.01): a temperature of at most 100.
const double kMaxLogitScale = std::log(1.0 / 0.01);

// timm's _make_pair_wise_relative_positions' relative_coords_table: every
// offset (dh, dw) of a window, each axis divided by (pretrained window - 1)
// (the window's own where none was given; at least 1), times 8, then
// sign(t) * log2(|t| + 1) / log2(8), in float32 as timm computes it.
at::Tensor relative_coords_table(WindowSize window, WindowSize pretrained) {
  const at::Tensor coords_h = at::arange(-(window[0] - 1), window[0], at::kFloat);
  const at::Tensor coords_w = at::arange(-(window[1] - 1), window[1], at::kFloat);
  at::Tensor table = at::stack(at::meshgrid({coords_h, coords_w}, "ij")).permute({1, 2, 0}).contiguous().unsqueeze(0);
  // timm tests the first axis of the pretrained size only.
  const WindowSize& scale = pretrained[0] > 0 ? pretrained : window;
  table.select(3, 0).div_(std::max<int64_t>(scale[0] - 1, 1));
  table.select(3, 1).div_(std::max<int64_t>(scale[1] - 1, 1));
  table.mul_(8);
  return at::sign(table) * at::log2(at::abs(table) + 1.0) / std::log2(8.0);
}

// F.normalize(x, dim=-1): x over its L2 norm along the last dimension, the norm at least 1e-12.
at::Tensor l2_normalize(const at::Tensor& x) {
  return x / at::linalg_vector_norm(x, 2, at::IntArrayRef{-1}, /*keepdim=*/true).clamp_min(1e-12);
}

}  // namespace

// Registration order is timm's attribute order: logit_scale, cpb_mlp, qkv,
// q_bias, v_bias, proj (a module's own parameters come first in its
// state_dict either way).
WindowAttentionV2Impl::WindowAttentionV2Impl(const WindowAttentionV2Options& options_) : options(options_) {
  const auto& window = options.window_size();
  const int64_t dim = options.dim(), heads = options.num_heads();
  logit_scale = register_parameter("logit_scale", at::full({heads, 1, 1}, std::log(10.0)));
  cpb_mlp =
      register_module("cpb_mlp", nn::Sequential(layers::Linear(2, kCpbHidden), nn::ReLU(),
                                                layers::Linear(nn::LinearOptions(kCpbHidden, heads).bias(false))));
  qkv = register_module("qkv", layers::Linear(nn::LinearOptions(dim, 3 * dim).bias(false)));
  q_bias = register_parameter("q_bias", at::zeros({dim}));
  v_bias = register_parameter("v_bias", at::zeros({dim}));
  proj = register_module("proj", layers::Linear(dim, dim));
  coords_table_ = relative_coords_table(window, options.pretrained_window_size());
  position_index_ = layers::relative_position_index(window[0], window[1]);
}

at::Tensor WindowAttentionV2Impl::relative_position_bias() {
  // The table and index follow cpb_mlp to its device and dtype once (the module's .to() does not see them).
  const at::Tensor weight = cpb_mlp->ptr<layers::LinearImpl>(0)->weight;
  if (coords_table_.device() != weight.device() || coords_table_.scalar_type() != weight.scalar_type()) {
    coords_table_ = coords_table_.to(weight.device(), weight.scalar_type());
  }
  if (position_index_.device() != weight.device()) position_index_ = position_index_.to(weight.device());
  const int64_t area = options.window_size()[0] * options.window_size()[1];
  const at::Tensor table = cpb_mlp->forward(coords_table_).view({-1, options.num_heads()});
  // Advanced indexing as timm's table[index.view(-1)] (the same backward).
  const at::Tensor bias = table.index({position_index_.view(-1)}).view({area, area, -1}).permute({2, 0, 1});
  return at::sigmoid(bias.contiguous()).mul(16);
}

at::Tensor WindowAttentionV2Impl::forward(const at::Tensor& x, const at::Tensor& mask) {
  const int64_t batch_windows = x.size(0), tokens = x.size(1), channels = x.size(2), heads = options.num_heads();
  const at::Tensor qkv_bias = at::cat({q_bias, at::zeros_like(q_bias), v_bias});
  // (B_, N, 3 * dim) -> (3, B_, heads, N, head_dim)
  const auto qkv_heads =
      at::linear(x, qkv->weight, qkv_bias).reshape({batch_windows, tokens, 3, heads, -1}).permute({2, 0, 3, 1, 4});
  const auto q_k_v = qkv_heads.unbind(0);
  at::Tensor attn = at::matmul(l2_normalize(q_k_v[0]), l2_normalize(q_k_v[1]).transpose(-2, -1));
  attn = attn * at::clamp_max(logit_scale, kMaxLogitScale).exp();
  attn = attn + relative_position_bias().unsqueeze(0);
  if (mask.defined()) {
    const int64_t num_windows = mask.size(0);
    attn = attn.view({-1, num_windows, heads, tokens, tokens}) + mask.unsqueeze(1).unsqueeze(0);
    attn = attn.view({-1, heads, tokens, tokens});
  }
  attn = at::softmax(attn, -1);
  return proj(at::matmul(attn, q_k_v[2]).transpose(1, 2).reshape({batch_windows, tokens, channels}));
}

SwinTransformerV2BlockImpl::SwinTransformerV2BlockImpl(const BlockArgs& a) : windows_(a) {
  attn = register_module(
      "attn",
      WindowAttentionV2(
          WindowAttentionV2Options(a.dim, a.num_heads, windows_.window()).pretrained_window_size(a.pretrained_window)));
  norm1 = register_module("norm1", make_norm(a.dim));
  if (a.drop_path > 0.0) drop_path1 = register_module("drop_path1", layers::DropPath(a.drop_path));
  mlp = register_module(
      "mlp", layers::Mlp(layers::MlpOptions(a.dim).hidden_features(static_cast<int64_t>(a.dim * a.mlp_ratio))));
  norm2 = register_module("norm2", make_norm(a.dim));
  if (a.drop_path > 0.0) drop_path2 = register_module("drop_path2", layers::DropPath(a.drop_path));
}

at::Tensor SwinTransformerV2BlockImpl::forward(const at::Tensor& input) {
  const int64_t batch = input.size(0), height = input.size(1), width = input.size(2), channels = input.size(3);
  const at::Tensor attended =
      windows_.apply(input, [this](const at::Tensor& windows, const at::Tensor& mask) { return attn(windows, mask); });
  at::Tensor x = input + drop_path_or_identity(norm1(attended), drop_path1);
  x = x.reshape({batch, -1, channels});
  x = x + drop_path_or_identity(norm2(mlp(x)), drop_path2);
  return x.reshape({batch, height, width, channels});
}

PatchMergingV2Impl::PatchMergingV2Impl(int64_t dim, int64_t out_dim) {
  reduction = register_module("reduction", layers::Linear(nn::LinearOptions(4 * dim, out_dim).bias(false)));
  norm = register_module("norm", make_norm(out_dim));
}

at::Tensor PatchMergingV2Impl::forward(const at::Tensor& input) { return norm(reduction(merge_patches(input))); }

// Both versions.

SwinTransformerStageImpl::SwinTransformerStageImpl(nn::AnyModule downsample_, nn::Sequential blocks_)
    : downsample(std::move(downsample_)) {
  if (!downsample.is_empty()) register_module("downsample", downsample.ptr());
  blocks = register_module("blocks", std::move(blocks_));
}

at::Tensor SwinTransformerStageImpl::forward(const at::Tensor& input) {
  const at::Tensor x = downsample.is_empty() ? input : downsample.forward(input);
  return grad_checkpointing ? checkpoint_seq(sequence_modules(blocks), x) : blocks->forward(x);
}

}  // namespace timm::swin
