// timm-run with train.py's NaFlex loader (--naflex-loader) on a Fashion-MNIST
// subset and a small NaFlexViT: the batches per epoch of timm's
// NaFlexMapDatasetWrapper for the same samples, lengths, token budget and
// seed (tests/oracle/naflex_sampler_oracle.py), train.py's log lines, the
// evaluation of every sample at --naflex-max-seq-len; --reprob and --mixup /
// --cutmix as timm's PatchRandomErasing and NaFlexMixup; --naflex-loss-scale as
// train.py's local_scale (a batch's loss times (B / --batch-size) or its
// square root: one SGD step of three runs that differ only in the mode moves
// each weight by exactly those multiples of one step); and the combinations
// refused, each naming its flag; and one step of timm-run against
// train.py's (tests/oracle/naflex_step_oracle.py): the same weights after it;
// timm-validate --naflex-loader (validate.py's) gives timm-run's evaluation.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include "e2e_support.hpp"
#include "test_support.hpp"
#include "timm/io/safetensors.hpp"

// Last: c10/util/Logging.h defines a CHECK macro that doctest must override.
#include <doctest/doctest.h>

namespace test_naflex_run {

namespace fs = std::filesystem;
using json = nlohmann::json;
using timm::test::run_command;

namespace {

// A NaFlexViT small enough for the suite: 64 wide, 2 blocks.
const std::vector<std::string> kSmallNaFlexVit{
    "--model", "naflexvit_base_patch16_gap", "--model-kwargs", "embed_dim=64", "depth=2", "num_heads=2"};

std::vector<std::string> naflex_run(const fs::path& out, const std::string& experiment,
                                    const std::vector<std::string>& extra) {
  std::vector<std::string> args = timm::test::plus({(timm::test::bin_dir() / "timm-run").string()}, kSmallNaFlexVit);
  args.insert(args.end(), {"--naflex-loader", "-j", "1", "--output", out.string(), "--experiment", experiment});
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

bool has(const timm::test::CommandResult& r, const std::string& text) {
  return r.output.find(text) != std::string::npos;
}

// One batch of 8 (--naflex-train-seq-lens 16, -b 12: a budget of 192
// tokens, 12 floored to a multiple of 8), one plain SGD step at lr 0.1.
std::vector<std::string> one_sgd_step() {
  return {"--naflex-train-seq-lens",
          "16",
          "--naflex-max-seq-len",
          "16",
          "-b",
          "12",
          "--epochs",
          "1",
          "--train-num-samples",
          "8",
          "--val-num-samples",
          "8",
          "--no-aug",
          "--opt",
          "sgd",
          "--weight-decay",
          "0",
          "--lr",
          "0.1",
          "--warmup-epochs",
          "0",
          "--sched",
          "step"};
}

// timm's NaFlexMapDatasetWrapper over `size` samples: its batches per epoch
// and canonical (seq_len, batch size) schedule.
json timm_schedule(int64_t size, const std::vector<int64_t>& seq_lens, int64_t max_tokens, int64_t seed) {
  const json cases = json::array({{{"size", size},
                                   {"epochs", json::array()},
                                   {"seq_lens", seq_lens},
                                   {"max_tokens_per_batch", max_tokens},
                                   {"seed", seed}}});
  const json out = json::parse(timm::test::run_oracle("naflex_sampler_oracle.py", {cases.dump()}));
  REQUIRE(out.size() == 1);
  REQUIRE_FALSE(out[0].contains("error"));
  return out[0];
}

}  // namespace

TEST_CASE("--naflex-loader trains a NaFlexViT on timm's batch schedule and evaluates every sample") {
  timm::test::TempDir tmp;
  // Token budget 16 x 49 = 784: batches of 48 (length 16), 16 (36) and 16 (49).
  const json schedule = timm_schedule(200, {16, 36, 49}, 16 * 49, 42);
  const int64_t batches = schedule["len"];
  REQUIRE(batches > 2);
  const auto r = timm::test::train_successfully(naflex_run(tmp.path(), "a",
                                                           {"--naflex-train-seq-lens",
                                                            "16",
                                                            "36",
                                                            "49",
                                                            "--naflex-max-seq-len",
                                                            "49",
                                                            "-b",
                                                            "16",
                                                            "--epochs",
                                                            "2",
                                                            "--train-num-samples",
                                                            "200",
                                                            "--val-num-samples",
                                                            "100",
                                                            "--lr",
                                                            "0.001",
                                                            "--opt",
                                                            "adamw",
                                                            "--log-interval",
                                                            "100",
                                                            "--reprob",
                                                            "0.25",
                                                            "--recount",
                                                            "2",
                                                            "--mixup",
                                                            "0.8",
                                                            "--cutmix",
                                                            "1.0",
                                                            "--smoothing",
                                                            "0.1",
                                                            "--mixup-off-epoch",
                                                            "1"}));
  CHECK(has(r, "Using NaFlex loader"));
  CHECK(has(r, "Using model patch size: (16, 16)"));
  CHECK(has(r,
            "Train transform (seq_len 16): Compose(\n    RandomResizedCropToSequence(patch_size=(16, 16), "
            "max_seq_len=16"));
  CHECK(has(r, "Train transform (seq_len 49): "));
  CHECK(has(r, "NaFlex mixing: mixup_alpha=0.8, cutmix_alpha=1.0, prob=1.0, switch_prob=0.5, label_smoothing=0.1"));
  CHECK(has(r,
            "Train batches: PatchRandomErasing(p=0.25, mode=pixel, spatial=region, area=(0.02, "
            "0.3333333333333333)), count=(1, 2))"));
  CHECK(has(r, "NaFlex loader has " + std::to_string(batches) +
                   " batches/epoch over sequence lengths [16, 36, 49], at most 784 tokens per batch."));
  const std::string last = std::to_string(batches - 1) + "/" + std::to_string(batches) + " (100%)]";
  CHECK(has(r, "Train: 0 [" + std::string(4 - std::min<size_t>(4, std::to_string(batches - 1).size()), ' ') + last));
  CHECK(has(r, "Train: 1 ["));
  CHECK(has(r, "(100 images)"));  // every validation sample, once
  CHECK(fs::exists(tmp.path() / "a" / "last.safetensors"));
}

TEST_CASE("timm-validate --naflex-loader reproduces timm-run's NaFlex evaluation exactly") {
  timm::test::TempDir tmp;
  const auto run = timm::test::train_successfully(
      naflex_run(tmp.path(), "v",
                 {"--naflex-train-seq-lens", "16", "36", "--naflex-max-seq-len", "36", "-b", "16", "--epochs", "1",
                  "--train-num-samples", "160", "--val-num-samples", "100", "--lr", "0.001", "--opt", "adamw"}));
  const std::string validate = (timm::test::bin_dir() / "timm-validate").string();
  const std::vector<std::string> common = timm::test::plus(
      timm::test::plus({validate}, kSmallNaFlexVit), {"--num-samples", "100", "-b", "16", "-j", "1", "--checkpoint",
                                                      (tmp.path() / "v" / "last.safetensors").string()});
  const auto r = run_command(timm::test::plus(common, {"--naflex-loader", "--naflex-max-seq-len", "36"}));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  // timm-run's final evaluation: top-1, top-5 and loss over the same 100
  // images, resized to at most 36 patches.
  const auto number = [](const std::string& text, const std::string& label) {
    return timm::test::number_after(text, label);
  };
  CHECK(number(r.output, R"( \* Acc@1)") == doctest::Approx(number(run.output, "Test top-1:")).epsilon(1e-9));
  CHECK(number(r.output, R"(Acc@5)") == doctest::Approx(number(run.output, "top-5:")).epsilon(1e-9));
  CHECK(number(r.output, R"( \* Loss)") == doctest::Approx(number(run.output, R"(loss:)")).epsilon(1e-4));
  CHECK(has(r, "over 100 images"));
  // The flag alone, and a model that takes images only, are refused.
  const auto alone = run_command(timm::test::plus(common, {"--naflex-max-seq-len", "36"}));
  CHECK(alone.exit_code == 2);
  CHECK(has(alone, "--naflex-max-seq-len: only used with --naflex-loader"));
  const auto images_only = run_command({validate, "--model", "resnet18", "--num-samples", "8", "--naflex-loader"});
  CHECK(images_only.exit_code == 2);
  CHECK(has(images_only, "takes images only, not patches"));
}

namespace {

// `tool` with the step tests' NaFlexViT, 32 wide, 1 block (the oracle's).
std::vector<std::string> tiny_naflexvit(const std::string& tool) {
  return {(timm::test::bin_dir() / tool).string(),
          "--model",
          "naflexvit_base_patch16_gap",
          "--model-kwargs",
          "embed_dim=32",
          "depth=1",
          "num_heads=2"};
}

// timm's model and step (tests/oracle/naflex_step_oracle.py, with
// `oracle_args`): its initial weights, then train.py's NaFlex loader, loss,
// loss scale and SGD step; timm-run's step from the same weights with
// `extra` must give the same weights. Returns timm-run's output.
timm::test::CommandResult check_one_step(const fs::path& dir, const std::vector<std::string>& oracle_args,
                                         const std::vector<std::string>& kwargs,
                                         const std::vector<std::string>& extra) {
  const json timm_step =
      json::parse(timm::test::run_oracle("naflex_step_oracle.py", timm::test::plus({dir.string()}, oracle_args)));
  REQUIRE(timm_step["batch"] == 8);
  std::vector<std::string> args = tiny_naflexvit("timm-run");
  args = timm::test::plus(args, kwargs);
  args = timm::test::plus(args, {"--naflex-loader", "--initial-checkpoint", (dir / "init.safetensors").string(), "-j",
                                 "1", "--output", dir.string(), "--experiment", "step", "--smoothing", "0"});
  const auto r = timm::test::train_successfully(timm::test::plus(timm::test::plus(args, one_sgd_step()), extra));
  CHECK(has(r, "Train: 0 [   0/1 (100%)]"));
  CHECK(timm::test::number_after(r.output, "Loss:") == doctest::Approx(timm_step["loss"].get<double>()).epsilon(5e-3));
  // By name: safetensors files need not keep one order.
  std::map<std::string, at::Tensor> timm_after, init;
  for (auto& [name, tensor] : timm::read_safetensors(dir / "after.safetensors")) timm_after[name] = tensor;
  for (auto& [name, tensor] : timm::read_safetensors(dir / "init.safetensors")) init[name] = tensor;
  const auto ours = timm::read_safetensors(dir / "step" / "last.safetensors");
  REQUIRE(ours.size() == timm_after.size());
  double largest_move = 0.0;
  for (const auto& [name, weight] : ours) {
    CAPTURE(name);
    REQUIRE(timm_after.count(name) == 1);
    // Measured: 3.7e-9 at most, where the step moved a weight by up to 0.08.
    CHECK(at::allclose(weight, timm_after.at(name), /*rtol=*/0.0, /*atol=*/1e-6));
    largest_move = std::max(largest_move, (timm_after.at(name) - init.at(name)).abs().max().item<double>());
  }
  CHECK(largest_move > 1e-2);
  return r;
}

}  // namespace

TEST_CASE("one NaFlex training step equals train.py's: the same weights after it, to float rounding") {
  timm::test::TempDir tmp;
  check_one_step(tmp.path(), {}, {}, {"--mean", "0.5", "--std", "0.25"});
}

TEST_CASE(
    "--naflex-patchify-channels-first: train.py's step with (C, Ph, Pw) patches; timm-validate follows the model") {
  timm::test::TempDir tmp;
  // RGB with three different means and stds: a patch read in the wrong
  // layout is normalised and projected wrongly.
  const std::vector<std::string> kwargs{"patchify_channels_last=false"};
  const std::vector<std::string> three{"--in-chans", "3", "--mean", "0.5", "0.4", "0.3", "--std", "0.25", "0.2", "0.3"};
  const std::vector<std::string> rgb = timm::test::plus({"--input-img-mode", "RGB"}, three);
  const auto run = check_one_step(tmp.path(), {"channels_first"}, kwargs,
                                  timm::test::plus({"--naflex-patchify-channels-first"}, rgb));
  // timm-validate has no layout flag (validate.py's neither, which feeds
  // such a model scrambled patches): it cuts them as the model takes them,
  // and gives timm-run's evaluation of the same 8 images.
  std::vector<std::string> validate = tiny_naflexvit("timm-validate");
  // validate.py's image mode: RGB for 3 channels.
  validate = timm::test::plus(timm::test::plus(validate, kwargs), three);
  validate = timm::test::plus(
      validate, {"--num-samples", "8", "-b", "12", "-j", "1", "--naflex-loader", "--naflex-max-seq-len", "16",
                 "--checkpoint", (tmp.path() / "step" / "last.safetensors").string()});
  const auto r = run_command(validate);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK(timm::test::number_after(r.output, R"( \* Loss)") ==
        doctest::Approx(timm::test::number_after(run.output, R"(loss:)")).epsilon(1e-4));
  // The flag and the model must agree, both ways.
  const std::vector<std::string> short_run{"--epochs", "1", "--train-num-samples", "16", "--val-num-samples", "8"};
  const auto flag_only =
      run_command(naflex_run(tmp.path(), "bad", timm::test::plus(short_run, {"--naflex-patchify-channels-first"})));
  INFO(flag_only.output);
  CHECK(flag_only.exit_code == 2);
  CHECK(has(flag_only,
            "takes patches laid out (Ph, Pw, C), but --naflex-patchify-channels-first makes them (C, Ph, Pw)"));
  const auto model_only = run_command(
      timm::test::plus({(timm::test::bin_dir() / "timm-run").string(), "--model", "naflexvit_base_patch16_gap",
                        "--model-kwargs", "embed_dim=64", "depth=2", "num_heads=2", "patchify_channels_last=false",
                        "--naflex-loader", "--output", tmp.path().string(), "--experiment", "bad"},
                       short_run));
  INFO(model_only.output);
  CHECK(model_only.exit_code == 2);
  CHECK(has(model_only,
            "takes patches laid out (C, Ph, Pw), but without --naflex-patchify-channels-first makes them "
            "(Ph, Pw, C)"));
}

TEST_CASE("--naflex-loss-scale none, sqrt, linear: one SGD step scaled by 1, sqrt(B / b), B / b") {
  timm::test::TempDir tmp;
  // One batch: 8 samples of length 16 with -b 12 (a budget of 192 tokens,
  // 12 per batch floored to a multiple of 8): B / b = 8 / 12.
  const json schedule = timm_schedule(8, {16}, 12 * 16, 42);
  REQUIRE(schedule["schedule"] == json::array({json::array({16, 8})}));
  const double s = 8.0 / 12.0;
  std::vector<std::string> losses;
  for (const std::string mode : {"none", "sqrt", "linear"}) {
    const auto r = timm::test::train_successfully(
        naflex_run(tmp.path(), mode, timm::test::plus({"--naflex-loss-scale", mode}, one_sgd_step())));
    CHECK(has(r, "Train: 0 [   0/1 (100%)]"));
    losses.push_back(r.output.substr(r.output.find("Loss: "), 20));
  }
  // The logged loss is the batch's own, unscaled, in every mode.
  CHECK(losses[0] == losses[1]);
  CHECK(losses[0] == losses[2]);
  const auto none = timm::read_safetensors(tmp.path() / "none" / "last.safetensors");
  const auto sqrt = timm::read_safetensors(tmp.path() / "sqrt" / "last.safetensors");
  const auto linear = timm::read_safetensors(tmp.path() / "linear" / "last.safetensors");
  REQUIRE(none.size() == sqrt.size());
  REQUIRE(none.size() == linear.size());
  // w_mode = w0 + scale x step: (w_linear - w_none) (sqrt(s) - 1) equals
  // (w_sqrt - w_none) (s - 1), without knowing w0.
  double largest_move = 0.0;
  for (std::size_t i = 0; i < none.size(); ++i) {
    CAPTURE(none[i].first);
    const at::Tensor w_none = none[i].second.to(at::kDouble);
    const at::Tensor linear_move = linear[i].second.to(at::kDouble) - w_none;
    const at::Tensor sqrt_move = sqrt[i].second.to(at::kDouble) - w_none;
    CHECK(at::allclose(linear_move * (std::sqrt(s) - 1.0), sqrt_move * (s - 1.0), /*rtol=*/1e-3, /*atol=*/1e-6));
    largest_move = std::max(largest_move, linear_move.abs().max().item<double>());
  }
  // The step moved the weights well beyond the tolerance (NaN fails here too).
  CHECK(largest_move > 1e-4);
}

TEST_CASE("--naflex-patch-sizes: batches of 8x8 and 16x16 patches on timm's schedule, the projection resampled") {
  timm::test::TempDir tmp;
  json cases = json::array({{{"size", 160},
                             {"epochs", json::array()},
                             {"seq_lens", {16, 36}},
                             {"max_tokens_per_batch", 16 * 36},
                             {"seed", 42},
                             {"patch_size_choices", {8, 16}},
                             {"patch_size_choice_probs", {1.0, 3.0}}}});
  const json out = json::parse(timm::test::run_oracle("naflex_sampler_oracle.py", {cases.dump()}));
  REQUIRE_FALSE(out[0].contains("error"));
  const int64_t batches = out[0]["len"];
  std::vector<std::string> args = naflex_run(tmp.path(), "patches",
                                             {"--naflex-train-seq-lens",
                                              "16",
                                              "36",
                                              "--naflex-max-seq-len",
                                              "36",
                                              "--naflex-patch-sizes",
                                              "8",
                                              "16",
                                              "--naflex-patch-size-probs",
                                              "1",
                                              "3",
                                              "-b",
                                              "16",
                                              "--epochs",
                                              "1",
                                              "--train-num-samples",
                                              "160",
                                              "--val-num-samples",
                                              "50",
                                              "--lr",
                                              "0.001",
                                              "--opt",
                                              "adamw",
                                              "--log-interval",
                                              "100"});
  args.insert(std::find(args.begin(), args.end(), "num_heads=2") + 1, "enable_patch_interpolator=true");
  const auto r = timm::test::train_successfully(args);
  CHECK(has(r, "Using variable patch sizes: [8, 16]"));
  CHECK_FALSE(has(r, "Using model patch size"));
  CHECK(has(r, "Train transform (seq_len 16, patch 8): "));
  CHECK(has(r, "Train transform (seq_len 36, patch 16): "));
  CHECK(has(r, "NaFlex loader has " + std::to_string(batches) + " batches/epoch"));
  CHECK(has(r, "(50 images)"));  // evaluated at the model's own patch size
}

TEST_CASE("--naflex-loader: what it cannot combine with is a usage error naming the flag") {
  timm::test::TempDir tmp;
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  const std::vector<Case> cases{
      {{"--train-img-sizes", "24", "28"}, "--naflex-loader and --train-img-sizes are alternative loader modes."},
      {{"--mixup", "0.2", "--cutmix-minmax", "0.2", "0.8"}, "--cutmix-minmax with --naflex-loader: timm's NaFlexMixup"},
      {{"--mixup", "0.2", "--mixup-mode", "pair"}, "--mixup-mode 'pair' with --naflex-loader: timm's NaFlexMixup"},
      {{"--reprob", "0.25", "--resplit"}, "--resplit with --naflex-loader: NaFlex batches have no clean split"},
      {{"--kd-model-name", "resnet18"}, "--kd-model-name with --naflex-loader: distillation feeds the teacher"},
      {{"--save-images"}, "--save-images with --naflex-loader: the batches are patches, not images"},
      {{"--naflex-max-seq-len", "0"}, "--naflex-max-seq-len 0: expected a positive sequence length"},
      {{"--naflex-train-seq-lens", "16", "0"}, "--naflex-train-seq-lens: expected one or more positive"},
      {{"--naflex-patch-size-probs", "1", "2"}, "--naflex-patch-size-probs: only used with --naflex-patch-sizes"},
      {{"--naflex-patch-sizes", "8", "16", "--naflex-patch-size-probs", "1"},
       "--naflex-patch-size-probs must have same length as --naflex-patch-sizes"},
      {{"--naflex-patch-sizes", "8", "0"}, "--naflex-patch-sizes [8, 0]: expected positive patch sizes"},
      {{"--naflex-patch-sizes", "8", "16"},
       "patches of 8x8, but its patch size is 16 (--model-kwargs enable_patch_interpolator=true"},
      {{"--use-multi-epochs-loader"}, "--use-multi-epochs-loader is not supported with --naflex-loader."},
      {{"--aug-splits", "2"}, "--aug-splits is not supported with --naflex-loader"},
  };
  for (const Case& c : cases) {
    std::vector<std::string> extra{"--epochs", "1", "--train-num-samples", "16", "--val-num-samples", "8"};
    extra.insert(extra.end(), c.args.begin(), c.args.end());
    const auto r = run_command(naflex_run(tmp.path(), "bad", extra));
    INFO(r.output);
    CHECK(r.exit_code == 2);
    CHECK(has(r, c.message));
  }
  // A model that takes images only, and the NaFlex flags without the loader.
  const std::string timm_run = (timm::test::bin_dir() / "timm-run").string();
  const auto images_only = run_command({timm_run, "--model", "resnet18", "--naflex-loader", "--epochs", "1",
                                        "--train-num-samples", "16", "--output", tmp.path().string()});
  INFO(images_only.output);
  CHECK(images_only.exit_code == 2);
  CHECK(has(images_only, "--naflex-loader: model 'resnet18' (from plugin"));
  CHECK(has(images_only, "takes images only, not patches"));
  const auto without_loader = run_command({timm_run, "--naflex-max-seq-len", "64", "--epochs", "1",
                                           "--train-num-samples", "16", "--output", tmp.path().string()});
  INFO(without_loader.output);
  CHECK(without_loader.exit_code == 2);
  CHECK(has(without_loader, "--naflex-max-seq-len: only used with --naflex-loader (NaFlex patch batches)"));
}

}  // namespace test_naflex_run
