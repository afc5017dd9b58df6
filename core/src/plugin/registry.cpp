#include "timm/plugin/registry.hpp"

#include <algorithm>
#include <set>

#include "timm/base/names.hpp"

namespace timm {
namespace {

// How the names of a kind are selected, for the rule in name_rule_violation.
std::string_view selected_by(PluginKind kind) {
  switch (kind) {
    case PluginKind::kModel:
      return "--model matches a name exactly, and timm reads '.' as a pretrained tag's start";
    case PluginKind::kOptimizer:
      return "--opt lowers what it is given";
    case PluginKind::kScheduler:
      return "--sched matches a name exactly";
    case PluginKind::kAugmentation:
      return "the rule of every kind";
  }
  return "";
}

bool is_name_char(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_'; }

// A byte of a name for a message: 'X', or byte 0xNN when it is no printable ASCII.
std::string describe_char(char c) {
  const auto byte = static_cast<unsigned char>(c);
  if (byte >= 'A' && byte <= 'Z') return "upper-case '" + std::string(1, c) + "'";
  if (byte > 0x20 && byte < 0x7f) return "'" + std::string(1, c) + "'";
  constexpr const char* kHex = "0123456789abcdef";
  return std::string("byte 0x") + kHex[byte >> 4] + kHex[byte & 15];
}

// "; did you mean 'a' or 'b'?", or what to do when nothing is close.
std::string suggestions(PluginKind kind, const std::vector<std::string>& nearest, bool none_known) {
  std::string message;
  if (!nearest.empty()) {
    message += "; did you mean ";
    for (std::size_t i = 0; i < nearest.size(); ++i) {
      message += (i == 0 ? "'" : (i + 1 == nearest.size() ? " or '" : ", '")) + nearest[i] + "'";
    }
    message += "?";
  } else if (none_known) {
    message += "; no " + std::string(kind_name(kind)) + " plugins are loaded (check --plugin-dir and TIMM_PLUGIN_PATH)";
  } else {
    message += "; see --list-" + std::string(kind_name(kind)) + "s";
  }
  return message;
}

}  // namespace

std::string name_rule_violation(PluginKind kind, std::string_view name) {
  const std::string what = std::string(kind_name(kind)) + " name";
  const std::string rule = "; " + what + "s are made of a-z, 0-9 and '_' (" + std::string(selected_by(kind)) + ")";
  if (name.empty()) return "an empty " + what + rule;
  for (std::size_t i = 0; i < name.size(); ++i) {
    if (!is_name_char(name[i])) {
      return what + " '" + std::string(name) + "' has " + describe_char(name[i]) + " at position " + std::to_string(i) +
             rule;
    }
  }
  if (kind == PluginKind::kOptimizer) {
    for (std::string_view modifier : kOptimizerModifiers) {
      const std::string prefix = std::string(modifier) + "_";
      if (name.substr(0, prefix.size()) == prefix) {
        return what + " '" + std::string(name) + "' starts with '" + prefix + "', which --opt reads as a modifier ('" +
               std::string(name) + "' is " + std::string(modifier) + " around '" +
               std::string(name.substr(prefix.size())) + "'); an optimizer name must not start with '" + prefix + "'";
      }
    }
  }
  return "";
}

OptimizerSelection select_optimizer(const Registry& registry, std::string_view opt) {
  constexpr PluginKind kKind = PluginKind::kOptimizer;
  const std::string whole = ascii_lower(opt);
  if (registry.find(kKind, whole) != nullptr) return {whole, false};
  // timm's create_optimizer_v2: parts = opt.lower().split('_'); the last part
  // is the optimizer, and a first part "lookahead" wraps it.
  const std::size_t first_sep = whole.find('_');
  const std::size_t last_sep = whole.rfind('_');
  const std::string last = last_sep == std::string::npos ? whole : whole.substr(last_sep + 1);
  const bool lookahead = first_sep != std::string::npos && whole.substr(0, first_sep) == kOptimizerModifiers[0];
  std::vector<std::string> tried{whole};
  if (lookahead) {
    std::string rest = whole.substr(first_sep + 1);
    if (registry.find(kKind, rest) != nullptr) return {rest, true};
    if (rest != last) tried.push_back(std::move(rest));
  }
  if (registry.find(kKind, last) != nullptr) return {last, lookahead};
  if (last == whole) registry.get(kKind, whole);  // throws, suggesting names near it
  tried.push_back(last);

  const std::vector<std::string> known = registry.list(kKind);
  std::vector<std::string> nearest;
  for (const std::string& name : tried) {
    for (std::string& near : nearest_names(name, known)) {
      if (nearest.size() < 3 && std::find(nearest.begin(), nearest.end(), near) == nearest.end()) {
        nearest.push_back(std::move(near));
      }
    }
  }
  std::string message =
      "unknown optimizer '" + std::string(opt) + "': " + (tried.size() == 2 ? "neither " : "none of ");
  for (std::size_t i = 0; i < tried.size(); ++i) {
    message +=
        (i == 0 ? "'" : (tried.size() == 2 ? " nor '" : (i + 1 == tried.size() ? " or '" : ", '"))) + tried[i] + "'";
  }
  message += std::string(" is a registered optimizer (--opt tries the whole name, ") +
             (lookahead ? "then the name after 'lookahead_', " : "") +
             "then timm's reading: the part after the last '_')";
  throw UsageError(message + suggestions(kKind, nearest, known.empty()));
}

std::string_view kind_name(PluginKind kind) {
  switch (kind) {
    case PluginKind::kModel:
      return "model";
    case PluginKind::kOptimizer:
      return "optimizer";
    case PluginKind::kScheduler:
      return "scheduler";
    case PluginKind::kAugmentation:
      return "augmentation";
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
  // Every name that breaks its kind's rules, in one message.
  std::string refused;
  for (const auto& entry : entries) {
    const std::string violation = name_rule_violation(entry.kind, entry.name);
    if (violation.empty()) continue;
    if (refused.empty()) {
      refused = "plugin '" + entry.origin + "': refused: " + violation;
    } else {
      refused +=
          entry.origin == entries.front().origin ? "; " + violation : "; plugin '" + entry.origin + "': " + violation;
    }
  }
  if (!refused.empty()) throw Error(refused);
  for (const auto& entry : entries) {
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
  const std::string message = "unknown " + std::string(kind_name(kind)) + " '" + std::string(name) + "'";
  throw UsageError(message + suggestions(kind, nearest_names(name, known), known.empty()));
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
