// Training losses with timm's maths (timm/loss/).
//
// Each takes logits (N, C) and either class indices (N) or dense targets
// (N, C), as the corresponding timm module's forward.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>

#include <ATen/core/Tensor.h>

namespace timm {

// timm's LabelSmoothingCrossEntropy: (1 - s) * NLL + s * mean(-log p), with
// the mean over classes; batch mean. s = 0 is plain cross-entropy.
at::Tensor label_smoothing_cross_entropy(const at::Tensor& logits, const at::Tensor& target, double smoothing);

// timm's SoftTargetCrossEntropy: mean over the batch of sum(-t * log p), for
// the dense targets Mixup/CutMix produce.
at::Tensor soft_target_cross_entropy(const at::Tensor& logits, const at::Tensor& target);

// timm's BinaryCrossEntropy (--bce-loss): index targets are one-hot encoded
// with smoothing (off = s / C, on = 1 - s + off); dense targets are used as
// they are, unless `smooth_dense` (timm's multi-label criterion,
// timm/train/multilabel.hpp) moves each towards 0.5: t * (1 - s) + 0.5 * s.
// A target threshold binarises targets (t > threshold).
struct BinaryCrossEntropyOptions {
  double smoothing = 0.1;
  std::optional<double> target_threshold;  // --bce-target-thresh
  std::optional<double> pos_weight;        // --bce-pos-weight
  bool sum_classes = false;                // --bce-sum: sum over classes, then batch mean
  bool smooth_dense = false;               // smooth dense targets too (multi-label)
};
at::Tensor binary_cross_entropy(const at::Tensor& logits, const at::Tensor& target,
                                const BinaryCrossEntropyOptions& options);

// timm's JsdCrossEntropy: timm/train/jsd_loss.hpp.

using LossFn = std::function<at::Tensor(const at::Tensor& logits, const at::Tensor& target)>;

// train.py's choice of training loss, first match wins: --jsd-loss, then
// (mixup active) BCE or soft-target CE, then (smoothing > 0) BCE or
// label-smoothing CE, else plain CE.
struct TrainLossArgs {
  bool jsd_loss = false;
  int64_t num_aug_splits = 0;
  bool mixup_active = false;
  bool bce_loss = false;
  double smoothing = 0.1;
  BinaryCrossEntropyOptions bce;
};
LossFn create_train_loss(const TrainLossArgs& args);

}  // namespace timm
