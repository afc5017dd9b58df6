// validate.py's --metrics-avg: scikit-learn's precision_score, recall_score
// and f1_score (zero_division=0) of the top-1 predictions, averaged over the
// classes as sklearn's `average` says.
//
//   timm::check_metrics_average("macro");
//   timm::ClassificationScores s = timm::classification_scores(targets, predictions, "macro");
#pragma once

#include <string>

#include <ATen/core/Tensor.h>

namespace timm {

struct ClassificationScores {
  double precision = 0.0;  // fractions in [0, 1], as sklearn's
  double recall = 0.0;
  double f1 = 0.0;
};

// Throws UsageError naming --metrics-avg and the choices unless `average` is
// "micro", "macro" or "weighted".
void check_metrics_average(const std::string& average);

// The scores of `predictions` against `targets` (1-D integer tensors of one
// length) over the classes either names (sklearn's unique_labels): "micro"
// from the summed counts, "macro" the mean of the per-class scores,
// "weighted" their mean weighted by each class's count in `targets`. A
// class never predicted has precision 0 and one never a target recall 0
// (zero_division=0).
ClassificationScores classification_scores(const at::Tensor& targets, const at::Tensor& predictions,
                                           const std::string& average);

}  // namespace timm
