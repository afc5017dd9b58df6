#include "timm/layers/attention_pool.hpp"

#include <cmath>
#include <ostream>
#include <string>

#include <c10/core/GradMode.h>
#include <torch/nn/init.h>

#include "timm/base/error.hpp"
#include "timm/layers/linear.hpp"
#include "timm/layers/pos_embed.hpp"
#include "timm/layers/weight_init.hpp"

namespace timm::layers {

AttentionPool2dImpl::AttentionPool2dImpl(const AttentionPool2dOptions& options_) : options(options_) {
  if (options.pool_type() != "token" && !options.pool_type().empty()) {
    throw UsageError("AttentionPool2d: pool_type " + in_quotes(options.pool_type()) +
                     ": only token pooling (or none, '') is supported");
  }
  const auto [h, w] = options.feat_size();
  if (options.in_features() < 1 || h < 1 || w < 1 || options.embed_dim() < 0 ||
      (options.out_features() && *options.out_features() < 0)) {
    throw UsageError("AttentionPool2d: in_features " + std::to_string(options.in_features()) + ", feat_size " +
                     std::to_string(h) + "x" + std::to_string(w) + ": expected positive sizes");
  }
  if (options.drop_rate() < 0.0 || options.drop_rate() > 1.0) {
    throw UsageError("AttentionPool2d: drop_rate must be in [0, 1], got " + std::to_string(options.drop_rate()));
  }
  embed_dim_ = options.embed_dim() > 0 ? options.embed_dim() : options.in_features();
  if (options.num_heads()) {
    num_heads_ = *options.num_heads();
    if (num_heads_ < 1 || embed_dim_ % num_heads_ != 0) {
      throw UsageError("AttentionPool2d: num_heads " + std::to_string(num_heads_) + " must divide embed_dim " +
                       std::to_string(embed_dim_));
    }
    head_dim_ = embed_dim_ / num_heads_;
  } else {
    head_dim_ = options.head_dim();
    if (head_dim_ < 1 || embed_dim_ % head_dim_ != 0) {
      throw UsageError("AttentionPool2d: head_dim " + std::to_string(head_dim_) + " must divide embed_dim " +
                       std::to_string(embed_dim_));
    }
    num_heads_ = embed_dim_ / head_dim_;
  }
  reset();
}

// Registration order is timm's: cls_token, q / k / v (or qkv), drop, proj,
// pos_embed; the state_dict lists the module's own parameters (cls_token,
// pos_embed) before its children's, as PyTorch's.
void AttentionPool2dImpl::reset() {
  namespace nn = torch::nn;
  const int64_t in = options.in_features();
  if (options.class_token()) cls_token = register_parameter("cls_token", at::zeros({1, embed_dim_}));
  const auto linear = [&](int64_t out) { return layers::Linear(nn::LinearOptions(in, out).bias(options.qkv_bias())); };
  if (options.qkv_separate()) {
    q = register_module("q", linear(embed_dim_));
    k = register_module("k", linear(embed_dim_));
    v = register_module("v", linear(embed_dim_));
  } else {
    qkv = register_module("qkv", linear(3 * embed_dim_));
  }
  drop = register_module("drop", nn::Dropout(options.drop_rate()));
  const std::optional<int64_t> out = options.out_features();
  if (!out || *out > 0) proj = register_module("proj", layers::Linear(embed_dim_, out ? *out : in));
  const auto [h, w] = options.feat_size();
  pos_embed = register_parameter("pos_embed", at::zeros({h * w + 1, in}));
  init_weights();
}

void AttentionPool2dImpl::pretty_print(std::ostream& stream) const {
  stream << "timm::layers::AttentionPool2d(in_features=" << options.in_features() << ", embed_dim=" << embed_dim_
         << ", num_heads=" << num_heads_ << ", feat_size=" << options.feat_size()[0] << "x" << options.feat_size()[1]
         << ", pool_type=" << options.pool_type() << ")";
}

void AttentionPool2dImpl::init_weights() {
  c10::NoGradGuard no_grad;
  const double std = 1.0 / std::sqrt(static_cast<double>(options.in_features()));
  for (layers::Linear* l : {&q, &k, &v, &qkv}) {
    if (!*l) continue;
    trunc_normal_((*l)->weight, 0.0, std);
    if ((*l)->bias.defined()) torch::nn::init::zeros_((*l)->bias);
  }
  trunc_normal_(pos_embed, 0.0, std);
}

at::Tensor AttentionPool2dImpl::forward(const at::Tensor& input, bool pre_logits) {
  if (input.dim() != 4 || input.size(1) != options.in_features()) {
    throw UsageError("AttentionPool2d: expected (N, " + std::to_string(options.in_features()) +
                     ", H, W) features, got shape " + std::string(c10::str(input.sizes())));
  }
  const int64_t batch = input.size(0), h = input.size(2), w = input.size(3);
  const int64_t tokens = h * w + 1;
  at::Tensor x = input.flatten(2).transpose(1, 2);
  const at::Tensor first = cls_token.defined() ? cls_token.expand({batch, -1, -1}) : x.mean(1, /*keepdim=*/true);
  x = at::cat({first, x}, 1);
  x = x + resample_abs_pos_embed(pos_embed.unsqueeze(0), {h, w}, options.feat_size(), /*num_prefix_tokens=*/1);
  at::Tensor qh, kh, vh;
  if (qkv) {
    const auto parts = qkv(x).reshape({batch, tokens, 3, num_heads_, head_dim_}).permute({2, 0, 3, 1, 4}).unbind(0);
    qh = parts[0];
    kh = parts[1];
    vh = parts[2];
  } else {
    qh = q(x).reshape({batch, tokens, num_heads_, head_dim_}).transpose(1, 2);
    kh = k(x).reshape({batch, tokens, num_heads_, head_dim_}).transpose(1, 2);
    vh = v(x).reshape({batch, tokens, num_heads_, head_dim_}).transpose(1, 2);
  }
  x = at::scaled_dot_product_attention(qh, kh, vh);
  x = drop(x.transpose(1, 2).reshape({batch, tokens, -1}));
  if (!pre_logits && proj) x = proj(x);
  if (options.pool_type() == "token") return x.select(1, 0);
  return x.slice(1, 1).reshape({batch, h, w, -1}).permute({0, 3, 1, 2});
}

}  // namespace timm::layers
