// The one argparse of the tools beside timm-run (timm-validate,
// timm-benchmark, timm-infer, timm-logits, timm-plot) and of the bench
// executables: long flags with optional short names,
// `--flag value`, `--flag=value`, `-b64`, switches and nargs='+' lists, the
// way timm's validate.py / benchmark.py / inference.py declare theirs.
//
//   timm::ToolArgs args("timm-validate", "Validates a model on a dataset.");
//   args.add("batch-size", "b", "256", "mini-batch size");
//   args.add_switch("amp", "", "mixed precision");
//   if (!args.parse_or_print_help(argc, argv)) return 0;  // throws UsageError
//   int64_t b = args.get_int("batch-size");
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace timm {

class ToolArgs {
 public:
  ToolArgs(std::string program, std::string description);

  // A flag taking one value; `default_value` "" means unset (None).
  void add(const std::string& name, const std::string& short_name, const std::string& default_value,
           const std::string& help);
  // A flag taking one or more values (nargs='+'). A repeated flag replaces
  // the earlier values, or with `accumulate` adds to them (argparse's
  // action='extend': --plugin-dir a --plugin-dir b).
  void add_list(const std::string& name, const std::string& short_name, const std::string& help,
                bool accumulate = false);
  // store_true.
  void add_switch(const std::string& name, const std::string& short_name, const std::string& help);
  // A flag of timm's script that this tool does not take: given, parse()
  // throws UsageError "--NAME is " + flag_refusal(reason) ("not supported:
  // REASON", or "not implemented yet" when `reason` is empty), timm-run's
  // words for its own.
  void add_refused(const std::string& name, const std::string& reason);
  // Positional arguments, in order; all required.
  void add_positional(const std::string& name, const std::string& help);

  // Parses argv (argv[0] is the program). Unknown flags, missing values and
  // missing positionals throw UsageError naming them.
  void parse(int argc, const char* const* argv);
  // parse(), and for -h / --help prints help() to stdout. Returns whether
  // the tool should run (false: help was asked for; exit 0).
  bool parse_or_print_help(int argc, const char* const* argv);

  bool help_requested() const { return help_requested_; }
  std::string help() const;

  // True when the flag has a value (given, or a non-empty default).
  bool has(const std::string& name) const;
  bool given(const std::string& name) const;
  std::string get(const std::string& name) const;  // "" when unset
  // The value; throws UsageError "--NAME is required" when unset.
  std::string get_required(const std::string& name) const;
  std::optional<std::string> get_optional(const std::string& name) const;
  int64_t get_int(const std::string& name) const;  // throws UsageError when not an integer
  // get_int, and throws UsageError when the value is below `minimum`.
  int64_t get_int_at_least(const std::string& name, int64_t minimum) const;
  std::optional<int64_t> get_optional_int(const std::string& name) const;
  double get_double(const std::string& name) const;
  std::optional<double> get_optional_double(const std::string& name) const;
  bool get_switch(const std::string& name) const;
  std::vector<std::string> get_list(const std::string& name) const;
  std::optional<std::vector<double>> get_optional_doubles(const std::string& name) const;
  // A list flag's values as integers; throws UsageError naming a value that is not one.
  std::optional<std::vector<int64_t>> get_optional_ints(const std::string& name) const;
  // The k=v tokens of a list flag as a map (--model-kwargs).
  std::map<std::string, std::string> get_kwargs(const std::string& name) const;

 private:
  enum class Kind { kValue, kList, kSwitch, kRefused };
  struct Spec {
    std::string name, short_name, default_value, help;
    Kind kind = Kind::kValue;
    bool accumulate = false;
  };
  const Spec& spec(const std::string& name) const;
  const Spec* find_long(const std::string& name) const;
  const Spec* find_short(const std::string& name) const;

  std::string program_, description_;
  std::vector<Spec> specs_;
  std::vector<std::pair<std::string, std::string>> positionals_;  // name, help
  std::map<std::string, std::vector<std::string>> values_;
  bool help_requested_ = false;
};

}  // namespace timm
