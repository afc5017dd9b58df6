// Knowledge distillation tasks (timm/train/distillation.hpp) against timm's
// LogitDistillationTask, FeatureDistillationTask and TokenDistillationTask
// (tests/oracle/distill_oracle.py): one training step of a resnet18 student
// against a resnet34 teacher (512 features, no projection) or a resnet50
// teacher (2048 features, a 512 -> 2048 projection), and of a
// deit_tiny_distilled_patch16_224 student (class and distillation heads)
// against a resnet18 teacher, gives timm's loss, task_loss, kd_loss (token:
// distill_loss), logits (token: the class head's) and gradients. We create the
// models and the tasks, write their weights (the projection's too), the
// batches and the cases for the oracle, which loads them into timm's models
// and tasks. timm's token task calls set_distilled_training(True) on the
// student; ours calls ClassifierImpl::forward_distilled.
//
// Tolerance: scalars (loss, task_loss, kd_loss) |ours - timm| <= 1e-5 + 1e-5
// * |timm|; logits and gradients 1e-4 + 1e-4 * |timm|, as the resnet parity
// test's. Both sides run the same ATen kernels on one thread; an alternative
// float32 implementation of the losses (KL and MSE written out) lands within
// 2e-6 of the largest gradient, while float32 against float64 differs by up
// to 4e-4 of it (train-mode BatchNorm over 4 values per channel in layer4
// amplifies rounding). A wrong weight, temperature, reduction, teacher mode
// or normalisation is off by orders more.
//
// Token cases (a ViT, float32 through 12 blocks, 2 images of 224x224): the
// scalars as above; logits and gradients 1e-5 + 1e-4 * |timm|. Measured with
// timm: the float32 step against the float64 one differs by at most 1e-6 in
// the scalars (3e-7 relative), 3e-7 in the logits and 5e-6 in the gradients
// (largest |gradient| 13), and needs no more than 5e-7 + 1e-4 * |float64|
// anywhere: the tolerance is 20 times that, while the smallest gradient
// tensor (a late block's norm1.weight) still reaches 1.5e-3, far above it.
#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/core/GradMode.h>
#include <nlohmann/json.hpp>

#include "test_support.hpp"
#include "timm/base/error.hpp"
#include "timm/io/safetensors.hpp"
#include "timm/models/model.hpp"
#include "timm/models/state_dict.hpp"
#include "timm/train/distillation.hpp"
#include "timm/train/losses.hpp"
#include "timm/train/task.hpp"

// Last: c10/util/Logging.h defines a CHECK macro that doctest must override.
#include <doctest/doctest.h>

namespace test_distillation {

namespace {

constexpr int64_t kNumClasses = 10;
constexpr double kLossAtol = 1e-5;
constexpr double kLossRtol = 1e-5;
constexpr double kAtol = 1e-4;
constexpr double kRtol = 1e-4;
constexpr double kTokenAtol = 1e-5;  // token cases' logits and gradients
constexpr double kTokenRtol = 1e-4;

constexpr const char* kDeit = "deit_tiny_distilled_patch16_224";

const timm::Normalization kImagenet{{0.485, 0.456, 0.406}, {0.229, 0.224, 0.225}};
const timm::Normalization kHalf{{0.5, 0.5, 0.5}, {0.5, 0.5, 0.5}};

using timm::test::ThreadCount;

timm::ModelPtr make_model(const std::string& name, int64_t num_classes = kNumClasses,
                          std::optional<double> drop_rate = std::nullopt,
                          std::optional<double> drop_path_rate = std::nullopt) {
  timm::test::load_builtin_plugins();
  timm::ModelArgs args;
  args.num_classes = num_classes;
  args.in_chans = 3;
  if (drop_rate) args.drop_rate = *drop_rate;
  args.drop_path_rate = drop_path_rate;
  return timm::create_model(name, args);
}

// As model_parity.py's perturb: timm's init leaves BatchNorm weights at one
// (the last of each block at zero), biases at zero and running statistics at
// (0, 1), which would hide parts of the networks from the comparison.
void perturb(torch::nn::Module& model) {
  c10::NoGradGuard no_grad;
  for (const auto& item : model.named_parameters()) {
    const std::string& name = item.key();
    at::Tensor p = item.value();
    if (p.dim() == 1 && name.ends_with("weight")) {
      p.copy_(at::rand(p.sizes()) * 0.5 + 0.75);
    } else if (name.ends_with("bias")) {
      p.copy_(at::randn(p.sizes()) * 0.02);
    }
  }
  for (const auto& item : model.named_buffers()) {
    at::Tensor b = item.value();
    if (item.key().ends_with("running_mean")) {
      b.copy_(at::randn(b.sizes()) * 0.1);
    } else if (item.key().ends_with("running_var")) {
      b.copy_(at::rand(b.sizes()) * 0.5 + 0.75);
    }
  }
}

// The criterion the oracle pairs with `smoothing`: nn.CrossEntropyLoss at 0,
// else timm's LabelSmoothingCrossEntropy.
timm::LossFn criterion(double smoothing) {
  if (smoothing > 0.0) {
    return [smoothing](const at::Tensor& logits, const at::Tensor& target) {
      return timm::label_smoothing_cross_entropy(logits, target, smoothing);
    };
  }
  return [](const at::Tensor& logits, const at::Tensor& target) { return at::cross_entropy_loss(logits, target); };
}

// |ours - timm| <= atol + rtol * |timm| everywhere, false on NaN (max
// propagates NaN, and NaN <= 0 is false). Returns the largest |ours - timm|.
double check_close(const at::Tensor& ours, const at::Tensor& expected, double atol, double rtol,
                   const std::string& what) {
  INFO(what);
  REQUIRE(ours.defined());
  REQUIRE(ours.sizes() == expected.sizes());
  const at::Tensor a = ours.detach().to(at::kDouble), b = expected.to(at::kDouble);
  const at::Tensor diff = (a - b).abs();
  const double excess = (diff - (atol + rtol * b.abs())).max().item<double>();
  const double worst = diff.max().item<double>();
  CHECK_MESSAGE(excess <= 0.0,
                what << ": max |diff| " << worst << " (max |timm| " << b.abs().max().item<double>() << ")");
  return worst;
}

const at::Tensor& part(const timm::TaskResult& result, const std::string& name) {
  for (const auto& [key, value] : result.parts) {
    if (key == name) return value;
  }
  FAIL("the task's result has no part " << name);
  static const at::Tensor none;
  return none;
}

nlohmann::json optional_json(const std::optional<double>& value) {
  return value ? nlohmann::json(*value) : nlohmann::json(nullptr);
}

nlohmann::json norm_json(const std::vector<double>& values) { return nlohmann::json(values); }

// Throws timm::UsageError whose message names every one of `names`.
template <typename F>
void check_usage_error(F&& make, const std::vector<std::string>& names) {
  try {
    make();
    FAIL("no UsageError");
  } catch (const timm::UsageError& e) {
    const std::string message = e.what();
    for (const std::string& name : names) CHECK_MESSAGE(message.find(name) != std::string::npos, message);
  }
}

// One training step compared with timm's (see distill_oracle.py).
struct Case {
  std::string id;
  std::string task;     // "logit", "feature" or "token"
  std::string teacher;  // resnet34 (512 features), resnet50 (2048) or resnet18 (token)
  double smoothing = 0.0;
  double temperature = 4.0;
  std::optional<double> distill_loss_weight = std::nullopt;
  std::optional<double> task_loss_weight = std::nullopt;
  timm::Normalization student_norm = kImagenet;
  timm::Normalization teacher_norm = kImagenet;
  bool projection = false;   // feature tasks: whether one is expected
  double task_weight = 1.0;  // the weights timm resolves
  double distill_weight = 1.0;
  std::string student = "resnet18";   // kDeit for token tasks
  std::string distill_type = "soft";  // token tasks
  // Given to create_model on both sides when set (token tasks' models only).
  std::optional<double> drop_rate = std::nullopt;
  std::optional<double> drop_path_rate = std::nullopt;
};

std::vector<Case> cases() {
  std::vector<Case> out;
  // The three weighting rules, at three temperatures.
  out.push_back({.id = "logit_t1", .task = "logit", .teacher = "resnet34", .temperature = 1.0});
  out.push_back({.id = "logit_t4_task03",
                 .task = "logit",
                 .teacher = "resnet50",
                 .temperature = 4.0,
                 .task_loss_weight = 0.3,
                 .task_weight = 0.3,
                 .distill_weight = 0.7});
  out.push_back({.id = "logit_t25_w5",
                 .task = "logit",
                 .teacher = "resnet34",
                 .temperature = 2.5,
                 .distill_loss_weight = 5.0,
                 .task_loss_weight = 0.5,
                 .task_weight = 0.5,
                 .distill_weight = 5.0});
  // The teacher's input re-normalised: the student's data is normalised with
  // (0.5, 0.5), the teacher expects ImageNet's.
  out.push_back({.id = "logit_renorm", .task = "logit", .teacher = "resnet34", .student_norm = kHalf});
  // The label-smoothing criterion; a distill weight alone keeps task at 1.
  out.push_back({.id = "logit_ls",
                 .task = "logit",
                 .teacher = "resnet34",
                 .smoothing = 0.1,
                 .temperature = 2.0,
                 .distill_loss_weight = 1.0});
  // Features through a 512 -> 2048 projection, with re-normalisation.
  out.push_back({.id = "feature_proj",
                 .task = "feature",
                 .teacher = "resnet50",
                 .distill_loss_weight = 5.0,
                 .student_norm = kHalf,
                 .projection = true,
                 .distill_weight = 5.0});
  // Equal feature sizes, no projection; label smoothing; complementary weights.
  out.push_back({.id = "feature_noproj",
                 .task = "feature",
                 .teacher = "resnet34",
                 .smoothing = 0.1,
                 .task_loss_weight = 0.3,
                 .task_weight = 0.3,
                 .distill_weight = 0.7});
  // Token distillation of a DeiT's distillation head (2 images of 224x224):
  // soft at temperatures 4 and 1 and hard, over the three weighting rules.
  // Neither weight given.
  out.push_back({.id = "token_soft_t4", .task = "token", .teacher = "resnet18", .temperature = 4.0, .student = kDeit});
  // Only the task weight: complementary.
  out.push_back({.id = "token_soft_t1_task03",
                 .task = "token",
                 .teacher = "resnet18",
                 .temperature = 1.0,
                 .task_loss_weight = 0.3,
                 .task_weight = 0.3,
                 .distill_weight = 0.7,
                 .student = kDeit});
  // Hard: cross-entropy with the teacher's argmax; both weights; the class
  // head with label smoothing.
  out.push_back({.id = "token_hard_w5_ls",
                 .task = "token",
                 .teacher = "resnet18",
                 .smoothing = 0.1,
                 .distill_loss_weight = 5.0,
                 .task_loss_weight = 0.5,
                 .task_weight = 0.5,
                 .distill_weight = 5.0,
                 .student = kDeit,
                 .distill_type = "hard"});
  // The teacher's input re-normalised; a distill weight alone.
  out.push_back({.id = "token_renorm",
                 .task = "token",
                 .teacher = "resnet18",
                 .temperature = 2.0,
                 .distill_loss_weight = 2.0,
                 .student_norm = kHalf,
                 .distill_weight = 2.0,
                 .student = kDeit});
  // drop_rate and drop_path_rate 0 given to every model on both sides (the
  // other cases rely on the defaults, also 0): train mode is deterministic.
  out.push_back({.id = "token_drop0",
                 .task = "token",
                 .teacher = "resnet18",
                 .temperature = 1.0,
                 .distill_loss_weight = 0.5,
                 .distill_weight = 0.5,
                 .student = kDeit,
                 .drop_rate = 0.0,
                 .drop_path_rate = 0.0});
  return out;
}

nlohmann::json case_json(const Case& c) {
  nlohmann::json out = {{"id", c.id},
                        {"task", c.task},
                        {"student", c.student},
                        {"teacher", c.teacher},
                        {"num_classes", kNumClasses},
                        {"smoothing", c.smoothing},
                        {"temperature", c.temperature},
                        {"distill_loss_weight", optional_json(c.distill_loss_weight)},
                        {"task_loss_weight", optional_json(c.task_loss_weight)},
                        {"student_mean", norm_json(c.student_norm.mean)},
                        {"student_std", norm_json(c.student_norm.std)},
                        {"teacher_mean", norm_json(c.teacher_norm.mean)},
                        {"teacher_std", norm_json(c.teacher_norm.std)}};
  if (c.task == "token") {
    out["distill_type"] = c.distill_type;
    out["input"] = "input_224";
    out["target"] = "target_224";
  }
  if (c.drop_rate) out["drop_rate"] = *c.drop_rate;
  if (c.drop_path_rate) out["drop_path_rate"] = *c.drop_path_rate;
  return out;
}

// A case's task, built before the oracle runs (the projection's initial
// weights go to the oracle).
struct Built {
  Case c;
  std::unique_ptr<timm::TrainingTask> task;
  timm::FeatureDistillationTask* feature = nullptr;  // set for feature tasks
};

// A resnet18 student and a teacher, both with random (perturbed) weights.
struct Pair {
  timm::ModelPtr student;
  timm::ModelPtr teacher;
};

Pair small_pair(const std::string& teacher = "resnet18") {
  at::manual_seed(1);
  Pair pair{make_model("resnet18"), make_model(teacher)};
  perturb(*pair.student);
  perturb(*pair.teacher);
  return pair;
}

}  // namespace

TEST_CASE("one training step of the logit, feature and token tasks equals timm's") {
  const ThreadCount one_thread(1);
  at::manual_seed(0);
  std::map<std::string, timm::ModelPtr> models;
  for (const std::string name : {"resnet18", "resnet34", "resnet50", kDeit}) {
    models[name] = make_model(name);
    perturb(*models[name]);
  }
  const at::Tensor input = at::randn({4, 3, 32, 32});
  const at::Tensor target = at::randint(0, kNumClasses, {4}, at::kLong);
  // The token cases' batch: our ViT takes only its image size.
  const at::Tensor input_224 = at::randn({2, 3, 224, 224});
  const at::Tensor target_224 = at::randint(0, kNumClasses, {2}, at::kLong);
  timm::NamedTensors to_oracle{
      {"input", input}, {"target", target}, {"input_224", input_224}, {"target_224", target_224}};
  for (const auto& [name, model] : models) {
    for (const auto& [key, value] : timm::state_dict(*model)) to_oracle.emplace_back(name + "." + key, value);
  }
  // The students' initial weights, taken before any teacher is frozen.
  const std::map<std::string, timm::NamedTensors> student_states{{"resnet18", timm::state_dict(*models.at("resnet18"))},
                                                                 {kDeit, timm::state_dict(*models.at(kDeit))}};

  nlohmann::json cases_arg = nlohmann::json::array();
  std::vector<Built> built;
  for (const Case& c : cases()) {
    CAPTURE(c.id);
    timm::ModelPtr student = make_model(c.student, kNumClasses, c.drop_rate, c.drop_path_rate);
    timm::load_state_dict(*student, student_states.at(c.student));
    timm::ModelPtr teacher_model = models.at(c.teacher);
    if (c.drop_rate || c.drop_path_rate) {  // the teacher created with the case's drop rates too, as timm's
      teacher_model = make_model(c.teacher, kNumClasses, c.drop_rate, c.drop_path_rate);
      timm::load_state_dict(*teacher_model, timm::state_dict(*models.at(c.teacher)));
    }
    timm::DistillationTeacher teacher(teacher_model, c.teacher_norm);
    Built b{c, nullptr, nullptr};
    if (c.task == "token") {
      timm::TokenDistillationOptions options;
      options.distill_loss_weight = c.distill_loss_weight;
      options.task_loss_weight = c.task_loss_weight;
      options.temperature = c.temperature;
      options.distill_type = c.distill_type;
      auto task = std::make_unique<timm::TokenDistillationTask>(student, std::move(teacher), criterion(c.smoothing),
                                                                c.student_norm, options);
      CHECK(task->weights().task == doctest::Approx(c.task_weight).epsilon(1e-12));
      CHECK(task->weights().distill == doctest::Approx(c.distill_weight).epsilon(1e-12));
      b.task = std::move(task);
    } else if (c.task == "logit") {
      timm::LogitDistillationOptions options;
      options.distill_loss_weight = c.distill_loss_weight;
      options.task_loss_weight = c.task_loss_weight;
      options.temperature = c.temperature;
      auto task = std::make_unique<timm::LogitDistillationTask>(student, std::move(teacher), criterion(c.smoothing),
                                                                c.student_norm, options);
      CHECK(task->weights().task == doctest::Approx(c.task_weight).epsilon(1e-12));
      CHECK(task->weights().distill == doctest::Approx(c.distill_weight).epsilon(1e-12));
      b.task = std::move(task);
    } else {
      timm::FeatureDistillationOptions options;
      options.distill_loss_weight = c.distill_loss_weight;
      options.task_loss_weight = c.task_loss_weight;
      auto task = std::make_unique<timm::FeatureDistillationTask>(student, std::move(teacher), criterion(c.smoothing),
                                                                  c.student_norm, options);
      CHECK(task->weights().task == doctest::Approx(c.task_weight).epsilon(1e-12));
      CHECK(task->weights().distill == doctest::Approx(c.distill_weight).epsilon(1e-12));
      const timm::layers::Linear& projection = task->module().projection();
      REQUIRE(static_cast<bool>(projection) == c.projection);
      if (projection) {
        CHECK(projection->weight.sizes() == at::IntArrayRef{2048, 512});
        to_oracle.emplace_back(c.id + ".projection.weight", projection->weight);
        to_oracle.emplace_back(c.id + ".projection.bias", projection->bias);
      }
      b.feature = task.get();
      b.task = std::move(task);
    }
    CHECK(b.task->model() == student);
    cases_arg.push_back(case_json(c));
    built.push_back(std::move(b));
  }

  timm::test::TempDir dir;
  timm::write_safetensors(dir / "in.safetensors", to_oracle, {{"cases", cases_arg.dump()}});
  to_oracle.clear();
  MESSAGE(timm::test::run_oracle("distill_oracle.py", {dir.path().string()}));
  std::filesystem::remove(dir / "in.safetensors");  // ~260 MB of weights

  for (Built& b : built) {
    CAPTURE(b.c.id);
    const std::filesystem::path out_path = dir / (b.c.id + ".out.safetensors");
    const timm::NamedTensors expected_list = timm::read_safetensors(out_path);
    std::filesystem::remove(out_path);
    const std::map<std::string, at::Tensor> expected(expected_list.begin(), expected_list.end());
    const auto get = [&](const std::string& key) -> const at::Tensor& {
      const auto it = expected.find(key);
      REQUIRE_MESSAGE(it != expected.end(), "the oracle wrote no " << key);
      return it->second;
    };

    const bool token = b.c.task == "token";
    const at::Tensor& x = token ? input_224 : input;
    const at::Tensor& y = token ? target_224 : target;
    const double atol = token ? kTokenAtol : kAtol, rtol = token ? kTokenRtol : kRtol;
    const std::string distill_part = token ? "distill_loss" : "kd_loss";  // timm's part names

    b.task->train();
    const timm::TaskResult result = b.task->forward(x, y);
    result.loss.backward();

    REQUIRE(result.parts.size() == 2);
    double worst_scalar = 0.0, worst_grad = 0.0;
    worst_scalar = timm::test::worst_diff(
        worst_scalar, check_close(result.loss, get("loss"), kLossAtol, kLossRtol, b.c.id + " loss"));
    worst_scalar = timm::test::worst_diff(worst_scalar, check_close(part(result, "task_loss"), get("task_loss"),
                                                                    kLossAtol, kLossRtol, b.c.id + " task_loss"));
    worst_scalar = timm::test::worst_diff(worst_scalar, check_close(part(result, distill_part), get(distill_part),
                                                                    kLossAtol, kLossRtol, b.c.id + " " + distill_part));
    const double logits_diff = check_close(result.output, get("output"), atol, rtol, b.c.id + " output");

    size_t compared = 0;
    for (const auto& item : b.task->model()->named_parameters()) {
      const std::string key = "grad.student." + item.key();
      worst_grad = timm::test::worst_diff(worst_grad,
                                          check_close(item.value().grad(), get(key), atol, rtol, b.c.id + " " + key));
      ++compared;
    }
    if (token) {
      // The distillation token and head train (compared above).
      CHECK(expected.count("grad.student.dist_token") == 1);
      CHECK(expected.count("grad.student.head_dist.weight") == 1);
      CHECK(expected.count("grad.student.head_dist.bias") == 1);
      // No dropout or drop path: train mode is deterministic, the same
      // forward gives the same class-head logits bit for bit.
      CHECK(b.task->model()->is_training());
      CHECK(at::equal(b.task->model()->forward_distilled(x).first, result.output));
    }
    if (b.feature != nullptr && b.feature->module().projection()) {
      const timm::layers::Linear& projection = b.feature->module().projection();
      worst_grad =
          timm::test::worst_diff(worst_grad, check_close(projection->weight.grad(), get("grad.projection.weight"),
                                                         kAtol, kRtol, b.c.id + " grad.projection.weight"));
      worst_grad = timm::test::worst_diff(worst_grad, check_close(projection->bias.grad(), get("grad.projection.bias"),
                                                                  kAtol, kRtol, b.c.id + " grad.projection.bias"));
      compared += 2;
    }
    // Every gradient timm wrote was compared: the same parameters train.
    CHECK(compared + 4 == expected.size());
    MESSAGE(b.c.id << ": scalars max |diff| " << worst_scalar << ", logits " << logits_diff << ", gradients "
                   << worst_grad << " (" << compared << " tensors)");
    b.task.reset();  // frees the student and its gradients
  }
}

TEST_CASE("feature distillation's optimizer groups equal timm's, with and without --layer-decay") {
  const Pair pair = small_pair("resnet50");
  timm::FeatureDistillationTask task(pair.student, timm::DistillationTeacher(pair.teacher, kImagenet), criterion(0.0),
                                     kImagenet, timm::FeatureDistillationOptions{});
  REQUIRE(task.module().projection());
  for (const std::string layer_decay : {"none", "0.75"}) {
    CAPTURE(layer_decay);
    timm::OptimizerArgs args;
    args.weight_decay = 0.05;
    if (layer_decay != "none") args.layer_decay = std::stod(layer_decay);
    const std::vector<timm::ParamGroup> ours = task.param_groups("resnet18", args);
    const nlohmann::json timm_groups = nlohmann::json::parse(
        timm::test::run_oracle("distill_groups_oracle.py", {"resnet18", "resnet50", "0.05", layer_decay}));
    REQUIRE(ours.size() == timm_groups.size());
    for (std::size_t i = 0; i < ours.size(); ++i) {
      CAPTURE(i);
      CHECK(ours[i].names == timm_groups[i]["names"].get<std::vector<std::string>>());
      CHECK(ours[i].params.size() == ours[i].names.size());
      CHECK(ours[i].weight_decay == doctest::Approx(timm_groups[i]["weight_decay"].get<double>()).epsilon(1e-12));
      CHECK(ours[i].lr_scale == doctest::Approx(timm_groups[i]["lr_scale"].get<double>()).epsilon(1e-12));
    }
  }
}

TEST_CASE("resolve_distillation_weights: timm's three rules") {
  const auto check = [](std::optional<double> distill, std::optional<double> task, double want_task,
                        double want_distill) {
    const timm::DistillationWeights w = timm::resolve_distillation_weights(distill, task);
    CHECK(w.task == doctest::Approx(want_task).epsilon(1e-15));
    CHECK(w.distill == doctest::Approx(want_distill).epsilon(1e-15));
  };
  // Neither given: equal weights.
  check(std::nullopt, std::nullopt, 1.0, 1.0);
  // Only the task weight: complementary.
  check(std::nullopt, 0.3, 0.3, 0.7);
  check(std::nullopt, 1.0, 1.0, 0.0);
  check(std::nullopt, 0.0, 0.0, 1.0);
  // A distill weight: independent, task 1 when not given.
  check(5.0, std::nullopt, 1.0, 5.0);
  check(5.0, 0.5, 0.5, 5.0);
  check(0.0, std::nullopt, 1.0, 0.0);
  check(0.25, 0.25, 0.25, 0.25);
}

TEST_CASE("the teacher is frozen, stays in eval mode and gets no gradient") {
  const ThreadCount one_thread(1);
  Pair pair = small_pair();
  pair.teacher->train();  // DistillationTeacher puts it in eval mode
  const at::Tensor input = at::randn({4, 3, 32, 32});
  const at::Tensor target = at::randint(0, kNumClasses, {4}, at::kLong);
  const auto check_teacher = [&](const std::string& when) {
    INFO(when);
    for (const auto& module : pair.teacher->modules()) CHECK_FALSE(module->is_training());
    for (const auto& item : pair.teacher->named_parameters()) {
      INFO(item.key());
      CHECK_FALSE(item.value().requires_grad());
      CHECK_FALSE(item.value().grad().defined());
    }
  };

  {
    timm::LogitDistillationTask task(pair.student, timm::DistillationTeacher(pair.teacher, kImagenet), criterion(0.0),
                                     kImagenet, timm::LogitDistillationOptions{});
    check_teacher("after construction");
    task.train(true);
    CHECK(pair.student->is_training());
    check_teacher("logit task, train(true)");
    const timm::TaskResult result = task.forward(input, target);
    result.loss.backward();
    check_teacher("logit task, after backward");
    for (const auto& item : pair.student->named_parameters()) {
      INFO(item.key());
      CHECK(item.value().grad().defined());
    }
    task.train(false);
    CHECK_FALSE(pair.student->is_training());
    check_teacher("logit task, train(false)");
  }
  for (auto& p : pair.student->parameters()) p.mutable_grad() = at::Tensor();

  timm::FeatureDistillationTask task(pair.student, timm::DistillationTeacher(pair.teacher, kHalf), criterion(0.0),
                                     kImagenet, timm::FeatureDistillationOptions{});
  task.train(true);
  CHECK(pair.student->is_training());
  CHECK(task.trainable_module().is_training());
  check_teacher("feature task, train(true)");
  const timm::TaskResult result = task.forward(input, target);
  result.loss.backward();
  check_teacher("feature task, after backward");
  task.train(false);
  CHECK_FALSE(pair.student->is_training());
  check_teacher("feature task, train(false)");
}

TEST_CASE("task state: the projection, exactly when the feature sizes differ") {
  Pair pair = small_pair("resnet50");
  const auto student_params = pair.student->parameters().size();

  timm::FeatureDistillationTask task(pair.student, timm::DistillationTeacher(pair.teacher, kImagenet), criterion(0.0),
                                     kImagenet, timm::FeatureDistillationOptions{});
  REQUIRE(task.module().projection());
  CHECK(task.model() == pair.student);
  // timm's FeatureDistillationTrainableModule: "student.*", "projection.*".
  for (const auto& item : task.trainable_module().named_parameters()) {
    const std::string& key = item.key();
    CHECK_MESSAGE((key.starts_with("student.") || key.starts_with("projection.")), key);
  }
  CHECK(task.trainable_module().named_parameters().size() == student_params + 2);
  // timm's get_clip_parameters: the student's (without its head's last two
  // with exclude_head), then the projection's.
  CHECK(task.clip_parameters(false).size() == student_params + 2);
  const std::vector<at::Tensor> clip = task.clip_parameters(true);
  REQUIRE(clip.size() == student_params);
  CHECK(clip.back().is_same(task.module().projection()->bias));

  const timm::NamedTensors state = task.task_state();
  std::vector<std::string> keys;
  for (const auto& [key, value] : state) keys.push_back(key);
  std::sort(keys.begin(), keys.end());
  CHECK(keys == std::vector<std::string>{"projection.bias", "projection.weight"});

  // Round trip: another state loads into the projection.
  timm::NamedTensors changed;
  for (const auto& [key, value] : state) changed.emplace_back(key, value.detach().clone() * 2.0 + 1.0);
  task.load_task_state(changed);
  for (const auto& [key, value] : task.task_state()) {
    for (const auto& [want_key, want] : changed) {
      if (key == want_key) CHECK_MESSAGE(at::equal(value, want), key);
    }
  }
  for (const auto& [key, value] : changed) {
    if (key == "projection.weight") CHECK(at::equal(task.module().projection()->weight.detach(), value));
  }

  timm::NamedTensors unexpected = changed;
  unexpected.emplace_back("projection.extra", at::zeros({1}));
  CHECK_THROWS_WITH_AS(task.load_task_state(unexpected), doctest::Contains("projection.extra"), timm::Error);
  timm::NamedTensors missing;
  for (const auto& [key, value] : changed) {
    if (key == "projection.weight") missing.emplace_back(key, value);
  }
  CHECK_THROWS_WITH_AS(task.load_task_state(missing), doctest::Contains("projection.bias"), timm::Error);

  // Equal sizes (resnet18 teacher): no projection, no state, and a
  // projection's state is refused.
  Pair equal = small_pair();
  timm::FeatureDistillationTask plain(equal.student, timm::DistillationTeacher(equal.teacher, kImagenet),
                                      criterion(0.0), kImagenet, timm::FeatureDistillationOptions{});
  CHECK_FALSE(plain.module().projection());
  CHECK(plain.task_state().empty());
  CHECK(plain.clip_parameters(false).size() == equal.student->parameters().size());
  CHECK_THROWS_AS(plain.load_task_state(state), timm::Error);
  CHECK_NOTHROW(plain.load_task_state({}));

  timm::LogitDistillationTask logit(equal.student, timm::DistillationTeacher(equal.teacher, kImagenet), criterion(0.0),
                                    kImagenet, timm::LogitDistillationOptions{});
  CHECK(logit.task_state().empty());
  CHECK_THROWS_AS(logit.load_task_state(state), timm::Error);
  CHECK_NOTHROW(logit.load_task_state({}));
}

TEST_CASE("detect_feature_dim reads the classifier's input size") {
  CHECK(timm::detect_feature_dim(*make_model("resnet18"), "--kd-student-feature-dim") == 512);
  CHECK(timm::detect_feature_dim(*make_model("resnet50"), "--kd-teacher-feature-dim") == 2048);
  // No classifier (num_classes 0): the size must be given by the flag.
  const timm::ModelPtr headless = make_model("resnet18", 0);
  CHECK_THROWS_WITH_AS(timm::detect_feature_dim(*headless, "--kd-student-feature-dim"),
                       doctest::Contains("--kd-student-feature-dim"), timm::UsageError);
  CHECK_THROWS_WITH_AS(timm::detect_feature_dim(*headless, "--kd-teacher-feature-dim"), doctest::Contains("resnet18"),
                       timm::UsageError);
  CHECK_THROWS_WITH_AS(
      timm::FeatureDistillationTask(headless, timm::DistillationTeacher(make_model("resnet18"), kImagenet),
                                    criterion(0.0), kImagenet, timm::FeatureDistillationOptions{}),
      doctest::Contains("--kd-student-feature-dim"), timm::UsageError);
}

TEST_CASE("only the kl loss type: --kd-loss-type mse is a usage error") {
  Pair pair = small_pair();
  timm::LogitDistillationOptions options;
  options.loss_type = "mse";
  CHECK_THROWS_WITH_AS(timm::LogitDistillationTask(pair.student, timm::DistillationTeacher(pair.teacher, kImagenet),
                                                   criterion(0.0), kImagenet, options),
                       doctest::Contains("--kd-loss-type"), timm::UsageError);
}

TEST_CASE("the teacher's input, logits and features") {
  const ThreadCount one_thread(1);
  Pair pair = small_pair();
  const timm::DistillationTeacher teacher(pair.teacher, kImagenet);
  const at::Tensor input = at::randn({2, 3, 32, 32});

  // Equal normalisations: the input itself, not a copy.
  const at::Tensor same = teacher.normalize_input(input, kImagenet);
  CHECK(same.data_ptr() == input.data_ptr());
  // Different ones: undone for the student, redone for the teacher, as
  // timm's (input * student_std + student_mean - mean_kd) / std_kd.
  const at::Tensor mean = at::tensor(kImagenet.mean, at::kFloat).view({1, 3, 1, 1});
  const at::Tensor std = at::tensor(kImagenet.std, at::kFloat).view({1, 3, 1, 1});
  const at::Tensor want = (input * 0.5 + 0.5 - mean) / std;
  const at::Tensor renormed = teacher.normalize_input(input, kHalf);
  CHECK(renormed.data_ptr() != input.data_ptr());
  check_close(renormed, want, 1e-6, 1e-6, "re-normalised input");

  // Logits and pooled pre-logits features of the eval-mode teacher, without
  // gradients.
  at::Tensor logits, features;
  {
    c10::NoGradGuard no_grad;
    logits = pair.teacher->forward(input);
    features = pair.teacher->forward_head(pair.teacher->forward_features(input), /*pre_logits=*/true);
  }
  const at::Tensor ours_logits = teacher.logits(input);
  const at::Tensor ours_features = teacher.features(input);
  CHECK_FALSE(ours_logits.requires_grad());
  CHECK_FALSE(ours_features.requires_grad());
  CHECK(ours_features.sizes() == at::IntArrayRef{2, 512});
  check_close(ours_logits, logits, 1e-6, 1e-6, "teacher logits");
  check_close(ours_features, features, 1e-6, 1e-6, "teacher features");
}

TEST_CASE("token distillation: a student without a distillation head, an unknown distill type") {
  Pair pair = small_pair();
  CHECK_FALSE(pair.student->has_distillation_head());
  check_usage_error([&] { pair.student->forward_distilled(at::zeros({1, 3, 32, 32})); }, {"resnet18"});
  check_usage_error(
      [&] {
        timm::TokenDistillationTask(pair.student, timm::DistillationTeacher(pair.teacher, kImagenet), criterion(0.0),
                                    kImagenet, timm::TokenDistillationOptions{});
      },
      {"--kd-distill-type token", "resnet18"});

  const timm::ModelPtr deit = make_model(kDeit);
  CHECK(deit->has_distillation_head());
  timm::TokenDistillationOptions options;
  options.distill_type = "medium";
  check_usage_error(
      [&] {
        timm::TokenDistillationTask(deit, timm::DistillationTeacher(pair.teacher, kImagenet), criterion(0.0), kImagenet,
                                    options);
      },
      {"--kd-token-distill-type", "medium"});
}

TEST_CASE("token distillation: the teacher frozen; evaluation gives the mean of the two heads") {
  const ThreadCount one_thread(1);
  Pair pair = small_pair();  // the teacher: resnet18
  at::manual_seed(2);
  const timm::ModelPtr student = make_model(kDeit);
  perturb(*student);
  pair.teacher->train();  // DistillationTeacher puts it in eval mode
  const at::Tensor input = at::randn({1, 3, 224, 224});
  const at::Tensor target = at::randint(0, kNumClasses, {1}, at::kLong);
  const auto check_teacher = [&](const std::string& when) {
    INFO(when);
    for (const auto& module : pair.teacher->modules()) CHECK_FALSE(module->is_training());
    for (const auto& item : pair.teacher->named_parameters()) {
      INFO(item.key());
      CHECK_FALSE(item.value().requires_grad());
      CHECK_FALSE(item.value().grad().defined());
    }
  };

  timm::TokenDistillationTask task(student, timm::DistillationTeacher(pair.teacher, kHalf), criterion(0.0), kImagenet,
                                   timm::TokenDistillationOptions{});
  CHECK(task.model() == student);
  check_teacher("after construction");
  task.train(true);
  CHECK(student->is_training());
  check_teacher("train(true)");
  const timm::TaskResult result = task.forward(input, target);
  CHECK(result.output.sizes() == at::IntArrayRef{1, kNumClasses});
  result.loss.backward();
  check_teacher("after backward");
  for (const auto& item : student->named_parameters()) {
    INFO(item.key());
    CHECK(item.value().grad().defined());
  }

  // Evaluation: the student's forward is the mean of the class and
  // distillation heads (timm's VisionTransformerDistilled outside distilled
  // training).
  task.train(false);
  CHECK_FALSE(student->is_training());
  check_teacher("train(false)");
  c10::NoGradGuard no_grad;
  const auto [main_logits, dist_logits] = student->forward_distilled(input);
  CHECK_FALSE(at::allclose(main_logits, dist_logits));  // two different heads
  check_close(student->forward(input), (main_logits + dist_logits) / 2, 1e-6, 0.0, "eval output");
}

TEST_CASE("NaFlex patch batches: the classification task runs forward_patches; distillation and image models refuse") {
  const ThreadCount one_thread(1);
  timm::test::load_builtin_plugins();
  at::manual_seed(2);
  timm::ModelArgs args;
  args.num_classes = kNumClasses;
  args.kwargs = {{"embed_dim", "32"}, {"depth", "1"}, {"num_heads", "2"}};
  const timm::ModelPtr naflex = timm::create_model("naflexvit_base_patch16_gap", args);
  // Two samples of 3 and 2 patches, padded to 4.
  const timm::PatchBatch patches{
      at::randn({2, 4, 16 * 16 * 3}),
      at::tensor({0, 0, 0, 1, 1, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0}, at::kLong).view({2, 4, 2}),
      at::tensor({1, 1, 1, 0, 1, 1, 0, 0}).to(at::kBool).view({2, 4})};
  const at::Tensor target = at::tensor({3, 7}, at::kLong);
  const timm::ModelInput input = patches;
  CHECK(input.is_patches());
  CHECK(input.batch_size() == 2);

  naflex->eval();
  timm::ClassificationTask task(naflex, criterion(0.0));
  const timm::TaskResult result = task.forward(input, target);
  const at::Tensor logits = naflex->forward_patches(patches);
  // The same computation on one thread: equal bit for bit (and NaN never equals).
  CHECK(at::equal(result.output, logits));
  CHECK(at::equal(result.loss, at::cross_entropy_loss(logits, target)));

  timm::ClassificationTask image_task(make_model("resnet18"), criterion(0.0));
  CHECK_THROWS_WITH_AS(image_task.forward(input, target), doctest::Contains("takes images only, not patches"),
                       timm::UsageError);
  Pair pair = small_pair();
  timm::LogitDistillationTask logit(pair.student, timm::DistillationTeacher(pair.teacher, kImagenet), criterion(0.0),
                                    kImagenet, timm::LogitDistillationOptions{});
  CHECK_THROWS_WITH_AS(logit.forward(input, target),
                       "logit distillation (--kd-distill-type logit) takes image batches, not the NaFlex patch "
                       "batches of --naflex-loader (timm's neither)",
                       timm::UsageError);
  timm::FeatureDistillationTask feature(pair.student, timm::DistillationTeacher(pair.teacher, kImagenet),
                                        criterion(0.0), kImagenet, timm::FeatureDistillationOptions{});
  CHECK_THROWS_WITH_AS(feature.forward(input, target), doctest::Contains("feature distillation"), timm::UsageError);
  // An image batch is still an image batch.
  const timm::ModelInput images = at::zeros({2, 3, 8, 8});
  CHECK_FALSE(images.is_patches());
  CHECK(images.batch_size() == 2);
  CHECK_THROWS_AS(images.patches(), timm::Error);
}

}  // namespace test_distillation
