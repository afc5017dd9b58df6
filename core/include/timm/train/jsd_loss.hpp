// timm's JsdCrossEntropy (timm/loss/jsd.py), the AugMix loss for
// --aug-splits with --jsd-loss.
#pragma once

#include <cstdint>

#include <ATen/core/Tensor.h>

namespace timm {

// `output` holds num_splits equal splits of the batch along dim 0 (the clean
// split first). Cross-entropy (label-smoothed when smoothing > 0) on the
// clean split, plus alpha times the mean over splits of
// KL(mixture || split) with reduction 'batchmean', the mixture's
// probabilities clamped to [1e-7, 1]. A batch that does not divide into
// num_splits throws Error.
at::Tensor jsd_cross_entropy(const at::Tensor& output, const at::Tensor& target, int64_t num_splits,
                             double alpha = 12.0, double smoothing = 0.1);

}  // namespace timm
