// The tools beside timm-run on Fashion-MNIST, against timm-run itself and
// Python timm at test time: timm-validate, timm-infer, timm-benchmark (also
// its --bench fwd-bwd) and timm-plot, with one tiny checkpoint trained once
// and shared by the cases.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <regex>
#include <set>

#include "e2e_support.hpp"
#include "test_support.hpp"

#include <doctest/doctest.h>

namespace test_tools {

namespace fs = std::filesystem;
using nlohmann::json;
using timm::test::run_command;
using timm::test::run_oracle;

namespace {

std::string tool(const std::string& name) { return (timm::test::bin_dir() / name).string(); }

// One resnet18 trained for an epoch on 512 images, evaluated on 256.
struct TrainedRun {
  timm::test::TempDir tmp;
  fs::path dir;
  std::string output;
  fs::path checkpoint() const { return dir / "last.safetensors"; }
};

const TrainedRun& trained_run() {
  // Never destroyed (the files outlive every case); owned until the run
  // succeeded, so a failed one frees it (LeakSanitizer).
  static TrainedRun* run = [] {
    auto r = std::make_unique<TrainedRun>();
    const auto result = run_command({tool("timm-run"),
                                     "--model",
                                     "resnet18",
                                     "--epochs",
                                     "1",
                                     "--train-num-samples",
                                     "512",
                                     "--val-num-samples",
                                     "256",
                                     "-b",
                                     "64",
                                     "-j",
                                     "1",
                                     "--lr",
                                     "0.1",
                                     "--warmup-epochs",
                                     "0",
                                     "--output",
                                     r->tmp.path().string(),
                                     "--experiment",
                                     "ck"});
    REQUIRE_MESSAGE(result.exit_code == 0, result.output);
    r->dir = r->tmp / "ck";
    r->output = result.output;
    return r.release();
  }();
  return *run;
}

// The text captured by `pattern`'s first group in `text` (the last match).
std::string last_capture(const std::string& text, const std::string& pattern) {
  const std::regex re(pattern);
  std::string found;
  for (std::sregex_iterator it(text.begin(), text.end(), re), end; it != end; ++it) found = (*it)[1].str();
  if (found.empty()) FAIL_CHECK("no match for " << pattern << " in:\n" << text);
  return found;
}

json parse_json_file(const fs::path& path) { return json::parse(timm::test::read_file(path)); }

// The data config a tool logged, as flags for tools_oracle.py.
std::vector<std::string> logged_data_config(const std::string& output) {
  return {"--img-size",      last_capture(output, R"(input_size: \(\d+, \d+, (\d+)\))"),
          "--interpolation", last_capture(output, R"(interpolation: (\w+))"),
          "--mean",          last_capture(output, R"(mean: \(([0-9.]+),\))"),
          "--std",           last_capture(output, R"(std: \(([0-9.]+),\))"),
          "--crop-pct",      last_capture(output, R"(crop_pct: ([0-9.]+))")};
}

std::vector<std::string> concat(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

}  // namespace

TEST_CASE("timm-validate reproduces timm-run's eval exactly and Python timm's within one sample") {
  const TrainedRun& run = trained_run();
  timm::test::TempDir tmp;
  // --use-train-size: timm-run evaluates at the train crop (resnet18's 0.95, not its test crop 1.0).
  const auto result =
      run_command({tool("timm-validate"), "--checkpoint", run.checkpoint().string(), "--num-samples", "256", "-b", "64",
                   "-j", "1", "--use-train-size", "--results-file", (tmp / "val.json").string()});
  REQUIRE_MESSAGE(result.exit_code == 0, result.output);
  MESSAGE(result.output.substr(0, 2000));
  CHECK(result.output.find("Test: [   0/4]  Time: ") != std::string::npos);

  // timm-run's last eval line: "Test: [   3/3] ... Acc@1: x (avg)  Acc@5: y (avg)" and its final loss.
  const std::string run_top1 = last_capture(run.output, R"(Acc@1: +[0-9.]+ \( *([0-9.]+)\))");
  const std::string run_top5 = last_capture(run.output, R"(Acc@5: +[0-9.]+ \( *([0-9.]+)\))");
  const std::string run_loss = last_capture(run.output, R"(Test top-1: .* loss: ([0-9.]+))");
  // The same numbers, printed with the same precision, by timm-validate.
  CHECK(last_capture(result.output, R"( \* Acc@1 ([0-9.]+) )") == run_top1);
  CHECK(last_capture(result.output, R"(Acc@5 ([0-9.]+) \()") == run_top5);
  CHECK(last_capture(result.output, R"( \* Loss ([0-9.]+) over 256 images)") == run_loss);

  const json row = parse_json_file(tmp / "val.json");
  for (const char* key :
       {"model", "top1", "top1_err", "top5", "top5_err", "param_count", "img_size", "crop_pct", "interpolation"}) {
    CHECK_MESSAGE(row.contains(key), key);
  }
  CHECK(row["model"] == "resnet18");
  CHECK(row["img_size"] == 28);
  CHECK(row["param_count"].get<double>() == doctest::Approx(11.18));

  // Python timm: the same weights, timm's resnet18 and create_transform with the logged data config. One of 256
  // samples may flip on a near-tie (different summation order): top-k within 100/256 %; the loss within 1e-3.
  const json oracle = json::parse(
      run_oracle("tools_oracle.py", concat({"validate", run.checkpoint().string(), "--num-samples", "256", "-b", "64"},
                                           logged_data_config(result.output))));
  const double d1 = std::abs(row["top1"].get<double>() - oracle["top1"].get<double>());
  const double d5 = std::abs(row["top5"].get<double>() - oracle["top5"].get<double>());
  const double dl = std::abs(row["loss"].get<double>() - oracle["loss"].get<double>());
  MESSAGE("vs Python timm: |d top1| " << d1 << ", |d top5| " << d5 << ", |d loss| " << dl);
  CHECK(d1 <= 100.0 / 256 + 1e-3);
  CHECK(d5 <= 100.0 / 256 + 1e-3);
  CHECK(dl <= 1e-3);
}

TEST_CASE("timm-validate on a folder of checkpoints writes one CSV row per checkpoint, best first") {
  const TrainedRun& run = trained_run();
  timm::test::TempDir tmp;
  const auto result = run_command({tool("timm-validate"), "--checkpoint", run.dir.string(), "--num-samples", "64", "-b",
                                   "32", "-j", "1", "--results-file", (tmp / "val.csv").string()});
  REQUIRE_MESSAGE(result.exit_code == 0, result.output);
  const json parsed = json::parse(run_oracle("tools_oracle.py", {"parse", (tmp / "val.csv").string()}));
  CHECK(parsed["rows"] == 3);  // last, checkpoint-0 and model_best
  CHECK(parsed["columns"] == json({"model", "top1", "top1_err", "top5", "top5_err", "loss", "param_count", "img_size",
                                   "crop_pct", "interpolation", "checkpoint"}));

  SUBCASE("bad input fails with a usage error") {
    const auto missing = run_command({tool("timm-validate"), "--checkpoint", (tmp / "none").string()});
    CHECK(missing.exit_code == 2);
    CHECK(missing.output.find("--checkpoint") != std::string::npos);
    const auto unknown = run_command({tool("timm-validate"), "--no-such-flag"});
    CHECK(unknown.exit_code == 2);
    // Crop modes are the registered crops; the plugins' list is in the message.
    const auto crop = run_command({tool("timm-validate"), "--checkpoint", run.checkpoint().string(), "--crop-mode",
                                   "zoom", "--num-samples", "8", "-j", "1"});
    CHECK(crop.exit_code == 2);
    CHECK_MESSAGE(crop.output.find("no registered crop for crop mode 'zoom'; the crops: ") != std::string::npos,
                  crop.output);
  }
}

TEST_CASE("timm-validate --valid-labels scores the outputs at those indices as validate.py does") {
  const TrainedRun& run = trained_run();
  timm::test::TempDir tmp;
  // A permutation of the 10 classes: dataset label i is scored against output 9 - i.
  const fs::path labels = tmp / "valid.txt";
  std::ofstream(labels) << "9\n8\n7\n6\n5\n4\n3\n2\n1\n0\n";
  const auto result =
      run_command({tool("timm-validate"), "--checkpoint", run.checkpoint().string(), "--num-samples", "128", "-b", "64",
                   "-j", "1", "--valid-labels", labels.string(), "--results-file", (tmp / "val.json").string()});
  REQUIRE_MESSAGE(result.exit_code == 0, result.output);
  const json row = parse_json_file(tmp / "val.json");
  const json oracle =
      json::parse(run_oracle("tools_oracle.py", concat({"validate", run.checkpoint().string(), "--num-samples", "128",
                                                        "-b", "64", "--valid-labels", labels.string()},
                                                       logged_data_config(result.output))));
  CHECK(std::abs(row["top1"].get<double>() - oracle["top1"].get<double>()) <= 100.0 / 128 + 1e-3);
  CHECK(std::abs(row["top5"].get<double>() - oracle["top5"].get<double>()) <= 100.0 / 128 + 1e-3);
  CHECK(std::abs(row["loss"].get<double>() - oracle["loss"].get<double>()) <= 1e-3);
  // The permuted labels score far below the trained model's own (one run's top-1 is above 60%).
  CHECK(row["top1"].get<double>() < 40.0);

  // Bad files name the file, the line and what is wrong.
  const auto bad = [&](const std::string& text, const std::string& message) {
    std::ofstream(tmp / "bad.txt") << text;
    const auto r = run_command({tool("timm-validate"), "--checkpoint", run.checkpoint().string(), "--num-samples", "8",
                                "-j", "1", "--valid-labels", (tmp / "bad.txt").string()});
    CHECK(r.exit_code == 2);
    CHECK_MESSAGE(r.output.find(message) != std::string::npos, r.output);
  };
  bad("0\n1\nseven\n", "line 3: expected a class index, got 'seven'");
  bad("0\n10\n", "line 2: class 10 is not one of the model's 10");
  bad("0\n1\n2\n", ": 3 labels for a dataset of 10 classes");
}

TEST_CASE("timm-validate --use-ema validates the EMA weights of a --model-ema run: its '(EMA)' evaluation exactly") {
  timm::test::TempDir tmp;
  const auto run = run_command({tool("timm-run"),
                                "--model",
                                "resnet18",
                                "--epochs",
                                "1",
                                "--train-num-samples",
                                "128",
                                "--val-num-samples",
                                "64",
                                "-b",
                                "32",
                                "-j",
                                "1",
                                "--model-ema",
                                "--model-ema-decay",
                                "0.9",
                                "--output",
                                tmp.path().string(),
                                "--experiment",
                                "ema"});
  REQUIRE_MESSAGE(run.exit_code == 0, run.output);
  const std::string checkpoint = (tmp / "ema" / "last.safetensors").string();
  const auto validate = [&](const std::vector<std::string>& extra) {
    const auto r = run_command(concat({tool("timm-validate"), "--checkpoint", checkpoint, "--num-samples", "64", "-b",
                                       "32", "-j", "1", "--use-train-size"},
                                      extra));
    REQUIRE_MESSAGE(r.exit_code == 0, r.output);
    return r.output;
  };
  const std::string ema = validate({"--use-ema"});
  CHECK(ema.find("Loaded state_dict_ema from checkpoint") != std::string::npos);
  // timm-run's last "Test (EMA)" line and its plain "Test" line, top-1 averages.
  const std::string run_ema = last_capture(run.output, R"(Test \(EMA\): .*Acc@1: +[0-9.]+ \( *([0-9.]+)\))");
  const std::string run_plain = last_capture(run.output, R"(Test: .*Acc@1: +[0-9.]+ \( *([0-9.]+)\))");
  CHECK(last_capture(ema, R"( \* Acc@1 ([0-9.]+) )") == run_ema);
  CHECK(last_capture(run.output, R"(Test top-1: .* loss: ([0-9.]+))") ==
        last_capture(ema, R"( \* Loss ([0-9.]+) over 64 images)"));
  CHECK(last_capture(validate({}), R"( \* Acc@1 ([0-9.]+) )") == run_plain);
  // A checkpoint without EMA weights: its weights, with a warning.
  const auto plain = run_command({tool("timm-validate"), "--checkpoint", trained_run().checkpoint().string(),
                                  "--num-samples", "8", "-j", "1", "--use-ema"});
  REQUIRE_MESSAGE(plain.exit_code == 0, plain.output);
  CHECK(plain.output.find("holds no EMA weights (a run without --model-ema); validating its weights") !=
        std::string::npos);
}

TEST_CASE("timm-validate --real-labels scores ImageNet-named images by their real labels (test_real_labels: timm's)") {
  const TrainedRun& run = trained_run();
  timm::test::TempDir tmp;
  // 30 test images as DIR/<label>/ILSVRC2012_val_<i>.JPEG; DIR.json gives each its own label.
  const fs::path images = tmp / "val";
  run_oracle("tools_oracle.py", {"valimages", images.string(), "--num-samples", "30"});
  const std::vector<std::string> common{
      tool("timm-validate"), "--checkpoint", run.checkpoint().string(), "--data-dir", images.string(), "-j", "1"};
  const auto plain = run_command(common);
  REQUIRE_MESSAGE(plain.exit_code == 0, plain.output);
  const auto real = run_command(concat(common, {"--real-labels", images.string() + ".json"}));
  REQUIRE_MESSAGE(real.exit_code == 0, real.output);
  // One real label per image, its own: the same top-1 and top-5.
  CHECK(last_capture(real.output, R"( \* Acc@1 ([0-9.]+) )") == last_capture(plain.output, R"( \* Acc@1 ([0-9.]+) )"));
  CHECK(last_capture(real.output, R"(Acc@5 ([0-9.]+) \()") == last_capture(plain.output, R"(Acc@5 ([0-9.]+) \()"));
  // A subset of the validation set has fewer samples than entries (timm asserts).
  const auto subset = run_command(concat(common, {"--real-labels", images.string() + ".json", "--num-samples", "10"}));
  CHECK(subset.exit_code == 2);
  CHECK(subset.output.find("30 entries for a dataset of 10 samples") != std::string::npos);
}

TEST_CASE("the tools take every flag of timm's validate.py, benchmark.py and inference.py, or say why not") {
  struct Case {
    std::string tool;
    std::vector<std::string> args;
    std::string message;
  };
  const std::vector<Case> cases{
      {"timm-validate", {"--torchscript"}, "--torchscript is not supported: TorchScript compiles Python models"},
      {"timm-validate", {"--torchcompile", "inductor"}, "--torchcompile is not supported: torch.compile compiles"},
      {"timm-validate", {"--aot-autograd"}, "--aot-autograd is not supported: AOT Autograd compiles Python models"},
      {"timm-validate", {"--fuser", "te"}, "--fuser is not supported: TorchScript fusers"},
      {"timm-validate", {"--tf-preprocessing"}, "--tf-preprocessing is not supported: it is TensorFlow's"},
      {"timm-validate", {"--dataset-download"}, "--dataset-download is not supported: timm-cpp reads datasets from "},
      {"timm-validate", {"--device", "cuda"}, "--device 'cuda': the tools run on the CPU only (--device cpu)"},
      {"timm-validate", {"--num-gpu", "2"}, "--num-gpu 2: expected 1 (DataParallel over several GPUs"},
      {"timm-validate", {"--input-img-mode", "RGB"}, "--input-img-mode 'RGB' gives 3-channel images, but the model "},
      {"timm-validate", {"--input-img-mode", "CMYK"}, "--input-img-mode 'CMYK': expected 'RGB' or 'L'"},
      {"timm-benchmark", {"--detail"}, "--detail is not supported: its fwd/bwd/opt breakdown"},
      {"timm-benchmark", {"--torchscript"}, "--torchscript is not supported"},
      {"timm-benchmark", {"--device", "mps"}, "--device 'mps': the tools run on the CPU only"},
      {"timm-infer", {"--aot-autograd"}, "--aot-autograd is not supported"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.tool);
    CAPTURE(c.args.front());
    const auto r = run_command(concat({tool(c.tool)}, c.args));
    CHECK(r.exit_code == 2);
    CHECK_MESSAGE(r.output.find(c.message) != std::string::npos, r.output);
  }
  // The accepted ones run: --device cpu, --num-gpu 1, --no-prefetcher, --pin-mem, --input-img-mode L, changing
  // nothing; --seed seeds the random weights of a run without a checkpoint (validate.py's random_seed).
  const auto loss_with = [&](const std::vector<std::string>& extra) {
    const auto r = run_command(concat({tool("timm-validate"), "--num-samples", "16", "-b", "16", "-j", "1"}, extra));
    REQUIRE_MESSAGE(r.exit_code == 0, r.output);
    return last_capture(r.output, R"( \* Loss ([0-9.]+) over 16 images)");
  };
  const std::string seed_1 = loss_with(
      {"--seed", "1", "--device", "cpu", "--num-gpu", "1", "--no-prefetcher", "--pin-mem", "--input-img-mode", "L"});
  CHECK(loss_with({"--seed", "1"}) == seed_1);
  CHECK(loss_with({"--seed", "2"}) != seed_1);
}

TEST_CASE(
    "timm-validate and timm-benchmark evaluate at the pretrained cfg's test size and crop unless --use-train-size") {
  // resnet18's cfg: 224 px at crop 0.95, tested at 288 px at crop 1.0 (timm's
  // resolve_data_config in test_data_config). timm-validate on Fashion-MNIST
  // keeps the dataset's 28 px; the crop is the test one, as validate.py's.
  const auto crop_with = [&](const std::vector<std::string>& extra) {
    const auto r = run_command(concat(
        {tool("timm-validate"), "--checkpoint", trained_run().checkpoint().string(), "--num-samples", "8"}, extra));
    REQUIRE_MESSAGE(r.exit_code == 0, r.output);
    CHECK(last_capture(r.output, R"(input_size: (\(1, 28, 28\)))") == "(1, 28, 28)");
    return last_capture(r.output, R"(crop_pct: ([0-9.]+))");
  };
  CHECK(crop_with({}) == "1");
  CHECK(crop_with({"--use-train-size"}) == "0.95");
  CHECK(crop_with({"--crop-pct", "0.9"}) == "0.9");

  timm::test::TempDir tmp;
  const auto img_size_with = [&](const std::vector<std::string>& extra) {
    const fs::path file = tmp / "bench.json";
    const auto r =
        run_command(concat({tool("timm-benchmark"), "--model", "resnet18", "-b", "1", "--bench", "inference",
                            "--num-warm-iter", "0", "--num-bench-iter", "1", "--results-file", file.string()},
                           extra));
    REQUIRE_MESSAGE(r.exit_code == 0, r.output);
    return parse_json_file(file)["infer_img_size"].get<int64_t>();
  };
  CHECK(img_size_with({}) == 288);
  CHECK(img_size_with({"--use-train-size"}) == 224);
  CHECK(img_size_with({"--img-size", "96"}) == 96);
}

TEST_CASE("timm-validate draws a progress bar on a terminal") {
  const TrainedRun& run = trained_run();
  const auto result = run_command(
      {tool("timm-validate"), "--checkpoint", run.checkpoint().string(), "--num-samples", "64", "-b", "32", "-j", "1"},
      std::chrono::seconds(300), {"TIMM_PROGRESS=1"});
  REQUIRE_MESSAGE(result.exit_code == 0, result.output);
  CHECK(result.output.find("\rTest [###############...............] 1/2") != std::string::npos);
  CHECK(result.output.find("Test: [") == std::string::npos);  // no plain lines under the bar
  CHECK(result.output.find(" * Acc@1 ") != std::string::npos);
}

TEST_CASE("timm-infer's top-5 equal Python timm's for the same images and weights") {
  const TrainedRun& run = trained_run();
  timm::test::TempDir tmp;
  // The same explicit preprocessing on both sides.
  const std::vector<std::string> data = {"--img-size", "28",    "--interpolation", "bicubic",    "--mean",
                                         "0.286",      "--std", "0.353",           "--crop-pct", "0.95"};
  struct Case {
    const char* name;
    std::vector<std::string> tool_args, oracle_args;
    const char* file;
  };
  const fs::path images = tmp / "images";
  run_oracle("tools_oracle.py", {"images", images.string(), "--num-samples", "12"});
  const std::vector<Case> cases = {
      {"fashion-mnist test set", {"--num-samples", "40"}, {"--num-samples", "40"}, "fmnist.json"},
      {"flat image folder",
       {"--data-dir", images.string(), "--label-type", "none"},
       {"--folder", images.string()},
       "folder.json"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.name);
    const auto result =
        run_command(concat(concat({tool("timm-infer"), "--checkpoint", run.checkpoint().string(), "-b", "16", "-j", "1",
                                   "--include-index", "--results-file", (tmp / c.file).string()},
                                  c.tool_args),
                           data));
    REQUIRE_MESSAGE(result.exit_code == 0, result.output);
    const json ours = parse_json_file(tmp / c.file);
    const json theirs = json::parse(run_oracle(
        "tools_oracle.py", concat(concat({"infer", run.checkpoint().string(), "-b", "16"}, c.oracle_args), data)));
    REQUIRE(!ours.empty());
    REQUIRE(ours.size() == theirs.size());
    // Probabilities within 1e-4; the class order equal except between classes whose probabilities are that close.
    double max_prob_diff = 0.0;
    int order_differs = 0;
    for (std::size_t i = 0; i < ours.size(); ++i) {
      CHECK(ours[i]["filename"] == theirs[i]["filename"]);
      for (std::size_t k = 0; k < 5; ++k) {
        const double their_prob = theirs[i]["prob"][k].get<double>();
        max_prob_diff = timm::test::worst_diff(max_prob_diff, std::abs(ours[i]["prob"][k].get<double>() - their_prob));
        if (ours[i]["index"][k] == theirs[i]["index"][k]) continue;
        ++order_differs;
        // The class we rank k-th is one timm ranks j-th with a probability that
        // close; only the last rank may swap with a class outside timm's top 5.
        std::size_t j = 0;
        while (j < 5 && theirs[i]["index"][j] != ours[i]["index"][k]) ++j;
        if (j == 5) {
          CHECK_MESSAGE(k == 4, "sample " << i << " rank " << k << ": class " << ours[i]["index"][k]
                                          << " is not in timm's top 5");
          continue;
        }
        const double gap = std::abs(theirs[i]["prob"][j].get<double>() - their_prob);
        CHECK_MESSAGE(gap <= 1e-4, "sample " << i << " rank " << k << " is timm's rank " << j);
      }
    }
    MESSAGE(c.name << ": " << ours.size() << " images, max |d prob| " << max_prob_diff << ", ranks swapped on ties "
                   << order_differs);
    CHECK(max_prob_diff <= 1e-4);
  }

  SUBCASE("CSV results parse, with inference.py's columns") {
    const auto result = run_command(
        concat({tool("timm-infer"), "--checkpoint", run.checkpoint().string(), "--num-samples", "10", "-b", "16", "-j",
                "1", "--topk", "3", "--include-index", "--results-file", (tmp / "p.csv").string()},
               data));
    REQUIRE_MESSAGE(result.exit_code == 0, result.output);
    const json parsed = json::parse(run_oracle("tools_oracle.py", {"parse", (tmp / "p.csv").string()}));
    CHECK(parsed["rows"] == 10);
    CHECK(parsed["columns"] == json({"filename", "index", "label", "prob"}));
    CHECK(parsed["first"]["filename"] == "fashion-mnist[0]");
  }

  SUBCASE("inference.py's column names, --results-dir, --exclude-output, --no-console-results") {
    const std::vector<std::string> common = concat(
        {tool("timm-infer"), "--checkpoint", run.checkpoint().string(), "--num-samples", "4", "-j", "1", "--topk", "2"},
        data);
    const auto named =
        run_command(concat(common, {"--filename-col", "name", "--index-col", "idx", "--label-col", "lab",
                                    "--output-col", "p", "--include-index", "--results-dir", (tmp / "out").string()}));
    REQUIRE_MESSAGE(named.exit_code == 0, named.output);
    CHECK(named.output.find("--result") != std::string::npos);  // printed beside the file, as inference.py
    // inference.py's default name in --results-dir: <model>-<img size>.csv.
    const json parsed =
        json::parse(run_oracle("tools_oracle.py", {"parse", (tmp / "out" / "resnet18-28.csv").string()}));
    CHECK(parsed["rows"] == 4);
    CHECK(parsed["columns"] == json({"name", "idx", "lab", "p"}));
    const auto excluded = run_command(concat(common, {"--exclude-output", "--label-type", "none", "--results-file",
                                                      (tmp / "ex.csv").string(), "--no-console-results"}));
    REQUIRE_MESSAGE(excluded.exit_code == 0, excluded.output);
    CHECK(excluded.output.find("--result") == std::string::npos);
    const json indices = json::parse(run_oracle("tools_oracle.py", {"parse", (tmp / "ex.csv").string()}));
    CHECK(indices["columns"] == json({"filename", "index"}));
  }
}

TEST_CASE("timm-benchmark measures inference and training and writes its results") {
  timm::test::TempDir tmp;
  for (const char* file : {"bench.json", "bench.csv"}) {
    CAPTURE(file);
    const auto result =
        run_command({tool("timm-benchmark"), "--model", "resnet18", "-b", "2", "--img-size", "64", "--num-warm-iter",
                     "1", "--num-bench-iter", "3", "--bench", "both", "--results-file", (tmp / file).string()});
    REQUIRE_MESSAGE(result.exit_code == 0, result.output);
    CHECK(result.output.find("Infer [3/3]. ") != std::string::npos);
    CHECK(result.output.find("Train [3/3]. ") != std::string::npos);
    const json parsed = json::parse(run_oracle("tools_oracle.py", {"parse", (tmp / file).string()}));
    CHECK(parsed["rows"] == 1);
    CHECK(parsed["columns"] ==
          json({"model", "infer_samples_per_sec", "infer_step_time", "infer_batch_size", "infer_img_size",
                "train_samples_per_sec", "train_step_time", "train_batch_size", "train_img_size", "param_count"}));
    const json& first = parsed["first"];
    auto number = [&](const char* key) {
      return first[key].is_string() ? std::stod(first[key].get<std::string>()) : first[key].get<double>();
    };
    CHECK(number("infer_samples_per_sec") > 0.0);
    CHECK(number("train_samples_per_sec") > 0.0);
    CHECK(number("infer_step_time") > 0.0);
    CHECK(number("infer_img_size") == 64);
  }

  SUBCASE("bfloat16 autocast and channels-last on the CPU") {
    const auto result = run_command({tool("timm-benchmark"), "--model", "resnet18", "-b", "2", "--img-size", "64",
                                     "--num-warm-iter", "1", "--num-bench-iter", "2", "--amp", "--channels-last",
                                     "--results-file", (tmp / "amp.json").string()});
    REQUIRE_MESSAGE(result.exit_code == 0, result.output);
    const json row = parse_json_file(tmp / "amp.json");
    CHECK(row["infer_samples_per_sec"].get<double>() > 0.0);
    CHECK(row["train_samples_per_sec"].get<double>() > 0.0);
  }
}

TEST_CASE("timm-benchmark --bench fwd-bwd times forward + backward alone; bad arguments exit 2") {
  timm::test::TempDir tmp;
  const auto result =
      run_command({tool("timm-benchmark"), "--model", "resnet18", "-b", "2", "--img-size", "64", "--num-warm-iter", "1",
                   "--num-bench-iter", "2", "--bench", "fwd-bwd", "--results-file", (tmp / "fb.json").string()});
  REQUIRE_MESSAGE(result.exit_code == 0, result.output);
  CHECK(result.output.find("FwdBwd [2/2]. ") != std::string::npos);
  CHECK(result.output.find("Created ") == std::string::npos);  // no optimizer
  const json row = parse_json_file(tmp / "fb.json");
  CHECK(row["fwd_bwd_samples_per_sec"].get<double>() > 0.0);
  CHECK(row["fwd_bwd_img_size"].get<double>() == 64);
  CHECK_FALSE(row.contains("train_samples_per_sec"));
  CHECK_FALSE(row.contains("infer_samples_per_sec"));

  // benchmark.py's --grad-checkpointing: the blocks run checkpointed.
  const auto checkpointed =
      run_command({tool("timm-benchmark"), "--model", "resnet18", "-b", "2", "--img-size", "64", "--num-warm-iter", "0",
                   "--num-bench-iter", "1", "--bench", "fwd-bwd", "--grad-checkpointing"});
  REQUIRE_MESSAGE(checkpointed.exit_code == 0, checkpointed.output);
  CHECK(checkpointed.output.find("Gradient checkpointing enabled; CPU allocator: ") != std::string::npos);
  CHECK(checkpointed.output.find("FwdBwd [1/1]. ") != std::string::npos);

  // --profile: torch's profiler over more steps, its Chrome trace with the model's ops.
  const fs::path trace = tmp / "trace.json";
  const auto profiled =
      run_command({tool("timm-benchmark"), "--model", "resnet18", "-b", "2", "--img-size", "64", "--num-warm-iter", "0",
                   "--num-bench-iter", "1", "--bench", "fwd-bwd", "--profile", trace.string(), "--profile-steps", "1"});
  REQUIRE_MESSAGE(profiled.exit_code == 0, profiled.output);
  CHECK(profiled.output.find("Profiled 1 steps; trace written to ") != std::string::npos);
  CHECK_FALSE(fs::exists(tmp / "trace.json.partial"));
  const json events = parse_json_file(trace).at("traceEvents");
  auto count_op = [&](const std::string& name) {
    return std::count_if(events.begin(), events.end(),
                         [&](const json& e) { return e.value("cat", "") == "cpu_op" && e.value("name", "") == name; });
  };
  CHECK(count_op("aten::convolution") == 20);  // resnet18's convs, once per step
  CHECK(count_op("aten::convolution_backward") == 20);
  const auto both = run_command({tool("timm-benchmark"), "--profile", (tmp / "t.json").string()});
  CHECK(both.exit_code == 2);
  CHECK(both.output.find("--profile records one mode") != std::string::npos);
  const auto nowhere =
      run_command({tool("timm-benchmark"), "--bench", "fwd-bwd", "--profile", (tmp / "missing" / "t.json").string()});
  CHECK(nowhere.exit_code == 2);
  CHECK(nowhere.output.find("does not exist") != std::string::npos);
  CHECK_FALSE(fs::exists(tmp / "t.json"));

  const auto mode = run_command({tool("timm-benchmark"), "--bench", "fast"});
  CHECK(mode.exit_code == 2);
  CHECK(mode.output.find("expected inference, train, both or fwd-bwd") != std::string::npos);
  const auto iters = run_command({tool("timm-benchmark"), "--num-bench-iter", "0"});
  CHECK(iters.exit_code == 2);
  CHECK(iters.output.find("--num-bench-iter '0': expected a positive integer") != std::string::npos);
  const auto unknown = run_command({tool("timm-benchmark"), "--iters", "3"});
  CHECK(unknown.exit_code == 2);
  CHECK(unknown.output.find("unrecognized argument '--iters'") != std::string::npos);
}

TEST_CASE("timm-benchmark takes benchmark.py's optimizer, clipping, dropout and precision flags") {
  timm::test::TempDir tmp;
  // AGC clipping between backward and the step, the head left out: one
  // aten::where per clipped tensor (resnet18: 62 parameters, 60 without the
  // head), none without --clip-grad.
  const auto where_ops = [&](const std::vector<std::string>& extra) {
    const fs::path trace = tmp / "trace.json";
    const auto r = run_command(
        concat({tool("timm-benchmark"), "--model", "resnet18", "-b", "2", "--img-size", "64", "--num-warm-iter", "0",
                "--num-bench-iter", "1", "--bench", "train", "--profile", trace.string(), "--profile-steps", "1"},
               extra));
    REQUIRE_MESSAGE(r.exit_code == 0, r.output);
    const json events = parse_json_file(trace).at("traceEvents");
    return std::make_pair(r.output, std::count_if(events.begin(), events.end(), [](const json& e) {
                            return e.value("cat", "") == "cpu_op" && e.value("name", "") == "aten::where";
                          }));
  };
  const auto [output, clipped] =
      where_ops({"--opt", "adamw", "--opt-betas", "0.8", "0.9", "--opt-eps", "1e-6", "--drop", "0.1", "--drop-path",
                 "0.1", "--clip-grad", "0.01", "--clip-mode", "agc"});
  CHECK(clipped == 60);
  CHECK(output.find("Created AdamW (adamw) optimizer: lr: 0.0001, betas: (0.8, 0.9), eps: 1e-06") != std::string::npos);
  CHECK(where_ops({}).second == 0);
  // Bad values are usage errors naming the flag.
  const auto bad_mode =
      run_command({tool("timm-benchmark"), "--model", "resnet18", "-b", "2", "--img-size", "64", "--num-warm-iter", "0",
                   "--num-bench-iter", "1", "--bench", "train", "--clip-grad", "1", "--clip-mode", "bad"});
  CHECK(bad_mode.exit_code == 2);
  CHECK(bad_mode.output.find("--clip-mode 'bad': expected norm, value or agc") != std::string::npos);
  // --precision: the weights and input in bfloat16, or autocast (which --amp picks over it).
  const std::vector<std::string> quick{
      tool("timm-benchmark"), "--model", "resnet18",         "-b", "2", "--img-size", "64",
      "--num-warm-iter",      "0",       "--num-bench-iter", "1"};
  const auto bf16 = run_command(concat(quick, {"--precision", "bfloat16"}));
  REQUIRE_MESSAGE(bf16.exit_code == 0, bf16.output);
  CHECK(bf16.output.find("AMP not enabled; weights and input in bfloat16.") != std::string::npos);
  const auto overridden = run_command(concat(quick, {"--bench", "inference", "--precision", "float16", "--amp"}));
  REQUIRE_MESSAGE(overridden.exit_code == 0, overridden.output);
  CHECK(overridden.output.find("Overriding precision to 'amp' since --amp flag set.") != std::string::npos);
  CHECK(overridden.output.find("Using native Torch AMP (bfloat16) on the CPU.") != std::string::npos);
  const auto bad_precision = run_command(concat(quick, {"--precision", "int8"}));
  CHECK(bad_precision.exit_code == 2);
  CHECK(bad_precision.output.find("--precision 'int8': expected amp, amp_bfloat16") != std::string::npos);
  const auto no_drop_block = run_command({tool("timm-benchmark"), "--model", "vit_tiny_patch16_224", "--model-kwargs",
                                          "depth=1", "-b", "2", "--bench", "inference", "--drop-block", "0.1"});
  CHECK(no_drop_block.exit_code == 2);
  CHECK_MESSAGE(no_drop_block.output.find("drop_block_rate") != std::string::npos, no_drop_block.output);
}

TEST_CASE("timm-benchmark --model-list and a --model wildcard benchmark each model, fastest first") {
  timm::test::TempDir tmp;
  std::ofstream(tmp / "models.txt") << "resnet18\nresnet10t\n\n";
  const std::vector<std::string> quick{"-b", "2",       "--img-size", "64", "--num-warm-iter", "0", "--num-bench-iter",
                                       "1",  "--bench", "inference"};
  const auto listed = run_command(concat({tool("timm-benchmark"), "--model-list", (tmp / "models.txt").string(),
                                          "--results-file", (tmp / "bulk.json").string()},
                                         quick));
  REQUIRE_MESSAGE(listed.exit_code == 0, listed.output);
  const json rows = parse_json_file(tmp / "bulk.json");
  REQUIRE(rows.is_array());
  REQUIRE(rows.size() == 2);
  std::set<std::string> models{rows[0]["model"].get<std::string>(), rows[1]["model"].get<std::string>()};
  CHECK(models == std::set<std::string>{"resnet18", "resnet10t"});
  CHECK(rows[0]["infer_samples_per_sec"].get<double>() >= rows[1]["infer_samples_per_sec"].get<double>());
  const auto pattern = run_command(concat({tool("timm-benchmark"), "--model", "resnet1[08]"}, quick));
  REQUIRE_MESSAGE(pattern.exit_code == 0, pattern.output);
  CHECK(pattern.output.find("Running bulk benchmark on these models: resnet18") != std::string::npos);
  const auto nothing = run_command({tool("timm-benchmark"), "--model", "zzz*"});
  CHECK(nothing.exit_code == 2);
  CHECK(nothing.output.find("--model 'zzz*': no registered model matches it") != std::string::npos);
  std::ofstream(tmp / "empty.txt") << "\n";
  const auto empty = run_command({tool("timm-benchmark"), "--model-list", (tmp / "empty.txt").string()});
  CHECK(empty.exit_code == 2);
  CHECK(empty.output.find("no model names in it") != std::string::npos);
}

TEST_CASE("timm-benchmark --min-bench-time times steps past --num-bench-iter until the time has passed") {
  timm::test::TempDir tmp;
  const double min_seconds = 0.5;
  const auto result = run_command({tool("timm-benchmark"), "--model", "resnet18", "-b", "2", "--img-size", "64",
                                   "--num-warm-iter", "1", "--num-bench-iter", "1", "--min-bench-time", "0.5",
                                   "--bench", "fwd-bwd", "--results-file", (tmp / "fb.json").string()});
  REQUIRE_MESSAGE(result.exit_code == 0, result.output);
  // One progress line per timed step ("FwdBwd [k/k]."); the last names how many were timed.
  int64_t timed = 0;
  for (size_t at = result.output.find("FwdBwd ["); at != std::string::npos;
       at = result.output.find("FwdBwd [", at + 1)) {
    timed = std::stoll(result.output.substr(at + 8));
  }
  CHECK(timed >= 2);
  // The figure spans the whole timed window: steps x batch / rate >= the minimum time.
  const double rate = parse_json_file(tmp / "fb.json")["fwd_bwd_samples_per_sec"].get<double>();
  REQUIRE(std::isfinite(rate));
  CHECK(timed * 2 / rate >= min_seconds * 0.99);  // the rate is rounded to 0.01

  for (const std::string bad : {"-1", "nan"}) {
    const auto rejected = run_command({tool("timm-benchmark"), "--min-bench-time", bad});
    CHECK(rejected.exit_code == 2);
    CHECK(rejected.output.find("--min-bench-time '" + bad + "': expected seconds >= 0") != std::string::npos);
  }
}

TEST_CASE("timm-plot renders summary.csv into a well-formed SVG with the CSV's points") {
  const TrainedRun& run = trained_run();
  timm::test::TempDir tmp;
  // The trained run's one-epoch summary, and a longer one with an epoch lacking eval.
  std::ofstream(tmp / "long.csv") << "epoch,train_loss,eval_loss,eval_top1,eval_top5,lr\r\n"
                                  << "0,2.3,2.1,20.5,60.25,0.1\r\n1,1.7,,,,0.075\r\n2,1.2,1.1,61.0,95.5,0.05\r\n"
                                  << "3,0.9,0.95,70.125,97.0,0.025\r\n";
  for (const fs::path& csv : {run.dir / "summary.csv", tmp / "long.csv"}) {
    CAPTURE(csv);
    const fs::path svg = tmp / (csv.stem().string() + ".svg");
    const auto result = run_command({tool("timm-plot"), csv.string(), svg.string()});
    REQUIRE_MESSAGE(result.exit_code == 0, result.output);
    const json check = json::parse(run_oracle("tools_oracle.py", {"svg", svg.string(), "--csv", csv.string()}));
    MESSAGE(check.dump());
    CHECK(check["series"] == json({"eval_loss", "eval_top1", "eval_top5", "lr", "train_loss"}));
    // Coordinates carry 3 decimals over a plot area ~150 px high.
    CHECK(check["max_rel_error"].get<double>() < 1e-4);
  }
  const auto bad = run_command({tool("timm-plot"), (tmp / "missing.csv").string(), (tmp / "x.svg").string()});
  CHECK(bad.exit_code == 1);
}

namespace {

// A tool's run on the trained checkpoint with --results-file; its output and its results.
struct ToolRun {
  std::string output;
  json results;
};

ToolRun run_tool(const std::string& name, const fs::path& results, const std::vector<std::string>& args,
                 const std::vector<std::string>& env = {}) {
  const auto result =
      run_command(concat({tool(name), "--results-file", results.string()}, args), std::chrono::seconds(600), env);
  REQUIRE_MESSAGE(result.exit_code == 0, result.output);
  return {result.output, parse_json_file(results)};
}

double top_diff(const json& a, const json& b, const char* key) {
  return std::abs(a[key].get<double>() - b[key].get<double>());
}

double relative_diff(double a, double b) { return std::abs(a - b) / std::max(std::abs(b), 1e-12); }

// timm-infer's rows `ours` against `reference` (the same images): the k-th
// largest probabilities within `tolerance` (sorted values move by at most the
// largest change of any value, whatever the order), and the classes of each
// rank equal except where the reference's probabilities of two ranks are
// within `2 * tolerance` (a near-tie may swap).
void check_predictions(const json& ours, const json& reference, double tolerance) {
  REQUIRE(ours.size() == reference.size());
  REQUIRE(!ours.empty());
  double worst = 0.0;
  int swapped = 0;
  for (std::size_t i = 0; i < ours.size(); ++i) {
    CHECK(ours[i]["filename"] == reference[i]["filename"]);
    const json& p = reference[i]["prob"];
    for (std::size_t k = 0; k < p.size(); ++k) {
      worst = std::max(worst, std::abs(ours[i]["prob"][k].get<double>() - p[k].get<double>()));
      if (ours[i]["index"][k] == reference[i]["index"][k]) continue;
      ++swapped;
      const double gap_prev = k > 0 ? p[k - 1].get<double>() - p[k].get<double>() : 1.0;
      const double gap_next = k + 1 < p.size() ? p[k].get<double>() - p[k + 1].get<double>() : 0.0;
      CHECK_MESSAGE(std::min(gap_prev, gap_next) <= 2 * tolerance, "image " << i << " rank " << k << ": class "
                                                                            << ours[i]["index"][k] << ", reference "
                                                                            << reference[i]["index"][k]);
    }
  }
  MESSAGE("max |d prob| by rank " << worst << ", ranks swapped on near-ties " << swapped);
  CHECK(worst <= tolerance);
}

}  // namespace

TEST_CASE("timm-validate --amp (bfloat16) is within tolerance of float32 and --channels-last matches it") {
  const TrainedRun& run = trained_run();
  timm::test::TempDir tmp;
  const std::vector<std::string> common = {
      "--checkpoint", run.checkpoint().string(), "--num-samples", "256", "-b", "64", "-j", "1"};
  const ToolRun fp32 = run_tool("timm-validate", tmp / "fp32.json", common);
  CHECK(fp32.output.find("Validating in float32. AMP not enabled.") != std::string::npos);
  const ToolRun bf16 =
      run_tool("timm-validate", tmp / "bf16.json", concat(common, {"--amp", "--amp-dtype", "bfloat16"}));
  CHECK(bf16.output.find("Validating in mixed precision with native PyTorch AMP (bfloat16") != std::string::npos);
  const ToolRun cl = run_tool("timm-validate", tmp / "cl.json", concat(common, {"--channels-last"}));
  const ToolRun bf16_cl = run_tool("timm-validate", tmp / "bf16_cl.json",
                                   concat(common, {"--amp", "--amp-dtype", "bfloat16", "--channels-last"}));

  // bfloat16 keeps 8 bits of mantissa: logits move by about 1%, flipping the
  // predictions of near-ties. Tolerance: top-1 and top-5 within 8 of the 256
  // samples (3.125 points), the mean loss within 2% relative. The loss must
  // differ, else autocast did not run.
  const double sample = 100.0 / 256;
  for (const ToolRun* amp : {&bf16, &bf16_cl}) {
    MESSAGE("bf16 vs fp32: top1 " << amp->results["top1"] << " / " << fp32.results["top1"] << ", top5 "
                                  << amp->results["top5"] << " / " << fp32.results["top5"] << ", loss "
                                  << amp->results["loss"] << " / " << fp32.results["loss"]);
    CHECK(top_diff(amp->results, fp32.results, "top1") <= 8 * sample + 1e-3);
    CHECK(top_diff(amp->results, fp32.results, "top5") <= 8 * sample + 1e-3);
    CHECK(relative_diff(amp->results["loss"].get<double>(), fp32.results["loss"].get<double>()) <= 0.02);
    CHECK(amp->results["loss"].get<double>() != fp32.results["loss"].get<double>());
  }
  // channels_last changes the convolution kernels' summation order only:
  // top-1 and top-5 within one sample of 256, the loss within 1e-4 relative.
  CHECK(top_diff(cl.results, fp32.results, "top1") <= sample + 1e-3);
  CHECK(top_diff(cl.results, fp32.results, "top5") <= sample + 1e-3);
  CHECK(relative_diff(cl.results["loss"].get<double>(), fp32.results["loss"].get<double>()) <= 1e-4);

  // validate.py's choices only.
  const auto dtype = run_command({tool("timm-validate"), "--checkpoint", run.checkpoint().string(), "--amp",
                                  "--amp-dtype", "float64", "--num-samples", "8", "-j", "1"});
  CHECK(dtype.exit_code == 2);
  CHECK_MESSAGE(dtype.output.find("--amp-dtype 'float64': expected float16 or bfloat16") != std::string::npos,
                dtype.output);
}

TEST_CASE("timm-validate --reparam folds RepVGG's blocks as Python timm's validate.py --reparam; timm-benchmark too") {
  timm::test::TempDir tmp;
  const std::string checkpoint = (tmp / "repvgg_a0.safetensors").string();
  run_oracle("tools_oracle.py", {"save", checkpoint, "--model", "repvgg_a0"});
  const std::vector<std::string> common = {"--model",       "repvgg_a0", "--checkpoint", checkpoint, "--img-size", "64",
                                           "--num-samples", "64",        "-b",           "32",       "-j",         "1"};
  const ToolRun plain = run_tool("timm-validate", tmp / "plain.json", common);
  const ToolRun folded = run_tool("timm-validate", tmp / "folded.json", concat(common, {"--reparam"}));
  // repvgg_a0: the stem and 2 + 4 + 14 + 1 stage blocks.
  CHECK_MESSAGE(folded.output.find("Reparameterized model 'repvgg_a0'") != std::string::npos, folded.output);
  CHECK_MESSAGE(folded.output.find(": 22 blocks folded") != std::string::npos, folded.output);
  CHECK(plain.output.find("Reparameterized") == std::string::npos);
  CHECK(folded.results["param_count"].get<double>() < plain.results["param_count"].get<double>());
  // Folding reorders float sums only (the oracle's head is confident: no near-ties): the same hits, the loss
  // within 1e-4 relative; and Python timm's folded model gives the same within one sample and 1e-3.
  CHECK(folded.results["top1"] == plain.results["top1"]);
  CHECK(folded.results["top5"] == plain.results["top5"]);
  CHECK(relative_diff(folded.results["loss"].get<double>(), plain.results["loss"].get<double>()) <= 1e-4);
  const json oracle = json::parse(run_oracle("tools_oracle.py", concat({"validate", checkpoint, "--model", "repvgg_a0",
                                                                        "--num-samples", "64", "-b", "32", "--reparam"},
                                                                       logged_data_config(folded.output))));
  MESSAGE("folded: ours top1 " << folded.results["top1"] << " loss " << folded.results["loss"] << ", timm's top1 "
                               << oracle["top1"] << " loss " << oracle["loss"]);
  CHECK(top_diff(folded.results, oracle, "top1") <= 100.0 / 64 + 1e-3);
  CHECK(top_diff(folded.results, oracle, "top5") <= 100.0 / 64 + 1e-3);
  CHECK(std::abs(folded.results["loss"].get<double>() - oracle["loss"].get<double>()) <= 1e-3);

  const std::vector<std::string> bench = {
      "--model", "repvgg_a0",        "-b", "2", "--img-size", "64", "--bench", "inference", "--num-warm-iter",
      "1",       "--num-bench-iter", "1"};
  const ToolRun bench_plain = run_tool("timm-benchmark", tmp / "bench_plain.json", bench);
  const ToolRun bench_folded = run_tool("timm-benchmark", tmp / "bench_folded.json", concat(bench, {"--reparam"}));
  CHECK(bench_folded.output.find(": 22 blocks folded") != std::string::npos);
  CHECK(bench_folded.results["param_count"].get<double>() < bench_plain.results["param_count"].get<double>());
  // A model without multi-branch blocks is left as it is.
  const ToolRun resnet = run_tool("timm-benchmark", tmp / "resnet.json",
                                  {"--model", "resnet18", "-b", "2", "--img-size", "64", "--bench", "inference",
                                   "--num-warm-iter", "1", "--num-bench-iter", "1", "--reparam"});
  CHECK(resnet.output.find(": 0 blocks folded") != std::string::npos);
}

TEST_CASE("timm-infer --amp (bfloat16) is within tolerance of float32 and --channels-last matches it") {
  const TrainedRun& run = trained_run();
  timm::test::TempDir tmp;
  const std::vector<std::string> common = {
      "--checkpoint", run.checkpoint().string(), "--num-samples", "40", "-b", "16", "-j", "1", "--include-index"};
  const ToolRun fp32 = run_tool("timm-infer", tmp / "fp32.json", common);
  CHECK(fp32.output.find("Running inference in float32. AMP not enabled.") != std::string::npos);
  const ToolRun bf16 = run_tool("timm-infer", tmp / "bf16.json", concat(common, {"--amp", "--amp-dtype", "bfloat16"}));
  CHECK(bf16.output.find("Running inference in mixed precision with native PyTorch AMP (bfloat16") !=
        std::string::npos);
  const ToolRun cl = run_tool("timm-infer", tmp / "cl.json", concat(common, {"--channels-last"}));
  // bfloat16 logits and a bfloat16 softmax (inference.py's): probabilities by
  // rank within 0.03.
  check_predictions(bf16.results, fp32.results, 0.03);
  // channels_last: probabilities by rank within 1e-5.
  check_predictions(cl.results, fp32.results, 1e-5);
}

TEST_CASE("timm-validate and timm-infer --pretrained use the model's default weights from the hub cache") {
  timm::test::TempDir tmp;
  const fs::path cache = tmp / "cache", out = tmp / "out";
  // Seeded resnet18 weights as timm/resnet18.a1_in1k in a hub cache, and what
  // Python timm's create_model(pretrained=True) loads from it.
  run_oracle("hub_cache_oracle.py", {"make", cache.string(), "resnet18", out.string()});
  const std::vector<std::string> env = {"HF_HUB_CACHE=" + cache.string()};
  const std::vector<std::string> common = {"--model", "resnet18", "--num-samples", "128", "-b", "64", "-j", "1"};

  // validate.py: without --num-classes the pretrained head (1000 classes);
  // Fashion-MNIST's one channel adapts the stem as timm does. The same
  // numbers as validating Python timm's loaded state_dict as a checkpoint.
  const ToolRun pretrained = run_tool("timm-validate", tmp / "pre.json", concat(common, {"--pretrained"}), env);
  CHECK(pretrained.output.find("Loading pretrained weights from Hugging Face hub cache (timm/resnet18.a1_in1k)") !=
        std::string::npos);
  CHECK(pretrained.results["param_count"].get<double>() == doctest::Approx(11.68));  // 1000 classes, 1-channel stem
  const ToolRun loaded = run_tool("timm-validate", tmp / "loaded.json",
                                  concat(common, {"--checkpoint", (out / "loaded_1000_1.safetensors").string()}));
  for (const char* key : {"top1", "top5", "loss"}) CHECK_MESSAGE(pretrained.results[key] == loaded.results[key], key);

  // Three channels: the file's weights unchanged.
  const ToolRun rgb =
      run_tool("timm-validate", tmp / "rgb.json", concat(common, {"--pretrained", "--in-chans", "3"}), env);
  const ToolRun weights = run_tool("timm-validate", tmp / "weights.json",
                                   concat(common, {"--checkpoint", (out / "weights.safetensors").string()}));
  for (const char* key : {"top1", "top5", "loss"}) CHECK_MESSAGE(rgb.results[key] == weights.results[key], key);

  // --num-classes 10: a new head (timm's load_pretrained drops the classifier).
  const ToolRun head =
      run_tool("timm-validate", tmp / "head.json", concat(common, {"--pretrained", "--num-classes", "10"}), env);
  CHECK(head.results["param_count"].get<double>() == doctest::Approx(11.18));

  // timm-infer: the same predictions as with the loaded state_dict.
  const std::vector<std::string> infer = {"--model", "resnet18", "--num-samples",  "20", "-b", "8",
                                          "-j",      "1",        "--include-index"};
  const ToolRun infer_pretrained = run_tool("timm-infer", tmp / "ipre.json", concat(infer, {"--pretrained"}), env);
  const ToolRun infer_loaded = run_tool("timm-infer", tmp / "iloaded.json",
                                        concat(infer, {"--checkpoint", (out / "loaded_1000_1.safetensors").string()}));
  CHECK(infer_pretrained.results == infer_loaded.results);
  CHECK(infer_pretrained.results.size() == 20);

  // Weights not in the cache: a runtime error naming them.
  const fs::path empty = tmp / "empty";
  fs::create_directories(empty);
  const auto missing = run_command(concat({tool("timm-validate"), "--pretrained"}, common), std::chrono::seconds(300),
                                   {"HF_HUB_CACHE=" + empty.string()});
  CHECK(missing.exit_code == 1);
  CHECK_MESSAGE(
      missing.output.find("'timm/resnet18.a1_in1k' are not in the Hugging Face hub cache") != std::string::npos,
      missing.output);
}

TEST_CASE("timm-validate --crop-border-pixels trims each image's border first, as validate.py's TrimBorder") {
  const TrainedRun& run = trained_run();
  timm::test::TempDir tmp;
  const std::vector<std::string> common = {
      "--checkpoint", run.checkpoint().string(), "--num-samples", "128", "-b", "64", "-j", "1"};
  const ToolRun trimmed = run_tool("timm-validate", tmp / "trim.json", concat(common, {"--crop-border-pixels", "5"}));
  const ToolRun whole = run_tool("timm-validate", tmp / "whole.json", common);
  CHECK(trimmed.results["loss"] != whole.results["loss"]);  // 18x18 of 28x28 pixels: the border matters
  // Python timm: create_transform(..., crop_border_pixels=5) on the same weights; one sample may flip on a near-tie.
  const json oracle = json::parse(run_oracle(
      "tools_oracle.py",
      concat({"validate", run.checkpoint().string(), "--num-samples", "128", "-b", "64", "--crop-border-pixels", "5"},
             logged_data_config(trimmed.output))));
  CHECK(std::abs(trimmed.results["top1"].get<double>() - oracle["top1"].get<double>()) <= 100.0 / 128 + 1e-3);
  CHECK(std::abs(trimmed.results["loss"].get<double>() - oracle["loss"].get<double>()) <= 1e-3);

  const auto negative = run_command(concat({tool("timm-validate"), "--crop-border-pixels", "-1"}, common));
  CHECK(negative.exit_code == 2);
  CHECK(negative.output.find("--crop-border-pixels must be >= 0, got -1") != std::string::npos);
  const auto too_wide = run_command(concat({tool("timm-validate"), "--crop-border-pixels", "14"}, common));
  CHECK(too_wide.exit_code == 1);
  CHECK_MESSAGE(
      too_wide.output.find("TrimBorder(14): a 28x28 image has no pixels inside a border of 14") != std::string::npos,
      too_wide.output);
}

TEST_CASE(
    "--test-pool: timm-validate and timm-infer pool a CNN's logits over training-size windows (timm's "
    "TestTimePoolHead)") {
  const TrainedRun& run = trained_run();
  timm::test::TempDir tmp;
  const std::vector<std::string> common = {
      "--checkpoint", run.checkpoint().string(), "--num-samples", "64", "-b", "32", "-j", "1"};
  // 256 px > resnet18's 224: 2x2 windows of its 7x7 feature map on the 8x8 one.
  const ToolRun pooled =
      run_tool("timm-validate", tmp / "pool.json", concat(common, {"--test-pool", "--img-size", "256"}));
  CHECK(pooled.output.find("Target input size (256, 256) > pretrained default (224, 224), using test time pooling") !=
        std::string::npos);
  CHECK(pooled.results["crop_pct"] == 1.0);
  // Python timm: apply_test_time_pool on the same weights, crop_pct 1.0, as validate.py.
  const json oracle = json::parse(
      run_oracle("tools_oracle.py",
                 concat({"validate", run.checkpoint().string(), "--num-samples", "64", "-b", "32", "--test-pool"},
                        logged_data_config(pooled.output))));
  CHECK(oracle["pooled"] == true);
  CHECK(std::abs(pooled.results["top1"].get<double>() - oracle["top1"].get<double>()) <= 100.0 / 64 + 1e-3);
  CHECK(std::abs(pooled.results["loss"].get<double>() - oracle["loss"].get<double>()) <= 1e-3);
  const ToolRun unpooled = run_tool("timm-validate", tmp / "plain.json", concat(common, {"--img-size", "256"}));
  CHECK(unpooled.results["loss"] != pooled.results["loss"]);

  // Not larger than the training size (Fashion-MNIST's 28 px): the model as it is, as timm's.
  const ToolRun small = run_tool("timm-validate", tmp / "small.json", concat(common, {"--test-pool"}));
  CHECK(small.output.find("using test time pooling") == std::string::npos);

  const auto infer = run_command({tool("timm-infer"), "--checkpoint", run.checkpoint().string(), "--num-samples", "8",
                                  "-j", "1", "--test-pool", "--img-size", "256"});
  REQUIRE_MESSAGE(infer.exit_code == 0, infer.output);
  CHECK(infer.output.find("using test time pooling") != std::string::npos);

  // A transformer's tokens have no windows to pool (timm fails on its missing pool_size).
  const auto vit = run_command({tool("timm-validate"), "--model", "vit_tiny_patch16_224", "--num-samples", "8",
                                "--test-pool", "--img-size", "256"});
  CHECK(vit.exit_code == 2);
  CHECK_MESSAGE(vit.output.find("--test-pool: vit_tiny_patch16_224's forward_features gives a 3-D tensor, not NCHW "
                                "feature maps") != std::string::npos,
                vit.output);
}

TEST_CASE(
    "timm-validate --metrics-avg adds validate.py's precision, recall and F1 (test_classification_scores: sklearn's)") {
  const TrainedRun& run = trained_run();
  timm::test::TempDir tmp;
  const std::vector<std::string> common = {
      "--checkpoint", run.checkpoint().string(), "--num-samples", "128", "-b", "64", "-j", "1", "--use-train-size"};
  const ToolRun micro = run_tool("timm-validate", tmp / "micro.json", concat(common, {"--metrics-avg", "micro"}));
  // Single-label micro averages all equal top-1.
  for (const char* key : {"micro_precision", "micro_recall", "micro_f1_score"}) {
    CHECK_MESSAGE(micro.results[key].get<double>() == doctest::Approx(micro.results["top1"].get<double>()), key);
  }
  const ToolRun macro = run_tool("timm-validate", tmp / "macro.json", concat(common, {"--metrics-avg", "macro"}));
  CHECK(macro.output.find(" | Precision(macro) ") != std::string::npos);
  const json parsed = json::parse(run_oracle("tools_oracle.py", {"parse", (tmp / "macro.json").string()}));
  CHECK(parsed["columns"] ==
        json({"model", "top1", "top1_err", "top5", "top5_err", "loss", "macro_precision", "macro_recall",
              "macro_f1_score", "param_count", "img_size", "crop_pct", "interpolation", "checkpoint"}));
  // Python timm's predictions scored by sklearn: one of 128 samples may flip on a near-tie, moving the scores of two
  // of the 10 classes (~13 samples each) by up to 1/13, their macro mean by up to 1.6 points.
  const json oracle = json::parse(run_oracle(
      "tools_oracle.py",
      concat({"validate", run.checkpoint().string(), "--num-samples", "128", "-b", "64", "--metrics-avg", "macro"},
             logged_data_config(micro.output))));
  for (const char* key : {"macro_precision", "macro_recall", "macro_f1_score"}) {
    CHECK_MESSAGE(std::abs(macro.results[key].get<double>() - oracle[key].get<double>()) <= 1.6, key);
  }

  const auto bad = run_command(concat({tool("timm-validate"), "--metrics-avg", "samples"}, common));
  CHECK(bad.exit_code == 2);
  CHECK(bad.output.find("--metrics-avg 'samples': expected micro, macro or weighted") != std::string::npos);
}

TEST_CASE("--retry: out of memory, timm-validate and timm-benchmark try again at timm's smaller batch sizes") {
  // The address space held to 5 GB (about 2.3 GB above what the tools map at start): resnet18's first activations
  // at 224 px take 6.4 MB per image twice over, so the warm-up batch of 512 cannot be allocated (torch's
  // "DefaultCPUAllocator: not enough memory", validate.py's RuntimeError) and 256 or 192 can.
  const TrainedRun& run = trained_run();
  const auto limited = [](const std::vector<std::string>& command) {
    std::string line = "ulimit -v 5000000 && exec";
    for (const std::string& arg : command) line += " '" + arg + "'";
    return run_command({"/bin/sh", "-c", line}, std::chrono::seconds(600), {"OMP_NUM_THREADS=1", "MALLOC_ARENA_MAX=1"});
  };
  const std::vector<std::string> validate = {tool("timm-validate"),
                                             "--checkpoint",
                                             run.checkpoint().string(),
                                             "--num-samples",
                                             "64",
                                             "-j",
                                             "1",
                                             "--img-size",
                                             "224",
                                             "-b",
                                             "512"};
  const auto retried = limited(concat(validate, {"--retry"}));
  REQUIRE_MESSAGE(retried.exit_code == 0, retried.output);
  CHECK(retried.output.find("while running validation.") != std::string::npos);
  CHECK(retried.output.find("Reducing batch size to 384 for retry.") != std::string::npos);
  // The same numbers as at a batch that fits from the start (the batch does not change the per-sample outputs).
  const auto small = run_command(concat(validate, {"-b", "64"}));
  REQUIRE_MESSAGE(small.exit_code == 0, small.output);
  CHECK(last_capture(retried.output, R"( \* Loss ([0-9.]+) over 64 images)") ==
        last_capture(small.output, R"( \* Loss ([0-9.]+) over 64 images)"));

  const auto failed = limited(validate);  // no --retry: the error, exit 1
  CHECK(failed.exit_code == 1);
  CHECK(failed.output.find("Reducing batch size") == std::string::npos);

  const std::vector<std::string> bench = {
      tool("timm-benchmark"), "--model", "resnet18",         "--bench", "inference", "-b", "512",
      "--num-warm-iter",      "0",       "--num-bench-iter", "1"};
  const auto bench_retried = limited(bench);  // benchmark.py retries by default
  REQUIRE_MESSAGE(bench_retried.exit_code == 0, bench_retried.output);
  CHECK(bench_retried.output.find("Reducing batch size to 384 for retry.") != std::string::npos);
  CHECK(limited(concat(bench, {"--no-retry"})).exit_code == 1);
}

TEST_CASE("timm-validate bulk-validates pretrained models named by a --model file, wildcard or 'all', best first") {
  timm::test::TempDir tmp;
  const fs::path cache = tmp / "cache";
  // Seeded weights as the default pretrained weights of resnet18 and resnet10t; no others in the cache.
  for (const char* model : {"resnet18", "resnet10t"})
    run_oracle("hub_cache_oracle.py", {"make", cache.string(), model, (tmp / model).string()});
  const std::vector<std::string> env = {"HF_HUB_CACHE=" + cache.string()};
  const std::vector<std::string> common = {"--num-samples", "32", "-b", "32", "-j", "1", "--num-classes", "10"};
  const auto single = [&](const std::string& model) {
    return run_tool("timm-validate", tmp / (model + ".json"), concat(common, {"--model", model, "--pretrained"}), env)
        .results;
  };
  const json resnet18 = single("resnet18"), resnet10t = single("resnet10t");
  REQUIRE(resnet18["top1"] != resnet10t["top1"]);  // the order below is seen
  const json best_first = resnet18["top1"].get<double>() > resnet10t["top1"].get<double>()
                              ? json::array({resnet18, resnet10t})
                              : json::array({resnet10t, resnet18});
  const auto same_rows = [&](const json& rows) {
    REQUIRE(rows.size() == 2);
    for (std::size_t i = 0; i < 2; ++i) {
      for (const char* key : {"model", "top1", "top5", "loss", "img_size", "crop_pct"}) {
        CHECK_MESSAGE(rows[i][key] == best_first[i][key], std::string(key));
      }
    }
  };
  // A file of names (validate.py: --pretrained as given).
  std::ofstream(tmp / "models.txt") << "resnet18\nresnet10t\n\n";
  const ToolRun listed = run_tool("timm-validate", tmp / "listed.json",
                                  concat(common, {"--model", (tmp / "models.txt").string(), "--pretrained"}), env);
  CHECK(listed.output.find("Running bulk validation on these pretrained models: resnet18, resnet10t") !=
        std::string::npos);
  same_rows(listed.results);
  // A wildcard: the registered models it matches (resnet10t, resnet14t), with their pretrained weights; one not in
  // the cache is left out, naming it. A bulk run's results are a list even of one row.
  const ToolRun matched =
      run_tool("timm-validate", tmp / "matched.json", concat(common, {"--model", "resnet1?t"}), env);
  CHECK(matched.output.find("resnet14t failed to validate: pretrained weights of 'timm/resnet14t.c3_in1k' are not in "
                            "the Hugging Face hub cache") != std::string::npos);
  REQUIRE(matched.results.is_array());
  REQUIRE(matched.results.size() == 1);
  CHECK(matched.results[0]["model"] == "resnet10t");
  CHECK(matched.results[0]["top1"] == resnet10t["top1"]);
  CHECK(matched.results[0]["loss"] == resnet10t["loss"]);

  const auto none = run_command(concat({tool("timm-validate"), "--model", "resnet1?t"}, common),
                                std::chrono::seconds(600), {"HF_HUB_CACHE=" + (tmp / "empty").string()});
  CHECK(none.exit_code == 1);
  CHECK(none.output.find("bulk validation: no model validated") != std::string::npos);
  const auto nothing = run_command(concat({tool("timm-validate"), "--model", "zzz*"}, common));
  CHECK(nothing.exit_code == 2);
  CHECK(nothing.output.find("--model 'zzz*': no registered model matches it") != std::string::npos);
}

TEST_CASE("timm-infer labels a 1000-class model's predictions with ImageNet-1k's names, as inference.py") {
  timm::test::TempDir tmp;
  const json imagenet = json::parse(run_oracle("tools_oracle.py", {"imagenet", "-"}));
  const std::vector<std::string> common = {"--num-classes", "1000", "--num-samples", "4", "-j", "1", "--include-index"};
  for (const std::string type : {"name", "description", "detailed"}) {
    CAPTURE(type);
    const ToolRun run =
        run_tool("timm-infer", tmp / (type + ".json"), concat(common, {"--label-type", type, "--topk", "3"}));
    REQUIRE(run.results.size() == 4);
    const json& expected = imagenet.at(type == "detailed" ? "detailed" : type);
    for (const json& row : run.results) {
      REQUIRE(row["label"].size() == 3);
      for (std::size_t k = 0; k < 3; ++k) CHECK(row["label"][k] == expected[row["index"][k].get<std::size_t>()]);
    }
  }
  const auto unknown = run_command(
      concat({tool("timm-infer"), "--label-type", "name"}, {"--num-classes", "7", "--num-samples", "4", "-j", "1"}));
  CHECK(unknown.exit_code == 2);
  CHECK(unknown.output.find("class names are known for Fashion-MNIST (10 classes) and ImageNet-1k (1000), not for 7") !=
        std::string::npos);
}

}  // namespace test_tools
