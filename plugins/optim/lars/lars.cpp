// "lars", "larc", "nlars", "nlarc": timm's Lars (timm/optim/lars.py). On
// groups with weight decay (always with always_adapt) the gradient plus decay
// is scaled by trust_coeff |p| / (|g| + wd |p| + eps); LARC clips that ratio
// over lr at one; then torch SGD's momentum (Nesterov for nlars / nlarc).
#include <ATen/ATen.h>

#include "timm/base/error.hpp"
#include "timm/optim/foreach_optimizer.hpp"
#include "timm/optim/optimizer.hpp"
#include "timm/plugin/plugin.hpp"

namespace timm {
namespace {

using Tensors = std::vector<at::Tensor>;

struct LarsSettings {
  double momentum = 0.9;
  double dampening = 0.0;
  bool nesterov = false;
  double trust_coeff = 0.001;
  double eps = 1e-8;
  bool trust_clip = false;
  bool always_adapt = false;
};

class Lars : public ForeachOptimizer {
 public:
  Lars(std::vector<ParamGroup> groups, double lr, std::string description, LarsSettings settings)
      : ForeachOptimizer(std::move(groups), lr, std::move(description)), s_(settings) {}

 private:
  // timm's _lars_trust_ratio per tensor, in one stacked op.
  Tensors trust_ratios(const Tensors& params, const Tensors& grads, double wd, double lr) const {
    const at::Tensor w = at::stack(at::_foreach_norm(params));
    const at::Tensor g = at::stack(at::_foreach_norm(grads));
    const at::Tensor raw = s_.trust_coeff * w / (g + w * wd + s_.eps);
    at::Tensor ratio = at::where(w > 0, at::where(g > 0, raw, 1.0), 1.0);
    if (s_.trust_clip) ratio = at::clamp_max(ratio / lr, 1.0);
    return ratio.unbind(0);
  }

  bool updates_parameters_independently() const override { return true; }
  void step_group(GroupStep& a) override {
    const double wd = a.weight_decay;
    const double lr = a.lr;
    Tensors grads = a.grads;
    if (wd != 0 || s_.always_adapt) {
      const Tensors ratios = trust_ratios(a.params, a.grads, wd, lr);
      grads = at::_foreach_add(a.grads, a.params, wd);  // p.grad left unmodified
      at::_foreach_mul_(grads, ratios);
    }
    if (s_.momentum != 0) {
      Tensors existing;
      Tensors existing_grads;
      for (std::size_t i = 0; i < a.params.size(); ++i) {
        auto it = a.states[i]->find("momentum_buffer");
        if (it == a.states[i]->end()) continue;
        existing.push_back(it->second);
        existing_grads.push_back(grads[i]);
      }
      if (!existing.empty()) {
        at::_foreach_mul_(existing, s_.momentum);
        at::_foreach_add_(existing, existing_grads, 1. - s_.dampening);
      }
      // torch SGD: the first step's buffer is the gradient itself.
      for (std::size_t i = 0; i < a.params.size(); ++i) {
        if (a.states[i]->count("momentum_buffer") == 0) (*a.states[i])["momentum_buffer"] = grads[i].clone();
      }
      const Tensors bufs = state_list(a, "momentum_buffer");
      grads = s_.nesterov ? at::_foreach_add(grads, bufs, s_.momentum) : bufs;
    }
    at::_foreach_add_(a.params, grads, -lr);
  }

  LarsSettings s_;
};

OptimizerPtr make_lars(std::vector<ParamGroup> groups, const OptimizerArgs& args, bool nesterov_default,
                       bool trust_clip_default) {
  const OptimizerKwargs kwargs(
      args, {"dampening", "nesterov", "trust_coeff", "eps", "trust_clip", "always_adapt", "foreach", "betas"});
  const std::string opt = timm::in_quotes(args.opt);
  LarsSettings s;
  s.momentum = args.momentum;
  s.dampening = kwargs.get_double("dampening", 0.0);
  s.nesterov = kwargs.get_bool("nesterov", nesterov_default);
  s.trust_coeff = kwargs.get_double("trust_coeff", 0.001);
  s.eps = args.eps ? *args.eps : kwargs.get_double("eps", 1e-8);
  s.trust_clip = kwargs.get_bool("trust_clip", trust_clip_default);
  s.always_adapt = kwargs.get_bool("always_adapt", false);
  check_lr(args);
  if (s.momentum < 0) throw UsageError("optimizer " + opt + ": invalid --momentum " + python_float_repr(s.momentum));
  if (args.weight_decay < 0) {
    throw UsageError("optimizer " + opt + ": invalid --weight-decay " + python_float_repr(args.weight_decay));
  }
  if (s.nesterov && (s.momentum <= 0 || s.dampening != 0)) {
    throw UsageError("optimizer " + opt + ": Nesterov momentum requires a momentum and zero dampening");
  }
  const std::string description =
      describe_optimizer("Lars", args.opt,
                         {{"lr", python_float_repr(args.lr)},
                          {"momentum", python_float_repr(s.momentum)},
                          {"dampening", kwargs.repr("dampening", "0")},
                          {"weight_decay", python_float_repr(args.weight_decay)},
                          {"nesterov", kwargs.repr("nesterov", py_bool(nesterov_default))},
                          {"trust_coeff", kwargs.repr("trust_coeff", "0.001")},
                          {"eps", args.eps ? python_float_repr(*args.eps) : kwargs.repr("eps", "1e-08")},
                          {"trust_clip", kwargs.repr("trust_clip", py_bool(trust_clip_default))},
                          {"always_adapt", kwargs.repr("always_adapt", "False")},
                          {"foreach", kwargs.repr("foreach", "None")}});
  return std::make_unique<Lars>(std::move(groups), args.lr, description, s);
}

}  // namespace
}  // namespace timm

TIMM_PLUGIN("lars") {
  using timm::OptimizerArgs;
  using timm::ParamGroup;
  struct Variant {
    const char* name;
    const char* description;
    bool nesterov;
    bool trust_clip;
  };
  for (const Variant& v : {Variant{"lars", "Layer-wise Adaptive Rate Scaling", false, false},
                           Variant{"larc", "LARS with trust ratio clipping for stability", false, true},
                           Variant{"nlars", "LARS with Nesterov momentum", true, false},
                           Variant{"nlarc", "LARS with Nesterov momentum & trust ratio clipping", true, true}}) {
    registrar.add_optimizer(v.name, v.description, [v](std::vector<ParamGroup> groups, const OptimizerArgs& args) {
      return timm::make_lars(std::move(groups), args, v.nesterov, v.trust_clip);
    });
  }
}
