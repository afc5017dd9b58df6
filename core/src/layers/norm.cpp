#include "timm/layers/norm.hpp"

#include <ostream>
#include <string>

#include "timm/base/error.hpp"

namespace timm::layers {
namespace {

void check_channels(const char* what, int64_t num_channels) {
  if (num_channels < 1)
    throw UsageError(std::string(what) + ": num_channels must be >= 1, got " + std::to_string(num_channels));
}

// torch.nn.LayerNorm's and GroupNorm's reset_parameters: weight ones, bias zeros.
void register_affine(torch::nn::Module& module, bool affine, int64_t num_channels, at::Tensor& weight,
                     at::Tensor& bias) {
  if (!affine) return;
  weight = module.register_parameter("weight", at::ones({num_channels}));
  bias = module.register_parameter("bias", at::zeros({num_channels}));
}

at::Tensor layer_norm_last(const at::Tensor& x, const LayerNormOptions& options, const at::Tensor& weight,
                           const at::Tensor& bias) {
  return layer_norm(x, {options.num_channels()}, weight, bias, options.eps(), options.fast_norm());
}

}  // namespace

LayerNormImpl::LayerNormImpl(const LayerNormOptions& options_) : options(options_) {
  check_channels("LayerNorm", options.num_channels());
  reset();
}

void LayerNormImpl::reset() { register_affine(*this, options.affine(), options.num_channels(), weight, bias); }

void LayerNormImpl::pretty_print(std::ostream& stream) const {
  stream << "timm::layers::LayerNorm(" << options.num_channels() << ", eps=" << options.eps() << ")";
}

at::Tensor LayerNormImpl::forward(const at::Tensor& x) { return layer_norm_last(x, options, weight, bias); }

LayerNorm2dImpl::LayerNorm2dImpl(const LayerNormOptions& options_) : options(options_) {
  check_channels("LayerNorm2d", options.num_channels());
  reset();
}

void LayerNorm2dImpl::reset() { register_affine(*this, options.affine(), options.num_channels(), weight, bias); }

void LayerNorm2dImpl::pretty_print(std::ostream& stream) const {
  stream << "timm::layers::LayerNorm2d(" << options.num_channels() << ", eps=" << options.eps() << ")";
}

at::Tensor LayerNorm2dImpl::forward(const at::Tensor& x) {
  return layer_norm_last(x.permute({0, 2, 3, 1}), options, weight, bias).permute({0, 3, 1, 2});
}

GroupNormImpl::GroupNormImpl(const GroupNormOptions& options_) : options(options_) {
  check_channels("GroupNorm", options.num_channels());
  if (options.num_groups() < 1 || options.num_channels() % options.num_groups() != 0) {
    throw UsageError("GroupNorm: num_groups must be >= 1 and divide num_channels " +
                     std::to_string(options.num_channels()) + ", got " + std::to_string(options.num_groups()));
  }
  reset();
}

void GroupNormImpl::reset() { register_affine(*this, options.affine(), options.num_channels(), weight, bias); }

void GroupNormImpl::pretty_print(std::ostream& stream) const {
  stream << "timm::layers::GroupNorm(" << options.num_groups() << ", " << options.num_channels()
         << ", eps=" << options.eps() << ")";
}

at::Tensor GroupNormImpl::forward(const at::Tensor& x) {
  return group_norm(x, options.num_groups(), weight, bias, options.eps(), options.fast_norm());
}

}  // namespace timm::layers
