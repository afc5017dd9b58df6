#include "timm/layers/std_conv.hpp"

#include <array>
#include <cmath>
#include <string>
#include <utility>

#include <ATen/Context.h>
#include <c10/core/GradMode.h>

#include "timm/base/error.hpp"
#include "timm/layers/conv2d_same.hpp"
#include "timm/layers/norm_act.hpp"

namespace timm::layers {
namespace {

// The padding the conv gets: timm's get_padding (or the given one), or for
// 'SAME' get_padding_value's static padding / 0 with pad_same at run time.
PaddingValue std_conv_padding(const ScaledStdConv2dOptions& o, bool same) {
  if (same) {
    TORCH_CHECK(!o.padding(), "ScaledStdConv2dSame: an explicit padding with 'SAME'");
    return get_padding_value("same", o.kernel_size(), o.stride(), o.dilation());
  }
  if (o.padding() && *o.padding() < 0) {
    throw UsageError("ScaledStdConv2d: padding must be >= 0, got " + std::to_string(*o.padding()));
  }
  return {o.padding().value_or(get_padding(o.kernel_size(), o.stride(), o.dilation())), false};
}

torch::nn::Conv2dOptions std_conv_options(const ScaledStdConv2dOptions& o, bool same) {
  Conv2dArgs args;
  args.stride = o.stride();
  args.dilation = o.dilation();
  args.groups = o.groups();
  args.bias = o.bias();
  args.padding = std_conv_padding(o, same).padding;
  // Checked (UsageError) by create_conv2d_options.
  return create_conv2d_options(o.in_channels(), o.out_channels(), o.kernel_size(), args);
}

}  // namespace

ScaledStdConv2dImpl::ScaledStdConv2dImpl(const ScaledStdConv2dOptions& options)
    : ScaledStdConv2dImpl(options, /*same=*/false) {}

ScaledStdConv2dImpl::ScaledStdConv2dImpl(const ScaledStdConv2dOptions& options_, bool same)
    : Conv2dImpl(std_conv_options(options_, same)), std_options(options_), same_(same) {
  const PaddingValue padding = std_conv_padding(std_options, same);
  padding_ = padding.padding;
  same_pad_ = padding.dynamic;
  // timm: gamma * self.weight[0].numel() ** -0.5.
  const auto fan_in = static_cast<double>(weight[0].numel());
  scale_ = std_options.gamma() * std::pow(fan_in, -0.5);
  gain = register_parameter("gain", at::full({std_options.out_channels(), 1, 1, 1}, std_options.gain_init()));
}

at::Tensor ScaledStdConv2dImpl::standardized_weight() const {
  // timm's F.batch_norm(weight.reshape(1, out, -1), None, None, weight=(gain * scale).view(-1),
  // training=True, momentum=0., eps=eps); F.batch_norm passes cudnn's enabled flag.
  return at::batch_norm(weight.reshape({1, weight.size(0), -1}), (gain * scale_).view(-1), {}, {}, {},
                        /*training=*/true, /*momentum=*/0.0, std_options.eps(), at::globalContext().userEnabledCuDNN())
      .reshape_as(weight);
}

at::Tensor ScaledStdConv2dImpl::forward(const at::Tensor& x) {
  const std::array<int64_t, 2> kernel = {std_options.kernel_size(), std_options.kernel_size()};
  const std::array<int64_t, 2> stride = {std_options.stride(), std_options.stride()};
  const std::array<int64_t, 2> dilation = {std_options.dilation(), std_options.dilation()};
  const std::array<int64_t, 2> padding = {padding_, padding_};
  const at::Tensor input = same_pad_ ? pad_same(x, kernel, stride, dilation) : x;
  return at::conv2d(input, standardized_weight(), bias, stride, padding, dilation, std_options.groups());
}

std::shared_ptr<torch::nn::Module> ScaledStdConv2dImpl::clone(const std::optional<at::Device>& device) const {
  c10::NoGradGuard no_grad;
  std::shared_ptr<ScaledStdConv2dImpl> copy = same_ ? std::make_shared<ScaledStdConv2dSameImpl>(std_options)
                                                    : std::make_shared<ScaledStdConv2dImpl>(std_options);
  // As Cloneable::clone: the copy's registered tensors get copies of the data.
  auto copy_data = [&](at::Tensor& to, const at::Tensor& from) {
    if (from.defined()) to.set_data(device && from.device() != *device ? from.to(*device) : from.clone());
  };
  copy_data(copy->weight, weight);
  copy_data(copy->bias, bias);
  copy_data(copy->gain, gain);
  copy->train(is_training());
  return copy;
}

void ScaledStdConv2dImpl::pretty_print(std::ostream& stream) const {
  stream << "timm::layers::" << (same_ ? "ScaledStdConv2dSame(" : "ScaledStdConv2d(") << std_options.in_channels()
         << ", " << std_options.out_channels() << ", kernel_size=" << std_options.kernel_size()
         << ", stride=" << std_options.stride();
  if (std_options.dilation() != 1) stream << ", dilation=" << std_options.dilation();
  if (std_options.groups() != 1) stream << ", groups=" << std_options.groups();
  stream << ", gamma=" << std_options.gamma() << ", eps=" << std_options.eps() << ")";
}

ScaledStdConv2dSameImpl::ScaledStdConv2dSameImpl(const ScaledStdConv2dOptions& options)
    : ScaledStdConv2dImpl(options, /*same=*/true) {}

ScaledStdConv2d create_scaled_std_conv2d(const ScaledStdConv2dOptions& options, bool same_padding) {
  if (same_padding) {
    return ScaledStdConv2d(std::shared_ptr<ScaledStdConv2dImpl>(std::make_shared<ScaledStdConv2dSameImpl>(options)));
  }
  return ScaledStdConv2d(options);
}

}  // namespace timm::layers
