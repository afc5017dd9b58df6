// Training checkpoints in our format: the model's weights as safetensors with
// timm's key names (loadable by Python timm as they are), and the training
// state (optimizer, epoch, metric, config) beside them in <stem>.state.pt.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include <torch/nn/module.h>

#include "timm/optim/optimizer.hpp"

namespace timm {

struct TrainingState {
  int64_t epoch = 0;
  double metric = 0.0;
  std::string metric_name;
  std::string config_toml;
};

// Writes <dir>/<stem>.state.pt, then <dir>/<stem>.safetensors, each
// atomically; the weights' metadata names the state file's checkpoint id so
// a mismatched pair is detected.
void save_checkpoint(const std::filesystem::path& dir, const std::string& stem, const torch::nn::Module& model,
                     const Optimizer& optimizer, const TrainingState& state);

}  // namespace timm
