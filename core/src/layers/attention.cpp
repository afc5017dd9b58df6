#include "timm/layers/attention.hpp"

#include <optional>
#include <ostream>
#include <string>

#include "timm/base/error.hpp"
#include "timm/layers/linear.hpp"

namespace timm::layers {

AttentionImpl::AttentionImpl(const AttentionOptions& options_) : options(options_) {
  if (options.dim() < 1 || options.num_heads() < 1 || options.dim() % options.num_heads() != 0) {
    throw UsageError("Attention: num_heads (" + std::to_string(options.num_heads()) + ") must divide dim (" +
                     std::to_string(options.dim()) + ")");
  }
  if (options.attn_drop() < 0.0 || options.attn_drop() > 1.0 || options.proj_drop() < 0.0 ||
      options.proj_drop() > 1.0) {
    throw UsageError("Attention: attn_drop and proj_drop must be in [0, 1]");
  }
  reset();
}

// Registration order is timm's attribute order: qkv, q_norm, k_norm, proj.
void AttentionImpl::reset() {
  namespace nn = torch::nn;
  const int64_t dim = options.dim();
  qkv = register_module("qkv", layers::Linear(nn::LinearOptions(dim, 3 * dim).bias(options.qkv_bias())));
  if (options.qk_norm()) {
    q_norm = register_module("q_norm", LayerNorm(head_dim()));
    k_norm = register_module("k_norm", LayerNorm(head_dim()));
  }
  proj = register_module("proj", layers::Linear(nn::LinearOptions(dim, dim).bias(options.proj_bias())));
  proj_drop = register_module("proj_drop", nn::Dropout(options.proj_drop()));
}

void AttentionImpl::pretty_print(std::ostream& stream) const {
  stream << "timm::layers::Attention(dim=" << options.dim() << ", num_heads=" << options.num_heads() << ")";
}

at::Tensor AttentionImpl::forward(const at::Tensor& x, const at::Tensor& attn_mask) {
  const int64_t batch = x.size(0);
  const int64_t tokens = x.size(1);
  // (B, N, 3 * dim) -> (3, B, heads, N, head_dim)
  const auto qkv_heads =
      qkv(x).reshape({batch, tokens, 3, options.num_heads(), head_dim()}).permute({2, 0, 3, 1, 4}).unbind(0);
  at::Tensor q = qkv_heads[0];
  at::Tensor k = qkv_heads[1];
  if (q_norm) {
    q = q_norm(q);
    k = k_norm(k);
  }
  const double dropout_p = is_training() ? options.attn_drop() : 0.0;
  at::Tensor out = at::scaled_dot_product_attention(
      q, k, qkv_heads[2], attn_mask.defined() ? std::optional<at::Tensor>(attn_mask) : std::nullopt, dropout_p);
  out = out.transpose(1, 2).reshape({batch, tokens, options.dim()});
  return proj_drop(proj(out));
}

}  // namespace timm::layers
