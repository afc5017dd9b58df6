#include "timm/train/losses.hpp"

#include <ATen/ATen.h>

namespace timm {

at::Tensor label_smoothing_cross_entropy(const at::Tensor& logits, const at::Tensor& target, double smoothing) {
  const at::Tensor logprobs = at::log_softmax(logits, /*dim=*/-1);
  const at::Tensor nll = -logprobs.gather(-1, target.unsqueeze(1)).squeeze(1);
  if (smoothing == 0.0) return nll.mean();
  const at::Tensor smooth = -logprobs.mean(-1);
  return ((1.0 - smoothing) * nll + smoothing * smooth).mean();
}

}  // namespace timm
