// The training command lines of timm's documentation (hfdocs
// training_script.mdx) run through timm-run and write timm's lr column.
//
// Each line is run as the docs give it, with five changes that only shrink
// the work: the ImageNet folder is replaced by the built-in Fashion-MNIST
// (4 training images, no validation split), the batch size by 4, the
// images by 32x32 (--img-size: the lr column does not depend on it, and at
// the models' 256 and 224 pixels the two runs took 226 s and 185 s of the
// suite), --amp autocasts to bfloat16 instead of float16 (--amp-dtype: on a
// CPU, float16 convolutions take the reference kernels, 10 s a step here in
// timm-run and in Python timm alike, 190 s a run), and --stop-after-epochs
// ends the run after the first epochs of the schedule (450 and 150 epochs in
// the docs). One step per epoch of 4 images: on a CPU without AVX-512 the
// bfloat16 convolutions take torch's slow_conv2d, whose backward costs about
// 0.6 s per image of seresnet34 here at any image size (16 images a step
// took 10 s, 209 s a run). One process runs what
// distributed_train.sh spreads over 2 or 4: the lr schedule does not depend
// on the world size when --lr is given. The expected lr per epoch comes from
// timm's scheduler_kwargs() and create_scheduler_v2() at test time.
#include <cmath>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "test_support.hpp"

#include <doctest/doctest.h>

namespace fs = std::filesystem;

namespace {

constexpr int kEpochs = 6;        // the 5 warmup epochs, then the schedule proper
constexpr double kLrRtol = 1e-9;  // summary.csv holds Python's repr of the lr

std::vector<std::string> split_words(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> words;
  for (std::string word; in >> word;) words.push_back(word);
  return words;
}

// The lr column of summary.csv, one value per row.
std::vector<double> lr_column(const fs::path& summary) {
  std::istringstream in(timm::test::read_file(summary));
  std::string line;
  std::getline(in, line);  // header
  REQUIRE(line.substr(line.rfind(',') + 1).rfind("lr", 0) == 0);
  std::vector<double> lrs;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (!line.empty()) lrs.push_back(std::stod(line.substr(line.rfind(',') + 1)));
  }
  return lrs;
}

void check_recipe(const std::string& doc_args) {
  const std::vector<std::string> doc = split_words(doc_args);
  timm::test::TempDir tmp;
  std::vector<std::string> argv = {(timm::test::bin_dir() / "timm-run").string()};
  argv.insert(argv.end(), doc.begin(), doc.end());
  argv.insert(argv.end(), {"--train-num-samples", "4", "--val-split", "", "-b", "4", "--img-size", "32", "--amp-dtype",
                           "bfloat16", "--stop-after-epochs", std::to_string(kEpochs), "--output", tmp.path().string(),
                           "--experiment", "recipe"});
  const auto run = timm::test::run_command(argv, std::chrono::seconds(1200));
  REQUIRE_MESSAGE(run.exit_code == 0, run.output);

  const auto expected = nlohmann::json::parse(
      timm::test::run_oracle("recipe_lr_oracle.py", {nlohmann::json(doc).dump(), std::to_string(kEpochs)}));
  const std::vector<double> lrs = lr_column(tmp / "recipe" / "summary.csv");
  REQUIRE(lrs.size() == static_cast<std::size_t>(kEpochs));
  for (int epoch = 0; epoch < kEpochs; ++epoch) {
    const double want = expected[epoch].get<double>();
    INFO("epoch " << epoch << ": timm-cpp " << lrs[epoch] << ", timm " << want);
    CHECK(std::abs(lrs[epoch] - want) <= kLrRtol * std::abs(want));
  }
}

}  // namespace

TEST_CASE("the EfficientNet-B2 RA command line of timm's docs") {
  check_recipe(
      "--model efficientnet_b2 -b 128 --sched step --epochs 450 --decay-epochs 2.4 --decay-rate .97 --opt rmsproptf "
      "--opt-eps .001 -j 8 --warmup-lr 1e-6 --weight-decay 1e-5 --drop 0.3 --drop-path 0.2 --model-ema "
      "--model-ema-decay 0.9999 --aa rand-m9-mstd0.5 --remode pixel --reprob 0.2 --amp --lr .016");
}

TEST_CASE("the SE-ResNet34 command line of timm's docs") {
  check_recipe(
      "--model seresnet34 --sched cosine --epochs 150 --warmup-epochs 5 --lr 0.4 --reprob 0.5 --remode pixel "
      "--batch-size 256 --amp -j 4");
}
