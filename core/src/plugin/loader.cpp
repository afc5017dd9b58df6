#include "timm/plugin/loader.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <set>
#include <sstream>

#include <torch/version.h>
#include <boost/dll/runtime_symbol_info.hpp>
#include <boost/dll/shared_library.hpp>

#include "timm/base/error.hpp"
#include "timm/base/names.hpp"
#include "timm/base/version.hpp"
#include "timm/log/log.hpp"
#include "timm/plugin/plugin.hpp"

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

// `path` as one shell word, for the commands the messages suggest.
std::string shell_word(const fs::path& path) {
  const std::string text = path.string();
  const bool plain = !text.empty() && std::all_of(text.begin(), text.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || std::strchr("/._-+,:@%=", c) != nullptr;
  });
  if (plain) return text;
  std::string quoted = "'";
  for (char c : text) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

// What kind of thing `mode` is, for "not a regular file (a fifo)".
std::string file_kind(mode_t mode) {
  if (S_ISDIR(mode)) return "a folder";
  if (S_ISFIFO(mode)) return "a fifo";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device";
  if (S_ISLNK(mode)) return "a symlink";
  return "not a regular file";
}

// stat(2) of `path` (following links), or an Error starting with `where`.
struct stat stat_or_throw(const fs::path& path, const std::string& where) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    throw Error(where + ": cannot read '" + path.string() + "': " + std::strerror(errno));
  }
  return st;
}

// Why code under `judged` (a plugin file or a folder holding plugins) must not
// be loaded, with the fix, or "" when it may. `subject` names it in the
// message ("the file", "its folder '/p'"). Loading a plugin runs its code, so
// it and its folder may only be changeable by the user running or by root.
std::string untrusted_because(const fs::path& judged, const struct stat& st, const std::string& subject) {
  const uid_t me = ::geteuid();
  if (st.st_uid != me && st.st_uid != 0) {
    return subject + " is owned by uid " + std::to_string(st.st_uid) + ", not by the user running (uid " +
           std::to_string(me) + ") or root; chown it (`chown " + std::to_string(me) + " " + shell_word(judged) +
           "`) if you trust it, or move it out of the plugin path";
  }
  if ((st.st_mode & S_IWOTH) != 0) {
    return subject + " is writable by every user (mode " + format("%04o", static_cast<unsigned>(st.st_mode & 07777)) +
           "); run `chmod o-w " + shell_word(judged) + "`";
  }
  return "";
}

// The absolute form of `path` as written ("./a" as "<cwd>/a"), to tell
// whether resolving links changed it.
fs::path absolute_as_written(const fs::path& path) {
  std::error_code ec;
  fs::path absolute = fs::absolute(path, ec);
  if (ec) return path;
  absolute = absolute.lexically_normal();
  // "dir/" names the same folder as "dir".
  if (!absolute.has_filename() && absolute.has_relative_path()) absolute = absolute.parent_path();
  return absolute;
}

// "plugin '<path>'" or, when links lead elsewhere, "plugin '<path>' (resolves
// to '<real>')": refusals say which path was judged.
std::string where_resolved(const std::string& noun, const fs::path& path, const fs::path& real) {
  std::string where = noun + " '" + path.string() + "'";
  if (absolute_as_written(path) != real) where += " (resolves to '" + real.string() + "')";
  return where;
}

// "the <noun>", naming `real` when links led from `path` elsewhere: the
// subject of a refusal.
std::string subject_of(const std::string& noun, const fs::path& path, const fs::path& real) {
  const std::string subject = "the " + noun;
  return absolute_as_written(path) != real ? subject + " '" + real.string() + "'" : subject;
}

// Throws unless `real` (the canonical `path`, the file dlopen opens) is a
// regular file that neither it nor its folder lets another user change.
void check_trusted_file(const fs::path& path, const fs::path& real) {
  const std::string where = where_resolved("plugin", path, real);
  const struct stat file = stat_or_throw(real, where);
  if (!S_ISREG(file.st_mode)) throw Error(where + ": not a regular file (" + file_kind(file.st_mode) + ")");
  std::string reason = untrusted_because(real, file, subject_of("file", path, real));
  if (reason.empty()) {
    const fs::path folder = real.parent_path();
    reason = untrusted_because(folder, stat_or_throw(folder, where), "its folder '" + folder.string() + "'");
  }
  if (!reason.empty()) throw Error(where + ": refused: " + reason);
}

// Why a "*.so" entry of a plugin folder is skipped, or "" when it is a
// regular file (a symlink: its target).
std::string skip_reason(const fs::directory_entry& entry) {
  std::error_code ec;
  const fs::file_status target = fs::status(entry.path(), ec);
  if (fs::is_regular_file(target)) return "";
  const bool link = fs::is_symlink(fs::symlink_status(entry.path(), ec));
  if (link && !fs::exists(target)) {
    return "a link to '" + fs::read_symlink(entry.path(), ec).string() + "', which does not exist";
  }
  struct stat st {};
  if (::stat(entry.path().c_str(), &st) != 0) return std::string("cannot read it: ") + std::strerror(errno);
  return "not a regular file (" + file_kind(st.st_mode) + (link ? ", through a link" : "") + ")";
}

}  // namespace

void PluginLoader::load_file(const fs::path& path) {
  std::error_code ec;
  const fs::path canonical = fs::canonical(path, ec);
  if (ec) {
    std::error_code link_ec;
    if (fs::is_symlink(fs::symlink_status(path, link_ec))) {
      throw Error("plugin '" + path.string() + "': a link to '" + fs::read_symlink(path, link_ec).string() +
                  "', which does not exist");
    }
    throw Error("plugin '" + path.string() + "': " + ec.message());
  }
  for (const auto& plugin : loaded_) {
    if (plugin.path == canonical) return;
  }
  // Judged before dlopen, which runs the library's initialisers. (By path:
  // the check on the folder is what keeps others from swapping the file.)
  check_trusted_file(path, canonical);
  const std::string where = "plugin '" + canonical.string() + "'";

  boost::dll::shared_library library;
  try {
    library.load(canonical.string(), boost::dll::load_mode::rtld_now | boost::dll::load_mode::rtld_local);
  } catch (const std::exception& e) {
    throw Error(where + ": cannot load: " + e.what());
  }
  // From here the library's static initialisers have run and may have left
  // pointers into it (in torch's registries, say): it stays mapped even when
  // it is refused below. Nothing else opens libraries while this runs, so
  // the reference stays valid.
  open_libraries().push_back(std::move(library));
  const boost::dll::shared_library& opened = open_libraries().back();

  if (!opened.has(kPluginEntryPoint)) {
    throw Error(where + ": not a timm-cpp plugin: missing entry point '" + std::string(kPluginEntryPoint) + "'");
  }
  const PluginInfo* info = opened.get<const PluginInfo*()>(kPluginEntryPoint)();
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
  // All or nothing: add_all checks every name (its kind's rules, duplicates)
  // before it adds any.
  std::vector<RegistryEntry> entries = registrar.take_entries();
  LoadedPlugin loaded{
      canonical, info->name != nullptr ? info->name : "", info->torch_version, info->sdk_abi_version, {}};
  for (const RegistryEntry& entry : entries) loaded.entries.emplace_back(entry.kind, entry.name);
  registry_.add_all(std::move(entries));
  loaded_.push_back(std::move(loaded));
}

void PluginLoader::collect_directory(const fs::path& dir, bool required, std::vector<Failure>& failures) {
  const auto fail = [&failures](const std::string& message) {
    failures.push_back(Failure{message, std::make_exception_ptr(Error(message))});
  };
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    if (required) throw UsageError("plugin folder '" + dir.string() + "' does not exist or is not a folder");
    return;
  }
  const fs::path real = fs::canonical(dir, ec);
  if (ec) return fail("plugin folder '" + dir.string() + "': " + ec.message());
  const std::string where = where_resolved("plugin folder", dir, real);
  struct stat st {};
  if (::stat(real.c_str(), &st) != 0) return fail(where + ": cannot read it: " + std::strerror(errno));
  const std::string reason = untrusted_because(real, st, subject_of("folder", dir, real));
  // Nothing in a folder others can write to is loaded: any file in it could
  // have been swapped.
  if (!reason.empty()) return fail(where + ": refused: " + reason);

  std::vector<fs::path> files;
  fs::directory_iterator it(dir, ec);
  for (; !ec && it != fs::directory_iterator(); it.increment(ec)) {
    const fs::directory_entry& entry = *it;
    if (entry.path().extension() != ".so") continue;
    const std::string skip = skip_reason(entry);
    if (skip.empty()) {
      files.push_back(entry.path());
    } else {
      log_warning(where + ": skipping '" + entry.path().filename().string() + "': " + skip);
    }
  }
  if (ec) return fail(where + ": cannot list it: " + ec.message());
  std::sort(files.begin(), files.end());
  for (const auto& file : files) {
    try {
      load_file(file);
    } catch (const Error& e) {
      // A file reached through two folders (a link) fails the same way twice.
      const bool repeated =
          std::any_of(failures.begin(), failures.end(), [&](const Failure& f) { return f.message == e.what(); });
      if (!repeated) failures.push_back(Failure{e.what(), std::current_exception()});
    }
  }
}

void PluginLoader::throw_failures(const std::vector<Failure>& failures) {
  // One failure keeps its own type and message.
  if (failures.size() == 1) std::rethrow_exception(failures.front().error);
  std::string message = "the plugins could not all be loaded (" + std::to_string(failures.size()) + " problems):";
  for (const auto& failure : failures) message += "\n  " + failure.message;
  throw Error(message);
}

void PluginLoader::load_directory(const fs::path& dir, bool required) {
  std::vector<Failure> failures;
  collect_directory(dir, required, failures);
  if (!failures.empty()) throw_failures(failures);
}

void PluginLoader::load_search_path(const PluginSearchPath& path) {
  for (const auto& dir : path.user_dirs) {
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) {
      throw UsageError("plugin folder '" + dir.string() + "' does not exist or is not a folder");
    }
  }
  std::vector<Failure> failures;
  std::set<fs::path> seen;  // a folder named twice (flag and TIMM_PLUGIN_PATH) is searched once
  const auto search = [&](const fs::path& dir, bool required) {
    std::error_code ec;
    const fs::path real = fs::canonical(dir, ec);
    if (!ec && !seen.insert(real).second) return;
    collect_directory(dir, required, failures);
  };
  for (const auto& dir : path.user_dirs) search(dir, /*required=*/true);
  for (const auto& dir : path.default_dirs) search(dir, /*required=*/false);
  if (!failures.empty()) throw_failures(failures);
}

std::string describe_loaded_plugins(const std::vector<LoadedPlugin>& plugins) {
  std::string out;
  for (const LoadedPlugin& plugin : plugins) {
    out += "plugin '" + plugin.name + "' from " + plugin.path.string() + ": SDK ABI " +
           std::to_string(plugin.sdk_abi_version) + ", torch " + plugin.torch_version + "\n";
    for (PluginKind kind :
         {PluginKind::kModel, PluginKind::kOptimizer, PluginKind::kScheduler, PluginKind::kAugmentation}) {
      std::vector<std::string> names;
      for (const auto& [entry_kind, name] : plugin.entries) {
        if (entry_kind == kind) names.push_back(name);
      }
      if (names.empty()) continue;
      std::sort(names.begin(), names.end(),
                [](const std::string& a, const std::string& b) { return natural_less(a, b); });
      out += "  " + std::string(kind_name(kind)) + "s (" + std::to_string(names.size()) + "):";
      for (std::size_t i = 0; i < names.size(); ++i) out += (i == 0 ? " " : ", ") + names[i];
      out += "\n";
    }
  }
  return out;
}

PluginSearchPath plugin_search_path(const std::vector<std::string>& cli_dirs) {
  std::error_code ec;
  const fs::path cwd = fs::current_path(ec);
  // Resolved once, here at start-up, so that a later change of the current
  // folder cannot change which folders are searched.
  const auto resolve = [&](const fs::path& dir) {
    if (dir.empty() || dir.is_absolute()) return dir;  // "" stays a folder that does not exist
    if (ec) {
      throw Error("plugin folder '" + dir.string() + "': cannot resolve a relative folder: the current folder is " +
                  "unavailable: " + ec.message());
    }
    fs::path resolved = cwd;
    for (const auto& part : dir) {
      if (part != ".") resolved /= part;  // "./p" reads better as "<cwd>/p"
    }
    log_info("plugin folder '" + dir.string() + "' resolved to '" + resolved.string() + "'");
    return resolved;
  };
  PluginSearchPath path;
  for (const auto& dir : cli_dirs) path.user_dirs.push_back(resolve(dir));
  for (auto& dir : split_path_list(std::getenv("TIMM_PLUGIN_PATH"))) path.user_dirs.push_back(resolve(dir));
  // The folder beside the binary: <prefix>/bin/../lib/timm-cpp/plugins, both
  // in the build tree and in an install.
  const fs::path exe_dir = boost::dll::program_location().parent_path().string();
  path.default_dirs.push_back(exe_dir.parent_path() / TIMM_PLUGIN_SUBDIR);
  return path;
}

std::vector<LoadedPlugin> load_plugins(Registry& registry, const PluginSearchPath& path) {
  PluginLoader loader(registry);
  loader.load_search_path(path);
  return loader.loaded();
}

}  // namespace timm
