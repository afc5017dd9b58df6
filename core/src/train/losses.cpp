#include "timm/train/losses.hpp"

#include <vector>

#include <ATen/ATen.h>

#include "timm/base/error.hpp"
#include "timm/train/jsd_loss.hpp"

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
  } else if (options.smooth_dense && options.smoothing != 0.0) {
    dense = target * (1.0 - options.smoothing) + 0.5 * options.smoothing;
  }
  if (options.target_threshold) dense = dense.gt(*options.target_threshold).to(dense.scalar_type());
  std::optional<at::Tensor> pos_weight;
  if (options.pos_weight) pos_weight = at::scalar_tensor(*options.pos_weight, logits.options());
  const int64_t reduction = options.sum_classes ? at::Reduction::None : at::Reduction::Mean;
  at::Tensor loss = at::binary_cross_entropy_with_logits(logits, dense, /*weight=*/std::nullopt, pos_weight, reduction);
  if (options.sum_classes) loss = loss.sum(-1).mean();
  return loss;
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
