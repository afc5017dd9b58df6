// timm's EfficientNet / MobileNet blocks (timm/models/_efficientnet_blocks.py)
// with timm's attribute names, so state_dict keys match: SqueezeExcite
// (conv_reduce, act1, conv_expand, gate), ConvBnAct (conv, bn1),
// DepthwiseSeparableConv (conv_dw, bn1, se, conv_pw, bn2), InvertedResidual
// (conv_pw, bn1, conv_dw, bn2, se, conv_pwl, bn3) and EdgeResidual, timm's
// FusedMBConv of EfficientNetV2 (conv_exp, bn1, se, conv_pwl, bn2). Norms are
// the SDK's BatchNormAct2d (timm's norm_act_layer); a block without SE has no
// "se" child, as timm's nn.Identity adds no keys; the SE is this file's
// SqueezeExcite or the SDK's GlobalContext (se_layer='gc'), made by the
// builder. The convs are timm's create_conv2d(padding=pad_type): a Conv2d,
// or with pad_type 'same' (the tf_ ports) a Conv2dSame where the padding
// depends on the input, or with several kernel sizes (MixNet) the SDK's
// MixedConv2d, so they are held as AnyModules. MobileNetV4 adds
// UniversalInvertedResidual (dw_start, pw_exp, dw_mid, se, pw_proj, dw_end,
// layer_scale; each a ConvNormAct: conv, bn) and MobileAttention (norm, attn:
// the SDK's MultiQueryAttention2d, layer_scale); with an aa_layer
// ('avg': AvgPool2d(stride), 'blurpc': the SDK's BlurPool2d, zero padded) the
// strided convs of ConvBnAct, DS, IR, ER and UIR run at stride 1 and the
// "aa" child (no keys) downsamples after the norm. Internal to this plugin.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/container/any.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/pimpl.h>

#include "timm/layers/activations.hpp"
#include "timm/layers/attention2d.hpp"
#include "timm/layers/drop_path.hpp"
#include "timm/layers/layer_scale.hpp"
#include "timm/layers/norm_act.hpp"

namespace timm::efficientnet {

// timm's SqueezeExcite(in_chs, rd_channels, act_layer, gate_layer): mean over
// H, W -> conv_reduce (1x1, bias) -> act1 -> conv_expand (1x1, bias) -> gate,
// multiplied onto x. The caller computes rd_channels (the rounding differs per family).
class SqueezeExciteImpl : public torch::nn::Module {
 public:
  SqueezeExciteImpl(int64_t in_chs, int64_t rd_channels, const std::string& act_layer, const std::string& gate_layer);
  at::Tensor forward(const at::Tensor& x);

  torch::nn::Conv2d conv_reduce{nullptr};
  layers::Activation act1{nullptr};
  torch::nn::Conv2d conv_expand{nullptr};
  layers::Activation gate{nullptr};
};
TORCH_MODULE(SqueezeExcite);

// BatchNorm settings of every norm in the net (timm's resolve_bn_args: bn_eps, bn_momentum).
struct NormArgs {
  double eps = 1e-5;
  double momentum = 0.1;
};

// A conv's kernel size as timm's block strings give it: one entry is timm's
// int kernel (one conv), more a list (a MixedConv2d, e.g. "k3.5.7", "a1.1").
using KernelSizes = std::vector<int64_t>;

// The resolved arguments of one block, as timm's builder passes them.
struct BlockConfig {
  int64_t in_chs = 0;
  int64_t out_chs = 0;
  int64_t stride = 1;
  KernelSizes kernel_size = {3};      // ConvBnAct's conv, the dw conv of DS / IR
  KernelSizes exp_kernel_size = {1};  // InvertedResidual's conv_pw, EdgeResidual's conv_exp
  KernelSizes pw_kernel_size = {1};   // conv_pw (DS) / conv_pwl (IR, ER)
  double exp_ratio = 1.0;
  std::optional<int64_t> group_size;  // block default when unset: 1 (depthwise) for DS / IR, 0 (dense) for ConvBnAct
  bool noskip = false;
  bool skip = false;         // ConvBnAct only
  bool pw_act = false;       // DS only
  int64_t force_in_chs = 0;  // ER only: mid channels from these (already rounded) instead of in_chs
  std::string act_layer;
  std::string pad_type;  // timm's pad_type: '' (symmetric) or 'same' (TF)
  // timm's se_layer, when the block has SE: the module for the channels it sees (timm's se_layer(chs, act_layer)).
  std::function<torch::nn::AnyModule(int64_t)> make_se;
  double drop_path_rate = 0.0;
  NormArgs norm;
  // timm's aa_layer: '' (none), 'avg' or 'blurpc'; only strided convs are anti-aliased.
  std::string aa_layer;
  // timm's layer_scale_init_value: a LayerScale2d "layer_scale" in UIR / MobileAttention blocks when set.
  std::optional<double> layer_scale_init_value;
  // UniversalInvertedResidual's dw kernels ("a", "k", "p"; 0: no such conv).
  int64_t dw_kernel_size_start = 0;
  int64_t dw_kernel_size_mid = 3;
  int64_t dw_kernel_size_end = 0;
  // MobileAttention's multi-query attention ("h", "d", "v"; "k" is the kv down_conv's kernel).
  int64_t num_heads = 8;
  int64_t key_dim = 64;
  int64_t value_dim = 64;
  int64_t kv_stride = 1;
};

// timm's norm_act_layer(channels, apply_act): a BatchNormAct2d with `norm`'s eps and momentum.
layers::BatchNormAct2d norm_act(int64_t channels, const std::string& act, const NormArgs& norm, bool apply_act = true);

class ConvBnActImpl : public torch::nn::Module {
 public:
  explicit ConvBnActImpl(const BlockConfig& config);
  at::Tensor forward(const at::Tensor& x);

  torch::nn::AnyModule conv;  // Conv2d, Conv2dSame or MixedConv2d
  layers::BatchNormAct2d bn1{nullptr};
  torch::nn::AnyModule aa;  // empty without anti-aliasing
  layers::DropPath drop_path{nullptr};
  bool has_skip = false;
};
TORCH_MODULE(ConvBnAct);

class DepthwiseSeparableConvImpl : public torch::nn::Module {
 public:
  explicit DepthwiseSeparableConvImpl(const BlockConfig& config);
  at::Tensor forward(const at::Tensor& x);

  torch::nn::AnyModule conv_dw;  // Conv2d, Conv2dSame or MixedConv2d
  layers::BatchNormAct2d bn1{nullptr};
  torch::nn::AnyModule aa;       // empty without anti-aliasing
  torch::nn::AnyModule se;       // empty without SE
  torch::nn::AnyModule conv_pw;  // Conv2d, Conv2dSame or MixedConv2d
  layers::BatchNormAct2d bn2{nullptr};
  layers::DropPath drop_path{nullptr};
  bool has_skip = false;
};
TORCH_MODULE(DepthwiseSeparableConv);

class InvertedResidualImpl : public torch::nn::Module {
 public:
  explicit InvertedResidualImpl(const BlockConfig& config);
  at::Tensor forward(const at::Tensor& x);

  torch::nn::AnyModule conv_pw;  // Conv2d, Conv2dSame or MixedConv2d
  layers::BatchNormAct2d bn1{nullptr};
  torch::nn::AnyModule conv_dw;  // Conv2d, Conv2dSame or MixedConv2d
  layers::BatchNormAct2d bn2{nullptr};
  torch::nn::AnyModule aa;        // empty without anti-aliasing
  torch::nn::AnyModule se;        // empty without SE
  torch::nn::AnyModule conv_pwl;  // Conv2d, Conv2dSame or MixedConv2d
  layers::BatchNormAct2d bn3{nullptr};
  layers::DropPath drop_path{nullptr};
  bool has_skip = false;
};
TORCH_MODULE(InvertedResidual);

// timm's EdgeResidual (FusedMBConv): a dense k x k expansion conv with the
// stride, SE on the expanded channels, a 1x1 linear projection; residual
// when the shape is kept and not noskip.
class EdgeResidualImpl : public torch::nn::Module {
 public:
  explicit EdgeResidualImpl(const BlockConfig& config);
  at::Tensor forward(const at::Tensor& x);

  torch::nn::AnyModule conv_exp;  // Conv2d, Conv2dSame or MixedConv2d
  layers::BatchNormAct2d bn1{nullptr};
  torch::nn::AnyModule aa;        // empty without anti-aliasing
  torch::nn::AnyModule se;        // empty without SE
  torch::nn::AnyModule conv_pwl;  // Conv2d, Conv2dSame or MixedConv2d
  layers::BatchNormAct2d bn2{nullptr};
  layers::DropPath drop_path{nullptr};
  bool has_skip = false;
};
TORCH_MODULE(EdgeResidual);

// timm's ConvNormAct(in, out, k, stride, groups, padding, apply_act, aa_layer):
// conv (no bias), bn (BatchNormAct2d), then the aa child when strided with an aa_layer.
class ConvNormActImpl : public torch::nn::Module {
 public:
  ConvNormActImpl(const BlockConfig& config, int64_t in_chs, int64_t out_chs, int64_t kernel_size, int64_t stride,
                  int64_t groups, bool apply_act, bool use_aa_layer);
  at::Tensor forward(const at::Tensor& x);

  torch::nn::AnyModule conv;  // Conv2d or Conv2dSame
  layers::BatchNormAct2d bn{nullptr};
  torch::nn::AnyModule aa;  // empty without anti-aliasing
};
TORCH_MODULE(ConvNormAct);

// timm's UniversalInvertedResidual (MobileNetV4's UIB): optional depthwise
// dw_start (no act), pw_exp, optional depthwise dw_mid, se, pw_proj (no act),
// optional depthwise dw_end (no act), layer_scale; the stride goes to the
// first dw conv present. Residual when the shape is kept and not noskip.
class UniversalInvertedResidualImpl : public torch::nn::Module {
 public:
  explicit UniversalInvertedResidualImpl(const BlockConfig& config);
  at::Tensor forward(const at::Tensor& x);

  ConvNormAct dw_start{nullptr};  // null: timm's nn.Identity
  ConvNormAct pw_exp{nullptr};
  ConvNormAct dw_mid{nullptr};  // null: timm's nn.Identity
  torch::nn::AnyModule se;      // empty without SE
  ConvNormAct pw_proj{nullptr};
  ConvNormAct dw_end{nullptr};                // null: timm's nn.Identity
  layers::LayerScale2d layer_scale{nullptr};  // null without layer scale
  layers::DropPath drop_path{nullptr};
  bool has_skip = false;
};
TORCH_MODULE(UniversalInvertedResidual);

// timm's MobileAttention with use_multi_query: norm (BatchNormAct2d without
// act), attn (the SDK's MultiQueryAttention2d: num_heads, key_dim = value_dim,
// kv_stride, the "k" kernel for its kv down_conv, the block's padding and
// BatchNorm args; no query strides, as timm's builder), layer_scale,
// residual when the shape is kept and not noskip.
class MobileAttentionImpl : public torch::nn::Module {
 public:
  explicit MobileAttentionImpl(const BlockConfig& config);
  at::Tensor forward(const at::Tensor& x);

  layers::BatchNormAct2d norm{nullptr};
  layers::MultiQueryAttention2d attn{nullptr};
  layers::LayerScale2d layer_scale{nullptr};  // null without layer scale
  layers::DropPath drop_path{nullptr};
  bool has_skip = false;
};
TORCH_MODULE(MobileAttention);

// timm's num_groups(group_size, channels): 1 for 0 / unset, else channels / group_size.
int64_t num_groups(std::optional<int64_t> group_size, int64_t channels);

}  // namespace timm::efficientnet
