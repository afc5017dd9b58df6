// The SGD plugin's factories shared between its sources (plugin-internal).
#pragma once

#include <string>
#include <vector>

#include "timm/optim/foreach_optimizer.hpp"
#include "timm/optim/optimizer.hpp"

namespace timm::sgd {

struct SgdConfig {
  double momentum = 0.0;
  double dampening = 0.0;
  bool nesterov = false;
  bool caution = false;
  bool maximize = false;
  // timm's SGDW: param *= 1 - lr * wd. Otherwise torch's SGD: grad += wd * param.
  bool decoupled_weight_decay = true;
  DecayLr decay_lr;  // lr, or lr² / max_lr (corrected_weight_decay)
  // torch's fused CPU kernel where it applies (not with caution): the same
  // values, bit for bit, in one pass per parameter.
  bool fused = true;
};

// SGD on ForeachOptimizer, with `description` as its log line.
OptimizerPtr make_sgd_optimizer(std::vector<ParamGroup> groups, double lr, std::string description,
                                const SgdConfig& config);

// timm.optim.SGDW ("sgdw" / "nesterovw", "csgdw", "sgdc", "csgdc").
OptimizerPtr make_sgdw(std::vector<ParamGroup> groups, const OptimizerArgs& args);

}  // namespace timm::sgd
