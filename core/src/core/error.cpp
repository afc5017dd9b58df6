#include "timm/core/error.hpp"

#include <cstdio>
#include <mutex>

namespace timm {
namespace {

std::mutex& handler_mutex() {
  static std::mutex mutex;
  return mutex;
}

// Leaked on purpose: a watchdog thread may report while statics are torn down.
FatalErrorHandler& handler() {
  static auto* installed = new FatalErrorHandler();
  return *installed;
}

}  // namespace

void set_fatal_error_handler(FatalErrorHandler new_handler) {
  std::lock_guard lock(handler_mutex());
  handler() = std::move(new_handler);
}

void report_fatal_error(const std::string& message) noexcept {
  try {
    FatalErrorHandler current;
    {
      std::lock_guard lock(handler_mutex());
      current = handler();
    }
    if (current) {
      current(message);
      return;
    }
  } catch (...) {
    // fall through to the default: the message must reach the user
  }
  std::fprintf(stderr, "error: %s\n", message.c_str());
  std::fflush(stderr);
}

}  // namespace timm
