// Helpers shared by the tests: the built plugins, the Python oracle, temporary
// folders, child processes and the files the oracle writes.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <map>
#include <span>
#include <string>
#include <vector>

#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>

#include "timm/data/image.hpp"

namespace timm::test {

// The build tree's plugin folder and bin folder.
std::filesystem::path plugin_dir();
std::filesystem::path bin_dir();
std::filesystem::path source_dir();
std::filesystem::path build_dir();

// The folder of the loader's fixture plugins (tests/fixtures/plugins), one
// sub-folder per fixture.
std::filesystem::path fixture_dir();

// Loads every built plugin into Registry::global(), once per process.
void load_builtin_plugins();

// The venv's Python (timm, torch, safetensors, PIL): the test oracle.
std::string python();

struct CommandResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};

// Runs `argv` with a timeout (the child is killed past it), capturing output.
CommandResult run_command(const std::vector<std::string>& argv,
                          std::chrono::seconds timeout = std::chrono::seconds(600),
                          const std::vector<std::string>& extra_env = {});

// Runs tests/oracle/<script> with the oracle Python, through
// tests/oracle/forkserver.py (TIMM_ORACLE_FORKSERVER=0: a fresh interpreter);
// fails the test (throws) on a non-zero exit, with the script's output in the
// message.
std::string run_oracle(const std::string& script, const std::vector<std::string>& args,
                       std::chrono::seconds timeout = std::chrono::seconds(600));

// The whole content of `path`, as bytes or as text; throws (failing the test)
// when the file cannot be opened.
std::vector<std::uint8_t> read_bytes(const std::filesystem::path& path);
std::string read_file(const std::filesystem::path& path);

// An h x w x c image from the raw interleaved pixels in `path` (as
// data_oracle.py writes them); throws when the size is not h * w * c.
Image read_raw(const std::filesystem::path& path, int64_t h, int64_t w, int64_t c);

// An image from a uint8 (H, W, C) tensor (an oracle's), pixels copied.
Image image_from_tensor(const at::Tensor& hwc);

// The worse of two differences, NaN winning. Folding differences with
// std::max drops a NaN that comes second (std::max(0.0, NaN) is 0.0), so a
// model or optimizer that outputs NaN would pass its parity check; with this,
// the folded difference is NaN and `diff <= tolerance` fails.
inline double worst_diff(double acc, double diff) {
  return std::isnan(acc) || std::isnan(diff) ? std::numeric_limits<double>::quiet_NaN() : std::max(acc, diff);
}

// |a - b| relative to the larger magnitude (0 when both are 0); NaN when
// either is NaN or exactly one is infinite (inf / inf).
inline double relative_diff(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<double>::quiet_NaN();
  if (a == b) return 0.0;
  return std::abs(a - b) / std::max(std::abs(a), std::abs(b));
}

// The largest absolute difference between two equally long byte arrays
// (e.g. Image::pixels); throws when the lengths differ.
int max_diff(std::span<const std::uint8_t> a, std::span<const std::uint8_t> b);

// A fresh temporary folder, removed with everything in it on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

// Sets ATen's intra-op thread count for a scope (parity cases run on one
// thread, as the oracle does).
class ThreadCount {
 public:
  explicit ThreadCount(int n) : saved_(at::get_num_threads()) { at::set_num_threads(n); }
  ~ThreadCount() { at::set_num_threads(saved_); }

 private:
  int saved_;
};

// Runs tests/oracle/<script> (run_oracle) with a temporary OUT.safetensors as
// its first argument, then `args`, and returns the tensors it wrote, by name.
std::map<std::string, at::Tensor> oracle_tensors(const std::string& script, const std::vector<std::string>& args = {});

// The tensor `name` of oracle_tensors(script), the script run once per
// process; throws (failing the test) when the script wrote no such tensor.
const at::Tensor& oracle_tensor(const std::string& script, const std::string& name);

}  // namespace timm::test
