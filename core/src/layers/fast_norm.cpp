#include "timm/layers/fast_norm.hpp"

#include <atomic>

#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>

#include "timm/train/amp.hpp"

namespace timm::layers {
namespace {

std::atomic<bool> fast_norm_enabled{false};

}  // namespace

void set_fast_norm(bool enable) { fast_norm_enabled.store(enable); }
bool is_fast_norm() { return fast_norm_enabled.load(); }

FastNormLayer::~FastNormLayer() = default;

FastNormScope::FastNormScope(const at::Tensor& x, bool fast) {
  const c10::DeviceType device_type = x.device().type();
  if (!fast || !at::autocast::is_autocast_enabled(device_type)) return;
  dtype_ = at::autocast::get_autocast_dtype(device_type);
  // timm's `with torch.amp.autocast(device_type, enabled=False)`.
  autocast_off_ = std::make_unique<AutocastGuard>(device_type, *dtype_, /*enabled=*/false);
}

FastNormScope::~FastNormScope() = default;

at::Tensor FastNormScope::cast(const at::Tensor& t) const {
  if (!dtype_ || !t.defined()) return t;
  return t.to(*dtype_);
}

at::Tensor layer_norm(const at::Tensor& x, at::IntArrayRef normalized_shape, const at::Tensor& weight,
                      const at::Tensor& bias, double eps, bool fast) {
  const FastNormScope scope(x, fast);
  return at::layer_norm(scope.cast(x), normalized_shape, scope.cast(weight), scope.cast(bias), eps);
}

at::Tensor group_norm(const at::Tensor& x, int64_t num_groups, const at::Tensor& weight, const at::Tensor& bias,
                      double eps, bool fast) {
  const FastNormScope scope(x, fast);
  return at::group_norm(scope.cast(x), num_groups, scope.cast(weight), scope.cast(bias), eps);
}

}  // namespace timm::layers
