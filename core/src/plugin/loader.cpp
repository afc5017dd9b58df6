#include "timm/plugin/loader.hpp"

#include <algorithm>
#include <cstdlib>
#include <set>
#include <sstream>

#include <boost/dll/runtime_symbol_info.hpp>
#include <boost/dll/shared_library.hpp>
#include <torch/version.h>

#include "timm/base/error.hpp"
#include "timm/plugin/plugin.hpp"
#include "timm/base/version.hpp"

namespace timm {
namespace fs = std::filesystem;
namespace {

// Plugins are never unloaded: the handles live until the process ends, and
// are deliberately leaked so no destructor unmaps code still in use.
std::vector<boost::dll::shared_library>& open_libraries() {
  static auto* libraries = new std::vector<boost::dll::shared_library>();
  return *libraries;
}

std::string major_minor(const std::string& version) {
  const auto first = version.find('.');
  if (first == std::string::npos) return version;
  const auto second = version.find_first_not_of("0123456789", first + 1);
  return version.substr(0, second);
}

void check_compatible(const fs::path& path, const PluginInfo& info) {
  const std::string where = "plugin '" + path.string() + "'";
  if (info.sdk_abi_version != kSdkAbiVersion) {
    throw Error(where + ": built for SDK ABI version " + std::to_string(info.sdk_abi_version) +
                ", but this timm-cpp has SDK ABI version " + std::to_string(kSdkAbiVersion) +
                "; rebuild the plugin against this SDK");
  }
  const std::string theirs = info.torch_version != nullptr ? info.torch_version : "";
  if (major_minor(theirs) != major_minor(TORCH_VERSION)) {
    throw Error(where + ": built against torch " + theirs + ", but this timm-cpp uses torch " + TORCH_VERSION +
                "; rebuild the plugin against the same torch");
  }
  if (info.cxx11_abi != _GLIBCXX_USE_CXX11_ABI) {
    throw Error(where + ": built with _GLIBCXX_USE_CXX11_ABI=" + std::to_string(info.cxx11_abi) +
                ", but this timm-cpp uses _GLIBCXX_USE_CXX11_ABI=" + std::to_string(_GLIBCXX_USE_CXX11_ABI));
  }
  if (info.register_plugin == nullptr) throw Error(where + ": its PluginInfo has no register function");
}

std::vector<fs::path> split_path_list(const char* value) {
  std::vector<fs::path> dirs;
  if (value == nullptr) return dirs;
  std::stringstream stream(value);
  std::string item;
  while (std::getline(stream, item, ':')) {
    if (!item.empty()) dirs.emplace_back(item);
  }
  return dirs;
}

}  // namespace

void PluginLoader::load_file(const fs::path& path) {
  std::error_code ec;
  const fs::path canonical = fs::canonical(path, ec);
  if (ec) throw Error("plugin '" + path.string() + "': " + ec.message());
  for (const auto& plugin : loaded_) {
    if (plugin.path == canonical) return;
  }
  const std::string where = "plugin '" + canonical.string() + "'";

  boost::dll::shared_library library;
  try {
    library.load(canonical.string(), boost::dll::load_mode::rtld_now | boost::dll::load_mode::rtld_local);
  } catch (const std::exception& e) {
    throw Error(where + ": cannot load: " + e.what());
  }
  if (!library.has(kPluginEntryPoint)) {
    throw Error(where + ": not a timm-cpp plugin: missing entry point '" + std::string(kPluginEntryPoint) + "'");
  }
  const PluginInfo* info = library.get<const PluginInfo*()>(kPluginEntryPoint)();
  if (info == nullptr) throw Error(where + ": entry point '" + std::string(kPluginEntryPoint) + "' returned null");
  check_compatible(canonical, *info);

  PluginRegistrar registrar(canonical.string());
  try {
    info->register_plugin(registrar);
  } catch (const std::exception& e) {
    throw Error(where + ": registration failed: " + e.what());
  } catch (...) {
    throw Error(where + ": registration failed with an exception of unknown type");
  }
  registry_.add_all(registrar.take_entries());

  open_libraries().push_back(std::move(library));
  loaded_.push_back(LoadedPlugin{canonical, info->name != nullptr ? info->name : "", info->torch_version});
}

void PluginLoader::load_directory(const fs::path& dir, bool required) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    if (required) throw UsageError("plugin folder '" + dir.string() + "' does not exist or is not a folder");
    return;
  }
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().extension() == ".so" && !entry.is_directory()) files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  for (const auto& file : files) load_file(file);
}

PluginSearchPath plugin_search_path(const std::vector<std::string>& cli_dirs) {
  PluginSearchPath path;
  for (const auto& dir : cli_dirs) path.user_dirs.emplace_back(dir);
  for (auto& dir : split_path_list(std::getenv("TIMM_PLUGIN_PATH"))) path.user_dirs.push_back(dir);
  // The folder beside the binary: <prefix>/bin/../lib/timm-cpp/plugins, both
  // in the build tree and in an install.
  const fs::path exe_dir = boost::dll::program_location().parent_path().string();
  path.default_dirs.push_back(exe_dir.parent_path() / TIMM_PLUGIN_SUBDIR);
  return path;
}

std::vector<LoadedPlugin> load_plugins(Registry& registry, const PluginSearchPath& path) {
  PluginLoader loader(registry);
  for (const auto& dir : path.user_dirs) loader.load_directory(dir, /*required=*/true);
  for (const auto& dir : path.default_dirs) loader.load_directory(dir, /*required=*/false);
  return loader.loaded();
}

}  // namespace timm
