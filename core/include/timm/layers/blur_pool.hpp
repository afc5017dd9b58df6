// Blur pooling, as timm's layers/blur_pool.py BlurPool2d ("Making
// Convolutional Networks Shift-Invariant Again", Zhang 2019): an
// anti-aliased downsampling that pads the input (reflect by default), blurs
// each channel with a binomial filt_size x filt_size filter (the outer
// product of C(filt_size - 1, k) / 2^(filt_size - 1)) and subsamples by
// stride, in one depthwise conv. DenseNet-blur and timm's ResNet-blur use it
// in place of strided pooling.
//
// The filter is timm's non-persistent buffer "filt": not registered here, so
// it adds no state_dict keys, and it follows the input's dtype and device
// (as timm's, which model.to(...) converts; the binomial weights are exact
// in bfloat16 and half).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <ATen/ATen.h>
#include <torch/arg.h>
#include <torch/nn/cloneable.h>
#include <torch/nn/pimpl.h>

namespace timm::layers {

struct BlurPool2dOptions {
  BlurPool2dOptions() = default;
  /* implicit */ BlurPool2dOptions(int64_t channels) : channels_(channels) {}
  // The input's channels, which the filter is repeated for (timm's filt of
  // shape (channels, 1, k, k)); unset: any channel count, the filter expanded
  // to the input's.
  TORCH_ARG(std::optional<int64_t>, channels);
  TORCH_ARG(int64_t, filt_size) = 3;
  TORCH_ARG(int64_t, stride) = 2;
  // torch.nn.functional.pad's mode: "reflect" (timm's default), "constant"
  // (zeros, timm's 'blurpc'), "replicate" or "circular".
  TORCH_ARG(std::string, pad_mode) = "reflect";
};

// Throws UsageError for filt_size < 2 (timm asserts filt_size > 1), stride
// < 1, channels < 1 or an unknown pad_mode.
class BlurPool2dImpl : public torch::nn::Cloneable<BlurPool2dImpl> {
 public:
  explicit BlurPool2dImpl(const BlurPool2dOptions& options = {});
  void reset() override;
  void pretty_print(std::ostream& stream) const override;
  // (N, C, H, W) -> (N, C, H', W') with get_padding(filt_size, stride) on
  // every side, as timm's forward; throws UsageError when C differs from
  // channels (when set) or x is not 4-d.
  at::Tensor forward(const at::Tensor& x);

  BlurPool2dOptions options;
  at::Tensor filt;  // (channels or 1, 1, k, k), float32 on the CPU; not registered

 private:
  at::Tensor cached_;  // filt in the last input's dtype and device
};
TORCH_MODULE(BlurPool2d);

}  // namespace timm::layers
