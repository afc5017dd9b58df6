// timm-run end to end on a Fashion-MNIST subset: it learns, writes timm's
// output files, its checkpoint loads in Python timm, and bad input fails
// cleanly with the right exit code.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>

#include "e2e_support.hpp"
#include "test_support.hpp"

namespace fs = std::filesystem;
using timm::test::run_command;

namespace {

std::string timm_run() { return (timm::test::bin_dir() / "timm-run").string(); }

std::vector<std::string> subset_run(const fs::path& out) {
  return {timm_run(),
          "--model",
          "resnet18",
          "--epochs",
          "2",
          "--train-num-samples",
          "4000",
          "--val-num-samples",
          "1000",
          "-b",
          "64",
          "--lr",
          "0.1",
          "--warmup-epochs",
          "0",
          "--sched-on-updates",
          "-j",
          "2",
          "--output",
          out.string(),
          "--experiment",
          "e2e",
          "--log-interval",
          "20",
          "--pin-mem",  // on the CPU: a warning, as torch's DataLoader
          "--worker-seeding",
          "part",
          "--input-img-mode",
          "L"};
}

// A short resnet18 run with drop path (masks from the CPU generator) into
// `out`/`experiment`.
std::vector<std::string> short_drop_path_run(const fs::path& out, const std::string& experiment) {
  return {timm_run(),   "--model",
          "resnet18",   "--epochs",
          "1",          "--train-num-samples",
          "640",        "--val-num-samples",
          "200",        "-b",
          "64",         "--lr",
          "0.1",        "--warmup-epochs",
          "0",          "--drop-path",
          "0.1",        "--output",
          out.string(), "--experiment",
          experiment,   "--input-img-mode",
          "L"};
}

// The train_loss of summary.csv's first epoch.
double first_train_loss(const fs::path& summary) {
  const std::string text = timm::test::read_file(summary);
  const auto row = text.find('\n');
  REQUIRE(row != std::string::npos);
  const auto comma = text.find(',', row);
  REQUIRE(comma != std::string::npos);
  return std::stod(text.substr(comma + 1, text.find(',', comma + 1) - comma - 1));
}

}  // namespace

TEST_CASE("timm-run trains resnet18 on a Fashion-MNIST subset well above chance") {
  timm::test::TempDir tmp;
  const auto run = run_command(subset_run(tmp.path()));
  REQUIRE_MESSAGE(run.exit_code == 0, run.output);
  MESSAGE(run.output.substr(run.output.size() > 1500 ? run.output.size() - 1500 : 0));
  // 10 balanced classes: chance is 10%.
  CHECK(timm::test::number_after(run.output, "Test top-1:") > 60.0);
  CHECK(run.output.find("Model resnet18 created, param count:") != std::string::npos);
  CHECK(run.output.find("Train: 0 [   0/62 (  2%)]  Loss: ") != std::string::npos);
  CHECK(run.output.find("*** Best metric: ") != std::string::npos);
  CHECK(run.output.find("--pin-mem: the device is cpu, so batches are not pinned") != std::string::npos);

  const fs::path dir = tmp / "e2e";
  const std::string summary = timm::test::read_file(dir / "summary.csv");
  CHECK(summary.rfind("epoch,train_loss,eval_loss,eval_top1,eval_top5,lr\r\n", 0) == 0);
  CHECK(std::count(summary.begin(), summary.end(), '\n') == 3);  // header + 2 epochs
  for (const char* file :
       {"last.safetensors", "last.state.pt", "model_best.safetensors", "model_best.state.pt", "config.toml"}) {
    CHECK_MESSAGE(fs::exists(dir / file), file);
  }

  // Plain blocks, not SUBCASEs: doctest reruns the whole case, training
  // included, once per SUBCASE.
  {
    INFO("config.toml records the plugin files the run loaded, as comments");
    const std::string config = timm::test::read_file(dir / "config.toml");
    CHECK(config.find("\n# Plugins loaded for this run (timm-run --list-plugins)\n# plugin '") != std::string::npos);
    CHECK(config.find("\n# plugin 'resnet' from /") != std::string::npos);
    CHECK(config.find("/timm_models_resnet.so: SDK ABI ") != std::string::npos);
    CHECK(config.find("\n#   models (") != std::string::npos);
    CHECK(config.find("resnet18, ") != std::string::npos);
  }

  {
    INFO("the checkpoint loads strictly into Python timm's resnet18");
    const std::string out = timm::test::run_oracle(
        "load_checkpoint.py",
        {"resnet18", (dir / "last.safetensors").string(), "--num-classes", "10", "--in-chans", "1"});
    CHECK(out.find("loaded 122 tensors") != std::string::npos);
  }

  {
    INFO("the written config.toml works as --config again");
    const auto again =
        run_command({timm_run(), "--config", (dir / "config.toml").string(), "--epochs", "1", "--train-num-samples",
                     "640", "--val-num-samples", "200", "--output", (tmp / "again").string(), "--experiment", "x"});
    REQUIRE_MESSAGE(again.exit_code == 0, again.output);
    CHECK(again.output.find("Model resnet18 created") != std::string::npos);
  }
}

TEST_CASE("--grad-checkpointing trains as the plain run; a model without it refuses the flag by name") {
  timm::test::TempDir tmp;
  // train_successfully runs on one thread: the two runs sum in the same order.
  const auto plain_run = timm::test::train_successfully(short_drop_path_run(tmp.path(), "plain"));
  auto args = short_drop_path_run(tmp.path(), "checkpointed");
  args.push_back("--grad-checkpointing");
  const auto checkpointed_run = timm::test::train_successfully(args);
  // Memory over speed: where the plain run keeps freed memory for reuse (not
  // under a sanitizer's allocator), the checkpointed one has glibc return it
  // (cpu_allocator.hpp).
  if (plain_run.output.find("CPU allocator: large buffers from glibc's heap, kept for reuse") != std::string::npos) {
    CHECK_MESSAGE(
        checkpointed_run.output.find("CPU allocator: buffers above 128 KiB mapped on their own") != std::string::npos,
        checkpointed_run.output);
  }
  // The same batches, drop path masks and updates, so the same train loss;
  // the eval numbers move, as BatchNorm's running statistics are updated again
  // in each rerun (as under torch's checkpoint).
  const double plain = first_train_loss(tmp / "plain" / "summary.csv");
  CHECK(first_train_loss(tmp / "checkpointed" / "summary.csv") == doctest::Approx(plain).epsilon(1e-6));

  // A plugin whose model keeps ClassifierImpl's set_grad_checkpointing.
  const fs::path plugins = fs::canonical(tmp.path()) / "plugins";
  fs::create_directory(plugins);
  fs::permissions(plugins, static_cast<fs::perms>(0755), fs::perm_options::replace);
  fs::copy_file(timm::test::fixture_dir() / "fixture_good" / "fixture_good.so", plugins / "fixture_good.so");
  fs::permissions(plugins / "fixture_good.so", static_cast<fs::perms>(0755), fs::perm_options::replace);
  const auto refused = run_command({timm_run(), "--plugin-dir", plugins.string(), "--model", "fixture_tiny",
                                    "--grad-checkpointing", "--epochs", "1", "--train-num-samples", "64",
                                    "--val-num-samples", "64", "--output", (tmp / "out").string()});
  CHECK(refused.exit_code == 2);
  CHECK_MESSAGE(refused.output.find("model 'fixture_tiny' (from plugin '") != std::string::npos, refused.output);
  CHECK(refused.output.find("does not support gradient checkpointing (--grad-checkpointing)") != std::string::npos);
  CHECK(refused.output.find("Train: 0") == std::string::npos);
}

TEST_CASE("bad input fails with a clear message and the right exit code") {
  SUBCASE("unknown flag: usage error") {
    const auto r = run_command({timm_run(), "--modle", "resnet18"});
    CHECK(r.exit_code == 2);
    CHECK(r.output.find("--modle") != std::string::npos);
  }
  SUBCASE("unknown model: usage error with suggestions") {
    const auto r = run_command({timm_run(), "--model", "resnet19", "--epochs", "1"});
    CHECK(r.exit_code == 2);
    CHECK(r.output.find("unknown model 'resnet19'") != std::string::npos);
    CHECK(r.output.find("did you mean 'resnet18'") != std::string::npos);
  }
  SUBCASE("a flag that will not be implemented says why") {
    const auto never = run_command({timm_run(), "--torchscript", "--epochs", "1"});
    CHECK(never.exit_code == 2);
    CHECK(never.output.find("--torchscript is not supported: TorchScript compiles Python models; timm-cpp's models "
                            "are C++") != std::string::npos);
  }
  SUBCASE("--input-img-mode: the modes timm-cpp decodes, matching --in-chans") {
    const auto r = run_command({timm_run(), "--input-img-mode", "CMYK", "--epochs", "1"});
    CHECK(r.exit_code == 2);
    CHECK(r.output.find("--input-img-mode 'CMYK': expected 'RGB' or 'L'") != std::string::npos);
    const auto l = run_command({timm_run(), "--input-img-mode", "L", "--in-chans", "3", "--epochs", "1"});
    CHECK(l.exit_code == 2);
    CHECK(l.output.find("--input-img-mode 'L' gives 1-channel images, but the model takes 3") != std::string::npos);
  }
  SUBCASE("train.py's values only for --worker-seeding") {
    const auto r = run_command({timm_run(), "--worker-seeding", "some", "--epochs", "1"});
    CHECK(r.exit_code == 2);
    CHECK(r.output.find("--worker-seeding 'some': expected 'all' or 'part'") != std::string::npos);
  }
  SUBCASE("model flags that do not apply to the model name it") {
    const auto r = run_command({timm_run(), "--model", "vit_tiny_patch16_224", "--bn-eps", "1e-3", "--epochs", "1"});
    CHECK(r.exit_code == 2);
    CHECK(r.output.find("--bn-eps: model 'vit_tiny_patch16_224' has no BatchNorm layers") != std::string::npos);
  }
  SUBCASE("--drop-block: only for models with DropBlock, and not twice") {
    const auto r = run_command({timm_run(), "--model", "vit_tiny_patch16_224", "--drop-block", "0.1", "--epochs", "1"});
    CHECK(r.exit_code == 2);
    CHECK(r.output.find("model 'vit_tiny_patch16_224' has no argument 'drop_block_rate'") != std::string::npos);
    const auto twice =
        run_command({timm_run(), "--drop-block", "0.1", "--model-kwargs", "drop_block_rate=0.2", "--epochs", "1"});
    CHECK(twice.exit_code == 2);
    CHECK(twice.output.find("--drop-block and --model-kwargs drop_block_rate both set") != std::string::npos);
  }
  SUBCASE("--drop-connect: deprecated, not beside --drop-path") {
    const auto r = run_command({timm_run(), "--drop-connect", "0.1", "--drop-path", "0.2", "--epochs", "1"});
    CHECK(r.exit_code == 2);
    CHECK(r.output.find("--drop-connect (deprecated) and --drop-path both set the drop path rate") !=
          std::string::npos);
  }
  SUBCASE("--tta: validation batches and sets that its groups divide") {
    const auto negative = run_command({timm_run(), "--tta", "-1", "--epochs", "1"});
    CHECK(negative.exit_code == 2);
    CHECK(negative.output.find("--tta -1: expected 0 (none) or more") != std::string::npos);
    const auto batch = run_command({timm_run(), "--tta", "3", "-b", "32", "--epochs", "1"});
    CHECK(batch.exit_code == 2);
    CHECK(batch.output.find("--tta 3: the validation batch size 32 is not a multiple of 3") != std::string::npos);
    const auto set = run_command({timm_run(), "--tta", "2", "-b", "32", "--val-num-samples", "33", "--epochs", "1"});
    CHECK(set.exit_code == 2);
    CHECK(set.output.find("--tta 2: the validation set has 33 samples, not a multiple of 2") != std::string::npos);
  }
  SUBCASE("--save-images: pictures of 1 or 3 channels") {
    const auto r = run_command({timm_run(), "--save-images", "--in-chans", "4", "--epochs", "1"});
    CHECK(r.exit_code == 2);
    CHECK(r.output.find("--save-images: the input has 4 channels; a JPEG picture takes 1 or 3") != std::string::npos);
  }
  SUBCASE("a rank whose peers never come fails within --dist-timeout, naming the rendezvous") {
    const auto r =
        run_command({timm_run(), "--epochs", "1", "--device", "cpu", "--dist-timeout", "3"}, std::chrono::seconds(60),
                    {"WORLD_SIZE=2", "RANK=1", "MASTER_ADDR=127.0.0.1", "MASTER_PORT=9"});
    CHECK(r.exit_code == 1);
    CHECK(r.output.find("rank 1: rendezvous at 127.0.0.1:9") != std::string::npos);
  }
  SUBCASE("a missing data folder names the folder") {
    const auto r = run_command({timm_run(), "--data-dir", "/nonexistent/imagenet", "--epochs", "1"});
    CHECK(r.exit_code != 0);
    CHECK(r.output.find("/nonexistent/imagenet") != std::string::npos);
  }
  SUBCASE("a plugin folder with bad plugins names each of them and exits 1") {
    timm::test::TempDir tmp;
    const fs::path dir = fs::canonical(tmp.path());
    fs::permissions(dir, static_cast<fs::perms>(0755), fs::perm_options::replace);
    for (const std::string name : {"fixture_no_entry", "fixture_throws", "fixture_wrong_abi", "fixture_bad_names"}) {
      const fs::path so = dir / (name + ".so");
      fs::copy_file(timm::test::fixture_dir() / name / (name + ".so"), so);
      fs::permissions(so, static_cast<fs::perms>(0755), fs::perm_options::replace);
    }
    const auto r = run_command({timm_run(), "--plugin-dir", dir.string(), "--list-models"});
    CHECK(r.exit_code == 1);
    CHECK(r.output.find("(4 problems)") != std::string::npos);
    CHECK(r.output.find("fixture_bad_names.so': refused: model name 'Fixture_Upper' has upper-case 'F'") !=
          std::string::npos);
    CHECK(r.output.find("fixture_no_entry.so': not a timm-cpp plugin") != std::string::npos);
    CHECK(r.output.find("fixture_throws.so': registration failed") != std::string::npos);
    CHECK(r.output.find("fixture_wrong_abi.so': built for SDK ABI version") != std::string::npos);
  }
  SUBCASE("a relative --plugin-dir is resolved against the current folder, and says so") {
    timm::test::TempDir tmp;
    const fs::path root = fs::canonical(tmp.path());
    const fs::path mine = root / "mine";
    fs::create_directory(mine);
    fs::permissions(mine, static_cast<fs::perms>(0755), fs::perm_options::replace);
    fs::copy_file(timm::test::fixture_dir() / "fixture_good" / "fixture_good.so", mine / "fixture_good.so");
    fs::permissions(mine / "fixture_good.so", static_cast<fs::perms>(0755), fs::perm_options::replace);
    // sh -c SCRIPT $0 $1: the folder to start in and timm-run.
    const auto r = run_command(
        {"sh", "-c", "cd \"$0\" && exec \"$1\" --plugin-dir mine --list-models 'fixture*'", root.string(), timm_run()});
    REQUIRE_MESSAGE(r.exit_code == 0, r.output);
    CHECK(r.output.find("plugin folder 'mine' resolved to '" + mine.string() + "'") != std::string::npos);
    CHECK(r.output.find("fixture_tiny") != std::string::npos);
  }
  SUBCASE("listing models with a wildcard") {
    const auto r = run_command({timm_run(), "--list-models", "resnet*"});
    REQUIRE(r.exit_code == 0);
    CHECK(r.output.find("resnet18") < r.output.find("resnet34"));
    CHECK(r.output.find("resnet34") < r.output.find("resnet50"));
  }
}

TEST_CASE("--list-plugins lists each plugin file with its name, SDK ABI, torch version and entries, then exits 0") {
  timm::test::TempDir tmp;
  const fs::path dir = fs::canonical(tmp.path());
  fs::permissions(dir, static_cast<fs::perms>(0755), fs::perm_options::replace);
  const fs::path so = dir / "fixture_good.so";
  fs::copy_file(timm::test::fixture_dir() / "fixture_good" / "fixture_good.so", so);
  fs::permissions(so, static_cast<fs::perms>(0755), fs::perm_options::replace);

  const auto r = run_command({timm_run(), "--plugin-dir", dir.string(), "--list-plugins"});
  REQUIRE_MESSAGE(r.exit_code == 0, r.output);
  // The dropped-in plugin, with its entries.
  CHECK_MESSAGE(r.output.find("plugin 'fixture_good' from " + so.string() + ": SDK ABI ") != std::string::npos,
                r.output);
  CHECK(r.output.find("\n  models (2): fixture_tiny, fixture_tiny2\n") != std::string::npos);
  // And the built-in plugins beside the binary, by kind.
  CHECK(r.output.find("plugin 'resnet' from ") != std::string::npos);
  CHECK(r.output.find("/timm_models_resnet.so: SDK ABI ") != std::string::npos);
  CHECK(r.output.find(", torch ") != std::string::npos);
  CHECK(r.output.find("\n  optimizers (") != std::string::npos);
  CHECK(r.output.find("\n  schedulers (") != std::string::npos);
  CHECK(r.output.find("\n  augmentations (") != std::string::npos);
  // Loaded in order: the user's folder first.
  CHECK(r.output.find("plugin 'fixture_good'") < r.output.find("plugin 'resnet'"));
}
