// Relative position encodings of windowed / local attention, as timm's
// layers/pos_embed_rel.py: RelPosBias (a learnt (2h-1)(2w-1) x heads table
// gathered by the pair-wise position index, Swin-V1 style), RelPosMlp (an MLP
// over log-spaced relative coordinates, timm's 'cr' mode) and RelPosBiasTf
// (the TensorFlow MaxViT table of (heads, 2h-1, 2w-1), reindexed by one-hot
// einsum lookups), plus gen_relative_log_coords. Each get_bias() is the
// additive attention bias for a window of h x w tokens: (1, heads, N, N) for
// RelPosBias / RelPosMlp, (heads, N, N) for RelPosBiasTf, N = h * w, in the
// parameters' dtype and device.
//
// State_dict keys as timm's: relative_position_bias_table (RelPosBias,
// RelPosBiasTf), mlp.fc1.*, mlp.fc2.* (RelPosMlp). timm's non-persistent
// buffers (relative_position_index, rel_coords_log, height_lookup /
// width_lookup) are plain members here, computed at construction on the CPU
// and moved to the parameters' device and dtype on first use, so state_dicts
// stay equal. The window size is fixed at construction (no set_window_size,
// no checkpoint resizing of tables) and prefix (class) tokens are not
// supported.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include <ATen/ATen.h>
#include <torch/arg.h>
#include <torch/nn/cloneable.h>
#include <torch/nn/pimpl.h>

#include "timm/layers/mlp.hpp"
#include "timm/layers/window_attention.hpp"

namespace timm::layers {

// timm's gen_relative_log_coords(win_size, pretrained_win_size, mode): the
// (2h-1, 2w-1, 2) float32 table of relative (dy, dx) offsets, log-spaced:
// mode "cr" sign(d) * log(1 + |d|); mode "swin" the offsets divided by
// (pretrained_win_size - 1), or (win_size - 1) when pretrained_win_size is 0,
// times 8, then sign(d) * log2(1 + |d|) / log2(8). Throws UsageError for
// another mode or a non-positive window.
at::Tensor gen_relative_log_coords(WindowSize win_size, WindowSize pretrained_win_size = {0, 0},
                                   const std::string& mode = "swin");

struct RelPosBiasOptions {
  RelPosBiasOptions(WindowSize window_size, int64_t num_heads) : window_size_(window_size), num_heads_(num_heads) {}
  TORCH_ARG(WindowSize, window_size);
  TORCH_ARG(int64_t, num_heads);
};

// timm's RelPosBias (prefix_tokens 0): relative_position_bias_table
// ((2h-1)(2w-1), num_heads), trunc_normal(std .02) at construction as timm's
// reset_parameters. Throws UsageError for a non-positive window or num_heads.
class RelPosBiasImpl : public torch::nn::Cloneable<RelPosBiasImpl> {
 public:
  explicit RelPosBiasImpl(const RelPosBiasOptions& options);
  void reset() override;
  void pretty_print(std::ostream& stream) const override;
  // (1, num_heads, N, N).
  at::Tensor get_bias();
  // timm's forward(attn): attn + get_bias().
  at::Tensor forward(const at::Tensor& attn) { return attn + get_bias(); }

  RelPosBiasOptions options;
  at::Tensor relative_position_bias_table;
  at::Tensor relative_position_index;  // not registered: timm's non-persistent buffer
};
TORCH_MODULE(RelPosBias);

struct RelPosMlpOptions {
  RelPosMlpOptions(WindowSize window_size, int64_t num_heads) : window_size_(window_size), num_heads_(num_heads) {}
  TORCH_ARG(WindowSize, window_size);
  TORCH_ARG(int64_t, num_heads);
  TORCH_ARG(int64_t, hidden_dim) = 128;
};

// timm's RelPosMlp in its default 'cr' mode (prefix_tokens 0): mlp = Mlp(2,
// hidden_dim, num_heads, ReLU, drop (0.125, 0)) (the dropout after the hidden
// layer is active in training, as timm's) over the 'cr' log coordinates,
// gathered by the position index; no bias activation or gain. The Linear
// layers keep torch's default init (timm's models re-initialise them).
// Throws UsageError for a non-positive window, num_heads or hidden_dim.
class RelPosMlpImpl : public torch::nn::Cloneable<RelPosMlpImpl> {
 public:
  explicit RelPosMlpImpl(const RelPosMlpOptions& options);
  void reset() override;
  void pretty_print(std::ostream& stream) const override;
  // (1, num_heads, N, N).
  at::Tensor get_bias();
  at::Tensor forward(const at::Tensor& attn) { return attn + get_bias(); }

  RelPosMlpOptions options;
  Mlp mlp{nullptr};
  at::Tensor relative_position_index;  // not registered: timm's non-persistent buffers
  at::Tensor rel_coords_log;
};
TORCH_MODULE(RelPosMlp);

// timm's RelPosBiasTf: relative_position_bias_table (num_heads, 2h-1, 2w-1),
// normal(std .02) at construction, reindexed to (num_heads, N, N) by timm's
// two einsum lookups (generate_lookup_tensor, reindex_2d_einsum_lookup).
// Throws UsageError for a non-positive window or num_heads.
class RelPosBiasTfImpl : public torch::nn::Cloneable<RelPosBiasTfImpl> {
 public:
  explicit RelPosBiasTfImpl(const RelPosBiasOptions& options);
  void reset() override;
  void pretty_print(std::ostream& stream) const override;
  // (num_heads, N, N).
  at::Tensor get_bias();
  at::Tensor forward(const at::Tensor& attn) { return attn + get_bias(); }

  RelPosBiasOptions options;
  at::Tensor relative_position_bias_table;
  at::Tensor height_lookup;  // not registered: timm's non-persistent buffers
  at::Tensor width_lookup;
};
TORCH_MODULE(RelPosBiasTf);

}  // namespace timm::layers
