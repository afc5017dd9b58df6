// The fatal-error handler (timm/base/error.hpp): the one place that reports
// an error no exception can carry, installed by the app.
#include <stdexcept>
#include <string>
#include <vector>

#include "timm/base/error.hpp"

#include <doctest/doctest.h>

TEST_CASE("report_fatal_error goes through the installed handler") {
  std::vector<std::string> seen;
  timm::set_fatal_error_handler([&seen](const std::string& message) { seen.push_back("tool: error: " + message); });
  timm::report_fatal_error("the watchdog fired");
  REQUIRE(seen.size() == 1);
  CHECK(seen[0] == "tool: error: the watchdog fired");
  timm::set_fatal_error_handler({});
}

TEST_CASE("a handler that throws, or none, falls back to the default print and never throws") {
  timm::set_fatal_error_handler([](const std::string&) { throw std::runtime_error("handler failed"); });
  CHECK_NOTHROW(timm::report_fatal_error("still reported"));
  timm::set_fatal_error_handler({});
  CHECK_NOTHROW(timm::report_fatal_error("with the default print"));
}
