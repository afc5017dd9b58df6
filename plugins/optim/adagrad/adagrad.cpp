// torch.optim.Adagrad, Adadelta and Adamax as timm's registry binds them
// ("adagrad" with eps 1e-8, "adadelta", "adamax"): torch's single-tensor
// update (the path Python runs on CPU) with its operations in its order,
// over lists, and per-parameter float32 step counts as torch keeps them.
// L2 weight decay (grad + wd * p) as torch's weight_decay. On the CPU,
// Adagrad runs torch's fused kernel, Adadelta and Adamax loops of timm-cpp's
// own, one pass per parameter (foreach=False: the ops).
#include <ATen/Parallel.h>

#include <cmath>

#include "timm/base/error.hpp"
#include "timm/base/simd.hpp"
#include "timm/optim/elementwise.hpp"
#include "timm/optim/foreach_optimizer.hpp"
#include "timm/plugin/plugin.hpp"

namespace timm {
namespace {

using Tensors = std::vector<at::Tensor>;

// torch's coupled weight decay: grad + weight_decay * param, new tensors.
Tensors with_l2_decay(const Tensors& params, const Tensors& grads, double weight_decay) {
  return weight_decay == 0 ? grads : at::_foreach_add(grads, params, weight_decay);
}

// ---- One-pass loops -----------------------------------------------------------
//
// Adadelta's and Adamax's updates one element after another, each value read
// and written once where their eight to eleven ops read or write about 25
// values per element; within float32 rounding of the ops (ATen's formulas
// per element: addcmul self + v * t1 * t2, addcdiv self + v * t1 / t2). They
// vectorise (the plugin builds with -fno-math-errno for sqrt), with an AVX2
// clone where the CPU has it.

// torch's coupled weight decay of one element, computed then selected (a
// branch with float arithmetic in it would keep the loops from vectorising).
inline float l2_decayed(float grad, float param, float weight_decay) {
  const float decayed = grad + weight_decay * param;
  return weight_decay != 0 ? decayed : grad;
}

struct AdadeltaScalars {
  float weight_decay;
  float rho;
  float one_minus_rho;
  float eps;
  float neg_lr;
};

TIMM_AVX2_CLONES
void adadelta_one_pass(float* __restrict param, const float* __restrict grad, float* __restrict square_avg,
                       float* __restrict acc_delta, int64_t n, const AdadeltaScalars s) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = l2_decayed(grad[i], param[i], s.weight_decay);
    const float v = square_avg[i] * s.rho + s.one_minus_rho * g * g;
    const float root = std::sqrt(v + s.eps);
    const float delta = std::sqrt(acc_delta[i] + s.eps) / root * g;
    square_avg[i] = v;
    acc_delta[i] = acc_delta[i] * s.rho + s.one_minus_rho * delta * delta;
    param[i] = param[i] + s.neg_lr * delta;
  }
}

struct AdamaxScalars {
  float weight_decay;
  float lerp_weight;  // 1 - beta1
  float beta2;
  float eps;
  float neg_clr;  // -lr / (1 - beta1^step)
};

// torch.maximum of one element: NaN if either is.
inline float aten_maximum(float a, float b) {
  const float larger = a > b ? a : b;
  return a != a ? a : (b != b ? b : larger);
}

TIMM_AVX2_CLONES
void adamax_one_pass(float* __restrict param, const float* __restrict grad, float* __restrict exp_avg,
                     float* __restrict exp_inf, int64_t n, const AdamaxScalars s) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = l2_decayed(grad[i], param[i], s.weight_decay);
    const float m = aten_lerp(exp_avg[i], g, s.lerp_weight);
    const float u = aten_maximum(exp_inf[i] * s.beta2, std::abs(g) + s.eps);
    exp_avg[i] = m;
    exp_inf[i] = u;
    param[i] = param[i] + s.neg_clr * m / u;
  }
}

// ---- Adagrad ----------------------------------------------------------------

struct AdagradConfig {
  double lr_decay = 0.0;
  double initial_accumulator_value = 0.0;
  double eps = 1e-8;
  bool fused = true;  // --opt-kwargs fused not False
};

class Adagrad : public ForeachOptimizer {
 public:
  Adagrad(std::vector<ParamGroup> groups, double lr, std::string description, AdagradConfig config)
      : ForeachOptimizer(std::move(groups), lr, std::move(description)), c_(config) {}

 private:
  bool updates_parameters_independently() const override { return true; }
  void step_group(GroupStep& g) override {
    for (std::size_t i = 0; i < g.params.size(); ++i) {
      if (!g.states[i]->empty()) continue;
      (*g.states[i])["sum"] = at::full_like(g.params[i], c_.initial_accumulator_value, at::MemoryFormat::Preserve);
    }
    const std::vector<double> steps = increment_steps(g);
    const Tensors sums = state_list(g, "sum");
    const Tensors steps_list = state_list(g, "step");
    if (c_.fused && fused_cpu_kernels_apply({g.params, g.grads, sums, steps_list})) {
      // torch's fused=True: one pass per parameter, within a few float32
      // ulps of the per-tensor ops below (2.4e-7 after 10 steps).
      at::_fused_adagrad_(g.params, g.grads, sums, steps_list, g.lr, c_.lr_decay, g.weight_decay, c_.eps,
                          /*maximize=*/false);
      return;
    }
    const Tensors grads = with_l2_decay(g.params, g.grads, g.weight_decay);
    std::vector<double> neg_clrs;
    for (double step : steps) neg_clrs.push_back(-(g.lr / (1 + (step - 1) * c_.lr_decay)));
    at::_foreach_addcmul_(sums, grads, grads, 1);
    Tensors std = at::_foreach_sqrt(sums);
    at::_foreach_add_(std, c_.eps);
    at::_foreach_addcdiv_(g.params, grads, std, to_scalars(neg_clrs));
  }

  AdagradConfig c_;
};

// ---- Adadelta ---------------------------------------------------------------

struct AdadeltaConfig {
  double rho = 0.9;
  double eps = 1e-6;
  bool one_pass = true;  // --opt-kwargs foreach=False: the ops one by one
};

class Adadelta : public ForeachOptimizer {
 public:
  Adadelta(std::vector<ParamGroup> groups, double lr, std::string description, AdadeltaConfig config)
      : ForeachOptimizer(std::move(groups), lr, std::move(description)), c_(config) {}

 private:
  bool updates_parameters_independently() const override { return true; }
  void step_group(GroupStep& g) override {
    init_zero_states(g, {"square_avg", "acc_delta"});
    increment_steps(g);
    const Tensors square_avgs = state_list(g, "square_avg");
    const Tensors acc_deltas = state_list(g, "acc_delta");
    if (c_.one_pass && fused_cpu_kernels_apply({g.params, g.grads, square_avgs, acc_deltas})) {
      const auto f = [](double x) { return static_cast<float>(x); };
      const AdadeltaScalars s{f(g.weight_decay), f(c_.rho), f(1 - c_.rho), f(c_.eps), f(-g.lr)};
      for (std::size_t i = 0; i < g.params.size(); ++i) {
        run_one_pass_loop(g.params[i], g.grads[i], square_avgs[i], acc_deltas[i], adadelta_one_pass, s);
      }
      return;
    }
    const Tensors grads = with_l2_decay(g.params, g.grads, g.weight_decay);
    at::_foreach_mul_(square_avgs, c_.rho);
    at::_foreach_addcmul_(square_avgs, grads, grads, 1 - c_.rho);
    Tensors std = at::_foreach_add(square_avgs, c_.eps);
    at::_foreach_sqrt_(std);
    Tensors delta = at::_foreach_add(acc_deltas, c_.eps);
    at::_foreach_sqrt_(delta);
    at::_foreach_div_(delta, std);
    at::_foreach_mul_(delta, grads);
    at::_foreach_mul_(acc_deltas, c_.rho);
    at::_foreach_addcmul_(acc_deltas, delta, delta, 1 - c_.rho);
    at::_foreach_add_(g.params, delta, -g.lr);
  }

  AdadeltaConfig c_;
};

// ---- Adamax -----------------------------------------------------------------

struct AdamaxConfig {
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  bool one_pass = true;  // --opt-kwargs foreach=False: the ops one by one
};

class Adamax : public ForeachOptimizer {
 public:
  Adamax(std::vector<ParamGroup> groups, double lr, std::string description, AdamaxConfig config)
      : ForeachOptimizer(std::move(groups), lr, std::move(description)), c_(config) {}

 private:
  bool updates_parameters_independently() const override { return true; }
  void step_group(GroupStep& g) override {
    init_zero_states(g, {"exp_avg", "exp_inf"});
    const std::vector<double> steps = increment_steps(g);
    const Tensors exp_avgs = state_list(g, "exp_avg");
    const Tensors exp_infs = state_list(g, "exp_inf");
    if (c_.one_pass && fused_cpu_kernels_apply({g.params, g.grads, exp_avgs, exp_infs})) {
      const auto f = [](double x) { return static_cast<float>(x); };
      for (std::size_t i = 0; i < g.params.size(); ++i) {
        const AdamaxScalars s{f(g.weight_decay), f(1 - c_.beta1), f(c_.beta2), f(c_.eps),
                              f(-(g.lr / (1 - std::pow(c_.beta1, steps[i]))))};
        run_one_pass_loop(g.params[i], g.grads[i], exp_avgs[i], exp_infs[i], adamax_one_pass, s);
      }
      return;
    }
    const Tensors grads = with_l2_decay(g.params, g.grads, g.weight_decay);
    at::_foreach_lerp_(exp_avgs, grads, 1 - c_.beta1);
    // torch.maximum(exp_inf.mul_(beta2), grad.abs().add_(eps), out=exp_inf)
    at::_foreach_mul_(exp_infs, c_.beta2);
    Tensors abs_grads = at::_foreach_abs(grads);
    at::_foreach_add_(abs_grads, c_.eps);
    at::_foreach_maximum_(exp_infs, abs_grads);
    std::vector<double> neg_clrs;
    for (double step : steps) neg_clrs.push_back(-(g.lr / (1 - std::pow(c_.beta1, step))));
    at::_foreach_addcdiv_(g.params, exp_avgs, exp_infs, to_scalars(neg_clrs));
  }

  AdamaxConfig c_;
};

// ---- Factories --------------------------------------------------------------

void check_non_negative(const OptimizerArgs& args, const std::string& what, double value) {
  if (value < 0) {
    throw UsageError("optimizer " + in_quotes(args.opt) + ": invalid " + what + " value " + python_float_repr(value) +
                     " (expected >= 0)");
  }
}

OptimizerPtr make_adagrad(std::vector<ParamGroup> groups, const OptimizerArgs& args) {
  // timm has no betas for it (has_betas False): accepted and dropped.
  const OptimizerKwargs kwargs(args, {"lr_decay", "initial_accumulator_value", "eps", "foreach", "maximize",
                                      "differentiable", "fused", "betas"});
  check_lr(args);
  // torch's implementation choices, accepted at their defaults.
  reject_true_kwargs(args, kwargs, {"maximize", "capturable", "differentiable"});
  AdagradConfig c;
  c.fused = fused_requested(kwargs);
  c.lr_decay = kwargs.get_double("lr_decay", 0.0);
  c.initial_accumulator_value = kwargs.get_double("initial_accumulator_value", 0.0);
  const EpsArg eps = resolve_eps(args, kwargs, 1e-8);  // timm's OptimInfo default; torch's is 1e-10
  c.eps = eps.value;
  check_non_negative(args, "lr_decay", c.lr_decay);
  check_non_negative(args, "initial_accumulator_value", c.initial_accumulator_value);
  const std::string description =
      describe_optimizer("Adagrad", args.opt,
                         {{"lr", python_float_repr(args.lr)},
                          {"lr_decay", kwargs.repr("lr_decay", "0")},
                          {"eps", eps.repr},
                          {"weight_decay", python_float_repr(args.weight_decay)},
                          {"initial_accumulator_value", kwargs.repr("initial_accumulator_value", "0")},
                          {"foreach", kwargs.repr("foreach", "None")},
                          {"maximize", "False"},
                          {"differentiable", "False"},
                          {"fused", kwargs.repr("fused", "None")}});
  return std::make_unique<Adagrad>(std::move(groups), args.lr, description, c);
}

OptimizerPtr make_adadelta(std::vector<ParamGroup> groups, const OptimizerArgs& args) {
  const OptimizerKwargs kwargs(args, {"rho", "eps", "foreach", "maximize", "capturable", "differentiable", "betas"});
  check_lr(args);
  // torch's implementation choices, accepted at their defaults.
  reject_true_kwargs(args, kwargs, {"maximize", "capturable", "differentiable", "fused"});
  AdadeltaConfig c;
  c.rho = kwargs.get_double("rho", 0.9);
  const EpsArg eps = resolve_eps(args, kwargs, 1e-6);
  c.eps = eps.value;
  c.one_pass = one_pass_requested(kwargs);
  if (c.rho < 0 || c.rho > 1) {
    throw UsageError("optimizer " + in_quotes(args.opt) + ": invalid rho value " + python_float_repr(c.rho) +
                     " (expected in [0, 1])");
  }
  const std::string description = describe_optimizer("Adadelta", args.opt,
                                                     {{"lr", python_float_repr(args.lr)},
                                                      {"rho", kwargs.repr("rho", "0.9")},
                                                      {"eps", eps.repr},
                                                      {"weight_decay", python_float_repr(args.weight_decay)},
                                                      {"maximize", "False"},
                                                      {"capturable", "False"},
                                                      {"foreach", kwargs.repr("foreach", "None")},
                                                      {"differentiable", "False"}});
  return std::make_unique<Adadelta>(std::move(groups), args.lr, description, c);
}

OptimizerPtr make_adamax(std::vector<ParamGroup> groups, const OptimizerArgs& args) {
  const OptimizerKwargs kwargs(args, {"betas", "eps", "foreach", "maximize", "differentiable", "capturable"});
  check_lr(args);
  // torch's implementation choices, accepted at their defaults.
  reject_true_kwargs(args, kwargs, {"maximize", "capturable", "differentiable", "fused"});
  const std::vector<double> betas = resolve_betas(args, kwargs, {0.9, 0.999});
  const EpsArg eps = resolve_eps(args, kwargs, 1e-8);
  AdamaxConfig c;
  c.beta1 = betas[0];
  c.beta2 = betas[1];
  c.eps = eps.value;
  c.one_pass = one_pass_requested(kwargs);
  const std::string description = describe_optimizer("Adamax", args.opt,
                                                     {{"lr", python_float_repr(args.lr)},
                                                      {"betas", betas_repr(args, betas, /*always_tuple=*/false)},
                                                      {"eps", eps.repr},
                                                      {"weight_decay", python_float_repr(args.weight_decay)},
                                                      {"foreach", kwargs.repr("foreach", "None")},
                                                      {"maximize", "False"},
                                                      {"differentiable", "False"},
                                                      {"capturable", "False"}});
  return std::make_unique<Adamax>(std::move(groups), args.lr, description, c);
}

}  // namespace
}  // namespace timm

TIMM_PLUGIN("adagrad") {
  // train.py scales --lr-base by the square root of the batch ratio for
  // timm's adaptive optimizers ("ada" in the name).
  const timm::OptimizerTraits sqrt_lr{.lr_base_scale = timm::LrBaseScale::kSqrt};
  registrar.add_optimizer("adagrad", "torch.optim.Adagrad, Adapts learning rates using cumulative squared gradients",
                          timm::make_adagrad, sqrt_lr);
  registrar.add_optimizer("adadelta",
                          "torch.optim.Adadelta, Adapts learning rates based on running windows of gradients",
                          timm::make_adadelta, sqrt_lr);
  registrar.add_optimizer("adamax", "torch.optim.Adamax, Adam with infinity norm for more stable updates",
                          timm::make_adamax, sqrt_lr);
}
