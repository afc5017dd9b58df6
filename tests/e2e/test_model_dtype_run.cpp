// --model-dtype end to end on a Fashion-MNIST subset: timm-run trains a
// bfloat16 model (its EMA and inputs too) with a finite loss and writes the
// weights as train.py's checkpoint holds them (bfloat16, int64
// num_batches_tracked; checked against Python timm's model.to(bfloat16)),
// a resume continues them, timm-validate and timm-infer run the checkpoint in
// bfloat16 (timm-validate with timm-run's own eval numbers), and the refused
// combinations exit 2 naming the rule.
#include <cmath>
#include <filesystem>
#include <regex>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "e2e_support.hpp"
#include "test_support.hpp"
#include "timm/io/safetensors.hpp"

// Last: c10/util/Logging.h defines a CHECK macro that doctest must override.
#include <doctest/doctest.h>

namespace test_model_dtype_e2e {

namespace fs = std::filesystem;
using timm::test::run_command;

namespace {

std::string tool(const std::string& name) { return (timm::test::bin_dir() / name).string(); }

// A few seconds of resnet18: 4 updates of 32 images, 64 evaluated.
std::vector<std::string> run_args(const fs::path& out, const std::string& experiment, int epochs,
                                  const std::vector<std::string>& extra = {}) {
  std::vector<std::string> args = {tool("timm-run"),
                                   "--model",
                                   "resnet18",
                                   "--epochs",
                                   std::to_string(epochs),
                                   "--train-num-samples",
                                   "128",
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
                                   "--model-dtype",
                                   "bfloat16",
                                   "--model-ema",
                                   "--model-ema-decay",
                                   "0.9",
                                   "--output",
                                   out.string(),
                                   "--experiment",
                                   experiment,
                                   "--log-interval",
                                   "1"};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

// The captures of `pattern`'s groups at its last match in `text`; empty (and
// a failed check) when it never matches.
std::vector<std::string> last_match(const std::string& text, const std::string& pattern) {
  const std::regex re(pattern);
  std::vector<std::string> found;
  for (std::sregex_iterator it(text.begin(), text.end(), re), end; it != end; ++it) {
    found.clear();
    for (std::size_t g = 1; g < it->size(); ++g) found.push_back((*it)[g].str());
  }
  if (found.empty()) FAIL_CHECK("no match for " << pattern << " in:\n" << text);
  return found;
}

// Every floating tensor of the file is bfloat16, every other one int64
// (num_batches_tracked), as train.py saves a model.to(bfloat16).
void check_bfloat16_weights(const fs::path& file) {
  const timm::NamedTensors weights = timm::read_safetensors(file);
  REQUIRE(!weights.empty());
  int64_t bf16 = 0;
  for (const auto& entry : weights) {
    const bool counter = entry.first.ends_with("num_batches_tracked");
    const std::string dtype = c10::toString(entry.second.scalar_type());
    CHECK_MESSAGE(dtype == (counter ? "Long" : "BFloat16"), entry.first << ": " << dtype);
    if (!counter) ++bf16;
  }
  CHECK(bf16 > 0);
}

double summary_train_loss(const fs::path& csv) {
  // epoch,train_loss,eval_loss,...: the last row's second field.
  const std::vector<std::string> fields = last_match(timm::test::read_file(csv), R"((?:^|\n)\d+,([^,\n]+),)");
  return fields.empty() ? NAN : std::stod(fields[0]);
}

}  // namespace

TEST_CASE("--model-dtype bfloat16 trains, checkpoints bfloat16 weights as timm, resumes, and validates") {
  timm::test::TempDir tmp;
  const auto run = timm::test::train_successfully(run_args(tmp.path(), "bf16", 1));
  CHECK(run.output.find("AMP not enabled. Training in bfloat16.") != std::string::npos);
  // The EMA copy is bfloat16 too: its evaluation takes the bfloat16 batches.
  CHECK(run.output.find("Test (EMA): ") != std::string::npos);
  const fs::path dir = tmp / "bf16";
  const double train_loss = summary_train_loss(dir / "summary.csv");
  MESSAGE("bfloat16 train loss: " << train_loss);
  CHECK(std::isfinite(train_loss));
  CHECK(train_loss > 0.0);
  check_bfloat16_weights(dir / "last.safetensors");
  {
    INFO("the checkpoint holds the dtypes of Python timm's resnet18.to(bfloat16) and loads into it");
    const std::string out =
        timm::test::run_oracle("load_checkpoint.py", {"resnet18", (dir / "last.safetensors").string(), "--num-classes",
                                                      "10", "--in-chans", "1", "--model-dtype", "bfloat16"});
    CHECK(out.find("loaded 122 tensors as bfloat16") != std::string::npos);
  }

  {
    INFO("timm-validate --model-dtype bfloat16 gives timm-run's eval of the same weights");
    const auto validated =
        run_command({tool("timm-validate"), "--checkpoint", (dir / "last.safetensors").string(), "--model-dtype",
                     "bfloat16", "--num-samples", "64", "-b", "32", "-j", "1", "--use-train-size"},
                    std::chrono::seconds(300), {"OMP_NUM_THREADS=1"});
    REQUIRE_MESSAGE(validated.exit_code == 0, validated.output);
    CHECK(validated.output.find("Validating in bfloat16. AMP not enabled.") != std::string::npos);
    // timm-run's last line of the model's (not the EMA's) evaluation: the
    // running loss and top-1 over the 64 images; the same bfloat16 forward on
    // the same batches and thread count, the metrics from float32 logits.
    const auto run_eval =
        last_match(run.output, R"(Test: \[ *1/1\].*Loss: +[0-9.]+ \( *([0-9.]+)\)  Acc@1: +[0-9.]+ \( *([0-9.]+)\))");
    const auto val_loss = last_match(validated.output, R"( \* Loss ([0-9.]+) over 64 images)");
    const auto val_top1 = last_match(validated.output, R"( \* Acc@1 ([0-9.]+) )");
    REQUIRE(run_eval.size() == 2);
    REQUIRE(val_loss.size() == 1);
    REQUIRE(val_top1.size() == 1);
    MESSAGE("timm-run eval loss " << run_eval[0] << " top-1 " << run_eval[1] << "; timm-validate loss " << val_loss[0]
                                  << " top-1 " << val_top1[0]);
    // Printed with 3 and 4 decimals: equal to their rounding.
    CHECK(std::abs(std::stod(run_eval[0]) - std::stod(val_loss[0])) <= 1e-3);
    CHECK(std::abs(std::stod(run_eval[1]) - std::stod(val_top1[0])) <= 1e-3);
  }

  {
    INFO("timm-infer --model-dtype bfloat16 predicts with the bfloat16 weights");
    const auto inferred = run_command({tool("timm-infer"), "--checkpoint", (dir / "last.safetensors").string(),
                                       "--model-dtype", "bfloat16", "--num-samples", "8", "-b", "8", "-j", "1"},
                                      std::chrono::seconds(300), {"OMP_NUM_THREADS=1"});
    REQUIRE_MESSAGE(inferred.exit_code == 0, inferred.output);
    CHECK(inferred.output.find("Running inference in bfloat16. AMP not enabled.") != std::string::npos);
    CHECK(inferred.output.find("\"prob\"") != std::string::npos);
  }

  {
    INFO("a resume continues the bfloat16 weights and optimizer state");
    const auto resumed = timm::test::train_successfully(
        run_args(tmp.path(), "resumed", 2, {"--resume", (dir / "last.safetensors").string()}));
    CHECK(resumed.output.find("Loaded checkpoint") != std::string::npos);
    CHECK(resumed.output.find("Train: 0 [") == std::string::npos);
    CHECK(resumed.output.find("Train: 1 [") != std::string::npos);
    CHECK(std::isfinite(summary_train_loss(tmp / "resumed" / "summary.csv")));
    check_bfloat16_weights(tmp / "resumed" / "last.safetensors");
  }
}

TEST_CASE("--model-dtype: an unknown dtype, and --amp beside one other than float32, exit 2 naming the rule") {
  const auto expect_usage_error = [](const std::vector<std::string>& args, const std::string& message) {
    const auto r = run_command(args, std::chrono::seconds(300));
    CHECK_MESSAGE(r.exit_code == 2, r.output);
    CHECK_MESSAGE(r.output.find(message) != std::string::npos, r.output);
    CHECK(r.output.find("Train: ") == std::string::npos);
  };
  const std::string unknown = "--model-dtype 'float64': expected float32, float16 or bfloat16";
  const std::string with_amp = "float32 model dtype must be used with AMP";
  expect_usage_error({tool("timm-run"), "--model-dtype", "float64", "--epochs", "1"}, unknown);
  expect_usage_error({tool("timm-run"), "--model-dtype", "bfloat16", "--amp", "--epochs", "1"},
                     "--amp with --model-dtype bfloat16: " + with_amp);
  expect_usage_error({tool("timm-run"), "--amp", "--model-dtype", "float16", "--amp-dtype", "bfloat16"},
                     "--amp with --model-dtype float16: " + with_amp);
  expect_usage_error({tool("timm-validate"), "--model-dtype", "float64", "--num-samples", "8"}, unknown);
  expect_usage_error({tool("timm-validate"), "--model-dtype", "bfloat16", "--amp", "--num-samples", "8"}, with_amp);
  expect_usage_error({tool("timm-infer"), "--model-dtype", "bfloat16", "--amp", "--num-samples", "8"}, with_amp);
}

}  // namespace test_model_dtype_e2e
