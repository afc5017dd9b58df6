// The SDK's Linear: torch::nn::Linear (same options, init, "weight" / "bias"
// keys) whose forward is Python's F.linear.
//
// LibTorch's LinearImpl::forward (torch::nn::functional::linear) makes one
// addmm for a 2-D input only; on a (B, N, C) or NHWC input it runs matmul and
// then an in-place bias add over the output. Python's F.linear is at::linear,
// which folds the leading dims into one addmm (the bias added inside the
// GEMM) and, under autocast, casts the bias with the weight. Plugins and
// layers declare their Linears as this one, so that fc(x) runs Python's ops
// on any input:
//
//   timm::layers::Linear fc1{nullptr};
//   fc1 = register_module("fc1", timm::layers::Linear(in, hidden));
//   at::Tensor y = fc1(tokens);  // at::linear
//
// It is a torch::nn::LinearImpl, so module->as<torch::nn::Linear>() finds it.
#pragma once

#include <ATen/ATen.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/pimpl.h>

namespace timm::layers {

class LinearImpl : public torch::nn::LinearImpl {
 public:
  using torch::nn::LinearImpl::LinearImpl;
  at::Tensor forward(const at::Tensor& x) { return at::linear(x, weight, bias); }
};
TORCH_MODULE(Linear);

}  // namespace timm::layers
