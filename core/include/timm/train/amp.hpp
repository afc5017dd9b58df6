// Mixed precision (--amp, --amp-dtype): autocast and the float16 gradient
// scaler, as torch.autocast and torch.amp.GradScaler that train.py uses; and
// the precision flags' rules (--model-dtype beside --amp).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/DeviceType.h>
#include <c10/core/ScalarType.h>
#include <torch/serialize/archive.h>

namespace timm {

class Optimizer;

// --amp-dtype: "float16" or "bfloat16"; anything else is a UsageError.
c10::ScalarType parse_amp_dtype(const std::string& name);

// --model-dtype: "float32", "float16" or "bfloat16" (the choices train.py,
// validate.py and inference.py assert); anything else is a UsageError naming
// the value and the choices.
c10::ScalarType parse_model_dtype(const std::string& name);

// train.py's, validate.py's and inference.py's rule: autocast computes from
// float32 weights, so --amp with a --model-dtype other than float32 is a
// UsageError ("float32 model dtype must be used with AMP").
void check_amp_model_dtype(bool amp, c10::ScalarType model_dtype);

// A dtype as Python prints it without "torch.": "float32", "float16",
// "bfloat16", "float64", "int64" (the precision log lines; the parity tests'
// state_dict dtypes); c10's name for the others.
std::string dtype_name(c10::ScalarType dtype);

// torch.autocast(device_type, dtype, enabled) for the guard's lifetime: ops
// on that device run in `dtype` where autocast's lists say so. Nests as
// Python's context manager does (the cast cache is cleared on the outermost
// exit).
class AutocastGuard {
 public:
  AutocastGuard(c10::DeviceType device_type, c10::ScalarType dtype, bool enabled = true);
  ~AutocastGuard();
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  c10::DeviceType device_type_;
  bool prev_enabled_;
  c10::ScalarType prev_dtype_;
};

// torch.amp.GradScaler with its defaults: the loss is multiplied by a
// scale (2^16 at first); gradients are unscaled before the step, and a step
// whose gradients hold an inf or NaN is skipped, the scale halved; after
// 2000 clean steps it doubles.
struct GradScalerOptions {
  double init_scale = 65536.0;
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int64_t growth_interval = 2000;
};

class GradScaler {
 public:
  // `reduce_found_inf` (optional) combines the inf flag across ranks (a MAX
  // all-reduce) so that every rank skips the same step.
  GradScaler(c10::Device device, GradScalerOptions options = {},
             std::function<void(at::Tensor&)> reduce_found_inf = nullptr);

  at::Tensor scale(const at::Tensor& loss) const;
  // Divides the gradients of `parameters` (the optimizer's) by the scale,
  // recording whether any is not finite; once per step, before clipping.
  void unscale_(const std::vector<at::Tensor>& parameters);
  // Unscales if not done yet, then steps the optimizer unless a gradient was
  // not finite; true if it stepped.
  bool step(Optimizer& optimizer, const std::vector<at::Tensor>& parameters);
  // Adjusts the scale after step().
  void update();

  double current_scale() const;
  void save(torch::serialize::OutputArchive& archive) const;
  void load(torch::serialize::InputArchive& archive);

 private:
  GradScalerOptions options_;
  at::Tensor scale_;           // float32, 1 element, on the device
  at::Tensor growth_tracker_;  // int32
  at::Tensor found_inf_;       // float32; undefined until unscaled this step
  std::function<void(at::Tensor&)> reduce_found_inf_;
};

}  // namespace timm
