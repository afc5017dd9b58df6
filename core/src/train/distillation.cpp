#include "timm/train/distillation.hpp"
#include "timm/layers/linear.hpp"

#include <algorithm>
#include <cmath>

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <c10/util/StringUtil.h>

#include "timm/base/error.hpp"
#include "timm/base/python_repr.hpp"
#include "timm/optim/param_groups.hpp"

namespace timm {
namespace {

// A model's name for messages: the registered one, else its class name.
std::string model_label(const ClassifierImpl& model) {
  return in_quotes(model.registered_name().empty() ? model.name() : model.registered_name());
}

// `values` as a (1, C, 1, 1) tensor of `dtype` (the task's: float32, or
// --model-dtype) on `device`, as timm's task buffers.
at::Tensor channel_tensor(const std::vector<double>& values, const at::Device& device, c10::ScalarType dtype) {
  return at::tensor(values, at::TensorOptions().dtype(at::kDouble)).to(device, dtype).view({1, -1, 1, 1});
}

void check_temperature(double temperature) {
  if (!(temperature > 0.0) || !std::isfinite(temperature)) {
    throw UsageError("--kd-temperature " + python_float_repr(temperature) + ": expected a positive number");
  }
}

std::string describe_weights(const DistillationWeights& weights) {
  return "task_weight=" + python_float_repr(weights.task) + ", distill_weight=" + python_float_repr(weights.distill);
}

// timm's soft distillation loss: T^2 * KL(softmax(teacher / T) ||
// softmax(student / T)), summed over classes and averaged over the batch
// (F.kl_div(reduction='batchmean', log_target=True)).
at::Tensor soft_distillation_loss(const at::Tensor& student_logits, const at::Tensor& teacher_logits,
                                  double temperature) {
  const at::Tensor prob_s = at::log_softmax(student_logits / temperature, /*dim=*/-1);
  const at::Tensor prob_t = at::log_softmax(teacher_logits / temperature, /*dim=*/-1);
  return at::kl_div(prob_s, prob_t, at::Reduction::Sum, /*log_target=*/true) / prob_s.size(0) *
         (temperature * temperature);
}

// Every parameter of `teacher` frozen: no gradient is computed, none joins
// DDP's buckets (prepare_distributed wraps the trainable module only).
void freeze(torch::nn::Module& teacher) {
  for (at::Tensor& param : teacher.parameters()) param.set_requires_grad(false);
}

}  // namespace

DistillationWeights resolve_distillation_weights(std::optional<double> distill_loss_weight,
                                                 std::optional<double> task_loss_weight) {
  if (distill_loss_weight) return {task_loss_weight.value_or(1.0), *distill_loss_weight};
  if (task_loss_weight) return {*task_loss_weight, 1.0 - *task_loss_weight};
  return {1.0, 1.0};
}

// ---- DistillationTeacher ----------------------------------------------------

DistillationTeacher::DistillationTeacher(ModelPtr model, Normalization normalization)
    : model_(std::move(model)), normalization_(std::move(normalization)) {
  if (normalization_.mean.size() != normalization_.std.size()) {
    throw Error("the teacher's normalisation has " + std::to_string(normalization_.mean.size()) + " means but " +
                std::to_string(normalization_.std.size()) + " standard deviations");
  }
  model_->eval();
  freeze(*model_);
}

at::Tensor DistillationTeacher::logits(const at::Tensor& input) const {
  const at::NoGradGuard no_grad;
  return model_->forward(input);
}

at::Tensor DistillationTeacher::features(const at::Tensor& input) const {
  const at::NoGradGuard no_grad;
  return model_->forward_head(model_->forward_features(input), /*pre_logits=*/true);
}

at::Tensor DistillationTeacher::normalize_input(const at::Tensor& input, const Normalization& student) const {
  if (student.mean == normalization_.mean && student.std == normalization_.std) return input;
  if (student.mean.size() != normalization_.mean.size()) {
    throw Error("the student's input has " + std::to_string(student.mean.size()) + " channels, the teacher " +
                model_label(*model_) + " is normalised for " + std::to_string(normalization_.mean.size()));
  }
  const Renormalization& r = renormalization(student, input.device(), input.scalar_type());
  // timm's order of operations: (x * s_std + s_mean - t_mean) / t_std.
  return (input * r.student_std + r.student_mean - r.mean) / r.std;
}

const DistillationTeacher::Renormalization& DistillationTeacher::renormalization(const Normalization& student,
                                                                                 const at::Device& device,
                                                                                 c10::ScalarType dtype) const {
  const bool cached = renormalization_ && renormalization_->device == device &&
                      renormalization_->mean.scalar_type() == dtype && renormalization_->student.mean == student.mean &&
                      renormalization_->student.std == student.std;
  if (!cached) {
    renormalization_ = Renormalization{student,
                                       device,
                                       channel_tensor(student.mean, device, dtype),
                                       channel_tensor(student.std, device, dtype),
                                       channel_tensor(normalization_.mean, device, dtype),
                                       channel_tensor(normalization_.std, device, dtype)};
  }
  return *renormalization_;
}

// ---- LogitDistillationTask --------------------------------------------------

LogitDistillationTask::LogitDistillationTask(ModelPtr student, DistillationTeacher teacher, LossFn criterion,
                                             Normalization student_norm, const LogitDistillationOptions& options)
    : ClassificationTask(std::move(student), std::move(criterion)),
      teacher_(std::move(teacher)),
      student_norm_(std::move(student_norm)),
      weights_(resolve_distillation_weights(options.distill_loss_weight, options.task_loss_weight)),
      temperature_(options.temperature) {
  if (options.loss_type != "kl") {
    throw UsageError("--kd-loss-type " + in_quotes(options.loss_type) + ": only 'kl' is supported (as timm's)");
  }
  check_temperature(temperature_);
}

TaskResult LogitDistillationTask::forward(const ModelInput& model_input, const at::Tensor& target) {
  const at::Tensor& input = model_input.images("logit distillation (--kd-distill-type logit)");
  at::Tensor student_logits = model_->forward(input);
  at::Tensor task_loss = criterion_(student_logits, target);
  at::Tensor kd_loss = soft_distillation_loss(student_logits, teacher_logits(input), temperature_);
  at::Tensor loss = weights_.task * task_loss + weights_.distill * kd_loss;
  return TaskResult{std::move(loss),
                    std::move(student_logits),
                    {{"task_loss", std::move(task_loss)}, {"kd_loss", std::move(kd_loss)}}};
}

at::Tensor LogitDistillationTask::teacher_logits(const at::Tensor& input) const {
  return teacher_.logits(teacher_.normalize_input(input, student_norm_).detach());
}

std::string LogitDistillationTask::describe() const {
  return "LogitDistillationTask: teacher=" + model_label(*teacher_.model()) + ", " + describe_weights(weights_) +
         ", loss_type=kl, temperature=" + python_float_repr(temperature_);
}

// ---- TokenDistillationTask --------------------------------------------------

TokenDistillationTask::TokenDistillationTask(ModelPtr student, DistillationTeacher teacher, LossFn criterion,
                                             Normalization student_norm, const TokenDistillationOptions& options)
    : LogitDistillationTask(std::move(student), std::move(teacher), std::move(criterion), std::move(student_norm),
                            options),
      hard_(options.distill_type == "hard") {
  if (!model_->has_distillation_head()) {
    throw UsageError("--kd-distill-type token: model " + model_label(*model_) +
                     " has no distillation head (token distillation trains one, as deit_*_distilled_* have)");
  }
  if (options.distill_type != "soft" && options.distill_type != "hard") {
    throw UsageError("--kd-token-distill-type " + in_quotes(options.distill_type) + ": expected 'soft' or 'hard'");
  }
}

TaskResult TokenDistillationTask::forward(const ModelInput& model_input, const at::Tensor& target) {
  const at::Tensor& input = model_input.images("token distillation (--kd-distill-type token)");
  auto [main_logits, dist_logits] = model_->forward_distilled(input);
  at::Tensor task_loss = criterion_(main_logits, target);
  const at::Tensor teacher = teacher_logits(input);
  at::Tensor distill_loss = hard_ ? at::cross_entropy_loss(dist_logits, teacher.argmax(/*dim=*/-1))
                                  : soft_distillation_loss(dist_logits, teacher, temperature_);
  at::Tensor loss = weights_.task * task_loss + weights_.distill * distill_loss;
  return TaskResult{std::move(loss),
                    std::move(main_logits),
                    {{"task_loss", std::move(task_loss)}, {"distill_loss", std::move(distill_loss)}}};
}

std::string TokenDistillationTask::describe() const {
  return "TokenDistillationTask: teacher=" + model_label(*teacher_.model()) + ", " + describe_weights(weights_) +
         ", distill_type=" + (hard_ ? "hard" : "soft") + ", temperature=" + python_float_repr(temperature_);
}

// ---- FeatureDistillationTask ------------------------------------------------

int64_t detect_feature_dim(const ClassifierImpl& model, const std::string& flag) {
  const std::string& head = model.pretrained_cfg().classifier;
  const auto params = model.named_parameters();
  const at::Tensor* weight = head.empty() ? nullptr : params.find(head + ".weight");
  if (weight == nullptr || weight->dim() != 2) {
    throw UsageError("cannot detect the feature size of model " + model_label(model) + ": it has no classifier weight" +
                     (head.empty() ? "" : " " + in_quotes(head + ".weight")) + "; give it with " + flag);
  }
  return weight->size(1);
}

namespace {

// The given feature size, checked against the model's where that can be
// read; else the model's.
int64_t feature_dim(const ClassifierImpl& model, std::optional<int64_t> given, const std::string& flag) {
  if (!given) return detect_feature_dim(model, flag);
  if (*given < 1) throw UsageError(flag + " " + std::to_string(*given) + ": expected 1 or more");
  int64_t detected = *given;
  try {
    detected = detect_feature_dim(model, flag);
  } catch (const UsageError&) {
    return *given;  // no classifier to check against
  }
  if (detected != *given) {
    throw UsageError(flag + " " + std::to_string(*given) + ": model " + model_label(model) + " has " +
                     std::to_string(detected) + " pooled features");
  }
  return *given;
}

}  // namespace

FeatureDistillationModuleImpl::FeatureDistillationModuleImpl(ModelPtr student, int64_t student_dim, int64_t teacher_dim)
    : student_(register_module("student", std::move(student))) {
  if (student_dim == teacher_dim) return;
  projection_ = register_module("projection", layers::Linear(student_dim, teacher_dim));
  // On the student's device and in its dtype (timm: the task's device and
  // dtype, --model-dtype).
  const auto params = student_->parameters();
  if (!params.empty()) projection_->to(params.front().device(), params.front().scalar_type());
}

std::pair<at::Tensor, at::Tensor> FeatureDistillationModuleImpl::forward(const at::Tensor& input) {
  const at::Tensor feature_map = student_->forward_features(input);
  at::Tensor logits = student_->forward_head(feature_map);
  at::Tensor features = student_->forward_head(feature_map, /*pre_logits=*/true);
  if (projection_) features = projection_->forward(features);
  return {std::move(logits), std::move(features)};
}

FeatureDistillationTask::FeatureDistillationTask(ModelPtr student, DistillationTeacher teacher, LossFn criterion,
                                                 Normalization student_norm, const FeatureDistillationOptions& options)
    : teacher_(std::move(teacher)),
      criterion_(std::move(criterion)),
      student_norm_(std::move(student_norm)),
      weights_(resolve_distillation_weights(options.distill_loss_weight, options.task_loss_weight)) {
  const int64_t student_dim = feature_dim(*student, options.student_feature_dim, "--kd-student-feature-dim");
  const int64_t teacher_dim = feature_dim(*teacher_.model(), options.teacher_feature_dim, "--kd-teacher-feature-dim");
  module_ = std::make_shared<FeatureDistillationModuleImpl>(std::move(student), student_dim, teacher_dim);
  // timm's task_state {'projection': state_dict}, flattened.
  if (module_->projection()) task_state_.register_module("projection", module_->projection());
}

TaskResult FeatureDistillationTask::forward(const ModelInput& model_input, const at::Tensor& target) {
  const at::Tensor& input = model_input.images("feature distillation (--kd-distill-type feature)");
  auto [logits, features] = module_->forward(input);
  at::Tensor task_loss = criterion_(logits, target);
  const at::Tensor teacher_features = teacher_.features(teacher_.normalize_input(input, student_norm_).detach());
  if (features.sizes() != teacher_features.sizes()) {
    throw Error("feature distillation: the student's features " + c10::str(features.sizes()) + " and the teacher's " +
                c10::str(teacher_features.sizes()) +
                " differ in shape; check --kd-student-feature-dim and --kd-teacher-feature-dim");
  }
  at::Tensor kd_loss = at::mse_loss(features, teacher_features);
  at::Tensor loss = weights_.task * task_loss + weights_.distill * kd_loss;
  return TaskResult{
      std::move(loss), std::move(logits), {{"task_loss", std::move(task_loss)}, {"kd_loss", std::move(kd_loss)}}};
}

namespace {

// `names` with timm's FeatureDistillationTrainableModule prefix.
std::vector<std::string> student_names(const std::vector<std::string>& names) {
  std::vector<std::string> prefixed;
  for (const std::string& name : names) prefixed.push_back("student." + name);
  return prefixed;
}

// timm's FeatureDistillationTrainableModule.group_matcher: the projection's
// parameters join the student's last layer, each in that layer's decay or
// no-decay group (a new one, scale 1, when the student has none).
void add_to_last_layer(std::vector<ParamGroup>& groups, const layers::Linear& projection, int64_t last_layer,
                       const OptimizerArgs& args) {
  for (const auto& item : projection->named_parameters()) {
    const bool decay = item.value().dim() > 1;
    const std::string name = "layer_" + std::to_string(last_layer) + (decay ? "_decay" : "_no_decay");
    auto group = std::find_if(groups.begin(), groups.end(), [&](const ParamGroup& g) { return g.name == name; });
    if (group == groups.end()) {
      groups.push_back(
          ParamGroup{name, {}, {}, decay ? args.weight_decay : 0.0, std::max(args.layer_decay_min_scale, 1.0)});
      group = groups.end() - 1;
    }
    group->names.push_back("projection." + item.key());
    group->params.push_back(item.value());
  }
}

}  // namespace

std::vector<ParamGroup> FeatureDistillationTask::param_groups(const std::string& model_name,
                                                              const OptimizerArgs& args) const {
  const layers::Linear& projection = module_->projection();
  if (!projection) return TrainingTask::param_groups(model_name, args);
  const ClassifierImpl& student = *model();
  // timm's groups over FeatureDistillationTrainableModule ("student.*", then
  // "projection.*"), the student's no_weight_decay() prefixed.
  const std::vector<std::string> no_weight_decay = student_names(student.no_weight_decay());
  if (!args.layer_decay) return optimizer_param_groups(*module_, no_weight_decay, args, {}, model_name);
  const GroupMatcher matcher = student.group_matcher(/*coarse=*/false);
  std::vector<ParamGroup> groups =
      optimizer_param_groups(student, student.no_weight_decay(), args, matcher, model_name);
  for (ParamGroup& group : groups) group.names = student_names(group.names);
  int64_t last_layer = 0;
  for (const auto& [name, layer] : group_parameters(student, matcher)) last_layer = std::max(last_layer, layer);
  add_to_last_layer(groups, projection, last_layer, args);
  return groups;
}

std::vector<at::Tensor> FeatureDistillationTask::clip_parameters(bool exclude_head) const {
  std::vector<at::Tensor> params = TrainingTask::clip_parameters(exclude_head);
  if (module_->projection()) {
    for (const at::Tensor& param : module_->projection()->parameters()) params.push_back(param);
  }
  return params;
}

NamedTensors FeatureDistillationTask::task_state() const { return state_dict(task_state_); }

void FeatureDistillationTask::load_task_state(const NamedTensors& state) {
  if (!module_->projection()) return TrainingTask::load_task_state(state);
  try {
    load_state_dict(task_state_, state);
  } catch (const Error& e) {
    throw Error("the task state of " + describe() + ": " + e.what());
  }
}

std::string FeatureDistillationTask::describe() const {
  std::string text =
      "FeatureDistillationTask: teacher=" + model_label(*teacher_.model()) + ", " + describe_weights(weights_) + ", ";
  const auto& projection = module_->projection();
  if (!projection) return text + "features of equal size, no projection";
  return text + "projection " + std::to_string(projection->options.in_features()) + " -> " +
         std::to_string(projection->options.out_features());
}

}  // namespace timm
