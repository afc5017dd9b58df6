// Python's text for values, where timm-cpp must print what Python timm prints
// (summary.csv, optimizer descriptions, messages about float flags).
#pragma once

#include <string>

namespace timm {

// Python's repr() of a float: the shortest string that round-trips, "1.0"
// for whole numbers, exponent form below 1e-4 and from 1e16 ("1e-05").
std::string python_float_repr(double value);

}  // namespace timm
