#include "timm/plugin/registry.hpp"

#include <algorithm>
#include <set>

#include "timm/base/names.hpp"

namespace timm {

std::string_view kind_name(PluginKind kind) {
  switch (kind) {
    case PluginKind::kModel: return "model";
    case PluginKind::kOptimizer: return "optimizer";
    case PluginKind::kScheduler: return "scheduler";
    case PluginKind::kAugmentation: return "augmentation";
  }
  return "unknown";
}

Registry& Registry::global() {
  // Leaked on purpose: factories point into plugin code, which must not be
  // destroyed after (or while) libraries are torn down at exit.
  static Registry* registry = new Registry();
  return *registry;
}

void Registry::add_all(std::vector<RegistryEntry> entries) {
  std::map<std::pair<PluginKind, std::string>, const RegistryEntry*> incoming;
  for (const auto& entry : entries) {
    if (entry.name.empty()) {
      throw Error("'" + entry.origin + "': registers a " + std::string(kind_name(entry.kind)) + " with an empty name");
    }
    const auto key = std::make_pair(entry.kind, entry.name);
    const RegistryEntry* previous = nullptr;
    if (auto it = entries_.find(key); it != entries_.end()) previous = &it->second;
    if (auto it = incoming.find(key); it != incoming.end()) previous = it->second;
    if (previous != nullptr) {
      throw Error("duplicate " + std::string(kind_name(entry.kind)) + " name '" + entry.name + "': registered by '" +
                  previous->origin + "' and by '" + entry.origin + "'");
    }
    incoming.emplace(key, &entry);
  }
  for (auto& entry : entries) {
    auto key = std::make_pair(entry.kind, entry.name);
    entries_.emplace(std::move(key), std::move(entry));
  }
}

const RegistryEntry* Registry::find(PluginKind kind, std::string_view name) const {
  auto it = entries_.find(std::make_pair(kind, std::string(name)));
  return it == entries_.end() ? nullptr : &it->second;
}

const RegistryEntry& Registry::get(PluginKind kind, std::string_view name) const {
  if (const RegistryEntry* entry = find(kind, name)) return *entry;
  const std::vector<std::string> known = list(kind);
  std::string message = "unknown " + std::string(kind_name(kind)) + " '" + std::string(name) + "'";
  const auto nearest = nearest_names(name, known);
  if (!nearest.empty()) {
    message += "; did you mean ";
    for (std::size_t i = 0; i < nearest.size(); ++i) {
      message += (i == 0 ? "'" : (i + 1 == nearest.size() ? " or '" : ", '")) + nearest[i] + "'";
    }
    message += "?";
  } else if (known.empty()) {
    message += "; no " + std::string(kind_name(kind)) + " plugins are loaded (check --plugin-dir and TIMM_PLUGIN_PATH)";
  } else {
    message += "; see --list-" + std::string(kind_name(kind)) + "s";
  }
  throw UsageError(message);
}

std::vector<std::string> Registry::list(PluginKind kind, std::string_view pattern) const {
  std::vector<std::string> names;
  for (const auto& [key, entry] : entries_) {
    if (key.first == kind && wildcard_match(pattern, key.second)) names.push_back(key.second);
  }
  std::sort(names.begin(), names.end(), [](const std::string& a, const std::string& b) { return natural_less(a, b); });
  return names;
}

std::vector<const RegistryEntry*> Registry::entries(PluginKind kind) const {
  std::vector<const RegistryEntry*> out;
  for (const std::string& name : list(kind)) out.push_back(find(kind, name));
  return out;
}

}  // namespace timm
