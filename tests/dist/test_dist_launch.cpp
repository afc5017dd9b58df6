// Launching distributed timm-run as a user does: distributed_train.sh 2 on
// one machine, and two "nodes" in two network namespaces made by the test
// (a veth pair with private addresses), torchrun in each with --nnodes 2.
// Both end with identical weights on every rank (timm-run checks and logs a
// checksum per rank). The namespaces are removed on every exit path.
#include <unistd.h>

#include <algorithm>
#include <set>

#include <nlohmann/json.hpp>

#include "../e2e/e2e_support.hpp"
#include "dist_support.hpp"
#include "test_support.hpp"

#include <doctest/doctest.h>

namespace {

namespace fs = std::filesystem;

std::vector<std::string> short_run(const fs::path& out) {
  return {"--model",
          "resnet18",
          "--epochs",
          "1",
          "--train-num-samples",
          "1024",
          "--val-num-samples",
          "500",
          "-b",
          "32",
          "--lr",
          "0.1",
          "--warmup-epochs",
          "0",
          "--device",
          "cpu",
          "-j",
          "1",
          "--log-interval",
          "8",
          "--dist-timeout",
          "60",
          "--output",
          out.string(),
          "--experiment",
          "dist"};
}

}  // namespace

TEST_CASE("distributed_train.sh 2 trains Fashion-MNIST; rank 0 writes the outputs; weights agree") {
  timm::test::TempDir tmp;
  const int port = timm::test::free_port();
  std::vector<std::string> argv{(timm::test::source_dir() / "distributed_train.sh").string(), "2", "--master-port",
                                std::to_string(port), "--"};
  auto args = short_run(tmp / "out");
  // No --lr: train.py's rule scales --lr-base by the global batch 2 x 32.
  args.erase(std::find(args.begin(), args.end(), "--lr"), std::find(args.begin(), args.end(), "--lr") + 2);
  args.insert(args.end(), {"--lr-base", "0.4"});
  argv.insert(argv.end(), args.begin(), args.end());
  const auto r =
      timm::test::run_command(argv, std::chrono::seconds(400),
                              {"TIMM_RUN=" + (timm::test::bin_dir() / "timm-run").string(), "OMP_NUM_THREADS=1"});
  MESSAGE(r.output.substr(r.output.size() > 3000 ? r.output.size() - 3000 : 0));
  REQUIRE(r.exit_code == 0);
  CHECK(
      r.output.find("Training in distributed mode with multiple processes, 1 device per process.Process 1, total 2") !=
      std::string::npos);
  // 1024 samples / (2 ranks x 32) = 16 steps per rank.
  CHECK(r.output.find("Train: 0 [  15/16 (100%)]") != std::string::npos);
  CHECK(r.output.find("Learning rate (0.1) calculated from base learning rate (0.4) and effective global batch size "
                      "(64) with linear scaling.") != std::string::npos);
  // Rank 0 reports the evaluation of all 500 samples (each on one rank).
  // (16 steps of resnet18 are too few to assert learning; the DDP equivalence
  // test proves the maths.)
  CHECK(r.output.find("Test top-1: ") != std::string::npos);
  CHECK(r.output.find("(500 images)") != std::string::npos);  // each eval sample counted once
  const auto sums = timm::test::checksums(r.output);
  REQUIRE(sums.size() == 2);
  CHECK(sums.at(0) == sums.at(1));
  CHECK(fs::exists(tmp / "out" / "dist" / "summary.csv"));
  CHECK(fs::exists(tmp / "out" / "dist" / "last.safetensors"));
  // Only rank 0 printed the result and wrote files: one summary, one --result.
  const std::string out = r.output;
  CHECK(out.find("--result") == out.rfind("--result"));
}

TEST_CASE("distributed_train.sh 2 distils from a teacher checkpoint (feature, with a projection); weights agree") {
  timm::test::TempDir tmp;
  const std::string timm_run = (timm::test::bin_dir() / "timm-run").string();
  // The teacher: a resnet50 checkpoint of one step.
  const auto teacher = timm::test::run_command(
      {timm_run, "--model", "resnet50", "--epochs", "1", "--train-num-samples", "32", "--val-num-samples", "32", "-b",
       "32", "-j", "1", "--output", (tmp / "out").string(), "--experiment", "teacher"},
      std::chrono::seconds(300), {"OMP_NUM_THREADS=1"});
  REQUIRE_MESSAGE(teacher.exit_code == 0, teacher.output);
  const int port = timm::test::free_port();
  std::vector<std::string> argv{(timm::test::source_dir() / "distributed_train.sh").string(), "2", "--master-port",
                                std::to_string(port), "--"};
  auto args = short_run(tmp / "out");
  args.insert(args.end(), {"--kd-model-name", "resnet50", "--kd-distill-type", "feature", "--kd-pretrained-path",
                           (tmp / "out" / "teacher" / "last.safetensors").string(), "--train-num-samples", "256",
                           "--val-num-samples", "64"});
  argv.insert(argv.end(), args.begin(), args.end());
  const auto r =
      timm::test::run_command(argv, std::chrono::seconds(400), {"TIMM_RUN=" + timm_run, "OMP_NUM_THREADS=1"});
  MESSAGE(r.output.substr(r.output.size() > 3000 ? r.output.size() - 3000 : 0));
  REQUIRE(r.exit_code == 0);
  CHECK(r.output.find("FeatureDistillationTask: teacher='resnet50', task_weight=1.0, distill_weight=1.0, projection "
                      "512 -> 2048") != std::string::npos);
  // 256 samples / (2 ranks x 32) = 4 steps per rank.
  CHECK(r.output.find("Train: 0 [   3/4 (100%)]") != std::string::npos);
  const auto sums = timm::test::checksums(r.output);
  REQUIRE(sums.size() == 2);
  CHECK(sums.at(0) == sums.at(1));
}

TEST_CASE("distributed_train.sh 2 trains a NaFlexViT on NaFlex patch batches; weights agree; eval counts each once") {
  timm::test::TempDir tmp;
  const int port = timm::test::free_port();
  std::vector<std::string> argv{(timm::test::source_dir() / "distributed_train.sh").string(), "2", "--master-port",
                                std::to_string(port), "--"};
  auto args = short_run(tmp / "out");
  args.at(1) = "naflexvit_base_patch16_gap";
  args.insert(args.end(), {"--model-kwargs",
                           "embed_dim=64",
                           "depth=2",
                           "num_heads=2",
                           "--naflex-loader",
                           "--naflex-train-seq-lens",
                           "16",
                           "36",
                           "49",
                           "--naflex-max-seq-len",
                           "49",
                           "-b",
                           "16",
                           "--train-num-samples",
                           "300",
                           "--val-num-samples",
                           "101",
                           "--opt",
                           "adamw",
                           "--lr",
                           "0.001"});
  argv.insert(argv.end(), args.begin(), args.end());
  // timm's wrapper on each rank: 150 samples per rank, the same schedule on both.
  std::vector<int64_t> lens;
  for (int rank = 0; rank < 2; ++rank) {
    const nlohmann::json cases = nlohmann::json::array({{{"size", 300},
                                                         {"epochs", nlohmann::json::array()},
                                                         {"seq_lens", {16, 36, 49}},
                                                         {"max_tokens_per_batch", 16 * 49},
                                                         {"seed", 42},
                                                         {"distributed", true},
                                                         {"rank", rank},
                                                         {"world_size", 2}}});
    const auto out = nlohmann::json::parse(timm::test::run_oracle("naflex_sampler_oracle.py", {cases.dump()}));
    REQUIRE_FALSE(out[0].contains("error"));
    lens.push_back(out[0]["len"].get<int64_t>());
  }
  REQUIRE(lens[0] == lens[1]);
  const auto r =
      timm::test::run_command(argv, std::chrono::seconds(400),
                              {"TIMM_RUN=" + (timm::test::bin_dir() / "timm-run").string(), "OMP_NUM_THREADS=1"});
  MESSAGE(r.output.substr(r.output.size() > 3000 ? r.output.size() - 3000 : 0));
  REQUIRE(r.exit_code == 0);
  CHECK(r.output.find("Using NaFlex loader") != std::string::npos);
  const std::string last = std::to_string(lens[0] - 1) + "/" + std::to_string(lens[0]) + " (100%)]";
  CHECK(r.output.find(last) != std::string::npos);
  CHECK(r.output.find("(101 images)") != std::string::npos);  // 51 + 50, each sample on one rank
  const auto sums = timm::test::checksums(r.output);
  REQUIRE(sums.size() == 2);
  CHECK(sums.at(0) == sums.at(1));
}

TEST_CASE("two nodes in two network namespaces (torchrun --nnodes 2) end with identical weights") {
  REQUIRE_MESSAGE(geteuid() == 0, "this test makes network namespaces and needs root");
  timm::test::TempDir tmp;
  const std::string suffix = std::to_string(getpid() % 100000);
  const std::string subnet = "10.231." + std::to_string(getpid() % 250) + ".";
  const std::string ns_a = "timmA" + suffix, ns_b = "timmB" + suffix;
  const std::string veth_a = "tva" + suffix, veth_b = "tvb" + suffix;
  const std::string launcher = (timm::test::source_dir() / "distributed_train.sh").string();
  auto node = [&](const std::string& ns, int node_rank) {
    return "ip netns exec " + ns + " env TIMM_RUN='" + (timm::test::bin_dir() / "timm-run").string() +
           "' OMP_NUM_THREADS=1 timeout 300 '" + launcher + "' 1 --nnodes 2 --node-rank " + std::to_string(node_rank) +
           " --master-addr " + subnet + "1 --master-port 29500 -- " + timm::test::quoted_words(short_run(tmp / "out")) +
           " > '" + (tmp / ("node" + std::to_string(node_rank) + ".log")).string() + "' 2>&1";
  };
  const std::string script =
      "set -u\n"
      "cleanup() { for ns in " +
      ns_a + " " + ns_b +
      "; do ip netns pids $ns 2>/dev/null | xargs -r kill -9; "
      "ip netns del $ns 2>/dev/null; done; }\n"
      "trap cleanup EXIT\n"
      "set -e\n"
      "ip netns add " +
      ns_a + "\nip netns add " + ns_b +
      "\n"
      "ip link add " +
      veth_a + " type veth peer name " + veth_b +
      "\n"
      "ip link set " +
      veth_a + " netns " + ns_a + "\nip link set " + veth_b + " netns " + ns_b +
      "\n"
      "ip -n " +
      ns_a + " addr add " + subnet + "1/24 dev " + veth_a +
      "\n"
      "ip -n " +
      ns_b + " addr add " + subnet + "2/24 dev " + veth_b +
      "\n"
      "for ns in " +
      ns_a + " " + ns_b +
      "; do ip -n $ns link set lo up; done\n"
      "ip -n " +
      ns_a + " link set " + veth_a + " up\nip -n " + ns_b + " link set " + veth_b +
      " up\n"
      "set +e\n" +
      node(ns_a, 0) + " & pa=$!\n" + node(ns_b, 1) + " & pb=$!\n" +
      "wait $pa; ra=$?; wait $pb; rb=$?\n"
      "echo \"node0_exit=$ra node1_exit=$rb\"\n"
      "echo '--- node 0'; cat '" +
      (tmp / "node0.log").string() +
      "'\n"
      "echo '--- node 1'; cat '" +
      (tmp / "node1.log").string() + "'\n";
  const auto r = timm::test::run_command({"bash", "-c", script}, std::chrono::seconds(420));
  MESSAGE(r.output.substr(r.output.size() > 4000 ? r.output.size() - 4000 : 0));
  CHECK(r.output.find("node0_exit=0 node1_exit=0") != std::string::npos);
  const auto sums = timm::test::checksums(r.output);
  REQUIRE(sums.size() == 2);
  CHECK(sums.at(0) == sums.at(1));
  // Rank 1 ran in the other namespace and reached rank 0 over the veth pair.
  CHECK(r.output.find("Process 1, total 2") != std::string::npos);
  // The test removed what it made.
  const auto left = timm::test::run_command({"bash", "-c", "ip netns list; ip link show"});
  CHECK(left.output.find(ns_a) == std::string::npos);
  CHECK(left.output.find(ns_b) == std::string::npos);
  CHECK(left.output.find(veth_a) == std::string::npos);
}

TEST_CASE("Ctrl-C (SIGINT) on the launcher stops every rank") {
  timm::test::TempDir tmp;
  const int port = timm::test::free_port();
  auto args = short_run(tmp / "out");
  args.insert(args.end(), {"--log-interval", "1", "--epochs", "5"});
  const std::string log = (tmp / "launch.log").string();
  const std::string script = "TIMM_RUN='" + (timm::test::bin_dir() / "timm-run").string() + "' OMP_NUM_THREADS=1 '" +
                             (timm::test::source_dir() / "distributed_train.sh").string() + "' 2 --master-port " +
                             std::to_string(port) + " -- " + timm::test::quoted_words(args) + " > '" + log +
                             "' 2>&1 & pid=$!\n" + "for i in $(seq 900); do grep -q 'Train: 0 \\[   3/' '" + log +
                             "' && break; sleep 0.1; done\n" +
                             "kill -INT $pid\nstart=$(date +%s.%N)\nwait $pid; rc=$?\nend=$(date +%s.%N)\n" +
                             // Any rank still alive? (Their command lines carry this test's own folder.)
                             "sleep 1; left=0; for p in $(pgrep -x timm-run); do grep -q '" + tmp.path().string() +
                             "' /proc/$p/cmdline 2>/dev/null && left=$((left + 1)); done\n" + "cat '" + log + "'\n" +
                             "echo \"launcher_exit=$rc left=$left seconds=$(echo \"$end - $start\" | bc)\"\n";
  const auto r = timm::test::run_command({"bash", "-c", script}, std::chrono::seconds(300));
  MESSAGE(r.output.substr(r.output.size() > 3000 ? r.output.size() - 3000 : 0));
  CHECK(r.output.find("launcher_exit=0 ") == std::string::npos);  // interrupted, not finished
  CHECK(r.output.find(" left=0 ") != std::string::npos);          // no rank left behind
  CHECK(r.output.find("stopped by SIG") != std::string::npos);    // the ranks stopped through their handler
  const auto at = r.output.find("seconds=");
  REQUIRE(at != std::string::npos);
  CHECK(std::stod(r.output.substr(at + 8)) < 30.0);
}
