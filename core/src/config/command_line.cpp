// timm-train's command line, parsed the way Python's argparse parses train.py's.
//
// Boost.Program_options parses it: an options_description generated from
// train_flags() (long names, aliases, one-letter short names), its long and
// short styles with unique-prefix guessing (exact match wins, as in argparse),
// and a positional description for the deprecated `data`. What argparse reads
// differently from those styles is done by argparse_style(), an extra style
// parser that runs before them, and by up_to_help(), a cut of the line at -h.
// The parsed options are then read in command-line order, as argparse applies
// them: the last occurrence of a flag wins, --plugin-dir keeps its order.
#include <algorithm>
#include <cctype>
#include <charconv>
#include <map>
#include <memory>
#include <optional>
#include <sstream>

#include <boost/make_shared.hpp>
#include <boost/program_options/errors.hpp>
#include <boost/program_options/options_description.hpp>
#include <boost/program_options/parsers.hpp>
#include <boost/program_options/positional_options.hpp>
#include <boost/program_options/value_semantic.hpp>

#include "timm/base/error.hpp"
#include "timm/base/names.hpp"
#include "timm/config/config.hpp"

namespace timm {
namespace {

namespace po = boost::program_options;

std::string display(const FlagSpec& flag) { return "--" + flag.name; }

// ---- Values ---------------------------------------------------------------

// Python's int() and float() ignore surrounding blanks and accept a '+'.
std::string_view number_text(std::string_view text) {
  auto blank = [](char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; };
  while (!text.empty() && blank(text.front())) text.remove_prefix(1);
  while (!text.empty() && blank(text.back())) text.remove_suffix(1);
  if (text.size() > 1 && text.front() == '+' && text[1] != '-') text.remove_prefix(1);
  return text;
}

// The whole text as a T, or nullopt (from_chars takes ".5", "1e-5", "inf").
template <class T>
std::optional<T> parse_number(std::string_view text) {
  text = number_text(text);
  T value{};
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

bool looks_like_number(std::string_view text) { return parse_number<double>(text).has_value(); }

[[noreturn]] void throw_bad_value(const FlagSpec& flag, const std::string& value, const std::string& expected) {
  throw UsageError("invalid value " + timm::in_quotes(value) + " for " + display(flag) + ": expected " + expected);
}

int64_t to_int(const FlagSpec& flag, const std::string& text) {
  std::optional<int64_t> value = parse_number<int64_t>(text);
  if (!value) throw_bad_value(flag, text, "an integer");
  return *value;
}

double to_float(const FlagSpec& flag, const std::string& text) {
  std::optional<double> value = parse_number<double>(text);
  if (!value) throw_bad_value(flag, text, "a number");
  return *value;
}

std::string to_choice(const FlagSpec& flag, const std::string& text) {
  if (flag.choices.empty() || std::find(flag.choices.begin(), flag.choices.end(), text) != flag.choices.end()) {
    return text;
  }
  std::string expected = "one of";
  for (const std::string& choice : flag.choices) expected += " " + choice;
  throw_bad_value(flag, text, expected);
}

std::string to_kwarg(const FlagSpec& flag, const std::string& text) {
  std::size_t eq = text.find('=');
  if (eq == std::string::npos || eq == 0) throw_bad_value(flag, text, "key=value");
  return text;
}

template <class T, class Convert>
std::vector<T> to_list(const FlagSpec& flag, const std::vector<std::string>& texts, Convert convert) {
  std::vector<T> out;
  for (const std::string& text : texts) out.push_back(convert(flag, text));
  return out;
}

std::string as_is(const FlagSpec&, const std::string& text) { return text; }

ConfigValue convert(const FlagSpec& flag, const std::vector<std::string>& values) {
  switch (flag.type) {
    case FlagType::kSwitch:
      return true;
    case FlagType::kInt:
      return to_int(flag, values.at(0));
    case FlagType::kFloat:
      return to_float(flag, values.at(0));
    case FlagType::kString:
      return to_choice(flag, values.at(0));
    case FlagType::kOptionalString:
      return values.empty() ? flag.const_value : values[0];
    case FlagType::kInts:
      return to_list<int64_t>(flag, values, to_int);
    case FlagType::kFloats:
      return to_list<double>(flag, values, to_float);
    case FlagType::kStrings:
      return to_list<std::string>(flag, values, as_is);
    case FlagType::kKwargs:
      return to_list<std::string>(flag, values, to_kwarg);
  }
  return {};
}

// ---- The Program_options description -------------------------------------

// How many value tokens a flag takes, for the parser. The least is always 0:
// with a least of 1, Program_options takes the next token as the value even
// when it is a flag ("--model --amp" sets model to "--amp"), and it can say
// neither "exactly 3" (--input-size) nor which count was missing. The values
// are counted by check_count() instead. Nothing is stored through it: the
// parsed options are read in order (argparse lets a repeated flag's last
// occurrence win, where store() would throw multiple_occurrences).
class TokenCount final : public po::value_semantic {
 public:
  explicit TokenCount(unsigned max) : max_(max) {}
  std::string name() const override { return "ARG"; }
  unsigned min_tokens() const override { return 0; }
  unsigned max_tokens() const override { return max_; }
  bool is_composing() const override { return false; }
  bool is_required() const override { return false; }
  void parse(boost::any&, const std::vector<std::string>&, bool) const override {}
  bool apply_default(boost::any&) const override { return false; }
  void notify(const boost::any&) const override {}

 private:
  unsigned max_;
};

unsigned max_tokens(const FlagSpec& flag) {
  constexpr unsigned kUnlimited = 32000;  // what multitoken() allows
  switch (flag.nargs) {
    case kNargsOneOrMore:
    case kNargsZeroOrMore:
      return kUnlimited;
    case kNargsOptional:
      return 1;
    default:
      return static_cast<unsigned>(flag.nargs);
  }
}

// "decay-rate,dr" or "batch-size,b": Program_options' short names are one
// letter, so "-vb" is left to argparse_style().
std::string option_names(const FlagSpec& flag) {
  std::string names = flag.name;
  for (const std::string& alias : flag.aliases) names += "," + alias;
  if (flag.short_name.size() == 1) names += "," + flag.short_name;
  return names;
}

// Every flag but the positional `data`, which only data_positional() names,
// so that "--data" is no flag (it abbreviates --data-dir and others).
const po::options_description& flag_options() {
  static const auto options = [] {
    auto out = std::make_unique<po::options_description>();
    for (const FlagSpec& flag : train_flags()) {
      if (flag.positional) continue;
      // The description owns the semantic.
      out->add(
          boost::make_shared<po::option_description>(option_names(flag).c_str(), new TokenCount(max_tokens(flag))));
    }
    return out;
  }();
  return *options;
}

constexpr const char* kData = "data";

// Every positional token is named `data`: read_options() reports a second one
// with both tokens, which too_many_positional_options_error does not carry.
const po::positional_options_description& data_positional() {
  static const po::positional_options_description positional = [] {
    po::positional_options_description out;
    out.add(kData, -1);
    return out;
  }();
  return positional;
}

// ---- argparse's spellings -------------------------------------------------

// The flag whose short name is `name` ("vb"); else, with allow_prefix, the only
// one whose short name begins so ("v"), as argparse matches single-dash flags.
const FlagSpec* short_flag(std::string_view name, bool allow_prefix) {
  const FlagSpec* prefixed = nullptr;
  int prefix_count = 0;
  for (const FlagSpec& flag : train_flags()) {
    if (flag.short_name.empty()) continue;
    if (flag.short_name == name) return &flag;
    if (flag.short_name.starts_with(name)) {
      prefixed = &flag;
      ++prefix_count;
    }
  }
  return allow_prefix && prefix_count == 1 ? prefixed : nullptr;
}

po::option parsed_token(std::string key, const std::string& token, std::optional<std::string> attached) {
  po::option option;
  option.string_key = std::move(key);
  option.original_tokens = {token};
  if (attached) option.value = {*attached};
  return option;
}

// argparse reads a dashed token as a value when it reads as a number (it
// takes "-1" and "-.5"; we also take "-1e-3") or has a space where no flag name
// can ("-a b", "--x y"; but "-b 5" is -b with " 5").
bool is_dashed_value(const std::string& token) {
  if (looks_like_number(token)) return true;
  if (token.find(' ') == std::string::npos) return false;
  if (token.starts_with("--")) return token.substr(0, token.find('=')).find(' ') != std::string::npos;
  return short_flag(token.substr(1, 1), false) == nullptr;
}

// argparse's short flags where Program_options' short style differs: "-vb"
// (two letters), "-v" (a prefix of "-vb"), "-b=128" (the '=' is no part of the
// value). "-b128" is left to that style.
std::optional<po::option> short_spelling(const std::string& token) {
  std::size_t eq = token.find('=');
  std::string name = token.substr(1, eq == std::string::npos ? eq : eq - 1);
  const FlagSpec* flag = short_flag(name, eq == std::string::npos);
  if (flag == nullptr) return std::nullopt;
  std::optional<std::string> attached;
  if (eq != std::string::npos) attached = token.substr(eq + 1);
  return parsed_token(flag->name, token, attached);
}

// "--dataset=": argparse takes the empty value, Program_options refuses it.
// The name may be abbreviated; Program_options resolves it like any other.
// "---b" and "--=5" name no flag, where Program_options reads -b and a positional.
std::optional<po::option> long_spelling(const std::string& token) {
  if (token[2] == '-' || token[2] == '=') throw UsageError("unrecognized option " + timm::in_quotes(token));
  if (token.find('=') != token.size() - 1) return std::nullopt;
  return parsed_token(token.substr(2, token.size() - 3), token, "");
}

// A style parser that Program_options tries before its own styles, for the
// tokens argparse reads differently; it returns nothing for the others.
std::vector<po::option> argparse_style(std::vector<std::string>& args) {
  const std::string& token = args.front();
  if (token.size() < 2 || token[0] != '-' || token == "--") return {};
  std::optional<po::option> option;
  if (is_dashed_value(token)) {
    option = parsed_token("", token, token);  // a positional, or a value for the flag before
  } else if (token[1] != '-') {
    option = short_spelling(token);
  } else {
    option = long_spelling(token);
  }
  if (!option) return {};
  args.erase(args.begin());
  return {*option};
}

// -h, --help or an abbreviation of it.
bool names_help(const std::string& token) {
  if (token == "-h") return true;
  if (!token.starts_with("--")) return false;
  try {
    const po::option_description* option = flag_options().find_nothrow(token.substr(2), true);
    return option != nullptr && option->long_name() == "help";
  } catch (const po::ambiguous_option&) {
    return false;  // the parser reports it
  }
}

// argparse shows the help as soon as it meets -h, so nothing after it can fail;
// Program_options reads the whole line before we see any of it.
std::vector<std::string> up_to_help(std::vector<std::string> args) {
  auto end = std::find_if(args.begin(), args.end(),
                          [](const std::string& token) { return token == "--" || names_help(token); });
  if (end != args.end() && *end != "--") args.erase(end + 1, args.end());
  return args;
}

// ---- Errors ---------------------------------------------------------------

// The command-line token an error is about ("--warmup-lrr=3"): Program_options
// keeps it only as a placeholder of its message template.
std::string original_token(po::error_with_option_name error) {
  error.m_error_template = "%original_token%";
  return error.what();
}

std::string without_value(const std::string& token) { return token.substr(0, token.find('=')); }

// The flag spellings like `name` (long ones for "--x", short for "-x"), so
// that suggestions for a long name are long names.
std::vector<std::string> option_texts_like(const std::string& name) {
  std::vector<std::string> texts;
  for (const FlagSpec& flag : train_flags()) {
    if (flag.positional) continue;
    if (!name.starts_with("--")) {
      if (!flag.short_name.empty()) texts.push_back("-" + flag.short_name);
      continue;
    }
    texts.push_back("--" + flag.name);
    for (const std::string& alias : flag.aliases) texts.push_back("--" + alias);
  }
  return texts;
}

[[noreturn]] void throw_unknown_option(const std::string& token) {
  std::string name = without_value(token);
  std::string message = "unrecognized option " + timm::in_quotes(name);
  std::vector<std::string> near = nearest_names(name, option_texts_like(name));
  if (!near.empty()) {
    message += " (did you mean ";
    for (std::size_t i = 0; i < near.size(); ++i) {
      message += (i == 0 ? "" : i + 1 == near.size() ? " or " : ", ") + near[i];
    }
    message += "?)";
  }
  throw UsageError(message);
}

// `names` are the flags' long names, as ambiguous_option::alternatives() gives.
[[noreturn]] void throw_ambiguous(const std::string& token, const std::vector<std::string>& names) {
  std::string message = "ambiguous option " + timm::in_quotes(without_value(token)) + " could match";
  for (std::size_t i = 0; i < names.size(); ++i) message += (i == 0 ? " --" : ", --") + names[i];
  throw UsageError(message);
}

// "--amp=1", "-h1".
[[noreturn]] void throw_takes_no_value(const po::invalid_command_line_syntax& error) {
  std::string token = original_token(error);
  std::size_t eq = token.find('=');
  std::string value = eq == std::string::npos ? token.substr(2) : token.substr(eq + 1);
  std::string flag = error.get_option_name();  // "--amp": canonical, in the long style
  throw UsageError(flag + " takes no value, got " + timm::in_quotes(value));
}

po::parsed_options parse_options(const std::vector<std::string>& args) {
  namespace style = po::command_line_style;
  // Not allow_sticky: argparse does not group one-letter flags that take values.
  constexpr int kStyle = style::allow_long | style::long_allow_adjacent | style::long_allow_next | style::allow_short |
                         style::allow_dash_for_short | style::short_allow_adjacent | style::short_allow_next |
                         style::allow_guessing;
  try {
    return po::command_line_parser(args)
        .options(flag_options())
        .positional(data_positional())
        .style(kStyle)
        .extra_style_parser(argparse_style)
        .run();
  } catch (const po::ambiguous_option& e) {
    throw_ambiguous(original_token(e), e.alternatives());
  } catch (const po::unknown_option& e) {
    throw_unknown_option(original_token(e));
  } catch (const po::invalid_command_line_syntax& e) {
    if (e.kind() == po::invalid_syntax::extra_parameter) throw_takes_no_value(e);
    throw UsageError(e.what());
  } catch (const po::error& e) {
    throw UsageError(e.what());  // none expected with this style: Boost's words then
  }
}

// ---- Reading the parsed options -------------------------------------------

// One flag as it appeared, with its value strings.
struct Occurrence {
  const FlagSpec* flag;
  std::vector<std::string> values;
};

struct ParsedTokens {
  std::vector<Occurrence> occurrences;  // in command-line order, `data` included
  bool help = false;
};

[[noreturn]] void throw_wrong_count(const FlagSpec& flag, std::size_t count) {
  std::string what = flag.type == FlagType::kInt || flag.type == FlagType::kInts       ? "integer"
                     : flag.type == FlagType::kFloat || flag.type == FlagType::kFloats ? "number"
                                                                                       : "string";
  std::string expected = flag.nargs == kNargsOneOrMore ? "one or more " + what + " values"
                         : flag.nargs == 1             ? "a value (" + what + ")"
                                                       : std::to_string(flag.nargs) + " " + what + " values";
  throw UsageError(display(flag) + " expects " + expected + ", got " + std::to_string(count));
}

void check_count(const FlagSpec& flag, std::size_t count) {
  bool ok = flag.nargs == kNargsZeroOrMore || flag.nargs == kNargsOptional ||
            (flag.nargs == kNargsOneOrMore && count >= 1) ||
            (flag.nargs >= 0 && count == static_cast<std::size_t>(flag.nargs));
  if (!ok) throw_wrong_count(flag, count);
}

// "--scale=0.5 1": argparse gives a flag only its attached value and reads the
// tokens after it as positionals, where Program_options gives the flag them all.
bool has_attached_value(const po::option& option) {
  return !option.value.empty() && option.value.size() == option.original_tokens.size();
}

void add_positional(const std::vector<std::string>& positionals, ParsedTokens& parsed) {
  if (positionals.size() > 1) {
    throw UsageError("unrecognized argument " + timm::in_quotes(positionals[1]) +
                     " (only one positional data path is accepted, and it is " + timm::in_quotes(positionals[0]) + ")");
  }
  if (positionals.size() == 1) parsed.occurrences.push_back({find_flag(kData), positionals});
}

ParsedTokens read_options(const po::parsed_options& options) {
  ParsedTokens parsed;
  std::vector<std::string> positionals;
  for (const po::option& option : options.options) {
    std::vector<std::string> values = option.value;
    if (option.string_key == kData) {
      positionals.push_back(values.at(0));
      continue;
    }
    const FlagSpec& flag = *find_flag(option.string_key);  // a long name, as the parser gives
    if (flag.name == "help") {
      parsed.help = true;
      return parsed;
    }
    if (has_attached_value(option)) {
      positionals.insert(positionals.end(), values.begin() + 1, values.end());
      values.resize(1);
    }
    check_count(flag, values.size());
    parsed.occurrences.push_back({&flag, std::move(values)});
  }
  add_positional(positionals, parsed);
  return parsed;
}

bool occurs(const ParsedTokens& parsed, std::string_view name) {
  return std::any_of(parsed.occurrences.begin(), parsed.occurrences.end(),
                     [&](const Occurrence& o) { return o.flag->name == name; });
}

void apply_action(const Occurrence& occurrence, CommandLine& result) {
  static const std::map<std::string, Action, std::less<>> kListActions = {
      {"list-models", Action::kListModels},
      {"list-optimizers", Action::kListOptimizers},
      {"list-schedulers", Action::kListSchedulers},
      {"list-augmentations", Action::kListAugmentations},
  };
  const FlagSpec& flag = *occurrence.flag;
  if (flag.name == "plugin-dir") {
    result.plugin_dirs.push_back(occurrence.values.at(0));
  } else if (flag.name == "list-plugins") {
    result.action = Action::kListPlugins;
  } else if (auto it = kListActions.find(flag.name); it != kListActions.end()) {
    result.action = it->second;
    result.list_pattern = std::get<std::string>(convert(flag, occurrence.values));
  }
  // --config was applied first, before every other flag.
}

// train.py: "if args.data and not args.data_dir: args.data_dir = args.data".
void derive_data_dir(Config& config) {
  std::optional<std::string> data = config.get_optional<std::string>("data");
  std::optional<std::string> data_dir = config.get_optional<std::string>("data_dir");
  if (data && !data->empty() && (!data_dir || data_dir->empty())) {
    config.set_explicit("data_dir", *data);
  }
}

// ---- Help -----------------------------------------------------------------

std::string metavar(const FlagSpec& flag) {
  std::string name = flag.metavar;
  if (name.empty() && !flag.choices.empty()) {
    name = "{";
    for (const std::string& c : flag.choices) name += (name.size() > 1 ? "," : "") + c;
    name += "}";
  }
  if (name.empty()) {
    bool ints = flag.type == FlagType::kInt || flag.type == FlagType::kInts;
    bool floats = flag.type == FlagType::kFloat || flag.type == FlagType::kFloats;
    name = ints ? "N" : floats ? "FLOAT" : "STR";
  }
  switch (flag.nargs) {
    case 0:
      return "";
    case 1:
      return name;
    case kNargsOneOrMore:
      return name + " [" + name + " ...]";
    case kNargsZeroOrMore:
      return "[KEY=VALUE ...]";
    case kNargsOptional:
      return "[" + name + "]";
    default: {
      std::string out = name;
      for (int i = 1; i < flag.nargs; ++i) out += " " + name;
      return out;
    }
  }
}

std::string invocation(const FlagSpec& flag) {
  if (flag.positional) return flag.metavar;
  std::string text = flag.short_name.empty() ? "" : "-" + flag.short_name + ", ";
  text += "--" + flag.name;
  for (const std::string& alias : flag.aliases) text += ", --" + alias;
  std::string value = metavar(flag);
  return value.empty() ? text : text + " " + value;
}

// A default as --help shows it (Python's spelling).
struct DefaultFormatter {
  std::string operator()(std::monostate) const { return "None"; }
  std::string operator()(bool v) const { return v ? "True" : "False"; }
  std::string operator()(int64_t v) const { return std::to_string(v); }
  std::string operator()(double v) const {
    char buf[64];
    auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
    return std::string(buf, end);
  }
  std::string operator()(const std::string& v) const { return v.empty() ? "''" : v; }
  template <class T>
  std::string operator()(const std::vector<T>& v) const {
    std::string out;
    for (const T& item : v) out += (out.empty() ? "" : " ") + (*this)(item);
    return out.empty() ? "[]" : out;
  }
};

std::string default_text(const ConfigValue& value) { return std::visit(DefaultFormatter{}, value); }

// The help words of a flag; "[not implemented]" and "[not supported]" stay
// one word when wrapped.
std::vector<std::string> help_words(const FlagSpec& flag) {
  std::string help = flag.help;
  bool shows_default = flag.type != FlagType::kSwitch && !flag.is_action && flag.type != FlagType::kKwargs &&
                       help.find("default") == std::string::npos;
  if (shows_default) help += " (default: " + default_text(flag.default_value) + ")";
  std::vector<std::string> words;
  std::istringstream in(help);
  for (std::string word; in >> word;) words.push_back(word);
  if (!flag.implemented) words.push_back(flag.unsupported.empty() ? "[not implemented]" : "[not supported]");
  return words;
}

// Appends the words wrapped to `width` columns, continuation lines indented.
void append_wrapped(std::string& out, const std::vector<std::string>& words, std::size_t indent, std::size_t width) {
  std::size_t column = indent;
  for (std::size_t i = 0; i < words.size(); ++i) {
    if (i > 0 && column + 1 + words[i].size() > width) {
      out += "\n" + std::string(indent, ' ');
      column = indent;
    } else if (i > 0) {
      out += ' ';
      ++column;
    }
    out += words[i];
    column += words[i].size();
  }
  out += "\n";
}

}  // namespace

std::string train_help_text() {
  constexpr std::size_t kHelpColumn = 32;
  constexpr std::size_t kWidth = 100;
  std::string out =
      "usage: timm-train [options] [DATA]\n\n"
      "Trains an image classification model as timm's train.py does, with the same flags.\n"
      "A long flag may be abbreviated to any unique prefix (--jsd for --jsd-loss).\n"
      "Flags marked [not implemented] or [not supported] are accepted, but a run refuses any\n"
      "value other than their default.\n";
  std::string group;
  for (const FlagSpec& flag : train_flags()) {
    if (flag.group != group) {
      group = flag.group;
      out += "\n" + group + ":\n";
    }
    std::string head = "  " + invocation(flag);
    out += head;
    if (head.size() + 2 > kHelpColumn) {
      out += "\n" + std::string(kHelpColumn, ' ');
    } else {
      out += std::string(kHelpColumn - head.size(), ' ');
    }
    append_wrapped(out, help_words(flag), kHelpColumn, kWidth);
  }
  return out;
}

CommandLine parse_train_command_line(int argc, const char* const* argv) {
  // Boost.Program_options' token loop takes time quadratic in the number of
  // words; no real command line comes near this bound.
  constexpr int kMaxWords = 10'000;
  if (argc - 1 > kMaxWords) {
    throw UsageError("the command line has " + std::to_string(argc - 1) + " words; expected at most " +
                     std::to_string(kMaxWords) + " (a long configuration belongs in a --config file)");
  }
  CommandLine result;
  std::vector<std::string> args(argv + std::min(argc, 1), argv + argc);
  ParsedTokens parsed = read_options(parse_options(up_to_help(std::move(args))));
  if (parsed.help) {
    result.action = Action::kHelp;
    result.help_text = train_help_text();
    return result;
  }
  if (occurs(parsed, "torchscript") && occurs(parsed, "torchcompile")) {
    throw UsageError("--torchcompile cannot be combined with --torchscript");
  }
  // The config file supplies defaults; the command line overrides them.
  for (const Occurrence& occurrence : parsed.occurrences) {
    if (occurrence.flag->name == "config") result.config_file = occurrence.values.at(0);
  }
  if (!result.config_file.empty()) load_config_file(result.config_file, result.config);
  for (const Occurrence& occurrence : parsed.occurrences) {
    if (occurrence.flag->is_action) {
      apply_action(occurrence, result);
    } else {
      result.config.set_explicit(occurrence.flag->dest, convert(*occurrence.flag, occurrence.values));
    }
  }
  derive_data_dir(result.config);
  return result;
}

}  // namespace timm
