#include "timm/tools/tool_args.hpp"

#include <iostream>
#include <sstream>
#include <stdexcept>

#include "timm/base/error.hpp"
#include "timm/config/config.hpp"

namespace timm {

ToolArgs::ToolArgs(std::string program, std::string description)
    : program_(std::move(program)), description_(std::move(description)) {}

void ToolArgs::add(const std::string& name, const std::string& short_name, const std::string& default_value,
                   const std::string& help) {
  specs_.push_back({name, short_name, default_value, help, Kind::kValue, false});
}

void ToolArgs::add_list(const std::string& name, const std::string& short_name, const std::string& help,
                        bool accumulate) {
  specs_.push_back({name, short_name, "", help, Kind::kList, accumulate});
}

void ToolArgs::add_switch(const std::string& name, const std::string& short_name, const std::string& help) {
  specs_.push_back({name, short_name, "", help, Kind::kSwitch, false});
}

void ToolArgs::add_refused(const std::string& name, const std::string& reason) {
  specs_.push_back({name, "", "", reason, Kind::kRefused, false});
}

void ToolArgs::add_positional(const std::string& name, const std::string& help) {
  positionals_.emplace_back(name, help);
}

const ToolArgs::Spec* ToolArgs::find_long(const std::string& name) const {
  for (const auto& s : specs_) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

const ToolArgs::Spec* ToolArgs::find_short(const std::string& name) const {
  for (const auto& s : specs_) {
    if (!s.short_name.empty() && s.short_name == name) return &s;
  }
  return nullptr;
}

const ToolArgs::Spec& ToolArgs::spec(const std::string& name) const {
  const Spec* s = find_long(name);
  if (s == nullptr) throw Error("ToolArgs: no flag --" + name + " declared");
  return *s;
}

void ToolArgs::parse(int argc, const char* const* argv) {
  std::vector<std::string> positional_values;
  for (int i = 1; i < argc; ++i) {
    std::string token = argv[i];
    if (token == "-h" || token == "--help") {
      help_requested_ = true;
      return;
    }
    if (token.size() < 2 || token[0] != '-' ||
        (token.size() > 1 && std::isdigit(static_cast<unsigned char>(token[1])))) {
      positional_values.push_back(token);
      continue;
    }
    const Spec* s = nullptr;
    std::optional<std::string> inline_value;
    if (token.rfind("--", 0) == 0) {
      std::string name = token.substr(2);
      if (const auto eq = name.find('='); eq != std::string::npos) {
        inline_value = name.substr(eq + 1);
        name = name.substr(0, eq);
      }
      s = find_long(name);
      if (s == nullptr) {
        for (auto& c : name) c = c == '_' ? '-' : c;
        s = find_long(name);
      }
    } else {
      // -b64 or -b 64; the longest declared short name that prefixes the token.
      const std::string body = token.substr(1);
      for (const auto& candidate : specs_) {
        if (candidate.short_name.empty() || body.rfind(candidate.short_name, 0) != 0) continue;
        if (s == nullptr || candidate.short_name.size() > s->short_name.size()) s = &candidate;
      }
      if (s != nullptr && body.size() > s->short_name.size()) inline_value = body.substr(s->short_name.size());
    }
    if (s == nullptr) throw UsageError(program_ + ": unrecognized argument '" + token + "' (see --help)");
    if (s->kind == Kind::kRefused) throw UsageError("--" + s->name + " is " + flag_refusal(s->help));
    std::vector<std::string>& slot = values_[s->name];
    const std::size_t kept = s->accumulate ? slot.size() : 0;
    slot.resize(kept);
    if (s->kind == Kind::kSwitch) {
      if (inline_value) throw UsageError("--" + s->name + " takes no value");
      slot.push_back("1");
      continue;
    }
    if (inline_value) {
      slot.push_back(*inline_value);
    } else {
      while (i + 1 < argc) {
        const std::string next = argv[i + 1];
        const bool looks_like_flag =
            next.size() > 1 && next[0] == '-' && !std::isdigit(static_cast<unsigned char>(next[1])) && next[1] != '.';
        if (looks_like_flag) break;
        slot.push_back(next);
        ++i;
        if (s->kind == Kind::kValue) break;
      }
    }
    if (slot.size() == kept) throw UsageError("--" + s->name + ": expected a value");
  }
  if (positional_values.size() != positionals_.size()) {
    std::string names;
    for (const auto& [name, help] : positionals_) names += " " + name;
    throw UsageError(program_ + ": expected " + std::to_string(positionals_.size()) + " positional argument(s)" +
                     names + ", got " + std::to_string(positional_values.size()));
  }
  for (std::size_t k = 0; k < positionals_.size(); ++k) values_[positionals_[k].first] = {positional_values[k]};
}

bool ToolArgs::parse_or_print_help(int argc, const char* const* argv) {
  parse(argc, argv);
  if (help_requested_) std::cout << help();
  return !help_requested_;
}

std::string ToolArgs::help() const {
  std::ostringstream out;
  out << "usage: " << program_ << " [options]";
  for (const auto& [name, help] : positionals_) out << " " << name;
  out << "\n\n" << description_ << "\n\n";
  for (const auto& [name, help] : positionals_) out << "  " << name << "\n      " << help << "\n";
  out << "options:\n  -h, --help\n      show this help message and exit\n";
  std::string refused;
  for (const auto& s : specs_) {
    if (s.kind == Kind::kRefused) {
      refused += "  --" + s.name + "\n      " + flag_refusal(s.help) + "\n";
      continue;
    }
    out << "  ";
    if (!s.short_name.empty()) out << "-" << s.short_name << ", ";
    out << "--" << s.name;
    if (s.kind == Kind::kValue) out << " VALUE";
    if (s.kind == Kind::kList) out << " VALUE [VALUE ...]";
    out << "\n      " << s.help;
    if (!s.default_value.empty()) out << " (default: " << s.default_value << ")";
    out << "\n";
  }
  if (!refused.empty()) out << "\ntimm's flags this tool refuses:\n" << refused;
  return out.str();
}

bool ToolArgs::given(const std::string& name) const { return values_.count(name) > 0; }

bool ToolArgs::has(const std::string& name) const {
  if (given(name)) return true;
  for (const auto& [pname, help] : positionals_) {
    if (pname == name) return false;
  }
  return !spec(name).default_value.empty();
}

std::string ToolArgs::get(const std::string& name) const {
  if (auto it = values_.find(name); it != values_.end()) return it->second.front();
  for (const auto& [pname, help] : positionals_) {
    if (pname == name) return "";
  }
  return spec(name).default_value;
}

std::string ToolArgs::get_required(const std::string& name) const {
  if (!has(name)) throw UsageError("--" + name + " is required (see " + program_ + " --help)");
  return get(name);
}

std::optional<std::string> ToolArgs::get_optional(const std::string& name) const {
  if (!has(name)) return std::nullopt;
  return get(name);
}

namespace {

int64_t to_int(const std::string& flag, const std::string& text) {
  std::size_t used = 0;
  try {
    const long long v = std::stoll(text, &used);
    if (used == text.size()) return v;
  } catch (const std::exception&) {
  }
  throw UsageError("--" + flag + " '" + text + "': expected an integer");
}

double to_double(const std::string& flag, const std::string& text) {
  std::size_t used = 0;
  try {
    const double v = std::stod(text, &used);
    if (used == text.size()) return v;
  } catch (const std::exception&) {
  }
  throw UsageError("--" + flag + " '" + text + "': expected a number");
}

}  // namespace

int64_t ToolArgs::get_int(const std::string& name) const { return to_int(name, get(name)); }

int64_t ToolArgs::get_int_at_least(const std::string& name, int64_t minimum) const {
  const int64_t value = get_int(name);
  if (value >= minimum) return value;
  const std::string expected = minimum == 1   ? "a positive integer"
                               : minimum == 0 ? "0 or more"
                                              : "an integer >= " + std::to_string(minimum);
  throw UsageError("--" + name + " '" + get(name) + "': expected " + expected);
}

std::optional<int64_t> ToolArgs::get_optional_int(const std::string& name) const {
  if (!has(name)) return std::nullopt;
  return get_int(name);
}

double ToolArgs::get_double(const std::string& name) const { return to_double(name, get(name)); }

std::optional<double> ToolArgs::get_optional_double(const std::string& name) const {
  if (!has(name)) return std::nullopt;
  return get_double(name);
}

bool ToolArgs::get_switch(const std::string& name) const {
  spec(name);
  return given(name);
}

std::vector<std::string> ToolArgs::get_list(const std::string& name) const {
  if (auto it = values_.find(name); it != values_.end()) return it->second;
  return {};
}

std::optional<std::vector<double>> ToolArgs::get_optional_doubles(const std::string& name) const {
  if (!given(name)) return std::nullopt;
  std::vector<double> out;
  for (const auto& v : get_list(name)) out.push_back(to_double(name, v));
  return out;
}

std::optional<std::vector<int64_t>> ToolArgs::get_optional_ints(const std::string& name) const {
  if (!given(name)) return std::nullopt;
  std::vector<int64_t> out;
  for (const auto& v : get_list(name)) out.push_back(to_int(name, v));
  return out;
}

std::map<std::string, std::string> ToolArgs::get_kwargs(const std::string& name) const {
  std::map<std::string, std::string> out;
  for (const auto& token : get_list(name)) {
    const auto eq = token.find('=');
    if (eq == std::string::npos || eq == 0) throw UsageError("--" + name + " '" + token + "': expected key=value");
    out[token.substr(0, eq)] = token.substr(eq + 1);
  }
  return out;
}

}  // namespace timm
