#include "timm/layers/split_batchnorm.hpp"

#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <torch/csrc/autograd/grad_mode.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/container/modulelist.h>

#include "timm/base/error.hpp"

namespace timm::layers {
namespace {

// An auxiliary BatchNorm2d with the layer's options, parameters and running stats (copies).
torch::nn::BatchNorm2d make_aux(SwappableBatchNorm& norm) {
  const auto bn = norm.batch_norm_state();
  torch::nn::BatchNorm2d aux(torch::nn::BatchNormOptions(norm.num_features())
                                 .eps(bn.eps)
                                 .momentum(bn.momentum)
                                 .affine(bn.weight.defined())
                                 .track_running_stats(bn.tracks_running_stats()));
  torch::NoGradGuard no_grad;
  const auto copy = [](at::Tensor& to, const at::Tensor& from) {
    if (from.defined()) to.set_data(from.detach().clone());
  };
  copy(aux->weight, bn.weight);
  copy(aux->bias, bn.bias);
  copy(aux->running_mean, bn.running_mean);
  copy(aux->running_var, bn.running_var);
  copy(aux->num_batches_tracked, bn.num_batches_tracked);
  return aux;
}

NormalizeFn split_normalization(torch::nn::ModuleList aux_bn, int64_t num_splits) {
  return [aux_bn = std::move(aux_bn), num_splits](const BatchNormState& bn, const at::Tensor& x) {
    if (!bn.training) return batch_norm(bn, x);
    const int64_t split_size = x.size(0) / num_splits;
    if (split_size * num_splits != x.size(0)) {
      throw Error("SplitBatchNorm2d: batch size " + std::to_string(x.size(0)) + " is not divisible by num_splits " +
                  std::to_string(num_splits));
    }
    const auto parts = x.split(split_size);
    std::vector<at::Tensor> out{batch_norm(bn, parts[0])};
    for (int64_t i = 1; i < num_splits; ++i) {
      out.push_back(aux_bn->ptr<torch::nn::BatchNorm2dImpl>(i - 1)->forward(parts[i]));
    }
    return at::cat(out, 0);
  };
}

}  // namespace

int64_t convert_splitbn_model(torch::nn::Module& model, int64_t num_splits) {
  if (num_splits < 2) {
    throw UsageError("--split-bn with " + std::to_string(num_splits) +
                     " splits: expected at least 2 (set --aug-splits >= 2)");
  }
  const auto norms = convertible_batch_norms(model, "--split-bn");
  for (const auto& entry : norms) {
    torch::nn::ModuleList aux_bn;
    for (int64_t i = 1; i < num_splits; ++i) aux_bn->push_back(make_aux(*entry.norm));
    entry.module->register_module("aux_bn", aux_bn);
    entry.norm->swap_normalization(split_normalization(aux_bn, num_splits));
  }
  return static_cast<int64_t>(norms.size());
}

}  // namespace timm::layers
