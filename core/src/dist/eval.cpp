#include "timm/dist/eval.hpp"

#include <ATen/ATen.h>

#include "timm/base/error.hpp"
#include "timm/train/metrics.hpp"

namespace timm::dist {

void EvalSums::add_batch(const at::Tensor& logits, const at::Tensor& targets, const at::Tensor& per_sample_loss) {
  const int64_t n = logits.size(0);
  if (targets.size(0) != n || per_sample_loss.numel() != n) {
    throw Error("EvalSums::add_batch: " + std::to_string(n) + " logits rows, " + std::to_string(targets.size(0)) +
                " targets and " + std::to_string(per_sample_loss.numel()) + " losses; expected one per sample");
  }
  if (n == 0) return;
  const auto correct = correct_topk(logits, targets, {1, 5});
  loss_sum += per_sample_loss.detach().to(at::kDouble).sum().item<double>();
  top1_correct += correct[0];
  top5_correct += correct[1];
  count += n;
}

EvalSums& EvalSums::operator+=(const EvalSums& other) {
  loss_sum += other.loss_sum;
  top1_correct += other.top1_correct;
  top5_correct += other.top5_correct;
  count += other.count;
  return *this;
}

EvalSums all_reduce_eval_sums(const EvalSums& local, const GroupPtr& group, at::Device device) {
  // Counts travel as doubles: exact below 2^53.
  auto sums = at::tensor({local.loss_sum, static_cast<double>(local.top1_correct),
                          static_cast<double>(local.top5_correct), static_cast<double>(local.count)},
                         at::TensorOptions().dtype(at::kDouble).device(device));
  all_reduce_sum(group, sums);
  sums = sums.cpu();
  const auto* v = sums.data_ptr<double>();
  return {v[0], static_cast<int64_t>(v[1]), static_cast<int64_t>(v[2]), static_cast<int64_t>(v[3])};
}

EvalMetrics eval_metrics(const EvalSums& sums) {
  if (sums.count == 0) return {};
  const double n = static_cast<double>(sums.count);
  return {sums.loss_sum / n, 100.0 * static_cast<double>(sums.top1_correct) / n,
          100.0 * static_cast<double>(sums.top5_correct) / n, sums.count};
}

}  // namespace timm::dist
