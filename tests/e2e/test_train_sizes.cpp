// timm-run with train.py's scheduled input sizes (--train-img-sizes) on a
// Fashion-MNIST subset: the schedule timm's ScheduledBatchSampler makes for
// the same seed and sample count (23 batches of 16, 8 and 4 for 200 samples
// and seed 42), train.py's log lines and lr from the policy-average batch
// size; a progressive schedule with fixed batches per epoch; bad
// combinations exit 2 naming the flag.
#include <doctest/doctest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "e2e_support.hpp"
#include "test_support.hpp"

namespace test_train_sizes {

namespace fs = std::filesystem;
using timm::test::run_command;

namespace {

std::string timm_run() { return (timm::test::bin_dir() / "timm-run").string(); }

std::vector<std::string> sized_run(const fs::path& out, std::vector<std::string> extra) {
  std::vector<std::string> args{
      timm_run(), "--model",  "resnet18",   "--train-num-samples", "200",  "--val-num-samples", "100", "-b", "16", "-j",
      "2",        "--output", out.string(), "--experiment",        "sizes"};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

bool has(const timm::test::CommandResult& r, const std::string& text) {
  return r.output.find(text) != std::string::npos;
}

}  // namespace

TEST_CASE("--train-img-sizes: timm's schedule of sizes and batch sizes") {
  const fs::path tmp = fs::temp_directory_path() / "timm_cpp_test_train_sizes";
  fs::remove_all(tmp);
  // timm: ScheduledBatchSampler(SequentialSampler(range(200)), [16, 8, 4],
  // seed=42) has 23 batches (7 x 16, 6 x 8, 10 x 4); average batch 28/3.
  const auto r =
      timm::test::train_successfully(sized_run(tmp / "constant", {"--epochs", "1", "--train-img-sizes", "24", "28",
                                                                  "32", "--train-batch-sizes", "16", "8", "4"}));
  CHECK(has(r, "Using scheduled training resolutions [24, 28, 32] with batch sizes (16, 8, 4)."));
  CHECK(has(r, "Scheduled loader has 23 batches/epoch using policy-average batch size 9.33."));
  CHECK(has(r, "effective global batch size (9.33333) with linear scaling."));
  CHECK(has(r, "Train: 0 [  22/23 (100%)]"));
  CHECK(has(r, "Train transform (24x24): "));
  CHECK(has(r, "Train transform (32x32): "));
  CHECK(!has(r, "Using progressive resolution schedule"));

  // Progressive over 2 epochs, 6 batches each, the loss scaled by batch size.
  const auto p = timm::test::train_successfully(sized_run(
      tmp / "progressive", {"--epochs", "2", "--train-img-sizes", "24", "28", "32", "--train-batch-sizes", "16", "8",
                            "4", "--train-size-schedule", "progressive", "--train-batches-per-epoch", "6",
                            "--variable-batch-loss-scale", "linear", "--train-size-schedule-spread", "0.5"}));
  CHECK(has(p, "Using progressive resolution schedule over 2 epochs with spread=0.5 and random_mix=0.1."));
  CHECK(has(p, "Scheduled loader has 6 batches/epoch"));
  CHECK(has(p, "Train: 0 [   5/6 (100%)]"));
  CHECK(has(p, "Train: 1 [   5/6 (100%)]"));
  fs::remove_all(tmp);
}

TEST_CASE("--train-img-sizes: bad combinations are usage errors naming the flag") {
  const fs::path tmp = fs::temp_directory_path() / "timm_cpp_test_train_sizes_bad";
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  const std::vector<Case> cases{
      {{"--train-batch-sizes", "16", "8"}, "--train-batch-sizes: only used with --train-img-sizes"},
      {{"--variable-batch-loss-scale", "sqrt"}, "--variable-batch-loss-scale: only used with --train-img-sizes"},
      {{"--train-img-sizes", "24", "28", "--train-batch-sizes", "16"},
       "--train-batch-sizes: 1 batch sizes for 2 --train-img-sizes"},
      {{"--train-img-sizes", "24", "28", "--train-size-probs", "1", "2", "3"},
       "--train-size-probs: 3 weights for 2 --train-img-sizes"},
      {{"--train-img-sizes", "24", "--train-size-schedule", "progressive"},
       "--train-size-schedule progressive: needs at least two --train-img-sizes choices"},
      {{"--train-img-sizes", "24", "28", "--train-size-schedule-spread", "0.3"},
       "--train-size-schedule-spread: only used by --train-size-schedule progressive"},
      {{"--train-img-sizes", "24", "28", "--aug-splits", "2"}, "--aug-splits: augmentation splits are not supported"},
      {{"--train-img-sizes", "24", "0"}, "--train-img-sizes [24, 0]: every size must be positive"},
      {{"--train-img-sizes", "24", "28", "--train-batch-sizes", "16", "0"}, "--train-batch-sizes 16 0: every"},
      {{"--train-img-sizes", "24", "28", "--train-size-probs", "0", "0"},
       "--train-size-probs: the weights must have a positive sum"},
      {{"--train-img-sizes", "24", "28", "--train-batch-sizes", "300", "400"},
       "--train-batch-sizes 300 400: no full scheduled batch fits the 200 samples"},
  };
  for (const Case& c : cases) {
    std::vector<std::string> extra{"--epochs", "1"};
    extra.insert(extra.end(), c.args.begin(), c.args.end());
    const auto r = run_command(sized_run(tmp, extra));
    INFO(r.output);
    CHECK(r.exit_code == 2);
    CHECK(has(r, c.message));
  }
  fs::remove_all(tmp);
}

}  // namespace test_train_sizes
