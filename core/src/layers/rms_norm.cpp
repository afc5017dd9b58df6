#include "timm/layers/rms_norm.hpp"

#include <ostream>
#include <string>

#include "timm/base/error.hpp"
#include "timm/layers/norm.hpp"

namespace timm::layers {
namespace {

void check_rms_channels(const char* what, int64_t num_channels) {
  if (num_channels < 1)
    throw UsageError(std::string(what) + ": num_channels must be >= 1, got " + std::to_string(num_channels));
}

// timm's reset_parameters: weight ones; no bias.
at::Tensor register_rms_weight(torch::nn::Module& module, const RmsNormOptions& options) {
  if (!options.affine()) return {};
  return module.register_parameter("weight", at::ones({options.num_channels()}));
}

// timm's fast_norm.rms_norm / simple_norm over dimension `dim` (keepdim),
// then the weight broadcast along `dim`.
at::Tensor rms_family_normalise(const at::Tensor& x, const at::Tensor& v, double eps, const at::Tensor& weight,
                                bool nchw) {
  at::Tensor y = x * at::rsqrt(v + eps);
  if (weight.defined()) y = y * (nchw ? weight.reshape({1, -1, 1, 1}) : weight);
  return y;
}

// timm's simple_norm over the last dimension (torch.var's default: unbiased,
// correction 1), or with fast_norm its fast_simple_norm (in the autocast dtype).
at::Tensor simple_norm_last(const at::Tensor& x, const at::Tensor& weight, const RmsNormOptions& options) {
  const FastNormScope scope(x, options.fast_norm());
  const at::Tensor y = scope.cast(x);
  return rms_family_normalise(y, at::var(y, {-1}, /*unbiased=*/true, /*keepdim=*/true), options.eps(),
                              scope.cast(weight), false);
}

void rms_family_print(std::ostream& stream, const char* what, const RmsNormOptions& options) {
  stream << "timm::layers::" << what << "(" << options.num_channels() << ", eps=" << options.eps() << ")";
}

}  // namespace

RmsNormImpl::RmsNormImpl(const RmsNormOptions& options_) : options(options_) {
  check_rms_channels("RmsNorm", options.num_channels());
  reset();
}
void RmsNormImpl::reset() { weight = register_rms_weight(*this, options); }
void RmsNormImpl::pretty_print(std::ostream& stream) const { rms_family_print(stream, "RmsNorm", options); }
at::Tensor RmsNormImpl::forward(const at::Tensor& x) {
  if (!options.fast_norm()) {
    return rms_family_normalise(x, x.pow(2).mean({-1}, /*keepdim=*/true), options.eps(), weight, false);
  }
  // timm's fast_rms_norm: torch's rms_norm in the autocast dtype.
  const FastNormScope scope(x, /*fast=*/true);
  return at::rms_norm(scope.cast(x), {options.num_channels()}, scope.cast(weight), options.eps());
}

RmsNorm2dImpl::RmsNorm2dImpl(const RmsNormOptions& options_) : options(options_) {
  check_rms_channels("RmsNorm2d", options.num_channels());
  reset();
}
void RmsNorm2dImpl::reset() { weight = register_rms_weight(*this, options); }
void RmsNorm2dImpl::pretty_print(std::ostream& stream) const { rms_family_print(stream, "RmsNorm2d", options); }
at::Tensor RmsNorm2dImpl::forward(const at::Tensor& x) {
  const FastNormScope scope(x, options.fast_norm());  // timm's fast_rms_norm2d: rms_norm2d, autocast dtype
  const at::Tensor y = scope.cast(x);
  return rms_family_normalise(y, y.pow(2).mean({1}, /*keepdim=*/true), options.eps(), scope.cast(weight), true);
}

SimpleNormImpl::SimpleNormImpl(const RmsNormOptions& options_) : options(options_) {
  check_rms_channels("SimpleNorm", options.num_channels());
  reset();
}
void SimpleNormImpl::reset() { weight = register_rms_weight(*this, options); }
void SimpleNormImpl::pretty_print(std::ostream& stream) const { rms_family_print(stream, "SimpleNorm", options); }
at::Tensor SimpleNormImpl::forward(const at::Tensor& x) { return simple_norm_last(x, weight, options); }

SimpleNorm2dImpl::SimpleNorm2dImpl(const RmsNormOptions& options_) : options(options_) {
  check_rms_channels("SimpleNorm2d", options.num_channels());
  reset();
}
void SimpleNorm2dImpl::reset() { weight = register_rms_weight(*this, options); }
void SimpleNorm2dImpl::pretty_print(std::ostream& stream) const { rms_family_print(stream, "SimpleNorm2d", options); }
at::Tensor SimpleNorm2dImpl::forward(const at::Tensor& x) {
  return simple_norm_last(x.permute({0, 2, 3, 1}), weight, options).permute({0, 3, 1, 2});
}

torch::nn::AnyModule create_norm2d(const std::string& norm_layer, int64_t channels, double eps) {
  if (norm_layer == "layernorm" || norm_layer == "layernorm2d") {
    return torch::nn::AnyModule(LayerNorm2d(LayerNormOptions(channels).eps(eps)));
  }
  if (norm_layer == "rmsnorm2d") return torch::nn::AnyModule(RmsNorm2d(RmsNormOptions(channels).eps(eps)));
  if (norm_layer == "simplenorm" || norm_layer == "simplenorm2d") {
    return torch::nn::AnyModule(SimpleNorm2d(RmsNormOptions(channels).eps(eps)));
  }
  throw UsageError("norm_layer " + in_quotes(norm_layer) +
                   ": expected layernorm2d, rmsnorm2d or simplenorm2d (an NCHW norm layer)");
}

}  // namespace timm::layers
