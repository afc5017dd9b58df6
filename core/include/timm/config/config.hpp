// The run configuration of timm-train: every flag of timm's train.py (plus a
// few of ours), parsed from the command line and from a TOML config file.
//
// The flag table, train_flags(), is the single source of truth: names, types,
// defaults, help and whether this port implements the flag. The command line
// follows Python argparse as train.py uses it (unique-prefix abbreviations,
// `-b128`, `--batch-size=128`, nargs lists, `--torchcompile` without a value),
// and `-c/--config FILE.toml` supplies defaults that the command line
// overrides, as timm's YAML config does.
//
//   timm::CommandLine cli = timm::parse_train_command_line(argc, argv);
//   if (cli.action == timm::Action::kHelp) { std::cout << cli.help_text; return 0; }
//   timm::check_implemented(cli.config);
//   int64_t batch_size = cli.config.get<int64_t>("batch_size");
//   std::optional<double> lr = cli.config.get_optional<double>("lr");
//
// Every user error throws timm::UsageError with a message naming the flag, key
// or file line and what was expected.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>
#include <vector>

namespace timm {

// One flag value. std::monostate is Python's None.
using ConfigValue = std::variant<std::monostate, bool, int64_t, double, std::string, std::vector<int64_t>,
                                 std::vector<double>, std::vector<std::string>>;

// How a flag's value is written and stored:
//   kSwitch          store_true; bool
//   kInt, kFloat     int64_t, double
//   kString          std::string
//   kInts, kFloats, kStrings   vectors (nargs='+', or a fixed count)
//   kKwargs          `k=v ...` (timm's ParseKwargs); std::vector<std::string>
//                    of "k=v" tokens, sorted by key, the last of a repeated key
//                    winning; read them with Config::get_kwargs()
//   kOptionalString  nargs='?': the flag alone takes FlagSpec::const_value
enum class FlagType { kSwitch, kInt, kFloat, kString, kInts, kFloats, kStrings, kKwargs, kOptionalString };

// FlagSpec::nargs values besides a fixed count (0 for a switch, 1 for one value).
inline constexpr int kNargsOneOrMore = -1;   // '+'
inline constexpr int kNargsZeroOrMore = -2;  // '*'
inline constexpr int kNargsOptional = -3;    // '?'

struct FlagSpec {
  std::string name{};        // long name without dashes: "batch-size"
  std::string dest{};        // the Config key: "batch_size"
  std::string short_name{};  // "b", "j", "vb" or ""
  FlagType type = FlagType::kString;
  ConfigValue default_value{};
  int nargs = 0;        // see kNargs*; a fixed count for --input-size
  std::string group{};  // timm's argparse group title, or "timm-cpp" for ours
  std::string help{};
  bool implemented = false;            // false: check_implemented() refuses a non-default value
  std::string unsupported{};           // why it will not be implemented; empty: "not implemented yet"
  std::vector<std::string> aliases{};  // more long names: "dr" for --decay-rate
  std::vector<std::string> choices{};  // allowed string values; empty: any
  std::string const_value{};           // the value of a kOptionalString flag given alone
  std::string metavar{};               // the value's name in --help; empty: from the type
  bool positional = false;             // the deprecated positional `data`
  bool is_action = false;              // steers the run (help, lists, plugin dirs, config
                                       // file) instead of setting a Config value
};

// Every timm train.py flag, in timm's group order, then ours (group "timm-cpp").
const std::vector<FlagSpec>& train_flags();

// The flag with this long name, alias or dest ("batch-size", "batch_size",
// "dr", "local_rank"); nullptr when there is none.
const FlagSpec* find_flag(std::string_view name_or_dest);

// The values of every non-action flag, by dest name, starting at the defaults.
class Config {
 public:
  Config();  // every flag at its default

  // True when the value is not None.
  bool has(std::string_view dest) const;

  // The value as T: bool, int64_t, double, std::string or one of the vector
  // types. An int read as double (or int list as double list) converts.
  // Throws timm::Error when the value is None or of another type.
  template <class T>
  T get(std::string_view dest) const;

  // As get(), but None gives std::nullopt.
  template <class T>
  std::optional<T> get_optional(std::string_view dest) const;

  // The k=v pairs of a kKwargs flag (--model-kwargs, --opt-kwargs); values are
  // the strings as given (Python would literal_eval them).
  std::map<std::string, std::string> get_kwargs(std::string_view dest) const;

  // True when the value was given on the command line or in the config file.
  bool is_explicit(std::string_view dest) const;

  // Replaces a value, leaving is_explicit() as it was. The value must fit the
  // flag's type (an int for a float flag converts; None always fits).
  // Throws timm::Error on an unknown dest or a misfitting value.
  void set(std::string_view dest, ConfigValue value);
  // As set(), and marks the value explicit (what the parsers do).
  void set_explicit(std::string_view dest, ConfigValue value);

  // The value; throws timm::Error on an unknown dest.
  const ConfigValue& value(std::string_view dest) const;

  // The effective config as a TOML document with dest names as keys, grouped
  // as --help groups them; None values appear commented out. Loading it with
  // --config gives an equal Config.
  std::string to_toml() const;

  // Equal values (whether they were explicit does not matter).
  friend bool operator==(const Config& a, const Config& b) { return a.values_ == b.values_; }

 private:
  std::map<std::string, ConfigValue, std::less<>> values_;
  std::set<std::string, std::less<>> explicit_;
};

enum class Action { kTrain, kHelp, kListModels, kListOptimizers, kListSchedulers, kListAugmentations, kListPlugins };

struct CommandLine {
  Action action = Action::kTrain;
  Config config;
  std::string list_pattern = "*";        // the --list-* pattern
  std::vector<std::string> plugin_dirs;  // --plugin-dir, in order
  std::string config_file;               // -c/--config, or ""
  std::string help_text;                 // what --help prints (set for Action::kHelp only)
};

// Parses timm-train's command line (argv[0] is the program). Loads the
// --config file first, then applies the command line over it. Throws
// UsageError on any bad flag, value or file.
CommandLine parse_train_command_line(int argc, const char* const* argv);

// Applies a TOML config file to `config`: keys are flag names or dest names,
// each value marked explicit. Throws UsageError naming the file, key and line.
void load_config_file(const std::filesystem::path& file, Config& config);

// The --help text, generated from train_flags().
std::string train_help_text();

// Throws UsageError "--X is not implemented yet" when a flag this port does
// not implement has a value other than its default; further such flags are
// listed after it ("; nor are --aa, --reprob"). Which flags are implemented is
// kept in one list, kImplementedFlags in core/src/config/flags.cpp.
void check_implemented(const Config& config);

// Why a timm flag is refused, in the words check_implemented and the tools'
// ToolArgs::add_refused both use: "not supported: <reason>" for one that
// will not be implemented (FlagSpec::unsupported), "not implemented yet"
// when `unsupported` is empty.
std::string flag_refusal(const std::string& unsupported);

// ---------------------------------------------------------------------------
// Implementation details.

namespace config_detail {
template <class T>
inline constexpr bool kIsConfigType =
    std::is_same_v<T, bool> || std::is_same_v<T, int64_t> || std::is_same_v<T, double> ||
    std::is_same_v<T, std::string> || std::is_same_v<T, std::vector<int64_t>> ||
    std::is_same_v<T, std::vector<double>> || std::is_same_v<T, std::vector<std::string>>;

[[noreturn]] void throw_wrong_type(std::string_view dest, const ConfigValue& value, std::size_t wanted_index);
}  // namespace config_detail

template <class T>
T Config::get(std::string_view dest) const {
  static_assert(config_detail::kIsConfigType<T>,
                "Config::get<T>: T must be bool, int64_t, double, std::string or a vector of them");
  const ConfigValue& v = value(dest);
  if constexpr (std::is_same_v<T, double>) {
    if (const auto* i = std::get_if<int64_t>(&v)) return static_cast<double>(*i);
  }
  if constexpr (std::is_same_v<T, std::vector<double>>) {
    if (const auto* i = std::get_if<std::vector<int64_t>>(&v)) return T(i->begin(), i->end());
  }
  if (const auto* p = std::get_if<T>(&v)) return *p;
  config_detail::throw_wrong_type(dest, v, ConfigValue(T{}).index());
}

template <class T>
std::optional<T> Config::get_optional(std::string_view dest) const {
  if (!has(dest)) return std::nullopt;
  return get<T>(dest);
}

}  // namespace timm
