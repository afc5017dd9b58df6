// A module's state_dict and its inverse, with PyTorch's semantics.
//
// state_dict walks the modules in registration order (pre-order) and lists
// each module's own parameters, then its own buffers, under '.'-joined names:
// Python's order and keys, so a dict written here loads with
// model.load_state_dict in timm and back. The tensors are detached views of
// the module's own storage (no copies).
#pragma once

#include <string>
#include <vector>

#include <torch/nn/module.h>

#include "timm/io/named_tensors.hpp"

namespace timm {

// Parameters and buffers of `module` and all its submodules.
NamedTensors state_dict(const torch::nn::Module& module);

// The keys load_state_dict found absent and extra (both empty when strict).
struct LoadStateDictResult {
  std::vector<std::string> missing_keys;
  std::vector<std::string> unexpected_keys;
};

// Copies `tensors` into the module's parameters and buffers, in place and
// without recording autograd, converting dtype and device as Tensor::copy_
// does. Everything is checked before anything is copied, so a failure leaves
// the module untouched: a key given twice, or a shape mismatch (even when not
// strict, as PyTorch) throws timm::Error naming every such key with both
// shapes; with `strict`, missing or unexpected keys throw an Error listing all
// of them.
LoadStateDictResult load_state_dict(torch::nn::Module& module, const NamedTensors& tensors, bool strict = true);

}  // namespace timm
