// Global Context attention, as timm's layers/global_context.py GlobalContext
// (GCNet, https://arxiv.org/abs/1904.11492): the context is the input pooled
// by a softmax attention over H * W (conv_attn, a 1x1 conv to one channel;
// a plain mean without use_attn), then x * gate(mlp_scale(context)) with
// fuse_scale and x + mlp_add(context) with fuse_add, each a ConvMlp
// (fc1, LayerNorm2d, act, fc2) of rd channels. Submodule names are timm's,
// so the state_dict keys are conv_attn.{weight,bias},
// mlp_scale.{fc1,norm,fc2}.*, mlp_add.{fc1,norm,fc2}.*. Used by
// EfficientNet's se_layer='gc' (gc_efficientnetv2_rw_t).
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>

#include <ATen/ATen.h>
#include <torch/arg.h>
#include <torch/nn/cloneable.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/pimpl.h>

#include "timm/layers/activations.hpp"
#include "timm/layers/mlp.hpp"

namespace timm::layers {

struct GlobalContextOptions {
  /* implicit */ GlobalContextOptions(int64_t channels) : channels_(channels) {}
  TORCH_ARG(int64_t, channels);
  TORCH_ARG(bool, use_attn) = true;
  TORCH_ARG(bool, fuse_add) = false;
  TORCH_ARG(bool, fuse_scale) = true;
  TORCH_ARG(double, rd_ratio) = 1.0 / 8.0;
  // Reduced channels; when unset (or 0): make_divisible(channels * rd_ratio, rd_divisor, round_limit=0).
  TORCH_ARG(std::optional<int64_t>, rd_channels) = std::nullopt;
  TORCH_ARG(int64_t, rd_divisor) = 1;
  TORCH_ARG(std::string, act_layer) = "relu";
  TORCH_ARG(std::string, gate_layer) = "sigmoid";
};

// timm's reset_parameters: conv_attn's weight kaiming_normal (fan_in, relu),
// mlp_add.fc2's weight zero; the rest keeps torch's default init. (timm's
// init_last_zero argument is stored there but changes nothing, so it is not
// an option here.)
class GlobalContextImpl : public torch::nn::Cloneable<GlobalContextImpl> {
 public:
  // Throws UsageError for channels < 1 or an unknown act / gate.
  explicit GlobalContextImpl(const GlobalContextOptions& options);
  void reset() override;
  void pretty_print(std::ostream& stream) const override;
  at::Tensor forward(const at::Tensor& x);

  // The reduced channel count of the MLPs.
  int64_t rd_channels() const { return rd_channels_; }

  GlobalContextOptions options;
  torch::nn::Conv2d conv_attn{nullptr};  // null unless use_attn
  ConvMlp mlp_add{nullptr};              // null unless fuse_add
  ConvMlp mlp_scale{nullptr};            // null unless fuse_scale
  Activation gate{nullptr};

 private:
  int64_t rd_channels_ = 0;
};
TORCH_MODULE(GlobalContext);

}  // namespace timm::layers
