#include "timm/train/task.hpp"

#include "timm/base/error.hpp"
#include "timm/train/clip_grad.hpp"

namespace timm {

void TrainingTask::train(bool on) { trainable_module().train(on); }

std::vector<ParamGroup> TrainingTask::param_groups(const std::string& model_name, const OptimizerArgs& args) const {
  const ClassifierImpl& model = *this->model();
  return optimizer_param_groups(model, model.no_weight_decay(), args, model.group_matcher(/*coarse=*/false),
                                model_name);
}

OptimizerPtr TrainingTask::create_optimizer(const std::string& model_name, const OptimizerArgs& args) const {
  optimizer_traits(args.opt);  // throws for an unknown name, before the groups' errors
  return timm::create_optimizer(param_groups(model_name, args), args);
}

std::vector<at::Tensor> TrainingTask::clip_parameters(bool exclude_head) const {
  return model_parameters(*model(), exclude_head);
}

void TrainingTask::prepare_distributed(const std::function<void(torch::nn::Module&)>& wrap) {
  wrap(trainable_module());
}

void TrainingTask::load_task_state(const NamedTensors& state) {
  if (state.empty()) return;
  std::string names;
  for (const auto& item : state) names += (names.empty() ? "" : ", ") + in_quotes(item.first);
  throw Error("the checkpoint holds task state (" + names + "), but this run's task has none: " + describe());
}

ClassificationTask::ClassificationTask(ModelPtr model, LossFn criterion)
    : model_(std::move(model)), criterion_(std::move(criterion)) {}

TaskResult ClassificationTask::forward(const ModelInput& input, const at::Tensor& target) {
  at::Tensor output = forward_input(*model_, input);
  at::Tensor loss = criterion_(output, target);
  return TaskResult{std::move(loss), std::move(output), {}};
}

}  // namespace timm
