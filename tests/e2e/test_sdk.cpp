// The SDK end to end: install timm-cpp, build the example model plugin out of
// tree with find_package(TimmCpp), drop it into an empty folder and train it
// with the installed timm-run through --plugin-dir.
#include <doctest/doctest.h>

#include <filesystem>

#include "e2e_support.hpp"
#include "test_support.hpp"

namespace fs = std::filesystem;
using timm::test::run_command;

TEST_CASE("a plugin built out of tree against the installed SDK is found in a folder and trains") {
  timm::test::TempDir tmp;
  const fs::path prefix = tmp / "prefix";
  const auto install =
      run_command({"cmake", "--install", timm::test::build_dir().string(), "--prefix", prefix.string()});
  REQUIRE_MESSAGE(install.exit_code == 0, install.output);
  CHECK(fs::exists(prefix / "lib/cmake/TimmCpp/TimmCppConfig.cmake"));
  CHECK(fs::exists(prefix / "include/timm/plugin/plugin.hpp"));

  const fs::path example_build = tmp / "example-build";
  const auto configure = run_command({"cmake", "-S", (timm::test::source_dir() / "examples/model_plugin").string(),
                                      "-B", example_build.string(), "-DCMAKE_PREFIX_PATH=" + prefix.string(),
                                      "-DCMAKE_BUILD_TYPE=Release", "-DCMAKE_CXX_COMPILER_LAUNCHER=ccache"});
  REQUIRE_MESSAGE(configure.exit_code == 0, configure.output);
  const auto build = run_command({"cmake", "--build", example_build.string()});
  REQUIRE_MESSAGE(build.exit_code == 0, build.output);

  const fs::path plugin_folder = tmp / "my-plugins";
  fs::create_directories(plugin_folder);
  fs::copy_file(example_build / "example_convnet.so", plugin_folder / "example_convnet.so");

  const std::string timm_run = (prefix / "bin/timm-run").string();
  const auto list = run_command({timm_run, "--plugin-dir", plugin_folder.string(), "--list-models", "example*"});
  REQUIRE_MESSAGE(list.exit_code == 0, list.output);
  CHECK(list.output.find("example_convnet") != std::string::npos);

  const auto missing = run_command({timm_run, "--list-models", "example*"});
  CHECK(missing.output.find("example_convnet") == std::string::npos);

  const auto train = run_command({timm_run,
                                  "--plugin-dir",
                                  plugin_folder.string(),
                                  "--model",
                                  "example_convnet",
                                  "--epochs",
                                  "1",
                                  "--train-num-samples",
                                  "3000",
                                  "--val-num-samples",
                                  "1000",
                                  "-b",
                                  "50",
                                  "--lr",
                                  "0.1",
                                  "--warmup-epochs",
                                  "0",
                                  "--sched-on-updates",
                                  "--no-aug",
                                  "-j",
                                  "1",
                                  "--output",
                                  (tmp / "out").string(),
                                  "--experiment",
                                  "sdk"});
  REQUIRE_MESSAGE(train.exit_code == 0, train.output);
  CHECK(train.output.find("Model example_convnet created") != std::string::npos);
  // 10 classes: chance is 10%.
  CHECK(timm::test::number_after(train.output, "Test top-1:") > 40.0);
  CHECK(fs::exists(tmp / "out/sdk/last.safetensors"));
}
