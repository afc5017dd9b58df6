// timm-run resumed from a --recovery-interval checkpoint continues that
// checkpoint's epoch at its next update (timm's train.py starts the next
// epoch and loses the rest of it), on a small Fashion-MNIST subset with EMA,
// drop path, gradient accumulation, clipping and a per-update cosine
// schedule with warmup: the resumed run skips the batches already trained,
// logs the losses and LRs of the straight run at each update after the
// resume, and ends with its weights and summary.csv. A recovery checkpoint
// written at the epoch's last update goes on to the epoch's evaluation; one
// without a position (written before positions were saved) resumes at the
// next epoch, as before.
#include <chrono>
#include <filesystem>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <torch/serialize/archive.h>

#include "e2e_support.hpp"
#include "test_support.hpp"
#include "timm/io/safetensors.hpp"

// Last: c10/util/Logging.h defines a CHECK macro that doctest must override.
#include <doctest/doctest.h>

namespace test_recovery_resume {

namespace fs = std::filesystem;

namespace {

// Weights of a straight and a resumed run agree to this (absolute): both are
// the same float32 computation on one thread, so in practice bit for bit.
constexpr double kWeightsAtol = 1e-6;

// 256 samples in batches of 16, 3 batches per update: 6 updates per epoch
// (the last of one batch); a recovery checkpoint after updates 1, 3 and 5 of
// each epoch; a Train line at every update.
std::vector<std::string> run_args(const fs::path& out, const std::string& experiment, int epochs,
                                  const std::vector<std::string>& extra) {
  return timm::test::small_run_args(out, experiment, epochs,
                                    timm::test::plus({"-b", "16", "--grad-accum-steps", "3", "--sched-on-updates",
                                                      "--drop-path", "0.1", "--clip-grad", "2.0",
                                                      "--recovery-interval", "2", "--log-interval", "1"},
                                                     extra));
}

const std::vector<std::string> kEma = {"--model-ema", "--model-ema-decay", "0.9"};

using timm::test::plus;

timm::test::CommandResult train(const std::vector<std::string>& args) { return timm::test::train_successfully(args); }

bool has(const std::string& output, const std::string& text) { return output.find(text) != std::string::npos; }

// What a Train line says of an update: the loss, the epoch's running loss
// and the LR, as logged (3 and 4 significant digits).
struct Logged {
  std::string loss;
  std::string lr;
  bool operator==(const Logged&) const = default;
};

// The Train lines of a run by "<epoch>/<update>".
std::map<std::string, Logged> train_lines(const std::string& output) {
  const std::regex line(R"(Train: (\d+) \[\s*(\d+)/\d+ \(\s*\d+%\)\]  Loss: (\S+ \(\S+\)).*  LR: (\S+))");
  std::map<std::string, Logged> lines;
  for (auto it = std::sregex_iterator(output.begin(), output.end(), line); it != std::sregex_iterator(); ++it) {
    const std::smatch& match = *it;
    lines[match[1].str() + "/" + match[2].str()] = Logged{match[3].str(), match[4].str()};
  }
  return lines;
}

std::string keys_of(const std::map<std::string, Logged>& lines) {
  std::string keys;
  for (const auto& [key, logged] : lines) {
    if (!keys.empty()) keys += ' ';
    keys += key;
  }
  return keys;
}

std::string last_line(const std::string& text) {
  const auto end = text.find_last_not_of("\r\n");
  const auto start = text.rfind('\n', end);
  return text.substr(start + 1, end - start);
}

// Copies checkpoint <from_stem> to <to_stem>, its files dated a minute ahead,
// so that --auto-resume takes it as the newest.
void copy_as_newest(const fs::path& from_stem, const fs::path& to_stem) {
  for (const std::string ext : {".safetensors", ".state.pt"}) {
    const fs::path to = to_stem.string() + ext;
    fs::copy_file(from_stem.string() + ext, to, fs::copy_options::overwrite_existing);
    fs::last_write_time(to, fs::file_time_type::clock::now() + std::chrono::minutes(1));
  }
}

// A recovery checkpoint as written before positions were saved, made from
// <from_stem>: its weights, and a state file with its epoch, checkpoint id
// and CPU RNG state but no epoch_position (nor optimizer or EMA: resume it
// with --no-resume-opt and no --model-ema).
void write_old_style(const fs::path& from_stem, const fs::path& to_stem) {
  fs::copy_file(from_stem.string() + ".safetensors", to_stem.string() + ".safetensors");
  const timm::SafetensorsFile weights = timm::read_safetensors_file(from_stem.string() + ".safetensors");
  torch::serialize::InputArchive saved;
  saved.load_from(from_stem.string() + ".state.pt");
  torch::serialize::InputArchive position;
  REQUIRE_MESSAGE(saved.try_read("epoch_position", position), "the new recovery checkpoint holds its position");
  c10::IValue epoch;
  saved.read("epoch", epoch);
  at::Tensor rng;
  saved.read("rng_cpu", rng);
  torch::serialize::OutputArchive old;
  old.write("epoch", epoch);
  old.write("checkpoint_id", c10::IValue(weights.metadata.at("checkpoint_id")));
  old.write("rng_cpu", rng);
  old.save_to(to_stem.string() + ".state.pt");
}

}  // namespace

TEST_CASE(
    "a run resumed from a recovery checkpoint continues its epoch: the losses, LRs and weights of a straight run") {
  timm::test::TempDir tmp;
  const auto straight = train(run_args(tmp.path(), "straight", 2, kEma));
  const auto straight_lines = train_lines(straight.output);
  REQUIRE_MESSAGE(straight_lines.size() == 12, keys_of(straight_lines));
  // The two newest recovery checkpoints are kept: after updates 3 and 5 of epoch 1.
  REQUIRE(fs::exists(tmp / "straight" / "recovery-1-3.state.pt"));
  REQUIRE(fs::exists(tmp / "straight" / "recovery-1-5.state.pt"));
  CHECK_FALSE(fs::exists(tmp / "straight" / "recovery-1-1.safetensors"));
  // The schedule moves at every update, so a resume at the wrong update
  // count would log other LRs.
  CHECK(straight_lines.at("1/4").lr != straight_lines.at("1/3").lr);
  CHECK(straight_lines.at("1/5").lr != straight_lines.at("1/4").lr);

  {
    INFO("--auto-resume after a kill that followed recovery-1-3: epoch 1 continues at update 4");
    // The killed run: epoch 0 done, then epoch 1 up to recovery-1-3, its
    // newest file. Training is deterministic (the same seed repeats a run
    // bit for bit), so the straight run's recovery-1-3 is the one the killed
    // run wrote.
    train(run_args(tmp.path(), "killed", 2, plus(kEma, {"--stop-after-epochs", "1"})));
    copy_as_newest(tmp / "straight" / "recovery-1-3", tmp / "killed" / "recovery-1-3");
    const auto resumed = train(run_args(tmp.path(), "killed", 2, plus(kEma, {"--auto-resume"})));
    CHECK(has(resumed.output, "recovery-1-3.safetensors' (epoch 1)"));
    CHECK(has(resumed.output,
              "Resuming epoch 1 at update 4 of 6: skipping the 12 batches trained before the recovery checkpoint"));
    // Updates 4 and 5 only, each with the straight run's loss, running loss
    // (the epoch's meter continues) and LR.
    const auto resumed_lines = train_lines(resumed.output);
    CHECK_MESSAGE(keys_of(resumed_lines) == "1/4 1/5", keys_of(resumed_lines));
    for (const auto& [key, logged] : resumed_lines) {
      CAPTURE(key);
      REQUIRE(straight_lines.count(key) == 1);
      CHECK(logged.loss == straight_lines.at(key).loss);
      CHECK(logged.lr == straight_lines.at(key).lr);
    }
    // The resumed run's own recovery checkpoint after update 5 and its
    // final weights are the straight run's.
    const double recovery_diff = timm::test::max_weight_diff(tmp / "straight" / "recovery-1-5.safetensors",
                                                             tmp / "killed" / "recovery-1-5.safetensors");
    const double diff =
        timm::test::max_weight_diff(tmp / "straight" / "last.safetensors", tmp / "killed" / "last.safetensors");
    MESSAGE("max |straight - resumed| weight difference: " << diff << " (at recovery-1-5: " << recovery_diff << ")");
    CHECK(recovery_diff <= kWeightsAtol);
    CHECK(diff <= kWeightsAtol);
    // Both epochs' rows (train loss, EMA metrics, lr) are the straight run's.
    CHECK(timm::test::read_file(tmp / "killed" / "summary.csv") ==
          timm::test::read_file(tmp / "straight" / "summary.csv"));
  }
  {
    INFO("--resume recovery-1-5, written at epoch 1's last update: no update left, the evaluation follows");
    const auto resumed = train(run_args(
        tmp.path(), "at-end", 2, plus(kEma, {"--resume", (tmp / "straight" / "recovery-1-5.safetensors").string()})));
    CHECK(has(resumed.output, "Resuming epoch 1 at update 6 of 6: its updates are done"));
    CHECK_MESSAGE(train_lines(resumed.output).empty(), resumed.output);
    CHECK(has(resumed.output, "Test (EMA): "));
    CHECK(timm::test::max_weight_diff(tmp / "straight" / "last.safetensors", tmp / "at-end" / "last.safetensors") <=
          kWeightsAtol);
    CHECK(last_line(timm::test::read_file(tmp / "at-end" / "summary.csv")) ==
          last_line(timm::test::read_file(tmp / "straight" / "summary.csv")));
  }
  {
    INFO("a recovery checkpoint without its position (an older timm-run's) resumes at the next epoch, as timm");
    fs::create_directories(tmp / "old-input");
    write_old_style(tmp / "straight" / "recovery-1-3", tmp / "old-input" / "recovery-1-3");
    const auto resumed =
        train(run_args(tmp.path(), "old", 3,
                       {"--no-resume-opt", "--resume", (tmp / "old-input" / "recovery-1-3.safetensors").string()}));
    CHECK(has(resumed.output, "recovery-1-3.safetensors' (epoch 1)"));
    CHECK_FALSE(has(resumed.output, "Resuming epoch"));
    const auto lines = train_lines(resumed.output);
    CHECK_MESSAGE(keys_of(lines) == "2/0 2/1 2/2 2/3 2/4 2/5", keys_of(lines));
  }
  {
    INFO("--start-epoch wins over a recovery checkpoint's position: that epoch from its beginning");
    const auto resumed = train(run_args(
        tmp.path(), "start-epoch", 2,
        plus(kEma, {"--start-epoch", "1", "--resume", (tmp / "straight" / "recovery-1-5.safetensors").string()})));
    CHECK(has(resumed.output, "--start-epoch 1 starts an epoch at its beginning"));
    CHECK_FALSE(has(resumed.output, "Resuming epoch"));
    const auto lines = train_lines(resumed.output);
    CHECK_MESSAGE(keys_of(lines) == "1/0 1/1 1/2 1/3 1/4 1/5", keys_of(lines));
  }
}

}  // namespace test_recovery_resume
