// The models and tasks of the distillation-under-DDP test, shared by the
// worker (one rank of a real multi-process run, kd_worker.cpp) and the
// single-process reference (test_dist_kd.cpp): a tiny classifier (timm's
// forward_features / forward_head split, a "fc" classifier so
// detect_feature_dim reads its feature size), a student and a wider, deeper
// teacher, and the task of each mode built from them in one fixed order of
// random draws.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>

#include "ddp_fixture.hpp"
#include "timm/base/error.hpp"
#include "timm/layers/batch_norm.hpp"
#include "timm/models/model.hpp"
#include "timm/train/distillation.hpp"
#include "timm/train/task.hpp"

namespace timm::test {

constexpr int64_t kKdClasses = 10;  // global_data's labels
constexpr int64_t kStudentWidth = 6;
constexpr int64_t kTeacherWidth = 12;  // != the student's: feature mode needs a projection
constexpr uint64_t kTeacherSeed = 4242;

// The student's seed on rank `rank`: each rank starts from different weights
// (the projection's too), which DDP's start-up broadcast makes rank 0's.
inline uint64_t kd_student_seed(int rank) { return 11 + static_cast<uint64_t>(rank) * 7919; }

// conv1 -> bn1 -> relu [-> conv2 -> relu] (forward_features, an 8x8 or 4x4
// map of `width` channels), global average pool (pre-logits, `width`
// features), fc (10 logits). `deep` adds conv2: the teacher's, so that it has
// parameter names the student lacks.
class KdNetImpl : public timm::ClassifierImpl {
 public:
  KdNetImpl(int64_t width, bool deep) {
    conv1 = register_module("conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(1, width, 3).padding(1)));
    bn1 = register_module("bn1", timm::layers::BatchNorm2d(torch::nn::BatchNormOptions(width)));
    if (deep) {
      conv2 =
          register_module("conv2", torch::nn::Conv2d(torch::nn::Conv2dOptions(width, width, 3).stride(2).padding(1)));
    }
    fc = register_module("fc", torch::nn::Linear(width, kKdClasses));
    cfg_.input_size = {1, 8, 8};
    cfg_.mean = {0.5};
    cfg_.std = {0.25};
    cfg_.first_conv = "conv1";
    cfg_.classifier = "fc";
    cfg_.num_classes = kKdClasses;
  }

  torch::Tensor forward(torch::Tensor x) override { return forward_head(forward_features(std::move(x))); }
  torch::Tensor forward_features(torch::Tensor x) override {
    at::Tensor h = at::relu(bn1->forward(conv1->forward(x)));
    if (conv2) h = at::relu(conv2->forward(h));
    return h;
  }
  torch::Tensor forward_head(torch::Tensor x, bool pre_logits = false) override {
    at::Tensor pooled = x.mean({2, 3});
    return pre_logits ? pooled : fc->forward(pooled);
  }
  int64_t num_classes() const override { return kKdClasses; }
  const timm::PretrainedCfg& pretrained_cfg() const override { return cfg_; }

  torch::nn::Conv2d conv1{nullptr}, conv2{nullptr};
  timm::layers::BatchNorm2d bn1{nullptr};
  torch::nn::Linear fc{nullptr};

 private:
  timm::PretrainedCfg cfg_;
};

// What the inputs are normalised with: the student's differs from the
// teacher's, so the teacher sees re-normalised inputs (normalize_input).
inline const timm::Normalization& kd_student_norm() {
  static const timm::Normalization norm{{0.5}, {0.25}};
  return norm;
}
inline const timm::Normalization& kd_teacher_norm() {
  static const timm::Normalization norm{{0.1}, {0.3}};
  return norm;
}

struct KdSetup {
  timm::ModelPtr teacher;
  std::unique_ptr<timm::TrainingTask> task;
};

// The task of `mode` ("logit": LogitDistillationTask; "feature":
// FeatureDistillationTask with a kStudentWidth -> kTeacherWidth projection).
// The random draws, in this order: the teacher (kTeacherSeed, its BatchNorm
// running statistics randomised so that eval mode matters), then from
// `student_seed` the student and, in feature mode, the projection (its init
// draws from the global generator when the task is built).
inline KdSetup build_kd(const std::string& mode, uint64_t student_seed) {
  at::manual_seed(kTeacherSeed);
  auto teacher = std::make_shared<KdNetImpl>(kTeacherWidth, /*deep=*/true);
  {
    const at::NoGradGuard no_grad;
    teacher->bn1->running_mean.copy_(at::randn({kTeacherWidth}) * 0.1);
    teacher->bn1->running_var.copy_(at::rand({kTeacherWidth}) * 0.5 + 0.75);
  }
  at::manual_seed(student_seed);
  auto student = std::make_shared<KdNetImpl>(kStudentWidth, /*deep=*/false);

  timm::DistillationTeacher distillation_teacher(teacher, kd_teacher_norm());
  const timm::LossFn criterion = [](const at::Tensor& logits, const at::Tensor& target) {
    return at::cross_entropy_loss(logits, target);
  };
  KdSetup setup;
  setup.teacher = teacher;
  if (mode == "logit") {
    timm::LogitDistillationOptions options;
    options.distill_loss_weight = 0.5;
    options.temperature = 2.0;
    setup.task = std::make_unique<timm::LogitDistillationTask>(student, std::move(distillation_teacher), criterion,
                                                               kd_student_norm(), options);
  } else if (mode == "feature") {
    timm::FeatureDistillationOptions options;
    options.distill_loss_weight = 2.0;
    setup.task = std::make_unique<timm::FeatureDistillationTask>(student, std::move(distillation_teacher), criterion,
                                                                 kd_student_norm(), options);
  } else {
    throw timm::UsageError("unknown distillation mode '" + mode + "': expected logit or feature");
  }
  return setup;
}

// The names of `module`'s parameters that train (requires_grad), in order.
inline std::vector<std::string> trainable_names(const torch::nn::Module& module) {
  std::vector<std::string> names;
  for (const auto& item : module.named_parameters()) {
    if (item.value().requires_grad()) names.push_back(item.key());
  }
  return names;
}

}  // namespace timm::test
