// Python's text for values, where timm-cpp must print what Python timm prints
// (summary.csv, optimizer descriptions, messages about float flags).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace timm {

// Python's repr() of a float: the shortest string that round-trips, "1.0"
// for whole numbers, exponent form below 1e-4 and from 1e16 ("1e-05").
std::string python_float_repr(double value);

// Python's repr of a tuple of ints, as numpy and torch print a shape:
// "(4, 10)", "(4,)", "()".
std::string python_tuple_repr(const std::vector<int64_t>& values);
// Python's repr of a list of ints: "[224, 256]", "[]".
std::string python_list_repr(const std::vector<int64_t>& values);

// Python's repr of a bool: "True" or "False".
inline std::string py_bool(bool value) { return value ? "True" : "False"; }

}  // namespace timm
