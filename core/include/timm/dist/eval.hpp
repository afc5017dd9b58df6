// Exact distributed evaluation: every rank evaluates its ShardSampler share
// of the real samples and keeps sums (loss, top-1 and top-5 correct, sample
// count); one all-reduce adds them, so a W-rank evaluation reports what a
// 1-rank evaluation of the same weights reports: the same correct counts, and
// the loss up to the order of a double sum. (timm pads the eval set to a
// multiple of the world size and averages per-rank means, so padded samples
// count twice; this does not.)
#pragma once

#include <cstdint>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include "timm/dist/collectives.hpp"

namespace timm::dist {

struct EvalSums {
  double loss_sum = 0;  // sum of per-sample losses
  int64_t top1_correct = 0;
  int64_t top5_correct = 0;
  int64_t count = 0;  // samples

  // Adds a batch: logits (N, C), int64 targets (N), per-sample losses (N)
  // (e.g. cross entropy with reduction none). top-5 is top-min(5, C), as timm's accuracy.
  void add_batch(const at::Tensor& logits, const at::Tensor& targets, const at::Tensor& per_sample_loss);
  EvalSums& operator+=(const EvalSums& other);
};

// The sums of every rank, on every rank (one all-reduce, in double, of a
// tensor on `device`: CPU for Gloo, the rank's CUDA device for NCCL).
EvalSums all_reduce_eval_sums(const EvalSums& local, const GroupPtr& group, at::Device device = at::kCPU);

// What validate() reports, over the sums: mean loss, top-1 and top-5 in
// percent (0 for no samples).
struct EvalMetrics {
  double loss = 0;
  double top1 = 0;
  double top5 = 0;
  int64_t count = 0;
};
EvalMetrics eval_metrics(const EvalSums& sums);

}  // namespace timm::dist
