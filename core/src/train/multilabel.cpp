#include "timm/train/multilabel.hpp"

#include <algorithm>
#include <utility>

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include "timm/base/error.hpp"
#include "timm/base/python_repr.hpp"
#include "timm/log/log.hpp"

namespace timm {

namespace {

void check_threshold(double threshold) {
  if (!(threshold > 0.0 && threshold < 1.0)) {
    throw UsageError("multi-label prediction threshold " + python_float_repr(threshold) +
                     ": expected a value between 0 and 1, both excluded");
  }
}

std::string shape_text(const at::Tensor& tensor) { return python_tuple_repr(tensor.sizes().vec()); }

std::string dtype_text(const at::Tensor& tensor) { return std::string(c10::toString(tensor.scalar_type())); }

// timm's _average_precision_columns: per-column AP of scores (N, c) against
// bool targets (N, c), float64.
at::Tensor average_precision_columns(const at::Tensor& output, const at::Tensor& target) {
  const int64_t num_examples = output.size(0);
  const at::Tensor order = output.argsort(/*dim=*/0, /*descending=*/true);
  const at::Tensor scores = output.gather(0, order);
  const at::Tensor positives = target.gather(0, order).to(at::kDouble);
  const at::Tensor true_positives = positives.cumsum(0);
  // A threshold includes every example tied at its score: precision is taken
  // at the end of each tie group.
  at::Tensor ends = at::ones_like(scores, scores.options().dtype(at::kBool));
  using at::indexing::None;
  using at::indexing::Slice;
  ends.index_put_({Slice(None, -1)}, scores.index({Slice(None, -1)}).ne(scores.index({Slice(1, None)})));
  const at::Tensor index = at::arange(num_examples, at::TensorOptions().dtype(at::kLong).device(output.device()))
                               .unsqueeze(1)
                               .expand_as(ends);
  const at::Tensor group_end =
      std::get<0>(at::where(ends, index, at::full_like(index, num_examples)).flip({0}).cummin(0)).flip({0});
  const at::Tensor precision = true_positives.gather(0, group_end) / (group_end + 1).to(at::kDouble);
  const at::Tensor total = true_positives[-1];
  return at::where(total > 0, (positives * precision).sum(0) / total.clamp_min(1), at::zeros_like(total));
}

// timm's _average_precision: per-class AP of (N, C) scores, columns in chunks
// of about 2^24 values.
at::Tensor average_precision(const at::Tensor& output, const at::Tensor& target) {
  constexpr int64_t kChunkElements = int64_t{1} << 24;
  const int64_t num_examples = output.size(0), num_classes = output.size(1);
  if (num_examples == 0 || num_classes == 0) {
    return at::zeros({num_classes}, at::TensorOptions().dtype(at::kDouble).device(output.device()));
  }
  const int64_t chunk = std::max<int64_t>(1, kChunkElements / num_examples);
  std::vector<at::Tensor> parts;
  for (int64_t i = 0; i < num_classes; i += chunk) {
    const int64_t end = std::min(num_classes, i + chunk);
    parts.push_back(average_precision_columns(output.slice(1, i, end), target.slice(1, i, end)));
  }
  return at::cat(parts);
}

// timm's _gather_rows: every rank's rows of a 2-D tensor, in rank order, on
// the CPU; row counts may differ, zero included.
at::Tensor gather_rows(const dist::GroupPtr& group, const at::Tensor& tensor, const at::Device& device) {
  const at::Tensor shape = at::tensor({tensor.size(0), tensor.size(1)}, at::kLong).to(device);
  std::vector<at::Tensor> shapes = dist::all_gather(group, shape);
  for (auto& s : shapes) s = s.cpu();
  int64_t max_rows = 0, num_cols = 0;
  for (size_t r = 0; r < shapes.size(); ++r) {
    const int64_t rows = shapes[r][0].item<int64_t>(), cols = shapes[r][1].item<int64_t>();
    max_rows = std::max(max_rows, rows);
    num_cols = std::max(num_cols, cols);
  }
  for (size_t r = 0; r < shapes.size(); ++r) {
    const int64_t rows = shapes[r][0].item<int64_t>(), cols = shapes[r][1].item<int64_t>();
    if (rows > 0 && cols != num_cols) {
      throw Error("multi-label evaluation: rank " + std::to_string(r) + " has " + std::to_string(cols) +
                  " classes, another rank " + std::to_string(num_cols) + "; every rank must score the same classes");
    }
  }
  if (max_rows == 0 || num_cols == 0) return at::empty({0, num_cols}, tensor.options().device(at::kCPU));
  at::Tensor padded = at::zeros({max_rows, num_cols}, tensor.options().device(device));
  if (tensor.size(0) > 0) padded.slice(0, 0, tensor.size(0)).copy_(tensor);
  const std::vector<at::Tensor> gathered = dist::all_gather(group, padded);
  std::vector<at::Tensor> rows;
  for (size_t r = 0; r < gathered.size(); ++r)
    rows.push_back(gathered[r].slice(0, 0, shapes[r][0].item<int64_t>()).cpu());
  return at::cat(rows);
}

}  // namespace

LossFn create_multilabel_loss(BinaryCrossEntropyOptions bce, bool soft_targets) {
  if (soft_targets) bce.smoothing = 0.0;
  bce.smooth_dense = true;
  return
      [bce](const at::Tensor& logits, const at::Tensor& target) { return binary_cross_entropy(logits, target, bce); };
}

MultiLabelClassificationTask::MultiLabelClassificationTask(ModelPtr model, LossFn criterion, double threshold)
    : ClassificationTask(std::move(model), std::move(criterion)), threshold_(threshold) {
  check_threshold(threshold);
}

TaskResult MultiLabelClassificationTask::forward(const ModelInput& input, const at::Tensor& target) {
  if (target.dim() != 2 || !target.is_floating_point()) {
    throw Error("multi-label training: target of shape " + shape_text(target) + " and dtype " + dtype_text(target) +
                "; expected dense floating-point targets shaped (batch, num_classes)");
  }
  at::Tensor output = forward_input(*model_, input);
  if (output.sizes() != target.sizes()) {
    throw Error("multi-label training: logits of shape " + shape_text(output) + " but target of shape " +
                shape_text(target) + "; expected the same shape");
  }
  at::Tensor loss = criterion_(output, target);
  return TaskResult{std::move(loss), std::move(output), {}};
}

std::string MultiLabelClassificationTask::describe() const {
  return "MultiLabelClassificationTask: threshold=" + python_float_repr(threshold_);
}

std::vector<std::pair<std::string, double>> MultiLabelMetrics::items() const {
  return {{"loss", loss}, {"map", map}, {"micro_f1", micro_f1}, {"macro_f1", macro_f1}, {"sample_f1", sample_f1}};
}

MultiLabelClassificationEvaluator::MultiLabelClassificationEvaluator(double threshold,
                                                                     std::optional<int64_t> max_samples,
                                                                     at::Device device)
    : threshold_(threshold), max_samples_(max_samples), device_(device) {
  check_threshold(threshold);
  if (max_samples && *max_samples < 0) {
    throw UsageError("multi-label evaluation: max_samples " + std::to_string(*max_samples) + ": expected 0 or more");
  }
  reset();
}

void MultiLabelClassificationEvaluator::reset() {
  num_samples_ = 0;
  count_ = 0;
  loss_sum_ = at::zeros({}, at::TensorOptions().dtype(at::kDouble).device(device_));
  outputs_.clear();
  targets_.clear();
}

void MultiLabelClassificationEvaluator::update(const at::Tensor& output_in, const at::Tensor& target_in) {
  if (output_in.dim() != 2 || target_in.sizes() != output_in.sizes()) {
    throw Error("multi-label evaluation: logits of shape " + shape_text(output_in) + " and targets of shape " +
                shape_text(target_in) + "; expected matching (batch, num_classes) logits and targets");
  }
  at::NoGradGuard no_grad;
  at::Tensor output = output_in, target = target_in;
  if (max_samples_) {
    const int64_t count = std::max<int64_t>(0, *max_samples_ - num_samples_);
    output = output.slice(0, 0, count);
    target = target.slice(0, 0, count);
  }
  num_samples_ += output.size(0);
  output = output.detach().to(at::kFloat);
  target = target.detach();
  const int64_t n = output.size(0);
  if (n == 0) return;
  target = target.to(at::kFloat);
  const at::Tensor loss = at::binary_cross_entropy_with_logits(output, target);
  loss_sum_ += loss.to(loss_sum_.options()) * n;
  count_ += n;
  if (!at::logical_or(target.eq(0), target.eq(1)).all().item<bool>()) {
    if (!warned_soft_targets_) {
      log_warning("Multi-label evaluation binarizes soft targets at 0.5 for the mAP and F1 metrics.");
      warned_soft_targets_ = true;
    }
    target = target.ge(0.5);
  }
  outputs_.push_back(output.cpu());
  targets_.push_back(target.to(at::kBool).cpu());
}

MultiLabelMetrics MultiLabelClassificationEvaluator::summary() const {
  MultiLabelMetrics metrics;
  metrics.count = count_;
  metrics.loss = loss_sum_.item<double>() / static_cast<double>(std::max<int64_t>(count_, 1));
  return metrics;
}

MultiLabelMetrics MultiLabelClassificationEvaluator::compute(const dist::GroupPtr& group) const {
  at::NoGradGuard no_grad;
  at::Tensor loss_sum = loss_sum_.clone();
  at::Tensor count = at::tensor({count_}, at::kLong).to(device_);
  at::Tensor output, target;
  if (!outputs_.empty()) {
    output = at::cat(outputs_);
    target = at::cat(targets_);
  } else {
    output = at::empty({0, 0}, at::kFloat);
    target = at::empty({0, 0}, at::kBool);
  }
  if (group) {
    dist::all_reduce_sum(group, loss_sum);
    dist::all_reduce_sum(group, count);
    output = gather_rows(group, output, device_);
    target = gather_rows(group, target.to(at::kByte), device_).to(at::kBool);
  }
  MultiLabelMetrics metrics;
  metrics.count = count.item<int64_t>();
  metrics.loss = loss_sum.item<double>() / static_cast<double>(std::max<int64_t>(metrics.count, 1));
  if (output.size(0) == 0) return metrics;

  const at::Tensor prediction = output.sigmoid().ge(threshold_);
  const at::Tensor true_positive = at::logical_and(prediction, target).to(at::kDouble);
  const at::Tensor denominator = prediction.to(at::kDouble) + target.to(at::kDouble);
  metrics.map = 100 * average_precision(output, target).mean().item<double>();
  metrics.micro_f1 = 200 * (true_positive.sum() / denominator.sum().clamp_min(1)).item<double>();
  metrics.macro_f1 = 200 * (true_positive.sum(0) / denominator.sum(0).clamp_min(1)).mean().item<double>();
  metrics.sample_f1 = 200 * (true_positive.sum(1) / denominator.sum(1).clamp_min(1)).mean().item<double>();
  return metrics;
}

}  // namespace timm
