#include "timm/dist/setup_check.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>

#include <ATen/ATen.h>

#include "timm/base/error.hpp"
#include "timm/log/log.hpp"

namespace timm::dist {
namespace {

uint64_t hash_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return fnv1a(bytes);
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// The first line that differs, as "rank A has 'x', rank B has 'y'".
std::string first_difference(const std::string& a, int rank_a, const std::string& b, int rank_b) {
  const auto la = lines_of(a);
  const auto lb = lines_of(b);
  std::vector<std::string> only_a, only_b;
  std::set_difference(la.begin(), la.end(), lb.begin(), lb.end(), std::back_inserter(only_a));
  std::set_difference(lb.begin(), lb.end(), la.begin(), la.end(), std::back_inserter(only_b));
  std::string message;
  if (!only_a.empty()) message += format("rank %d has '%s'", rank_a, only_a.front().c_str());
  if (!only_b.empty()) {
    message += format("%srank %d has '%s'", message.empty() ? "" : ", ", rank_b, only_b.front().c_str());
  }
  return message.empty() ? "the same lines in another order" : message;
}

std::string sorted_lines(const std::string& text) {
  auto lines = lines_of(text);
  std::sort(lines.begin(), lines.end());
  std::string out;
  for (const auto& line : lines) out += line + "\n";
  return out;
}

}  // namespace

uint64_t fnv1a(std::string_view bytes) {
  uint64_t hash = 1469598103934665603ULL;
  for (unsigned char c : bytes) {
    hash ^= c;
    hash *= 1099511628211ULL;
  }
  return hash;
}

std::string describe_plugins(const std::vector<LoadedPlugin>& plugins) {
  std::vector<std::string> lines;
  for (const auto& plugin : plugins) {
    std::error_code ec;
    const auto size = std::filesystem::file_size(plugin.path, ec);
    lines.push_back(format("plugin %s (%s, %llu bytes, content %016llx)", plugin.name.c_str(),
                           plugin.path.filename().string().c_str(), static_cast<unsigned long long>(ec ? 0 : size),
                           static_cast<unsigned long long>(hash_file(plugin.path))));
  }
  std::sort(lines.begin(), lines.end());
  std::string out;
  for (const auto& line : lines) out += line + "\n";
  return out;
}

std::string describe_config(const Config& config) {
  Config shared = config;
  shared.set("local_rank", int64_t{0});
  return shared.to_toml();
}

void check_same_setup(ProcessGroup& group, const std::string& plugins, const std::string& config) {
  const std::string plugin_lines = sorted_lines(plugins);
  const std::string config_lines = sorted_lines(config);
  const int rank = group.rank();
  // The descriptions go to the store, so a differing rank can be explained.
  group.store().set(format("setup/plugins/%d", rank), std::vector<uint8_t>(plugin_lines.begin(), plugin_lines.end()));
  group.store().set(format("setup/config/%d", rank), std::vector<uint8_t>(config_lines.begin(), config_lines.end()));

  const at::Tensor mine =
      at::tensor({static_cast<int64_t>(fnv1a(plugin_lines)), static_cast<int64_t>(fnv1a(config_lines))});
  std::vector<at::Tensor> input{mine};
  std::vector<std::vector<at::Tensor>> output(1);
  for (int r = 0; r < group.size(); ++r) output[0].push_back(at::empty_like(mine));
  group.wait(group.comm()->allgather(output, input), "all-gather of the plugin and config hashes");

  for (int r = 1; r < group.size(); ++r) {
    for (int what = 0; what < 2; ++what) {
      if (output[0][r][what].item<int64_t>() == output[0][0][what].item<int64_t>()) continue;
      const char* kind = what == 0 ? "plugins" : "config";
      auto fetch = [&](int who) {
        const auto bytes = group.store().get(format("setup/%s/%d", kind, who));
        return std::string(bytes.begin(), bytes.end());
      };
      throw Error(format(
          "rank %d does not run the same job as rank 0: its %s differ (%s). Every rank must load the "
          "same plugins and get the same flags.",
          r, what == 0 ? "loaded plugins" : "effective config", first_difference(fetch(0), 0, fetch(r), r).c_str()));
    }
  }
}

}  // namespace timm::dist
