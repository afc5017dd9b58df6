#include "timm/layers/conv2d_same.hpp"

#include <algorithm>
#include <array>
#include <string>
#include <utility>

#include <c10/core/GradMode.h>

#include "timm/base/error.hpp"
#include "timm/base/names.hpp"

namespace timm::layers {
namespace {

torch::nn::Conv2dOptions without_padding(torch::nn::Conv2dOptions options) {
  options.padding(0);
  options.padding_mode(torch::kZeros);
  return options;
}

}  // namespace

int64_t get_same_padding(int64_t size, int64_t kernel_size, int64_t stride, int64_t dilation) {
  TORCH_CHECK(stride >= 1, "get_same_padding: stride must be >= 1");
  const int64_t out = (size + stride - 1) / stride;  // ceil(size / stride) for size >= 0
  return std::max<int64_t>((out - 1) * stride + (kernel_size - 1) * dilation + 1 - size, 0);
}

bool is_static_pad(int64_t kernel_size, int64_t stride, int64_t dilation) {
  return stride == 1 && (dilation * (kernel_size - 1)) % 2 == 0;
}

at::Tensor pad_same(const at::Tensor& x, at::IntArrayRef kernel_size, at::IntArrayRef stride, at::IntArrayRef dilation,
                    double value) {
  TORCH_CHECK(kernel_size.size() == 2 && stride.size() == 2 && dilation.size() == 2,
              "pad_same: kernel_size, stride and dilation must have 2 values");
  TORCH_CHECK(x.dim() >= 2, "pad_same: expected an input with at least 2 dimensions, got ", x.dim());
  const int64_t pad_h = get_same_padding(x.size(-2), kernel_size[0], stride[0], dilation[0]);
  const int64_t pad_w = get_same_padding(x.size(-1), kernel_size[1], stride[1], dilation[1]);
  // F.pad's (left, right, top, bottom): the smaller half first.
  return at::constant_pad_nd(x, {pad_w / 2, pad_w - pad_w / 2, pad_h / 2, pad_h - pad_h / 2}, value);
}

at::Tensor conv2d_same(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias, at::IntArrayRef stride,
                       at::IntArrayRef dilation, int64_t groups) {
  const at::Tensor padded = pad_same(x, weight.sizes().slice(weight.dim() - 2), stride, dilation);
  const std::array<int64_t, 2> no_padding = {0, 0};
  return at::conv2d(padded, weight, bias, stride, at::IntArrayRef(no_padding), dilation, groups);
}

Conv2dSameImpl::Conv2dSameImpl(torch::nn::Conv2dOptions options_) : Conv2dImpl(without_padding(std::move(options_))) {}

at::Tensor Conv2dSameImpl::forward(const at::Tensor& x) {
  return conv2d_same(x, weight, bias, options.stride(), options.dilation(), options.groups());
}

std::shared_ptr<torch::nn::Module> Conv2dSameImpl::clone(const std::optional<at::Device>& device) const {
  c10::NoGradGuard no_grad;
  auto copy = std::make_shared<Conv2dSameImpl>(
      torch::nn::Conv2dOptions(options.in_channels(), options.out_channels(), options.kernel_size())
          .stride(options.stride())
          .dilation(options.dilation())
          .groups(options.groups())
          .bias(options.bias()));
  // As Cloneable::clone: the copy's registered tensors get copies of the data.
  auto copy_data = [&](at::Tensor& to, const at::Tensor& from) {
    if (from.defined()) to.set_data(device && from.device() != *device ? from.to(*device) : from.clone());
  };
  copy_data(copy->weight, weight);
  copy_data(copy->bias, bias);
  copy->train(is_training());
  return copy;
}

void Conv2dSameImpl::pretty_print(std::ostream& stream) const {
  stream << "timm::layers::Conv2dSame(" << options.in_channels() << ", " << options.out_channels()
         << ", kernel_size=" << options.kernel_size() << ", stride=" << options.stride() << ")";
}

PaddingValue get_padding_value(std::string_view padding, int64_t kernel_size, int64_t stride, int64_t dilation) {
  const std::string lower = ascii_lower(padding);
  if (lower == "same") {
    if (is_static_pad(kernel_size, stride, dilation)) return {get_padding(kernel_size, stride, dilation), false};
    return {0, true};
  }
  if (lower == "valid") return {0, false};
  if (lower.empty()) return {get_padding(kernel_size, stride, dilation), false};
  throw UsageError("padding '" + std::string(padding) + "': expected '', 'same' or 'valid'");
}

torch::nn::AnyModule create_conv2d_pad(int64_t in_channels, int64_t out_channels, int64_t kernel_size,
                                       const Conv2dArgs& args, std::string_view padding) {
  if (padding.empty()) return torch::nn::AnyModule(create_conv2d(in_channels, out_channels, kernel_size, args));
  TORCH_CHECK(!args.padding, "create_conv2d_pad: a padding string and an explicit padding");
  const PaddingValue value = get_padding_value(padding, kernel_size, args.stride, args.dilation);
  if (!value.dynamic) {
    Conv2dArgs fixed = args;
    fixed.padding = value.padding;
    return torch::nn::AnyModule(create_conv2d(in_channels, out_channels, kernel_size, fixed));
  }
  // Conv2dSame pads at run time: the options' fixed padding is dropped.
  return torch::nn::AnyModule(Conv2dSame(create_conv2d_options(in_channels, out_channels, kernel_size, args)));
}

}  // namespace timm::layers
