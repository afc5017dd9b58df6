// Finds and loads plugin libraries into a Registry.
//
// Libraries are opened with RTLD_NOW | RTLD_LOCAL and never unloaded: modules,
// autograd nodes and tensors made by a plugin hold pointers into its code for
// the life of the process (a refused library stays mapped too: its static
// initialisers have run). Every failure throws an Error naming the file and
// the reason; a library is either fully registered or not at all.
//
// Before anything is opened, the loader refuses a plugin file, the folder
// holding it and a plugin folder that any user may write to (mode o+w) or
// that is owned by someone other than the user running (the effective uid)
// or root: loading a plugin runs its code. A symlink is judged by its target,
// the file dlopen opens, and the message names both.
#pragma once

#include <cstdint>
#include <exception>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "timm/plugin/registry.hpp"

namespace timm {

// A plugin file the loader registered, with what its PluginInfo declared and
// what it registered.
struct LoadedPlugin {
  std::filesystem::path path;  // canonical
  std::string name;
  std::string torch_version;
  std::uint32_t sdk_abi_version = 0;
  std::vector<std::pair<PluginKind, std::string>> entries;  // in the order registered
};

// What `timm-run --list-plugins` prints and each run's config.toml records
// (there as comments): for each plugin, in load order,
//   plugin 'resnet' from /abs/timm_models_resnet.so: SDK ABI 1, torch 2.5.1
//     models (2): resnet18, resnet34
// with its entries by kind (model, optimizer, scheduler, augmentation), each
// kind's names in natural order; "" when `plugins` is empty.
std::string describe_loaded_plugins(const std::vector<LoadedPlugin>& plugins);

// The folders searched, in order: each --plugin-dir, each entry of
// TIMM_PLUGIN_PATH (':'-separated), then the plugin folder next to the
// running binary (lib/timm-cpp/plugins, the same in the build tree and in the
// install prefix). All are absolute.
struct PluginSearchPath {
  std::vector<std::filesystem::path> user_dirs;     // required to exist
  std::vector<std::filesystem::path> default_dirs;  // skipped when missing
};

class PluginLoader {
 public:
  explicit PluginLoader(Registry& registry) : registry_(registry) {}

  // Loads one plugin file (a symlink: its target). Loading the same file
  // twice is a no-op.
  void load_file(const std::filesystem::path& path);

  // Loads every regular file named "*.so" in `dir` in sorted order (a
  // symlink counts by its target); other entries (folders, fifos, sockets,
  // dangling links) are skipped with a warning. A missing directory is a
  // UsageError only when `required` (a folder the user named). A bad plugin
  // does not stop the others: once all are tried, one Error lists every
  // failure (a single failure is rethrown as it was).
  void load_directory(const std::filesystem::path& dir, bool required);

  // Loads every folder of `path` (each once) the same way, reporting the
  // failures of all folders in one Error at the end. A missing user folder is
  // a UsageError before anything is loaded.
  void load_search_path(const PluginSearchPath& path);

  const std::vector<LoadedPlugin>& loaded() const { return loaded_; }

 private:
  struct Failure {
    std::string message;
    std::exception_ptr error;
  };
  void collect_directory(const std::filesystem::path& dir, bool required, std::vector<Failure>& failures);
  [[noreturn]] static void throw_failures(const std::vector<Failure>& failures);

  Registry& registry_;
  std::vector<LoadedPlugin> loaded_;
};

// The search path for the folders named on the command line (`cli_dirs`).
// Relative folders (of `cli_dirs` and TIMM_PLUGIN_PATH) are resolved once,
// against the current folder at the call, and each resolution is logged.
PluginSearchPath plugin_search_path(const std::vector<std::string>& cli_dirs);

// Loads everything on the search path into `registry` and returns the loaded
// plugins (PluginLoader::load_search_path).
std::vector<LoadedPlugin> load_plugins(Registry& registry, const PluginSearchPath& path);

}  // namespace timm
