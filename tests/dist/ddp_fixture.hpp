// The model, data and step of the DDP equivalence test, shared by the worker
// (one rank of a real multi-process run) and the single-process reference.
#pragma once

#include <cstdint>
#include <vector>

#include <ATen/ATen.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>

#include "timm/layers/batch_norm.hpp"

namespace timm::test {

// Small but with several buckets at a small bucket cap; `unused` adds a
// parameter the forward never touches; `with_bn` a BatchNorm (the SDK's,
// which --sync-bn converts) after the first convolution.
struct TinyNetImpl : torch::nn::Module {
  explicit TinyNetImpl(bool with_unused, bool with_bn = false) {
    conv = register_module("conv", torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 6, 3).padding(1)));
    if (with_bn) bn = register_module("bn", timm::layers::BatchNorm2d(torch::nn::BatchNormOptions(6)));
    conv2 = register_module("conv2", torch::nn::Conv2d(torch::nn::Conv2dOptions(6, 8, 3).stride(2).padding(1)));
    fc = register_module("fc", torch::nn::Linear(8 * 4 * 4, 10));
    if (with_unused) unused = register_module("unused", torch::nn::Linear(4, 4));
  }
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor h = conv->forward(x);
    if (bn) h = bn->forward(h);
    h = at::relu(h);
    h = at::relu(conv2->forward(h));
    return fc->forward(h.flatten(1));
  }
  torch::nn::Conv2d conv{nullptr}, conv2{nullptr};
  torch::nn::Linear fc{nullptr}, unused{nullptr};
  timm::layers::BatchNorm2d bn{nullptr};
};
TORCH_MODULE(TinyNet);

struct DdpCase {
  int64_t steps = 4;
  int64_t accum = 1;        // micro-batches per step
  int64_t local_batch = 4;  // B per rank per micro-batch
  int world = 2;
  double lr = 0.1;
};

// The global micro-batches: steps x accum of (world * B) samples, the same on
// every process (seeded); rank r takes rows [r*B, (r+1)*B).
inline std::pair<at::Tensor, at::Tensor> global_data(const DdpCase& c) {
  at::manual_seed(1234);
  const int64_t n = c.steps * c.accum;
  at::Tensor x = at::randn({n, c.world * c.local_batch, 1, 8, 8});
  at::Tensor y = at::randint(0, 10, {n, c.world * c.local_batch}, at::kLong);
  return {x, y};
}

// All parameters and floating-point buffers (BatchNorm running statistics)
// flattened into one vector (for comparing states).
inline at::Tensor flat_parameters(torch::nn::Module& m) {
  std::vector<at::Tensor> parts;
  for (const auto& p : m.parameters()) parts.push_back(p.detach().reshape({-1}));
  for (const auto& b : m.buffers()) {
    if (b.is_floating_point()) parts.push_back(b.detach().reshape({-1}));
  }
  return at::cat(parts).clone();
}

// Plain SGD without momentum: p -= lr * grad, then zero the grads.
inline void sgd_step(torch::nn::Module& m, double lr) {
  at::NoGradGuard no_grad;
  for (auto& p : m.parameters()) {
    if (!p.grad().defined()) continue;
    p.sub_(p.grad(), lr);
    p.mutable_grad().zero_();
  }
}

}  // namespace timm::test
