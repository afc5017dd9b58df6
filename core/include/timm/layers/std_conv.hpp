// Convolutions with scaled weight standardisation, as timm's layers/std_conv.py
// ScaledStdConv2d and ScaledStdConv2dSame (NF-ResNets, NFNets: "Characterizing
// signal propagation to close the performance gap in unnormalized ResNets").
//
// Each forward standardises the weight per output channel over its fan-in
// (in_channels / groups * kh * kw values) and scales it by gain * scale,
// where gain is a learned (out_channels, 1, 1, 1) parameter (starting at
// gain_init) and scale = gamma / sqrt(fan-in). As timm, the standardisation
// is a training-mode batch_norm over weight.reshape(1, out_channels, -1) with
// (gain * scale) as its affine weight, so the numerics (biased variance, eps
// inside the square root) are timm's. The conv is then a plain conv2d.
//
// Both are torch Conv2d modules (parameters weight[, bias] as Conv2d's, then
// gain: state_dict keys weight, bias, gain as timm's), so code that visits
// Conv2d modules (weight init) sees them; call them through their own type or
// an AnyModule, since Conv2dImpl::forward is not virtual.
// - ScaledStdConv2d pads symmetrically: get_padding(kernel, stride,
//   dilation) unless padding is given (timm's padding=None).
// - ScaledStdConv2dSame pads TensorFlow 'SAME' (timm's padding='SAME'): the
//   static get_padding where is_static_pad, otherwise pad_same on each input
//   before a conv without padding (conv2d_same.hpp).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <ostream>

#include <ATen/ATen.h>
#include <torch/arg.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/pimpl.h>

namespace timm::layers {

struct ScaledStdConv2dOptions {
  ScaledStdConv2dOptions(int64_t in_channels, int64_t out_channels, int64_t kernel_size)
      : in_channels_(in_channels), out_channels_(out_channels), kernel_size_(kernel_size) {}
  TORCH_ARG(int64_t, in_channels);
  TORCH_ARG(int64_t, out_channels);
  TORCH_ARG(int64_t, kernel_size);
  TORCH_ARG(int64_t, stride) = 1;
  // ScaledStdConv2d: get_padding(kernel_size, stride, dilation) when unset.
  // ScaledStdConv2dSame: must stay unset ('SAME').
  TORCH_ARG(std::optional<int64_t>, padding) = std::nullopt;
  TORCH_ARG(int64_t, dilation) = 1;
  TORCH_ARG(int64_t, groups) = 1;
  TORCH_ARG(bool, bias) = true;
  TORCH_ARG(double, gamma) = 1.0;  // the activation's gain folded into the weight
  TORCH_ARG(double, eps) = 1e-6;
  TORCH_ARG(double, gain_init) = 1.0;
};

// Throws UsageError for non-positive sizes, a stride, dilation or groups
// below 1, groups that do not divide the channels, or a negative padding.
class ScaledStdConv2dImpl : public torch::nn::Conv2dImpl {
 public:
  explicit ScaledStdConv2dImpl(const ScaledStdConv2dOptions& options);
  at::Tensor forward(const at::Tensor& x);
  // The standardised, scaled weight the conv uses (same shape as weight).
  at::Tensor standardized_weight() const;
  // timm's scale: gamma * fan_in ** -0.5.
  double scale() const { return scale_; }
  // A copy of the same type (Conv2dImpl's clone would make a plain Conv2d).
  std::shared_ptr<torch::nn::Module> clone(const std::optional<at::Device>& device = std::nullopt) const override;
  void pretty_print(std::ostream& stream) const override;

  ScaledStdConv2dOptions std_options;
  at::Tensor gain;

 protected:
  ScaledStdConv2dImpl(const ScaledStdConv2dOptions& options, bool same);
  bool same_ = false;      // built as ScaledStdConv2dSame
  bool same_pad_ = false;  // pad_same at run time
  int64_t padding_ = 0;    // the conv's symmetric padding

 private:
  double scale_ = 1.0;
};
TORCH_MODULE(ScaledStdConv2d);

// timm's ScaledStdConv2dSame: as ScaledStdConv2d with 'SAME' padding.
class ScaledStdConv2dSameImpl : public ScaledStdConv2dImpl {
 public:
  explicit ScaledStdConv2dSameImpl(const ScaledStdConv2dOptions& options);
};
TORCH_MODULE(ScaledStdConv2dSame);

// A ScaledStdConv2dSame when `same_padding`, else a ScaledStdConv2d, held as
// the base type (models that choose the padding per config, as timm's NFNets).
ScaledStdConv2d create_scaled_std_conv2d(const ScaledStdConv2dOptions& options, bool same_padding);

}  // namespace timm::layers
