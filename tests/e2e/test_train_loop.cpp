// timm-run's training loop end to end on a small Fashion-MNIST subset:
// exact resume (2 epochs straight == 1 epoch, stop, resume, 1 epoch, on a
// cosine schedule with warmup, EMA, drop path, gradient accumulation and
// clipping on), seed determinism,
// --auto-resume, recovery checkpoints, bfloat16 AMP on CPU, NaN
// detection, and train.py's small flags (--save-images, --tta,
// --drop-connect, --synchronize-step, --use-multi-epochs-loader).
#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "e2e_support.hpp"
#include "test_support.hpp"
#include "timm/data/image.hpp"
#include "timm/io/safetensors.hpp"

// Last: c10/util/Logging.h defines a CHECK macro that doctest must override.
#include <doctest/doctest.h>

namespace test_train_loop {

namespace fs = std::filesystem;
using timm::test::run_command;

namespace {

// Weights of two runs agree to this (absolute): both are the same float32
// computation on the same thread count, so in practice bit for bit.
constexpr double kWeightsAtol = 1e-6;

// Batches of 32: 8 per epoch.
std::vector<std::string> run_args(const fs::path& out, const std::string& experiment, int epochs,
                                  const std::vector<std::string>& extra = {}) {
  return timm::test::small_run_args(out, experiment, epochs,
                                    timm::test::plus({"-b", "32", "--log-interval", "4"}, extra));
}

const std::vector<std::string> kLoopFlags = {
    "--model-ema", "--model-ema-decay", "0.9", "--drop-path", "0.1", "--grad-accum-steps", "3", "--clip-grad", "2.0"};

using timm::test::plus;

// Sets the value that follows `flag` in `args`, which must hold it.
void set_value(std::vector<std::string>& args, const std::string& flag, const std::string& value) {
  const auto it = std::find(args.begin(), args.end(), flag);
  REQUIRE(it != args.end());
  REQUIRE(it + 1 != args.end());
  *(it + 1) = value;
}

timm::test::CommandResult train(const std::vector<std::string>& args) { return timm::test::train_successfully(args); }

std::string last_line(const std::string& text) {
  const auto end = text.find_last_not_of("\r\n");
  const auto start = text.rfind('\n', end);
  return text.substr(start + 1, end - start);
}

}  // namespace

TEST_CASE("a resumed run ends with the weights of a straight run; the same seed repeats a run") {
  timm::test::TempDir tmp;
  train(run_args(tmp.path(), "straight", 2, kLoopFlags));
  const auto first = train(run_args(tmp.path(), "first", 2, plus(kLoopFlags, {"--stop-after-epochs", "1"})));
  CHECK(first.output.find("Train: 1 [") == std::string::npos);
  const auto resumed = train(run_args(tmp.path(), "resumed", 2,
                                      plus(kLoopFlags, {"--resume", (tmp / "first" / "last.safetensors").string()})));
  CHECK(resumed.output.find("Loaded checkpoint") != std::string::npos);
  CHECK(resumed.output.find("Train: 0 [") == std::string::npos);
  CHECK(resumed.output.find("Test (EMA): ") != std::string::npos);
  CHECK(fs::exists(tmp / "straight" / "summary.svg"));

  const double diff =
      timm::test::max_weight_diff(tmp / "straight" / "last.safetensors", tmp / "resumed" / "last.safetensors");
  MESSAGE("max |straight - resumed| weight difference: " << diff);
  CHECK(diff <= kWeightsAtol);
  // Epoch 1's row (EMA metrics, lr) is the same too.
  CHECK(last_line(timm::test::read_file(tmp / "straight" / "summary.csv")) ==
        last_line(timm::test::read_file(tmp / "resumed" / "summary.csv")));

  SUBCASE("the same seed gives the same weights, another seed others") {
    train(run_args(tmp.path(), "again", 2, plus(kLoopFlags, {"--stop-after-epochs", "1"})));
    CHECK(timm::test::max_weight_diff(tmp / "first" / "last.safetensors", tmp / "again" / "last.safetensors") == 0.0);
    train(run_args(tmp.path(), "other-seed", 2, plus(kLoopFlags, {"--stop-after-epochs", "1", "--seed", "4"})));
    CHECK(timm::test::max_weight_diff(tmp / "first" / "last.safetensors", tmp / "other-seed" / "last.safetensors") >
          1e-3);
  }
}

TEST_CASE("--auto-resume continues from the newest checkpoint; recovery checkpoints are written") {
  timm::test::TempDir tmp;
  const auto first = train(run_args(tmp.path(), "auto", 1, {"--recovery-interval", "2", "--checkpoint-hist", "1"}));
  // 8 updates, one recovery every 2 (after updates 1, 3, 5, 7); two kept.
  CHECK(fs::exists(tmp / "auto" / "recovery-0-5.safetensors"));
  CHECK(fs::exists(tmp / "auto" / "recovery-0-7.state.pt"));
  CHECK_FALSE(fs::exists(tmp / "auto" / "recovery-0-3.safetensors"));
  CHECK(fs::exists(tmp / "auto" / "checkpoint-0.safetensors"));
  // The newest is the last recovery or last; either resumes at epoch 1.
  const auto again = train(run_args(tmp.path(), "auto", 2, {"--auto-resume"}));
  CHECK(again.output.find("Loaded checkpoint") != std::string::npos);
  CHECK(again.output.find("Train: 0 [") == std::string::npos);
  CHECK(again.output.find("Train: 1 [") != std::string::npos);
}

// test_resnet, not resnet18: on CPUs without AVX-512 oneDNN has no bfloat16
// convolutions and torch falls back to _slow_conv2d (Python timm too), about
// 13x slower than float32 here; resnet18 took over 15 minutes (test_resnet 40 s).
TEST_CASE("bfloat16 AMP trains on CPU") {
  timm::test::TempDir tmp;
  auto amp_run_args = [&](const std::string& experiment, const std::vector<std::string>& extra) {
    auto args = run_args(tmp.path(), experiment, 2, plus({"--warmup-epochs", "0"}, extra));
    set_value(args, "--model", "test_resnet");
    set_value(args, "--train-num-samples", "1024");
    return args;
  };
  const auto run = train(amp_run_args("amp", {"--amp", "--amp-dtype", "bfloat16"}));
  CHECK(run.output.find("Using native Torch AMP. Training in mixed precision.") != std::string::npos);
  // 10 balanced classes: chance is 10%.
  CHECK(timm::test::number_after(run.output, "Test top-1:") > 30.0);

  INFO("autocast really ran in bfloat16: the float32 run with the same seed ends elsewhere");
  train(amp_run_args("fp32", {}));
  CHECK(timm::test::max_weight_diff(tmp / "amp" / "last.safetensors", tmp / "fp32" / "last.safetensors") > 1e-3);
}

TEST_CASE("--fast-norm changes a bfloat16 AMP run's norm layers and nothing without AMP") {
  timm::test::TempDir tmp;
  // A ViT's LayerNorms at 32 px (four patches): cheap, and every norm timm's.
  auto vit_args = [&](const std::string& experiment, const std::vector<std::string>& extra) {
    auto args = run_args(tmp.path(), experiment, 1, plus({"--img-size", "32", "--model-kwargs", "img_size=32"}, extra));
    set_value(args, "--model", "vit_tiny_patch16_224");
    set_value(args, "--train-num-samples", "64");
    set_value(args, "--val-num-samples", "32");
    return args;
  };
  auto weight_diff = [&](const std::string& a, const std::string& b) {
    return timm::test::max_weight_diff(tmp / a / "last.safetensors", tmp / b / "last.safetensors");
  };
  const std::vector<std::string> amp = {"--amp", "--amp-dtype", "bfloat16"};
  for (const auto& [experiment, extra] :
       std::vector<std::pair<std::string, std::vector<std::string>>>{{"amp", amp},
                                                                     {"amp_again", amp},
                                                                     {"amp_fast", plus(amp, {"--fast-norm"})},
                                                                     {"fp32", {}},
                                                                     {"fp32_fast", {"--fast-norm"}}}) {
    train(vit_args(experiment, extra));
  }
  // On one thread a run repeats bit for bit, so any difference is the flag's.
  // A LayerNorm feeding a bfloat16 Linear moves little: two steps apart by
  // about 1e-7 here.
  REQUIRE(weight_diff("amp", "amp_again") == 0.0);
  INFO("under autocast the norms ran in bfloat16, so the weights end elsewhere");
  CHECK(weight_diff("amp", "amp_fast") > 0.0);
  INFO("outside autocast a fast norm is the plain one");
  CHECK(weight_diff("fp32", "fp32_fast") == 0.0);
}

TEST_CASE("a diverging run stops at the non-finite loss, naming epoch and step") {
  timm::test::TempDir tmp;
  auto args = run_args(tmp.path(), "nan", 1, {"--warmup-epochs", "0"});
  set_value(args, "--lr", "1e12");
  const auto run = run_command(args, std::chrono::seconds(600), {"OMP_NUM_THREADS=1"});
  CHECK(run.exit_code == 1);
  CHECK(run.output.find("loss is ") != std::string::npos);
  CHECK(run.output.find(" at epoch 0, step ") != std::string::npos);
  CHECK(run.output.find("; stopping") != std::string::npos);
}

TEST_CASE("--mixup and --cutmix train with soft targets; combined with --aug-splits they are refused") {
  timm::test::TempDir tmp;
  const auto run =
      train(run_args(tmp.path(), "mixup", 1, {"--mixup", "0.2", "--cutmix", "1.0", "--mixup-mode", "elem"}));
  CHECK(run.output.find("Train: 0 [") != std::string::npos);
  CHECK(timm::test::number_after(run.output, "Test top-1:") >= 0.0);
  const auto refused = run_command(run_args(tmp.path(), "refused", 1, {"--mixup", "0.2", "--aug-splits", "2"}),
                                   std::chrono::seconds(300));
  CHECK(refused.exit_code == 2);
  CHECK(refused.output.find("cannot be combined with --aug-splits") != std::string::npos);
}

TEST_CASE(
    "train.py's small flags: --save-images, --tta, --drop-connect, --synchronize-step, --use-multi-epochs-loader") {
  timm::test::TempDir tmp;
  // 4 batches of 16, logged at updates 0, 2 and 3 (the last).
  auto tiny = [&](const std::string& experiment, const std::vector<std::string>& extra) {
    std::vector<std::string> args = {(timm::test::bin_dir() / "timm-run").string(),
                                     "--model",
                                     "resnet18",
                                     "--epochs",
                                     "1",
                                     "--train-num-samples",
                                     "64",
                                     "--val-num-samples",
                                     "32",
                                     "-b",
                                     "16",
                                     "--lr",
                                     "0.05",
                                     "--warmup-epochs",
                                     "0",
                                     "-j",
                                     "0",
                                     "--output",
                                     tmp.path().string(),
                                     "--experiment",
                                     experiment,
                                     "--log-interval",
                                     "2"};
    args.insert(args.end(), extra.begin(), extra.end());
    return train(args);
  };
  const auto run = tiny("flags", {"--save-images", "--tta", "2", "--drop-connect", "0.1", "--synchronize-step",
                                  "--use-multi-epochs-loader", "--mixup", "0.5"});
  {
    INFO("--save-images: the logged steps' inputs as 8-wide grids of the 16 28x28 images, made RGB");
    for (int batch_idx : {0, 2, 3}) {
      const fs::path file = tmp / "flags" / ("train-batch-" + std::to_string(batch_idx) + ".jpg");
      CAPTURE(file);
      REQUIRE(fs::exists(file));
      const timm::Image image = timm::read_image(file, 3);
      CHECK(image.height == 2 * 28);
      CHECK(image.width == 8 * 28);
    }
    CHECK_FALSE(fs::exists(tmp / "flags" / "train-batch-1.jpg"));
  }
  {
    INFO("--tta 2: each 2 consecutive validation outputs averaged into one sample");
    CHECK(run.output.find("(16 images)") != std::string::npos);
  }
  {
    INFO("--use-multi-epochs-loader and --drop-connect say what they do");
    CHECK(run.output.find("--use-multi-epochs-loader: timm-run's loader starts its worker threads at each epoch") !=
          std::string::npos);
    CHECK(run.output.find("WARNING: --drop-connect is deprecated, use --drop-path: taking 0.1 as the drop path rate") !=
          std::string::npos);
  }
  {
    INFO("--drop-connect 0.1 trains as --drop-path 0.1 (and not as no drop path)");
    tiny("drop-connect", {"--drop-connect", "0.1"});
    tiny("drop-path", {"--drop-path", "0.1"});
    tiny("no-drop-path", {});
    const fs::path connect = tmp / "drop-connect" / "last.safetensors";
    CHECK(timm::test::max_weight_diff(connect, tmp / "drop-path" / "last.safetensors") == 0.0);
    CHECK(timm::test::max_weight_diff(connect, tmp / "no-drop-path" / "last.safetensors") > 1e-6);
  }
}

}  // namespace test_train_loop
