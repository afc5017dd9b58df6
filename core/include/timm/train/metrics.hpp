// Training metrics as timm's utils: a running average and top-k accuracy.
#pragma once

#include <cstdint>
#include <vector>

#include <ATen/core/Tensor.h>

namespace timm {

// timm's AverageMeter: the last value and the count-weighted running mean.
class AverageMeter {
 public:
  void update(double value, int64_t n = 1) {
    val_ = value;
    sum_ += value * static_cast<double>(n);
    count_ += n;
  }
  double val() const { return val_; }
  double avg() const { return count_ > 0 ? sum_ / static_cast<double>(count_) : 0.0; }
  double sum() const { return sum_; }
  int64_t count() const { return count_; }

 private:
  double val_ = 0.0;
  double sum_ = 0.0;
  int64_t count_ = 0;
};

// timm.utils.accuracy: for each k, the number of rows whose target is in the
// top min(k, C) logits. Counts rather than percentages, so that results from
// several batches or ranks add up exactly.
std::vector<int64_t> correct_topk(const at::Tensor& logits, const at::Tensor& target, const std::vector<int64_t>& ks);

}  // namespace timm
