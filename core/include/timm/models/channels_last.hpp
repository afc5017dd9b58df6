// channels_last memory format for a whole model, as Python's
// model.to(memory_format=torch.channels_last): C++'s Module::to() has no
// memory_format overload.
#pragma once

#include <torch/nn/module.h>

namespace timm {

// Re-lays every 4-D parameter and buffer of `module` (and its submodules) out
// as channels_last, in place (same tensors, new strides; parameters stay the
// same objects, so call it before an optimizer or not: both work, as the
// optimizer holds the parameters, not their data).
void to_channels_last(torch::nn::Module& module);

// True when every 4-D parameter and buffer is channels_last-contiguous.
bool is_channels_last(const torch::nn::Module& module);

}  // namespace timm
