// Fuzz target: the run configuration, both ways a user gives it: the input
// as a --config TOML file, then split at white space into the words of a
// command line for timm-run's argparse-like parser.
#include <algorithm>
#include <string>
#include <vector>

#include "fuzz_target.hpp"
#include "timm/base/error.hpp"
#include "timm/config/config.hpp"

namespace {

void load_as_toml(timm::fuzz::Bytes data) {
  timm::Config config;
  timm::load_config_file(timm::fuzz::scratch_file("config.toml", data), config);
  timm::check_implemented(config);
  config.to_toml();
}

// The input's words. Words with a '/' are dropped: `--config /dev/stdin`
// would read whatever a path names, which is not the parser under test
// (the file-reading half is load_as_toml).
std::vector<std::string> command_line_words(const std::string& text) {
  std::vector<std::string> words = {"timm-run"};
  std::size_t pos = 0;
  while (pos < text.size()) {
    const std::size_t begin = text.find_first_not_of(std::string(" \t\r\n\0", 5), pos);
    if (begin == std::string::npos) break;
    std::size_t end = text.find_first_of(std::string(" \t\r\n\0", 5), begin);
    if (end == std::string::npos) end = text.size();
    std::string word = text.substr(begin, end - begin);
    if (word.find('/') == std::string::npos) words.push_back(std::move(word));
    pos = end;
  }
  return words;
}

// The command line half reads the input's first 2 KB, hundreds of words:
// Boost.Program_options' token loop is quadratic in the number of words
// (parse_train_command_line bounds it), which at libFuzzer's 8 KB inputs
// spent most of the run in Boost's vector copies instead of our parser.
constexpr std::size_t kMaxCommandLineBytes = 2048;

void parse_as_command_line(timm::fuzz::Bytes data) {
  const timm::fuzz::Bytes head = data.first(std::min(data.size(), kMaxCommandLineBytes));
  const std::vector<std::string> words = command_line_words(timm::fuzz::as_text(head));
  std::vector<const char*> argv;
  for (const std::string& word : words) argv.push_back(word.c_str());
  const timm::CommandLine cli = timm::parse_train_command_line(static_cast<int>(argv.size()), argv.data());
  if (cli.action == timm::Action::kTrain) {
    timm::check_implemented(cli.config);
    cli.config.to_toml();
  }
}

}  // namespace

TIMM_FUZZ_TARGET(config) {
  // A refusal of the file must not skip the command line.
  try {
    load_as_toml(data);
  } catch (const timm::Error&) {
  }
  parse_as_command_line(data);
}
