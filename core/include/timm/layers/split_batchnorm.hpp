// --split-bn: timm's SplitBatchNorm2d and convert_splitbn_model
// (timm/layers/split_batchnorm.py), for training with --aug-splits.
//
// In training the batch is cut into num_splits equal parts (clean, then each
// augmentation split): the first is normalised by the layer itself, part i by
// its auxiliary BatchNorm aux_bn[i - 1], and the results are concatenated. In
// eval the layer alone normalises. The auxiliary layers are registered under
// the layer as "aux_bn" (a ModuleList), so state_dict keys are timm's
// ("bn1.aux_bn.0.weight", ...), and they start as copies of the layer's
// parameters and running stats. Converted in place (see batch_norm.hpp), so
// a BatchNormAct2d keeps its drop and activation after the normalisation, as
// timm's (its drop and act become children of the SplitBatchNorm2d).
#pragma once

#include <cstdint>

#include <torch/nn/module.h>

#include "timm/layers/batch_norm.hpp"

namespace timm::layers {

// Converts every SwappableBatchNorm in `model`'s tree. Throws UsageError for
// num_splits < 2, and timm::Error naming every plain torch::nn::BatchNormXd
// (before converting anything) and any BatchNorm already converted (e.g. by
// --sync-bn). Returns the number converted.
int64_t convert_splitbn_model(torch::nn::Module& model, int64_t num_splits = 2);

}  // namespace timm::layers
