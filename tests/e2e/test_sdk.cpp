// The SDK end to end: install timm-cpp, build the examples (a model, an
// optimizer, a scheduler and an augmentation plugin) out of tree with
// find_package(TimmCpp) in one project, drop them into an empty folder, list
// them and train with all four through the installed timm-run's --plugin-dir.
#include <doctest/doctest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "e2e_support.hpp"
#include "test_support.hpp"

namespace test_sdk {

namespace fs = std::filesystem;
using timm::test::run_command;

namespace {

// The value of the last "LR: <number>" in a log (train.py's progress line).
double last_lr(const std::string& output) {
  const auto at = output.rfind("LR: ");
  REQUIRE_MESSAGE(at != std::string::npos, output);
  return std::stod(output.substr(at + 4, 12));
}

}  // namespace

TEST_CASE("plugins of every kind built out of tree against the installed SDK are found in a folder and train") {
  timm::test::TempDir tmp;
  const fs::path prefix = tmp / "prefix";
  const auto install =
      run_command({"cmake", "--install", timm::test::build_dir().string(), "--prefix", prefix.string()});
  REQUIRE_MESSAGE(install.exit_code == 0, install.output);
  CHECK(fs::exists(prefix / "lib/cmake/TimmCpp/TimmCppConfig.cmake"));
  CHECK(fs::exists(prefix / "include/timm/plugin/plugin.hpp"));

  // One configure and one build for all four examples (examples/CMakeLists.txt).
  const fs::path example_build = tmp / "example-build";
  const auto configure = run_command({"cmake", "-S", (timm::test::source_dir() / "examples").string(), "-B",
                                      example_build.string(), "-DCMAKE_PREFIX_PATH=" + prefix.string(),
                                      "-DCMAKE_BUILD_TYPE=Release", "-DCMAKE_CXX_COMPILER_LAUNCHER=ccache"});
  REQUIRE_MESSAGE(configure.exit_code == 0, configure.output);
  const auto build = run_command({"cmake", "--build", example_build.string()});
  REQUIRE_MESSAGE(build.exit_code == 0, build.output);

  const fs::path plugin_folder = tmp / "my-plugins";
  fs::create_directories(plugin_folder);
  const std::vector<std::string> plugins{"example_convnet", "example_signum", "example_exp", "example_pad_crop"};
  for (const std::string& plugin : plugins) {
    const fs::path built = example_build / "plugins" / (plugin + ".so");
    REQUIRE_MESSAGE(fs::exists(built), built.string());
    fs::copy_file(built, plugin_folder / (plugin + ".so"));
  }

  const std::string timm_run = (prefix / "bin/timm-run").string();
  const auto listing = run_command({timm_run, "--plugin-dir", plugin_folder.string(), "--list-plugins"});
  REQUIRE_MESSAGE(listing.exit_code == 0, listing.output);
  for (const std::string& plugin : plugins) {
    // Each file under the name its entry point declares.
    const auto at = listing.output.find("plugin '" + plugin + "' from ");
    REQUIRE_MESSAGE(at != std::string::npos, listing.output);
    CHECK(listing.output.substr(at, listing.output.find('\n', at) - at).find(plugin + ".so") != std::string::npos);
  }
  CHECK(listing.output.find("models (1): example_convnet") != std::string::npos);
  CHECK(listing.output.find("optimizers (1): example_signum") != std::string::npos);
  CHECK(listing.output.find("schedulers (1): example_exp") != std::string::npos);
  CHECK(listing.output.find("augmentations (1): example_pad_crop") != std::string::npos);

  const auto list = run_command({timm_run, "--plugin-dir", plugin_folder.string(), "--list-models", "example*"});
  REQUIRE_MESSAGE(list.exit_code == 0, list.output);
  CHECK(list.output.find("example_convnet") != std::string::npos);

  const auto missing = run_command({timm_run, "--list-models", "example*"});
  CHECK(missing.output.find("example_convnet") == std::string::npos);

  // One short run with the example of every kind. The schedule steps on
  // updates: 3000 / 50 = 60 per epoch, so --decay-epochs 1 is decay_t = 60
  // updates and the last logged update (59) has lr 0.01 * 0.1 ** (59 / 60).
  const auto train = run_command({timm_run,
                                  "--plugin-dir",
                                  plugin_folder.string(),
                                  "--model",
                                  "example_convnet",
                                  "--opt",
                                  "example_signum",
                                  "--sched",
                                  "example_exp",
                                  "--decay-epochs",
                                  "1",
                                  "--decay-rate",
                                  "0.1",
                                  "--train-crop-mode",
                                  "example_pad_crop",
                                  "--hflip",
                                  "0",
                                  "--color-jitter",
                                  "0",
                                  "--epochs",
                                  "1",
                                  "--train-num-samples",
                                  "3000",
                                  "--val-num-samples",
                                  "1000",
                                  "-b",
                                  "50",
                                  "--lr",
                                  "0.01",
                                  "--weight-decay",
                                  "0",
                                  "--warmup-epochs",
                                  "0",
                                  "--sched-on-updates",
                                  "-j",
                                  "1",
                                  "--output",
                                  (tmp / "out").string(),
                                  "--experiment",
                                  "sdk"});
  REQUIRE_MESSAGE(train.exit_code == 0, train.output);
  CHECK(train.output.find("Model example_convnet created") != std::string::npos);
  CHECK_MESSAGE(
      train.output.find("Created Signum (example_signum) optimizer: lr: 0.01, momentum: 0.9") != std::string::npos,
      train.output);
  CHECK_MESSAGE(train.output.find("ExamplePadCrop(size=(28, 28), padding=4") != std::string::npos, train.output);
  CHECK(train.output.find("LR: 1.000e-02") != std::string::npos);
  // 0.01 * 0.1 ** (59 / 60) = 1.039e-03; timm's default cosine would be near 0.
  CHECK(last_lr(train.output) == doctest::Approx(1.039e-3).epsilon(0.01));
  // 10 classes: chance is 10%.
  CHECK(timm::test::number_after(train.output, "Test top-1:") > 25.0);
  CHECK(fs::exists(tmp / "out/sdk/last.safetensors"));
}

}  // namespace test_sdk
