// RMS and "simple" normalisation as timm's layers/norm.py (default, non-fast
// path of layers/fast_norm.py): RmsNorm over the last dimension and RmsNorm2d
// over the channels of NCHW tensors (x * rsqrt(mean(x^2) + eps) * weight);
// SimpleNorm / SimpleNorm2d likewise with the unbiased variance in place of
// the mean square (x * rsqrt(var(x) + eps) * weight, no mean subtracted).
// All default to timm's eps 1e-6 and hold "weight" (ones) of shape
// (num_channels) when affine, and no bias, so state_dict keys equal timm's.
// Each follows timm's fast norm (fast_norm.hpp) as its fast_norm option says.
#pragma once

#include <cstdint>
#include <string>

#include <ATen/ATen.h>
#include <torch/arg.h>
#include <torch/nn/cloneable.h>
#include <torch/nn/modules/container/any.h>
#include <torch/nn/pimpl.h>

#include "timm/layers/fast_norm.hpp"

namespace timm::layers {

struct RmsNormOptions {
  /* implicit */ RmsNormOptions(int64_t num_channels) : num_channels_(num_channels) {}
  TORCH_ARG(int64_t, num_channels);
  TORCH_ARG(double, eps) = 1e-6;
  TORCH_ARG(bool, affine) = true;
  TORCH_ARG(bool, fast_norm) = is_fast_norm();
};

// timm's RmsNorm: normalises over the last dimension, which must be num_channels.
class RmsNormImpl : public torch::nn::Cloneable<RmsNormImpl>, public FastNormLayer {
 public:
  explicit RmsNormImpl(const RmsNormOptions& options);
  void reset() override;
  void pretty_print(std::ostream& stream) const override;
  at::Tensor forward(const at::Tensor& x);
  bool fast_norm() const override { return options.fast_norm(); }

  RmsNormOptions options;
  at::Tensor weight;  // undefined unless affine
};
TORCH_MODULE(RmsNorm);

// timm's RmsNorm2d: normalises NCHW tensors over C (dimension 1).
class RmsNorm2dImpl : public torch::nn::Cloneable<RmsNorm2dImpl>, public FastNormLayer {
 public:
  explicit RmsNorm2dImpl(const RmsNormOptions& options);
  void reset() override;
  void pretty_print(std::ostream& stream) const override;
  at::Tensor forward(const at::Tensor& x);
  bool fast_norm() const override { return options.fast_norm(); }

  RmsNormOptions options;
  at::Tensor weight;
};
TORCH_MODULE(RmsNorm2d);

// timm's SimpleNorm: over the last dimension with the unbiased variance.
class SimpleNormImpl : public torch::nn::Cloneable<SimpleNormImpl>, public FastNormLayer {
 public:
  explicit SimpleNormImpl(const RmsNormOptions& options);
  void reset() override;
  void pretty_print(std::ostream& stream) const override;
  at::Tensor forward(const at::Tensor& x);
  bool fast_norm() const override { return options.fast_norm(); }

  RmsNormOptions options;
  at::Tensor weight;
};
TORCH_MODULE(SimpleNorm);

// timm's SimpleNorm2d: NCHW over C (permute, normalise, permute back, as timm).
class SimpleNorm2dImpl : public torch::nn::Cloneable<SimpleNorm2dImpl>, public FastNormLayer {
 public:
  explicit SimpleNorm2dImpl(const RmsNormOptions& options);
  void reset() override;
  void pretty_print(std::ostream& stream) const override;
  at::Tensor forward(const at::Tensor& x);
  bool fast_norm() const override { return options.fast_norm(); }

  RmsNormOptions options;
  at::Tensor weight;
};
TORCH_MODULE(SimpleNorm2d);

// timm's NCHW norm layer by its _NORM_MAP name: "layernorm" / "layernorm2d"
// (LayerNorm2d), "rmsnorm2d" or "simplenorm" / "simplenorm2d", over
// `channels` with `eps`, type-erased for models and heads that take a
// norm_layer (ConvNeXt's). Throws UsageError naming the others.
torch::nn::AnyModule create_norm2d(const std::string& norm_layer, int64_t channels, double eps);

}  // namespace timm::layers
