#include "timm/layers/weight_init.hpp"

#include <cmath>

#include <c10/core/GradMode.h>

namespace timm::layers {
namespace {

double norm_cdf(double x) { return (1.0 + std::erf(x / std::sqrt(2.0))) / 2.0; }

}  // namespace

at::Tensor trunc_normal_(at::Tensor tensor, double mean, double std, double a, double b) {
  c10::NoGradGuard no_grad;
  // Uniform on [2l - 1, 2u - 1], then the inverse CDF of the standard normal
  // through erfinv, scaled and shifted, then clamped against rounding.
  const double l = norm_cdf((a - mean) / std);
  const double u = norm_cdf((b - mean) / std);
  tensor.uniform_(2.0 * l - 1.0, 2.0 * u - 1.0);
  tensor.erfinv_();
  tensor.mul_(std * std::sqrt(2.0));
  tensor.add_(mean);
  tensor.clamp_(a, b);
  return tensor;
}

}  // namespace timm::layers
