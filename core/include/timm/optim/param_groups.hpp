// timm's layer-wise parameter grouping: group_parameters (a parameter's layer
// id from the model's group_matcher) and param_groups_layer_decay (BEiT-style
// lr decay per layer, --layer-decay).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <torch/nn/module.h>

#include "timm/models/model.hpp"
#include "timm/optim/optimizer.hpp"

namespace timm {

// timm's group_parameters(model, matcher, reverse=True): every parameter's
// layer id. Each parameter gets the ordinal tuple (rule's group position,
// the rule's captures as numbers, its suffix) of the first rule whose regex
// matches the start of its name, or (inf,) if none does; the distinct tuples
// sorted ascending are numbered 0, 1, ..., a tuple ending in 99999
// (MATCH_PREV_GROUP) joining the previous number. Frozen parameters count.
std::map<std::string, int64_t> group_parameters(const torch::nn::Module& model, const GroupMatcher& matcher);

// timm's param_groups_layer_decay options (--layer-decay, --layer-decay-min-scale,
// --layer-decay-no-opt-scale).
struct LayerDecayOptions {
  double weight_decay = 0.05;
  double layer_decay = 0.75;
  double min_scale = 0.0;
  std::optional<double> no_opt_scale;  // layers scaled below it are frozen
};

// timm's param_groups_layer_decay: one group per (layer, decay / no decay) in
// first-seen order, named "layer_<id>_decay" / "layer_<id>_no_decay", with
// lr_scale = max(min_scale, layer_decay ^ (num_layers - 1 - id)). No weight
// decay for parameters of 1 dimension or less and those matching a
// `no_weight_decay` pattern (unlike param_groups_weight_decay, a ".bias" name
// alone does not exclude). Parameters of layers whose scale is below
// no_opt_scale get requires_grad false and are left out, as timm does.
// `matcher` must not be empty (timm's auto_group_layers fallback is not
// implemented): UsageError.
std::vector<ParamGroup> param_groups_layer_decay(const torch::nn::Module& model, const GroupMatcher& matcher,
                                                 const std::vector<std::string>& no_weight_decay,
                                                 const LayerDecayOptions& options);

}  // namespace timm
