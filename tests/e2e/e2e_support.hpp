// Helpers for end-to-end tests that run timm-run.
#pragma once

#include <chrono>
#include <filesystem>
#include <regex>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "test_support.hpp"
#include "timm/io/safetensors.hpp"

// Last: c10/util/Logging.h defines a CHECK macro that doctest must override.
#include <doctest/doctest.h>

namespace timm::test {

// The number after `label` in timm-run's output ("Test top-1: 87.12%").
inline double number_after(const std::string& output, const std::string& label) {
  const std::regex pattern(label + R"(\s*([0-9.]+))");
  std::smatch match;
  if (!std::regex_search(output, match, pattern)) {
    FAIL_CHECK("no '" << label << "' in the output:\n" << output);
    return -1.0;
  }
  return std::stod(match[1].str());
}

// Runs timm-run `args` on one torch thread (OMP_NUM_THREADS=1, then `env`)
// and requires it to succeed, with its output in the failure message. The
// timeout only guards against a hang.
inline CommandResult train_successfully(const std::vector<std::string>& args, const std::vector<std::string>& env = {},
                                        std::chrono::seconds timeout = std::chrono::seconds(900)) {
  std::vector<std::string> full_env{"OMP_NUM_THREADS=1"};
  full_env.insert(full_env.end(), env.begin(), env.end());
  CommandResult run = run_command(args, timeout, full_env);
  REQUIRE_MESSAGE(run.exit_code == 0, run.output);
  return run;
}

// timm-run (resnet18) on the first 256 Fashion-MNIST training images and 128
// for validation, a cosine schedule with one warmup epoch, lr 0.05, one loader
// worker and seed 3, writing to out/experiment; then `extra` (a batch size, a
// log interval, the loop's features). The small run that the training-loop
// tests compare with itself: stopped and resumed, or straight.
inline std::vector<std::string> small_run_args(const std::filesystem::path& out, const std::string& experiment,
                                               int epochs, const std::vector<std::string>& extra) {
  std::vector<std::string> args = {(bin_dir() / "timm-run").string(),
                                   "--model",
                                   "resnet18",
                                   "--epochs",
                                   std::to_string(epochs),
                                   "--train-num-samples",
                                   "256",
                                   "--val-num-samples",
                                   "128",
                                   "--lr",
                                   "0.05",
                                   "--sched",
                                   "cosine",
                                   "--warmup-epochs",
                                   "1",
                                   "-j",
                                   "1",
                                   "--seed",
                                   "3",
                                   "--output",
                                   out.string(),
                                   "--experiment",
                                   experiment};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

// `flags` followed by `more`.
inline std::vector<std::string> plus(std::vector<std::string> flags, const std::vector<std::string>& more) {
  flags.insert(flags.end(), more.begin(), more.end());
  return flags;
}

// The largest absolute difference between the weights of two safetensors
// files with the same keys in the same order (NaN-safe: a NaN on either side
// gives NaN).
inline double max_weight_diff(const std::filesystem::path& a, const std::filesystem::path& b) {
  const auto wa = timm::read_safetensors(a), wb = timm::read_safetensors(b);
  REQUIRE(wa.size() == wb.size());
  double diff = 0.0;
  for (std::size_t i = 0; i < wa.size(); ++i) {
    REQUIRE(wa[i].first == wb[i].first);
    diff = worst_diff(diff, (wa[i].second.to(at::kDouble) - wb[i].second.to(at::kDouble)).abs().max().item<double>());
  }
  return diff;
}

}  // namespace timm::test
