// Squeeze-and-Excitation, as timm's layers/squeeze_excite.py SEModule (alias
// SqueezeExcite): global average pool -> fc1 (1x1 conv, channels -> rd) ->
// [bn] -> act -> fc2 (1x1 conv, rd -> channels) -> gate, multiplied onto the
// input. Submodule names are timm's, so state_dict keys are fc1.{weight,bias},
// [bn.*], fc2.{weight,bias}. Used by ResNet's attn_layer='se' and RegNet.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <ATen/ATen.h>
#include <torch/arg.h>
#include <torch/nn/cloneable.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/pimpl.h>

#include "timm/layers/activations.hpp"
#include "timm/layers/batch_norm.hpp"

namespace timm::layers {

// timm's layers/helpers.py make_divisible(v, divisor, min_value, round_limit):
// v rounded to the nearest multiple of divisor (halves up), at least min_value
// (divisor when unset), bumped by one divisor when that lost more than
// (1 - round_limit) of v.
int64_t make_divisible(double v, int64_t divisor = 8, std::optional<int64_t> min_value = std::nullopt,
                       double round_limit = 0.9);

struct SEModuleOptions {
  /* implicit */ SEModuleOptions(int64_t channels) : channels_(channels) {}
  TORCH_ARG(int64_t, channels);
  TORCH_ARG(double, rd_ratio) = 1.0 / 16.0;
  // Reduced channels; when unset (or 0): make_divisible(channels * rd_ratio, rd_divisor, round_limit=0).
  TORCH_ARG(std::optional<int64_t>, rd_channels) = std::nullopt;
  TORCH_ARG(int64_t, rd_divisor) = 8;
  TORCH_ARG(bool, add_maxpool) = false;  // squeeze = 0.5 * mean + 0.5 * amax
  TORCH_ARG(bool, bias) = true;
  TORCH_ARG(std::string, act_layer) = "relu";
  TORCH_ARG(bool, use_norm) = false;  // BatchNorm2d(rd) between fc1 and act (timm's norm_layer)
  TORCH_ARG(std::string, gate_layer) = "sigmoid";
};

class SEModuleImpl : public torch::nn::Cloneable<SEModuleImpl> {
 public:
  explicit SEModuleImpl(const SEModuleOptions& options);
  void reset() override;
  void pretty_print(std::ostream& stream) const override;
  at::Tensor forward(const at::Tensor& x);

  // The reduced channel count fc1 produces.
  int64_t rd_channels() const { return rd_channels_; }

  SEModuleOptions options;
  torch::nn::Conv2d fc1{nullptr};
  BatchNorm2d bn{nullptr};  // null unless use_norm
  Activation act{nullptr};
  torch::nn::Conv2d fc2{nullptr};
  Activation gate{nullptr};

 private:
  int64_t rd_channels_ = 0;
};
TORCH_MODULE(SEModule);

}  // namespace timm::layers
