// The training task train.py builds: a classification task, or with
// --kd-model-name a distillation task around a frozen teacher.
#include "timm/base/error.hpp"
#include "timm/log/log.hpp"
#include "timm/models/channels_last.hpp"
#include "timm/models/load_weights.hpp"
#include "timm/models/model_dtype.hpp"
#include "timm/train/distillation.hpp"
#include "trainer_internal.hpp"

namespace timm::train_detail {
namespace {

// The teacher's weights: --kd-pretrained-path strictly (timm's
// pretrained_path overlay keeps the classifier, the file was trained for the
// student's classes), else its default weights from the hub cache, whose
// classifier only logit distillation needs.
void load_teacher_weights(const TrainArgs& args, ClassifierImpl& teacher, const ModelArgs& teacher_args) {
  const std::string& name = *args.kd_model_name;
  if (const auto& path = args.kd_pretrained_path; path && !path->empty()) {
    load_checkpoint(teacher, *path);
    log_info("Loaded teacher " + in_quotes(name) + " from " + in_quotes(*path));
    return;
  }
  const int64_t pretrained_classes = teacher.pretrained_cfg().num_classes;
  if (args.kd_distill_type != "feature" && pretrained_classes != teacher_args.num_classes) {
    // timm would train against a teacher whose classifier was never trained.
    throw UsageError("--kd-model-name " + in_quotes(name) + ": its pretrained weights classify " +
                     std::to_string(pretrained_classes) + " classes, the student " +
                     std::to_string(teacher_args.num_classes) +
                     "; logit distillation needs a teacher trained on the student's classes: give its weights with "
                     "--kd-pretrained-path");
  }
  try {
    load_hub_pretrained(teacher, name, teacher_args.in_chans, teacher_args.num_classes);
  } catch (const Error& e) {
    throw Error("the teacher's weights (--kd-model-name " + in_quotes(name) + "): " + e.what() +
                " (for the teacher: --kd-pretrained-path)");
  }
  log_info("Loaded teacher " + in_quotes(name) + " from the Hugging Face hub cache");
}

// The normalisation timm-run would give the teacher's inputs with the same
// flags and dataset: the flags' and the dataset's mean and std, else the
// teacher's own (timm's DistillationTeacher reads its pretrained_cfg).
Normalization teacher_normalization(const Config& config, const ClassifierImpl& teacher,
                                    const DatasetDefaults& defaults) {
  const DataConfig data = resolve_data_config(config, teacher.pretrained_cfg(), defaults);
  return Normalization{data.mean, data.std};
}

DistillationTeacher create_teacher(const TrainArgs& args, const Config& config, const TrainSetup& setup,
                                   const DatasetDefaults& defaults, const torch::Device& device) {
  // timm's _resolve_teacher: the student's num_classes and in_chans.
  ModelArgs teacher_args;
  teacher_args.num_classes = setup.model_args.num_classes;
  teacher_args.in_chans = setup.model_args.in_chans;
  ModelPtr teacher = create_model(*args.kd_model_name, teacher_args);
  log_info(format("Teacher %s created, param count:%lld", args.kd_model_name->c_str(),
                  static_cast<long long>(count_parameters(*teacher))));
  load_teacher_weights(args, *teacher, teacher_args);
  teacher->to(device);
  // timm creates the teacher in the task's dtype (--model-dtype).
  to_model_dtype(*teacher, setup.tools.model_dtype);
  if (args.channels_last) to_channels_last(*teacher);
  Normalization normalization = teacher_normalization(config, *teacher, defaults);
  return DistillationTeacher(std::move(teacher), std::move(normalization));
}

void check_no_teacher_flags(const TrainArgs& args) {
  if (args.kd_pretrained_path) throw UsageError("--kd-pretrained-path needs --kd-model-name (the teacher)");
}

}  // namespace

std::unique_ptr<TrainingTask> make_task(const TrainArgs& args, const Config& config, const TrainSetup& setup,
                                        const DatasetDefaults& defaults, const torch::Device& device) {
  if (!args.kd_model_name) {
    check_no_teacher_flags(args);
    return std::make_unique<ClassificationTask>(setup.model, setup.tools.loss_fn);
  }
  const std::string& type = args.kd_distill_type;
  if (type != "logit" && type != "feature" && type != "token") {
    throw UsageError("--kd-distill-type " + in_quotes(type) + ": expected 'logit', 'feature' or 'token'");
  }
  DistillationTeacher teacher = create_teacher(args, config, setup, defaults, device);
  const Normalization student_norm{setup.data_config.mean, setup.data_config.std};
  LogitDistillationOptions logit_options;
  logit_options.distill_loss_weight = args.distill_loss_weight;
  logit_options.task_loss_weight = args.task_loss_weight;
  logit_options.temperature = args.kd_temperature;
  logit_options.loss_type = args.kd_loss_type;
  if (type == "logit") {
    return std::make_unique<LogitDistillationTask>(setup.model, std::move(teacher), setup.tools.loss_fn, student_norm,
                                                   logit_options);
  }
  if (type == "token") {
    TokenDistillationOptions options{logit_options};
    options.distill_type = args.kd_token_distill_type;
    return std::make_unique<TokenDistillationTask>(setup.model, std::move(teacher), setup.tools.loss_fn, student_norm,
                                                   options);
  }
  FeatureDistillationOptions options;
  options.distill_loss_weight = args.distill_loss_weight;
  options.task_loss_weight = args.task_loss_weight;
  options.student_feature_dim = args.kd_student_feature_dim;
  options.teacher_feature_dim = args.kd_teacher_feature_dim;
  return std::make_unique<FeatureDistillationTask>(setup.model, std::move(teacher), setup.tools.loss_fn, student_norm,
                                                   options);
}

}  // namespace timm::train_detail
