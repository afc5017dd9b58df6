#include "timm/train/losses.hpp"

#include <vector>

#include <ATen/ATen.h>

#include "timm/core/error.hpp"

namespace timm {

at::Tensor label_smoothing_cross_entropy(const at::Tensor& logits, const at::Tensor& target, double smoothing) {
  const at::Tensor logprobs = at::log_softmax(logits, /*dim=*/-1);
  const at::Tensor nll = -logprobs.gather(-1, target.unsqueeze(1)).squeeze(1);
  if (smoothing == 0.0) return nll.mean();
  const at::Tensor smooth = -logprobs.mean(-1);
  return ((1.0 - smoothing) * nll + smoothing * smooth).mean();
}

at::Tensor soft_target_cross_entropy(const at::Tensor& logits, const at::Tensor& target) {
  return at::sum(-target * at::log_softmax(logits, /*dim=*/-1), /*dim=*/-1).mean();
}

at::Tensor binary_cross_entropy(const at::Tensor& logits, const at::Tensor& target,
                                const BinaryCrossEntropyOptions& options) {
  at::Tensor dense = target;
  if (target.sizes() != logits.sizes()) {
    const int64_t num_classes = logits.size(-1);
    const double off_value = options.smoothing / static_cast<double>(num_classes);
    const double on_value = 1.0 - options.smoothing + off_value;
    dense = at::full({logits.size(0), num_classes}, off_value, logits.options())
                .scatter_(1, target.to(at::kLong).view({-1, 1}), on_value);
  }
  if (options.target_threshold) dense = dense.gt(*options.target_threshold).to(dense.scalar_type());
  std::optional<at::Tensor> pos_weight;
  if (options.pos_weight) pos_weight = at::scalar_tensor(*options.pos_weight, logits.options());
  const int64_t reduction = options.sum_classes ? at::Reduction::None : at::Reduction::Mean;
  at::Tensor loss = at::binary_cross_entropy_with_logits(logits, dense, /*weight=*/std::nullopt, pos_weight, reduction);
  if (options.sum_classes) loss = loss.sum(-1).mean();
  return loss;
}

at::Tensor jsd_cross_entropy(const at::Tensor& logits, const at::Tensor& target, int64_t num_splits, double alpha,
                             double smoothing) {
  const int64_t split_size = logits.size(0) / num_splits;
  if (num_splits < 1 || split_size * num_splits != logits.size(0)) {
    throw Error("JSD loss: a batch of " + std::to_string(logits.size(0)) + " does not split into " +
                std::to_string(num_splits) + " equal augmentation splits");
  }
  const std::vector<at::Tensor> chunks = logits.split(split_size);
  at::Tensor loss = label_smoothing_cross_entropy(chunks[0], target.slice(0, 0, split_size), smoothing);
  std::vector<at::Tensor> probs;
  for (const auto& chunk : chunks) probs.push_back(at::softmax(chunk, /*dim=*/1));
  const at::Tensor log_mixture = at::clamp(at::stack(probs).mean(0), 1e-7, 1.0).log();
  at::Tensor divergence = at::zeros({}, logits.options());
  for (const auto& p : probs) {
    // F.kl_div(input, target, reduction='batchmean'): sum(t * (log t - input)) / N
    divergence = divergence + at::kl_div(log_mixture, p, at::Reduction::Sum) / log_mixture.size(0);
  }
  return loss + alpha * divergence / static_cast<double>(probs.size());
}

LossFn create_train_loss(const TrainLossArgs& args) {
  if (args.jsd_loss) {
    if (args.num_aug_splits < 2) throw UsageError("--jsd-loss needs --aug-splits of 2 or more");
    return [n = args.num_aug_splits, s = args.smoothing](const at::Tensor& x, const at::Tensor& t) {
      return jsd_cross_entropy(x, t, n, /*alpha=*/12.0, s);
    };
  }
  if (args.mixup_active) {
    if (args.bce_loss) {
      BinaryCrossEntropyOptions bce = args.bce;
      bce.smoothing = 0.0;  // Mixup's targets carry the smoothing already
      return [bce](const at::Tensor& x, const at::Tensor& t) { return binary_cross_entropy(x, t, bce); };
    }
    return [](const at::Tensor& x, const at::Tensor& t) { return soft_target_cross_entropy(x, t); };
  }
  if (args.smoothing > 0.0) {
    if (args.bce_loss) {
      BinaryCrossEntropyOptions bce = args.bce;
      bce.smoothing = args.smoothing;
      return [bce](const at::Tensor& x, const at::Tensor& t) { return binary_cross_entropy(x, t, bce); };
    }
    return [s = args.smoothing](const at::Tensor& x, const at::Tensor& t) {
      return label_smoothing_cross_entropy(x, t, s);
    };
  }
  return [](const at::Tensor& x, const at::Tensor& t) { return label_smoothing_cross_entropy(x, t, 0.0); };
}

}  // namespace timm
