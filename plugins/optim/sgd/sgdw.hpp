// The SGD plugin's factories shared between its sources (plugin-internal).
#pragma once

#include <vector>

#include "timm/optim/optimizer.hpp"

namespace timm::sgd {

// timm.optim.SGDW ("sgdw" / "nesterovw", "csgdw", "sgdc", "csgdc").
OptimizerPtr make_sgdw(std::vector<ParamGroup> groups, const OptimizerArgs& args);

}  // namespace timm::sgd
