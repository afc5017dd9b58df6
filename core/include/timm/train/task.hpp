// Training tasks, as timm's timm/task/: the training loop trains a task, and
// the task owns what a step computes: the trainable module, the loss and, for
// distillation, a frozen teacher (timm/train/distillation.hpp).
//
//   timm::ClassificationTask task(model, timm::create_train_loss(loss_args));
//   task.train();
//   timm::TaskResult result = task.forward(input, target);
//   result.loss.backward();
//
// The loop asks the task, never the model or a loss directly, for the
// parameters the optimizer updates (create_optimizer), those clipping sees
// (clip_parameters), the module DDP wraps (prepare_distributed: a teacher is
// never wrapped, never all-reduced) and the state a checkpoint keeps beside
// the model's weights (task_state: timm's checkpoint 'task_state').
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

#include "timm/models/model.hpp"
#include "timm/models/model_input.hpp"
#include "timm/models/state_dict.hpp"
#include "timm/optim/optimizer.hpp"
#include "timm/train/losses.hpp"

namespace timm {

// What a task's forward returns: timm's result dict.
struct TaskResult {
  at::Tensor loss;    // the training loss, for backward
  at::Tensor output;  // the trained model's logits, for metrics
  // The loss's parts for the log, in timm's names ("task_loss", "kd_loss");
  // empty when the loss has one part.
  std::vector<std::pair<std::string, at::Tensor>> parts;
};

class TrainingTask {
 public:
  virtual ~TrainingTask() = default;

  // timm's task(input, target): an image batch, or a NaFlex patch batch
  // (--naflex-loader) for the tasks whose model takes one (the distillation
  // tasks feed their teacher images and refuse patches with a UsageError).
  // Runs under the caller's autocast.
  virtual TaskResult forward(const ModelInput& input, const at::Tensor& target) = 0;

  // The model evaluation uses, the EMA follows and checkpoints save as their
  // weights (timm's get_eval_model): the trained classifier.
  virtual const ModelPtr& model() const = 0;

  // The module that owns every trainable parameter (timm's
  // get_trainable_module): the model, or the model and the task's own layers.
  virtual torch::nn::Module& trainable_module() = 0;

  // Training mode of what trains; a teacher stays in eval mode.
  virtual void train(bool on = true);

  // timm's parameter groups of create_optimizer_v2(task.get_trainable_module(),
  // ...): the model's weight-decay or layer-decay groups (`model_name` for
  // messages), with the task's own parameters.
  virtual std::vector<ParamGroup> param_groups(const std::string& model_name, const OptimizerArgs& args) const;
  // The optimizer args.opt over param_groups(); an unknown name is reported
  // first.
  OptimizerPtr create_optimizer(const std::string& model_name, const OptimizerArgs& args) const;

  // timm's get_clip_parameters(exclude_head): every trainable parameter,
  // without the model's last two (its classifier) when `exclude_head`.
  virtual std::vector<at::Tensor> clip_parameters(bool exclude_head) const;

  // timm's prepare_distributed: calls `wrap` (our DDP) on the trainable
  // module only; a teacher, frozen when it is made, stays outside.
  virtual void prepare_distributed(const std::function<void(torch::nn::Module&)>& wrap);

  // timm's get_task_state / load_task_state: trainable state outside the
  // model's weights, e.g. a feature projection ("projection.weight"); empty
  // for most tasks. load_task_state throws Error naming what is missing or
  // unexpected.
  virtual NamedTensors task_state() const { return {}; }
  virtual void load_task_state(const NamedTensors& state);

  // One line for the log: the task and its settings.
  virtual std::string describe() const = 0;
};

// timm's ClassificationTask: the model's logits and the criterion.
class ClassificationTask : public TrainingTask {
 public:
  ClassificationTask(ModelPtr model, LossFn criterion);

  TaskResult forward(const ModelInput& input, const at::Tensor& target) override;
  const ModelPtr& model() const override { return model_; }
  torch::nn::Module& trainable_module() override { return *model_; }
  std::string describe() const override { return "ClassificationTask"; }

 protected:
  ModelPtr model_;
  LossFn criterion_;
};

}  // namespace timm
