#include "timm/train/model_ema.hpp"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include "timm/base/error.hpp"
#include "timm/models/state_dict.hpp"

namespace timm {
namespace {

// The EMA's and the live state side by side; their keys must agree, as timm
// zips the two state_dict().values(). `what` names them in errors.
std::vector<std::pair<at::Tensor, at::Tensor>> paired_state(const NamedTensors& ema_state,
                                                            const NamedTensors& live_state, const std::string& what) {
  if (ema_state.size() != live_state.size()) {
    throw Error("model EMA: the EMA's " + what + " has " + std::to_string(ema_state.size()) + " state tensors, the " +
                what + " " + std::to_string(live_state.size()));
  }
  std::vector<std::pair<at::Tensor, at::Tensor>> pairs;
  pairs.reserve(ema_state.size());
  for (std::size_t i = 0; i < ema_state.size(); ++i) {
    if (ema_state[i].first != live_state[i].first) {
      throw Error("model EMA: state key " + in_quotes(ema_state[i].first) + " of the EMA's " + what + " differs from " +
                  in_quotes(live_state[i].first) + " of the " + what);
    }
    pairs.emplace_back(ema_state[i].second, live_state[i].second);
  }
  return pairs;
}

// ema = lerp(ema, live, weight) over floating-point pairs (one foreach
// call); integer ones copied.
void lerp_pairs(const std::vector<std::pair<at::Tensor, at::Tensor>>& pairs, double weight) {
  std::vector<at::Tensor> ema_values, live_values;
  for (const auto& [ema_v, live_v] : pairs) {
    at::Tensor source = live_v.to(ema_v.device());
    if (ema_v.is_floating_point()) {
      ema_values.push_back(ema_v);
      live_values.push_back(source.to(ema_v.scalar_type()));
    } else {
      ema_v.copy_(source);
    }
  }
  if (!ema_values.empty()) at::_foreach_lerp_(ema_values, live_values, weight);
}

}  // namespace

ModelEma::ModelEma(ModelPtr ema_model, const torch::nn::Module& model, ModelEmaOptions options)
    : module_(std::move(ema_model)), options_(options) {
  if (!module_) throw Error("model EMA: no EMA model given");
  if (options_.device) module_->to(*options_.device);
  set(model);
  module_->eval();
  for (auto& p : module_->parameters()) p.set_requires_grad(false);
}

double ModelEma::decay_at(std::optional<int64_t> step) const {
  if (!step) return options_.decay;
  const int64_t s = std::max<int64_t>(0, *step - options_.update_after_step - 1);
  if (s <= 0) return 0.0;
  if (!options_.use_warmup) return options_.decay;
  const double ramp = 1.0 - std::pow(1.0 + static_cast<double>(s) / options_.warmup_gamma, -options_.warmup_power);
  return std::max(std::min(ramp, options_.decay), options_.min_decay);
}

void ModelEma::follow_task_state(const NamedTensors& task_state) {
  torch::NoGradGuard no_grad;
  task_state_.clear();
  for (const auto& [name, value] : task_state) {
    at::Tensor copy = value.detach().clone();
    if (options_.device) copy = copy.to(*options_.device);
    task_state_.emplace_back(name, std::move(copy));
  }
}

void ModelEma::update(const torch::nn::Module& model, std::optional<int64_t> step, const NamedTensors& task_state) {
  torch::NoGradGuard no_grad;
  const double weight = 1.0 - decay_at(step);
  std::vector<std::pair<at::Tensor, at::Tensor>> pairs = paired_state(state_dict(*module_), state_dict(model), "model");
  // The model and the task state in one foreach call, as timm's one EMA
  // over the trainable module.
  for (auto& pair : paired_state(task_state_, task_state, "task state")) pairs.push_back(std::move(pair));
  lerp_pairs(pairs, weight);
}

void ModelEma::set(const torch::nn::Module& model) {
  torch::NoGradGuard no_grad;
  for (auto& [ema_v, model_v] : paired_state(state_dict(*module_), state_dict(model), "model")) ema_v.copy_(model_v);
}

}  // namespace timm
