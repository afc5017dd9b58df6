// timm's "fast norm" (layers/fast_norm.py, train.py's --fast-norm): norm
// layers built while it is on skip autocast's float32 upcast and normalise in
// the autocast dtype (bfloat16 or float16), as Apex's fused norms do; outside
// autocast they compute exactly as before. timm-cpp has no Apex, so this is
// timm's path without it.
//
// As in timm, the setting is read when a layer is built (each fast-capable
// layer's options default to is_fast_norm()), so set it before creating the
// model:
//
//   timm::layers::set_fast_norm(true);
//   ModelPtr model = timm::create_model("vit_small_patch16_224", args);
//
// Which layers follow it is timm's: its norm layers (LayerNorm, LayerNorm2d,
// GroupNorm, GroupNorm1, RmsNorm, SimpleNorm and their 2d and Act variants)
// do, torch.nn's LayerNorm and GroupNorm do not. A plugin layer that stands
// for one of timm's implements FastNormLayer and normalises through
// layer_norm / group_norm below (or FastNormScope); one that stands for
// torch.nn's passes fast_norm(false) (torch_layer_norm_options, norm.hpp).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>

#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>
#include <c10/util/ArrayRef.h>

namespace timm {
class AutocastGuard;
}  // namespace timm

namespace timm::layers {

// timm's set_fast_norm / is_fast_norm: process-wide, off by default.
void set_fast_norm(bool enable = true);
bool is_fast_norm();

// A norm layer that follows the fast-norm setting. fast_norm() is the
// layer's own setting, fixed when it was built (timm's `_fast_norm`).
class FastNormLayer {
 public:
  virtual ~FastNormLayer();
  virtual bool fast_norm() const = 0;
};

// The preamble of timm's fast_* functions for an input `x`: when `fast` and
// under autocast on x's device, cast() converts tensors to the autocast dtype
// and autocast is off for the scope's lifetime; otherwise cast() returns its
// argument and nothing changes. Undefined tensors (an absent bias) stay
// undefined. A layer normalises scope.cast(x) with scope.cast(weight):
//
//   const FastNormScope scope(x, options.fast_norm());
//   return at::rms_norm(scope.cast(x), {channels}, scope.cast(weight), eps);
class FastNormScope {
 public:
  FastNormScope(const at::Tensor& x, bool fast);
  ~FastNormScope();
  FastNormScope(const FastNormScope&) = delete;
  FastNormScope& operator=(const FastNormScope&) = delete;

  at::Tensor cast(const at::Tensor& t) const;

 private:
  std::optional<c10::ScalarType> dtype_;
  std::unique_ptr<AutocastGuard> autocast_off_;  // set under autocast
};

// at::layer_norm / at::group_norm, or with `fast` timm's fast_layer_norm /
// fast_group_norm (input, weight and bias in the autocast dtype, autocast
// off). `weight` and `bias` may be undefined.
at::Tensor layer_norm(const at::Tensor& x, at::IntArrayRef normalized_shape, const at::Tensor& weight,
                      const at::Tensor& bias, double eps, bool fast);
at::Tensor group_norm(const at::Tensor& x, int64_t num_groups, const at::Tensor& weight, const at::Tensor& bias,
                      double eps, bool fast);

}  // namespace timm::layers
