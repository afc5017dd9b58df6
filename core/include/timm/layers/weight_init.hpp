// Weight initialisers timm uses that torch's C++ frontend lacks, as timm's
// layers/weight_init.py.
#pragma once

#include <ATen/ATen.h>

namespace timm::layers {

// timm's trunc_normal_(tensor, mean, std, a, b): values from N(mean, std^2)
// truncated to [a, b] (absolute bounds, not in units of std), drawn as timm
// does (inverse CDF of a uniform sample), in place and without autograd.
// Returns `tensor`.
at::Tensor trunc_normal_(at::Tensor tensor, double mean = 0.0, double std = 1.0, double a = -2.0, double b = 2.0);

}  // namespace timm::layers
