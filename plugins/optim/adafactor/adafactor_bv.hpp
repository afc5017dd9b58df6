// timm's AdafactorBigVision (plugin-internal): the factory that the
// adafactor plugin registers as "adafactorbv" and its variants.
#pragma once

#include <vector>

#include "timm/optim/optimizer.hpp"

namespace timm::adafactor_bv {

// timm.optim.AdafactorBigVision from timm's groups and train.py's flags
// ("adafactorbv", "adafactorbvc", "cadafactorbv", "cadafactorbvc").
OptimizerPtr make_adafactor_bv(std::vector<ParamGroup> groups, const OptimizerArgs& args);

}  // namespace timm::adafactor_bv
