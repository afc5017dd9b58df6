// A whole model in another floating dtype, as Python's model.to(dtype=...)
// that train.py and validate.py apply for --model-dtype: C++'s
// Module::to(dtype) also converts integer buffers (num_batches_tracked,
// index tables), which Python's leaves alone.
#pragma once

#include <c10/core/ScalarType.h>
#include <torch/nn/module.h>

namespace timm {

// Converts every floating-point parameter and buffer of `module` (and its
// submodules) to `dtype`, in place: the same tensor objects with new data
// (and gradients), so an optimizer made before or after both see them.
// Integer and boolean tensors keep their dtype. Tensors a module keeps
// outside its parameters and buffers are not seen.
void to_model_dtype(torch::nn::Module& module, c10::ScalarType dtype);

}  // namespace timm
