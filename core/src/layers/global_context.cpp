#include "timm/layers/global_context.hpp"

#include <ostream>
#include <string>

#include <torch/nn/init.h>

#include "timm/base/error.hpp"
#include "timm/layers/squeeze_excite.hpp"

namespace timm::layers {

GlobalContextImpl::GlobalContextImpl(const GlobalContextOptions& options_) : options(options_) {
  if (options.channels() < 1) {
    throw UsageError("GlobalContext: channels must be >= 1, got " + std::to_string(options.channels()));
  }
  reset();
}

void GlobalContextImpl::reset() {
  namespace nn = torch::nn;
  const int64_t channels = options.channels();
  const auto rd = options.rd_channels();
  rd_channels_ = (rd && *rd > 0) ? *rd
                                 : make_divisible(static_cast<double>(channels) * options.rd_ratio(),
                                                  options.rd_divisor(), std::nullopt, /*round_limit=*/0.0);
  if (options.use_attn()) {
    conv_attn = register_module("conv_attn", nn::Conv2d(nn::Conv2dOptions(channels, 1, 1).bias(true)));
    nn::init::kaiming_normal_(conv_attn->weight, /*a=*/0.0, torch::kFanIn, torch::kReLU);
  }
  const auto mlp =
      ConvMlpOptions(channels).hidden_features(rd_channels_).act_layer(options.act_layer()).norm_layer("layernorm2d");
  if (options.fuse_add()) {
    mlp_add = register_module("mlp_add", ConvMlp(mlp));
    nn::init::zeros_(mlp_add->fc2->weight);
  }
  if (options.fuse_scale()) mlp_scale = register_module("mlp_scale", ConvMlp(mlp));
  gate = register_module("gate", create_act(options.gate_layer()));
}

void GlobalContextImpl::pretty_print(std::ostream& stream) const {
  stream << "timm::layers::GlobalContext(channels=" << options.channels() << ", rd_channels=" << rd_channels_ << ")";
}

at::Tensor GlobalContextImpl::forward(const at::Tensor& input) {
  const int64_t batch = input.size(0);
  const int64_t channels = input.size(1);
  const int64_t positions = input.size(2) * input.size(3);
  at::Tensor context;
  if (conv_attn) {
    // Softmax over the positions, then each channel's attention-weighted sum: (B, 1, C, HW) @ (B, 1, HW, 1).
    at::Tensor attn = at::softmax(conv_attn(input).reshape({batch, 1, positions}), -1).unsqueeze(3);
    context = at::matmul(input.reshape({batch, channels, positions}).unsqueeze(1), attn).view({batch, channels, 1, 1});
  } else {
    context = input.mean({2, 3}, /*keepdim=*/true);
  }
  at::Tensor x = input;
  if (mlp_scale) x = x * gate(mlp_scale(context));
  if (mlp_add) x = x + mlp_add(context);
  return x;
}

}  // namespace timm::layers
