// The communicator the distributed library components take: a c10d Backend
// (ProcessGroupGloo on CPU, ProcessGroupNCCL on CUDA; both are Backends in
// torch 2.x), and the few collectives they use, blocking.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
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

// Copies rank `root`'s `text` into every rank's: its length, then its bytes,
// as tensors on `device` (a CUDA device for NCCL); waits.
void broadcast_string(const GroupPtr& group, std::string& text, int root = 0,
                      const c10::Device& device = c10::Device(c10::kCPU));

// Runs `step` on every rank and makes its outcome the group's, so that no
// rank goes on while another stopped. When `step` throws on some rank, every
// rank throws timm::Error "rank R: <what> failed: <rank R's message>" for the
// lowest such rank R; when the ranks return different values, every rank
// throws naming the first rank whose value differs from rank 0's. Otherwise
// returns the value (the same on every rank). Collective: every rank calls it.
int64_t agree_on(const GroupPtr& group, const std::string& what, const std::function<int64_t()>& step,
                 const c10::Device& device = c10::Device(c10::kCPU));

}  // namespace timm::dist
