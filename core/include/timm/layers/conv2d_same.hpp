// TensorFlow's 'SAME' padding, as timm's layers/padding.py (get_same_padding,
// is_static_pad, pad_same, get_padding_value) and layers/conv2d_same.py
// (conv2d_same, Conv2dSame, create_conv2d_pad), used by timm's tf_ ports
// (padding='same').
//
// 'SAME' pads an input of size x so that the output has ceil(x / stride)
// positions: max((ceil(x / s) - 1) * s + (k - 1) * d + 1 - x, 0) in all, the
// smaller half before and the larger after. With stride 1 and an odd
// effective kernel that is the symmetric get_padding, fixed at construction;
// otherwise it depends on the input size, so Conv2dSame pads each input
// before a conv without padding. Conv2dSame is a torch Conv2d (same
// parameters weight[, bias], same options with padding 0, as timm's subclass
// of nn.Conv2d), so code that visits Conv2d modules (weight init) sees it;
// call it through its own type or an AnyModule, since Conv2dImpl::forward is
// not virtual.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <ostream>
#include <string_view>

#include <ATen/ATen.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/container/any.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/pimpl.h>

#include "timm/layers/norm_act.hpp"

namespace timm::layers {

// timm's get_same_padding(x, kernel_size, stride, dilation): the total 'SAME'
// padding of one spatial dimension of size x.
int64_t get_same_padding(int64_t size, int64_t kernel_size, int64_t stride, int64_t dilation = 1);

// timm's is_static_pad: 'SAME' is the symmetric get_padding for every input
// size (stride 1 and an even dilation * (kernel_size - 1)).
bool is_static_pad(int64_t kernel_size, int64_t stride = 1, int64_t dilation = 1);

// timm's pad_same(x, kernel_size, stride, dilation, value): pads the last two
// dimensions of x (H, W) to 'SAME' with `value` (timm's max pool pads -inf).
at::Tensor pad_same(const at::Tensor& x, at::IntArrayRef kernel_size, at::IntArrayRef stride,
                    at::IntArrayRef dilation = {1, 1}, double value = 0.0);

// timm's conv2d_same: pad_same, then a conv2d without padding.
at::Tensor conv2d_same(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias, at::IntArrayRef stride,
                       at::IntArrayRef dilation, int64_t groups);

// timm's Conv2dSame: a Conv2d (options' padding forced to 0) whose forward is conv2d_same.
class Conv2dSameImpl : public torch::nn::Conv2dImpl {
 public:
  explicit Conv2dSameImpl(torch::nn::Conv2dOptions options);
  at::Tensor forward(const at::Tensor& x);
  // A Conv2dSame copy (Conv2dImpl's clone would make a plain Conv2d).
  std::shared_ptr<torch::nn::Module> clone(const std::optional<at::Device>& device = std::nullopt) const override;
  void pretty_print(std::ostream& stream) const override;
};
TORCH_MODULE(Conv2dSame);

// timm's get_padding_value for a padding string: '' (symmetric get_padding),
// 'valid' (0) or 'same' (get_padding when is_static_pad, else dynamic).
// Throws UsageError for any other string.
struct PaddingValue {
  int64_t padding = 0;
  bool dynamic = false;  // padding must be computed from each input (Conv2dSame)
};
PaddingValue get_padding_value(std::string_view padding, int64_t kernel_size, int64_t stride = 1, int64_t dilation = 1);

// timm's create_conv2d(in, out, k, padding=<string>, ...) for an int kernel:
// create_conv2d(args) with `padding`'s static value, or a Conv2dSame when
// 'same' is dynamic. With padding '' it is create_conv2d(args) as is
// (args.padding honoured); otherwise args.padding must be unset.
torch::nn::AnyModule create_conv2d_pad(int64_t in_channels, int64_t out_channels, int64_t kernel_size,
                                       const Conv2dArgs& args, std::string_view padding);

}  // namespace timm::layers
