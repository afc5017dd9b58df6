#include "timm/models/model_dtype.hpp"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

namespace timm {

void to_model_dtype(torch::nn::Module& module, c10::ScalarType dtype) {
  c10::NoGradGuard no_grad;
  // As Python's Module._apply(lambda t: t.to(dtype) if t.is_floating_point()):
  // the parameter objects stay, their data (and gradient) change.
  for (auto& p : module.parameters()) {
    if (!p.is_floating_point() || p.scalar_type() == dtype) continue;
    p.set_data(p.data().to(dtype));
    if (p.grad().defined()) p.mutable_grad() = p.grad().to(dtype);
  }
  for (auto& b : module.buffers()) {
    if (b.is_floating_point() && b.scalar_type() != dtype) b.set_data(b.data().to(dtype));
  }
}

}  // namespace timm
