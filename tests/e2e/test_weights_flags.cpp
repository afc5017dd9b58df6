// timm-run's --initial-checkpoint, --pretrained-path and --channels-last end
// to end on a small Fashion-MNIST subset (the loading itself is checked
// against Python in tests/core/test_load_weights.cpp).
#include <doctest/doctest.h>

#include <filesystem>

#include "e2e_support.hpp"
#include "test_support.hpp"

namespace fs = std::filesystem;
using timm::test::run_command;

namespace {

std::vector<std::string> small_run(const fs::path& out, const std::string& experiment) {
  return {(timm::test::bin_dir() / "timm-run").string(),
          "--model",
          "resnet18",
          "--epochs",
          "1",
          "--train-num-samples",
          "256",
          "--val-num-samples",
          "128",
          "-b",
          "64",
          "--lr",
          "0.05",
          "--warmup-epochs",
          "0",
          "-j",
          "1",
          "--output",
          out.string(),
          "--experiment",
          experiment};
}

std::vector<std::string> with(std::vector<std::string> args, const std::vector<std::string>& more) {
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

}  // namespace

TEST_CASE("timm-run loads weights with --initial-checkpoint and --pretrained-path, trains with --channels-last") {
  timm::test::TempDir tmp;
  const auto first = run_command(with(small_run(tmp.path(), "first"), {"--channels-last"}));
  REQUIRE_MESSAGE(first.exit_code == 0, first.output);
  const fs::path weights = tmp / "first" / "last.safetensors";
  REQUIRE(fs::exists(weights));

  {  // --initial-checkpoint: strict, same head
    const auto r = run_command(with(small_run(tmp.path(), "init"), {"--initial-checkpoint", weights.string()}));
    REQUIRE_MESSAGE(r.exit_code == 0, r.output);
    CHECK(r.output.find("Loaded checkpoint '" + weights.string() + "'") != std::string::npos);
  }
  {  // --pretrained-path: another class count, the head is re-initialised
    const auto r =
        run_command(with(small_run(tmp.path(), "pre"), {"--pretrained-path", weights.string(), "--num-classes", "12"}));
    REQUIRE_MESSAGE(r.exit_code == 0, r.output);
    CHECK(r.output.find("Missing keys ('fc.weight', 'fc.bias') discovered while loading pretrained weights") !=
          std::string::npos);
  }
  {  // --initial-checkpoint with another class count fails naming the file and the key
    const auto r = run_command(
        with(small_run(tmp.path(), "bad"), {"--initial-checkpoint", weights.string(), "--num-classes", "12"}));
    CHECK(r.exit_code == 1);
    CHECK(r.output.find(weights.string()) != std::string::npos);
    CHECK(r.output.find("size mismatch for 'fc.weight'") != std::string::npos);
  }
  {  // a missing file fails with exit code 1 naming it
    const auto r = run_command(with(small_run(tmp.path(), "none"), {"--initial-checkpoint", "/nonexistent/x.pth"}));
    CHECK(r.exit_code == 1);
    CHECK(r.output.find("/nonexistent/x.pth") != std::string::npos);
  }
}
