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

// ---- Names (docs/plugins.md, "Names")
//
// Every kind: one or more of a-z, 0-9 and '_' (--opt lowers what it is
// given; --model, --sched and the augmentation names match exactly, and timm
// reads '.' in a model name as the start of a pretrained tag). Optimizers
// also must not start with a modifier and '_' ("lookahead_"): --opt reads
// "lookahead_<name>" as <name> wrapped in Lookahead. The rules are per kind;
// the core knows no plugin by name.

// The modifiers --opt may put before an optimizer's name, each followed by
// '_' (timm's create_optimizer_v2: opt.lower().split('_')).
inline constexpr std::string_view kOptimizerModifiers[] = {"lookahead"};

// Why `name` cannot be registered as a `kind`, naming the rule it breaks
// ("optimizer name 'Ceo' has 'C' at position 0; ..."), or "" when it can.
std::string name_rule_violation(PluginKind kind, std::string_view name);

class Registry;

// What --opt selects: a registered optimizer and whether Lookahead wraps it.
struct OptimizerSelection {
  std::string name;  // the registered name
  bool lookahead = false;
};

// Reads `opt` as --opt does: lowered; the whole name when an optimizer is
// registered under it; else "lookahead_<rest>" is Lookahead around <rest>
// when <rest> is registered; else timm's reading, the part after the last
// '_' with "lookahead" as the first part meaning Lookahead. Nothing
// registered under either reading throws a UsageError naming `opt` and the
// nearest known names.
OptimizerSelection select_optimizer(const Registry& registry, std::string_view opt);

class Registry {
 public:
  // The process-wide registry that the plugin loader fills.
  static Registry& global();

  // Adds all entries or none: a name that breaks its kind's rules
  // (name_rule_violation) throws an Error naming the origin (the plugin
  // file), the name and the rule; a duplicate (against the registry or
  // within `entries`) throws an Error naming both origins. Either way nothing
  // is added.
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
