// Training losses with timm's maths (timm/loss/).
#pragma once

#include <ATen/core/Tensor.h>

namespace timm {

// timm's LabelSmoothingCrossEntropy: (1 - s) * NLL + s * mean(-log p), with
// the mean over classes; batch mean. s = 0 is plain cross-entropy.
at::Tensor label_smoothing_cross_entropy(const at::Tensor& logits, const at::Tensor& target, double smoothing);

}  // namespace timm
