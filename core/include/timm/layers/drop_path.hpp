// Stochastic depth, as timm's layers/drop.py: drop_path and DropPath.
//
// In training, each sample of the batch keeps its residual branch with
// probability 1 - drop_prob; kept samples are divided by the keep probability
// (scale_by_keep) so the expectation is unchanged. Identity in eval mode or
// when drop_prob is 0. DropPath has no parameters, so it adds no state_dict keys.
#pragma once

#include <cstdint>
#include <vector>

#include <ATen/ATen.h>
#include <torch/arg.h>
#include <torch/nn/cloneable.h>
#include <torch/nn/pimpl.h>

namespace timm::layers {

// timm's drop_path(x, drop_prob, training, scale_by_keep): one Bernoulli draw
// per sample, broadcast over the other dimensions.
at::Tensor drop_path(const at::Tensor& x, double drop_prob, bool training, bool scale_by_keep = true);

// timm's calculate_drop_path_rates(rate, depth): float32 linspace(0, rate, depth),
// i.e. block k of `depth` gets rate * k / (depth - 1).
std::vector<double> drop_path_rates(double drop_path_rate, int64_t depth);

struct DropPathOptions {
  /* implicit */ DropPathOptions(double drop_prob = 0.0) : drop_prob_(drop_prob) {}
  TORCH_ARG(double, drop_prob);
  TORCH_ARG(bool, scale_by_keep) = true;
};

class DropPathImpl : public torch::nn::Cloneable<DropPathImpl> {
 public:
  explicit DropPathImpl(const DropPathOptions& options = {});
  void reset() override {}
  void pretty_print(std::ostream& stream) const override;
  at::Tensor forward(const at::Tensor& x);

  DropPathOptions options;
};
TORCH_MODULE(DropPath);

}  // namespace timm::layers
