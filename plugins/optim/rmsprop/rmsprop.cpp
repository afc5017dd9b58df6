// "rmsprop": torch.optim.RMSprop with timm's alpha 0.9; "rmsproptf" and
// "rmsproptfw": timm's RMSpropTF (timm/optim/rmsprop_tf.py), TensorFlow's
// RMSprop: eps inside the square root, square_avg starting at one, lr folded
// into the momentum buffer; rmsproptfw decouples the weight decay. Without
// `centered`, on the CPU in one pass per parameter (two with caution)
// instead of the eight to ten ops; foreach=False runs the ops.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <cmath>

#include "timm/base/error.hpp"
#include "timm/base/simd.hpp"
#include "timm/optim/foreach_optimizer.hpp"
#include "timm/optim/optimizer.hpp"
#include "timm/plugin/plugin.hpp"

namespace timm {
namespace {

using Tensors = std::vector<at::Tensor>;

struct RmspropSettings {
  double alpha = 0.9;
  double eps = 1e-8;
  double momentum = 0.9;
  bool centered = false;
  bool maximize = false;         // torch's only
  bool decoupled_decay = false;  // RMSpropTF's only
  DecayLr decay_lr;              // lr, or lr² / max_lr (corrected_weight_decay)
  bool lr_in_momentum = true;
  bool caution = false;
  bool one_pass = true;  // --opt-kwargs foreach=False: the ops one by one
};

// ---- One-pass loops -----------------------------------------------------------
//
// The updates without `centered` one element after another, each value read
// and written once where the ops read or write about 20 values per element;
// within float32 rounding of the ops (ATen's formulas per element: add
// self + alpha * other, addcmul self + v * t1 * t2, addcdiv self + v * t1 /
// t2). kMomentum: momentum > 0, a momentum buffer. They vectorise (the
// plugin builds with -fno-math-errno for sqrt), with an AVX2 clone where the
// CPU has it.

// The float32 scalars of one group's update.
struct OnePassScalars {
  float grad_sign;     // torch's maximize: -1; else 1
  float grad_decay;    // coupled: grad + grad_decay * param; 0 otherwise
  float param_factor;  // decoupled: 1 - wd_scale * wd; 1 otherwise
  float alpha;
  float one_minus_alpha;
  float eps;
  float momentum;
  float grad_scale;   // the buffer's addcdiv value: lr (RMSpropTF's lr_in_momentum) or 1
  float buffer_step;  // the parameter's step along the buffer: -1 or -lr
  float neg_lr;       // without momentum: param + neg_lr * grad / avg
};

inline float decayed_grad(float grad, float param, const OnePassScalars& s) {
  const float g = grad * s.grad_sign;
  const float coupled = g + s.grad_decay * param;  // then selected: no branch in the loops
  return s.grad_decay != 0 ? coupled : g;
}

// torch's RMSprop: square_avg.mul_(alpha).addcmul_(g, g, 1 - alpha);
// avg = sqrt(square_avg) + eps.
struct TorchRule {
  static float square_avg(float g, float square_avg, const OnePassScalars& s) {
    return square_avg * s.alpha + s.one_minus_alpha * g * g;
  }
  static float avg(float square_avg, const OnePassScalars& s) { return std::sqrt(square_avg) + s.eps; }
};

// RMSpropTF: square_avg.add_(g² - square_avg, alpha=1 - alpha); avg =
// sqrt(square_avg + eps).
struct TfRule {
  static float square_avg(float g, float square_avg, const OnePassScalars& s) {
    return square_avg + s.one_minus_alpha * (g * g - square_avg);
  }
  static float avg(float square_avg, const OnePassScalars& s) { return std::sqrt(square_avg + s.eps); }
};

// One element's decayed parameter, new square_avg and new buffer (with
// kMomentum; else the step without it applied to the parameter).
template <class Rule, bool kMomentum>
inline void moments(float grad, float& param, float& square_avg, float* buffer, const OnePassScalars& s) {
  const float g = decayed_grad(grad, param, s);
  param *= s.param_factor;
  square_avg = Rule::square_avg(g, square_avg, s);
  const float avg = Rule::avg(square_avg, s);
  if constexpr (kMomentum) {
    *buffer = *buffer * s.momentum + s.grad_scale * g / avg;
  } else {
    param = param + s.neg_lr * g / avg;
  }
}

template <class Rule, bool kMomentum>
TIMM_AVX2_CLONES void rmsprop_one_pass(float* __restrict param, const float* __restrict grad,
                                       float* __restrict square_avg, float* __restrict buffer, int64_t n,
                                       const OnePassScalars s) {
  for (int64_t i = 0; i < n; ++i) {
    float p = param[i];
    float v = square_avg[i];
    float b = kMomentum ? buffer[i] : 0.0f;
    moments<Rule, kMomentum>(grad[i], p, v, &b, s);
    if constexpr (kMomentum) {
      p = p + s.buffer_step * b;
      buffer[i] = b;
    }
    param[i] = p;
    square_avg[i] = v;
  }
}

// Caution's first pass (RMSpropTF with momentum): the square_avg and buffer,
// and how many new buffer values agree in sign with their gradient.
template <class Rule>
TIMM_AVX2_CLONES int64_t rmsprop_moments(const float* __restrict param, const float* __restrict grad,
                                         float* __restrict square_avg, float* __restrict buffer, int64_t n,
                                         const OnePassScalars s) {
  int64_t agreeing = 0;
  for (int64_t i = 0; i < n; ++i) {
    float p = param[i];
    float v = square_avg[i];
    float b = buffer[i];
    moments<Rule, true>(grad[i], p, v, &b, s);
    square_avg[i] = v;
    buffer[i] = b;
    agreeing += b * decayed_grad(grad[i], param[i], s) > 0;
  }
  return agreeing;
}

// Caution's second pass: the step along the buffer where it agrees with the
// gradient, times `mask_value`, 0 elsewhere.
template <class Rule>
TIMM_AVX2_CLONES void rmsprop_cautious_step(float* __restrict param, const float* __restrict grad,
                                            const float* __restrict buffer, int64_t n, float mask_value,
                                            const OnePassScalars s) {
  for (int64_t i = 0; i < n; ++i) {
    const float b = buffer[i];
    const float masked = b * (b * decayed_grad(grad[i], param[i], s) > 0 ? mask_value : 0.0f);
    param[i] = param[i] * s.param_factor + s.buffer_step * masked;
  }
}

// The loops over one contiguous float32 parameter (`buffer` undefined
// without momentum), in ranges across the intra-op threads.
template <class Rule>
void update_in_passes(const at::Tensor& param, const at::Tensor& grad, const at::Tensor& square_avg,
                      const at::Tensor& buffer, bool caution, const OnePassScalars& s) {
  float* p = param.data_ptr<float>();
  const float* g = grad.data_ptr<float>();
  float* v = square_avg.data_ptr<float>();
  float* b = buffer.defined() ? buffer.data_ptr<float>() : nullptr;
  if (caution && b) {
    cautious_two_passes(
        param.numel(),
        [&](int64_t begin, int64_t end) {
          return rmsprop_moments<Rule>(p + begin, g + begin, v + begin, b + begin, end - begin, s);
        },
        [&](int64_t begin, int64_t end, float mask_value) {
          rmsprop_cautious_step<Rule>(p + begin, g + begin, b + begin, end - begin, mask_value, s);
        });
  } else {
    at::parallel_for(0, param.numel(), at::internal::GRAIN_SIZE, [&](int64_t begin, int64_t end) {
      if (b) {
        rmsprop_one_pass<Rule, true>(p + begin, g + begin, v + begin, b + begin, end - begin, s);
      } else {
        rmsprop_one_pass<Rule, false>(p + begin, g + begin, v + begin, nullptr, end - begin, s);
      }
    });
  }
  bump_versions({param, square_avg});
  if (b) bump_versions({buffer});
}

// One group's lists through the loops, if they take them (float32,
// contiguous, on the CPU; not centered); returns whether they did.
template <class Rule>
bool try_one_pass(const Tensors& params, const Tensors& grads, const Tensors& square_avgs, const Tensors& buffers,
                  const RmspropSettings& settings, const OnePassScalars& s) {
  if (!settings.one_pass || settings.centered || !fused_cpu_kernels_apply({params, grads, square_avgs, buffers})) {
    return false;
  }
  for (std::size_t i = 0; i < params.size(); ++i) {
    update_in_passes<Rule>(params[i], grads[i], square_avgs[i], buffers.empty() ? at::Tensor() : buffers[i],
                           settings.caution, s);
  }
  return true;
}

void check_common(const OptimizerArgs& args, const RmspropSettings& s) {
  const std::string opt = timm::in_quotes(args.opt);
  check_lr(args);
  if (s.eps < 0) throw UsageError("optimizer " + opt + ": invalid epsilon value " + python_float_repr(s.eps));
  if (s.momentum < 0) throw UsageError("optimizer " + opt + ": invalid --momentum " + python_float_repr(s.momentum));
  if (args.weight_decay < 0) {
    throw UsageError("optimizer " + opt + ": invalid --weight-decay " + python_float_repr(args.weight_decay));
  }
  if (s.alpha < 0) throw UsageError("optimizer " + opt + ": invalid alpha value " + python_float_repr(s.alpha));
}

// The state of a parameter's first step.
void init_state(ForeachOptimizer::State& state, const at::Tensor& param, const RmspropSettings& s,
                bool square_avg_ones) {
  if (!state.empty()) return;
  state["step"] = at::zeros({}, at::kFloat);
  state["square_avg"] = square_avg_ones ? at::ones_like(param) : at::zeros_like(param);
  if (s.momentum > 0) state["momentum_buffer"] = at::zeros_like(param);
  if (s.centered) state["grad_avg"] = at::zeros_like(param);
}

// torch.optim.RMSprop's _single_tensor_rmsprop, with foreach ops.
class RMSprop : public ForeachOptimizer {
 public:
  RMSprop(std::vector<ParamGroup> groups, double lr, std::string description, RmspropSettings settings)
      : ForeachOptimizer(std::move(groups), lr, std::move(description)), s_(settings) {}

 private:
  bool updates_parameters_independently() const override { return true; }
  void step_group(GroupStep& group) override {
    for (std::size_t i = 0; i < group.params.size(); ++i) init_state(*group.states[i], group.params[i], s_, false);
    update(group);
  }

  void update(const GroupStep& a) {
    at::_foreach_add_(state_list(a, "step"), 1);
    const Tensors buffers = s_.momentum > 0 ? state_list(a, "momentum_buffer") : Tensors{};
    if (try_one_pass<TorchRule>(a.params, a.grads, state_list(a, "square_avg"), buffers, s_, scalars(a))) return;
    Tensors grads = s_.maximize ? at::_foreach_neg(a.grads) : a.grads;
    if (a.weight_decay != 0) grads = at::_foreach_add(grads, a.params, a.weight_decay);
    const Tensors square_avgs = state_list(a, "square_avg");
    at::_foreach_mul_(square_avgs, s_.alpha);
    at::_foreach_addcmul_(square_avgs, grads, grads, 1 - s_.alpha);
    Tensors avg;
    if (s_.centered) {
      const Tensors grad_avgs = state_list(a, "grad_avg");
      at::_foreach_lerp_(grad_avgs, grads, 1 - s_.alpha);
      avg = at::_foreach_addcmul(square_avgs, grad_avgs, grad_avgs, -1);
      at::_foreach_sqrt_(avg);
    } else {
      avg = at::_foreach_sqrt(square_avgs);
    }
    at::_foreach_add_(avg, s_.eps);
    if (s_.momentum > 0) {
      const Tensors bufs = state_list(a, "momentum_buffer");
      at::_foreach_mul_(bufs, s_.momentum);
      at::_foreach_addcdiv_(bufs, grads, avg);
      at::_foreach_add_(a.params, bufs, -a.lr);
    } else {
      at::_foreach_addcdiv_(a.params, grads, avg, -a.lr);
    }
  }

  OnePassScalars scalars(const GroupStep& a) const {
    const auto f = [](double x) { return static_cast<float>(x); };
    return {s_.maximize ? -1.0f : 1.0f,
            f(a.weight_decay),
            1.0f,
            f(s_.alpha),
            f(1 - s_.alpha),
            f(s_.eps),
            f(s_.momentum),
            1.0f,
            f(-a.lr),
            f(-a.lr)};
  }

  RmspropSettings s_;
};

// timm's RMSpropTF (_single_tensor_rmsprop_tf), with foreach ops.
class RMSpropTF : public ForeachOptimizer {
 public:
  RMSpropTF(std::vector<ParamGroup> groups, double lr, std::string description, RmspropSettings settings)
      : ForeachOptimizer(std::move(groups), lr, std::move(description)), s_(settings) {}

 private:
  bool updates_parameters_independently() const override { return true; }
  void step_group(GroupStep& group) override {
    for (std::size_t i = 0; i < group.params.size(); ++i) init_state(*group.states[i], group.params[i], s_, true);
    update(group);
  }

  void update(const GroupStep& a) {
    at::_foreach_add_(state_list(a, "step"), 1);
    const Tensors buffers = s_.momentum > 0 ? state_list(a, "momentum_buffer") : Tensors{};
    if (try_one_pass<TfRule>(a.params, a.grads, state_list(a, "square_avg"), buffers, s_, scalars(a))) return;
    const double lr = a.lr;
    Tensors grads = a.grads;
    if (a.weight_decay != 0) {
      if (s_.decoupled_decay) {
        const double wd_scale = s_.decay_lr(lr);
        at::_foreach_mul_(a.params, 1. - wd_scale * a.weight_decay);
      } else {
        grads = at::_foreach_add(grads, a.params, a.weight_decay);
      }
    }
    const double one_minus_alpha = 1. - s_.alpha;
    const Tensors square_avgs = state_list(a, "square_avg");
    Tensors delta = at::_foreach_mul(grads, grads);
    at::_foreach_sub_(delta, square_avgs);
    at::_foreach_add_(square_avgs, delta, one_minus_alpha);
    Tensors avg;
    if (s_.centered) {
      const Tensors grad_avgs = state_list(a, "grad_avg");
      const Tensors grad_delta = at::_foreach_sub(grads, grad_avgs);
      at::_foreach_add_(grad_avgs, grad_delta, one_minus_alpha);
      avg = at::_foreach_addcmul(square_avgs, grad_avgs, grad_avgs, -1);
      at::_foreach_add_(avg, s_.eps);
    } else {
      avg = at::_foreach_add(square_avgs, s_.eps);
    }
    at::_foreach_sqrt_(avg);  // eps inside the square root
    if (s_.momentum > 0) {
      const Tensors bufs = state_list(a, "momentum_buffer");
      at::_foreach_mul_(bufs, s_.momentum);
      if (s_.lr_in_momentum) {
        at::_foreach_addcdiv_(bufs, grads, avg, lr);
        at::_foreach_sub_(a.params, s_.caution ? cautioned(bufs, grads) : bufs);
      } else {
        at::_foreach_addcdiv_(bufs, grads, avg);
        at::_foreach_add_(a.params, s_.caution ? cautioned(bufs, grads) : bufs, -lr);
      }
    } else {
      at::_foreach_addcdiv_(a.params, grads, avg, -lr);
    }
  }

  OnePassScalars scalars(const GroupStep& a) const {
    const auto f = [](double x) { return static_cast<float>(x); };
    OnePassScalars s{1.0f,      0.0f,           1.0f, f(s_.alpha), f(1. - s_.alpha),
                     f(s_.eps), f(s_.momentum), 1.0f, f(-a.lr),    f(-a.lr)};
    if (a.weight_decay != 0 && s_.decoupled_decay) {
      const double wd_scale = s_.decay_lr(a.lr);
      s.param_factor = f(1. - wd_scale * a.weight_decay);
    } else if (a.weight_decay != 0) {
      s.grad_decay = f(a.weight_decay);
    }
    if (s_.lr_in_momentum) {
      s.grad_scale = f(a.lr);
      s.buffer_step = -1.0f;
    }
    return s;
  }

  RmspropSettings s_;
};

OptimizerPtr make_rmsprop(std::vector<ParamGroup> groups, const OptimizerArgs& args) {
  const OptimizerKwargs kwargs(
      args, {"alpha", "eps", "centered", "capturable", "foreach", "maximize", "differentiable", "betas"});
  RmspropSettings s;
  s.alpha = kwargs.get_double("alpha", 0.9);
  s.eps = args.eps ? *args.eps : kwargs.get_double("eps", 1e-8);
  s.momentum = args.momentum;
  s.centered = kwargs.get_bool("centered", false);
  s.maximize = kwargs.get_bool("maximize", false);
  s.one_pass = one_pass_requested(kwargs);
  check_common(args, s);
  if (kwargs.get_bool("capturable", false) || kwargs.get_bool("differentiable", false)) {
    throw UsageError("optimizer " + timm::in_quotes(args.opt) + ": capturable and differentiable are not supported");
  }
  const std::string description =
      describe_optimizer("RMSprop", args.opt,
                         {{"lr", python_float_repr(args.lr)},
                          {"momentum", python_float_repr(s.momentum)},
                          {"alpha", kwargs.repr("alpha", "0.9")},
                          {"eps", args.eps ? python_float_repr(*args.eps) : kwargs.repr("eps", "1e-08")},
                          {"centered", kwargs.repr("centered", "False")},
                          {"weight_decay", python_float_repr(args.weight_decay)},
                          {"capturable", kwargs.repr("capturable", "False")},
                          {"foreach", kwargs.repr("foreach", "None")},
                          {"maximize", kwargs.repr("maximize", "False")},
                          {"differentiable", kwargs.repr("differentiable", "False")}});
  return std::make_unique<RMSprop>(std::move(groups), args.lr, description, s);
}

OptimizerPtr make_rmsproptf(std::vector<ParamGroup> groups, const OptimizerArgs& args, bool decoupled_default) {
  const OptimizerKwargs kwargs(args, {"alpha", "eps", "centered", "decoupled_decay", "corrected_weight_decay",
                                      "lr_in_momentum", "caution", "foreach", "betas"});
  RmspropSettings s;
  s.alpha = kwargs.get_double("alpha", 0.9);
  s.eps = args.eps ? *args.eps : kwargs.get_double("eps", 1e-10);
  s.momentum = args.momentum;
  s.centered = kwargs.get_bool("centered", false);
  s.decoupled_decay = kwargs.get_bool("decoupled_decay", decoupled_default);
  s.decay_lr = DecayLr(args, kwargs);
  s.lr_in_momentum = kwargs.get_bool("lr_in_momentum", true);
  s.caution = kwargs.get_bool("caution", false);
  s.one_pass = one_pass_requested(kwargs);
  check_common(args, s);
  const std::string description =
      describe_optimizer("RMSpropTF", args.opt,
                         {{"lr", python_float_repr(args.lr)},
                          {"momentum", python_float_repr(s.momentum)},
                          {"alpha", kwargs.repr("alpha", "0.9")},
                          {"eps", args.eps ? python_float_repr(*args.eps) : kwargs.repr("eps", "1e-10")},
                          {"centered", kwargs.repr("centered", "False")},
                          {"weight_decay", python_float_repr(args.weight_decay)},
                          {"decoupled_decay", kwargs.repr("decoupled_decay", py_bool(decoupled_default))},
                          {"corrected_weight_decay", kwargs.repr("corrected_weight_decay", "False")},
                          {"max_lr_snapshot", python_float_repr(args.lr)},
                          {"lr_in_momentum", kwargs.repr("lr_in_momentum", "True")},
                          {"caution", kwargs.repr("caution", "False")},
                          {"foreach", kwargs.repr("foreach", "None")}});
  return std::make_unique<RMSpropTF>(std::move(groups), args.lr, description, s);
}

}  // namespace
}  // namespace timm

TIMM_PLUGIN("rmsprop") {
  using timm::bind_defaults;
  using timm::OptimizerArgs;
  using timm::ParamGroup;
  auto rmsproptf = [](bool decoupled) -> timm::OptimizerFactory {
    return [decoupled](std::vector<ParamGroup> groups, const OptimizerArgs& args) {
      return timm::make_rmsproptf(std::move(groups), args, decoupled);
    };
  };
  registrar.add_optimizer("rmsprop", "torch.optim.RMSprop, Root Mean Square Propagation", timm::make_rmsprop);
  registrar.add_optimizer("rmsproptf", "TensorFlow-style RMSprop implementation, Root Mean Square Propagation",
                          rmsproptf(false));
  registrar.add_optimizer("rmsproptfw", "TensorFlow-style RMSprop with decoupled weight decay", rmsproptf(true));
  // timm binds these through OptimInfo.defaults (RMSpropTF's keyword arguments).
  registrar.add_optimizer(
      "rmsproptfc", "RMSprop TF-style with corrected decoupled weight decay (lr²/max_lr scaling)",
      bind_defaults(rmsproptf(false),
                    {{"alpha", "0.9"}, {"decoupled_decay", "True"}, {"corrected_weight_decay", "True"}}));
  registrar.add_optimizer("crmsproptf", "Cautious TensorFlow-style RMSprop",
                          bind_defaults(rmsproptf(false), {{"alpha", "0.9"}, {"caution", "True"}}));
}
