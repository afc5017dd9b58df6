// Error types for user and input errors.
//
// Anything a user can cause (a bad flag, an unknown model, a corrupt file, a
// broken plugin) is reported by throwing one of these. The message names what
// was wrong, where (file, key, line) and what was expected, in the plain style
// of LLVM's diagnostics: "plugin '/p/x.so': missing entry point 'timm_plugin_v1'".
// Apps print the message once and exit with exit_code(); no stack traces.
#pragma once

#include <functional>
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

// The one place that reports a fatal error to the user. Library code throws;
// where nothing can catch (a watchdog thread that must end the process), it
// calls report_fatal_error. run_app (app_main.hpp) installs a handler that
// prints "<app>: error: <message>" to stderr and reports its own escaping
// errors through it; without one, the message is printed as "error:
// <message>". The handler may be called from any thread.
using FatalErrorHandler = std::function<void(const std::string& message)>;
void set_fatal_error_handler(FatalErrorHandler handler);
// Reports `message` through the installed handler (the default print if it
// throws). Never throws.
void report_fatal_error(const std::string& message) noexcept;

// Quotes a user-supplied value for a message: 'value'. (Not named `quoted`:
// argument-dependent lookup would pick std::quoted for a std::string.)
inline std::string in_quotes(const std::string& value) { return "'" + value + "'"; }

}  // namespace timm
