#include "timm/base/error.hpp"

#include <cstdio>
#include <mutex>

namespace timm {
namespace {

struct InstalledHandler {
  std::mutex mutex;
  FatalErrorHandler handler;
};

// Leaked on purpose, mutex included: a watchdog thread may report while
// statics are torn down.
InstalledHandler& installed() {
  static auto* instance = new InstalledHandler();
  return *instance;
}

}  // namespace

void set_fatal_error_handler(FatalErrorHandler new_handler) {
  InstalledHandler& h = installed();
  std::lock_guard lock(h.mutex);
  h.handler = std::move(new_handler);
}

void report_fatal_error(const std::string& message) noexcept {
  try {
    FatalErrorHandler current;
    {
      InstalledHandler& h = installed();
      std::lock_guard lock(h.mutex);
      current = h.handler;
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
