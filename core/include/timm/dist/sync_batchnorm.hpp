// Synchronized BatchNorm over a process group, as torch's SyncBatchNorm
// (torch/nn/modules/_functions.py), on CPU (Gloo) and CUDA alike.
//
// Training forward: each rank computes its per-channel mean, invstd and
// sample count; one all-gather shares them; the global statistics are their
// count-weighted merge (so uneven local batches weigh right; a rank with an
// empty batch sends count 0 and still joins). Running stats move by the
// momentum towards the global mean and the unbiased global variance.
// Backward: one all-reduce (sum) of per-channel sum(dy) and sum(dy * (x -
// mean)) gives the input gradient of BatchNorm over the concatenated batch;
// weight and bias gradients stay local, as torch's (DDP averages them).
// Eval mode, or a group of one, normalises locally without communication.
//
// Every rank must run the same SyncBatchNorm layers in the same order: each
// training forward is one all-gather, each backward one all-reduce.
#pragma once

#include <cstdint>

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>
#include <torch/nn/options/batchnorm.h>
#include <torch/nn/pimpl.h>

#include "timm/dist/collectives.hpp"
#include "timm/layers/batch_norm.hpp"

namespace timm::dist {

// One SyncBatchNorm step on `bn` (any layout with channels in dim 1):
// synchronized in training, layers::batch_norm otherwise.
at::Tensor sync_batch_norm(const layers::BatchNormState& bn, const at::Tensor& x, const GroupPtr& group);

// sync_batch_norm as the NormalizeFn of a SwappableBatchNorm.
layers::NormalizeFn sync_normalization(GroupPtr group);

// torch.nn.SyncBatchNorm.convert_sync_batchnorm for any model: every
// SwappableBatchNorm (timm::layers::BatchNorm2d, BatchNormAct2d, keeping its
// activation) in `model`'s tree normalises through sync_batch_norm from now
// on. Modules, parameters, buffers and state_dict keys stay as they were.
// Throws timm::Error naming every plain torch::nn::BatchNormXd it cannot
// convert (before converting anything), and any module whose normalisation
// was already swapped (e.g. by --split-bn). Returns the number converted.
int64_t convert_sync_batchnorm(torch::nn::Module& model, const GroupPtr& group);

// A BatchNorm2d that is synchronized over `group` from construction.
class SyncBatchNormImpl : public layers::BatchNorm2dImpl {
 public:
  SyncBatchNormImpl(const torch::nn::BatchNormOptions& options, GroupPtr group);
  const GroupPtr& group() const { return group_; }

 private:
  GroupPtr group_;
};
TORCH_MODULE(SyncBatchNorm);

}  // namespace timm::dist
