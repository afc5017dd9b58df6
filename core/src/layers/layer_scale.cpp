#include "timm/layers/layer_scale.hpp"

#include <ostream>
#include <string>

#include "timm/base/error.hpp"

namespace timm::layers {
namespace {

at::Tensor make_gamma(torch::nn::Module& module, const LayerScaleOptions& options, const char* what) {
  if (options.dim() < 1)
    throw UsageError(std::string(what) + ": dim must be >= 1, got " + std::to_string(options.dim()));
  return module.register_parameter("gamma", at::full({options.dim()}, options.init_values()));
}

}  // namespace

LayerScaleImpl::LayerScaleImpl(const LayerScaleOptions& options_) : options(options_) { reset(); }

void LayerScaleImpl::reset() { gamma = make_gamma(*this, options, "LayerScale"); }

void LayerScaleImpl::pretty_print(std::ostream& stream) const {
  stream << "timm::layers::LayerScale(" << options.dim() << ", init_values=" << options.init_values() << ")";
}

at::Tensor LayerScaleImpl::forward(const at::Tensor& x) { return x * gamma; }

LayerScale2dImpl::LayerScale2dImpl(const LayerScaleOptions& options_) : options(options_) { reset(); }

void LayerScale2dImpl::reset() { gamma = make_gamma(*this, options, "LayerScale2d"); }

void LayerScale2dImpl::pretty_print(std::ostream& stream) const {
  stream << "timm::layers::LayerScale2d(" << options.dim() << ", init_values=" << options.init_values() << ")";
}

at::Tensor LayerScale2dImpl::forward(const at::Tensor& x) { return x * gamma.view({1, -1, 1, 1}); }

}  // namespace timm::layers
