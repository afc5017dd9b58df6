// EvoNorm-S0a, as timm's layers/evo_norm.py EvoNorm2dS0a ("Evolving
// Normalization-Activation Layers", Liu et al. 2020): a normalisation and
// activation in one layer for NCHW tensors, without running statistics (the
// same computation in training and eval):
//   d = sqrt(var(x over each group of channels and H, W; biased) + eps)
//   x * sigmoid(x * v) / d * weight + bias        (apply_act)
//   x / d * weight + bias                         (no act: no v)
// d is computed from the input, before the activation, in float32 and cast
// back to the input's dtype, as timm's group_std. The groups are
// num_features / group_size where group_size is set (timm's partial with
// group_size=16 in the *_evos RegNetZs), else `groups`. Parameters "weight"
// (ones), "bias" (zeros) and, with apply_act, "v" (ones), of shape
// (num_features), in timm's order, so state_dict keys equal timm's.
#pragma once

#include <cstdint>
#include <optional>

#include <ATen/ATen.h>
#include <torch/arg.h>
#include <torch/nn/cloneable.h>
#include <torch/nn/pimpl.h>

namespace timm::layers {

struct EvoNorm2dS0aOptions {
  /* implicit */ EvoNorm2dS0aOptions(int64_t num_features) : num_features_(num_features) {}
  TORCH_ARG(int64_t, num_features);
  TORCH_ARG(int64_t, groups) = 32;
  TORCH_ARG(std::optional<int64_t>, group_size) = std::nullopt;  // overrides groups when set
  TORCH_ARG(bool, apply_act) = true;
  TORCH_ARG(double, eps) = 1e-3;
};

// Throws UsageError when num_features is not a positive multiple of
// group_size (or of groups), and in forward for an input that is not NCHW
// with num_features channels.
class EvoNorm2dS0aImpl : public torch::nn::Cloneable<EvoNorm2dS0aImpl> {
 public:
  explicit EvoNorm2dS0aImpl(const EvoNorm2dS0aOptions& options);
  void reset() override;
  void pretty_print(std::ostream& stream) const override;
  at::Tensor forward(const at::Tensor& x);

  // The number of channel groups the statistics are taken over.
  int64_t groups() const { return groups_; }

  EvoNorm2dS0aOptions options;
  at::Tensor weight, bias;
  at::Tensor v;  // undefined unless apply_act

 private:
  int64_t groups_ = 1;
};
TORCH_MODULE(EvoNorm2dS0a);

}  // namespace timm::layers
