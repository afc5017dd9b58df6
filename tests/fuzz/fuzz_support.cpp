// The target table and the scratch folder shared by both fuzz engines.
#include <stdlib.h>

#include <algorithm>
#include <fstream>
#include <stdexcept>

#include "fuzz_target.hpp"
#include "timm/data/image.hpp"

namespace timm::fuzz {
namespace {

// A function-local static: targets register during static initialisation,
// in an order across files that nobody controls.
std::vector<Target>& table() {
  static std::vector<Target> targets;
  return targets;
}

// The scratch folder, removed when the process exits normally.
class ScratchDir {
 public:
  ScratchDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "timm-fuzz-XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("cannot create a scratch folder " + pattern);
    path_ = pattern;
  }
  ~ScratchDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

}  // namespace

bool register_target(std::string_view name, TargetFunction run) {
  table().push_back({name, run});
  return true;
}

std::vector<Target> targets() {
  std::vector<Target> sorted = table();
  std::sort(sorted.begin(), sorted.end(), [](const Target& a, const Target& b) { return a.name < b.name; });
  return sorted;
}

const Target* find_target(std::string_view name) {
  for (const Target& target : table()) {
    if (target.name == name) return &target;
  }
  return nullptr;
}

const std::filesystem::path& scratch_dir() {
  static const ScratchDir dir;
  return dir.path();
}

std::filesystem::path scratch_file(const std::filesystem::path& name, Bytes data) {
  const std::filesystem::path path = scratch_dir() / name;
  std::filesystem::create_directories(path.parent_path());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
  // Not a timm::Error: a full temp folder is the harness's failure, not the reader's.
  if (!out.flush()) throw std::runtime_error("cannot write the scratch file " + path.string());
  return path;
}

void broken_promise(const std::string& what) { throw std::logic_error("broken promise: " + what); }

void check_image(const Image& image, int64_t channels, const std::string& source) {
  if (image.channels != channels || image.height < 1 || image.width < 1) {
    broken_promise(source + ": decoded to " + std::to_string(image.height) + "x" + std::to_string(image.width) + "x" +
                   std::to_string(image.channels) + "; expected a positive size with " + std::to_string(channels) +
                   " channels");
  }
  if (image.pixels.size() != static_cast<std::size_t>(image.height * image.width * image.channels)) {
    broken_promise(source + ": " + std::to_string(image.pixels.size()) + " pixel bytes for " +
                   std::to_string(image.height) + "x" + std::to_string(image.width) + "x" +
                   std::to_string(image.channels));
  }
}

}  // namespace timm::fuzz
