// Helpers shared by the tests: the built plugins, the Python oracle, temporary
// folders and child processes.
#pragma once

#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

namespace timm::test {

// The build tree's plugin folder and bin folder.
std::filesystem::path plugin_dir();
std::filesystem::path bin_dir();
std::filesystem::path source_dir();
std::filesystem::path build_dir();

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

// Runs tests/oracle/<script> with the oracle Python; fails the test (throws)
// on a non-zero exit, with the script's output in the message.
std::string run_oracle(const std::string& script, const std::vector<std::string>& args,
                       std::chrono::seconds timeout = std::chrono::seconds(600));

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

}  // namespace timm::test
