// Attention pooling with a learned latent query, as timm's
// layers/attention_pool.py AttentionPoolLatent (the 'map' head of timm's
// VisionTransformer, SigLIP's MAP head): latent_len learned query tokens
// (latent, through q unless q_proj is off) attend over the (N, L, C) input
// tokens (k and v from one kv Linear; optional q_norm / k_norm LayerNorms
// over head_dim; scaled dot-product attention, timm's fused path), then proj,
// proj_drop and a residual MLP on the normed result: x + mlp(norm(x)); then
// the first latent token (pool_type "token"), their mean ("avg") or all of
// them (""). out_features 0 leaves proj, norm and the MLP out (pre-logits
// mode, embed_dim wide). Keys as timm's: [pos_embed], latent, [q.*], kv.*,
// [q_norm.*, k_norm.*], [proj.*], [norm.*], [mlp.fc1.*, mlp.fc2.*].
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>

#include <ATen/ATen.h>
#include <torch/arg.h>
#include <torch/nn/cloneable.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/pimpl.h>

#include "timm/layers/linear.hpp"
#include "timm/layers/mlp.hpp"
#include "timm/layers/norm.hpp"

namespace timm::layers {

struct AttentionPoolLatentOptions {
  /* implicit */ AttentionPoolLatentOptions(int64_t in_features) : in_features_(in_features) {}
  TORCH_ARG(int64_t, in_features);
  // nullopt: in_features; 0: no proj / norm / mlp (the output is embed_dim wide), as timm.
  TORCH_ARG(std::optional<int64_t>, out_features) = std::nullopt;
  TORCH_ARG(int64_t, embed_dim) = 0;  // 0: in_features (kv's input width too, as timm)
  TORCH_ARG(int64_t, num_heads) = 8;  // must divide embed_dim
  // The number of input tokens pos_embed is made for (pos_embed "abs" only).
  TORCH_ARG(std::optional<int64_t>, feat_size) = std::nullopt;
  TORCH_ARG(double, mlp_ratio) = 4.0;  // mlp hidden width int(out_features * mlp_ratio)
  TORCH_ARG(bool, qkv_bias) = true;
  TORCH_ARG(bool, q_proj) = true;  // off: the latent is the query (latent_dim must be embed_dim)
  TORCH_ARG(bool, qk_norm) = false;
  TORCH_ARG(int64_t, latent_len) = 1;
  TORCH_ARG(int64_t, latent_dim) = 0;      // 0: embed_dim
  TORCH_ARG(std::string, pos_embed) = "";  // "abs": a learned (feat_size, in_features) embedding added to the input
  TORCH_ARG(std::string, pool_type) = "token";  // "token", "avg" or "" (all latent tokens)
  // timm's norm_layer: "" (None: norm an Identity, q_norm / k_norm PyTorch's
  // LayerNorm, eps 1e-5) or "layernorm" (timm's LayerNorm with norm_eps, for
  // norm and q_norm / k_norm).
  TORCH_ARG(std::string, norm_layer) = "";
  TORCH_ARG(double, norm_eps) = 1e-6;
  TORCH_ARG(std::string, act_layer) = "gelu";  // the MLP's
  TORCH_ARG(double, drop) = 0.0;               // proj_drop
};

class AttentionPoolLatentImpl : public torch::nn::Cloneable<AttentionPoolLatentImpl> {
 public:
  // Throws UsageError for non-positive sizes, heads that do not divide
  // embed_dim, q_proj off with latent_dim other than embed_dim, pos_embed
  // "abs" without feat_size, an unknown pos_embed / pool_type / norm_layer or
  // a drop outside [0, 1].
  explicit AttentionPoolLatentImpl(const AttentionPoolLatentOptions& options);
  void reset() override;
  void pretty_print(std::ostream& stream) const override;

  // (N, L, in_features) -> (N, out_features) with pool_type "token" / "avg",
  // else (N, latent_len, out_features). Throws UsageError for an input that
  // is not 3-d with in_features channels (or, with pos_embed, feat_size tokens).
  // attn_mask (timm's): undefined for none, else the latent queries' mask over
  // the input tokens for F.scaled_dot_product_attention, e.g. NaFlex's
  // (N, 1, 1, L) additive key-padding mask.
  at::Tensor forward(const at::Tensor& x, const at::Tensor& attn_mask = {});

  // timm's init_weights: pos_embed trunc_normal_tf_(std in_features^-0.5),
  // latent trunc_normal_tf_(std latent_dim^-0.5) (bounds +-2 std); the
  // Linears keep PyTorch's init. The constructor calls it, as timm's.
  void init_weights();

  int64_t embed_dim() const { return embed_dim_; }
  int64_t num_heads() const { return options.num_heads(); }
  int64_t head_dim() const { return embed_dim_ / options.num_heads(); }
  int64_t latent_dim() const { return latent_dim_; }
  // The output width: out_features, or embed_dim with out_features 0.
  int64_t out_features() const { return out_features_; }

  AttentionPoolLatentOptions options;
  at::Tensor pos_embed;       // (feat_size, in_features); undefined unless pos_embed "abs"
  at::Tensor latent;          // (1, latent_len, latent_dim)
  layers::Linear q{nullptr};  // null without q_proj
  layers::Linear kv{nullptr};
  LayerNorm q_norm{nullptr}, k_norm{nullptr};  // null without qk_norm
  layers::Linear proj{nullptr};                // null with out_features 0
  LayerNorm norm{nullptr};                     // null with norm_layer "" or out_features 0
  Mlp mlp{nullptr};                            // null with out_features 0

 private:
  int64_t embed_dim_ = 0;
  int64_t latent_dim_ = 0;
  int64_t out_features_ = 0;
};
TORCH_MODULE(AttentionPoolLatent);

}  // namespace timm::layers
