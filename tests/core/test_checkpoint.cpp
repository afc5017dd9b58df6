// Training checkpoints: the saver's files (last, top-k checkpoint-E,
// model_best, recovery), a resume restoring weights, optimizer, EMA and
// RNG, clear errors for bad files, and atomicity: a process killed at a
// random moment of a save always leaves a checkpoint that resumes.
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <thread>

#include <sys/wait.h>
#include <unistd.h>

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>
#include <torch/serialize/archive.h>

#include "test_support.hpp"
#include "timm/base/error.hpp"
#include "timm/io/safetensors.hpp"
#include "timm/models/model.hpp"
#include "timm/optim/optimizer.hpp"
#include "timm/train/checkpoint.hpp"
#include "timm/train/model_ema.hpp"

// Last: c10/util/Logging.h defines a CHECK macro that doctest must override.
#include <doctest/doctest.h>

namespace fs = std::filesystem;

namespace {

class LinearNetImpl : public timm::ClassifierImpl {
 public:
  LinearNetImpl() { fc = register_module("fc", torch::nn::Linear(64, 32)); }
  at::Tensor forward(at::Tensor x) override { return fc->forward(x); }
  int64_t num_classes() const override { return 32; }
  const timm::PretrainedCfg& pretrained_cfg() const override { return cfg_; }
  torch::nn::Linear fc{nullptr};

 private:
  timm::PretrainedCfg cfg_;
};

void fill(torch::nn::Module& model, double value) {
  torch::NoGradGuard no_grad;
  for (auto& p : model.parameters()) p.fill_(value);
}

timm::OptimizerPtr make_optimizer(torch::nn::Module& model) {
  timm::test::load_builtin_plugins();
  timm::OptimizerArgs args;
  args.opt = "momentum";
  args.lr = 0.1;
  return timm::create_optimizer(model, {}, args);
}

// One optimizer step so that the optimizer has momentum state to save.
void step(torch::nn::Module& model, timm::Optimizer& optimizer) {
  auto& net = dynamic_cast<LinearNetImpl&>(model);
  optimizer.zero_grad();
  net.forward(at::ones({2, 64})).sum().backward();
  optimizer.step();
}

timm::TrainingState state_at(int64_t epoch, std::optional<double> metric) {
  return timm::TrainingState{epoch, metric, "top1", "model = 'x'\n"};
}

}  // namespace

TEST_CASE("the saver keeps timm's files: last, the best checkpoint-hist, model_best, two recoveries") {
  timm::test::TempDir dir;
  auto model = std::make_shared<LinearNetImpl>();
  auto optimizer = make_optimizer(*model);
  const timm::CheckpointParts parts{*model, *optimizer};
  timm::CheckpointSaver saver(dir.path(), /*decreasing=*/false, /*max_history=*/2);
  const std::vector<double> metrics = {50.0, 70.0, 60.0, 40.0};
  for (int64_t epoch = 0; epoch < 4; ++epoch) {
    fill(*model, static_cast<double>(epoch));
    const auto [best, best_epoch] = saver.save(parts, state_at(epoch, metrics[epoch]));
    CHECK(best == (epoch == 0 ? 50.0 : 70.0));
    CHECK(best_epoch == (epoch == 0 ? 0 : 1));
  }
  CHECK(fs::exists(dir / "last.safetensors"));
  CHECK(fs::exists(dir / "checkpoint-1.safetensors"));        // 70
  CHECK(fs::exists(dir / "checkpoint-2.state.pt"));           // 60
  CHECK_FALSE(fs::exists(dir / "checkpoint-0.safetensors"));  // 50, pushed out
  CHECK_FALSE(fs::exists(dir / "checkpoint-3.safetensors"));  // 40, never kept
  // model_best is epoch 1's weights, not overwritten by later saves of last.
  const auto best = timm::read_safetensors(dir / "model_best.safetensors");
  CHECK(best.front().second.flatten()[0].item<double>() == 1.0);
  const auto last = timm::read_safetensors(dir / "last.safetensors");
  CHECK(last.front().second.flatten()[0].item<double>() == 3.0);

  for (int64_t batch = 0; batch < 3; ++batch) saver.save_recovery(parts, state_at(4, std::nullopt), batch);
  CHECK_FALSE(fs::exists(dir / "recovery-4-0.safetensors"));
  CHECK(fs::exists(dir / "recovery-4-1.safetensors"));
  CHECK(fs::exists(dir / "recovery-4-2.state.pt"));
  CHECK(timm::newest_checkpoint(dir.path()).value().filename() == "recovery-4-2.safetensors");
}

TEST_CASE("a resume restores weights, optimizer state, EMA and the RNG") {
  timm::test::TempDir dir;
  auto model = std::make_shared<LinearNetImpl>();
  auto optimizer = make_optimizer(*model);
  step(*model, *optimizer);
  timm::ModelEma ema(std::make_shared<LinearNetImpl>(), *model, {});
  fill(*ema.module(), 0.25);
  at::manual_seed(7);
  timm::save_checkpoint(dir.path(), "last", {*model, *optimizer, &ema}, state_at(3, 1.0));
  const at::Tensor draw_after_save = at::rand({4});

  auto restored = std::make_shared<LinearNetImpl>();
  auto restored_optimizer = make_optimizer(*restored);
  timm::ModelEma restored_ema(std::make_shared<LinearNetImpl>(), *restored, {});
  at::manual_seed(99);
  const int64_t start =
      timm::resume_checkpoint(dir / "last.state.pt", {*restored, restored_optimizer.get(), &restored_ema});
  CHECK(start == 4);
  CHECK(at::equal(at::rand({4}), draw_after_save));
  CHECK(at::equal(restored->fc->weight, model->fc->weight));
  CHECK(restored_ema.module()->parameters()[0].flatten()[0].item<double>() == 0.25);
  // Same momentum state: one more identical step gives identical weights.
  step(*model, *optimizer);
  step(*restored, *restored_optimizer);
  CHECK(at::equal(restored->fc->weight, model->fc->weight));
}

TEST_CASE("bad checkpoints give errors naming the file") {
  timm::test::TempDir dir;
  auto model = std::make_shared<LinearNetImpl>();
  CHECK_THROWS_WITH(timm::resume_checkpoint(dir / "none.safetensors", {*model}),
                    doctest::Contains("none.safetensors does not exist"));
  auto optimizer = make_optimizer(*model);
  timm::save_checkpoint(dir.path(), "a", {*model, *optimizer}, state_at(0, 1.0));
  timm::save_checkpoint(dir.path(), "b", {*model, *optimizer}, state_at(1, 1.0));
  fs::copy_file(dir / "b.state.pt", dir / "a.state.pt", fs::copy_options::overwrite_existing);
  CHECK_THROWS_WITH(timm::resume_checkpoint(dir / "a", {*model}),
                    doctest::Contains("no training state file beside it matches it"));
  timm::test::TempDir other;
  { std::ofstream(other / "c.state.pt") << "not an archive"; }
  fs::copy_file(dir / "b.safetensors", other / "c.safetensors");
  CHECK_THROWS_WITH(timm::resume_checkpoint(other / "c", {*model}),
                    doctest::Contains("not a timm-cpp training state file"));
}

TEST_CASE("a process killed at a random moment of its saves leaves a checkpoint that resumes") {
  at::set_num_threads(1);  // fork() below: no worker threads to lose
  timm::test::TempDir dir;
  auto model = std::make_shared<LinearNetImpl>();
  auto optimizer = make_optimizer(*model);
  step(*model, *optimizer);
  timm::save_checkpoint(dir.path(), "last", {*model, *optimizer}, state_at(0, 0.0));
  const at::Tensor epoch0_weight = model->fc->weight.detach().clone();
  std::mt19937 rng(1234);
  int torn = 0;
  for (int trial = 0; trial < 20; ++trial) {
    const pid_t child = fork();
    REQUIRE(child >= 0);
    if (child == 0) {
      // Saves epochs until killed, weights = epoch. _exit: the child must not
      // run the parent's destructors (the TempDir) or return into doctest.
      try {
        for (int64_t epoch = 1;; ++epoch) {
          fill(*model, static_cast<double>(epoch));
          timm::save_checkpoint(dir.path(), "last", {*model, *optimizer}, state_at(epoch, 0.0));
        }
      } catch (const std::exception& e) {
        std::fprintf(stderr, "saving child failed: %s\n", e.what());
      }
      _exit(3);
    }
    std::this_thread::sleep_for(std::chrono::microseconds(std::uniform_int_distribution<int>(200, 100000)(rng)));
    kill(child, SIGKILL);
    int status = 0;
    waitpid(child, &status, 0);
    REQUIRE_MESSAGE(WIFSIGNALED(status), "the saving child ended by itself (status " << status << ")");
    for (const auto& entry : fs::directory_iterator(dir.path())) {
      torn += entry.path().filename().string().rfind("last.state.pt.", 0) == 0 ? 1 : 0;
    }
    auto restored = std::make_shared<LinearNetImpl>();
    int64_t start = -1;
    REQUIRE_NOTHROW(start = timm::resume_checkpoint(dir / "last.safetensors", {*restored}));
    // The weights are those of the epoch the state names: the first save's,
    // or the value the child filled them with for that epoch.
    REQUIRE(start >= 1);
    if (start == 1) {
      CHECK(at::equal(restored->fc->weight, epoch0_weight));
    } else {
      CHECK(restored->fc->weight.flatten()[0].item<double>() == static_cast<double>(start - 1));
    }
  }
  MESSAGE("kills that left a pending state file: " << torn << " of 20 (the rest: none or a temp file)");
}
