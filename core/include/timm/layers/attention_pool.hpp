// Attention pooling of NCHW feature maps, as timm's layers/attention_pool2d.py
// AttentionPool2d (CLIP's, https://github.com/openai/CLIP): the H * W
// positions flattened to tokens, their mean prepended as a query token (or a
// learned cls_token), a learned absolute position embedding added
// (pos_embed, (feat_size H * W + 1, in_features), resampled bicubic with
// antialias for another map size, as timm's resample_abs_pos_embed),
// multi-head attention over all tokens (scaled dot-product, timm's fused
// path), dropout, the output projection proj, then the first token
// (pool_type "token") or the map without it (pool_type "": (N, C, H, W)).
// timm's byobnet uses it as the CLIP ResNets' head (qkv_separate: q, k, v
// Linears). Keys as timm's: [cls_token], pos_embed, q.* k.* v.* (or qkv.*),
// [proj.*]. timm's RotAttentionPool2d (rotary embedding) is not here.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <ostream>
#include <string>

#include <ATen/ATen.h>
#include <torch/arg.h>
#include <torch/nn/cloneable.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/pimpl.h>

#include "timm/layers/linear.hpp"

namespace timm::layers {

using FeatSize2d = std::array<int64_t, 2>;  // (H, W)

struct AttentionPool2dOptions {
  /* implicit */ AttentionPool2dOptions(int64_t in_features) : in_features_(in_features) {}
  TORCH_ARG(int64_t, in_features);
  // The feature map size pos_embed is made for: (H, W).
  TORCH_ARG(FeatSize2d, feat_size) = FeatSize2d{7, 7};
  // nullopt: in_features; 0: no proj (the output is embed_dim wide), as timm.
  TORCH_ARG(std::optional<int64_t>, out_features) = std::nullopt;
  TORCH_ARG(int64_t, embed_dim) = 0;  // 0: in_features
  TORCH_ARG(int64_t, head_dim) = 64;  // used unless num_heads is set
  TORCH_ARG(std::optional<int64_t>, num_heads) = std::nullopt;
  TORCH_ARG(bool, qkv_bias) = true;
  TORCH_ARG(bool, qkv_separate) = false;        // q, k, v Linears instead of one qkv
  TORCH_ARG(std::string, pool_type) = "token";  // or "" (no pooling)
  TORCH_ARG(bool, class_token) = false;         // a learned query token instead of the mean
  TORCH_ARG(double, drop_rate) = 0.0;
};

class AttentionPool2dImpl : public torch::nn::Cloneable<AttentionPool2dImpl> {
 public:
  // Throws UsageError for a pool_type other than "token" or "", heads that do
  // not divide embed_dim, a non-positive size or a drop_rate outside [0, 1].
  explicit AttentionPool2dImpl(const AttentionPool2dOptions& options);
  void reset() override;
  void pretty_print(std::ostream& stream) const override;

  // (N, in_features, H, W) -> (N, out_features) with pool_type "token", else
  // (N, out_features, H, W); with pre_logits the same before proj (embed_dim
  // wide). Throws UsageError for an input that is not 4-d with in_features
  // channels.
  at::Tensor forward(const at::Tensor& x, bool pre_logits = false);

  // timm's init_weights: q, k, v (or qkv) weights and pos_embed
  // trunc_normal(0, in_features^-0.5) (bounds +-2), their biases zero; proj
  // keeps its init. The constructor calls it, as timm's.
  void init_weights();

  int64_t embed_dim() const { return embed_dim_; }
  int64_t num_heads() const { return num_heads_; }
  int64_t head_dim() const { return head_dim_; }
  // The output width: out_features, or embed_dim without proj.
  int64_t out_features() const { return proj ? proj->options.out_features() : embed_dim_; }

  AttentionPool2dOptions options;
  at::Tensor cls_token;                               // (1, embed_dim); undefined without class_token
  at::Tensor pos_embed;                               // (H * W + 1, in_features)
  layers::Linear q{nullptr}, k{nullptr}, v{nullptr};  // qkv_separate
  layers::Linear qkv{nullptr};                        // otherwise
  torch::nn::Dropout drop{nullptr};
  layers::Linear proj{nullptr};  // null with out_features 0

 private:
  int64_t embed_dim_ = 0;
  int64_t num_heads_ = 0;
  int64_t head_dim_ = 0;
};
TORCH_MODULE(AttentionPool2d);

}  // namespace timm::layers
