#include "timm/train/jsd_loss.hpp"

#include <ATen/ATen.h>

#include <string>
#include <vector>

#include "timm/base/error.hpp"
#include "timm/train/losses.hpp"

namespace timm {

at::Tensor jsd_cross_entropy(const at::Tensor& output, const at::Tensor& target, int64_t num_splits, double alpha,
                             double smoothing) {
  if (num_splits < 1) throw Error("JSD loss: the number of splits must be >= 1, got " + std::to_string(num_splits));
  const int64_t split_size = output.size(0) / num_splits;
  if (split_size * num_splits != output.size(0)) {
    throw Error("JSD loss: a batch of " + std::to_string(output.size(0)) + " does not split into " +
                std::to_string(num_splits) + " equal parts");
  }
  const std::vector<at::Tensor> logits = output.split(split_size);
  // Cross-entropy only on the clean split.
  at::Tensor loss =
      label_smoothing_cross_entropy(logits[0], target.slice(0, 0, split_size), smoothing > 0 ? smoothing : 0.0);
  std::vector<at::Tensor> probs;
  for (const auto& l : logits) probs.push_back(at::softmax(l, 1));
  // Clamp the mixture so the KL divergence cannot explode.
  const at::Tensor logp_mixture = at::stack(probs).mean(0).clamp(1e-7, 1).log();
  at::Tensor kl_sum;
  for (const auto& p : probs) {
    // F.kl_div(..., reduction='batchmean'): the sum over everything / batch.
    const at::Tensor kl = at::kl_div(logp_mixture, p, at::Reduction::Sum) / logp_mixture.size(0);
    kl_sum = kl_sum.defined() ? kl_sum + kl : kl;
  }
  return loss + alpha * kl_sum / static_cast<double>(probs.size());
}

}  // namespace timm
