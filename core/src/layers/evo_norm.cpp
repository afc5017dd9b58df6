#include "timm/layers/evo_norm.hpp"

#include <array>
#include <ostream>
#include <string>

#include "timm/base/error.hpp"

namespace timm::layers {

EvoNorm2dS0aImpl::EvoNorm2dS0aImpl(const EvoNorm2dS0aOptions& options_) : options(options_) {
  const int64_t num_features = options.num_features();
  if (num_features < 1) {
    throw UsageError("EvoNorm2dS0a: num_features must be >= 1, got " + std::to_string(num_features));
  }
  if (const std::optional<int64_t> group_size = options.group_size(); group_size && *group_size > 0) {
    // timm: assert num_features % group_size == 0.
    if (num_features % *group_size != 0) {
      throw UsageError("EvoNorm2dS0a: " + std::to_string(num_features) + " channels are not a multiple of group_size " +
                       std::to_string(*group_size));
    }
    groups_ = num_features / *group_size;
  } else {
    groups_ = options.groups();
    if (groups_ < 1 || num_features % groups_ != 0) {
      throw UsageError("EvoNorm2dS0a: " + std::to_string(num_features) + " channels do not split into " +
                       std::to_string(groups_) + " groups");
    }
  }
  reset();
}

void EvoNorm2dS0aImpl::reset() {
  // timm's reset_parameters: weight ones, bias zeros, v ones.
  weight = register_parameter("weight", at::ones({options.num_features()}));
  bias = register_parameter("bias", at::zeros({options.num_features()}));
  if (options.apply_act()) v = register_parameter("v", at::ones({options.num_features()}));
}

void EvoNorm2dS0aImpl::pretty_print(std::ostream& stream) const {
  stream << "timm::layers::EvoNorm2dS0a(" << options.num_features() << ", groups=" << groups_
         << ", eps=" << options.eps() << (options.apply_act() ? "" : ", apply_act=false") << ")";
}

at::Tensor EvoNorm2dS0aImpl::forward(const at::Tensor& input) {
  if (input.dim() != 4 || input.size(1) != options.num_features()) {
    throw UsageError("EvoNorm2dS0a: expected an NCHW input with " + std::to_string(options.num_features()) +
                     " channels, got shape " + c10::str(input.sizes()));
  }
  const auto dtype = input.scalar_type();
  const int64_t batch = input.size(0), channels = input.size(1), height = input.size(2), width = input.size(3);
  // timm's group_std: the biased variance over each group's channels and
  // pixels in float32, + eps, sqrt, back to the input's dtype, expanded to
  // the input's shape.
  const at::Tensor grouped = input.reshape({batch, groups_, channels / groups_, height, width});
  const at::Tensor d = grouped.to(at::kFloat)
                           .var(at::IntArrayRef{2, 3, 4}, /*unbiased=*/false, /*keepdim=*/true)
                           .add(options.eps())
                           .sqrt()
                           .to(dtype)
                           .expand(grouped.sizes())
                           .reshape({batch, channels, height, width});
  const std::array<int64_t, 4> v_shape = {1, -1, 1, 1};
  at::Tensor x = input;
  if (v.defined()) x = x * (x * v.view(v_shape).to(dtype)).sigmoid();
  x = x / d;
  return x * weight.view(v_shape).to(dtype) + bias.view(v_shape).to(dtype);
}

}  // namespace timm::layers
