#include "timm/layers/eca.hpp"

#include <algorithm>
#include <cmath>
#include <ostream>
#include <string>

#include "timm/base/error.hpp"

namespace timm::layers {

int64_t eca_kernel_size(int64_t channels, double gamma, double beta) {
  if (channels < 1) throw UsageError("EcaModule: channels must be >= 1, got " + std::to_string(channels));
  // Python's math.log(x, 2) is log(x) / log(2), not log2(x): the two differ
  // in the last bit for some x, which int() can turn into a different kernel.
  const double log2_channels = std::log(static_cast<double>(channels)) / std::log(2.0);
  const auto t = static_cast<int64_t>(std::abs(log2_channels + beta) / gamma);
  return std::max<int64_t>(t % 2 != 0 ? t : t + 1, 3);
}

EcaModuleImpl::EcaModuleImpl(const EcaModuleOptions& options_) : options(options_) { reset(); }

void EcaModuleImpl::reset() {
  if (options.channels()) {
    kernel_size_ = eca_kernel_size(*options.channels(), options.gamma(), options.beta());
  } else {
    kernel_size_ = options.kernel_size();
    if (kernel_size_ < 1 || kernel_size_ % 2 == 0) {
      throw UsageError("EcaModule: kernel_size must be odd and >= 1, got " + std::to_string(kernel_size_));
    }
  }
  namespace nn = torch::nn;
  conv = register_module("conv",
                         nn::Conv1d(nn::Conv1dOptions(1, 1, kernel_size_).padding((kernel_size_ - 1) / 2).bias(false)));
  gate = register_module("gate", create_act(options.gate_layer()));
}

void EcaModuleImpl::pretty_print(std::ostream& stream) const {
  stream << "timm::layers::EcaModule(kernel_size=" << kernel_size_ << ")";
}

at::Tensor EcaModuleImpl::forward(const at::Tensor& x) {
  // (N, C, H, W) -> (N, 1, C): the channels are the 1-d conv's sequence.
  at::Tensor y = x.mean({2, 3}).view({x.size(0), 1, -1});
  y = gate(conv(y)).view({x.size(0), -1, 1, 1});
  return x * y.expand_as(x);
}

}  // namespace timm::layers
