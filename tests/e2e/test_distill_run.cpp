// timm-run with a teacher (--kd-model-name) end to end on a small
// Fashion-MNIST subset: the teacher's weights from a checkpoint a previous
// timm-run wrote, logit and feature distillation, an exact resume of a
// feature run (its projection in the checkpoint's task state), and the
// distillation flags' errors.
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <torch/serialize/input-archive.h>

#include "e2e_support.hpp"
#include "test_support.hpp"
#include "timm/io/safetensors.hpp"

// Last: c10/util/Logging.h defines a CHECK macro that doctest must override.
#include <doctest/doctest.h>

namespace test_distill_run {

namespace fs = std::filesystem;
using timm::test::run_command;

namespace {

// Weights of a straight and a resumed run agree to this (absolute): the same
// float32 computation on one thread, in practice bit for bit.
constexpr double kWeightsAtol = 1e-6;

std::string timm_run() { return (timm::test::bin_dir() / "timm-run").string(); }

std::vector<std::string> run_args(const fs::path& out, const std::string& model, const std::string& experiment,
                                  int epochs, int samples, const std::vector<std::string>& extra = {}) {
  std::vector<std::string> args = {timm_run(),
                                   "--model",
                                   model,
                                   "--epochs",
                                   std::to_string(epochs),
                                   "--train-num-samples",
                                   std::to_string(samples),
                                   "--val-num-samples",
                                   "64",
                                   "-b",
                                   "32",
                                   "--lr",
                                   "0.05",
                                   "-j",
                                   "1",
                                   "--seed",
                                   "5",
                                   "--output",
                                   out.string(),
                                   "--experiment",
                                   experiment,
                                   "--log-interval",
                                   "2"};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

timm::test::CommandResult train(const std::vector<std::string>& args) { return timm::test::train_successfully(args); }

bool has(const std::string& output, const std::string& text) {
  const bool found = output.find(text) != std::string::npos;
  if (!found) MESSAGE("'" << text << "' not in:\n" << output);
  return found;
}

// The task state a checkpoint's state file holds under `key` ("task_state",
// "task_state_ema"), by name; empty when it holds none.
std::map<std::string, at::Tensor> saved_task_state(const fs::path& state_file, const std::string& key = "task_state") {
  torch::serialize::InputArchive archive;
  archive.load_from(state_file.string());
  torch::serialize::InputArchive task_archive;
  if (!archive.try_read(key, task_archive)) return {};
  std::map<std::string, at::Tensor> state;
  for (const std::string& name : task_archive.keys()) task_archive.read(name, state[name]);
  return state;
}

std::set<std::string> task_state_keys(const fs::path& state_file) {
  std::set<std::string> keys;
  for (const auto& [name, tensor] : saved_task_state(state_file)) keys.insert(name);
  return keys;
}

// The largest difference between two saved task states of the same keys.
double task_state_diff(const std::map<std::string, at::Tensor>& a, const std::map<std::string, at::Tensor>& b) {
  REQUIRE(a.size() == b.size());
  double diff = 0.0;
  for (const auto& [name, tensor] : a) {
    REQUIRE(b.count(name) == 1);
    diff = timm::test::worst_diff(diff, (tensor - b.at(name)).abs().max().item<double>());
  }
  return diff;
}

// A resnet50 teacher checkpoint: one epoch of 2 steps, enough for a file
// of its weights (what the teacher knows does not matter to these checks).
fs::path teacher_checkpoint(const fs::path& out) {
  train(run_args(out, "resnet50", "teacher", 1, 64));
  return out / "teacher" / "last.safetensors";
}

}  // namespace

TEST_CASE("timm-run distils resnet18 from a teacher checkpoint; a resumed feature run equals a straight one") {
  timm::test::TempDir tmp;
  const fs::path teacher = teacher_checkpoint(tmp.path());
  const std::vector<std::string> kd = {"--kd-model-name", "resnet50", "--kd-pretrained-path", teacher.string()};

  SUBCASE("logit distillation, complementary weights, bfloat16 autocast") {
    std::vector<std::string> flags = kd;
    flags.insert(flags.end(),
                 {"--task-loss-weight", "0.3", "--kd-temperature", "2", "--amp", "--amp-dtype", "bfloat16"});
    const auto run = train(run_args(tmp.path(), "resnet18", "logit", 1, 128, flags));
    CHECK(has(run.output, "Loaded teacher 'resnet50' from '" + teacher.string() + "'"));
    CHECK(has(run.output,
              "LogitDistillationTask: teacher='resnet50', task_weight=0.3, distill_weight=0.7, loss_type=kl, "
              "temperature=2.0"));
    CHECK(has(run.output, "Test top-1: "));
    CHECK(task_state_keys(tmp / "logit" / "last.state.pt").empty());
  }

  SUBCASE("feature distillation with a projection and its EMA: 2 epochs == 1 epoch, resume, 1 epoch") {
    std::vector<std::string> flags = kd;
    flags.insert(flags.end(), {"--kd-distill-type", "feature", "--distill-loss-weight", "2", "--model-ema",
                               "--model-ema-decay", "0.5"});
    train(run_args(tmp.path(), "resnet18", "straight", 2, 96, flags));
    std::vector<std::string> first_flags = flags;
    first_flags.insert(first_flags.end(), {"--stop-after-epochs", "1"});
    const auto first = train(run_args(tmp.path(), "resnet18", "first", 2, 96, first_flags));
    CHECK(has(first.output,
              "FeatureDistillationTask: teacher='resnet50', task_weight=1.0, distill_weight=2.0, projection 512 -> "
              "2048"));
    const fs::path first_state = tmp / "first" / "last.state.pt";
    CHECK(task_state_keys(first_state) == std::set<std::string>{"projection.bias", "projection.weight"});

    std::vector<std::string> resume_flags = flags;
    resume_flags.insert(resume_flags.end(), {"--resume", (tmp / "first" / "last.safetensors").string()});
    const auto resumed = train(run_args(tmp.path(), "resnet18", "resumed", 2, 96, resume_flags));
    CHECK(has(resumed.output, "Loaded checkpoint"));
    const double diff =
        timm::test::max_weight_diff(tmp / "straight" / "last.safetensors", tmp / "resumed" / "last.safetensors");
    MESSAGE("max |straight - resumed| weight difference: " << diff);
    CHECK(diff <= kWeightsAtol);
    // The run trained: epoch 1 moved the weights away from epoch 0's.
    CHECK(timm::test::max_weight_diff(tmp / "first" / "last.safetensors", tmp / "resumed" / "last.safetensors") > 1e-4);
    INFO("the projection's EMA (timm's task_state_ema) is saved, moves with training and resumes");
    const auto straight_ema = saved_task_state(tmp / "straight" / "last.state.pt", "task_state_ema");
    CHECK(task_state_diff(straight_ema, saved_task_state(tmp / "resumed" / "last.state.pt", "task_state_ema")) <=
          kWeightsAtol);
    CHECK(task_state_diff(straight_ema, saved_task_state(first_state, "task_state_ema")) > 1e-6);

    // A logit task has no projection to take the saved one: named, not dropped.
    std::vector<std::string> logit_flags = kd;
    logit_flags.insert(logit_flags.end(), {"--resume", (tmp / "first" / "last.safetensors").string()});
    const auto r = run_command(run_args(tmp.path(), "resnet18", "wrong-task", 2, 96, logit_flags),
                               std::chrono::seconds(600), {"OMP_NUM_THREADS=1"});
    CHECK(r.exit_code == 1);
    CHECK(has(r.output, first_state.string() + ": the checkpoint holds task state ("));
    CHECK(has(r.output, "'projection.weight'"));
    CHECK(has(r.output, "but this run's task has none: LogitDistillationTask"));
  }
}

TEST_CASE("token distillation trains a distilled DeiT from a resnet18 checkpoint") {
  timm::test::TempDir tmp;
  train(run_args(tmp.path(), "resnet18", "teacher18", 1, 32));
  const std::string teacher = (tmp / "teacher18" / "last.safetensors").string();
  const auto run = train(run_args(tmp.path(), "deit_tiny_distilled_patch16_224", "token", 1, 32,
                                  {"--img-size", "224", "--kd-model-name", "resnet18", "--kd-pretrained-path", teacher,
                                   "--kd-distill-type", "token", "--kd-token-distill-type", "hard"}));
  CHECK(has(run.output,
            "TokenDistillationTask: teacher='resnet18', task_weight=1.0, distill_weight=1.0, distill_type=hard"));
  CHECK(has(run.output, "Test top-1: "));
}

TEST_CASE("the distillation flags' errors name the cause") {
  timm::test::TempDir tmp;
  const std::string output = tmp.path().string();
  auto failing = [&](std::vector<std::string> flags) {
    std::vector<std::string> argv = {timm_run(), "--epochs", "1", "--train-num-samples", "32", "--output", output};
    argv.insert(argv.end(), flags.begin(), flags.end());
    // An empty hub cache: the teacher's default weights are not there.
    return run_command(argv, std::chrono::seconds(300), {"HF_HUB_CACHE=" + output + "/no-hub"});
  };
  SUBCASE("an unknown teacher") {
    const auto r = failing({"--kd-model-name", "resnet51"});
    CHECK(r.exit_code == 2);
    CHECK(has(r.output, "unknown model 'resnet51'"));
  }
  SUBCASE("a teacher path without a teacher") {
    const auto r = failing({"--kd-pretrained-path", "x.safetensors"});
    CHECK(r.exit_code == 2);
    CHECK(has(r.output, "--kd-pretrained-path needs --kd-model-name"));
  }
  SUBCASE("hub weights of other classes for logit distillation") {
    const auto r = failing({"--kd-model-name", "resnet50"});
    CHECK(r.exit_code == 2);
    CHECK(has(r.output, "--kd-model-name 'resnet50': its pretrained weights classify 1000 classes, the student 10"));
  }
  SUBCASE("hub weights not in the cache") {
    const auto r = failing({"--kd-model-name", "resnet50", "--kd-distill-type", "feature"});
    CHECK(r.exit_code == 1);
    CHECK(has(r.output, "the teacher's weights (--kd-model-name 'resnet50'): pretrained weights of"));
    CHECK(has(r.output, "--kd-pretrained-path"));
  }
  SUBCASE("a teacher file that does not exist") {
    const auto r = failing({"--kd-model-name", "resnet18", "--kd-pretrained-path", output + "/none.safetensors"});
    CHECK(r.exit_code != 0);
    CHECK(has(r.output, output + "/none.safetensors"));
  }
  SUBCASE("settings a teacher of the right classes refuses") {
    // A resnet18 checkpoint of one step, the teacher of these checks.
    train(run_args(tmp.path(), "resnet18", "teacher18", 1, 32));
    const std::string teacher = (tmp / "teacher18" / "last.safetensors").string();
    const auto dim = failing({"--kd-model-name", "resnet18", "--kd-pretrained-path", teacher, "--kd-distill-type",
                              "feature", "--kd-teacher-feature-dim", "7"});
    CHECK(dim.exit_code == 2);
    CHECK(has(dim.output, "--kd-teacher-feature-dim 7: model 'resnet18' has 512 pooled features"));
    const auto temperature =
        failing({"--kd-model-name", "resnet18", "--kd-pretrained-path", teacher, "--kd-temperature", "0"});
    CHECK(temperature.exit_code == 2);
    CHECK(has(temperature.output, "--kd-temperature 0.0: expected a positive number"));
    const auto loss =
        failing({"--kd-model-name", "resnet18", "--kd-pretrained-path", teacher, "--kd-loss-type", "mse"});
    CHECK(loss.exit_code == 2);
    CHECK(has(loss.output, "--kd-loss-type 'mse': only 'kl' is supported"));
    const auto token =
        failing({"--kd-model-name", "resnet18", "--kd-pretrained-path", teacher, "--kd-distill-type", "token"});
    CHECK(token.exit_code == 2);
    CHECK(has(token.output, "--kd-distill-type token: model 'resnet50' has no distillation head"));
    const auto token_type =
        failing({"--model", "deit_tiny_distilled_patch16_224", "--img-size", "224", "--kd-model-name", "resnet18",
                 "--kd-pretrained-path", teacher, "--kd-distill-type", "token", "--kd-token-distill-type", "medium"});
    CHECK(token_type.exit_code == 2);
    CHECK(has(token_type.output, "--kd-token-distill-type"));
    const auto other = failing({"--kd-model-name", "resnet34", "--kd-pretrained-path", teacher});
    CHECK(other.exit_code == 1);
    CHECK(has(other.output, teacher));
  }
}

}  // namespace test_distill_run
