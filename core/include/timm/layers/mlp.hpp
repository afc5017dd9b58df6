// The MLP of transformer and ConvNeXt blocks, as timm's layers/mlp.py Mlp:
// fc1 -> act -> drop1 -> fc2 -> drop2. fc1 and fc2 are Linear layers on
// channels-last input, or 1x1 Conv2d on NCHW input with use_conv (timm's
// Mlp(use_conv=True), which ConvNeXt's conv_mlp variants use); either way
// the state_dict keys are fc1.{weight,bias} and fc2.{weight,bias} as timm's.
#pragma once

#include <cstdint>
#include <string>

#include <ATen/ATen.h>
#include <torch/arg.h>
#include <torch/nn/cloneable.h>
#include <torch/nn/modules/container/any.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/pimpl.h>

#include "timm/layers/activations.hpp"

namespace timm::layers {

struct MlpOptions {
  /* implicit */ MlpOptions(int64_t in_features) : in_features_(in_features) {}
  TORCH_ARG(int64_t, in_features);
  TORCH_ARG(int64_t, hidden_features) = 0;  // 0: in_features
  TORCH_ARG(int64_t, out_features) = 0;     // 0: in_features
  TORCH_ARG(std::string, act_layer) = "gelu";
  TORCH_ARG(bool, bias) = true;
  TORCH_ARG(double, drop) = 0.0;  // both dropouts, as timm's drop=float
  TORCH_ARG(bool, use_conv) = false;
};

class MlpImpl : public torch::nn::Cloneable<MlpImpl> {
 public:
  explicit MlpImpl(const MlpOptions& options);
  void reset() override;
  void pretty_print(std::ostream& stream) const override;
  at::Tensor forward(const at::Tensor& x);

  MlpOptions options;
  torch::nn::AnyModule fc1;  // Linear, or Conv2d 1x1 with use_conv
  Activation act{nullptr};
  torch::nn::Dropout drop1{nullptr};
  torch::nn::AnyModule fc2;
  torch::nn::Dropout drop2{nullptr};
};
TORCH_MODULE(Mlp);

}  // namespace timm::layers
