#include "timm/tools/classification_scores.hpp"

#include <map>

#include <ATen/ATen.h>

#include "timm/base/error.hpp"

namespace timm {
namespace {

struct ClassCounts {
  int64_t true_positive = 0;
  int64_t predicted = 0;  // true + false positives
  int64_t actual = 0;     // true positives + false negatives: the support
};

// sklearn's _prf_divide with zero_division=0.
double ratio(double numerator, double denominator) { return denominator > 0 ? numerator / denominator : 0.0; }

// sklearn's F1 from counts: 2 tp / (2 tp + fp + fn).
double f1_of(const ClassCounts& c) {
  return ratio(2.0 * static_cast<double>(c.true_positive), static_cast<double>(c.predicted + c.actual));
}

}  // namespace

void check_metrics_average(const std::string& average) {
  if (average != "micro" && average != "macro" && average != "weighted") {
    throw UsageError("--metrics-avg '" + average + "': expected micro, macro or weighted");
  }
}

ClassificationScores classification_scores(const at::Tensor& targets, const at::Tensor& predictions,
                                           const std::string& average) {
  check_metrics_average(average);
  TORCH_CHECK(targets.dim() == 1 && predictions.sizes() == targets.sizes(),
              "classification_scores: expected two 1-D tensors of one length, got ", targets.sizes(), " and ",
              predictions.sizes());
  const at::Tensor y_true = targets.to(at::kLong).contiguous(), y_pred = predictions.to(at::kLong).contiguous();
  const int64_t* t = y_true.data_ptr<int64_t>();
  const int64_t* p = y_pred.data_ptr<int64_t>();
  std::map<int64_t, ClassCounts> classes;
  ClassCounts all;
  for (int64_t i = 0; i < y_true.numel(); ++i) {
    ++classes[t[i]].actual;
    ++classes[p[i]].predicted;
    if (t[i] == p[i]) ++classes[t[i]].true_positive;
  }
  for (const auto& [label, c] : classes) {
    all.true_positive += c.true_positive;
    all.predicted += c.predicted;
    all.actual += c.actual;
  }
  if (average == "micro") {
    const auto tp = static_cast<double>(all.true_positive);
    return {ratio(tp, static_cast<double>(all.predicted)), ratio(tp, static_cast<double>(all.actual)), f1_of(all)};
  }
  ClassificationScores sum;
  double weight_sum = 0.0;
  for (const auto& [label, c] : classes) {
    const double weight = average == "weighted" ? static_cast<double>(c.actual) : 1.0;
    const auto tp = static_cast<double>(c.true_positive);
    sum.precision += weight * ratio(tp, static_cast<double>(c.predicted));
    sum.recall += weight * ratio(tp, static_cast<double>(c.actual));
    sum.f1 += weight * f1_of(c);
    weight_sum += weight;
  }
  return {ratio(sum.precision, weight_sum), ratio(sum.recall, weight_sum), ratio(sum.f1, weight_sum)};
}

}  // namespace timm
