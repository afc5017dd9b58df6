// Fail-fast and fault handling of distributed timm-run, with real processes
// (Gloo on loopback, torchrun's variables set by the test, bounded timeouts):
// ranks that loaded different plugins or got different flags stop at start-up
// naming the rank; a killed or stalled rank makes the others exit non-zero
// within --dist-timeout naming it; SIGTERM stops every rank.
#include <chrono>
#include <filesystem>
#include <future>

#include "dist_support.hpp"
#include "test_support.hpp"

#include <doctest/doctest.h>

namespace {

namespace fs = std::filesystem;
using timm::test::CommandResult;

std::string timm_run() { return (timm::test::bin_dir() / "timm-run").string(); }

// A short Fashion-MNIST run on the CPU: long enough (about 60 steps per rank)
// to be stopped in the middle.
std::vector<std::string> run_args(const fs::path& out, int64_t timeout_s) {
  return {"--model",
          "resnet18",
          "--epochs",
          "1",
          "--train-num-samples",
          "2000",
          "--val-num-samples",
          "100",
          "-b",
          "16",
          "--lr",
          "0.05",
          "--device",
          "cpu",
          "-j",
          "1",
          "--log-interval",
          "1",
          "--dist-timeout",
          std::to_string(timeout_s),
          "--output",
          out.string(),
          "--experiment",
          "x"};
}

std::string shell_words(const std::vector<std::string>& words) {
  std::string line;
  for (const auto& w : words) line += "'" + w + "' ";
  return line;
}

// Both ranks at once, each with its own extra variables and flags.
std::vector<CommandResult> run_pair(const std::vector<std::vector<std::string>>& env,
                                    const std::vector<std::vector<std::string>>& args) {
  const int port = timm::test::free_port();
  std::vector<std::future<CommandResult>> running;
  for (int r = 0; r < 2; ++r) {
    std::vector<std::string> argv{timm_run()};
    argv.insert(argv.end(), args[r].begin(), args[r].end());
    auto full_env = timm::test::rank_env(r, 2, port);
    full_env.insert(full_env.end(), env[r].begin(), env[r].end());
    running.push_back(std::async(std::launch::async, [argv, full_env] {
      return timm::test::run_command(argv, std::chrono::seconds(120), full_env);
    }));
  }
  return {running[0].get(), running[1].get()};
}

// Starts both ranks in a shell, waits until rank 0 logged training step
// `step`, then does `action` to rank 1 (its pid is $p1); prints the seconds
// rank 0 took to exit after that, and rank 0's exit code.
CommandResult run_and_disturb(const fs::path& dir, int64_t timeout_s, const std::string& action) {
  const int port = timm::test::free_port();
  const auto args = shell_words(run_args(dir / "out", timeout_s));
  const std::string script =
      timm::test::env_words(timm::test::rank_env(0, 2, port)) + "'" + timm_run() + "' " + args + " > '" +
      (dir / "r0.log").string() + "' 2>&1 & p0=$!\n" + timm::test::env_words(timm::test::rank_env(1, 2, port)) + "'" +
      timm_run() + "' " + args + " > '" + (dir / "r1.log").string() + "' 2>&1 & p1=$!\n" +
      "for i in $(seq 600); do grep -q 'Train: 0 \\[   5/' '" + (dir / "r0.log").string() +
      "' && break; kill -0 $p0 2>/dev/null || break; sleep 0.1; done\n" + action + "\nstart=$(date +%s.%N)\n" +
      "wait $p0; rc=$?\nend=$(date +%s.%N)\n" + "kill -9 $p1 2>/dev/null; wait $p1 2>/dev/null\n" +
      "echo \"rank0_exit=$rc seconds=$(echo \"$end - $start\" | bc)\"\n" + "cat '" + (dir / "r0.log").string() + "'\n";
  return timm::test::run_command({"bash", "-c", script}, std::chrono::seconds(180));
}

double seconds_in(const std::string& output) {
  const auto at = output.find("seconds=");
  return at == std::string::npos ? -1.0 : std::stod(output.substr(at + 8));
}

}  // namespace

TEST_CASE("a rank that loaded a different plugin set stops every rank at start-up, naming it") {
  timm::test::TempDir tmp;
  const std::string extra_plugins = (timm::test::fixture_dir() / "fixture_good").string();
  const auto args = run_args(tmp / "out", 30);
  const auto results = run_pair({{}, {"TIMM_PLUGIN_PATH=" + extra_plugins}}, {args, args});
  for (const auto& r : results) {
    CHECK(r.exit_code == 1);
    CHECK_MESSAGE(
        r.output.find("rank 1 does not run the same job as rank 0: its loaded plugins differ") != std::string::npos,
        r.output);
    CHECK(r.output.find("rank 1 has 'plugin ") != std::string::npos);
    CHECK(r.output.find("Train: 0") == std::string::npos);  // failed before training
  }
}

TEST_CASE("a rank with different flags stops every rank at start-up, naming the flag") {
  timm::test::TempDir tmp;
  auto args0 = run_args(tmp / "out", 30);
  auto args1 = args0;
  args1.insert(args1.end(), {"--weight-decay", "0.001"});
  const auto results = run_pair({{}, {}}, {args0, args1});
  for (const auto& r : results) {
    CHECK(r.exit_code == 1);
    CHECK_MESSAGE(r.output.find("its effective config differ") != std::string::npos, r.output);
    CHECK(r.output.find("rank 1 has 'weight_decay = 0.001'") != std::string::npos);
  }
}

TEST_CASE("a killed rank: the other exits non-zero at once, naming the rank and the collective") {
  timm::test::TempDir tmp;
  const auto r = run_and_disturb(tmp.path(), 20, "kill -9 $p1");
  MESSAGE(r.output.substr(r.output.size() > 3000 ? r.output.size() - 3000 : 0));
  CHECK(r.output.find("rank0_exit=1 ") != std::string::npos);
  CHECK(r.output.find("rank 1 stopped responding") != std::string::npos);
  CHECK(r.output.find("rank 0: ") != std::string::npos);
  CHECK(r.output.find(" failed: ") != std::string::npos);
  const double seconds = seconds_in(r.output);
  CHECK(seconds >= 0.0);
  CHECK(seconds < 20.0);  // well within --dist-timeout: the closed connection is seen at once
}

TEST_CASE("a stalled rank (SIGSTOP): the other exits non-zero after --dist-timeout, naming it") {
  timm::test::TempDir tmp;
  const auto r = run_and_disturb(tmp.path(), 8, "kill -STOP $p1");
  MESSAGE(r.output.substr(r.output.size() > 3000 ? r.output.size() - 3000 : 0));
  CHECK(r.output.find("rank0_exit=1 ") != std::string::npos);
  CHECK(r.output.find("rank 1 stopped responding") != std::string::npos);
  const double seconds = seconds_in(r.output);
  CHECK(seconds >= 0.0);
  CHECK(seconds < 8.0 + 30.0);  // the timeout plus the diagnosis, never a hang
}

TEST_CASE("SIGTERM to every rank stops them cleanly") {
  timm::test::TempDir tmp;
  const auto r = run_and_disturb(tmp.path(), 20, "kill -TERM $p0 $p1");
  MESSAGE(r.output.substr(r.output.size() > 2000 ? r.output.size() - 2000 : 0));
  CHECK(r.output.find("rank0_exit=143 ") != std::string::npos);
  CHECK(r.output.find("stopped by SIGTERM") != std::string::npos);
  CHECK(seconds_in(r.output) < 20.0);
}
