#include "test_support.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <mutex>
#include <random>
#include <stdexcept>
#include <thread>

#include "timm/io/safetensors.hpp"
#include "timm/plugin/loader.hpp"
#include "timm/plugin/registry.hpp"

extern char** environ;

namespace timm::test {

std::filesystem::path plugin_dir() { return TIMM_TEST_PLUGIN_DIR; }
std::filesystem::path bin_dir() { return TIMM_TEST_BIN_DIR; }
std::filesystem::path source_dir() { return TIMM_TEST_SOURCE_DIR; }
std::filesystem::path build_dir() { return TIMM_TEST_BUILD_DIR; }
std::filesystem::path fixture_dir() { return TIMM_TEST_FIXTURE_DIR; }
std::string python() { return TIMM_TEST_PYTHON; }

void load_builtin_plugins() {
  static std::once_flag once;
  std::call_once(once, [] {
    PluginLoader loader(Registry::global());
    loader.load_directory(plugin_dir(), /*required=*/true);
  });
}

CommandResult run_command(const std::vector<std::string>& argv, std::chrono::seconds timeout,
                          const std::vector<std::string>& extra_env) {
  int fds[2];
  if (pipe(fds) != 0) throw std::runtime_error("pipe failed");
  std::vector<std::string> env_storage;
  for (char** e = environ; *e != nullptr; ++e) env_storage.emplace_back(*e);
  for (const auto& e : extra_env) env_storage.push_back(e);
  pid_t pid = fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    setpgid(0, 0);  // its own group, so a timeout kills its children too
    dup2(fds[1], 1);
    dup2(fds[1], 2);
    close(fds[0]);
    close(fds[1]);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    std::vector<char*> env;
    for (auto& e : env_storage) env.push_back(e.data());
    env.push_back(nullptr);
    execvpe(args[0], args.data(), env.data());
    _exit(127);
  }
  setpgid(pid, pid);
  close(fds[1]);
  fcntl(fds[0], F_SETFL, O_NONBLOCK);
  CommandResult result;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::array<char, 65536> buffer;
  int status = 0;
  bool exited = false;
  while (true) {
    ssize_t n;
    while ((n = read(fds[0], buffer.data(), buffer.size())) > 0) result.output.append(buffer.data(), n);
    if (!exited && waitpid(pid, &status, WNOHANG) == pid) exited = true;
    if (exited && n == 0) break;  // child gone and pipe drained
    if (exited && n < 0 && errno == EAGAIN) {
      // Grandchildren may still hold the pipe; give them until the deadline.
    }
    if (std::chrono::steady_clock::now() > deadline) {
      kill(-pid, SIGKILL);
      if (!exited) waitpid(pid, &status, 0);
      result.output += "\n[test] killed after timeout of " + std::to_string(timeout.count()) + " s\n";
      result.exit_code = -9;
      close(fds[0]);
      return result;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  close(fds[0]);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

std::string run_oracle(const std::string& script, const std::vector<std::string>& args, std::chrono::seconds timeout) {
  // Through the fork server: a forked child of a process that has torch and
  // timm imported starts in milliseconds instead of seconds.
  const std::filesystem::path oracle_dir = source_dir() / "tests" / "oracle";
  std::vector<std::string> argv{python(), (oracle_dir / "forkserver.py").string(), (oracle_dir / script).string()};
  argv.insert(argv.end(), args.begin(), args.end());
  CommandResult r = run_command(argv, timeout, {"PYTHONHASHSEED=0", "OMP_NUM_THREADS=1"});
  if (r.exit_code != 0) {
    throw std::runtime_error("oracle " + script + " exited " + std::to_string(r.exit_code) + ":\n" + r.output);
  }
  return r.output;
}

namespace {

std::ifstream open_binary(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in.good()) throw std::runtime_error("cannot open " + path.string());
  return in;
}

}  // namespace

std::vector<std::uint8_t> read_bytes(const std::filesystem::path& path) {
  std::ifstream in = open_binary(path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in = open_binary(path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

Image read_raw(const std::filesystem::path& path, int64_t h, int64_t w, int64_t c) {
  Image image(h, w, c);
  std::vector<std::uint8_t> bytes = read_bytes(path);
  if (bytes.size() != image.pixels.size()) {
    throw std::runtime_error(path.string() + ": size " + std::to_string(bytes.size()) + ", expected " +
                             std::to_string(image.pixels.size()) + " for " + std::to_string(h) + "x" +
                             std::to_string(w) + "x" + std::to_string(c));
  }
  image.pixels = std::move(bytes);
  return image;
}

Image image_from_tensor(const at::Tensor& hwc) {
  TORCH_CHECK(hwc.dim() == 3 && hwc.scalar_type() == at::kByte, "image_from_tensor: expected uint8 (H, W, C), got ",
              hwc.sizes(), " ", hwc.scalar_type());
  Image image(hwc.size(0), hwc.size(1), hwc.size(2));
  std::memcpy(image.pixels.data(), hwc.contiguous().data_ptr<std::uint8_t>(), image.pixels.size());
  return image;
}

int max_diff(std::span<const std::uint8_t> a, std::span<const std::uint8_t> b) {
  if (a.size() != b.size()) {
    throw std::runtime_error("max_diff: sizes differ (" + std::to_string(a.size()) + " vs " + std::to_string(b.size()) +
                             ")");
  }
  int d = 0;
  for (std::size_t i = 0; i < a.size(); ++i) d = std::max(d, std::abs(int(a[i]) - int(b[i])));
  return d;
}

TempDir::TempDir() {
  std::random_device rd;
  const auto base = std::filesystem::temp_directory_path();
  for (int attempt = 0; attempt < 100; ++attempt) {
    auto candidate = base / ("timm-test-" + std::to_string(getpid()) + "-" + std::to_string(rd()));
    if (std::filesystem::create_directory(candidate)) {
      path_ = candidate;
      return;
    }
  }
  throw std::runtime_error("cannot create a temporary folder under " + base.string());
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::map<std::string, at::Tensor> oracle_tensors(const std::string& script, const std::vector<std::string>& args) {
  TempDir dir;
  const std::filesystem::path path = dir / "oracle.safetensors";
  std::vector<std::string> argv{path.string()};
  argv.insert(argv.end(), args.begin(), args.end());
  run_oracle(script, argv);
  std::map<std::string, at::Tensor> tensors;
  // Cloned: the file's memory goes with the folder.
  for (auto& [name, tensor] : read_safetensors(path)) tensors.emplace(name, tensor.clone());
  return tensors;
}

const at::Tensor& oracle_tensor(const std::string& script, const std::string& name) {
  static std::map<std::string, std::map<std::string, at::Tensor>> by_script;
  auto written = by_script.find(script);
  if (written == by_script.end()) written = by_script.emplace(script, oracle_tensors(script)).first;
  const auto it = written->second.find(name);
  if (it == written->second.end()) throw std::runtime_error(script + " wrote no tensor " + name);
  return it->second;
}

}  // namespace timm::test
