// Fuzz target: torch.save's zip + pickle (.pth, .pth.tar), read as weight
// loading and timm-logits --weights read it.
#include "fuzz_target.hpp"
#include "tensor_checks.hpp"
#include "timm/io/torch_file.hpp"

TIMM_FUZZ_TARGET(pth) {
  const timm::TorchFile file = timm::read_torch_file(timm::fuzz::scratch_file("input.pth", data));
  for (const auto& [name, tensor] : file.tensors) timm::fuzz::check_tensor(tensor, name);
  for (const auto& [key, tensors] : file.state_dicts) {
    for (const auto& [name, tensor] : tensors) timm::fuzz::check_tensor(tensor, key + "." + name);
  }
  if (!file.is_dict && !(file.keys.empty() && file.state_dicts.empty() && file.none_keys.empty())) {
    timm::fuzz::broken_promise("a top-level object that is not a dict has keys");
  }
}
