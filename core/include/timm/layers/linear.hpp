// torch::nn::Linear applied as Python's F.linear.
//
// LibTorch's LinearImpl::forward (torch::nn::functional::linear) makes one
// addmm for a 2-D input only; on a (B, N, C) input it runs matmul and then an
// in-place bias add over the output. Python's F.linear is at::linear, which
// folds the leading dims into one addmm (the bias added inside the GEMM) and,
// under autocast, casts the bias with the weight. Layers that apply a Linear
// to tokens (attention's qkv and proj, the MLPs) call linear(fc, x) so that
// they run Python's ops:
//
//   at::Tensor y = timm::layers::linear(fc1, x);  // not fc1(x)
#pragma once

#include <ATen/ATen.h>
#include <torch/nn/modules/linear.h>

namespace timm::layers {

// at::linear(x, fc->weight, fc->bias): fc(x), with Python's ops.
inline at::Tensor linear(const torch::nn::Linear& fc, const at::Tensor& x) {
  return at::linear(x, fc->weight, fc->bias);
}

}  // namespace timm::layers
