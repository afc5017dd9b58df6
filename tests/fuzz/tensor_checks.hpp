// What the tensor readers (.pth, safetensors, .npy) promise of a tensor they
// return, checked by their fuzz targets.
#pragma once

#include <cstdint>
#include <string>

#include <ATen/ATen.h>

#include "fuzz_target.hpp"

namespace timm::fuzz {

// Somewhere for check_tensor's reads to go, so that they are not optimised away.
inline volatile std::uint8_t tensor_sink = 0;

// A defined CPU tensor whose view (offset, sizes, strides) lies inside its
// storage. Every byte of the storage is read here, in instrumented code, so
// that AddressSanitizer sees a storage shorter than the bytes it claims
// (LibTorch itself is not instrumented).
inline void check_tensor(const at::Tensor& tensor, const std::string& name) {
  if (!tensor.defined()) broken_promise("tensor '" + name + "' is undefined");
  if (!tensor.device().is_cpu()) broken_promise("tensor '" + name + "' is not on the CPU");
  const c10::Storage& storage = tensor.storage();
  const auto* bytes = static_cast<const std::uint8_t*>(storage.data());
  std::uint8_t sum = 0;
  for (std::size_t i = 0; i < storage.nbytes(); ++i) sum ^= bytes[i];
  tensor_sink = sum;
  if (tensor.numel() == 0) return;
  // The last element's index; every product and sum overflow-checked, since
  // the sizes are the file's.
  int64_t last = tensor.storage_offset();
  for (int64_t d = 0; d < tensor.dim(); ++d) {
    int64_t extent = 0;
    if (tensor.stride(d) < 0 || __builtin_mul_overflow(tensor.size(d) - 1, tensor.stride(d), &extent) ||
        __builtin_add_overflow(last, extent, &last)) {
      broken_promise("tensor '" + name + "' has a view whose extent overflows or runs backwards");
    }
  }
  int64_t end = 0;
  if (__builtin_mul_overflow(last + 1, static_cast<int64_t>(tensor.element_size()), &end) ||
      static_cast<uint64_t>(end) > storage.nbytes()) {
    broken_promise("tensor '" + name + "' reaches element " + std::to_string(last) + " of a storage of " +
                   std::to_string(storage.nbytes()) + " bytes");
  }
}

}  // namespace timm::fuzz
