// Global Response Normalization, as timm's layers/grn.py GlobalResponseNorm
// (ConvNeXt-V2): each channel's L2 norm over the spatial dimensions, divided
// by that norm's mean over the channels, scales the input, and
// x + bias + weight * (x * scale) comes out. Channels last (N, H, W, C) by
// default, or NCHW. "weight" and "bias" of shape (dim) start at zero (the
// layer starts as the identity), so state_dict keys equal timm's.
#pragma once

#include <cstdint>

#include <ATen/ATen.h>
#include <torch/arg.h>
#include <torch/nn/cloneable.h>
#include <torch/nn/pimpl.h>

namespace timm::layers {

struct GlobalResponseNormOptions {
  /* implicit */ GlobalResponseNormOptions(int64_t dim) : dim_(dim) {}
  TORCH_ARG(int64_t, dim);
  TORCH_ARG(double, eps) = 1e-6;
  TORCH_ARG(bool, channels_last) = true;  // false: NCHW
};

// Throws UsageError for dim < 1.
class GlobalResponseNormImpl : public torch::nn::Cloneable<GlobalResponseNormImpl> {
 public:
  explicit GlobalResponseNormImpl(const GlobalResponseNormOptions& options);
  void reset() override;
  void pretty_print(std::ostream& stream) const override;
  at::Tensor forward(const at::Tensor& x);

  GlobalResponseNormOptions options;
  at::Tensor weight;
  at::Tensor bias;
};
TORCH_MODULE(GlobalResponseNorm);

}  // namespace timm::layers
