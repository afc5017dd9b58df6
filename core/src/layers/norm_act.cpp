#include "timm/layers/norm_act.hpp"

#include <ostream>

#include <ATen/Context.h>
#include <torch/nn/modules/linear.h>

#include "timm/base/error.hpp"

namespace timm::layers {
namespace {

void check_positive(const char* what, const char* name, int64_t value) {
  if (value < 1) throw UsageError(std::string(what) + ": " + name + " must be >= 1, got " + std::to_string(value));
}

torch::nn::AnyModule make_drop(const std::function<torch::nn::AnyModule()>& drop_layer) {
  return drop_layer ? drop_layer() : torch::nn::AnyModule(torch::nn::Identity());
}

}  // namespace

int64_t get_padding(int64_t kernel_size, int64_t stride, int64_t dilation) {
  return ((stride - 1) + dilation * (kernel_size - 1)) / 2;
}

torch::nn::Conv2d create_conv2d(int64_t in_channels, int64_t out_channels, int64_t kernel_size,
                                const Conv2dArgs& args) {
  return torch::nn::Conv2d(create_conv2d_options(in_channels, out_channels, kernel_size, args));
}

torch::nn::Conv2dOptions create_conv2d_options(int64_t in_channels, int64_t out_channels, int64_t kernel_size,
                                               const Conv2dArgs& args) {
  check_positive("create_conv2d", "in_channels", in_channels);
  check_positive("create_conv2d", "out_channels", out_channels);
  check_positive("create_conv2d", "kernel_size", kernel_size);
  const int64_t groups = args.depthwise ? in_channels : args.groups;
  if (groups < 1 || in_channels % groups != 0 || out_channels % groups != 0) {
    throw UsageError("create_conv2d: groups " + std::to_string(groups) + " must divide in_channels " +
                     std::to_string(in_channels) + " and out_channels " + std::to_string(out_channels));
  }
  const int64_t padding = args.padding.value_or(get_padding(kernel_size, args.stride, args.dilation));
  return torch::nn::Conv2dOptions(in_channels, out_channels, kernel_size)
      .stride(args.stride)
      .padding(padding)
      .dilation(args.dilation)
      .groups(groups)
      .bias(args.bias);
}

BatchNormAct2dImpl::BatchNormAct2dImpl(const BatchNormAct2dOptions& options_) : options(options_) {
  check_positive("BatchNormAct2d", "num_features", options.num_features());
  reset();
}

// Registration order is nn.BatchNorm2d's (weight, bias, then the buffers), so
// state_dict lists the keys in timm's order.
void BatchNormAct2dImpl::reset() {
  const int64_t n = options.num_features();
  if (options.affine()) {
    weight = register_parameter("weight", at::ones({n}));
    bias = register_parameter("bias", at::zeros({n}));
  }
  if (options.track_running_stats()) {
    running_mean = register_buffer("running_mean", at::zeros({n}));
    running_var = register_buffer("running_var", at::ones({n}));
    num_batches_tracked = register_buffer("num_batches_tracked", at::zeros({}, at::kLong));
  }
  drop = make_drop(options.drop_layer());
  register_module("drop", drop.ptr());
  act = register_module("act", create_act(options.apply_act() ? options.act_layer() : "identity", options.inplace()));
}

void BatchNormAct2dImpl::pretty_print(std::ostream& stream) const {
  stream << "timm::layers::BatchNormAct2d(" << options.num_features() << ", eps=" << options.eps()
         << ", act=" << act->options.name() << (normalize_ ? ", custom normalization" : "") << ")";
}

at::Tensor BatchNormAct2dImpl::batch_norm(const at::Tensor& x) {
  // torch's _BatchNorm.forward, as timm's BatchNormAct2d copies it.
  double average_factor = options.momentum().value_or(0.0);
  if (is_training() && options.track_running_stats()) {
    num_batches_tracked.add_(1);
    if (!options.momentum()) average_factor = 1.0 / num_batches_tracked.item<double>();
  }
  const bool use_batch_stats = is_training() || (!running_mean.defined() && !running_var.defined());
  const bool pass_buffers = !is_training() || options.track_running_stats();
  return at::batch_norm(x, weight, bias, pass_buffers ? running_mean : at::Tensor(),
                        pass_buffers ? running_var : at::Tensor(), use_batch_stats, average_factor, options.eps(),
                        at::globalContext().userEnabledCuDNN());
}

at::Tensor BatchNormAct2dImpl::drop_act(const at::Tensor& x) { return act(drop.forward(x)); }

at::Tensor BatchNormAct2dImpl::forward(const at::Tensor& x) {
  TORCH_CHECK(x.dim() == 4, "BatchNormAct2d: expected 4D input (got ", x.dim(), "D input)");
  return drop_act(normalize_ ? normalize_(*this, x) : batch_norm(x));
}

void for_each_batch_norm_act(torch::nn::Module& module,
                             const std::function<void(const std::string&, BatchNormAct2dImpl&)>& fn) {
  if (auto* self = module.as<BatchNormAct2d>()) fn("", *self);
  for (const auto& item : module.named_modules("", /*include_self=*/false)) {
    if (auto* bn = item.value()->as<BatchNormAct2d>()) fn(item.key(), *bn);
  }
}

ConvNormActImpl::ConvNormActImpl(const ConvNormActOptions& options_) : options(options_) { reset(); }

void ConvNormActImpl::reset() {
  Conv2dArgs conv_args;
  conv_args.stride = options.stride();
  conv_args.dilation = options.dilation();
  conv_args.groups = options.groups();
  conv_args.bias = options.bias();
  conv_args.padding = options.padding();
  conv = register_module(
      "conv", create_conv2d(options.in_channels(), options.out_channels(), options.kernel_size(), conv_args));
  if (options.apply_norm()) {
    bn = register_module("bn", BatchNormAct2d(BatchNormAct2dOptions(options.out_channels())
                                                  .eps(options.eps())
                                                  .momentum(options.momentum())
                                                  .apply_act(options.apply_act())
                                                  .act_layer(options.act_layer())
                                                  .drop_layer(options.drop_layer())));
  } else {
    // timm: self.bn = nn.Sequential() holding only the drop layer, if any; no activation.
    no_norm = torch::nn::Sequential();
    if (options.drop_layer()) no_norm->push_back("drop", options.drop_layer()());
    register_module("bn", no_norm);
  }
}

void ConvNormActImpl::pretty_print(std::ostream& stream) const {
  stream << "timm::layers::ConvNormAct(" << options.in_channels() << ", " << options.out_channels()
         << ", kernel_size=" << options.kernel_size() << ", stride=" << options.stride() << ")";
}

at::Tensor ConvNormActImpl::forward(const at::Tensor& x) {
  at::Tensor y = conv(x);
  if (bn) return bn(y);
  return no_norm->is_empty() ? y : no_norm->forward(y);
}

}  // namespace timm::layers
