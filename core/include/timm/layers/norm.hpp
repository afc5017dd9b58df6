// Layer and group normalisation as timm's layers/norm.py: LayerNorm over the
// last dimension (channels-last tensors, e.g. ViT tokens NLC or NHWC),
// LayerNorm2d over the channels of NCHW tensors (permute, normalise, permute
// back, as timm does) and GroupNorm (channels first, as timm's; GroupNorm1
// is num_groups 1). The layer norms default to timm's eps 1e-6, GroupNorm to
// 1e-5; all hold "weight" (ones) and "bias" (zeros) of shape (num_channels)
// when affine, so state_dict keys equal timm's. Each follows timm's fast norm
// (fast_norm.hpp) as its fast_norm option says, by default the process's
// setting when the options are made.
#pragma once

#include <cstdint>

#include <ATen/ATen.h>
#include <torch/arg.h>
#include <torch/nn/cloneable.h>
#include <torch/nn/pimpl.h>

#include "timm/layers/fast_norm.hpp"

namespace timm::layers {

struct LayerNormOptions {
  /* implicit */ LayerNormOptions(int64_t num_channels) : num_channels_(num_channels) {}
  TORCH_ARG(int64_t, num_channels);
  TORCH_ARG(double, eps) = 1e-6;
  TORCH_ARG(bool, affine) = true;
  // false for a layer that stands for torch.nn.LayerNorm (never fast in timm).
  TORCH_ARG(bool, fast_norm) = is_fast_norm();
};

// torch.nn.LayerNorm(num_channels)'s options, for a layer that stands for it
// (Swin's norms, MobileViT v1's transformer, a patch embedding's norm):
// torch's eps 1e-5, and never fast, as timm's fast norm leaves torch.nn's
// layers alone.
inline LayerNormOptions torch_layer_norm_options(int64_t num_channels) {
  return LayerNormOptions(num_channels).eps(1e-5).fast_norm(false);
}

// Normalises over the last dimension, which must be num_channels.
class LayerNormImpl : public torch::nn::Cloneable<LayerNormImpl>, public FastNormLayer {
 public:
  explicit LayerNormImpl(const LayerNormOptions& options);
  void reset() override;
  void pretty_print(std::ostream& stream) const override;
  at::Tensor forward(const at::Tensor& x);
  bool fast_norm() const override { return options.fast_norm(); }

  LayerNormOptions options;
  at::Tensor weight;  // undefined unless affine
  at::Tensor bias;
};
TORCH_MODULE(LayerNorm);

// Normalises NCHW tensors over C (dimension 1).
class LayerNorm2dImpl : public torch::nn::Cloneable<LayerNorm2dImpl>, public FastNormLayer {
 public:
  explicit LayerNorm2dImpl(const LayerNormOptions& options);
  void reset() override;
  void pretty_print(std::ostream& stream) const override;
  at::Tensor forward(const at::Tensor& x);
  bool fast_norm() const override { return options.fast_norm(); }

  LayerNormOptions options;
  at::Tensor weight;
  at::Tensor bias;
};
TORCH_MODULE(LayerNorm2d);

struct GroupNormOptions {
  /* implicit */ GroupNormOptions(int64_t num_channels) : num_channels_(num_channels) {}
  TORCH_ARG(int64_t, num_channels);
  TORCH_ARG(int64_t, num_groups) = 32;  // must divide num_channels
  TORCH_ARG(double, eps) = 1e-5;
  TORCH_ARG(bool, affine) = true;
  // false for a layer that stands for torch.nn.GroupNorm (never fast in timm).
  TORCH_ARG(bool, fast_norm) = is_fast_norm();
};

// timm's GroupNorm (and GroupNorm1 with num_groups 1): normalises [B, C, *]
// tensors over each group of C / num_groups channels and the rest.
class GroupNormImpl : public torch::nn::Cloneable<GroupNormImpl>, public FastNormLayer {
 public:
  explicit GroupNormImpl(const GroupNormOptions& options);
  void reset() override;
  void pretty_print(std::ostream& stream) const override;
  at::Tensor forward(const at::Tensor& x);
  bool fast_norm() const override { return options.fast_norm(); }

  GroupNormOptions options;
  at::Tensor weight;  // undefined unless affine
  at::Tensor bias;
};
TORCH_MODULE(GroupNorm);

}  // namespace timm::layers
