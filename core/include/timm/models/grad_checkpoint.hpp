// Activation (gradient) checkpointing, as torch.utils.checkpoint and timm's
// checkpoint / checkpoint_seq (timm/models/_manipulate.py) that timm's
// set_grad_checkpointing turns on: a checkpointed function keeps only its
// input from the forward pass and runs again in the backward pass to rebuild
// what its gradients need. Activation memory falls to about one input per
// checkpointed block; each step costs about one more forward pass.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include <ATen/core/Tensor.h>
#include <torch/nn/modules/container/any.h>
#include <torch/nn/modules/container/sequential.h>

namespace timm {

using TensorFn = std::function<at::Tensor(const at::Tensor&)>;

// torch.utils.checkpoint.checkpoint(fn, x) with use_reentrant=False's
// results: fn(x) runs without building a graph and only x is kept; the
// backward pass runs fn again on a detached x with grad enabled and takes the
// gradients of x and of `parameters` from that graph. The CPU generator's
// state (and the input's device's, when it is not the CPU) and the autocast
// state are those of the forward pass during the rerun, so dropout and drop
// path draw the same masks and the results equal the plain run's; the
// generators are left as they were before the rerun. `parameters` must list
// every tensor fn reads that needs a gradient (a module's parameters()): the
// others get none. Without grad mode this is fn(x). BatchNorm in training
// updates its running statistics again in the rerun, as under torch's
// checkpoint.
at::Tensor checkpoint(const TensorFn& fn, const at::Tensor& x, const std::vector<at::Tensor>& parameters);

// checkpoint() of one module's forward, with the module's parameters.
at::Tensor checkpoint(const torch::nn::AnyModule& module, const at::Tensor& x);

// timm's checkpoint_seq(functions, x, every, skip_last): the modules run in
// order, each run of `every` consecutive ones checkpointed as one; with
// skip_last the last module runs plainly after them. every >= 1.
at::Tensor checkpoint_seq(const std::vector<torch::nn::AnyModule>& functions, const at::Tensor& x, int64_t every = 1,
                          bool skip_last = false);

// The modules of a Sequential in order (checkpoint_seq(sequential, x)), or of
// several one after another (checkpoint_seq(..., flatten=True) over a list of
// Sequentials, as timm's ResNet and EfficientNet checkpoint their stages).
std::vector<torch::nn::AnyModule> sequence_modules(const torch::nn::Sequential& sequential);
std::vector<torch::nn::AnyModule> sequence_modules(const std::vector<torch::nn::Sequential>& sequentials);

}  // namespace timm
