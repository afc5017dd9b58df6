// Registering a layer held as a torch::nn::AnyModule: the member a model
// keeps when the layer's type is chosen at run time (BatchNorm2d or
// GroupNorm, AvgPool2d or BlurPool2d, a plain or a mixed conv).
#pragma once

#include <string>
#include <utility>

#include <torch/nn/module.h>
#include <torch/nn/modules/container/any.h>

namespace timm::layers {

// Registers `module` under `name` in `parent` and returns it, for
// `member = register_any(*this, "bn1", make_norm(...))`.
inline torch::nn::AnyModule register_any(torch::nn::Module& parent, const std::string& name,
                                         torch::nn::AnyModule module) {
  parent.register_module(name, module.ptr());
  return module;
}

}  // namespace timm::layers
