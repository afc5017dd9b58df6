// Training metrics as timm's utils: a running average and top-k accuracy;
// validate()'s test-time augmentation reduction.
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
  // Continues a meter whose sum and count were saved (a resumed epoch); the
  // last value is unknown until the next update, taken as the mean.
  void restore(double sum, int64_t count) {
    sum_ = sum;
    count_ = count;
    val_ = avg();
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

// train.py's test-time augmentation reduction (--tta N, N > 1), after the
// forward and before the loss and accuracy: the mean of each N consecutive
// rows of `output` (output.unfold(0, N, N).mean(dim=2)) and the first target
// of each N (target[0:B:N]). A batch whose size is not a multiple of N
// throws Error (train.py fails there with a size mismatch in its loss).
struct TtaReduced {
  at::Tensor output;  // (B / N, ...)
  at::Tensor target;  // (B / N)
};
TtaReduced reduce_tta(const at::Tensor& output, const at::Tensor& target, int64_t factor);

}  // namespace timm
