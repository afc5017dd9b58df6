// The NCCL communicator: compiled only when torch has CUDA and nccl.h was
// found (core/CMakeLists.txt), with USE_C10D_NCCL defined for this file only.
#include <c10/cuda/CUDAFunctions.h>
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>

#include "backends.hpp"
#include "timm/base/error.hpp"

namespace timm::dist::detail {

c10::intrusive_ptr<c10d::Backend> create_nccl(const c10::intrusive_ptr<c10d::Store>& store, const WorldInfo& world,
                                              const c10::Device& device, std::chrono::milliseconds timeout) {
  if (!device.is_cuda() || !device.has_index()) {
    throw UsageError("the NCCL backend needs a CUDA device with an index, got " + in_quotes(device.str()));
  }
  // Before the first collective, as torch.cuda.set_device in timm's init.
  c10::cuda::set_device(device.index());
  auto options = c10::make_intrusive<c10d::ProcessGroupNCCL::Options>();
  options->timeout = timeout;
  auto nccl = c10::make_intrusive<c10d::ProcessGroupNCCL>(store, world.rank, world.world_size, options);
  nccl->setBoundDeviceId(device);
  return nccl;
}

bool have_nccl() { return true; }

}  // namespace timm::dist::detail
