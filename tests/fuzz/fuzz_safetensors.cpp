// Fuzz target: safetensors files (our checkpoints' weights, --pretrained-path).
#include "fuzz_target.hpp"
#include "tensor_checks.hpp"
#include "timm/io/safetensors.hpp"

TIMM_FUZZ_TARGET(safetensors) {
  const timm::SafetensorsFile file = timm::read_safetensors_file(timm::fuzz::scratch_file("input.safetensors", data));
  for (const auto& [name, tensor] : file.tensors) {
    timm::fuzz::check_tensor(tensor, name);
    if (!tensor.is_contiguous()) timm::fuzz::broken_promise("tensor '" + name + "' is not contiguous");
  }
}
