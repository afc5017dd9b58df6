// torch's CPU random draws as Python makes them, for the samplers and
// optimizers that must draw timm's numbers: torch.Generator().manual_seed(seed)
// and torch.randperm(n, generator=g).
#pragma once

#include <cstdint>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

namespace timm {

// torch.Generator().manual_seed(seed): a negative Python seed wraps as torch's.
inline at::Generator seeded_generator(int64_t seed) {
  return at::make_generator<at::CPUGeneratorImpl>(static_cast<std::uint64_t>(seed));
}

// torch.randperm(n, generator=generator).tolist().
inline std::vector<int64_t> randperm(int64_t n, at::Generator& generator) {
  const at::Tensor perm = at::randperm(n, generator, at::TensorOptions().dtype(at::kLong));
  return {perm.data_ptr<int64_t>(), perm.data_ptr<int64_t>() + n};
}

}  // namespace timm
