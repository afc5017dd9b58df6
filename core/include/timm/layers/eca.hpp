// Efficient Channel Attention, as timm's layers/eca.py EcaModule (alias
// EfficientChannelAttn): global average pool -> a 1-d conv without bias over
// the pooled channels (one input and one output channel, zero padding) ->
// gate, multiplied onto the input. The conv's kernel adapts to the channels:
// t = int(|log2(channels) + beta| / gamma), kernel = max(t or t + 1 whichever
// is odd, 3). Submodule names are timm's, so the state_dict key is
// conv.weight, shape [1, 1, kernel]. Used by ResNet's attn_layer='eca'.
// timm's experimental use_mlp mode and CecaModule (circular padding) are not
// here.
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

namespace timm::layers {

// timm's adaptive kernel size for `channels` (the formula above, with
// Python's math.log(channels, 2) = log(channels) / log(2)).
int64_t eca_kernel_size(int64_t channels, double gamma = 2.0, double beta = 1.0);

struct EcaModuleOptions {
  // Without channels the conv uses kernel_size as given.
  EcaModuleOptions() = default;
  /* implicit */ EcaModuleOptions(int64_t channels) : channels_(channels) {}
  TORCH_ARG(std::optional<int64_t>, channels) = std::nullopt;
  TORCH_ARG(int64_t, kernel_size) = 3;  // odd; only used when channels is unset
  TORCH_ARG(double, gamma) = 2.0;
  TORCH_ARG(double, beta) = 1.0;
  TORCH_ARG(std::string, gate_layer) = "sigmoid";
};

class EcaModuleImpl : public torch::nn::Cloneable<EcaModuleImpl> {
 public:
  // Throws UsageError for channels < 1, an even or non-positive kernel_size
  // or an unknown gate.
  explicit EcaModuleImpl(const EcaModuleOptions& options);
  void reset() override;
  void pretty_print(std::ostream& stream) const override;
  at::Tensor forward(const at::Tensor& x);

  // The conv's kernel size (adapted to channels when they are given).
  int64_t kernel_size() const { return kernel_size_; }

  EcaModuleOptions options;
  torch::nn::Conv1d conv{nullptr};
  Activation gate{nullptr};

 private:
  int64_t kernel_size_ = 3;
};
TORCH_MODULE(EcaModule);

}  // namespace timm::layers
