// Fuzz target: NumPy .npy files (timm-logits' tensor input).
#include "fuzz_target.hpp"
#include "tensor_checks.hpp"
#include "timm/io/npy.hpp"

TIMM_FUZZ_TARGET(npy) {
  timm::fuzz::check_tensor(timm::read_npy(timm::fuzz::scratch_file("input.npy", data)), "array");
}
