#include "timm/dist/collectives.hpp"

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/Types.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

namespace timm::dist {

void all_reduce_sum(const GroupPtr& group, at::Tensor& tensor) {
  std::vector<at::Tensor> tensors{tensor};
  c10d::AllreduceOptions options;
  options.reduceOp = c10d::ReduceOp::SUM;
  group->allreduce(tensors, options)->wait();
}

void broadcast(const GroupPtr& group, at::Tensor& tensor, int root) {
  std::vector<at::Tensor> tensors{tensor};
  c10d::BroadcastOptions options;
  options.rootRank = root;
  group->broadcast(tensors, options)->wait();
}

std::vector<at::Tensor> all_gather(const GroupPtr& group, const at::Tensor& tensor) {
  std::vector<at::Tensor> input{tensor.contiguous()};
  std::vector<std::vector<at::Tensor>> output(1);
  for (int r = 0; r < group->getSize(); ++r) output[0].push_back(at::empty_like(input[0]));
  group->allgather(output, input)->wait();
  return output[0];
}

}  // namespace timm::dist
