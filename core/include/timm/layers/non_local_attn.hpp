// Bilinear attention transform non-local attention, as timm's
// layers/non_local_attn.py BatNonLocalAttn and BilinearAttnTransform ("Non-Local
// Neural Networks With Grouped Bilinear Attentional Transforms", Chi et al.
// 2020), the attn_layer 'bat' of timm's bat_resnext26ts:
//   conv1 (1x1 ConvNormAct to rd_channels) -> ba -> conv2 (1x1 ConvNormAct back
//   to in_channels) -> Dropout2d(drop_rate) -> + input.
// BilinearAttnTransform ("ba") on a (B, C, H, W) map with H and W multiples of
// block_size: conv1 (1x1 ConvNormAct to `groups` channels), adaptive max pools
// to (block_size, 1) and (1, block_size), conv_p / conv_q ((block_size, 1) and
// (1, block_size) convs with bias to block_size^2 * groups channels), sigmoid,
// row / column normalised, shared by the C / groups channels of each group,
// each block_size^2 matrix spread over the map (timm's resize_mat: every entry
// times an H / block_size identity), then P @ x @ Q and conv2 (1x1
// ConvNormAct). ConvNormActs with BatchNorm and act_layer. Keys as timm's:
// conv1.{conv,bn}.*, ba.conv1.*, ba.conv_p.{weight,bias}, ba.conv_q.*,
// ba.conv2.*, conv2.*. timm's NonLocalAttn (attn_layer 'nl') is not here.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>

#include <ATen/ATen.h>
#include <torch/arg.h>
#include <torch/nn/cloneable.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/pimpl.h>

#include "timm/layers/norm_act.hpp"

namespace timm::layers {

struct BilinearAttnTransformOptions {
  BilinearAttnTransformOptions(int64_t in_channels, int64_t block_size, int64_t groups)
      : in_channels_(in_channels), block_size_(block_size), groups_(groups) {}
  TORCH_ARG(int64_t, in_channels);
  TORCH_ARG(int64_t, block_size);
  TORCH_ARG(int64_t, groups);  // must divide in_channels
  TORCH_ARG(std::string, act_layer) = "relu";
};

class BilinearAttnTransformImpl : public torch::nn::Cloneable<BilinearAttnTransformImpl> {
 public:
  // Throws UsageError for non-positive sizes or groups that do not divide in_channels.
  explicit BilinearAttnTransformImpl(const BilinearAttnTransformOptions& options);
  void reset() override;
  void pretty_print(std::ostream& stream) const override;
  // (B, in_channels, H, W) -> the same shape; throws UsageError unless H and W
  // are multiples of block_size (timm asserts).
  at::Tensor forward(const at::Tensor& x);

  BilinearAttnTransformOptions options;
  ConvNormAct conv1{nullptr};
  torch::nn::Conv2d conv_p{nullptr}, conv_q{nullptr};
  ConvNormAct conv2{nullptr};
};
TORCH_MODULE(BilinearAttnTransform);

struct BatNonLocalAttnOptions {
  /* implicit */ BatNonLocalAttnOptions(int64_t in_channels) : in_channels_(in_channels) {}
  TORCH_ARG(int64_t, in_channels);
  TORCH_ARG(int64_t, block_size) = 7;
  TORCH_ARG(int64_t, groups) = 2;
  TORCH_ARG(double, rd_ratio) = 0.25;
  // Reduced channels; when unset: make_divisible(in_channels * rd_ratio, rd_divisor).
  TORCH_ARG(std::optional<int64_t>, rd_channels) = std::nullopt;
  TORCH_ARG(int64_t, rd_divisor) = 8;
  TORCH_ARG(double, drop_rate) = 0.2;  // Dropout2d (whole channels) on the attention branch, in training
  TORCH_ARG(std::string, act_layer) = "relu";
};

// No init of its own (timm's has none): a model's conv / BatchNorm init applies.
class BatNonLocalAttnImpl : public torch::nn::Cloneable<BatNonLocalAttnImpl> {
 public:
  // Throws UsageError for in_channels < 1, a drop_rate outside [0, 1] or bad ba options.
  explicit BatNonLocalAttnImpl(const BatNonLocalAttnOptions& options);
  void reset() override;
  void pretty_print(std::ostream& stream) const override;
  // (B, in_channels, H, W) -> the same shape; H and W multiples of block_size.
  at::Tensor forward(const at::Tensor& x);

  int64_t rd_channels() const { return rd_channels_; }

  BatNonLocalAttnOptions options;
  ConvNormAct conv1{nullptr};
  BilinearAttnTransform ba{nullptr};
  ConvNormAct conv2{nullptr};
  torch::nn::Dropout2d dropout{nullptr};

 private:
  int64_t rd_channels_ = 0;
};
TORCH_MODULE(BatNonLocalAttn);

}  // namespace timm::layers
