// --dist-bn: timm's distribute_bn (timm/utils/distributed.py), run at the end
// of each training epoch so every rank evaluates and saves the same
// BatchNorm running statistics (each rank's drift apart without --sync-bn).
#pragma once

#include <optional>
#include <string>

#include <torch/nn/module.h>

#include "timm/dist/collectives.hpp"

namespace timm::dist {

enum class DistBnMode {
  kReduce,     // "reduce": the average over the ranks
  kBroadcast,  // "broadcast": rank 0's values
};

// --dist-bn's value: "reduce" or "broadcast"; "" (off) gives nullopt.
// Throws UsageError for anything else.
std::optional<DistBnMode> parse_dist_bn(const std::string& value);

// Every buffer of `model` whose qualified name contains "running_mean" or
// "running_var" (timm's test; split-BN aux layers included) becomes the
// group average (kReduce) or rank 0's (kBroadcast), in place, in buffer
// order: every rank must call it on the same model structure. Returns the
// number of buffers synchronised.
int64_t distribute_bn(torch::nn::Module& model, const GroupPtr& group, DistBnMode mode);

}  // namespace timm::dist
