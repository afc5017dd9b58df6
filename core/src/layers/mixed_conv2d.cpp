#include "timm/layers/mixed_conv2d.hpp"

#include <ostream>
#include <string>

#include "timm/base/error.hpp"
#include "timm/layers/conv2d_same.hpp"

namespace timm::layers {

std::vector<int64_t> split_channels(int64_t channels, int64_t num_groups) {
  TORCH_CHECK(num_groups >= 1, "split_channels: num_groups must be >= 1");
  std::vector<int64_t> split(static_cast<size_t>(num_groups), channels / num_groups);
  split[0] += channels - channels / num_groups * num_groups;
  return split;
}

MixedConv2dImpl::MixedConv2dImpl(const MixedConv2dOptions& options_) : options(options_) {
  const auto groups = static_cast<int64_t>(options.kernel_size().size());
  if (groups < 1) throw UsageError("MixedConv2d: expected at least one kernel size");
  if (groups > options.in_channels() || groups > options.out_channels()) {
    // A split of zero channels: timm's Conv2d would fail on it too.
    throw UsageError("MixedConv2d: " + std::to_string(groups) + " kernel sizes for " +
                     std::to_string(options.in_channels()) + " -> " + std::to_string(options.out_channels()) +
                     " channels; expected at most one kernel size per channel");
  }
  reset();
}

void MixedConv2dImpl::reset() {
  // Cloneable::clone calls reset() on a copy: the copied handles point at the original's convs.
  convs_.clear();
  const auto& kernels = options.kernel_size();
  const auto groups = static_cast<int64_t>(kernels.size());
  splits_ = split_channels(options.in_channels(), groups);
  const std::vector<int64_t> out_splits = split_channels(options.out_channels(), groups);
  for (size_t i = 0; i < kernels.size(); ++i) {
    Conv2dArgs args;
    args.stride = options.stride();
    args.dilation = options.dilation();
    args.depthwise = options.depthwise();
    args.bias = options.bias();
    convs_.push_back(create_conv2d_pad(splits_[i], out_splits[i], kernels[i], args, options.padding()));
    register_module(std::to_string(i), convs_.back().ptr());
  }
}

void MixedConv2dImpl::pretty_print(std::ostream& stream) const {
  stream << "timm::layers::MixedConv2d(" << options.in_channels() << ", " << options.out_channels()
         << ", kernel_size=" << at::IntArrayRef(options.kernel_size()) << ", stride=" << options.stride() << ")";
}

at::Tensor MixedConv2dImpl::forward(const at::Tensor& x) {
  const std::vector<at::Tensor> parts = at::split_with_sizes(x, splits_, 1);
  std::vector<at::Tensor> outs;
  outs.reserve(parts.size());
  for (size_t i = 0; i < parts.size(); ++i) outs.push_back(convs_[i].forward(parts[i]));
  return at::cat(outs, 1);
}

torch::nn::AnyModule create_mixed_conv2d(int64_t in_channels, int64_t out_channels,
                                         const std::vector<int64_t>& kernel_sizes, const Conv2dArgs& args,
                                         std::string_view padding) {
  if (kernel_sizes.size() == 1) return create_conv2d_pad(in_channels, out_channels, kernel_sizes[0], args, padding);
  TORCH_CHECK(!args.padding, "create_mixed_conv2d: a MixedConv2d takes a padding string, not a padding");
  const bool depthwise = args.depthwise || args.groups == in_channels;
  if (!depthwise && args.groups != 1) {
    throw UsageError("MixedConv2d: groups " + std::to_string(args.groups) + " for " + std::to_string(in_channels) +
                     " input channels; expected 1 or depthwise (groups = in_channels)");
  }
  return torch::nn::AnyModule(MixedConv2d(MixedConv2dOptions(in_channels, out_channels, kernel_sizes)
                                              .stride(args.stride)
                                              .dilation(args.dilation)
                                              .padding(std::string(padding))
                                              .depthwise(depthwise)
                                              .bias(args.bias)));
}

}  // namespace timm::layers
