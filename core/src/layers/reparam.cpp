#include "timm/layers/reparam.hpp"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include "timm/base/error.hpp"

namespace timm::layers {

namespace {

BatchNormState running_state(const at::Tensor& weight, const at::Tensor& bias, const at::Tensor& mean,
                             const at::Tensor& var, double eps) {
  BatchNormState state;
  state.weight = weight;
  state.bias = bias;
  state.running_mean = mean;
  state.running_var = var;
  state.eps = eps;
  state.training = false;
  return state;
}

}  // namespace

ConvWeights fuse_bn(const at::Tensor& kernel, const BatchNormState& bn) {
  if (!bn.running_mean.defined() || !bn.weight.defined()) {
    throw Error("fuse_bn: the BatchNorm needs running statistics and affine parameters to be folded into a conv");
  }
  c10::NoGradGuard no_grad;
  const at::Tensor std = (bn.running_var + bn.eps).sqrt();
  const at::Tensor scale = bn.weight / std;
  return {kernel * scale.reshape({-1, 1, 1, 1}), bn.bias - bn.running_mean * scale};
}

ConvWeights fuse_bn(const at::Tensor& kernel, BatchNormAct2dImpl& bn) {
  return fuse_bn(kernel, running_state(bn.weight, bn.bias, bn.running_mean, bn.running_var, bn.options.eps()));
}

ConvWeights fuse_bn(const at::Tensor& kernel, BatchNorm2dImpl& bn) {
  return fuse_bn(kernel, running_state(bn.weight, bn.bias, bn.running_mean, bn.running_var, bn.options.eps()));
}

ConvWeights fuse_conv_bn(ConvNormActImpl& branch) {
  if (!branch.bn) throw Error("fuse_conv_bn: the ConvNormAct has no BatchNorm to fold");
  if (branch.conv->options.bias()) throw Error("fuse_conv_bn: the ConvNormAct's conv has a bias; expected none");
  return fuse_bn(branch.conv->weight, *branch.bn);
}

at::Tensor identity_kernel(int64_t channels, int64_t groups, int64_t kernel_size, const at::TensorOptions& options) {
  if (groups < 1 || channels % groups != 0) {
    throw Error("identity_kernel: " + std::to_string(channels) + " channels do not split into " +
                std::to_string(groups) + " groups");
  }
  const int64_t input_dim = channels / groups;
  at::Tensor kernel = at::zeros({channels, input_dim, kernel_size, kernel_size}, options);
  const at::Tensor rows = at::arange(channels, options.dtype(at::kLong));
  kernel.index_put_({rows, rows.remainder(input_dim), kernel_size / 2, kernel_size / 2}, at::ones({}, options));
  return kernel;
}

at::Tensor pad_kernel_to(const at::Tensor& kernel, int64_t kernel_size) {
  const int64_t pad = (kernel_size - kernel.size(-1)) / 2;
  if (pad < 0) throw Error("pad_kernel_to: kernel is larger than " + std::to_string(kernel_size));
  return pad == 0 ? kernel : at::constant_pad_nd(kernel, {pad, pad, pad, pad});
}

ConvWeights& operator+=(ConvWeights& sum, const ConvWeights& branch) {
  sum.weight = sum.weight.defined() ? sum.weight + branch.weight : branch.weight;
  sum.bias = sum.bias.defined() ? sum.bias + branch.bias : branch.bias;
  return sum;
}

torch::nn::Conv2d make_reparam_conv(const torch::nn::Conv2dImpl& like, const ConvWeights& weights) {
  const auto& o = like.options;
  torch::nn::Conv2d conv(torch::nn::Conv2dOptions(o.in_channels(), o.out_channels(), o.kernel_size())
                             .stride(o.stride())
                             .padding(o.padding())
                             .dilation(o.dilation())
                             .groups(o.groups())
                             .bias(true)
                             .padding_mode(o.padding_mode()));
  c10::NoGradGuard no_grad;
  conv->weight.copy_(weights.weight);
  conv->bias.copy_(weights.bias);
  return conv;
}

torch::nn::Conv2d make_reparam_conv(torch::nn::Conv2dOptions options, const ConvWeights& weights) {
  torch::nn::Conv2d conv(options.bias(true));
  c10::NoGradGuard no_grad;
  conv->weight.copy_(weights.weight);
  conv->bias.copy_(weights.bias);
  return conv;
}

int64_t reparameterize_children(torch::nn::Module& module, const std::function<bool(torch::nn::Module&)>& fold) {
  int64_t folded = 0;
  // A copy of the children: a fold re-registers its own children, never its parent's.
  for (const auto& child : module.named_children()) {
    if (fold(*child.value())) ++folded;
    folded += reparameterize_children(*child.value(), fold);
  }
  return folded;
}

}  // namespace timm::layers
