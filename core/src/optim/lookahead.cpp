#include "timm/optim/lookahead.hpp"

#include <utility>

#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>

#include "timm/base/error.hpp"
#include "timm/base/python_repr.hpp"

namespace timm {

namespace {

std::string slow_key(std::size_t g, std::size_t i) {
  return "lookahead_slow_" + std::to_string(g) + "_" + std::to_string(i);
}

}  // namespace

Lookahead::Lookahead(OptimizerPtr base, std::vector<std::vector<at::Tensor>> group_params, double alpha, int64_t k)
    : base_(std::move(base)), params_(std::move(group_params)), alpha_(alpha), k_(k) {
  TORCH_CHECK(base_ != nullptr, "Lookahead needs an optimizer");
  if (!(alpha >= 0.0 && alpha <= 1.0))
    throw UsageError("Lookahead: invalid slow update rate " + python_float_repr(alpha));
  if (k < 1) throw UsageError("Lookahead: invalid lookahead steps " + std::to_string(k));
  TORCH_CHECK(params_.size() == base_->num_groups(), "Lookahead: ", params_.size(), " parameter lists for ",
              base_->num_groups(), " param groups");
  slow_.resize(params_.size());
  for (std::size_t g = 0; g < params_.size(); ++g) slow_[g].resize(params_[g].size());
  steps_.assign(params_.size(), 0);
}

void Lookahead::step() {
  base_->step();
  for (std::size_t g = 0; g < params_.size(); ++g) {
    if (++steps_[g] % k_ == 0) update_slow(g);
  }
}

void Lookahead::update_slow(std::size_t group) {
  at::NoGradGuard no_grad;
  std::vector<at::Tensor> fast;
  std::vector<at::Tensor> slow;
  for (std::size_t i = 0; i < params_[group].size(); ++i) {
    const at::Tensor& param = params_[group][i];
    if (!param.grad().defined()) continue;  // as timm: only parameters that have a gradient
    at::Tensor& buffer = slow_[group][i];
    if (!buffer.defined()) buffer = param.detach().clone();
    fast.push_back(param);
    slow.push_back(buffer);
  }
  if (fast.empty()) return;
  // slow += alpha * (fast - slow); fast = slow
  const std::vector<at::Tensor> diff = at::_foreach_sub(fast, slow);
  at::_foreach_add_(slow, diff, alpha_);
  at::_foreach_copy_(fast, slow);
}

void Lookahead::save(torch::serialize::OutputArchive& archive) const {
  // The scheduler sets initial_lr on this wrapper; the base keeps it in its state.
  for (std::size_t g = 0; g < num_groups(); ++g) {
    if (const auto lr = initial_lr(g)) base_->set_initial_lr(g, *lr);
  }
  base_->save(archive);
  archive.write("lookahead_step", at::tensor(steps_, at::kLong), /*is_buffer=*/true);
  for (std::size_t g = 0; g < slow_.size(); ++g) {
    for (std::size_t i = 0; i < slow_[g].size(); ++i) {
      if (slow_[g][i].defined()) archive.write(slow_key(g, i), slow_[g][i], /*is_buffer=*/true);
    }
  }
}

void Lookahead::load(torch::serialize::InputArchive& archive) {
  base_->load(archive);
  for (std::size_t g = 0; g < num_groups(); ++g) {
    if (const auto lr = base_->initial_lr(g)) set_initial_lr(g, *lr);
  }
  // timm: an archive of the base optimizer alone starts the lookahead afresh.
  steps_.assign(params_.size(), 0);
  at::Tensor steps;
  if (archive.try_read("lookahead_step", steps, /*is_buffer=*/true)) {
    if (static_cast<std::size_t>(steps.numel()) != steps_.size()) {
      throw Error("cannot load optimizer state: lookahead steps for " + std::to_string(steps.numel()) +
                  " param groups, expected " + std::to_string(steps_.size()));
    }
    for (std::size_t g = 0; g < steps_.size(); ++g) steps_[g] = steps[static_cast<int64_t>(g)].item<int64_t>();
  }
  for (std::size_t g = 0; g < slow_.size(); ++g) {
    for (std::size_t i = 0; i < slow_[g].size(); ++i) {
      at::Tensor value;
      slow_[g][i] =
          archive.try_read(slow_key(g, i), value, /*is_buffer=*/true) ? value.to(params_[g][i].device()) : at::Tensor();
    }
  }
}

std::string Lookahead::describe() const {
  // timm updates the base's defaults with its own and reports its class name.
  const std::string base = base_->describe();
  const std::size_t paren = base.find(" (");
  return "Lookahead" + (paren == std::string::npos ? " " + base : base.substr(paren)) +
         ", lookahead_alpha: " + python_float_repr(alpha_) + ", lookahead_k: " + std::to_string(k_) +
         ", lookahead_step: 0";
}

}  // namespace timm
