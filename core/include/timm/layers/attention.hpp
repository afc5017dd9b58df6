// Multi-head self-attention, as timm's layers/attention.py Attention:
// qkv (Linear dim -> 3 * dim) split into heads, optional q_norm / k_norm
// (timm LayerNorm over head_dim), scaled dot-product attention (the fused
// kernel timm uses by default, F.scaled_dot_product_attention), then proj
// (Linear dim -> dim) and proj_drop. State_dict keys: qkv.{weight,bias},
// [q_norm.*, k_norm.*], proj.{weight,bias}, as timm's. Input (B, N, dim).
// An optional attention mask goes to the attention as timm's attn_mask
// (NaFlex's padding mask: additive, broadcastable to (B, heads, N, N)).
#pragma once

#include <cstdint>

#include <ATen/ATen.h>
#include <torch/arg.h>
#include <torch/nn/cloneable.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/pimpl.h>

#include "timm/layers/linear.hpp"
#include "timm/layers/norm.hpp"

namespace timm::layers {

struct AttentionOptions {
  /* implicit */ AttentionOptions(int64_t dim) : dim_(dim) {}
  TORCH_ARG(int64_t, dim);
  TORCH_ARG(int64_t, num_heads) = 8;  // must divide dim
  TORCH_ARG(bool, qkv_bias) = false;
  TORCH_ARG(bool, qk_norm) = false;
  TORCH_ARG(bool, proj_bias) = true;
  TORCH_ARG(double, attn_drop) = 0.0;  // dropout on the attention weights (training only)
  TORCH_ARG(double, proj_drop) = 0.0;
};

class AttentionImpl : public torch::nn::Cloneable<AttentionImpl> {
 public:
  // Throws UsageError when num_heads does not divide dim.
  explicit AttentionImpl(const AttentionOptions& options);
  void reset() override;
  void pretty_print(std::ostream& stream) const override;
  // attn_mask: undefined for none, else F.scaled_dot_product_attention's
  // (a float mask is added to the scores, a bool one keeps the true entries).
  at::Tensor forward(const at::Tensor& x, const at::Tensor& attn_mask = {});

  int64_t head_dim() const { return options.dim() / options.num_heads(); }

  AttentionOptions options;
  layers::Linear qkv{nullptr};
  LayerNorm q_norm{nullptr};  // null unless qk_norm
  LayerNorm k_norm{nullptr};
  layers::Linear proj{nullptr};
  torch::nn::Dropout proj_drop{nullptr};
};
TORCH_MODULE(Attention);

}  // namespace timm::layers
