// Layer normalisation as timm's layers/norm.py: LayerNorm over the last
// dimension (channels-last tensors, e.g. ViT tokens NLC or NHWC) and
// LayerNorm2d over the channels of NCHW tensors (permute, normalise,
// permute back, as timm does). Both default to timm's eps 1e-6 and hold
// "weight" (ones) and "bias" (zeros) of shape (num_channels) when affine, so
// state_dict keys equal timm's.
#pragma once

#include <cstdint>

#include <ATen/ATen.h>
#include <torch/arg.h>
#include <torch/nn/cloneable.h>
#include <torch/nn/pimpl.h>

namespace timm::layers {

struct LayerNormOptions {
  /* implicit */ LayerNormOptions(int64_t num_channels) : num_channels_(num_channels) {}
  TORCH_ARG(int64_t, num_channels);
  TORCH_ARG(double, eps) = 1e-6;
  TORCH_ARG(bool, affine) = true;
};

// Normalises over the last dimension, which must be num_channels.
class LayerNormImpl : public torch::nn::Cloneable<LayerNormImpl> {
 public:
  explicit LayerNormImpl(const LayerNormOptions& options);
  void reset() override;
  void pretty_print(std::ostream& stream) const override;
  at::Tensor forward(const at::Tensor& x);

  LayerNormOptions options;
  at::Tensor weight;  // undefined unless affine
  at::Tensor bias;
};
TORCH_MODULE(LayerNorm);

// Normalises NCHW tensors over C (dimension 1).
class LayerNorm2dImpl : public torch::nn::Cloneable<LayerNorm2dImpl> {
 public:
  explicit LayerNorm2dImpl(const LayerNormOptions& options);
  void reset() override;
  void pretty_print(std::ostream& stream) const override;
  at::Tensor forward(const at::Tensor& x);

  LayerNormOptions options;
  at::Tensor weight;
  at::Tensor bias;
};
TORCH_MODULE(LayerNorm2d);

}  // namespace timm::layers
