// NaFlexVit (timm/models/naflexvit.py), registered by the vit plugin beside
// timm's VisionTransformer, whose Block it shares (vit_block.hpp).
#pragma once

#include "timm/plugin/plugin.hpp"

namespace timm::naflexvit {

// Adds timm's naflexvit_* models to `registrar`, in timm's order.
void register_naflexvit(PluginRegistrar& registrar);

}  // namespace timm::naflexvit
