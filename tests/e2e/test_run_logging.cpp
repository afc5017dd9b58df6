// Run logging beyond summary.csv, end to end: timm-run --log-tensorboard
// writes an event file that tensorboard's own reader reads, whose epoch
// scalars are summary.csv's columns; on a terminal (forced here with
// TIMM_PROGRESS=1) the "Train:" lines become one status line redrawn in
// place, and piped output keeps timm's lines.
#include <algorithm>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "e2e_support.hpp"
#include "test_support.hpp"

#include <doctest/doctest.h>

namespace test_run_logging {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// A tiny run: 2 updates per epoch, one log line each (--log-interval 1).
std::vector<std::string> tiny_run(const fs::path& out, int epochs, const std::vector<std::string>& extra = {}) {
  std::vector<std::string> args = {(timm::test::bin_dir() / "timm-run").string(),
                                   "--model",
                                   "resnet18",
                                   "--epochs",
                                   std::to_string(epochs),
                                   "--train-num-samples",
                                   "64",
                                   "--val-num-samples",
                                   "64",
                                   "-b",
                                   "32",
                                   "--lr",
                                   "0.05",
                                   "--warmup-epochs",
                                   "0",
                                   "-j",
                                   "1",
                                   "--output",
                                   out.string(),
                                   "--experiment",
                                   "run",
                                   "--log-interval",
                                   "1"};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

timm::test::CommandResult train(const std::vector<std::string>& args, const std::vector<std::string>& env = {}) {
  return timm::test::train_successfully(args, env, std::chrono::seconds(600));
}

std::vector<std::string> split(const std::string& line, char sep) {
  std::vector<std::string> parts;
  std::stringstream in(line);
  std::string part;
  while (std::getline(in, part, sep)) parts.push_back(part);
  return parts;
}

}  // namespace

TEST_CASE("--log-tensorboard writes an event file whose epoch scalars are summary.csv's") {
  timm::test::TempDir tmp;
  const auto run = train(tiny_run(tmp.path(), 2, {"--log-tensorboard"}));
  const fs::path dir = tmp / "run";

  // Piped output: timm's lines, unchanged, and no status line.
  CHECK(run.output.find("Train: 0 [   0/2 ( 50%)]  Loss: ") != std::string::npos);
  CHECK(run.output.find("Train: 1 [   1/2 (100%)]  Loss: ") != std::string::npos);
  CHECK(run.output.find('\r') == std::string::npos);

  const std::string out = timm::test::run_oracle("tensorboard_oracle.py", {"scalars", dir.string()});
  const std::size_t at = out.rfind("SCALARS ");
  REQUIRE_MESSAGE(at != std::string::npos, out);
  const json read = json::parse(out.substr(at + 8, out.find('\n', at) - at - 8));
  REQUIRE(read["files"].size() == 1);
  CHECK(read["files"][0].get<std::string>().rfind("events.out.tfevents.", 0) == 0);
  CHECK(read["file_version"].get<double>() == 2.0);
  const json& scalars = read["scalars"];

  // Per epoch: summary.csv's columns as epoch/<column> at step = epoch,
  // equal to the CSV's values in float32.
  std::stringstream csv(timm::test::read_file(dir / "summary.csv"));
  std::string line;
  REQUIRE(std::getline(csv, line));
  if (!line.empty() && line.back() == '\r') line.pop_back();
  const std::vector<std::string> header = split(line, ',');
  REQUIRE(header == std::vector<std::string>{"epoch", "train_loss", "eval_loss", "eval_top1", "eval_top5", "lr"});
  int rows = 0;
  while (std::getline(csv, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    const std::vector<std::string> cells = split(line, ',');
    REQUIRE(cells.size() == header.size());
    const int64_t epoch = std::stoll(cells[0]);
    CHECK(epoch == rows);
    for (std::size_t c = 1; c < header.size(); ++c) {
      const std::string tag = "epoch/" + header[c];
      INFO(tag << " at epoch " << epoch);
      REQUIRE(scalars.contains(tag));
      const json& points = scalars[tag];
      REQUIRE(points.size() == 2);
      CHECK(points[rows][0].get<int64_t>() == epoch);
      CHECK(static_cast<float>(points[rows][1].get<double>()) == static_cast<float>(std::stod(cells[c])));
    }
    ++rows;
  }
  CHECK(rows == 2);

  // Per logged step (every update here): step = the updates so far.
  for (const char* tag : {"train/loss", "train/loss_avg", "train/lr", "train/images_per_sec"}) {
    INFO(tag);
    REQUIRE(scalars.contains(tag));
    const json& points = scalars[tag];
    REQUIRE(points.size() == 4);
    for (int i = 0; i < 4; ++i) CHECK(points[i][0].get<int64_t>() == i + 1);
  }
  // The epoch's last update's running mean is the epoch's train loss (one process).
  CHECK(scalars["train/loss_avg"][1][1] == scalars["epoch/train_loss"][0][1]);
  CHECK(scalars["train/images_per_sec"][0][1].get<double>() > 0.0);
}

TEST_CASE("a terminal gets one status line per epoch instead of the Train: lines") {
  timm::test::TempDir tmp;
  const auto run = train(tiny_run(tmp.path(), 1), {"TIMM_PROGRESS=1"});
  CHECK(run.output.find("Train: 0 [   0/2 (") == std::string::npos);
  CHECK(run.output.find("\rTrain: 0 [0/2  50%]  Loss: ") != std::string::npos);
  CHECK(run.output.find("\rTrain: 0 [1/2 100%]  Loss: ") != std::string::npos);
  CHECK(run.output.find(" img/s  ETA 0:00\033[K\n") != std::string::npos);
  // The validation lines follow on their own line.
  CHECK(run.output.find("\nTest: [   0/1]") != std::string::npos);
  bool any_event_file = false;
  for (const auto& entry : fs::directory_iterator(tmp / "run")) {
    any_event_file |= entry.path().filename().string().find("tfevents") != std::string::npos;
  }
  CHECK_FALSE(any_event_file);  // only with --log-tensorboard
}

}  // namespace test_run_logging
