// --config FILE.toml: the TOML counterpart of timm's YAML config file.
#include <toml++/toml.h>

#include <algorithm>
#include <charconv>
#include <map>

#include "timm/base/error.hpp"
#include "timm/base/names.hpp"
#include "timm/config/config.hpp"

namespace timm {
namespace {

std::string location(const std::filesystem::path& file, const toml::source_position& at) {
  return file.string() + ":" + std::to_string(at.line) + ":" + std::to_string(at.column);
}

std::string type_name(const toml::node& node) {
  switch (node.type()) {
    case toml::node_type::table:
      return "a table";
    case toml::node_type::array:
      return "an array";
    case toml::node_type::string:
      return "a string";
    case toml::node_type::integer:
      return "an integer";
    case toml::node_type::floating_point:
      return "a float";
    case toml::node_type::boolean:
      return "a boolean";
    default:
      return "a date or time";
  }
}

// Reads the values of one key; errors name the file, line, column and key.
class ValueReader {
 public:
  ValueReader(const std::filesystem::path& file, std::string key, const FlagSpec& flag)
      : file_(file), key_(std::move(key)), flag_(flag) {}

  ConfigValue read(const toml::node& node) const {
    switch (flag_.type) {
      case FlagType::kSwitch:
        return scalar<bool>(node, "a boolean (true or false)");
      case FlagType::kInt:
        return scalar<int64_t>(node, "an integer");
      case FlagType::kFloat:
        return number(node);
      case FlagType::kString:
        return choice(node);
      case FlagType::kOptionalString:
        return scalar<std::string>(node, "a string");
      case FlagType::kInts:
        return list(node, [&](const toml::node& n) { return scalar<int64_t>(n, "an integer"); });
      case FlagType::kFloats:
        return list(node, [&](const toml::node& n) { return number(n); });
      case FlagType::kStrings:
        return list(node, [&](const toml::node& n) { return scalar<std::string>(n, "a string"); });
      case FlagType::kKwargs:
        return kwargs(node);
    }
    return {};
  }

 private:
  [[noreturn]] void fail(const toml::node& node, const std::string& expected) const {
    throw UsageError(location(file_, node.source().begin) + ": key " + timm::in_quotes(key_) + " expects " + expected +
                     ", got " + type_name(node));
  }

  template <class T>
  T scalar(const toml::node& node, const std::string& expected) const {
    std::optional<T> value = node.value_exact<T>();
    if (!value) fail(node, expected);
    return *value;
  }

  // A TOML integer is fine where a float is expected.
  double number(const toml::node& node) const {
    if (node.is_integer()) return static_cast<double>(*node.value_exact<int64_t>());
    return scalar<double>(node, "a number");
  }

  std::string choice(const toml::node& node) const {
    std::string value = scalar<std::string>(node, "a string");
    if (flag_.choices.empty() || std::find(flag_.choices.begin(), flag_.choices.end(), value) != flag_.choices.end()) {
      return value;
    }
    std::string expected = "one of";
    for (const std::string& c : flag_.choices) expected += " " + c;
    throw UsageError(location(file_, node.source().begin) + ": key " + timm::in_quotes(key_) + " expects " + expected +
                     ", got " + timm::in_quotes(value));
  }

  template <class Element>
  auto list(const toml::node& node, Element element) const -> std::vector<decltype(element(node))> {
    const toml::array* array = node.as_array();
    if (array == nullptr) fail(node, "an array");
    if (flag_.nargs > 1 && array->size() != static_cast<std::size_t>(flag_.nargs)) {
      throw UsageError(location(file_, node.source().begin) + ": key " + timm::in_quotes(key_) + " expects " +
                       std::to_string(flag_.nargs) + " values, got " + std::to_string(array->size()));
    }
    std::vector<decltype(element(node))> values;
    for (const toml::node& item : *array) values.push_back(element(item));
    return values;
  }

  // A table { key = value } or an array of "key=value" strings; values kept
  // as text, as --model-kwargs gives them.
  std::vector<std::string> kwargs(const toml::node& node) const {
    std::vector<std::string> tokens;
    if (const toml::table* table = node.as_table()) {
      for (auto&& [key, value] : *table) {
        tokens.push_back(std::string(key.str()) + "=" + kwarg_text(value));
      }
      return tokens;
    }
    if (!node.is_array()) fail(node, "a table of key = value");
    for (const toml::node& item : *node.as_array()) {
      std::string token = scalar<std::string>(item, "\"key=value\" strings");
      if (token.find('=') == std::string::npos || token.front() == '=') {
        throw UsageError(location(file_, item.source().begin) + ": key " + timm::in_quotes(key_) +
                         " expects \"key=value\" strings, got " + timm::in_quotes(token));
      }
      tokens.push_back(token);
    }
    return tokens;
  }

  // Python spellings, since the values stand for Python literals.
  std::string kwarg_text(const toml::node& node) const {
    if (auto s = node.value_exact<std::string>()) return *s;
    if (auto i = node.value_exact<int64_t>()) return std::to_string(*i);
    if (auto b = node.value_exact<bool>()) return *b ? "True" : "False";
    if (auto d = node.value_exact<double>()) {
      char buf[64];
      auto [end, ec] = std::to_chars(buf, buf + sizeof buf, *d);
      return std::string(buf, end);
    }
    fail(node, "a string, number or boolean value");
  }

  const std::filesystem::path& file_;
  std::string key_;
  const FlagSpec& flag_;
};

// The keys spelt like `key`: flag names for "batch-size", dests otherwise.
std::vector<std::string> config_keys_like(const std::string& key) {
  bool dashes = key.find('-') != std::string::npos;
  std::vector<std::string> keys;
  for (const FlagSpec& flag : train_flags()) {
    if (!flag.is_action) keys.push_back(dashes ? flag.name : flag.dest);
  }
  return keys;
}

[[noreturn]] void throw_unknown_key(const std::string& where, const std::string& key) {
  std::string message = where + ": unknown key " + timm::in_quotes(key);
  std::vector<std::string> near = nearest_names(key, config_keys_like(key));
  if (!near.empty()) {
    message += " (did you mean";
    for (std::size_t i = 0; i < near.size(); ++i) message += (i ? ", " : " ") + timm::in_quotes(near[i]);
    message += "?)";
  }
  throw UsageError(message);
}

toml::table parse(const std::filesystem::path& file) {
  std::error_code error;
  if (!std::filesystem::is_regular_file(file, error)) {
    throw UsageError("config file " + timm::in_quotes(file.string()) + " does not exist or is not a file");
  }
  try {
    return toml::parse_file(file.string());
  } catch (const toml::parse_error& e) {
    throw UsageError(location(file, e.source().begin) + ": invalid TOML: " + std::string(e.description()));
  }
}

}  // namespace

void load_config_file(const std::filesystem::path& file, Config& config) {
  toml::table table = parse(file);
  std::map<std::string, std::string> key_of_dest;  // to catch "lr" and "lr" spelt twice
  for (auto&& [toml_key, node] : table) {
    std::string key(toml_key.str());
    std::string where = location(file, toml_key.source().begin);
    const FlagSpec* flag = find_flag(key);
    if (flag == nullptr) throw_unknown_key(where, key);
    if (flag->is_action) {
      throw UsageError(where + ": key " + timm::in_quotes(key) + " is a command-line action, not a config value");
    }
    if (auto [it, added] = key_of_dest.emplace(flag->dest, key); !added) {
      throw UsageError(where + ": key " + timm::in_quotes(key) + " sets the same value as " +
                       timm::in_quotes(it->second));
    }
    config.set_explicit(flag->dest, ValueReader(file, key, *flag).read(node));
  }
}

}  // namespace timm
