// An ordered list of named tensors: what a state_dict or a weights file holds.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>

namespace timm {

// (name, tensor) pairs in a meaningful order (a module's registration order,
// a file's layout order); names are unique.
using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

}  // namespace timm
