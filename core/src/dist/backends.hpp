// Internal: the communicator factories, one translation unit per backend so
// the NCCL one (CUDA headers, libtorch_cuda) is compiled only where it can be.
#pragma once

#include <chrono>

#include <c10/core/Device.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include "timm/dist/world.hpp"

namespace timm::dist::detail {

c10::intrusive_ptr<c10d::Backend> create_gloo(const c10::intrusive_ptr<c10d::Store>& store, const WorldInfo& world,
                                              std::chrono::milliseconds timeout);

// Defined in nccl_backend.cpp when built with NCCL, else throws.
c10::intrusive_ptr<c10d::Backend> create_nccl(const c10::intrusive_ptr<c10d::Store>& store, const WorldInfo& world,
                                              const c10::Device& device, std::chrono::milliseconds timeout);
bool have_nccl();

}  // namespace timm::dist::detail
