// An exponential moving average of a model's weights, as timm's ModelEmaV3.
//
// The average covers everything in the state_dict: floating-point
// parameters and buffers are interpolated, integer buffers
// (num_batches_tracked) copied. Usage, as train.py:
//
//   ModelEma ema(create_model(name, args), *model, {.decay = 0.9998});
//   ...after each optimizer update:  ema.update(*model, num_updates);
//   ...each epoch:                   validate(ema.module(), ...);
//
// The EMA is kept in the model's dtype, as timm's deep copy: float32, or
// --model-dtype's (then interpolated in bfloat16 or float16, as
// ModelEmaV3's _foreach_lerp_ on such tensors).
//
// timm's task EMA follows the whole trainable module, so a task's own state
// outside the model (a feature distillation's projection) is averaged too,
// with the same decay: follow_task_state(task.task_state()) once, then
// update(*model, num_updates, task.task_state()); task_state() is the average
// (timm's checkpoint 'task_state_ema').
#pragma once

#include <cstdint>
#include <optional>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <torch/nn/module.h>

#include "timm/models/model.hpp"
#include "timm/models/state_dict.hpp"

namespace timm {

struct ModelEmaOptions {
  double decay = 0.9999;
  double min_decay = 0.0;
  int64_t update_after_step = 0;
  bool use_warmup = false;  // --model-ema-warmup
  double warmup_gamma = 1.0;
  double warmup_power = 2.0 / 3.0;
  // Where the average lives (--model-ema-force-cpu: kCPU); the model's
  // device when unset.
  std::optional<c10::Device> device;
};

class ModelEma {
 public:
  // `ema_model` is a freshly created model of the same architecture as
  // `model` (timm deep-copies; C++ modules are not generically copyable); it
  // takes a copy of `model`'s state and is put in eval mode.
  ModelEma(ModelPtr ema_model, const torch::nn::Module& model, ModelEmaOptions options);

  // ModelEmaV3.get_decay: the configured decay without a step; with one,
  // 0 up to update_after_step + 1, then the decay (or its warmup ramp
  // 1 - (1 + step / gamma)^-power, clamped to [min_decay, decay]).
  double decay_at(std::optional<int64_t> step) const;

  // Averages `task_state` (the task's state now, timm's get_task_state) from
  // here on, starting from a copy; nothing when it is empty.
  void follow_task_state(const NamedTensors& task_state);

  // ema = lerp(ema, model, 1 - decay_at(step)); integer tensors copied. When
  // a task state is followed, `task_state` (the same keys) is averaged alike.
  void update(const torch::nn::Module& model, std::optional<int64_t> step, const NamedTensors& task_state = {});
  // Copies `model`'s state into the average (ModelEmaV3.set).
  void set(const torch::nn::Module& model);

  const ModelPtr& module() const { return module_; }
  const ModelEmaOptions& options() const { return options_; }
  // The averaged task state; empty unless one is followed. Its tensors may
  // be assigned in place (a resumed checkpoint's 'task_state_ema').
  const NamedTensors& task_state() const { return task_state_; }

 private:
  ModelPtr module_;
  ModelEmaOptions options_;
  NamedTensors task_state_;
};

}  // namespace timm
