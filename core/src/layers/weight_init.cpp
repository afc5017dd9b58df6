#include "timm/layers/weight_init.hpp"

#include <cmath>

#include <c10/core/GradMode.h>
#include <torch/nn/init.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>

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

void efficientnet_init_weights(torch::nn::Module& model) {
  namespace nn = torch::nn;
  c10::NoGradGuard no_grad;
  for (auto& module : model.modules(/*include_self=*/false)) {
    if (auto* c = module->as<nn::Conv2d>()) {
      const auto& k = c->options.kernel_size();
      const int64_t fan_out = k->at(0) * k->at(1) * c->options.out_channels() / c->options.groups();
      nn::init::normal_(c->weight, 0.0, std::sqrt(2.0 / static_cast<double>(fan_out)));
      if (c->bias.defined()) nn::init::zeros_(c->bias);
    } else if (auto* l = module->as<nn::Linear>()) {
      const double range = 1.0 / std::sqrt(static_cast<double>(l->weight.size(0)));
      nn::init::uniform_(l->weight, -range, range);
      if (l->bias.defined()) nn::init::zeros_(l->bias);
    }
  }
}

void trunc_normal_init_weights(torch::nn::Module& model, double std) {
  namespace nn = torch::nn;
  c10::NoGradGuard no_grad;
  for (auto& module : model.modules(/*include_self=*/false)) {
    at::Tensor weight, bias;
    if (auto* conv = module->as<nn::Conv2d>()) {
      weight = conv->weight;
      bias = conv->bias;
    } else if (auto* linear = module->as<nn::Linear>()) {
      weight = linear->weight;
      bias = linear->bias;
    } else {
      continue;
    }
    trunc_normal_(weight, 0.0, std);
    if (bias.defined()) bias.zero_();
  }
}

}  // namespace timm::layers
