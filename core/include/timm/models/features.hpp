// Feature extraction as timm's models do it: feature_info, which lists a
// model's feature levels, and the arguments and result of
// forward_intermediates, which returns the feature maps at chosen levels for
// detection and segmentation code (timm/models/_features.py).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include <torch/arg.h>
#include <torch/types.h>

namespace timm {

// One entry of timm's model.feature_info: the channels and total stride of a
// feature level and the module (state_dict prefix) whose output it is,
// e.g. {256, 4, "layer1"}.
struct FeatureInfo {
  int64_t num_chs = 0;
  int64_t reduction = 0;
  std::string module;

  bool operator==(const FeatureInfo&) const = default;
};

// timm's `indices` argument: std::monostate (timm's None) takes every level,
// an integer n the last n levels, a list those levels (negative counts from
// the end).
using FeatureIndices = std::variant<std::monostate, int64_t, std::vector<int64_t>>;

// The keyword arguments of timm's forward_intermediates.
struct IntermediatesOptions {
  TORCH_ARG(FeatureIndices, indices) = std::monostate{};
  // Apply the model's final norm to the intermediates it fits (all of a ViT's
  // blocks; the last stage of a ConvNeXt or Swin); models without one ignore it.
  TORCH_ARG(bool, norm) = false;
  // Stop after the last level taken; the final features are then those of
  // that level, as timm's.
  TORCH_ARG(bool, stop_early) = false;
  // The intermediates' layout: "NCHW" for every model, "NLC" for a ViT
  // (tokens without the prefix tokens); others throw UsageError.
  TORCH_ARG(std::string, output_fmt) = "NCHW";
  // Skip the final norm, returning no final features.
  TORCH_ARG(bool, intermediates_only) = false;
};

// What forward_intermediates returns: timm's (final, intermediates) tuple,
// or its list alone when intermediates_only (then `final` is undefined).
struct Intermediates {
  torch::Tensor final;
  std::vector<torch::Tensor> intermediates;
};

// timm's feature_take_indices(num_features, indices): the levels to take, in
// the order given, and the largest. Throws UsageError with timm's message when
// an index is outside [-num_features, num_features) or n outside
// [1, num_features], e.g. "feature index 5 is out of range (0 to 4)".
std::pair<std::vector<int64_t>, int64_t> feature_take_indices(int64_t num_features, const FeatureIndices& indices);

// Throws UsageError naming `model` (describe_model(*this) in a plugin), `output_fmt` and the formats it supports
// unless `output_fmt` is one of `supported`.
void check_output_fmt(const std::string& model, const std::string& output_fmt,
                      const std::vector<std::string>& supported);

// The feature levels taken, as a mask over [0, num_features): take[i] is true
// when level i is returned.
std::vector<bool> take_mask(int64_t num_features, const std::vector<int64_t>& take_indices);

// The loop of a CNN's forward_intermediates that runs its feature modules in
// sequence (timm's VGG, DenseNet, DLA, Inception-V3): `steps` steps, where
// `step(i, x)` runs step i on x, and level l is the output of step
// `level_ends[l]` (ascending). Takes the levels `options.indices()` selects,
// in level order; with stop_early stops after the last level taken. The
// final features are the last step run's output, undefined with
// intermediates_only. The caller checks output_fmt and applies any norm.
Intermediates run_feature_steps(torch::Tensor x, size_t steps, const std::vector<size_t>& level_ends,
                                const std::function<torch::Tensor(size_t, torch::Tensor)>& step,
                                const IntermediatesOptions& options);
// run_feature_steps where every step is a feature level (a CNN's stages,
// level i the output of stage i).
Intermediates run_feature_steps(torch::Tensor x, size_t steps,
                                const std::function<torch::Tensor(size_t, torch::Tensor)>& step,
                                const IntermediatesOptions& options);

}  // namespace timm
