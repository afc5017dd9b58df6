// Finds and loads plugin libraries into a Registry.
//
// Libraries are opened with RTLD_NOW | RTLD_LOCAL and never unloaded: modules,
// autograd nodes and tensors made by a plugin hold pointers into its code for
// the life of the process. Every failure throws an Error naming the file and
// the reason; a library is either fully registered or not at all.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "timm/plugin/registry.hpp"

namespace timm {

struct LoadedPlugin {
  std::filesystem::path path;
  std::string name;
  std::string torch_version;
};

class PluginLoader {
 public:
  explicit PluginLoader(Registry& registry) : registry_(registry) {}

  // Loads one plugin file. Loading the same file twice is a no-op.
  void load_file(const std::filesystem::path& path);

  // Loads every "*.so" in `dir` in sorted order. A missing directory is an
  // error only when `required` (a folder the user named).
  void load_directory(const std::filesystem::path& dir, bool required);

  const std::vector<LoadedPlugin>& loaded() const { return loaded_; }

 private:
  Registry& registry_;
  std::vector<LoadedPlugin> loaded_;
};

// The folders searched, in order: each --plugin-dir, each entry of
// TIMM_PLUGIN_PATH (':'-separated), then the plugin folder next to the
// running binary (lib/timm-cpp/plugins, the same in the build tree and in the
// install prefix).
struct PluginSearchPath {
  std::vector<std::filesystem::path> user_dirs;     // required to exist
  std::vector<std::filesystem::path> default_dirs;  // skipped when missing
};
PluginSearchPath plugin_search_path(const std::vector<std::string>& cli_dirs);

// Loads everything on the search path into `registry` and returns the loader.
std::vector<LoadedPlugin> load_plugins(Registry& registry, const PluginSearchPath& path);

}  // namespace timm
