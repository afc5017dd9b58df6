#include "efficientnet_blocks.hpp"

#include <torch/nn/modules/pooling.h>

#include "timm/base/error.hpp"
#include "timm/layers/any_module.hpp"
#include "timm/layers/blur_pool.hpp"
#include "timm/layers/conv2d_same.hpp"
#include "timm/layers/mixed_conv2d.hpp"
#include "timm/layers/squeeze_excite.hpp"

namespace timm::efficientnet {
namespace {

namespace nn = torch::nn;
using layers::register_any;

// timm's create_conv2d(in, out, kernel, stride, groups, padding=pad_type).
nn::AnyModule conv(const BlockConfig& c, int64_t in, int64_t out, const KernelSizes& kernel, int64_t stride = 1,
                   int64_t groups = 1) {
  layers::Conv2dArgs args;
  args.stride = stride;
  args.groups = groups;
  return layers::create_mixed_conv2d(in, out, kernel, args, c.pad_type);
}

// timm: DropPath(rate) if rate else nn.Identity(); the Identity adds no keys.
void maybe_drop_path(nn::Module& block, layers::DropPath& member, double rate) {
  if (rate > 0.0) member = block.register_module("drop_path", layers::DropPath(rate));
}

// timm: se_layer(channels, act_layer) if se_layer else nn.Identity(); the Identity adds no keys.
void maybe_se(nn::Module& block, nn::AnyModule& member, const BlockConfig& c, int64_t channels) {
  if (!c.make_se) return;
  member = register_any(block, "se", c.make_se(channels));
}

at::Tensor apply_se(nn::AnyModule& se, const at::Tensor& x) { return se.is_empty() ? x : se.forward(x); }

// timm's use_aa: an aa_layer and a strided conv; the conv then runs at stride 1.
bool use_aa(const BlockConfig& c, int64_t stride) { return !c.aa_layer.empty() && stride > 1; }

// timm's create_aa(aa_layer, channels, stride, enable=use_aa): AvgPool2d(stride) for 'avg' (kernel =
// stride, no padding), BlurPool2d(channels, stride, pad_mode='constant') for 'blurpc'; registered
// as "aa", which adds no state_dict keys (BlurPool2d's filter is not registered, as timm's non-persistent buffer).
void maybe_aa(nn::Module& block, nn::AnyModule& member, const BlockConfig& c, int64_t channels, int64_t stride) {
  if (!use_aa(c, stride)) return;
  if (c.aa_layer == "avg") {
    member = register_any(block, "aa", nn::AnyModule(nn::AvgPool2d(nn::AvgPool2dOptions(stride))));
  } else if (c.aa_layer == "blurpc") {
    member = register_any(
        block, "aa",
        nn::AnyModule(layers::BlurPool2d(layers::BlurPool2dOptions(channels).stride(stride).pad_mode("constant"))));
  } else {
    throw UsageError("aa_layer " + in_quotes(c.aa_layer) + " is not supported (expected avg or blurpc)");
  }
}

at::Tensor apply_aa(nn::AnyModule& aa, const at::Tensor& x) { return aa.is_empty() ? x : aa.forward(x); }

// timm: LayerScale2d(out_chs, init) if layer_scale_init_value is not None else nn.Identity().
void maybe_layer_scale(nn::Module& block, layers::LayerScale2d& member, const BlockConfig& c, int64_t channels) {
  if (c.layer_scale_init_value) {
    member = block.register_module(
        "layer_scale",
        layers::LayerScale2d(layers::LayerScaleOptions(channels).init_values(*c.layer_scale_init_value)));
  }
}

at::Tensor residual(const at::Tensor& x, const at::Tensor& shortcut, bool has_skip, layers::DropPath& drop_path) {
  if (!has_skip) return x;
  return (drop_path ? drop_path(x) : x) + shortcut;
}

}  // namespace

layers::BatchNormAct2d norm_act(int64_t channels, const std::string& act, const NormArgs& norm, bool apply_act) {
  return layers::BatchNormAct2d(
      layers::BatchNormAct2dOptions(channels).act_layer(act).apply_act(apply_act).eps(norm.eps).momentum(
          norm.momentum));
}

int64_t num_groups(std::optional<int64_t> group_size, int64_t channels) {
  if (!group_size || *group_size == 0) return 1;
  if (*group_size < 0 || channels % *group_size != 0) {
    throw UsageError("group_size " + std::to_string(*group_size) + " must divide the block's " +
                     std::to_string(channels) + " channels");
  }
  return channels / *group_size;
}

SqueezeExciteImpl::SqueezeExciteImpl(int64_t in_chs, int64_t rd_channels, const std::string& act_layer,
                                     const std::string& gate_layer) {
  conv_reduce = register_module("conv_reduce", nn::Conv2d(nn::Conv2dOptions(in_chs, rd_channels, 1).bias(true)));
  // In place, as timm's: it overwrites conv_reduce's fresh output.
  act1 = register_module("act1", layers::create_act(act_layer, /*inplace=*/true));
  conv_expand = register_module("conv_expand", nn::Conv2d(nn::Conv2dOptions(rd_channels, in_chs, 1).bias(true)));
  gate = register_module("gate", layers::create_act(gate_layer));
}

at::Tensor SqueezeExciteImpl::forward(const at::Tensor& x) {
  at::Tensor x_se = x.mean({2, 3}, /*keepdim=*/true);
  x_se = conv_expand(act1(conv_reduce(x_se)));
  return x * gate(x_se);
}

ConvBnActImpl::ConvBnActImpl(const BlockConfig& c) {
  has_skip = c.skip && c.stride == 1 && c.in_chs == c.out_chs;
  conv = register_any(*this, "conv",
                      efficientnet::conv(c, c.in_chs, c.out_chs, c.kernel_size, use_aa(c, c.stride) ? 1 : c.stride,
                                         num_groups(c.group_size.value_or(0), c.in_chs)));
  bn1 = register_module("bn1", norm_act(c.out_chs, c.act_layer, c.norm));
  maybe_aa(*this, aa, c, c.out_chs, c.stride);
  maybe_drop_path(*this, drop_path, c.drop_path_rate);
}

at::Tensor ConvBnActImpl::forward(const at::Tensor& x) {
  return residual(apply_aa(aa, bn1(conv.forward(x))), x, has_skip, drop_path);
}

DepthwiseSeparableConvImpl::DepthwiseSeparableConvImpl(const BlockConfig& c) {
  has_skip = c.stride == 1 && c.in_chs == c.out_chs && !c.noskip;
  conv_dw = register_any(*this, "conv_dw",
                         conv(c, c.in_chs, c.in_chs, c.kernel_size, use_aa(c, c.stride) ? 1 : c.stride,
                              num_groups(c.group_size.value_or(1), c.in_chs)));
  bn1 = register_module("bn1", norm_act(c.in_chs, c.act_layer, c.norm));
  maybe_aa(*this, aa, c, c.in_chs, c.stride);
  maybe_se(*this, se, c, c.in_chs);
  conv_pw = register_any(*this, "conv_pw", conv(c, c.in_chs, c.out_chs, c.pw_kernel_size));
  bn2 = register_module("bn2", norm_act(c.out_chs, c.act_layer, c.norm, /*apply_act=*/c.pw_act));
  maybe_drop_path(*this, drop_path, c.drop_path_rate);
}

at::Tensor DepthwiseSeparableConvImpl::forward(const at::Tensor& input) {
  const at::Tensor x = apply_se(se, apply_aa(aa, bn1(conv_dw.forward(input))));
  return residual(bn2(conv_pw.forward(x)), input, has_skip, drop_path);
}

InvertedResidualImpl::InvertedResidualImpl(const BlockConfig& c) {
  has_skip = c.in_chs == c.out_chs && c.stride == 1 && !c.noskip;
  const int64_t mid_chs = layers::make_divisible(static_cast<double>(c.in_chs) * c.exp_ratio);
  conv_pw = register_any(*this, "conv_pw", conv(c, c.in_chs, mid_chs, c.exp_kernel_size));
  bn1 = register_module("bn1", norm_act(mid_chs, c.act_layer, c.norm));
  conv_dw = register_any(*this, "conv_dw",
                         conv(c, mid_chs, mid_chs, c.kernel_size, use_aa(c, c.stride) ? 1 : c.stride,
                              num_groups(c.group_size.value_or(1), mid_chs)));
  bn2 = register_module("bn2", norm_act(mid_chs, c.act_layer, c.norm));
  maybe_aa(*this, aa, c, mid_chs, c.stride);
  maybe_se(*this, se, c, mid_chs);
  conv_pwl = register_any(*this, "conv_pwl", conv(c, mid_chs, c.out_chs, c.pw_kernel_size));
  bn3 = register_module("bn3", norm_act(c.out_chs, c.act_layer, c.norm, /*apply_act=*/false));
  maybe_drop_path(*this, drop_path, c.drop_path_rate);
}

at::Tensor InvertedResidualImpl::forward(const at::Tensor& input) {
  const at::Tensor x = apply_se(se, apply_aa(aa, bn2(conv_dw.forward(bn1(conv_pw.forward(input))))));
  return residual(bn3(conv_pwl.forward(x)), input, has_skip, drop_path);
}

EdgeResidualImpl::EdgeResidualImpl(const BlockConfig& c) {
  has_skip = c.in_chs == c.out_chs && c.stride == 1 && !c.noskip;
  // timm's hack for TF's EdgeTPU definitions: the expansion may be sized from forced input channels.
  const int64_t exp_from = c.force_in_chs > 0 ? c.force_in_chs : c.in_chs;
  const int64_t mid_chs = layers::make_divisible(static_cast<double>(exp_from) * c.exp_ratio);
  // timm counts the groups on the conv's output (mid) channels.
  conv_exp = register_any(*this, "conv_exp",
                          conv(c, c.in_chs, mid_chs, c.exp_kernel_size, use_aa(c, c.stride) ? 1 : c.stride,
                               num_groups(c.group_size.value_or(0), mid_chs)));
  bn1 = register_module("bn1", norm_act(mid_chs, c.act_layer, c.norm));
  maybe_aa(*this, aa, c, mid_chs, c.stride);
  maybe_se(*this, se, c, mid_chs);
  conv_pwl = register_any(*this, "conv_pwl", conv(c, mid_chs, c.out_chs, c.pw_kernel_size));
  bn2 = register_module("bn2", norm_act(c.out_chs, c.act_layer, c.norm, /*apply_act=*/false));
  maybe_drop_path(*this, drop_path, c.drop_path_rate);
}

at::Tensor EdgeResidualImpl::forward(const at::Tensor& input) {
  const at::Tensor x = apply_se(se, apply_aa(aa, bn1(conv_exp.forward(input))));
  return residual(bn2(conv_pwl.forward(x)), input, has_skip, drop_path);
}

ConvNormActImpl::ConvNormActImpl(const BlockConfig& c, int64_t in_chs, int64_t out_chs, int64_t kernel_size,
                                 int64_t stride, int64_t groups, bool apply_act, bool use_aa_layer) {
  const bool aa_here = use_aa_layer && use_aa(c, stride);
  conv =
      register_any(*this, "conv", efficientnet::conv(c, in_chs, out_chs, {kernel_size}, aa_here ? 1 : stride, groups));
  bn = register_module("bn", norm_act(out_chs, c.act_layer, c.norm, apply_act));
  if (aa_here) maybe_aa(*this, aa, c, out_chs, stride);
}

at::Tensor ConvNormActImpl::forward(const at::Tensor& x) { return apply_aa(aa, bn(conv.forward(x))); }

UniversalInvertedResidualImpl::UniversalInvertedResidualImpl(const BlockConfig& c) {
  has_skip = c.in_chs == c.out_chs && c.stride == 1 && !c.noskip;
  const int64_t k_start = c.dw_kernel_size_start;
  const int64_t k_mid = c.dw_kernel_size_mid;
  const int64_t k_end = c.dw_kernel_size_end;
  if (c.stride > 1 && k_start == 0 && k_mid == 0 && k_end == 0) {
    throw UsageError("UniversalInvertedResidual: a strided block needs a depthwise conv (a, k or p > 0)");
  }
  const int64_t group_size = c.group_size.value_or(1);
  if (k_start > 0) {
    dw_start = register_module("dw_start", ConvNormAct(c, c.in_chs, c.in_chs, k_start, k_mid > 0 ? 1 : c.stride,
                                                       num_groups(group_size, c.in_chs), /*apply_act=*/false,
                                                       /*use_aa_layer=*/true));
  }
  const int64_t mid_chs = layers::make_divisible(static_cast<double>(c.in_chs) * c.exp_ratio);
  pw_exp = register_module("pw_exp", ConvNormAct(c, c.in_chs, mid_chs, 1, 1, 1, /*apply_act=*/true, false));
  if (k_mid > 0) {
    dw_mid =
        register_module("dw_mid", ConvNormAct(c, mid_chs, mid_chs, k_mid, c.stride, num_groups(group_size, mid_chs),
                                              /*apply_act=*/true, /*use_aa_layer=*/true));
  }
  maybe_se(*this, se, c, mid_chs);
  pw_proj = register_module("pw_proj", ConvNormAct(c, mid_chs, c.out_chs, 1, 1, 1, /*apply_act=*/false, false));
  if (k_end > 0) {
    const int64_t end_stride = k_start == 0 && k_mid == 0 ? c.stride : 1;
    if (end_stride > 1 && !c.aa_layer.empty()) {
      throw UsageError("UniversalInvertedResidual: a strided dw_end does not take an aa_layer");
    }
    dw_end = register_module("dw_end", ConvNormAct(c, c.out_chs, c.out_chs, k_end, end_stride,
                                                   num_groups(group_size, c.out_chs), /*apply_act=*/false, false));
  }
  maybe_layer_scale(*this, layer_scale, c, c.out_chs);
  maybe_drop_path(*this, drop_path, c.drop_path_rate);
}

at::Tensor UniversalInvertedResidualImpl::forward(const at::Tensor& input) {
  at::Tensor x = dw_start ? dw_start(input) : input;
  x = pw_exp(x);
  if (dw_mid) x = dw_mid(x);
  x = pw_proj(apply_se(se, x));
  if (dw_end) x = dw_end(x);
  if (layer_scale) x = layer_scale(x);
  return residual(x, input, has_skip, drop_path);
}

MobileAttentionImpl::MobileAttentionImpl(const BlockConfig& c) {
  has_skip = c.stride == 1 && c.in_chs == c.out_chs && !c.noskip;
  // As timm's, the block's stride only turns the residual off: query strides are not supported here.
  if (c.kernel_size.size() != 1) throw UsageError("MobileAttention: the kv down_conv takes one kernel size");
  norm = register_module("norm", norm_act(c.in_chs, c.act_layer, c.norm, /*apply_act=*/false));
  attn = register_module("attn", layers::MultiQueryAttention2d(layers::MultiQueryAttention2dOptions(c.in_chs)
                                                                   .dim_out(c.out_chs)
                                                                   .num_heads(c.num_heads)
                                                                   .key_dim(c.key_dim)
                                                                   .value_dim(c.value_dim)
                                                                   .kv_stride(c.kv_stride)
                                                                   .dw_kernel_size(c.kernel_size.at(0))
                                                                   .padding(c.pad_type)
                                                                   .norm_eps(c.norm.eps)
                                                                   .norm_momentum(c.norm.momentum)));
  maybe_layer_scale(*this, layer_scale, c, c.out_chs);
  maybe_drop_path(*this, drop_path, c.drop_path_rate);
}

at::Tensor MobileAttentionImpl::forward(const at::Tensor& input) {
  at::Tensor x = attn(norm(input));
  if (layer_scale) x = layer_scale(x);
  return residual(x, input, has_skip, drop_path);
}

}  // namespace timm::efficientnet
