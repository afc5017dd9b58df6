// Training checkpoints: the saver's files (last, top-k checkpoint-E,
// model_best, recovery; after a resume it goes on pruning the files already
// there), a resume restoring weights, optimizer, EMA and each rank's RNG
// state, clear errors for bad files, and atomicity: a process killed at a
// random moment of a save always leaves a checkpoint that resumes, and a save
// on a full disk fails clearly and leaves the previous checkpoint.
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <poll.h>
#include <sys/resource.h>
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
#include "timm/models/state_dict.hpp"
#include "timm/optim/optimizer.hpp"
#include "timm/train/checkpoint.hpp"
#include "timm/train/model_ema.hpp"

// Last: c10/util/Logging.h defines a CHECK macro that doctest must override.
#include <doctest/doctest.h>

namespace test_checkpoint {

namespace fs = std::filesystem;

namespace {

class LinearNetImpl : public timm::ClassifierImpl {
 public:
  explicit LinearNetImpl(int64_t in_features = 64) { fc = register_module("fc", torch::nn::Linear(in_features, 32)); }
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
  net.forward(at::ones({2, net.fc->options.in_features()})).sum().backward();
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

namespace {

// Epochs 0..4 saved with these metrics by a saver that kept them all.
void save_five_epochs(const fs::path& dir, const timm::CheckpointParts& parts) {
  timm::CheckpointSaver saver(dir, /*decreasing=*/false, /*max_history=*/10);
  const std::vector<double> metrics = {50.0, 70.0, 60.0, 40.0, 65.0};
  for (int64_t epoch = 0; epoch < 5; ++epoch) saver.save(parts, state_at(epoch, metrics[epoch]));
}

std::set<std::string> kept_epochs(const fs::path& dir) {
  std::set<std::string> kept;
  for (int epoch = 0; epoch < 10; ++epoch) {
    const std::string stem = "checkpoint-" + std::to_string(epoch);
    const bool weights = fs::exists(dir / (stem + ".safetensors"));
    CHECK_MESSAGE(weights == fs::exists(dir / (stem + ".state.pt")), stem << ": one file of the pair");
    if (weights) kept.insert(std::to_string(epoch));
  }
  return kept;
}

}  // namespace

TEST_CASE("after a resume the saver prunes the checkpoint-N files already in the folder, best first") {
  auto model = std::make_shared<LinearNetImpl>();
  auto optimizer = make_optimizer(*model);
  const timm::CheckpointParts parts{*model, *optimizer};
  timm::test::TempDir dir;
  save_five_epochs(dir.path(), parts);
  // A file of a later epoch (from a run resumed earlier than its end) is not the resumed run's history.
  fs::copy_file(dir / "checkpoint-4.safetensors", dir / "checkpoint-7.safetensors");
  fs::copy_file(dir / "checkpoint-4.state.pt", dir / "checkpoint-7.state.pt");

  // Resumed at epoch 5 with --checkpoint-hist 2: of 50, 70, 60, 40, 65 and
  // the new 55, the best two stay (without the saved list, all six would).
  timm::CheckpointSaver resumed(dir.path(), /*decreasing=*/false, /*max_history=*/2);
  resumed.resume_history(5);
  resumed.save(parts, state_at(5, 55.0));
  CHECK(kept_epochs(dir.path()) == std::set<std::string>{"1", "4", "7"});
  // And on: 68 pushes out 65.
  resumed.save(parts, state_at(6, 68.0));
  CHECK(kept_epochs(dir.path()) == std::set<std::string>{"1", "6", "7"});

  // A file without a readable metric (epoch 1's, 70) ranks last, so it goes first.
  timm::test::TempDir other;
  save_five_epochs(other.path(), parts);
  { std::ofstream(other / "checkpoint-1.state.pt") << "not an archive"; }
  timm::CheckpointSaver resumed_other(other.path(), /*decreasing=*/false, /*max_history=*/4);
  resumed_other.resume_history(5);
  resumed_other.save(parts, state_at(5, 10.0));  // below 40: not kept
  CHECK(kept_epochs(other.path()) == std::set<std::string>{"0", "2", "3", "4"});
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

TEST_CASE("the EMA of the task state is saved as task_state_ema and restored; without it, from task_state") {
  timm::test::TempDir dir;
  auto model = std::make_shared<LinearNetImpl>();
  auto optimizer = make_optimizer(*model);
  const timm::NamedTensors projection = {{"projection.weight", at::full({4, 3}, 0.5)}};
  timm::ModelEma ema(std::make_shared<LinearNetImpl>(), *model, {});
  ema.follow_task_state(projection);
  ema.task_state().front().second.fill_(0.25);
  timm::CheckpointParts parts{*model, *optimizer, &ema};
  parts.task_state = projection;
  timm::save_checkpoint(dir.path(), "last", parts, state_at(3, 1.0));
  // The same run before the EMA followed the task state.
  timm::ModelEma model_only_ema(std::make_shared<LinearNetImpl>(), *model, {});
  timm::CheckpointParts older{*model, *optimizer, &model_only_ema};
  older.task_state = projection;
  timm::save_checkpoint(dir.path(), "older", older, state_at(3, 1.0));

  // Resumed as the training set-up does: the EMA follows the new run's
  // projection (zeros) before the checkpoint is read.
  auto resume_ema_of = [&](const std::string& stem) {
    auto restored = std::make_shared<LinearNetImpl>();
    const timm::NamedTensors live = {{"projection.weight", at::zeros({4, 3})}};
    auto restored_ema =
        std::make_unique<timm::ModelEma>(std::make_shared<LinearNetImpl>(), *restored, timm::ModelEmaOptions{});
    restored_ema->follow_task_state(live);
    timm::ResumeTargets targets{*restored};
    targets.ema = restored_ema.get();
    targets.load_task_state = [&](const timm::NamedTensors& state) { live.front().second.copy_(state.front().second); };
    timm::resume_checkpoint(dir / (stem + ".state.pt"), targets);
    CHECK(at::equal(live.front().second, projection.front().second));
    return restored_ema->task_state().front().second.clone();
  };
  CHECK(at::equal(resume_ema_of("last"), at::full({4, 3}, 0.25)));
  CHECK(at::equal(resume_ema_of("older"), at::full({4, 3}, 0.5)));
}

namespace {

// The draws after resuming `dir`/last as `rank` of `world_size`, from a
// generator seeded 99 before (the state a rank without a saved one keeps).
at::Tensor draws_after_resume(const fs::path& dir, torch::nn::Module& model, int rank, int world_size) {
  at::manual_seed(99);
  timm::ResumeTargets targets{model};
  targets.rank = rank;
  targets.world_size = world_size;
  timm::resume_checkpoint(dir / "last", targets);
  return at::rand({4});
}

at::Tensor draws_after_seed(uint64_t seed) {
  at::manual_seed(seed);
  return at::rand({4});
}

}  // namespace

TEST_CASE("each rank resumes its own CPU RNG state; another world size restores the states the checkpoint holds") {
  timm::test::TempDir dir;
  auto model = std::make_shared<LinearNetImpl>();
  auto optimizer = make_optimizer(*model);
  // Two ranks' states, as a distributed run gathers them (seed + rank).
  timm::CheckpointParts parts{*model, *optimizer};
  for (uint64_t seed : {5, 6}) {
    at::manual_seed(seed);
    parts.rng_states.cpu.push_back(timm::cpu_rng_state());
  }
  timm::save_checkpoint(dir.path(), "last", parts, state_at(0, 1.0));
  CHECK(at::equal(draws_after_resume(dir.path(), *model, 0, 2), draws_after_seed(5)));
  // Rank 1 gets its own state back, not rank 0's (what every rank restored before).
  CHECK(at::equal(draws_after_resume(dir.path(), *model, 1, 2), draws_after_seed(6)));
  // A world of 3: ranks 0 and 1 get theirs, rank 2 keeps its own.
  CHECK(at::equal(draws_after_resume(dir.path(), *model, 1, 3), draws_after_seed(6)));
  CHECK(at::equal(draws_after_resume(dir.path(), *model, 2, 3), draws_after_seed(99)));
  // A single process restores rank 0's.
  CHECK(at::equal(draws_after_resume(dir.path(), *model, 0, 1), draws_after_seed(5)));
}

TEST_CASE("a checkpoint with rank 0's RNG state only (rng_cpu) resumes: rank 0 restores it, others keep theirs") {
  timm::test::TempDir dir;
  auto model = std::make_shared<LinearNetImpl>();
  // The old state file: no rng_world_size, rank 0's state as rng_cpu.
  timm::write_safetensors(dir / "last.safetensors", timm::state_dict(*model), {{"checkpoint_id", "old"}});
  torch::serialize::OutputArchive archive;
  archive.write("epoch", c10::IValue(int64_t{2}));
  archive.write("checkpoint_id", c10::IValue(std::string("old")));
  at::manual_seed(5);
  archive.write("rng_cpu", timm::cpu_rng_state());
  archive.save_to((dir / "last.state.pt").string());
  CHECK(at::equal(draws_after_resume(dir.path(), *model, 0, 1), draws_after_seed(5)));
  CHECK(at::equal(draws_after_resume(dir.path(), *model, 0, 2), draws_after_seed(5)));
  CHECK(at::equal(draws_after_resume(dir.path(), *model, 1, 2), draws_after_seed(99)));
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

namespace {

std::string file_content(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::ostringstream content;
  content << in.rdbuf();
  return content.str();
}

std::set<std::string> file_names(const fs::path& dir) {
  std::set<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir)) names.insert(entry.path().filename().string());
  return names;
}

// Saves `last` of `epoch` (weights filled with the epoch) in a child process
// whose files may not grow past `limit` bytes. With SIGXFSZ ignored, write()
// then fails with EFBIG, as it fails with ENOSPC on a full disk. Returns what
// the child saw: "saved", "Error: <message>" or "other: <message>".
std::string save_with_file_size_limit(const fs::path& dir, torch::nn::Module& model, timm::Optimizer& optimizer,
                                      int64_t epoch, rlim_t limit) {
  at::set_num_threads(1);  // fork() below: no worker threads to lose
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    // _exit: the child must not run the parent's destructors or return into
    // doctest.
    close(fds[0]);
    std::string outcome = "saved";
    try {
      std::signal(SIGXFSZ, SIG_IGN);
      const rlimit file_size{limit, limit};
      if (setrlimit(RLIMIT_FSIZE, &file_size) != 0) throw std::runtime_error("setrlimit failed");
      fill(model, static_cast<double>(epoch));
      timm::save_checkpoint(dir, "last", {model, optimizer}, state_at(epoch, 0.0));
    } catch (const timm::Error& e) {
      outcome = std::string("Error: ") + e.what();
    } catch (const std::exception& e) {
      outcome = std::string("other: ") + e.what();
    }
    [[maybe_unused]] const ssize_t written = write(fds[1], outcome.data(), outcome.size());
    _exit(0);
  }
  close(fds[1]);
  std::string outcome;
  pollfd pipe_end{fds[0], POLLIN, 0};
  char buffer[4096];
  while (poll(&pipe_end, 1, /*timeout ms=*/120000) > 0) {
    const ssize_t n = read(fds[0], buffer, sizeof buffer);
    if (n <= 0) break;
    outcome.append(buffer, static_cast<std::size_t>(n));
  }
  close(fds[0]);
  kill(child, SIGKILL);  // ends a hung child; a no-op for one that is done
  int status = 0;
  waitpid(child, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    outcome += " (the child died: status " + std::to_string(status) + ")";
  return outcome;
}

}  // namespace

TEST_CASE("a save on a full disk fails naming the file and the reason, and leaves the previous checkpoint") {
  // Weights much larger than the state (no momentum yet), so that a limit can
  // fall between the two files' sizes.
  constexpr int64_t kInFeatures = 1024;
  auto model = std::make_shared<LinearNetImpl>(kInFeatures);
  auto optimizer = make_optimizer(*model);
  std::uintmax_t state_size = 0;
  std::uintmax_t weights_size = 0;
  {
    timm::test::TempDir scratch;
    timm::save_checkpoint(scratch.path(), "last", {*model, *optimizer}, state_at(0, 0.0));
    state_size = fs::file_size(scratch / "last.state.pt");
    weights_size = fs::file_size(scratch / "last.safetensors");
  }
  REQUIRE_MESSAGE(state_size * 2 < weights_size, "state " << state_size << " B, weights " << weights_size << " B");
  const std::string too_large = std::strerror(EFBIG);

  timm::test::TempDir dir;
  fill(*model, 0.5);
  timm::save_checkpoint(dir.path(), "last", {*model, *optimizer}, state_at(0, 0.0));
  const std::string state_before = file_content(dir / "last.state.pt");
  const std::string weights_before = file_content(dir / "last.safetensors");
  const std::set<std::string> files_before = file_names(dir.path());

  struct Case {
    const char* step;
    rlim_t limit;
    std::string message_start;
    std::string message_end;
  };
  const std::vector<Case> cases = {
      {"the state, the first step", state_size / 2,
       "Error: cannot write training state file '" + (dir / "last.state.pt").string() + ".",
       "': write failed: " + too_large},
      {"the weights, the second step", (state_size + weights_size) / 2,
       "Error: cannot write safetensors file '" + (dir / "last.safetensors").string() + "'",
       "': write failed: " + too_large},
  };
  for (const auto& c : cases) {
    CAPTURE(c.step);
    CAPTURE(c.limit);
    const std::string outcome = save_with_file_size_limit(dir.path(), *model, *optimizer, 1, c.limit);
    CAPTURE(outcome);
    CHECK(outcome.rfind(c.message_start, 0) == 0);
    CHECK(outcome.ends_with(c.message_end));
    // Nothing half-written, no temporary or pending file left behind.
    CHECK(file_names(dir.path()) == files_before);
    CHECK(file_content(dir / "last.state.pt") == state_before);
    CHECK(file_content(dir / "last.safetensors") == weights_before);
    auto restored = std::make_shared<LinearNetImpl>(kInFeatures);
    auto restored_optimizer = make_optimizer(*restored);
    int64_t start = -1;
    REQUIRE_NOTHROW(start = timm::resume_checkpoint(dir / "last", {*restored, restored_optimizer.get()}));
    CHECK(start == 1);
    CHECK(at::equal(restored->fc->weight, at::full_like(restored->fc->weight, 0.5)));
  }
  // With room again, the next save goes through.
  CHECK(save_with_file_size_limit(dir.path(), *model, *optimizer, 1, RLIM_INFINITY) == "saved");
  auto restored = std::make_shared<LinearNetImpl>(kInFeatures);
  CHECK(timm::resume_checkpoint(dir / "last", {*restored}) == 2);
  CHECK(restored->fc->weight.flatten()[0].item<double>() == 1.0);
  CHECK(file_names(dir.path()) == files_before);
}

}  // namespace test_checkpoint
