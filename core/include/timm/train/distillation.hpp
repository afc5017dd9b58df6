// Knowledge distillation tasks, as timm's timm/task/distillation.py: a
// student trained against a frozen teacher's logits (LogitDistillationTask)
// or pooled pre-logits features (FeatureDistillationTask), beside its own
// classification loss.
//
//   timm::DistillationTeacher teacher(teacher_model, teacher_norm);
//   timm::LogitDistillationTask task(student, std::move(teacher), criterion,
//                                    student_norm, timm::LogitDistillationOptions{});
//
// The teacher is any registered model; it is created, loaded and moved to the
// device by the caller, then kept in eval mode with its parameters frozen.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>

#include "timm/layers/linear.hpp"
#include "timm/train/task.hpp"

namespace timm {

// The per-channel mean and std an input is normalised with.
struct Normalization {
  std::vector<double> mean;
  std::vector<double> std;
};

// timm's three weighting rules of --distill-loss-weight and --task-loss-weight:
// a distill weight given: (task or 1, distill); only a task weight: (task,
// 1 - task); neither: (1, 1).
struct DistillationWeights {
  double task = 1.0;
  double distill = 1.0;
};
DistillationWeights resolve_distillation_weights(std::optional<double> distill_loss_weight,
                                                 std::optional<double> task_loss_weight);

// timm's DistillationTeacher: the frozen teacher and the normalisation it
// expects. Its forward passes run without gradients.
class DistillationTeacher {
 public:
  // Puts `model` in eval mode and freezes its parameters. `normalization`:
  // what the teacher's input must be normalised with, one value per input
  // channel.
  DistillationTeacher(ModelPtr model, Normalization normalization);

  // The teacher's logits of `input` (normalised for the teacher).
  at::Tensor logits(const at::Tensor& input) const;
  // Its pooled pre-logits features: forward_head(forward_features(input),
  // pre_logits=true).
  at::Tensor features(const at::Tensor& input) const;

  // timm's normalize_input: `input`, normalised with `student`, re-normalised
  // for the teacher; the same tensor when the two normalisations are equal.
  at::Tensor normalize_input(const at::Tensor& input, const Normalization& student) const;

  const ModelPtr& model() const { return model_; }
  const Normalization& normalization() const { return normalization_; }

 private:
  // The (1, C, 1, 1) tensors of a re-normalisation on a device, in the
  // input's dtype (timm's mean_kd / std_kd in the task's dtype), made once
  // rather than at every step (a host-to-device copy each on CUDA).
  struct Renormalization {
    Normalization student;
    at::Device device;
    at::Tensor student_mean, student_std, mean, std;
  };
  const Renormalization& renormalization(const Normalization& student, const at::Device& device,
                                         c10::ScalarType dtype) const;

  ModelPtr model_;
  Normalization normalization_;
  mutable std::optional<Renormalization> renormalization_;  // the last one used
};

// The weights of the two losses, and the temperature of the logits' softmax.
struct LogitDistillationOptions {
  std::optional<double> distill_loss_weight;  // --distill-loss-weight
  std::optional<double> task_loss_weight;     // --task-loss-weight
  double temperature = 4.0;                   // --kd-temperature
  std::string loss_type = "kl";               // --kd-loss-type; only "kl"
};

// timm's LogitDistillationTask: loss = task_weight * criterion(student, target)
// + distill_weight * T^2 * KL(softmax(teacher / T) || softmax(student / T)),
// the KL summed over classes and averaged over the batch. `student_norm`:
// what the task's inputs are normalised with.
class LogitDistillationTask : public ClassificationTask {
 public:
  LogitDistillationTask(ModelPtr student, DistillationTeacher teacher, LossFn criterion, Normalization student_norm,
                        const LogitDistillationOptions& options);

  TaskResult forward(const ModelInput& input, const at::Tensor& target) override;
  std::string describe() const override;

  const DistillationWeights& weights() const { return weights_; }

 protected:
  // The teacher's logits of the task's `input` (re-normalised for it).
  at::Tensor teacher_logits(const at::Tensor& input) const;

  DistillationTeacher teacher_;
  Normalization student_norm_;
  DistillationWeights weights_;
  double temperature_;
};

// The weights and temperature as LogitDistillationOptions (loss_type unused).
struct TokenDistillationOptions : LogitDistillationOptions {
  std::string distill_type = "soft";  // --kd-token-distill-type: "soft" or "hard"
};

// timm's TokenDistillationTask, for a student with a distillation head
// (ClassifierImpl::forward_distilled, DeiT's distilled models): the class
// head learns from the targets, the distillation head from the teacher, by
// LogitDistillationTask's soft KL ("soft") or the cross-entropy with the
// teacher's argmax ("hard"). Evaluation uses the mean of the two heads. The
// loss parts are timm's "task_loss" and "distill_loss".
class TokenDistillationTask : public LogitDistillationTask {
 public:
  TokenDistillationTask(ModelPtr student, DistillationTeacher teacher, LossFn criterion, Normalization student_norm,
                        const TokenDistillationOptions& options);

  TaskResult forward(const ModelInput& input, const at::Tensor& target) override;
  std::string describe() const override;

 private:
  bool hard_;
};

struct FeatureDistillationOptions {
  std::optional<double> distill_loss_weight;   // --distill-loss-weight
  std::optional<double> task_loss_weight;      // --task-loss-weight
  std::optional<int64_t> student_feature_dim;  // --kd-student-feature-dim; none: detected
  std::optional<int64_t> teacher_feature_dim;  // --kd-teacher-feature-dim; none: detected
};

// The student and, when the feature sizes differ, the linear projection of
// its pooled features to the teacher's (timm's
// FeatureDistillationTrainableModule; parameter names "student.*",
// "projection.*").
class FeatureDistillationModuleImpl : public torch::nn::Module {
 public:
  FeatureDistillationModuleImpl(ModelPtr student, int64_t student_dim, int64_t teacher_dim);

  // (logits, features): the student's logits, and its pooled pre-logits
  // features, projected when there is a projection.
  std::pair<at::Tensor, at::Tensor> forward(const at::Tensor& input);

  const ModelPtr& student() const { return student_; }
  // Empty when the sizes are equal.
  const layers::Linear& projection() const { return projection_; }

 private:
  ModelPtr student_;
  layers::Linear projection_{nullptr};
};

// timm's FeatureDistillationTask: loss = task_weight * criterion(logits,
// target) + distill_weight * MSE(projected student features, teacher
// features). Feature sizes not given are read from each model's classifier
// (the input size of its weight, timm's head_hidden_size).
class FeatureDistillationTask : public TrainingTask {
 public:
  FeatureDistillationTask(ModelPtr student, DistillationTeacher teacher, LossFn criterion, Normalization student_norm,
                          const FeatureDistillationOptions& options);

  TaskResult forward(const ModelInput& input, const at::Tensor& target) override;
  const ModelPtr& model() const override { return module_->student(); }
  torch::nn::Module& trainable_module() override { return *module_; }
  std::vector<ParamGroup> param_groups(const std::string& model_name, const OptimizerArgs& args) const override;
  std::vector<at::Tensor> clip_parameters(bool exclude_head) const override;
  NamedTensors task_state() const override;
  void load_task_state(const NamedTensors& state) override;
  std::string describe() const override;

  const DistillationWeights& weights() const { return weights_; }
  FeatureDistillationModuleImpl& module() { return *module_; }

 private:
  std::shared_ptr<FeatureDistillationModuleImpl> module_;
  DistillationTeacher teacher_;
  LossFn criterion_;
  Normalization student_norm_;
  DistillationWeights weights_;
  torch::nn::Module task_state_;  // holds the projection, if any
};

// The size of `model`'s pooled pre-logits features: the input size of its
// classifier's weight (pretrained_cfg().classifier). Throws UsageError naming
// the model and `flag` (the flag that gives the size instead) when the model
// has no classifier weight.
int64_t detect_feature_dim(const ClassifierImpl& model, const std::string& flag);

}  // namespace timm
