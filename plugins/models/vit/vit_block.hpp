// timm's ViT Block (timm/models/vision_transformer.py), shared by the
// plugin's VisionTransformer (vit.cpp) and NaFlexVit (naflexvit.cpp).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <ATen/ATen.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/common.h>
#include <torch/nn/modules/container/any_value.h>
#include <torch/nn/pimpl.h>

#include "timm/layers/attention.hpp"
#include "timm/layers/drop_path.hpp"
#include "timm/layers/layer_scale.hpp"
#include "timm/layers/mlp.hpp"
#include "timm/layers/norm.hpp"

namespace timm::vit {

namespace nn = torch::nn;

struct BlockArgs {
  int64_t dim = 0;
  int64_t num_heads = 0;
  double mlp_ratio = 4.0;
  bool qkv_bias = true;
  bool qk_norm = false;
  std::optional<double> init_values;  // LayerScale when set
  double drop_path = 0.0;
  double norm_eps = 1e-6;          // every LayerNorm of the block (q_norm / k_norm too), timm's norm_layer
  std::string act_layer = "gelu";  // the MLP's activation
  bool swiglu_packed = false;      // timm's SwiGLUPacked: GluMlp, SiLU on the first half
};

// timm's pre-norm transformer Block:
// x + drop_path1(ls1(attn(norm1(x)))), then x + drop_path2(ls2(mlp(norm2(x)))).
class BlockImpl : public nn::Module {
 public:
  explicit BlockImpl(const BlockArgs& a) {
    norm1 = register_module("norm1", layers::LayerNorm(layers::LayerNormOptions(a.dim).eps(a.norm_eps)));
    attn = register_module(
        "attn", layers::Attention(
                    layers::AttentionOptions(a.dim).num_heads(a.num_heads).qkv_bias(a.qkv_bias).qk_norm(a.qk_norm)));
    // timm passes the block's norm_layer to the attention's q_norm / k_norm.
    if (attn->q_norm) {
      attn->q_norm->options.eps(a.norm_eps);
      attn->k_norm->options.eps(a.norm_eps);
    }
    if (a.init_values)
      ls1 = register_module("ls1", layers::LayerScale(layers::LayerScaleOptions(a.dim).init_values(*a.init_values)));
    if (a.drop_path > 0.0) drop_path1 = register_module("drop_path1", layers::DropPath(a.drop_path));
    norm2 = register_module("norm2", layers::LayerNorm(layers::LayerNormOptions(a.dim).eps(a.norm_eps)));
    const auto hidden = static_cast<int64_t>(static_cast<double>(a.dim) * a.mlp_ratio);  // timm's int()
    if (a.swiglu_packed) {
      glu_mlp = register_module(
          "mlp",
          layers::GluMlp(layers::GluMlpOptions(a.dim).hidden_features(hidden).act_layer("silu").gate_last(false)));
    } else {
      mlp =
          register_module("mlp", layers::Mlp(layers::MlpOptions(a.dim).hidden_features(hidden).act_layer(a.act_layer)));
    }
    if (a.init_values)
      ls2 = register_module("ls2", layers::LayerScale(layers::LayerScaleOptions(a.dim).init_values(*a.init_values)));
    if (a.drop_path > 0.0) drop_path2 = register_module("drop_path2", layers::DropPath(a.drop_path));
  }

  // attn_mask: the attention's (timm's Block.forward attn_mask), undefined for none.
  at::Tensor forward(at::Tensor x, const at::Tensor& attn_mask = {}) {
    x = x + residual(attn(norm1(x), attn_mask), ls1, drop_path1);
    const at::Tensor y = norm2(x);
    return x + residual(mlp ? mlp(y) : glu_mlp(y), ls2, drop_path2);
  }

  layers::LayerNorm norm1{nullptr}, norm2{nullptr};
  layers::Attention attn{nullptr};
  layers::Mlp mlp{nullptr};         // null with swiglu_packed
  layers::GluMlp glu_mlp{nullptr};  // registered as "mlp" with swiglu_packed
  layers::LayerScale ls1{nullptr}, ls2{nullptr};
  layers::DropPath drop_path1{nullptr}, drop_path2{nullptr};

 protected:
  FORWARD_HAS_DEFAULT_ARGS({1, torch::nn::AnyValue(at::Tensor())})

 private:
  static at::Tensor residual(at::Tensor y, layers::LayerScale& ls, layers::DropPath& drop_path) {
    if (ls) y = ls(y);
    return drop_path ? drop_path(y) : y;
  }
};
TORCH_MODULE(Block);

// timm's global_pool_nlc: the class token ('token'), or the 'avg', 'avgmax'
// or 'max' reduction over the tokens after the prefix ones (over all of
// them with include_prefix); '' returns the tokens.
inline at::Tensor global_pool_nlc(const at::Tensor& x, const std::string& pool_type, int64_t num_prefix_tokens,
                                  bool include_prefix = false) {
  if (pool_type.empty()) return x;
  if (pool_type == "token") return x.select(1, 0);
  const at::Tensor tokens = include_prefix ? x : x.slice(1, num_prefix_tokens);
  if (pool_type == "avg") return tokens.mean(1);
  if (pool_type == "avgmax") return 0.5 * (tokens.amax(1) + tokens.mean(1));
  return tokens.amax(1);  // "max"
}

}  // namespace timm::vit
