// The registry of everything plugins provide, keyed by (kind, name).
//
// Each entry records its factory, a one-line description, what the plugin
// declares about it (its traits: OptimizerTraits, AugmentationTraits) and the
// library it came from, so errors and listings can say where a name was
// defined. Plugins add entries through a PluginRegistrar (plugin.hpp); the
// core and the apps look them up here. The core itself never names a plugin.
#pragma once

#include <any>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "timm/base/error.hpp"

namespace timm {

enum class PluginKind { kModel, kOptimizer, kScheduler, kAugmentation };

// "model", "optimizer", "scheduler", "augmentation".
std::string_view kind_name(PluginKind kind);

struct RegistryEntry {
  PluginKind kind;
  std::string name;
  std::string description;
  std::string origin;  // the plugin file that registered it, or "<builtin>"
  std::any factory;    // a ModelFactory, OptimizerFactory, ... by kind
  std::any traits;     // an OptimizerTraits, AugmentationTraits, ... by kind; empty when none were declared
};

// The traits of an entry if it declared them as a Traits, else nullptr.
template <class Traits>
const Traits* traits_of(const RegistryEntry& entry) {
  return std::any_cast<Traits>(&entry.traits);
}

class Registry {
 public:
  // The process-wide registry that the plugin loader fills.
  static Registry& global();

  // Adds all entries or none: a duplicate (against the registry or within
  // `entries`) throws an Error naming both origins and nothing is added.
  void add_all(std::vector<RegistryEntry> entries);

  // The entry, or nullptr.
  const RegistryEntry* find(PluginKind kind, std::string_view name) const;

  // The entry; an unknown name throws a UsageError that suggests the nearest
  // known names of that kind.
  const RegistryEntry& get(PluginKind kind, std::string_view name) const;

  // The factory of an entry, checked to be of type Factory.
  template <class Factory>
  const Factory& factory(PluginKind kind, std::string_view name) const {
    const RegistryEntry& entry = get(kind, name);
    const Factory* f = std::any_cast<Factory>(&entry.factory);
    if (f == nullptr) {
      throw Error(std::string(kind_name(kind)) + " '" + entry.name + "' from '" + entry.origin +
                  "' was registered with a factory of the wrong type");
    }
    return *f;
  }

  // Names of a kind matching a wildcard pattern, in timm's natural order.
  std::vector<std::string> list(PluginKind kind, std::string_view pattern = "*") const;

  // The entries of a kind, in the natural order of their names.
  std::vector<const RegistryEntry*> entries(PluginKind kind) const;

  std::size_t size() const { return entries_.size(); }

 private:
  std::map<std::pair<PluginKind, std::string>, RegistryEntry, std::less<>> entries_;
};

}  // namespace timm
