// Helpers for end-to-end tests that run timm-run.
#pragma once

#include <regex>
#include <string>

#include <doctest/doctest.h>

namespace timm::test {

// The number after `label` in timm-run's output ("Test top-1: 87.12%").
inline double number_after(const std::string& output, const std::string& label) {
  const std::regex pattern(label + R"(\s*([0-9.]+))");
  std::smatch match;
  if (!std::regex_search(output, match, pattern)) {
    FAIL_CHECK("no '" << label << "' in the output:\n" << output);
    return -1.0;
  }
  return std::stod(match[1].str());
}

}  // namespace timm::test
