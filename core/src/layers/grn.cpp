#include "timm/layers/grn.hpp"

#include <array>
#include <ostream>
#include <string>

#include "timm/base/error.hpp"

namespace timm::layers {

GlobalResponseNormImpl::GlobalResponseNormImpl(const GlobalResponseNormOptions& options_) : options(options_) {
  if (options.dim() < 1) {
    throw UsageError("GlobalResponseNorm: dim must be >= 1, got " + std::to_string(options.dim()));
  }
  reset();
}

void GlobalResponseNormImpl::reset() {
  weight = register_parameter("weight", at::zeros({options.dim()}));
  bias = register_parameter("bias", at::zeros({options.dim()}));
}

void GlobalResponseNormImpl::pretty_print(std::ostream& stream) const {
  stream << "timm::layers::GlobalResponseNorm(" << options.dim() << ", eps=" << options.eps()
         << (options.channels_last() ? "" : ", channels_last=false") << ")";
}

at::Tensor GlobalResponseNormImpl::forward(const at::Tensor& x) {
  const bool last = options.channels_last();
  const std::array<int64_t, 2> spatial = last ? std::array<int64_t, 2>{1, 2} : std::array<int64_t, 2>{2, 3};
  const int64_t channel = last ? -1 : 1;
  const std::array<int64_t, 4> shape = last ? std::array<int64_t, 4>{1, 1, 1, -1} : std::array<int64_t, 4>{1, -1, 1, 1};
  // timm's x.norm(p=2, dim=spatial, keepdim=True) runs torch.linalg.vector_norm.
  const at::Tensor x_g = at::linalg_vector_norm(x, 2, at::IntArrayRef(spatial), /*keepdim=*/true);
  const at::Tensor x_n = x_g / (x_g.mean(channel, /*keepdim=*/true) + options.eps());
  // The fused addcmul as timm: bias + weight * (x * x_n), then the residual.
  return x + at::addcmul(bias.view(shape), weight.view(shape), x * x_n);
}

}  // namespace timm::layers
