// Multi-label classification, as timm's MultiLabelClassificationTask
// (timm/task/classification.py) and MultiLabelClassificationEvaluator
// (timm/task/evaluator.py): independent binary labels, dense float targets
// shaped (N, C), a sigmoid per class.
//
//   timm::MultiLabelClassificationTask task(
//       model, timm::create_multilabel_loss(bce, /*soft_targets=*/mixup_active), /*threshold=*/0.5);
//   timm::TaskResult result = task.forward(input, target);  // target: (N, C) float
//
//   timm::MultiLabelClassificationEvaluator evaluator(task.threshold(), max_samples);
//   for (...) evaluator.update(logits, target);
//   timm::MultiLabelMetrics metrics = evaluator.compute(group);  // group: null for one process
//
// Training uses the criterion's (possibly smoothed) targets; evaluation always
// scores unsmoothed binary targets.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include "timm/dist/collectives.hpp"
#include "timm/train/losses.hpp"
#include "timm/train/task.hpp"

namespace timm {

// timm's create_classification_loss(multi_label=True) for the default
// loss_type 'bce': BinaryCrossEntropy with dense-target smoothing (each binary
// label moved towards 0.5 by `bce.smoothing`: t * (1 - s) + 0.5 * s). With
// `soft_targets` (Mixup/CutMix active, which smooth while mixing) the
// smoothing is 0. The other BCE options (target threshold, pos weight, sum
// over classes) are used as given.
LossFn create_multilabel_loss(BinaryCrossEntropyOptions bce, bool soft_targets);

// timm's MultiLabelClassificationTask: a ClassificationTask whose targets are
// dense floating-point (N, C) labels. `threshold` is the sigmoid probability
// at or above which a label counts as predicted, for the evaluator's F1
// metrics (timm's create_evaluator passes it on).
class MultiLabelClassificationTask : public ClassificationTask {
 public:
  // Throws UsageError unless 0 < threshold < 1.
  MultiLabelClassificationTask(ModelPtr model, LossFn criterion, double threshold = 0.5);

  // The model's logits and criterion(logits, target). Throws Error naming the
  // target's shape and dtype unless it is 2-D and floating point (checked
  // before the model runs, as timm), and naming both shapes when the logits'
  // shape differs from the target's.
  TaskResult forward(const ModelInput& input, const at::Tensor& target) override;

  // "MultiLabelClassificationTask: threshold=0.5".
  std::string describe() const override;

  double threshold() const { return threshold_; }

 private:
  double threshold_;
};

// What MultiLabelClassificationEvaluator reports. Every metric but the loss is
// a percentage; metrics over no samples are 0.
struct MultiLabelMetrics {
  double loss = 0;       // mean over samples of each batch's BCE-with-logits (mean over its labels)
  double map = 0;        // mean over classes of the exact average precision; a class with no positive: 0
  double micro_f1 = 0;   // 2 TP / (predicted + actual positives), over every label
  double macro_f1 = 0;   // the same per class, averaged over classes
  double sample_f1 = 0;  // the same per sample, averaged over samples
  int64_t count = 0;     // samples scored

  // The metrics in timm's order and names (metric_names): loss, map,
  // micro_f1, macro_f1, sample_f1.
  std::vector<std::pair<std::string, double>> items() const;
};

// timm's MultiLabelClassificationEvaluator: accumulates logits and targets
// over an evaluation and computes, once at the end, the BCE loss, macro mAP
// and micro / macro / sample F1.
//
// - Loss: each batch's BCE-with-logits (mean over its N x C labels, in
//   float32, on the targets as given) times N, summed in float64.
// - mAP: per class, the non-interpolated average precision of the logits as
//   scores, with tied scores forming one threshold (as sklearn's
//   average_precision_score per column); a class with no positive target
//   counts 0 and stays in the mean.
// - F1: a label is predicted when sigmoid(logit) >= threshold; sums in
//   float64; a zero denominator counts 0.
// - Soft targets (any value other than 0 and 1) are binarised at 0.5 for mAP
//   and F1, with a warning the first time; the loss uses them as given.
// - max_samples: rows beyond that many samples in total are ignored (the
//   padding a distributed sampler adds).
//
// Logits are kept as float32 on the CPU, targets as bool, until compute().
class MultiLabelClassificationEvaluator {
 public:
  static constexpr const char* kDefaultMetric = "map";  // timm's default_metric

  // `device`: where the loss total lives and the collectives of compute()
  // run (the rank's CUDA device for NCCL). Throws UsageError unless
  // 0 < threshold < 1, or for a negative max_samples.
  explicit MultiLabelClassificationEvaluator(double threshold = 0.5, std::optional<int64_t> max_samples = std::nullopt,
                                             at::Device device = at::kCPU);

  // Forgets every batch (and the max_samples count); the soft-target warning
  // is not repeated.
  void reset();

  // Adds a batch, without gradients: logits (N, C) of any floating dtype,
  // targets (N, C) of any dtype (converted to float32). Throws Error naming
  // both shapes unless the logits are 2-D and the targets have their shape.
  void update(const at::Tensor& output, const at::Tensor& target);

  // Samples taken so far (after the max_samples limit).
  int64_t num_samples() const { return num_samples_; }
  // Whether a batch had soft targets (and the warning was logged).
  bool warned_soft_targets() const { return warned_soft_targets_; }

  // timm's summary(): this rank's running loss, no collectives; the other
  // metrics are left 0.
  MultiLabelMetrics summary() const;

  // timm's compute(distributed): every metric. With a `group`, collective
  // (every rank calls it): the loss sums and sample counts are all-reduced,
  // and every rank's rows are gathered in rank order (timm's _gather_rows:
  // row counts may differ, zero included, so each rank's rows are padded to
  // the largest count, gathered and cut back), so each rank reports what one
  // process over all the rows in rank order reports. Throws Error when two
  // ranks with rows disagree on the number of classes.
  MultiLabelMetrics compute(const dist::GroupPtr& group = {}) const;

 private:
  double threshold_;
  std::optional<int64_t> max_samples_;
  at::Device device_;
  int64_t num_samples_ = 0;
  int64_t count_ = 0;
  at::Tensor loss_sum_;  // float64 scalar on device_
  std::vector<at::Tensor> outputs_;
  std::vector<at::Tensor> targets_;
  bool warned_soft_targets_ = false;
};

}  // namespace timm
