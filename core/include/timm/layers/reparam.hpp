// Inference-time re-parameterisation, the building blocks of timm's
// reparameterize() methods (RepVGG's RepVggBlock, MobileOne / FastViT,
// GhostNetV3): parallel conv + BatchNorm branches and identity BatchNorms,
// each linear in eval mode, folded into one convolution.
//
// Every fold uses the BatchNorm's running statistics (eval-mode arithmetic),
// as timm's _fuse_bn_tensor does, whatever the module's training flag.
#pragma once

#include <cstdint>
#include <functional>

#include <ATen/core/Tensor.h>
#include <c10/core/TensorOptions.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/conv.h>

#include "timm/layers/batch_norm.hpp"
#include "timm/layers/norm_act.hpp"

namespace timm::layers {

// A convolution's weight and bias as a fold produces them.
struct ConvWeights {
  at::Tensor weight;
  at::Tensor bias;
};

// `kernel` followed by the BatchNorm `bn` (its running statistics) as one
// convolution: weight = kernel * gamma / sqrt(var + eps) per output channel,
// bias = beta - mean * gamma / sqrt(var + eps). timm's _fuse_bn_tensor.
// Throws Error when `bn` has no running statistics or no affine parameters.
ConvWeights fuse_bn(const at::Tensor& kernel, const BatchNormState& bn);
ConvWeights fuse_bn(const at::Tensor& kernel, BatchNormAct2dImpl& bn);
ConvWeights fuse_bn(const at::Tensor& kernel, BatchNorm2dImpl& bn);

// A ConvNormAct branch (conv without bias, then bn, no act) as one conv.
ConvWeights fuse_conv_bn(ConvNormActImpl& branch);

// The identity map as a grouped convolution kernel of shape (channels,
// channels / groups, kernel_size, kernel_size): a 1 at each output channel's
// own input channel and the kernel's centre. An identity BatchNorm branch is
// fuse_bn(identity_kernel(...), bn).
at::Tensor identity_kernel(int64_t channels, int64_t groups, int64_t kernel_size, const at::TensorOptions& options);

// `kernel` (..., k, k) zero-padded on every side to (..., kernel_size,
// kernel_size), centred: a smaller branch summed into a larger one.
at::Tensor pad_kernel_to(const at::Tensor& kernel, int64_t kernel_size);

// The sum of branches: weights and biases added (all the same shape).
ConvWeights& operator+=(ConvWeights& sum, const ConvWeights& branch);

// timm's reparam_conv: a Conv2d with `like`'s channels, kernel, stride,
// padding, dilation and groups, with a bias, holding `weights` (copied, as
// new parameters that require grad).
torch::nn::Conv2d make_reparam_conv(const torch::nn::Conv2dImpl& like, const ConvWeights& weights);

// make_reparam_conv for a fold with no conv of the folded shape to copy (a
// branch of an identity BatchNorm only, a token mixer): a Conv2d with
// `options` (bias forced on; e.g. create_conv2d_options' for timm's
// create_conv2d) holding `weights`, copied as new parameters that require grad.
torch::nn::Conv2d make_reparam_conv(torch::nn::Conv2dOptions options, const ConvWeights& weights);

// timm's reparameterize_model walk (timm/models/_manipulate.py): each child of
// `module`, in registration order, is offered to `fold`, which folds it in
// place where it is one of the family's re-parameterisable modules and returns
// whether it folded anything (false for other modules and for a module
// already folded); the walk then descends into that child's children as the
// fold left them, so the branches a fold removed are never visited (a module
// that folds its own re-parameterisable children, as timm's RepMixer, counts
// once). Returns the number of folds: a model's reparameterize().
int64_t reparameterize_children(torch::nn::Module& module, const std::function<bool(torch::nn::Module&)>& fold);

}  // namespace timm::layers
