// One element of ATen's float32 kernels, for the one-pass CPU loops of
// optimizer plugins (see fused_cpu_kernels_apply in foreach_optimizer.hpp):
// each computes what the op computes for one element, so that a loop that
// replaces a chain of ops stays within float32 rounding of it. Inline, so
// that the loops vectorise.
#pragma once

#include <cmath>

namespace timm {

// ATen's lerp(start, end, weight): start + weight * (end - start) for
// |weight| < 0.5, else end - (end - start) * (1 - weight), written as ATen's
// vectorised kernel does, base + coeff * (end - start) with both picked by
// the weight: selects, no branch, so that loops with several lerps still
// vectorise (GCC does not if-convert float arithmetic under
// -ftrapping-math). The same values: w - 1 is exactly -(1 - w).
inline float aten_lerp(float start, float end, float weight) {
  const bool small = std::abs(weight) < 0.5f;
  const float weight_minus_one = weight - 1.0f;
  const float coeff = small ? weight : weight_minus_one;
  const float base = small ? start : end;
  return base + coeff * (end - start);
}

// Adam's moments of one element as the ops update them:
// exp_avg.lerp_(g, lerp_weight); exp_avg_sq.mul_(beta2).addcmul_(g, g,
// one_minus_beta2).
inline void aten_adam_moments(float g, float& exp_avg, float& exp_avg_sq, float lerp_weight, float beta2,
                              float one_minus_beta2) {
  exp_avg = aten_lerp(exp_avg, g, lerp_weight);
  exp_avg_sq = exp_avg_sq * beta2 + one_minus_beta2 * g * g;
}

// AdamW's decoupled step of one element as the ops make it: the parameter
// times param_factor (its decay), then addcdiv's param + step * update /
// denom with denom = sqrt(exp_avg_sq) / bias_correction2_sqrt + eps.
inline float aten_adamw_step(float param, float update, float exp_avg_sq, float param_factor,
                             float bias_correction2_sqrt, float eps, float step) {
  const float denom = std::sqrt(exp_avg_sq) / bias_correction2_sqrt + eps;
  return param * param_factor + step * update / denom;
}

// ATen's sign of a float: 1, -1 or 0 (0 for NaN too).
inline float aten_sign(float x) { return static_cast<float>((0.0f < x) - (x < 0.0f)); }

}  // namespace timm
