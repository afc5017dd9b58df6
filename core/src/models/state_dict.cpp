#include "timm/models/state_dict.hpp"

#include <map>
#include <set>
#include <sstream>

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include "timm/base/error.hpp"

namespace timm {
namespace {

std::string shape_string(const at::Tensor& t) {
  std::ostringstream out;
  out << t.sizes();
  return out.str();
}

// "'a', 'b', 'c'", every key: a user fixing a checkpoint
// needs the whole picture, not the first key.
std::string key_list(const std::vector<std::string>& keys) {
  std::string out;
  for (const auto& key : keys) out += (out.empty() ? "" : ", ") + in_quotes(key);
  return out;
}

// One module's own parameters, then its own buffers, as Python lists them.
void append_own_state(const torch::nn::Module& module, const std::string& prefix, NamedTensors& out) {
  for (const auto& p : module.named_parameters(/*recurse=*/false)) {
    if (p.value().defined()) out.emplace_back(prefix + p.key(), p.value().detach());
  }
  for (const auto& b : module.named_buffers(/*recurse=*/false)) {
    if (b.value().defined()) out.emplace_back(prefix + b.key(), b.value().detach());
  }
}

}  // namespace

NamedTensors state_dict(const torch::nn::Module& module) {
  NamedTensors result;
  append_own_state(module, "", result);
  // include_self=false: the root need not be held by a shared_ptr.
  for (const auto& item : module.named_modules("", /*include_self=*/false)) {
    append_own_state(*item.value(), item.key() + ".", result);
  }
  return result;
}

LoadStateDictResult load_state_dict(torch::nn::Module& module, const NamedTensors& tensors, bool strict) {
  const NamedTensors own = state_dict(module);
  std::map<std::string, at::Tensor> targets(own.begin(), own.end());

  LoadStateDictResult result;
  std::set<std::string> seen;
  std::vector<std::string> duplicates;
  std::vector<std::string> mismatches;
  for (const auto& [key, tensor] : tensors) {
    if (!seen.insert(key).second) {
      duplicates.push_back(key);
      continue;
    }
    auto it = targets.find(key);
    if (it == targets.end()) {
      result.unexpected_keys.push_back(key);
    } else if (!tensor.defined() || tensor.sizes() != it->second.sizes()) {
      mismatches.push_back(in_quotes(key) + ": checkpoint has " +
                           (tensor.defined() ? shape_string(tensor) : "no tensor") + ", model has " +
                           shape_string(it->second));
    }
  }
  for (const auto& [key, tensor] : own) {
    if (!seen.count(key)) result.missing_keys.push_back(key);
  }

  if (!duplicates.empty()) throw Error("state_dict has keys given twice: " + key_list(duplicates));
  std::string problems;
  for (const auto& m : mismatches) problems += "\n  size mismatch for " + m;
  if (strict && !result.missing_keys.empty()) {
    problems +=
        "\n  missing keys (" + std::to_string(result.missing_keys.size()) + "): " + key_list(result.missing_keys);
  }
  if (strict && !result.unexpected_keys.empty()) {
    problems += "\n  unexpected keys (" + std::to_string(result.unexpected_keys.size()) +
                "): " + key_list(result.unexpected_keys);
  }
  if (!problems.empty()) throw Error("state_dict does not match the model:" + problems);

  c10::NoGradGuard no_grad;
  for (const auto& [key, tensor] : tensors) {
    auto it = targets.find(key);
    if (it != targets.end()) it->second.copy_(tensor);
  }
  return result;
}

}  // namespace timm
