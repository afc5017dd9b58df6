// "madgrad" and "madgradw": timm's MADGRAD (timm/optim/madgrad.py), dual
// averaging with a cube-root denominator; momentum as an average of the
// iterate with its starting point; madgradw decouples the weight decay.
// Dense gradients only.
#include <cmath>
#include <map>

#include <ATen/ATen.h>

#include "timm/base/error.hpp"
#include "timm/optim/foreach_optimizer.hpp"
#include "timm/optim/optimizer.hpp"
#include "timm/plugin/plugin.hpp"

namespace timm {
namespace {

using Tensors = std::vector<at::Tensor>;

struct MadgradSettings {
  double momentum = 0.9;
  double eps = 1e-6;
  bool decoupled_decay = false;
};

class Madgrad : public ForeachOptimizer {
 public:
  Madgrad(std::vector<ParamGroup> groups, double lr, std::string description, MadgradSettings settings)
      : ForeachOptimizer(std::move(groups), lr, std::move(description)), s_(settings) {}

 private:
  bool updates_parameters_independently() const override { return true; }
  void step_group(GroupStep& group) override {
    for (std::size_t i = 0; i < group.params.size(); ++i) {
      State& state = *group.states[i];
      if (state.empty()) {
        state["step"] = at::zeros({}, at::kLong);
        state["grad_sum_sq"] = at::zeros_like(group.params[i]);
        state["s"] = at::zeros_like(group.params[i]);
        if (s_.momentum != 0) state["x0"] = group.params[i].detach().clone();
      }
      state["step"].add_(1);
    }
    // Parameters skipped on some steps have their own step count, hence
    // their own lamb: one foreach pass per distinct step.
    std::map<int64_t, std::vector<std::size_t>> by_step;
    for (std::size_t i = 0; i < group.params.size(); ++i) {
      by_step[group.states[i]->at("step").item<int64_t>()].push_back(i);
    }
    for (const auto& [step, indices] : by_step) update(group.subset(indices), step);
  }

  void update(const GroupStep& group, int64_t step) {
    const Tensors& params = group.params;
    Tensors grads = group.grads;
    const double eps = s_.eps;
    const double lr = group.lr + eps;
    const double wd = group.weight_decay;
    const double ck = 1 - s_.momentum;
    const double lamb = lr * std::sqrt(static_cast<double>(step));
    if (wd != 0) {
      if (s_.decoupled_decay) {
        at::_foreach_mul_(params, 1.0 - group.lr * wd);
      } else {
        grads = at::_foreach_add(grads, params, wd);  // p.grad left unmodified
      }
    }
    const Tensors grad_sum_sq = state_list(group, "grad_sum_sq");
    const Tensors s = state_list(group, "s");
    Tensors x0;
    if (s_.momentum == 0) {
      // x0 from the other known quantities.
      Tensors rms = at::_foreach_pow(grad_sum_sq, 1.0 / 3);
      at::_foreach_add_(rms, eps);
      x0 = at::_foreach_addcdiv(params, s, rms, 1);
    } else {
      x0 = state_list(group, "x0");
    }
    at::_foreach_addcmul_(grad_sum_sq, grads, grads, lamb);
    Tensors rms = at::_foreach_pow(grad_sum_sq, 1.0 / 3);
    at::_foreach_add_(rms, eps);
    at::_foreach_add_(s, grads, lamb);
    const Tensors z = at::_foreach_addcdiv(x0, s, rms, -1);
    if (s_.momentum == 0) {
      at::_foreach_copy_(params, z);
    } else {
      // p is a moving average of z
      at::_foreach_mul_(params, 1 - ck);
      at::_foreach_add_(params, z, ck);
    }
  }

  MadgradSettings s_;
};

OptimizerPtr make_madgrad(std::vector<ParamGroup> groups, const OptimizerArgs& args, bool decoupled_default) {
  const OptimizerKwargs kwargs(args, {"eps", "decoupled_decay", "betas"});
  const std::string opt = timm::in_quotes(args.opt);
  MadgradSettings s;
  s.momentum = args.momentum;
  s.eps = args.eps ? *args.eps : kwargs.get_double("eps", 1e-6);
  s.decoupled_decay = kwargs.get_bool("decoupled_decay", decoupled_default);
  if (s.momentum < 0 || s.momentum >= 1) {
    throw UsageError("optimizer " + opt + ": --momentum " + python_float_repr(s.momentum) + " must be in [0, 1)");
  }
  if (args.lr <= 0)
    throw UsageError("optimizer " + opt + ": learning rate " + python_float_repr(args.lr) + " must be positive");
  if (args.weight_decay < 0) {
    throw UsageError("optimizer " + opt + ": --weight-decay " + python_float_repr(args.weight_decay) +
                     " must be non-negative");
  }
  if (s.eps < 0) throw UsageError("optimizer " + opt + ": eps must be non-negative");
  const std::string description =
      describe_optimizer("MADGRAD", args.opt,
                         {{"lr", python_float_repr(args.lr)},
                          {"eps", args.eps ? python_float_repr(*args.eps) : kwargs.repr("eps", "1e-06")},
                          {"momentum", python_float_repr(s.momentum)},
                          {"weight_decay", python_float_repr(args.weight_decay)},
                          {"decoupled_decay", kwargs.repr("decoupled_decay", py_bool(decoupled_default))}});
  return std::make_unique<Madgrad>(std::move(groups), args.lr, description, s);
}

}  // namespace
}  // namespace timm

TIMM_PLUGIN("madgrad") {
  using timm::OptimizerArgs;
  using timm::ParamGroup;
  registrar.add_optimizer("madgrad", "Momentum-based Adaptive gradient method",
                          [](std::vector<ParamGroup> groups, const OptimizerArgs& args) {
                            return timm::make_madgrad(std::move(groups), args, /*decoupled_default=*/false);
                          });
  registrar.add_optimizer("madgradw", "MADGRAD with decoupled weight decay",
                          [](std::vector<ParamGroup> groups, const OptimizerArgs& args) {
                            return timm::make_madgrad(std::move(groups), args, /*decoupled_default=*/true);
                          });
}
