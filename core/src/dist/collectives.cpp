#include "timm/dist/collectives.hpp"

#include <exception>

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <torch/csrc/distributed/c10d/Types.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include "timm/base/error.hpp"
#include "timm/log/log.hpp"

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

void broadcast_string(const GroupPtr& group, std::string& text, int root, const c10::Device& device) {
  at::Tensor length = at::tensor({static_cast<int64_t>(text.size())}, at::kLong).to(device);
  broadcast(group, length, root);
  const int64_t size = length.item<int64_t>();
  if (size == 0) {
    text.clear();
    return;
  }
  at::Tensor bytes = group->getRank() == root ? at::from_blob(text.data(), {size}, at::kByte).clone().to(device)
                                              : at::empty({size}, at::TensorOptions().dtype(at::kByte).device(device));
  broadcast(group, bytes, root);
  const at::Tensor host = bytes.to(at::kCPU).contiguous();
  text.assign(static_cast<const char*>(host.data_ptr()), static_cast<std::size_t>(size));
}

int64_t agree_on(const GroupPtr& group, const std::string& what, const std::function<int64_t()>& step,
                 const c10::Device& device) {
  int64_t value = 0;
  bool failed = true;
  std::string failure;
  try {
    value = step();
    failed = false;
  } catch (const c10::Error& e) {
    failure = e.what_without_backtrace();
  } catch (const std::exception& e) {
    failure = e.what();
  }
  const at::Tensor mine = at::tensor({failed ? int64_t{1} : int64_t{0}, value}, at::kLong).to(device);
  std::vector<at::Tensor> all = all_gather(group, mine);
  for (auto& t : all) t = t.to(at::kCPU);
  for (int r = 0; r < static_cast<int>(all.size()); ++r) {
    if (all[r][0].item<int64_t>() == 0) continue;
    std::string message = failure;
    broadcast_string(group, message, r, device);  // rank r's own words, on every rank
    throw Error(format("rank %d: %s failed: %s", r, what.c_str(), message.c_str()));
  }
  const int64_t first = all[0][1].item<int64_t>();
  for (int r = 1; r < static_cast<int>(all.size()); ++r) {
    const int64_t other = all[r][1].item<int64_t>();
    if (other == first) continue;
    throw Error(format("rank %d: %s gave %lld where rank 0's gave %lld; every rank must agree", r, what.c_str(),
                       static_cast<long long>(other), static_cast<long long>(first)));
  }
  return value;
}

}  // namespace timm::dist
