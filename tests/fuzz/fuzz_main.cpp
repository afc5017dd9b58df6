// timm-fuzz: the fuzz targets without libFuzzer (g++ has none), for a bounded
// smoke run in ctest and for replaying a finding.
//
//   timm-fuzz TARGET --inputs PATH... [--runs N] [--seconds S] [--seed K] [--timeout S] [--max-len N]
//             [--save-crash DIR]
//   timm-fuzz --help          (names the targets)
//
// Replays every file under the PATHs (the seed corpus, the regressions),
// then runs N deterministic random mutations of them (bit flips, bytes set to
// 0, 0xff or anything, interesting integers, truncation, insertion, deletion
// and duplication of byte runs, splices of two inputs), stopping early after
// S seconds. No coverage feedback: that is what scripts/fuzz.sh's libFuzzer
// build is for. An input fails when its target throws anything but a
// timm::Error, kills the process or runs past --timeout: the target, the
// input's size and its first bytes are printed, the input is saved to
// --save-crash DIR, and the exit code is 1 (2 for bad arguments).
#include <cxxabi.h>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <typeinfo>
#include <vector>

#include "fuzz_target.hpp"
#include "timm/base/app_main.hpp"
#include "timm/base/error.hpp"
#include "timm/tools/tool_args.hpp"

namespace fs = std::filesystem;

namespace {

using Input = std::vector<std::uint8_t>;

struct Options {
  std::string target;
  std::int64_t runs = 10000;
  double seconds = 60;
  std::uint64_t seed = 0;
  unsigned timeout = 10;  // seconds per input
  std::size_t max_len = 1 << 20;
  std::string save_crash;
  std::vector<fs::path> paths;
};

// The targets' names, for --help and the unknown-target error.
std::string target_names() {
  std::string names;
  for (const timm::fuzz::Target& target : timm::fuzz::targets()) {
    if (!names.empty()) names += ", ";
    names += target.name;
  }
  return names;
}

timm::ToolArgs make_args() {
  timm::ToolArgs args(
      "timm-fuzz",
      "Replays inputs of one fuzz target, then runs seeded random mutations of them. Targets: " + target_names() + ".");
  args.add_positional("target", "the fuzz target");
  args.add_list("inputs", "i", "files and folders of inputs: the seed corpus, the regressions", true);
  args.add("runs", "", "10000", "mutations to run at most");
  args.add("seconds", "", "60", "seconds of mutations at most");
  args.add("seed", "", "0", "seed of the mutations");
  args.add("timeout", "", "10", "seconds one input may take");
  args.add("max-len", "", "1048576", "bytes a mutated input may grow to");
  args.add("save-crash", "", "", "folder to save a failing input in");
  return args;
}

// A non-negative number of `name`, as T.
template <class T>
T non_negative(const timm::ToolArgs& args, const std::string& name) {
  const double value = args.get_double(name);
  if (!(value >= 0)) throw timm::UsageError("--" + name + " expects a non-negative number, got " + args.get(name));
  return static_cast<T>(value);
}

Options parse_options(const timm::ToolArgs& args) {
  Options options;
  options.target = args.get("target");
  options.runs = non_negative<std::int64_t>(args, "runs");
  options.seconds = non_negative<double>(args, "seconds");
  options.seed = static_cast<std::uint64_t>(args.get_int_at_least("seed", 0));
  options.timeout = static_cast<unsigned>(args.get_int_at_least("timeout", 1));
  options.max_len = static_cast<std::size_t>(args.get_int_at_least("max-len", 1));
  options.save_crash = args.get("save-crash");
  for (const std::string& path : args.get_list("inputs")) options.paths.emplace_back(path);
  return options;
}

// Every file under `paths`, in name order, so that runs repeat.
std::vector<Input> read_inputs(const std::vector<fs::path>& paths) {
  std::vector<fs::path> files;
  for (const fs::path& path : paths) {
    if (fs::is_directory(path)) {
      for (const auto& entry : fs::recursive_directory_iterator(path)) {
        if (entry.is_regular_file()) files.push_back(entry.path());
      }
    } else if (fs::is_regular_file(path)) {
      files.push_back(path);
    } else {
      throw timm::UsageError("--inputs '" + path.string() + "' is neither a file nor a folder");
    }
  }
  std::sort(files.begin(), files.end());
  std::vector<Input> inputs;
  for (const fs::path& file : files) {
    std::ifstream in(file, std::ios::binary);
    inputs.emplace_back(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  return inputs;
}

// ---- Reporting a failure, also from a signal handler -----------------------

// What the handlers need to report the input that is running: set before
// each input, read only by async-signal-safe code.
struct Running {
  const char* target = "";
  const std::uint8_t* data = nullptr;
  std::size_t size = 0;
  char save_dir[4096] = "";
};
Running running;

void write_text(const char* text) {
  std::size_t length = 0;
  while (text[length] != '\0') ++length;
  [[maybe_unused]] const ssize_t ignored = write(STDERR_FILENO, text, length);
}

// `value` in `base` with at least `width` digits, into `out` (24 bytes).
void format_number(std::uint64_t value, unsigned base, int width, char* out) {
  char digits[24];
  int n = 0;
  do {
    digits[n++] = "0123456789abcdef"[value % base];
    value /= base;
  } while (value > 0 || n < width);
  for (int i = 0; i < n; ++i) out[i] = digits[n - 1 - i];
  out[n] = '\0';
}

// FNV-1a: a name for the saved input that two different inputs hardly share.
std::uint64_t fingerprint(const std::uint8_t* data, std::size_t size) {
  std::uint64_t hash = 0xcbf29ce484222325ull;
  for (std::size_t i = 0; i < size; ++i) hash = (hash ^ data[i]) * 0x100000001b3ull;
  return hash;
}

// Prints the running input (target, size, the first 64 bytes in hex) after
// `what`, and saves it to the --save-crash folder. Async-signal-safe.
void report_running(const char* what) {
  char number[24];
  write_text("timm-fuzz: ");
  write_text(running.target);
  write_text(": FAILED: ");
  write_text(what);
  write_text("\n  input of ");
  format_number(running.size, 10, 1, number);
  write_text(number);
  write_text(" bytes, starting");
  for (std::size_t i = 0; i < std::min<std::size_t>(running.size, 64); ++i) {
    format_number(running.data[i], 16, 2, number);
    write_text(i % 16 == 0 ? "\n   " : " ");
    write_text(number);
  }
  write_text("\n");
  if (running.save_dir[0] == '\0') return;
  char path[4200] = "";
  std::size_t length = 0;
  const auto append = [&](const char* part) {
    while (*part != '\0' && length + 1 < sizeof path) path[length++] = *part++;
    path[length] = '\0';
  };
  append(running.save_dir);
  append("/crash-");
  append(running.target);
  append("-");
  format_number(fingerprint(running.data, running.size), 16, 16, number);
  append(number);
  const int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) {
    write_text("  (cannot save it to ");
    write_text(path);
    write_text(")\n");
    return;
  }
  std::size_t done = 0;
  while (done < running.size) {
    const ssize_t n = write(fd, running.data + done, running.size - done);
    if (n <= 0) break;
    done += static_cast<std::size_t>(n);
  }
  close(fd);
  write_text("  saved as ");
  write_text(path);
  write_text("\n");
}

void on_fatal_signal(int signal_number) {
  report_running(signal_number == SIGALRM ? "ran past the time limit (--timeout)" : "killed by a signal");
  if (signal_number == SIGALRM) _exit(1);
  // The default action, so that the exit status still names the signal.
  ::signal(signal_number, SIG_DFL);
  raise(signal_number);
}

void install_signal_handlers() {
  for (const int signal_number : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGALRM}) {
    struct sigaction action {};
    action.sa_handler = on_fatal_signal;
    sigemptyset(&action.sa_mask);
    sigaction(signal_number, &action, nullptr);
  }
}

std::string type_name_of(const std::type_info& type) {
  int status = 0;
  std::unique_ptr<char, decltype(&std::free)> name(abi::__cxa_demangle(type.name(), nullptr, nullptr, &status),
                                                   &std::free);
  return status == 0 && name ? name.get() : type.name();
}

// Runs `target` on `input`: the failure's description, or nullopt when it
// returned or refused the input with a timm::Error.
std::optional<std::string> run_one(const timm::fuzz::Target& target, const Input& input, unsigned timeout) {
  running.data = input.data();
  running.size = input.size();
  alarm(timeout);
  std::optional<std::string> failure;
  try {
    target.run(input);
  } catch (const timm::Error&) {
  } catch (const std::exception& e) {
    failure = "threw " + type_name_of(typeid(e)) + ": " + e.what();
  } catch (...) {
    failure = "threw something that is not a std::exception";
  }
  alarm(0);
  return failure;
}

// ---- Mutations --------------------------------------------------------------

// Values that size and count fields get wrong.
constexpr std::array<std::uint64_t, 12> kInterestingValues = {
    0, 1, 0x7f, 0x80, 0xff, 0x7fff, 0xffff, 0x7fffffff, 0x80000000, 0xffffffff, 0x7fffffffffffffff, ~0ull};

class Mutator {
 public:
  Mutator(std::uint64_t seed, std::size_t max_len) : rng_(seed), max_len_(max_len) {}

  // A copy of one input with 1 to 4 mutations stacked, `inputs` the
  // material for splices.
  Input mutate(const std::vector<Input>& inputs) {
    Input out = inputs[below(inputs.size())];
    const std::size_t count = 1 + below(4);
    for (std::size_t k = 0; k < count; ++k) mutate_once(out, inputs);
    if (out.size() > max_len_) out.resize(max_len_);
    return out;
  }

 private:
  std::size_t below(std::size_t n) { return n == 0 ? 0 : static_cast<std::size_t>(rng_() % n); }
  std::uint8_t any_byte() { return static_cast<std::uint8_t>(rng_()); }
  // A run length, short ones likelier: 1..4, then up to 64, rarely up to 1024.
  std::size_t run_length() {
    const std::size_t scale = std::array<std::size_t, 3>{4, 64, 1024}[below(3)];
    return 1 + below(scale);
  }

  void mutate_once(Input& out, const std::vector<Input>& inputs) {
    switch (below(out.empty() ? 1 : 9)) {
      case 0: {  // insert a run of one byte or of random bytes
        const std::size_t at = below(out.size() + 1);
        Input run(run_length(), any_byte());
        if (below(2) == 0) std::generate(run.begin(), run.end(), [&] { return any_byte(); });
        out.insert(out.begin() + static_cast<std::ptrdiff_t>(at), run.begin(), run.end());
        break;
      }
      case 1:
        out[below(out.size())] ^= static_cast<std::uint8_t>(1u << below(8));
        break;
      case 2:
        out[below(out.size())] = std::array<std::uint8_t, 3>{0, 0xff, any_byte()}[below(3)];
        break;
      case 3:
        set_interesting(out);
        break;
      case 4:
        out.resize(below(out.size()));
        break;
      case 5: {  // erase a run
        const std::size_t at = below(out.size());
        const std::size_t length = std::min(run_length(), out.size() - at);
        out.erase(out.begin() + static_cast<std::ptrdiff_t>(at),
                  out.begin() + static_cast<std::ptrdiff_t>(at + length));
        break;
      }
      case 6: {  // copy a chunk to another place
        const std::size_t from = below(out.size());
        const Input chunk(out.begin() + static_cast<std::ptrdiff_t>(from),
                          out.begin() + static_cast<std::ptrdiff_t>(from + std::min(run_length(), out.size() - from)));
        const std::size_t at = below(out.size() + 1);
        out.insert(out.begin() + static_cast<std::ptrdiff_t>(at), chunk.begin(), chunk.end());
        break;
      }
      case 7: {  // splice: this input's head, another's tail
        const Input& other = inputs[below(inputs.size())];
        out.resize(below(out.size() + 1));
        const std::size_t from = below(other.size() + 1);
        out.insert(out.end(), other.begin() + static_cast<std::ptrdiff_t>(from), other.end());
        break;
      }
      default:  // a byte set to a nearby value (a count off by a little)
        out[below(out.size())] += static_cast<std::uint8_t>(below(33) - 16);
        break;
    }
  }

  // An interesting value of 1, 2, 4 or 8 bytes, little- or big-endian, over
  // the bytes at a random place (as far as the input reaches).
  void set_interesting(Input& out) {
    const std::uint64_t value = kInterestingValues[below(kInterestingValues.size())];
    const std::size_t width = std::size_t{1} << below(4);
    const bool big_endian = below(2) == 0;
    const std::size_t at = below(out.size());
    for (std::size_t i = 0; i < width && at + i < out.size(); ++i) {
      const std::size_t shift = 8 * (big_endian ? width - 1 - i : i);
      out[at + i] = static_cast<std::uint8_t>(value >> shift);
    }
  }

  std::mt19937_64 rng_;
  std::size_t max_len_;
};

// ---- The run ----------------------------------------------------------------

[[noreturn]] void fail(const std::string& what) {
  report_running(what.c_str());
  std::exit(1);
}

int fuzz(const Options& options) {
  const timm::fuzz::Target* target = timm::fuzz::find_target(options.target);
  if (target == nullptr) {
    throw timm::UsageError("unknown target '" + options.target + "'; expected one of " + target_names());
  }
  if (!options.save_crash.empty()) {
    fs::create_directories(options.save_crash);
    const std::string dir = fs::absolute(options.save_crash).string();
    if (dir.size() >= sizeof running.save_dir) throw timm::UsageError("--save-crash: the path is too long");
    std::copy(dir.begin(), dir.end(), running.save_dir);
  }
  running.target = target->name.data();
  std::vector<Input> inputs = read_inputs(options.paths);
  const std::size_t replayed = inputs.size();
  using Clock = std::chrono::steady_clock;
  const Clock::time_point start = Clock::now();
  for (const Input& input : inputs) {
    if (auto failure = run_one(*target, input, options.timeout)) fail(*failure);
  }
  if (inputs.empty()) inputs.emplace_back();  // mutations grow from nothing
  Mutator mutator(options.seed, options.max_len);
  const Clock::time_point mutations_start = Clock::now();
  std::int64_t mutations = 0;
  while (mutations < options.runs &&
         std::chrono::duration<double>(Clock::now() - mutations_start).count() < options.seconds) {
    const Input input = mutator.mutate(inputs);
    ++mutations;
    if (auto failure = run_one(*target, input, options.timeout)) fail(*failure);
  }
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  const double executions = static_cast<double>(replayed) + static_cast<double>(mutations);
  std::printf("timm-fuzz %s: %zu inputs replayed, %lld mutations run, %.2f s, %.0f exec/s, no failure\n",
              running.target, replayed, static_cast<long long>(mutations), elapsed,
              elapsed > 0 ? executions / elapsed : 0.0);
  return 0;
}

int run(int argc, char** argv) {
  timm::ToolArgs args = make_args();
  if (!args.parse_or_print_help(argc, argv)) return 0;
  const Options options = parse_options(args);
  install_signal_handlers();
  return fuzz(options);
}

}  // namespace

int main(int argc, char** argv) { return timm::run_app("timm-fuzz", argc, argv, run); }
