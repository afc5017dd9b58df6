#include "timm/base/app_main.hpp"

#include <exception>
#include <iostream>
#include <string>

#include <c10/util/Exception.h>

#include "timm/base/cpu_allocator.hpp"
#include "timm/base/error.hpp"
#include "timm/log/log.hpp"

namespace timm {

int run_app(const char* app, int argc, char** argv, AppBody body) {
  setup_logging();
  set_fatal_error_handler([name = std::string(app)](const std::string& message) {
    std::cerr << name << ": error: " << message << std::endl;
  });
  keep_freed_cpu_memory();
  try {
    return body(argc, argv);
  } catch (const Error& e) {
    report_fatal_error(e.what());
    return e.exit_code();
  } catch (const c10::Error& e) {
    report_fatal_error(e.what_without_backtrace());
    return 1;
  } catch (const std::exception& e) {
    report_fatal_error(e.what());
    return 1;
  }
}

}  // namespace timm
