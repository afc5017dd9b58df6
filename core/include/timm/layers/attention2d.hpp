// Multi-query attention over NCHW feature maps, as timm's
// layers/attention2d.py MultiQueryAttention2d (MobileNetV4's Mobile MQA,
// https://arxiv.org/abs/2404.10518): num_heads query heads share one key and
// one value head. Each projection is a 1x1 conv; keys and values may first be
// downsampled by a depthwise dw_kernel_size conv of stride kv_stride and a
// BatchNorm2d (the SDK's, batch_norm.hpp), queries by an AvgPool2d of
// query_strides and a BatchNorm2d
// (the output then upsampled back, bilinear). Scaled dot-product attention
// (the fused kernel timm uses by default) with scale key_dim^-0.5.
// Submodule names are timm's, so the state_dict keys are
// query.[norm.*, ]proj.weight, key.[down_conv.weight, norm.*, ]proj.weight,
// value.[down_conv.weight, norm.*, ]proj.weight, output.proj.weight (and
// .bias of the projections with use_bias). Input (B, dim, H, W), output
// (B, dim_out, H, W).
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>

#include <ATen/ATen.h>
#include <torch/arg.h>
#include <torch/nn/cloneable.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/pimpl.h>

namespace timm::layers {

struct MultiQueryAttention2dOptions {
  /* implicit */ MultiQueryAttention2dOptions(int64_t dim) : dim_(dim) {}
  TORCH_ARG(int64_t, dim);
  TORCH_ARG(std::optional<int64_t>, dim_out);  // dim when unset
  TORCH_ARG(int64_t, num_heads) = 8;
  TORCH_ARG(std::optional<int64_t>, key_dim);    // dim / num_heads when unset
  TORCH_ARG(std::optional<int64_t>, value_dim);  // dim / num_heads when unset
  // Query downsampling, the same in H and W (timm's int query_strides); H and W must divide by it.
  TORCH_ARG(int64_t, query_strides) = 1;
  TORCH_ARG(int64_t, kv_stride) = 1;
  TORCH_ARG(int64_t, dw_kernel_size) = 3;  // the key / value down_conv's kernel
  TORCH_ARG(int64_t, dilation) = 1;
  // timm's padding of the down_conv: '' (symmetric) or 'same' (TF); query strides need ''.
  TORCH_ARG(std::string, padding) = "";
  TORCH_ARG(double, attn_drop) = 0.0;  // dropout on the attention weights (training only)
  TORCH_ARG(double, proj_drop) = 0.0;
  // timm's norm_layer: BatchNorm2d with these (the model's resolve_bn_args).
  TORCH_ARG(double, norm_eps) = 1e-5;
  TORCH_ARG(double, norm_momentum) = 0.1;
  TORCH_ARG(bool, use_bias) = false;  // biases of the 1x1 projections
};

// Throws UsageError for a non-positive size, stride or head count, a padding
// other than '' / 'same', or query strides with 'same' padding.
class MultiQueryAttention2dImpl : public torch::nn::Cloneable<MultiQueryAttention2dImpl> {
 public:
  explicit MultiQueryAttention2dImpl(const MultiQueryAttention2dOptions& options);
  // timm's init_weights: xavier_uniform_ projections (and down_convs).
  void reset() override;
  void pretty_print(std::ostream& stream) const override;
  // (B, dim, H, W) -> (B, dim_out, H, W); throws UsageError when x is not
  // 4-d with dim channels or H / W do not divide by query_strides.
  at::Tensor forward(const at::Tensor& x);

  int64_t key_dim() const;
  int64_t value_dim() const;

  MultiQueryAttention2dOptions options;
  torch::nn::Sequential query{nullptr};   // [down_pool, norm,] proj
  torch::nn::Sequential key{nullptr};     // [down_conv, norm,] proj
  torch::nn::Sequential value{nullptr};   // [down_conv, norm,] proj
  torch::nn::Dropout attn_drop{nullptr};  // no keys
  torch::nn::Sequential output{nullptr};  // [upsample,] proj, drop
};
TORCH_MODULE(MultiQueryAttention2d);

}  // namespace timm::layers
