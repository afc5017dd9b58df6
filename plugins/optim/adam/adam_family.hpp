// The Adam family's factories (plugin-internal): each builds the optimizer
// timm's registry binds to the name, from timm's groups and train.py's flags.
#pragma once

#include <vector>

#include "timm/optim/optimizer.hpp"

namespace timm::adam {

// torch.optim.Adam ("adam").
OptimizerPtr make_adam(std::vector<ParamGroup> groups, const OptimizerArgs& args);
OptimizerPtr make_adamw(std::vector<ParamGroup> groups, const OptimizerArgs& args);
// torch.optim.NAdam ("nadam").
OptimizerPtr make_nadam(std::vector<ParamGroup> groups, const OptimizerArgs& args);
// torch.optim.RAdam ("radam", "radamw").
OptimizerPtr make_radam(std::vector<ParamGroup> groups, const OptimizerArgs& args);
// timm.optim.NAdamW ("nadamw", "cnadamw", "nadamc", "cnadamc").
OptimizerPtr make_nadamw(std::vector<ParamGroup> groups, const OptimizerArgs& args);
// timm.optim.AdaBelief ("adabelief", "radabelief").
OptimizerPtr make_adabelief(std::vector<ParamGroup> groups, const OptimizerArgs& args);
// timm.optim.Adopt ("adopt", "adoptw", "cadopt", "cadoptw", "adoptc", "cadoptc").
OptimizerPtr make_adopt(std::vector<ParamGroup> groups, const OptimizerArgs& args);
// timm.optim.NAdamLegacy ("nadamlegacy").
OptimizerPtr make_nadam_legacy(std::vector<ParamGroup> groups, const OptimizerArgs& args);
// timm.optim.RAdamLegacy ("radamlegacy").
OptimizerPtr make_radam_legacy(std::vector<ParamGroup> groups, const OptimizerArgs& args);

}  // namespace timm::adam
