#include "timm/layers/squeeze_excite.hpp"

#include <algorithm>
#include <ostream>

#include "timm/base/error.hpp"

namespace timm::layers {

int64_t make_divisible(double v, int64_t divisor, std::optional<int64_t> min_value, double round_limit) {
  if (divisor < 1) throw UsageError("make_divisible: divisor must be >= 1, got " + std::to_string(divisor));
  const int64_t floor_value = min_value.value_or(divisor);
  // Python: max(min_value, int(v + divisor / 2) // divisor * divisor); int() truncates toward zero.
  const auto truncated = static_cast<int64_t>(v + static_cast<double>(divisor) / 2.0);
  const int64_t floored = (truncated >= 0 ? truncated / divisor : -((-truncated + divisor - 1) / divisor)) * divisor;
  int64_t new_v = std::max(floor_value, floored);
  if (static_cast<double>(new_v) < round_limit * v) new_v += divisor;
  return new_v;
}

SEModuleImpl::SEModuleImpl(const SEModuleOptions& options_) : options(options_) {
  if (options.channels() < 1) {
    throw UsageError("SEModule: channels must be >= 1, got " + std::to_string(options.channels()));
  }
  reset();
}

void SEModuleImpl::reset() {
  const int64_t channels = options.channels();
  const auto rd = options.rd_channels();
  rd_channels_ = (rd && *rd > 0) ? *rd
                                 : make_divisible(static_cast<double>(channels) * options.rd_ratio(),
                                                  options.rd_divisor(), std::nullopt, /*round_limit=*/0.0);
  namespace nn = torch::nn;
  fc1 = register_module("fc1", nn::Conv2d(nn::Conv2dOptions(channels, rd_channels_, 1).bias(options.bias())));
  if (options.use_norm()) bn = register_module("bn", BatchNorm2d(rd_channels_));
  // In place, as timm's create_act_layer(act_layer, inplace=True): it
  // overwrites fc1's (or bn's) fresh output, which no backward needs.
  act = register_module("act", create_act(options.act_layer(), /*inplace=*/true));
  fc2 = register_module("fc2", nn::Conv2d(nn::Conv2dOptions(rd_channels_, channels, 1).bias(options.bias())));
  gate = register_module("gate", create_act(options.gate_layer()));
}

void SEModuleImpl::pretty_print(std::ostream& stream) const {
  stream << "timm::layers::SEModule(channels=" << options.channels() << ", rd_channels=" << rd_channels_ << ")";
}

at::Tensor SEModuleImpl::forward(const at::Tensor& x) {
  at::Tensor x_se = x.mean({2, 3}, /*keepdim=*/true);
  if (options.add_maxpool()) x_se = 0.5 * x_se + 0.5 * x.amax({2, 3}, /*keepdim=*/true);
  x_se = fc1(x_se);
  if (bn) x_se = bn(x_se);
  x_se = fc2(act(x_se));
  return x * gate(x_se);
}

}  // namespace timm::layers
