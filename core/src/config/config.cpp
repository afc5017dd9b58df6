// Config: the flag values by dest, their TOML form, and the "not implemented
// yet" gate.
#include "timm/config/config.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "timm/base/error.hpp"

namespace timm {
namespace {

const char* type_name(std::size_t variant_index) {
  static constexpr const char* kNames[] = {"None",     "a bool",         "an int",           "a float",
                                           "a string", "a list of ints", "a list of floats", "a list of strings"};
  return kNames[variant_index];
}

const FlagSpec& config_flag(std::string_view dest) {
  const FlagSpec* flag = find_flag(dest);
  if (flag == nullptr || flag->dest != dest || flag->is_action) {
    throw Error("unknown config value '" + std::string(dest) + "'");
  }
  return *flag;
}

// The variant alternative a flag's values have (None aside).
std::size_t stored_index(FlagType type) {
  switch (type) {
    case FlagType::kSwitch:
      return ConfigValue(false).index();
    case FlagType::kInt:
      return ConfigValue(int64_t{0}).index();
    case FlagType::kFloat:
      return ConfigValue(0.0).index();
    case FlagType::kString:
    case FlagType::kOptionalString:
      return ConfigValue(std::string()).index();
    case FlagType::kInts:
      return ConfigValue(std::vector<int64_t>()).index();
    case FlagType::kFloats:
      return ConfigValue(std::vector<double>()).index();
    case FlagType::kStrings:
    case FlagType::kKwargs:
      return ConfigValue(std::vector<std::string>()).index();
  }
  return 0;
}

// "k=v" tokens sorted by key, the last of a repeated key winning, as the
// Python dict ParseKwargs builds (whose order does not matter to its users).
std::vector<std::string> normalized_kwargs(const FlagSpec& flag, const std::vector<std::string>& tokens) {
  std::map<std::string, std::string> pairs;
  for (const std::string& token : tokens) {
    std::size_t eq = token.find('=');
    if (eq == std::string::npos || eq == 0) {
      throw Error("--" + flag.name + ": expected key=value, got " + timm::in_quotes(token));
    }
    pairs[token.substr(0, eq)] = token.substr(eq + 1);
  }
  std::vector<std::string> result;
  for (const auto& [key, value] : pairs) result.push_back(key + "=" + value);
  return result;
}

// The value converted to the flag's stored type (ints widen to floats).
ConfigValue fitted(const FlagSpec& flag, ConfigValue value) {
  if (std::holds_alternative<std::monostate>(value)) return value;
  if (flag.type == FlagType::kFloat) {
    if (const auto* i = std::get_if<int64_t>(&value)) return static_cast<double>(*i);
  }
  if (flag.type == FlagType::kFloats) {
    if (const auto* i = std::get_if<std::vector<int64_t>>(&value)) {
      return std::vector<double>(i->begin(), i->end());
    }
  }
  if (value.index() != stored_index(flag.type)) {
    throw Error("config value '" + flag.dest + "' takes " + type_name(stored_index(flag.type)) + ", not " +
                type_name(value.index()));
  }
  if (flag.nargs > 1) {
    std::size_t count = std::visit(
        [](const auto& v) -> std::size_t {
          if constexpr (requires { v.size(); })
            return v.size();
          else
            return 1;
        },
        value);
    if (count != static_cast<std::size_t>(flag.nargs)) {
      throw Error("config value '" + flag.dest + "' takes " + std::to_string(flag.nargs) + " values, not " +
                  std::to_string(count));
    }
  }
  if (flag.type == FlagType::kKwargs) {
    return normalized_kwargs(flag, std::get<std::vector<std::string>>(value));
  }
  return value;
}

// ---- TOML output ----------------------------------------------------------

std::string toml_string(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
          out += buf;
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

// The shortest text that reads back as the same double, in TOML float syntax.
std::string toml_float(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  std::string text(buf, end);
  if (text.find_first_of(".eE") == std::string::npos) text += ".0";
  return text;
}

bool is_bare_key(std::string_view key) {
  return !key.empty() && std::all_of(key.begin(), key.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
  });
}

std::string toml_kwargs(const std::vector<std::string>& tokens) {
  if (tokens.empty()) return "{}";
  std::string out = "{ ";
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    std::size_t eq = tokens[i].find('=');
    std::string key = tokens[i].substr(0, eq);
    out += (is_bare_key(key) ? key : toml_string(key)) + " = " + toml_string(tokens[i].substr(eq + 1));
    out += i + 1 < tokens.size() ? ", " : " }";
  }
  return out;
}

template <class T, class Format>
std::string toml_array(const std::vector<T>& items, Format format) {
  std::string out = "[";
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += ", ";
    out += format(items[i]);
  }
  return out + "]";
}

std::string toml_value(const FlagSpec& flag, const ConfigValue& value) {
  if (flag.type == FlagType::kKwargs) {
    return toml_kwargs(std::get<std::vector<std::string>>(value));
  }
  struct Formatter {
    std::string operator()(std::monostate) const { return "None"; }
    std::string operator()(bool v) const { return v ? "true" : "false"; }
    std::string operator()(int64_t v) const { return std::to_string(v); }
    std::string operator()(double v) const { return toml_float(v); }
    std::string operator()(const std::string& v) const { return toml_string(v); }
    std::string operator()(const std::vector<int64_t>& v) const {
      return toml_array(v, [](int64_t x) { return std::to_string(x); });
    }
    std::string operator()(const std::vector<double>& v) const { return toml_array(v, toml_float); }
    std::string operator()(const std::vector<std::string>& v) const { return toml_array(v, toml_string); }
  };
  return std::visit(Formatter{}, value);
}

}  // namespace

namespace config_detail {
void throw_wrong_type(std::string_view dest, const ConfigValue& value, std::size_t wanted_index) {
  throw Error("config value '" + std::string(dest) + "' is " + type_name(value.index()) + ", not " +
              type_name(wanted_index));
}
}  // namespace config_detail

Config::Config() {
  for (const FlagSpec& flag : train_flags()) {
    if (!flag.is_action) values_.emplace(flag.dest, flag.default_value);
  }
}

bool Config::has(std::string_view dest) const { return !std::holds_alternative<std::monostate>(value(dest)); }

const ConfigValue& Config::value(std::string_view dest) const {
  auto it = values_.find(dest);
  if (it == values_.end()) throw Error("unknown config value '" + std::string(dest) + "'");
  return it->second;
}

std::map<std::string, std::string> Config::get_kwargs(std::string_view dest) const {
  std::map<std::string, std::string> pairs;
  for (const std::string& token : get<std::vector<std::string>>(dest)) {
    std::size_t eq = token.find('=');
    pairs[token.substr(0, eq)] = eq == std::string::npos ? "" : token.substr(eq + 1);
  }
  return pairs;
}

bool Config::is_explicit(std::string_view dest) const {
  value(dest);  // rejects an unknown dest
  return explicit_.find(dest) != explicit_.end();
}

void Config::set(std::string_view dest, ConfigValue value) {
  const FlagSpec& flag = config_flag(dest);
  values_.find(dest)->second = fitted(flag, std::move(value));
}

void Config::set_explicit(std::string_view dest, ConfigValue value) {
  set(dest, std::move(value));
  explicit_.emplace(dest);
}

std::string Config::to_toml() const {
  std::ostringstream out;
  out << "# timm-train configuration. Keys are dest names; values that are None are\n"
         "# commented out. Use it again with --config FILE.\n";
  std::string group;
  for (const FlagSpec& flag : train_flags()) {
    if (flag.is_action) continue;
    if (flag.group != group) {
      group = flag.group;
      out << "\n# " << group << "\n";
    }
    const ConfigValue& v = value(flag.dest);
    if (std::holds_alternative<std::monostate>(v)) out << "# ";
    out << flag.dest << " = " << toml_value(flag, v) << "\n";
  }
  return out.str();
}

std::string flag_refusal(const std::string& unsupported) {
  return unsupported.empty() ? "not implemented yet" : "not supported: " + unsupported;
}

void check_implemented(const Config& config) {
  std::vector<std::string> refused;
  const FlagSpec* first = nullptr;
  for (const FlagSpec& flag : train_flags()) {
    if (flag.implemented || flag.is_action) continue;
    if (config.value(flag.dest) == flag.default_value) continue;
    if (first == nullptr) first = &flag;
    refused.push_back("--" + flag.name);
  }
  if (refused.empty()) return;
  std::string message = refused.front() + " is " + flag_refusal(first->unsupported);
  if (refused.size() > 1) {
    message += refused.size() == 2 ? "; nor is " : "; nor are ";
    for (std::size_t i = 1; i < refused.size(); ++i) {
      message += (i > 1 ? ", " : "") + refused[i];
    }
  }
  throw UsageError(message);
}

}  // namespace timm
