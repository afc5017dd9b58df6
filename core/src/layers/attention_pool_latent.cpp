#include "timm/layers/attention_pool_latent.hpp"

#include <cmath>
#include <optional>
#include <ostream>
#include <string>

#include <c10/core/GradMode.h>

#include "timm/base/error.hpp"
#include "timm/layers/linear.hpp"
#include "timm/layers/weight_init.hpp"

namespace timm::layers {

namespace {

// timm's trunc_normal_tf_: N(0, 1) truncated to [-2, 2], then scaled by std.
void trunc_normal_tf_(at::Tensor& tensor, double std) {
  trunc_normal_(tensor, 0.0, 1.0, -2.0, 2.0);
  tensor.mul_(std);
}

}  // namespace

AttentionPoolLatentImpl::AttentionPoolLatentImpl(const AttentionPoolLatentOptions& options_) : options(options_) {
  const std::string name = "AttentionPoolLatent: ";
  embed_dim_ = options.embed_dim() > 0 ? options.embed_dim() : options.in_features();
  latent_dim_ = options.latent_dim() > 0 ? options.latent_dim() : embed_dim_;
  const std::optional<int64_t> out = options.out_features();
  if (options.in_features() < 1 || options.embed_dim() < 0 || options.latent_dim() < 0 || options.latent_len() < 1 ||
      (out && *out < 0) || options.mlp_ratio() <= 0.0) {
    throw UsageError(name + "in_features " + std::to_string(options.in_features()) +
                     ": expected positive sizes and mlp_ratio");
  }
  if (options.num_heads() < 1 || embed_dim_ % options.num_heads() != 0) {
    throw UsageError(name + "num_heads " + std::to_string(options.num_heads()) + " must divide embed_dim " +
                     std::to_string(embed_dim_));
  }
  if (!options.q_proj() && latent_dim_ != embed_dim_) {
    throw UsageError(name + "q_proj off uses the latent as the query: latent_dim " + std::to_string(latent_dim_) +
                     " must equal embed_dim " + std::to_string(embed_dim_));
  }
  if (options.pos_embed() != "" && options.pos_embed() != "abs") {
    throw UsageError(name + "pos_embed " + in_quotes(options.pos_embed()) + ": expected '' or 'abs'");
  }
  if (options.pos_embed() == "abs" && (!options.feat_size() || *options.feat_size() < 1)) {
    throw UsageError(name + "pos_embed 'abs' needs a positive feat_size (the number of input tokens)");
  }
  const std::string& pool = options.pool_type();
  if (pool != "token" && pool != "avg" && !pool.empty()) {
    throw UsageError(name + "pool_type " + in_quotes(pool) + ": expected 'token', 'avg' or '' (none)");
  }
  if (!options.norm_layer().empty() && options.norm_layer() != "layernorm") {
    throw UsageError(name + "norm_layer " + in_quotes(options.norm_layer()) + ": expected '' or 'layernorm'");
  }
  if (options.drop() < 0.0 || options.drop() > 1.0) {
    throw UsageError(name + "drop must be in [0, 1], got " + std::to_string(options.drop()));
  }
  out_features_ = !out ? options.in_features() : (*out > 0 ? *out : embed_dim_);
  reset();
}

// Registration order is timm's: pos_embed, latent, q, kv, q_norm, k_norm,
// proj, norm, mlp.
void AttentionPoolLatentImpl::reset() {
  namespace nn = torch::nn;
  const int64_t in = options.in_features();
  if (options.pos_embed() == "abs") pos_embed = register_parameter("pos_embed", at::zeros({*options.feat_size(), in}));
  latent = register_parameter("latent", at::zeros({1, options.latent_len(), latent_dim_}));
  if (options.q_proj()) {
    q = register_module("q", layers::Linear(nn::LinearOptions(latent_dim_, embed_dim_).bias(options.qkv_bias())));
  }
  // timm's kv reads embed_dim features (equal to in_features unless embed_dim is set).
  kv = register_module("kv", layers::Linear(nn::LinearOptions(embed_dim_, 2 * embed_dim_).bias(options.qkv_bias())));
  if (options.qk_norm()) {
    // timm: norm_layer or nn.LayerNorm (eps 1e-5) over head_dim.
    const double eps = options.norm_layer().empty() ? 1e-5 : options.norm_eps();
    q_norm = register_module("q_norm", LayerNorm(LayerNormOptions(head_dim()).eps(eps)));
    k_norm = register_module("k_norm", LayerNorm(LayerNormOptions(head_dim()).eps(eps)));
  }
  const std::optional<int64_t> out = options.out_features();
  if (!out || *out > 0) {
    proj = register_module("proj", layers::Linear(embed_dim_, out_features_));
    if (!options.norm_layer().empty()) {
      norm = register_module("norm", LayerNorm(LayerNormOptions(out_features_).eps(options.norm_eps())));
    }
    const auto hidden = static_cast<int64_t>(static_cast<double>(out_features_) * options.mlp_ratio());  // timm's int()
    mlp = register_module("mlp", Mlp(MlpOptions(out_features_)
                                         .hidden_features(hidden)
                                         .out_features(out_features_)
                                         .act_layer(options.act_layer())));
  }
  init_weights();
}

void AttentionPoolLatentImpl::pretty_print(std::ostream& stream) const {
  stream << "timm::layers::AttentionPoolLatent(in_features=" << options.in_features() << ", embed_dim=" << embed_dim_
         << ", num_heads=" << options.num_heads() << ", latent_len=" << options.latent_len()
         << ", out_features=" << out_features_ << ", pool_type=" << options.pool_type() << ")";
}

void AttentionPoolLatentImpl::init_weights() {
  c10::NoGradGuard no_grad;
  if (pos_embed.defined()) trunc_normal_tf_(pos_embed, 1.0 / std::sqrt(static_cast<double>(pos_embed.size(1))));
  trunc_normal_tf_(latent, 1.0 / std::sqrt(static_cast<double>(latent_dim_)));
}

at::Tensor AttentionPoolLatentImpl::forward(const at::Tensor& input, const at::Tensor& attn_mask) {
  if (input.dim() != 3 || input.size(2) != options.in_features() ||
      (pos_embed.defined() && input.size(1) != pos_embed.size(0))) {
    throw UsageError("AttentionPoolLatent: expected (N, " +
                     (pos_embed.defined() ? std::to_string(pos_embed.size(0)) : std::string("L")) + ", " +
                     std::to_string(options.in_features()) + ") tokens, got shape " +
                     std::string(c10::str(input.sizes())));
  }
  const int64_t batch = input.size(0), tokens = input.size(1);
  const int64_t heads = options.num_heads(), len = options.latent_len();
  at::Tensor x = pos_embed.defined() ? input + pos_embed.unsqueeze(0).to(input.scalar_type()) : input;
  const at::Tensor q_latent = latent.expand({batch, -1, -1});
  at::Tensor qh = (q ? q(q_latent) : q_latent).reshape({batch, len, heads, head_dim()}).transpose(1, 2);
  const auto kvh = kv(x).reshape({batch, tokens, 2, heads, head_dim()}).permute({2, 0, 3, 1, 4}).unbind(0);
  at::Tensor kh = kvh[0];
  if (q_norm) {
    qh = q_norm(qh);
    kh = k_norm(kh);
  }
  x = at::scaled_dot_product_attention(qh, kh, kvh[1],
                                       attn_mask.defined() ? std::optional<at::Tensor>(attn_mask) : std::nullopt);
  x = x.transpose(1, 2).reshape({batch, len, embed_dim_});
  if (proj) x = proj(x);
  if (options.drop() > 0.0) x = at::dropout(x, options.drop(), is_training());
  if (mlp) x = x + mlp(norm ? norm(x) : x);
  if (options.pool_type() == "token") return x.select(1, 0);
  if (options.pool_type() == "avg") return x.mean(1);
  return x;
}

}  // namespace timm::layers
