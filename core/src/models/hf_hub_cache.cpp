#include "timm/models/hf_hub_cache.hpp"

#include <cstdlib>
#include <fstream>
#include <system_error>
#include <vector>

#include "timm/base/error.hpp"

namespace timm {
namespace fs = std::filesystem;
namespace {

// timm's load_state_dict_from_hf: the safetensors file first.
constexpr const char* kWeightFiles[] = {"model.safetensors", "pytorch_model.bin"};

std::string env(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr ? value : "";
}

bool is_file(const fs::path& path) {
  std::error_code ec;
  return fs::is_regular_file(path, ec);
}

// The first weights file of `snapshot`, or an empty path.
fs::path weights_in(const fs::path& snapshot) {
  for (const char* name : kWeightFiles) {
    if (is_file(snapshot / name)) return snapshot / name;
  }
  return {};
}

// The commit refs/main names (a 40-hex-digit line), or "".
std::string main_commit(const fs::path& repo) {
  std::ifstream in(repo / "refs" / "main");
  std::string commit;
  if (!in || !std::getline(in, commit)) return "";
  while (!commit.empty() && (commit.back() == '\r' || commit.back() == ' ')) commit.pop_back();
  const bool is_hash = commit.size() == 40 && commit.find_first_not_of("0123456789abcdef") == std::string::npos;
  return is_hash ? commit : "";
}

}  // namespace

fs::path hf_hub_cache_dir() {
  for (const char* name : {"HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"}) {
    if (const std::string value = env(name); !value.empty()) return value;
  }
  if (const std::string home = env("HF_HOME"); !home.empty()) return fs::path(home) / "hub";
  std::string cache = env("XDG_CACHE_HOME");
  if (cache.empty()) cache = (fs::path(env("HOME")) / ".cache").string();
  return fs::path(cache) / "huggingface" / "hub";
}

fs::path find_hf_cached_weights(const std::string& hf_hub_id, const fs::path& cache) {
  const std::size_t slash = hf_hub_id.find('/');
  if (slash == std::string::npos || slash == 0 || slash + 1 == hf_hub_id.size() ||
      hf_hub_id.find('/', slash + 1) != std::string::npos || hf_hub_id.find("..") != std::string::npos) {
    throw UsageError("Hugging Face hub id " + in_quotes(hf_hub_id) + ": expected '<owner>/<name>'");
  }
  // huggingface_hub's folder name: "models--" + the id with "/" as "--".
  const fs::path repo = cache / ("models--" + hf_hub_id.substr(0, slash) + "--" + hf_hub_id.substr(slash + 1));
  const fs::path snapshots = repo / "snapshots";
  if (const std::string commit = main_commit(repo); !commit.empty()) {
    if (fs::path file = weights_in(snapshots / commit); !file.empty()) return file;
  }
  std::vector<fs::path> found;
  std::error_code ec;
  for (fs::directory_iterator it(snapshots, ec), end; !ec && it != end; it.increment(ec)) {
    if (fs::path file = weights_in(it->path()); !file.empty()) found.push_back(file);
  }
  if (found.size() == 1) return found.front();
  const std::string looked_for =
      in_quotes((snapshots / "<commit>" / kWeightFiles[0]).string()) + " or " + in_quotes(std::string(kWeightFiles[1]));
  if (found.size() > 1) {
    throw Error("pretrained weights of " + in_quotes(hf_hub_id) + ": " + std::to_string(found.size()) +
                " snapshots in " + in_quotes(snapshots.string()) + " and no refs/main naming one of them");
  }
  throw Error("pretrained weights of " + in_quotes(hf_hub_id) + " are not in the Hugging Face hub cache: no " +
              looked_for + " (the cache is $HF_HUB_CACHE, else $HF_HOME/hub, else ~/.cache/huggingface/hub; " +
              "Python timm fills it: timm.create_model('<model>', pretrained=True) on a machine online, then copy " +
              in_quotes(repo.filename().string()) + "), or give the file with --pretrained-path");
}

}  // namespace timm
