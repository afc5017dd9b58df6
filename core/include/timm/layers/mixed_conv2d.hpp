// timm's MixedConv2d (layers/mixed_conv2d.py, MixNet's MDConv,
// https://arxiv.org/abs/1907.09595) and the kernel-list branch of timm's
// create_conv2d (layers/create_conv2d.py).
//
// MixedConv2d splits the input channels into one group per kernel size
// (_split_channels: equal parts, the remainder to the first), convolves each
// group with its own conv of that kernel size (create_conv2d_pad, so 'same'
// padding works per group) and concatenates the outputs, whose channels are
// split the same way. The sub-convs are children "0", "1", ... as timm's
// nn.ModuleDict, so the state_dict keys are 0.weight, 1.weight, ...
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <ATen/ATen.h>
#include <torch/arg.h>
#include <torch/nn/cloneable.h>
#include <torch/nn/modules/container/any.h>
#include <torch/nn/pimpl.h>

#include "timm/layers/norm_act.hpp"

namespace timm::layers {

// timm's _split_channels(num_chan, num_groups): num_groups parts of
// channels / num_groups, the remainder added to the first.
std::vector<int64_t> split_channels(int64_t channels, int64_t num_groups);

struct MixedConv2dOptions {
  MixedConv2dOptions(int64_t in_channels, int64_t out_channels, std::vector<int64_t> kernel_size)
      : in_channels_(in_channels), out_channels_(out_channels), kernel_size_(std::move(kernel_size)) {}
  TORCH_ARG(int64_t, in_channels);
  TORCH_ARG(int64_t, out_channels);
  TORCH_ARG(std::vector<int64_t>, kernel_size);  // one sub-conv per entry
  TORCH_ARG(int64_t, stride) = 1;
  TORCH_ARG(int64_t, dilation) = 1;
  TORCH_ARG(std::string, padding) = "";  // timm's padding string: '', 'same' or 'valid'
  TORCH_ARG(bool, depthwise) = false;    // each sub-conv grouped by its input channels
  TORCH_ARG(bool, bias) = false;
};

class MixedConv2dImpl : public torch::nn::Cloneable<MixedConv2dImpl> {
 public:
  // Throws UsageError for no kernel sizes, more kernel sizes than channels,
  // a bad padding string or a depthwise split that does not divide.
  explicit MixedConv2dImpl(const MixedConv2dOptions& options);
  void reset() override;
  void pretty_print(std::ostream& stream) const override;
  at::Tensor forward(const at::Tensor& x);

  // The input channels of each sub-conv (timm's splits).
  const std::vector<int64_t>& splits() const { return splits_; }

  MixedConv2dOptions options;

 private:
  std::vector<torch::nn::AnyModule> convs_;  // Conv2d or Conv2dSame, registered as "0", "1", ...
  std::vector<int64_t> splits_;
};
TORCH_MODULE(MixedConv2d);

// timm's create_conv2d(in, out, kernel_size, padding=<string>, ...) with the
// kernel size as timm's int or list: one kernel size is the int (a
// create_conv2d_pad conv), more a MixedConv2d, depthwise when args.depthwise
// or args.groups == in_channels (any other groups > 1 is a UsageError, as
// timm's assert). args.padding must be unset for a MixedConv2d.
torch::nn::AnyModule create_mixed_conv2d(int64_t in_channels, int64_t out_channels,
                                         const std::vector<int64_t>& kernel_sizes, const Conv2dArgs& args,
                                         std::string_view padding);

}  // namespace timm::layers
