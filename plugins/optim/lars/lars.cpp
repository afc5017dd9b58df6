// "lars", "larc", "nlars", "nlarc": timm's Lars (timm/optim/lars.py). On
// groups with weight decay (always with always_adapt) the gradient plus decay
// is scaled by trust_coeff |p| / (|g| + wd |p| + eps); LARC clips that ratio
// over lr at one; then torch SGD's momentum (Nesterov for nlars / nlarc).
// On the CPU the update after the norms runs in one pass per parameter;
// foreach=False runs timm's ops.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <optional>

#include "timm/base/error.hpp"
#include "timm/base/simd.hpp"
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
  bool one_pass = true;  // --opt-kwargs foreach=False: timm's ops one by one
};

// The float32 scalars of one parameter's update, as the per-tensor ops cast
// them.
struct OnePassScalars {
  float lr;
  float momentum;
  float one_minus_dampening;
  float weight_decay;
  float trust_ratio;
  bool adapt;  // the trust ratio and decay apply
  bool nesterov;
  bool new_buffer;  // the first step: the buffer is the gradient itself
};

// timm's update after the norms, one element after another: p, grad and the
// buffer read once, p and the buffer written once, where the ops make about
// 16 accesses per element. `buffer` is null without momentum.
TIMM_AVX2_CLONES
void lars_one_pass(float* __restrict param, const float* __restrict grad, float* __restrict buffer, int64_t n,
                   const OnePassScalars s) {
  for (int64_t i = 0; i < n; ++i) {
    // timm: grad.add(p, alpha=weight_decay).mul_(trust_ratio)
    const float g = s.adapt ? (grad[i] + s.weight_decay * param[i]) * s.trust_ratio : grad[i];
    float update = g;
    if (buffer != nullptr) {
      const float b = s.new_buffer ? g : buffer[i] * s.momentum + s.one_minus_dampening * g;
      buffer[i] = b;
      update = s.nesterov ? g + s.momentum * b : b;
    }
    param[i] = param[i] - s.lr * update;
  }
}

class Lars : public ForeachOptimizer {
 public:
  Lars(std::vector<ParamGroup> groups, double lr, std::string description, LarsSettings settings)
      : ForeachOptimizer(std::move(groups), lr, std::move(description)), s_(settings) {}

 private:
  // timm's _lars_trust_ratio per tensor, in one stacked op: element i is
  // parameter i's ratio.
  at::Tensor trust_ratios(const Tensors& params, const Tensors& grads, double wd, double lr) const {
    const at::Tensor w = at::stack(at::_foreach_norm(params));
    const at::Tensor g = at::stack(at::_foreach_norm(grads));
    const at::Tensor raw = s_.trust_coeff * w / (g + w * wd + s_.eps);
    at::Tensor ratio = at::where(w > 0, at::where(g > 0, raw, 1.0), 1.0);
    if (s_.trust_clip) ratio = at::clamp_max(ratio / lr, 1.0);
    return ratio;
  }

  bool updates_parameters_independently() const override { return true; }
  void step_group(GroupStep& a) override {
    const double wd = a.weight_decay;
    const double lr = a.lr;
    const bool adapt = wd != 0 || s_.always_adapt;
    const at::Tensor ratios = adapt ? trust_ratios(a.params, a.grads, wd, lr) : at::Tensor();
    const Tensors buffers = existing_buffers(a);
    if (s_.one_pass && fused_cpu_kernels_apply({a.params, a.grads, buffers})) {
      // float32 on the CPU here: read in place, not one item() per parameter.
      const float* ratio = adapt ? ratios.data_ptr<float>() : nullptr;
      for (std::size_t i = 0; i < a.params.size(); ++i) {
        step_in_one_pass(a.params[i], a.grads[i], *a.states[i], wd, lr,
                         adapt ? std::optional<float>(ratio[i]) : std::nullopt);
      }
      return;
    }
    Tensors grads = a.grads;
    if (adapt) {
      grads = at::_foreach_add(a.grads, a.params, wd);  // p.grad left unmodified
      at::_foreach_mul_(grads, ratios.unbind(0));
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

  static Tensors existing_buffers(const GroupStep& a) {
    Tensors buffers;
    for (State* state : a.states) {
      if (auto it = state->find("momentum_buffer"); it != state->end()) buffers.push_back(it->second);
    }
    return buffers;
  }

  // lars_one_pass over one contiguous float32 parameter, in ranges across the
  // intra-op threads. The writes bypass the dispatcher, so the versions are
  // bumped here as the in-place ops would. `trust_ratio`: none where the
  // group neither decays nor always adapts.
  void step_in_one_pass(const at::Tensor& param, const at::Tensor& grad, State& state, double wd, double lr,
                        std::optional<float> trust_ratio) const {
    at::Tensor buffer;
    bool new_buffer = false;
    if (s_.momentum != 0) {
      auto it = state.find("momentum_buffer");
      new_buffer = it == state.end();
      buffer = new_buffer ? (state["momentum_buffer"] = at::empty_like(param)) : it->second;
    }
    const OnePassScalars s{static_cast<float>(lr),
                           static_cast<float>(s_.momentum),
                           static_cast<float>(1. - s_.dampening),
                           static_cast<float>(wd),
                           trust_ratio.value_or(1.0f),
                           trust_ratio.has_value(),
                           s_.nesterov,
                           new_buffer};
    float* p = param.data_ptr<float>();
    const float* g = grad.data_ptr<float>();
    float* b = buffer.defined() ? buffer.data_ptr<float>() : nullptr;
    at::parallel_for(0, param.numel(), at::internal::GRAIN_SIZE, [&](int64_t begin, int64_t end) {
      lars_one_pass(p + begin, g + begin, b ? b + begin : nullptr, end - begin, s);
    });
    bump_versions({param});
    if (buffer.defined()) bump_versions({buffer});
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
  s.one_pass = one_pass_requested(kwargs);
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
