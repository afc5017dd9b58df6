// timm-run end to end on WebDataset shards (--dataset wds/NAME): the trainer
// takes the epoch's length and order from the dataset's own sampler, as
// timm's loader does for its ReaderWds. The shards are wds_oracle.py's: 29
// training samples (5 classes) in five shards, a validation split of 12.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "e2e_support.hpp"
#include "test_support.hpp"

namespace fs = std::filesystem;

namespace {

std::vector<std::string> wds_run(const fs::path& shards, const fs::path& out, const std::vector<std::string>& extra) {
  std::vector<std::string> args = {(timm::test::bin_dir() / "timm-run").string(),
                                   "--dataset",
                                   "wds/ds",
                                   "--data-dir",
                                   shards.string(),
                                   "--model",
                                   "resnet18",
                                   "--num-classes",
                                   "5",
                                   "--img-size",
                                   "32",
                                   "-b",
                                   "4",
                                   "-j",
                                   "2",
                                   "--lr",
                                   "0.01",
                                   "--warmup-epochs",
                                   "0",
                                   "--output",
                                   out.string(),
                                   "--experiment",
                                   "wds"};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

}  // namespace

TEST_CASE("timm-run trains on wds/ shards with timm's epoch length; --epoch-repeats and --target-key apply") {
  timm::test::TempDir tmp;
  timm::test::run_oracle("wds_oracle.py", {tmp.path().string()}, std::chrono::seconds(300));
  const fs::path shards = tmp / "ds";

  // 2 loader workers, batch 4: each worker streams ceil(ceil(29 / 2) / 4) * 4
  // = 16 samples, so an epoch is 8 batches; the 12 validation samples are
  // evaluated once each.
  const auto plain = timm::test::train_successfully(wds_run(shards, tmp / "plain", {"--epochs", "2"}));
  CHECK(plain.output.find("Train: 0 [   7/8 (100%)]") != std::string::npos);
  CHECK(plain.output.find("Train: 1 [   7/8 (100%)]") != std::string::npos);
  CHECK(plain.output.find("Test: [   2/2]") != std::string::npos);
  const std::string summary = timm::test::read_file(tmp / "plain" / "wds" / "summary.csv");
  CHECK(std::count(summary.begin(), summary.end(), '\n') == 3);  // header + 2 epochs

  // --epoch-repeats 2: twice the samples per worker, 16 batches.
  const auto repeated =
      timm::test::train_successfully(wds_run(shards, tmp / "repeated", {"--epochs", "1", "--epoch-repeats", "2"}));
  CHECK(repeated.output.find("Train: 0 [  15/16 (100%)]") != std::string::npos);

  // Targets from the json sidecar's field.
  timm::test::train_successfully(wds_run(shards, tmp / "keyed", {"--epochs", "1", "--target-key", "label2"}));

  // A key the sidecars lack is a usage error naming it.
  const auto missing =
      timm::test::run_command(wds_run(shards, tmp / "missing", {"--epochs", "1", "--target-key", "nope"}));
  CHECK(missing.exit_code != 0);
  CHECK(missing.output.find("nope") != std::string::npos);
}
