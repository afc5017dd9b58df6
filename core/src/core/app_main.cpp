#include "timm/core/app_main.hpp"

#include <exception>
#include <iostream>

#include <c10/util/Exception.h>

#include "timm/core/error.hpp"
#include "timm/log/log.hpp"

namespace timm {

int run_app(const char* app, int argc, char** argv, AppBody body) {
  setup_logging();
  try {
    return body(argc, argv);
  } catch (const Error& e) {
    std::cerr << app << ": error: " << e.what() << "\n";
    return e.exit_code();
  } catch (const c10::Error& e) {
    std::cerr << app << ": error: " << e.what_without_backtrace() << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << app << ": error: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace timm
