#include "timm/models/features.hpp"

#include <algorithm>
#include <numeric>

#include "timm/base/error.hpp"

namespace timm {

std::pair<std::vector<int64_t>, int64_t> feature_take_indices(int64_t num_features, const FeatureIndices& indices) {
  int64_t last_n = num_features;  // timm's None: every level
  if (const auto* n = std::get_if<int64_t>(&indices)) last_n = *n;
  std::vector<int64_t> take;
  if (const auto* list = std::get_if<std::vector<int64_t>>(&indices)) {
    if (list->empty()) throw UsageError("forward_intermediates: indices is an empty list; expected at least one level");
    for (const int64_t i : *list) {
      const int64_t index = i < 0 ? num_features + i : i;
      if (index < 0 || index >= num_features) {
        throw UsageError("forward_intermediates: feature index " + std::to_string(index) + " is out of range (0 to " +
                         std::to_string(num_features - 1) + ")");
      }
      take.push_back(index);
    }
  } else {
    if (last_n < 1 || last_n > num_features) {
      throw UsageError("forward_intermediates: last-n (" + std::to_string(last_n) + ") is out of range (1 to " +
                       std::to_string(num_features) + ")");
    }
    for (int64_t i = 0; i < last_n; ++i) take.push_back(num_features - last_n + i);
  }
  const int64_t max_index = *std::max_element(take.begin(), take.end());
  return {std::move(take), max_index};
}

void check_output_fmt(const std::string& model, const std::string& output_fmt,
                      const std::vector<std::string>& supported) {
  if (std::find(supported.begin(), supported.end(), output_fmt) != supported.end()) return;
  std::string expected;
  for (const auto& fmt : supported) expected += (expected.empty() ? "" : " or ") + fmt;
  throw UsageError(model + ": forward_intermediates output_fmt must be " + expected + ", got '" + output_fmt + "'");
}

std::vector<bool> take_mask(int64_t num_features, const std::vector<int64_t>& take_indices) {
  std::vector<bool> take(static_cast<size_t>(num_features), false);
  for (const int64_t i : take_indices) take[static_cast<size_t>(i)] = true;
  return take;
}

Intermediates run_feature_steps(torch::Tensor x, size_t steps, const std::vector<size_t>& level_ends,
                                const std::function<torch::Tensor(size_t, torch::Tensor)>& step,
                                const IntermediatesOptions& options) {
  const auto levels = static_cast<int64_t>(level_ends.size());
  const auto [take_indices, max_index] = feature_take_indices(levels, options.indices());
  const std::vector<bool> take = take_mask(levels, take_indices);
  const size_t steps_run = options.stop_early() ? level_ends[static_cast<size_t>(max_index)] + 1 : steps;
  Intermediates out;
  size_t level = 0;
  for (size_t i = 0; i < steps_run; ++i) {
    x = step(i, x);
    if (level < level_ends.size() && i == level_ends[level]) {
      if (take[level]) out.intermediates.push_back(x);
      ++level;
    }
  }
  if (!options.intermediates_only()) out.final = x;
  return out;
}

Intermediates run_feature_steps(torch::Tensor x, size_t steps,
                                const std::function<torch::Tensor(size_t, torch::Tensor)>& step,
                                const IntermediatesOptions& options) {
  std::vector<size_t> level_ends(steps);
  std::iota(level_ends.begin(), level_ends.end(), size_t{0});
  return run_feature_steps(std::move(x), steps, level_ends, step, options);
}

}  // namespace timm
