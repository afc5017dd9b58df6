// The communicator the distributed library components take: a c10d Backend
// (ProcessGroupGloo on CPU, ProcessGroupNCCL on CUDA; both are Backends in
// torch 2.x), and the few collectives they use, blocking.
#pragma once

#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/util/intrusive_ptr.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>

namespace timm::dist {

using GroupPtr = c10::intrusive_ptr<c10d::Backend>;

// Sums `tensor` over the group, in place; waits for the result.
void all_reduce_sum(const GroupPtr& group, at::Tensor& tensor);
// Copies rank `root`'s `tensor` into every rank's, in place; waits.
void broadcast(const GroupPtr& group, at::Tensor& tensor, int root = 0);
// Every rank's `tensor` (same shape on every rank), in rank order; waits.
std::vector<at::Tensor> all_gather(const GroupPtr& group, const at::Tensor& tensor);

}  // namespace timm::dist
