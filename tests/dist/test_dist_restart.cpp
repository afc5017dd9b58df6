// Restarts under torchrun: distributed_train.sh with --max-restarts 1 and
// timm-run --auto-resume. Rank 1 is killed (SIGKILL) in the middle of epoch
// 1; torchrun stops rank 0, starts both again, and every rank resumes from
// the checkpoint rank 0 chose (rank 1 has no output folder of its own). The
// job exits 0 with the weights of an uninterrupted run, bit for bit (same
// float32 computation, one thread per rank). The model draws drop path masks
// on every rank from its own CPU generator (seeded seed + rank), so the
// resume must give each rank its own RNG state back, not rank 0's.
// A second case kills rank 1 after a --recovery-interval checkpoint of epoch
// 1: the restarted job continues epoch 1 at the update after it (every rank
// skipping the same batches) and ends as the uninterrupted run, too.
#include <cstdint>

#include "dist_support.hpp"
#include "test_support.hpp"

#include <doctest/doctest.h>

namespace {

namespace fs = std::filesystem;

// 3 epochs of 6 steps per rank (192 samples, 2 ranks x 16).
std::vector<std::string> run_args(const fs::path& out) {
  return {
      "--model", "resnet18", "--epochs",       "3",          "--train-num-samples", "192", "--val-num-samples", "32",
      "-b",      "16",       "--lr",           "0.05",       "--warmup-epochs",     "0",   "--device",          "cpu",
      "-j",      "1",        "--log-interval", "1",          "--dist-timeout",      "60",  "--checkpoint-hist", "2",
      "--seed",  "5",        "--output",       out.string(), "--experiment",        "x",   "--drop-path",       "0.1"};
}

// distributed_train.sh 2 in the background; `watch` runs meanwhile ($pid is
// the launcher's, $log its output); prints "launcher_exit=N" then the log.
timm::test::CommandResult launch(const fs::path& dir, const std::string& launch_flags,
                                 const std::vector<std::string>& extra, const std::string& watch) {
  auto args = run_args(dir / "out");
  args.insert(args.end(), extra.begin(), extra.end());
  const std::string log = (dir / "launch.log").string();
  const std::string script =
      "log='" + log + "'\nTIMM_RUN='" + (timm::test::bin_dir() / "timm-run").string() + "' OMP_NUM_THREADS=1 '" +
      (timm::test::source_dir() / "distributed_train.sh").string() + "' 2 --master-port " +
      std::to_string(timm::test::free_port()) + " " + launch_flags + " -- " + timm::test::quoted_words(args) +
      " > \"$log\" 2>&1 & pid=$!\n" + watch + "\nwait $pid; rc=$?\n" +
      // No rank left behind, on any path (their command lines carry this folder).
      "for p in $(pgrep -x timm-run); do grep -q '" + dir.string() +
      "' /proc/$p/cmdline 2>/dev/null && kill -9 $p; done\n" + "echo \"launcher_exit=$rc\"\ncat \"$log\"\n";
  return timm::test::run_command({"bash", "-c", script}, std::chrono::seconds(400));
}

// Once `file` exists and rank 0 logged `logged` (a grep pattern), SIGKILL the
// process under `out` whose RANK is 1 (a watch script for launch()).
std::string kill_rank_1_after(const fs::path& out, const fs::path& file, const std::string& logged) {
  return "for i in $(seq 3000); do [ -e '" + file.string() + "' ] && grep -q '" + logged +
         "' \"$log\" && break; kill -0 $pid 2>/dev/null || break; sleep 0.1; done\n"
         "for p in $(pgrep -x timm-run); do grep -q '" +
         out.string() +
         "' /proc/$p/cmdline 2>/dev/null && tr '\\0' '\\n' < /proc/$p/environ | grep -qx RANK=1 && "
         "{ kill -9 $p; echo \"killed rank 1 ($p)\"; }; done\n";
}

// The tensor bytes of a .safetensors file (after its JSON header, which also
// carries a per-save checkpoint id): equal bytes, equal weights.
std::string tensor_bytes(const fs::path& file) {
  const std::string bytes = timm::test::read_file(file);
  REQUIRE(bytes.size() >= 8);
  uint64_t header = 0;
  for (int i = 7; i >= 0; --i) header = header << 8 | static_cast<unsigned char>(bytes[i]);
  REQUIRE(header <= bytes.size() - 8);
  return bytes.substr(8 + header);
}

// The restarted job ended as the straight one: both ranks' weight checksums
// equal the straight run's, last.safetensors holds the same tensor bytes, and
// summary.csv the same rows (each epoch once, those before the restart kept).
void check_ends_as_straight(const std::string& restarted_output, const std::string& straight_output,
                            const fs::path& restarted_out, const fs::path& straight_out) {
  const auto sums = timm::test::checksums(restarted_output);
  REQUIRE(sums.size() == 2);
  CHECK(sums.at(0) == sums.at(1));
  CHECK(timm::test::checksums(straight_output) == sums);
  const std::string a = tensor_bytes(straight_out / "x" / "last.safetensors");
  const std::string b = tensor_bytes(restarted_out / "x" / "last.safetensors");
  CHECK(a.size() == b.size());
  CHECK_MESSAGE(a == b, "the restarted run's last.safetensors differs from the uninterrupted run's");
  CHECK(timm::test::read_file(restarted_out / "x" / "summary.csv") ==
        timm::test::read_file(straight_out / "x" / "summary.csv"));
}

}  // namespace

TEST_CASE("torchrun --max-restarts 1: rank 1 killed mid-epoch, the job resumes and ends as an uninterrupted run") {
  timm::test::TempDir tmp;
  fs::create_directories(tmp / "straight");
  fs::create_directories(tmp / "restarted");
  const auto straight = launch(tmp / "straight", "", {}, "");
  MESSAGE(straight.output.substr(straight.output.size() > 2000 ? straight.output.size() - 2000 : 0));
  REQUIRE(straight.output.find("launcher_exit=0") != std::string::npos);

  // Once epoch 0's checkpoint exists and rank 0 logged step 2 of epoch 1,
  // SIGKILL the process whose RANK is 1.
  const fs::path out = tmp / "restarted" / "out";
  const std::string kill_rank_1 = kill_rank_1_after(out, out / "x" / "checkpoint-0.safetensors", "Train: 1 \\[   2/");
  const auto restarted = launch(tmp / "restarted", "--max-restarts 1", {"--auto-resume"}, kill_rank_1);
  MESSAGE(restarted.output.substr(restarted.output.size() > 6000 ? restarted.output.size() - 6000 : 0));
  CHECK(restarted.output.find("killed rank 1 (") != std::string::npos);
  CHECK(restarted.output.find("launcher_exit=0") != std::string::npos);
  // The second attempt resumed from epoch 0's end and trained epochs 1 and 2.
  CHECK(restarted.output.find("Loaded checkpoint '" + (out / "x" / "last.safetensors").string() + "' (epoch 0)") !=
        std::string::npos);
  const auto resumed_at = restarted.output.find("Loaded checkpoint");
  REQUIRE(resumed_at != std::string::npos);
  CHECK(restarted.output.find("Train: 0 [", resumed_at) == std::string::npos);
  CHECK(restarted.output.find("Train: 2 [   5/6", resumed_at) != std::string::npos);

  check_ends_as_straight(restarted.output, straight.output, out, tmp / "straight" / "out");
}

TEST_CASE("torchrun --max-restarts 1: rank 1 killed after a recovery checkpoint, the job continues its epoch") {
  timm::test::TempDir tmp;
  fs::create_directories(tmp / "straight");
  fs::create_directories(tmp / "restarted");
  // A recovery checkpoint after updates 1, 3 and 5 of each epoch's 6.
  const std::vector<std::string> recovery = {"--recovery-interval", "2"};
  const auto straight = launch(tmp / "straight", "", recovery, "");
  MESSAGE(straight.output.substr(straight.output.size() > 2000 ? straight.output.size() - 2000 : 0));
  REQUIRE(straight.output.find("launcher_exit=0") != std::string::npos);

  // recovery-1-1 is saved before rank 0 logs step 2 of epoch 1: the kill
  // follows it (and may follow recovery-1-3 on a slow machine); the newest
  // checkpoint is then a recovery checkpoint of epoch 1, not epoch 0's last.
  const fs::path out = tmp / "restarted" / "out";
  const std::string kill_rank_1 = kill_rank_1_after(out, out / "x" / "recovery-1-1.safetensors", "Train: 1 \\[   2/");
  std::vector<std::string> extra = recovery;
  extra.push_back("--auto-resume");
  const auto restarted = launch(tmp / "restarted", "--max-restarts 1", extra, kill_rank_1);
  MESSAGE(restarted.output.substr(restarted.output.size() > 6000 ? restarted.output.size() - 6000 : 0));
  CHECK(restarted.output.find("killed rank 1 (") != std::string::npos);
  CHECK(restarted.output.find("launcher_exit=0") != std::string::npos);
  // The second attempt continued epoch 1 after the recovery checkpoint's
  // update: no step of epoch 0 and none of epoch 1 before it again.
  const auto resumed_at = restarted.output.find("Loaded checkpoint '" + (out / "x" / "recovery-1-").string());
  REQUIRE(resumed_at != std::string::npos);
  CHECK(restarted.output.find("' (epoch 1)", resumed_at) != std::string::npos);
  CHECK(restarted.output.find("Resuming epoch 1 at update ", resumed_at) != std::string::npos);
  CHECK(restarted.output.find("Train: 0 [", resumed_at) == std::string::npos);
  CHECK(restarted.output.find("Train: 1 [   0/", resumed_at) == std::string::npos);
  CHECK(restarted.output.find("Train: 1 [   1/", resumed_at) == std::string::npos);
  CHECK(restarted.output.find("Train: 2 [   5/6", resumed_at) != std::string::npos);

  check_ends_as_straight(restarted.output, straight.output, out, tmp / "straight" / "out");
}
