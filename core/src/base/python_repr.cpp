#include "timm/base/python_repr.hpp"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <string_view>

namespace timm {

std::string python_float_repr(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  if (value == 0.0) return std::signbit(value) ? "-0.0" : "0.0";
  // Shortest round-trip digits in scientific form: "-d.ddde+XX".
  char buffer[64];
  auto [end, ec] = std::to_chars(buffer, buffer + sizeof(buffer), value, std::chars_format::scientific);
  const std::string sci(buffer, end);
  const auto e_pos = sci.find('e');
  const int exponent = std::stoi(sci.substr(e_pos + 1));
  std::string mantissa = sci.substr(0, e_pos);
  const bool negative = mantissa[0] == '-';
  if (negative) mantissa.erase(0, 1);
  std::string digits;
  for (char c : mantissa) {
    if (c != '.') digits += c;
  }
  std::string out;
  if (exponent < -4 || exponent >= 16) {
    out = digits.substr(0, 1);
    // Appended piece by piece: g++ 12 warns falsely (-Wstringop-overflow) on
    // "literal" + std::string&& here.
    if (digits.size() > 1) {
      out += '.';
      out += std::string_view(digits).substr(1);
    }
    out += exponent < 0 ? "e-" : "e+";
    const int magnitude = std::abs(exponent);
    if (magnitude < 10) out += '0';
    out += std::to_string(magnitude);
  } else if (exponent < 0) {
    out = "0." + std::string(static_cast<std::size_t>(-exponent - 1), '0') + digits;
  } else {
    const auto int_len = static_cast<std::size_t>(exponent + 1);
    if (digits.size() <= int_len) {
      out = digits + std::string(int_len - digits.size(), '0') + ".0";
    } else {
      out = digits.substr(0, int_len) + "." + digits.substr(int_len);
    }
  }
  return negative ? "-" + out : out;
}

namespace {

// The values between `open` and `close`, comma separated. (Built by appends:
// g++ 12 warns falsely, -Wrestrict, on "(" + std::string&&.)
std::string joined(const std::vector<int64_t>& values, const char* open, const char* close) {
  std::string out = open;
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (i > 0) out += ", ";
    out += std::to_string(values[i]);
  }
  out += close;
  return out;
}

}  // namespace

std::string python_tuple_repr(const std::vector<int64_t>& values) {
  return joined(values, "(", values.size() == 1 ? ",)" : ")");
}

std::string python_list_repr(const std::vector<int64_t>& values) { return joined(values, "[", "]"); }

}  // namespace timm
