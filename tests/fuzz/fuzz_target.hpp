// Fuzz targets for the readers of untrusted input (issue 17), one source
// serving two engines (tests/fuzz/CMakeLists.txt):
//   - timm-fuzz (fuzz_main.cpp), every target linked together: replays a
//     corpus, then runs seeded random mutations of it; ctest's bounded smoke
//     run, built by the normal g++ build;
//   - with clang, one libFuzzer executable per target (libfuzzer_main.cpp,
//     -fsanitize=fuzzer,address,undefined), for long runs: scripts/fuzz.sh.
//
//   TIMM_FUZZ_TARGET(npy) { timm::read_npy(timm::fuzz::scratch_file("input.npy", data)); }
//
// A target may throw timm::Error: that is a refusal, a reader's promised
// answer to a bad input. Anything else it throws (std::bad_alloc, a c10
// error, std::out_of_range, a broken_promise), a crash, a hang or a
// sanitizer report is a finding.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace timm {
struct Image;
}

namespace timm::fuzz {

using Bytes = std::span<const std::uint8_t>;
using TargetFunction = void (*)(Bytes data);

struct Target {
  std::string_view name;
  TargetFunction run;
};

// Adds a target to the table (TIMM_FUZZ_TARGET calls it during static
// initialisation). Returns true, to initialise a static with.
bool register_target(std::string_view name, TargetFunction run);
// Every registered target, sorted by name.
std::vector<Target> targets();
// The target named `name`; nullptr when there is none.
const Target* find_target(std::string_view name);

// A folder of this process's own, made on first use in the temp folder and
// removed at a normal exit (a crash leaves it, with the input in it).
const std::filesystem::path& scratch_dir();
// Writes `data` to the file `name` in scratch_dir() and returns its path, for
// readers that only take a path. Each target reuses its file names, so the
// folder never grows.
std::filesystem::path scratch_file(const std::filesystem::path& name, Bytes data);

// Throws std::logic_error "broken promise: <what>": a reader returned
// something its header rules out. Not a timm::Error, so it is a finding.
[[noreturn]] void broken_promise(const std::string& what);

// Checks what image.hpp promises of a decoded image: the `channels` asked
// for, a positive size and exactly H x W x C pixel bytes.
void check_image(const Image& image, int64_t channels, const std::string& source);

// The bytes of `data` as text (configs, command lines, augmentation strings).
inline std::string as_text(Bytes data) { return {data.begin(), data.end()}; }

}  // namespace timm::fuzz

// Defines the fuzz target `name` (its body sees `data`, a Bytes) and
// registers it under that name.
#define TIMM_FUZZ_TARGET(name)                                     \
  static void timm_fuzz_##name(::timm::fuzz::Bytes data);          \
  [[maybe_unused]] static const bool timm_fuzz_registered_##name = \
      ::timm::fuzz::register_target(#name, timm_fuzz_##name);      \
  static void timm_fuzz_##name(::timm::fuzz::Bytes data)
