#include "timm/layers/blur_pool.hpp"

#include <algorithm>
#include <array>
#include <ostream>
#include <string>
#include <vector>

#include "timm/base/error.hpp"
#include "timm/layers/norm_act.hpp"

namespace timm::layers {

namespace {

constexpr std::array<const char*, 4> kBlurPadModes = {"reflect", "constant", "replicate", "circular"};

}  // namespace

BlurPool2dImpl::BlurPool2dImpl(const BlurPool2dOptions& options_) : options(options_) {
  if (options.filt_size() < 2) {
    throw UsageError("BlurPool2d: filt_size must be > 1, got " + std::to_string(options.filt_size()));
  }
  // C(n, k) / 2^n in float32 must stay exact (integers below 2^24, a power-of-two divisor).
  if (options.filt_size() > 24) {
    throw UsageError("BlurPool2d: filt_size must be <= 24, got " + std::to_string(options.filt_size()));
  }
  if (options.stride() < 1) {
    throw UsageError("BlurPool2d: stride must be >= 1, got " + std::to_string(options.stride()));
  }
  if (options.channels() && *options.channels() < 1) {
    throw UsageError("BlurPool2d: channels must be >= 1, got " + std::to_string(*options.channels()));
  }
  if (std::find(kBlurPadModes.begin(), kBlurPadModes.end(), options.pad_mode()) == kBlurPadModes.end()) {
    throw UsageError("BlurPool2d: unknown pad_mode '" + options.pad_mode() +
                     "' (expected reflect, constant, replicate or circular)");
  }
  reset();
}

void BlurPool2dImpl::reset() {
  // timm's _init_buffers: (0.5 + 0.5 x)^N's coefficients C(N, k) / 2^N, N = filt_size - 1, in float32.
  const int64_t n = options.filt_size() - 1;
  // Row n of Pascal's triangle, built in place from the right.
  std::vector<float> binomial(static_cast<size_t>(n + 1), 0.0F);
  binomial[0] = 1.0F;
  for (int64_t i = 1; i <= n; ++i) {
    for (int64_t j = i; j >= 1; --j) binomial[static_cast<size_t>(j)] += binomial[static_cast<size_t>(j - 1)];
  }
  const at::Tensor coeffs =
      at::tensor(binomial, at::TensorOptions().dtype(at::kFloat)) / static_cast<double>(int64_t{1} << n);
  at::Tensor blur = (coeffs.unsqueeze(1) * coeffs.unsqueeze(0)).unsqueeze(0).unsqueeze(0);
  if (options.channels()) blur = blur.repeat({*options.channels(), 1, 1, 1});
  filt = blur.contiguous();
  cached_ = at::Tensor();
}

void BlurPool2dImpl::pretty_print(std::ostream& stream) const {
  stream << "timm::layers::BlurPool2d(";
  if (options.channels()) stream << "channels=" << *options.channels() << ", ";
  stream << "filt_size=" << options.filt_size() << ", stride=" << options.stride()
         << ", pad_mode=" << options.pad_mode() << ")";
}

at::Tensor BlurPool2dImpl::forward(const at::Tensor& x) {
  if (x.dim() != 4) {
    throw UsageError("BlurPool2d: expected a 4-d (N, C, H, W) input, got " + std::to_string(x.dim()) + " dimensions");
  }
  const int64_t channels = x.size(1);
  if (options.channels() && *options.channels() != channels) {
    throw UsageError("BlurPool2d: expected " + std::to_string(*options.channels()) + " input channels, got " +
                     std::to_string(channels));
  }
  if (!cached_.defined() || cached_.scalar_type() != x.scalar_type() || cached_.device() != x.device()) {
    cached_ = filt.to(x.device(), x.scalar_type());
  }
  const int64_t k = options.filt_size();
  const int64_t pad = get_padding(k, options.stride());
  const at::Tensor padded = at::pad(x, {pad, pad, pad, pad}, options.pad_mode());
  const at::Tensor weight = options.channels() ? cached_ : cached_.expand({channels, 1, k, k});
  const std::array<int64_t, 2> stride = {options.stride(), options.stride()};
  const std::array<int64_t, 2> no_padding = {0, 0};
  const std::array<int64_t, 2> dilation = {1, 1};
  return at::conv2d(padded, weight, /*bias=*/std::nullopt, stride, at::IntArrayRef(no_padding), dilation, channels);
}

}  // namespace timm::layers
