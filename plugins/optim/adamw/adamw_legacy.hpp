// The AdamW plugin's factories shared between its sources (plugin-internal).
#pragma once

#include <vector>

#include "timm/optim/optimizer.hpp"

namespace timm::adamw {

// timm.optim.AdamWLegacy ("adamwlegacy", "cadamw", "adamc", "cadamc").
OptimizerPtr make_adamw_legacy(std::vector<ParamGroup> groups, const OptimizerArgs& args);

}  // namespace timm::adamw
