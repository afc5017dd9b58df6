// Layer scale, as timm's layers/layer_scale.py: a learnt per-channel factor
// "gamma" (initialised to init_values) multiplied onto the last dimension
// (LayerScale, channels-last / NLC) or onto dimension 1 of NCHW tensors
// (LayerScale2d). State_dict key: gamma.
#pragma once

#include <cstdint>

#include <ATen/ATen.h>
#include <torch/arg.h>
#include <torch/nn/cloneable.h>
#include <torch/nn/pimpl.h>

namespace timm::layers {

struct LayerScaleOptions {
  /* implicit */ LayerScaleOptions(int64_t dim) : dim_(dim) {}
  TORCH_ARG(int64_t, dim);
  TORCH_ARG(double, init_values) = 1e-5;
};

class LayerScaleImpl : public torch::nn::Cloneable<LayerScaleImpl> {
 public:
  explicit LayerScaleImpl(const LayerScaleOptions& options);
  void reset() override;
  void pretty_print(std::ostream& stream) const override;
  at::Tensor forward(const at::Tensor& x);

  LayerScaleOptions options;
  at::Tensor gamma;
};
TORCH_MODULE(LayerScale);

class LayerScale2dImpl : public torch::nn::Cloneable<LayerScale2dImpl> {
 public:
  explicit LayerScale2dImpl(const LayerScaleOptions& options);
  void reset() override;
  void pretty_print(std::ostream& stream) const override;
  at::Tensor forward(const at::Tensor& x);

  LayerScaleOptions options;
  at::Tensor gamma;
};
TORCH_MODULE(LayerScale2d);

}  // namespace timm::layers
