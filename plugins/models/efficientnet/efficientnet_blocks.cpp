#include "efficientnet_blocks.hpp"

#include "timm/base/error.hpp"
#include "timm/layers/mixed_conv2d.hpp"
#include "timm/layers/squeeze_excite.hpp"

namespace timm::efficientnet {
namespace {

namespace nn = torch::nn;

// timm's create_conv2d(in, out, kernel, stride, groups, padding=pad_type).
nn::AnyModule conv(const BlockConfig& c, int64_t in, int64_t out, const KernelSizes& kernel, int64_t stride = 1,
                   int64_t groups = 1) {
  layers::Conv2dArgs args;
  args.stride = stride;
  args.groups = groups;
  return layers::create_mixed_conv2d(in, out, kernel, args, c.pad_type);
}

nn::AnyModule register_any(nn::Module& block, const std::string& name, nn::AnyModule module) {
  block.register_module(name, module.ptr());
  return module;
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
  act1 = register_module("act1", layers::create_act(act_layer));
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
                      efficientnet::conv(c, c.in_chs, c.out_chs, c.kernel_size, c.stride,
                                         num_groups(c.group_size.value_or(0), c.in_chs)));
  bn1 = register_module("bn1", norm_act(c.out_chs, c.act_layer, c.norm));
  maybe_drop_path(*this, drop_path, c.drop_path_rate);
}

at::Tensor ConvBnActImpl::forward(const at::Tensor& x) {
  return residual(bn1(conv.forward(x)), x, has_skip, drop_path);
}

DepthwiseSeparableConvImpl::DepthwiseSeparableConvImpl(const BlockConfig& c) {
  has_skip = c.stride == 1 && c.in_chs == c.out_chs && !c.noskip;
  conv_dw = register_any(
      *this, "conv_dw",
      conv(c, c.in_chs, c.in_chs, c.kernel_size, c.stride, num_groups(c.group_size.value_or(1), c.in_chs)));
  bn1 = register_module("bn1", norm_act(c.in_chs, c.act_layer, c.norm));
  maybe_se(*this, se, c, c.in_chs);
  conv_pw = register_any(*this, "conv_pw", conv(c, c.in_chs, c.out_chs, c.pw_kernel_size));
  bn2 = register_module("bn2", norm_act(c.out_chs, c.act_layer, c.norm, /*apply_act=*/c.pw_act));
  maybe_drop_path(*this, drop_path, c.drop_path_rate);
}

at::Tensor DepthwiseSeparableConvImpl::forward(const at::Tensor& input) {
  const at::Tensor x = apply_se(se, bn1(conv_dw.forward(input)));
  return residual(bn2(conv_pw.forward(x)), input, has_skip, drop_path);
}

InvertedResidualImpl::InvertedResidualImpl(const BlockConfig& c) {
  has_skip = c.in_chs == c.out_chs && c.stride == 1 && !c.noskip;
  const int64_t mid_chs = layers::make_divisible(static_cast<double>(c.in_chs) * c.exp_ratio);
  conv_pw = register_any(*this, "conv_pw", conv(c, c.in_chs, mid_chs, c.exp_kernel_size));
  bn1 = register_module("bn1", norm_act(mid_chs, c.act_layer, c.norm));
  conv_dw =
      register_any(*this, "conv_dw",
                   conv(c, mid_chs, mid_chs, c.kernel_size, c.stride, num_groups(c.group_size.value_or(1), mid_chs)));
  bn2 = register_module("bn2", norm_act(mid_chs, c.act_layer, c.norm));
  maybe_se(*this, se, c, mid_chs);
  conv_pwl = register_any(*this, "conv_pwl", conv(c, mid_chs, c.out_chs, c.pw_kernel_size));
  bn3 = register_module("bn3", norm_act(c.out_chs, c.act_layer, c.norm, /*apply_act=*/false));
  maybe_drop_path(*this, drop_path, c.drop_path_rate);
}

at::Tensor InvertedResidualImpl::forward(const at::Tensor& input) {
  const at::Tensor x = apply_se(se, bn2(conv_dw.forward(bn1(conv_pw.forward(input)))));
  return residual(bn3(conv_pwl.forward(x)), input, has_skip, drop_path);
}

EdgeResidualImpl::EdgeResidualImpl(const BlockConfig& c) {
  has_skip = c.in_chs == c.out_chs && c.stride == 1 && !c.noskip;
  // timm's hack for TF's EdgeTPU definitions: the expansion may be sized from forced input channels.
  const int64_t exp_from = c.force_in_chs > 0 ? c.force_in_chs : c.in_chs;
  const int64_t mid_chs = layers::make_divisible(static_cast<double>(exp_from) * c.exp_ratio);
  // timm counts the groups on the conv's output (mid) channels.
  conv_exp = register_any(
      *this, "conv_exp",
      conv(c, c.in_chs, mid_chs, c.exp_kernel_size, c.stride, num_groups(c.group_size.value_or(0), mid_chs)));
  bn1 = register_module("bn1", norm_act(mid_chs, c.act_layer, c.norm));
  maybe_se(*this, se, c, mid_chs);
  conv_pwl = register_any(*this, "conv_pwl", conv(c, mid_chs, c.out_chs, c.pw_kernel_size));
  bn2 = register_module("bn2", norm_act(c.out_chs, c.act_layer, c.norm, /*apply_act=*/false));
  maybe_drop_path(*this, drop_path, c.drop_path_rate);
}

at::Tensor EdgeResidualImpl::forward(const at::Tensor& input) {
  const at::Tensor x = apply_se(se, bn1(conv_exp.forward(input)));
  return residual(bn2(conv_pwl.forward(x)), input, has_skip, drop_path);
}

}  // namespace timm::efficientnet
