#include "timm/models/channels_last.hpp"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

namespace timm {

void to_channels_last(torch::nn::Module& module) {
  c10::NoGradGuard no_grad;
  for (auto& p : module.parameters()) {
    if (p.dim() == 4) p.set_data(p.data().contiguous(at::MemoryFormat::ChannelsLast));
  }
  for (auto& b : module.buffers()) {
    if (b.dim() == 4) b.set_data(b.data().contiguous(at::MemoryFormat::ChannelsLast));
  }
}

bool is_channels_last(const torch::nn::Module& module) {
  for (const auto& p : module.parameters()) {
    if (p.dim() == 4 && !p.is_contiguous(at::MemoryFormat::ChannelsLast)) return false;
  }
  for (const auto& b : module.buffers()) {
    if (b.dim() == 4 && !b.is_contiguous(at::MemoryFormat::ChannelsLast)) return false;
  }
  return true;
}

}  // namespace timm
