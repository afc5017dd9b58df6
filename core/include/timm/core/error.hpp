// Error types for user and input errors.
//
// Anything a user can cause (a bad flag, an unknown model, a corrupt file, a
// broken plugin) is reported by throwing one of these. The message names what
// was wrong, where (file, key, line) and what was expected, in the plain style
// of LLVM's diagnostics: "plugin '/p/x.so': missing entry point 'timm_plugin_v1'".
// Apps print the message once and exit with exit_code(); no stack traces.
#pragma once

#include <stdexcept>
#include <string>

namespace timm {

// A runtime error caused by input: files, plugins, data. Exit code 1.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
  virtual int exit_code() const noexcept { return 1; }
};

// A usage error: bad flags, bad config values. Exit code 2.
class UsageError : public Error {
 public:
  explicit UsageError(const std::string& message) : Error(message) {}
  int exit_code() const noexcept override { return 2; }
};

// Quotes a user-supplied value for a message: 'value'. (Not named `quoted`:
// argument-dependent lookup would pick std::quoted for a std::string.)
inline std::string in_quotes(const std::string& value) { return "'" + value + "'"; }

}  // namespace timm
