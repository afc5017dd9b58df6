// Weight initialisers timm uses that torch's C++ frontend lacks, as timm's
// layers/weight_init.py.
#pragma once

#include <ATen/ATen.h>
#include <torch/nn/module.h>

namespace timm::layers {

// timm's trunc_normal_(tensor, mean, std, a, b): values from N(mean, std^2)
// truncated to [a, b] (absolute bounds, not in units of std), drawn as timm
// does (inverse CDF of a uniform sample), in place and without autograd.
// Returns `tensor`.
at::Tensor trunc_normal_(at::Tensor tensor, double mean = 0.0, double std = 1.0, double a = -2.0, double b = 2.0);

// timm's efficientnet_init_weights (_init_weight_goog in
// _efficientnet_builder.py, which EfficientNet, MobileNetV3 and ReXNet call):
// every Conv2d below `model` normal(0, sqrt(2 / fan_out)) with fan_out per
// group, conv biases zero; every Linear uniform(+-1 / sqrt(out_features)),
// bias zero. Norm layers keep their defaults (weight 1, bias 0).
void efficientnet_init_weights(torch::nn::Module& model);

// timm's _init_weights of ConvNeXt and MetaFormer: every Conv2d and Linear
// below `model` trunc_normal(0, std) (bounds +-2), biases zero; other
// modules keep their init.
void trunc_normal_init_weights(torch::nn::Module& model, double std = 0.02);

}  // namespace timm::layers
