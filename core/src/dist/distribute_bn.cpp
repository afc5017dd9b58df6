#include "timm/dist/distribute_bn.hpp"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/grad_mode.h>

#include "timm/base/error.hpp"

namespace timm::dist {

std::optional<DistBnMode> parse_dist_bn(const std::string& value) {
  if (value.empty()) return std::nullopt;
  if (value == "reduce") return DistBnMode::kReduce;
  if (value == "broadcast") return DistBnMode::kBroadcast;
  throw UsageError("--dist-bn " + in_quotes(value) + ": expected \"reduce\", \"broadcast\" or \"\" (off)");
}

int64_t distribute_bn(torch::nn::Module& model, const GroupPtr& group, DistBnMode mode) {
  torch::NoGradGuard no_grad;
  int64_t count = 0;
  for (auto& item : model.named_buffers(/*recurse=*/true)) {
    const auto& name = item.key();
    if (name.find("running_mean") == std::string::npos && name.find("running_var") == std::string::npos) continue;
    auto buffer = item.value();  // a handle: collectives write into the module's buffer
    if (mode == DistBnMode::kReduce) {
      all_reduce_sum(group, buffer);
      buffer.div_(static_cast<double>(group->getSize()));
    } else {
      broadcast(group, buffer, 0);
    }
    ++count;
  }
  return count;
}

}  // namespace timm::dist
