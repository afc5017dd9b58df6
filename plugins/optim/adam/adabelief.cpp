// timm.optim.AdaBelief ("adabelief": rectify False; "radabelief": True):
// Adam whose second moment tracks the variance of the gradient around its
// mean, eps added into that state every step (as timm does), with the
// RAdam-style rectification when `rectify`. On the CPU in one pass per
// parameter (without amsgrad) instead of timm's eight ops; foreach=False runs
// the ops.
#include <ATen/Parallel.h>

#include <cmath>

#include "adam_family.hpp"
#include "timm/base/error.hpp"
#include "timm/base/simd.hpp"
#include "timm/optim/elementwise.hpp"
#include "timm/optim/foreach_optimizer.hpp"

namespace timm::adam {
namespace {

using Tensors = std::vector<at::Tensor>;

struct AdaBeliefConfig {
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-16;
  bool amsgrad = false;
  bool decoupled_decay = true;
  bool fixed_decay = false;
  bool rectify = true;
  bool degenerated_to_sgd = true;
  bool one_pass = true;  // --opt-kwargs foreach=False: timm's ops one by one
};

// The float32 scalars of one parameter's update, as the ops cast them.
struct AdaBeliefScalars {
  float grad_decay;    // coupled weight decay, added to the gradient; 0 otherwise
  float param_factor;  // decoupled: 1 - decay; 1 otherwise
  float lerp_weight;   // 1 - beta1
  float beta2;
  float one_minus_beta2;
  float eps;
  bool adaptive;                // the step divides by the denominator
  float bias_correction2_sqrt;  // the denominator's divisor; 1 when rectified
  float step;                   // times exp_avg (over the denominator when adaptive); 0: no step
};

// The loop below makes timm's update one element after another, each value
// read and written once where the eight ops read or write about 20 values
// per element. It vectorises (the plugin builds with -fno-math-errno for
// sqrt), with an AVX2 clone where the CPU has it.
TIMM_AVX2_CLONES
void adabelief_one_pass(float* __restrict param, const float* __restrict grad, float* __restrict exp_avg,
                        float* __restrict exp_avg_var, int64_t n, const AdaBeliefScalars s) {
  for (int64_t i = 0; i < n; ++i) {
    // The ops in timm's order: decay, both moments, eps into the variance,
    // the step (addcdiv: p + step * m / denom; add: p + step * m).
    // Each arm computed, then selected: a branch with float arithmetic in it
    // would keep the loop from vectorising.
    const float coupled = grad[i] + s.grad_decay * param[i];
    const float g = s.grad_decay != 0 ? coupled : grad[i];
    const float p = param[i] * s.param_factor;
    const float m = aten_lerp(exp_avg[i], g, s.lerp_weight);
    const float residual = g - m;
    const float v = (exp_avg_var[i] * s.beta2 + s.one_minus_beta2 * residual * residual) + s.eps;
    const float denom = std::sqrt(v) / s.bias_correction2_sqrt + s.eps;
    exp_avg[i] = m;
    exp_avg_var[i] = v;
    const float adaptive = p + s.step * m / denom;
    const float sgd = p + s.step * m;
    param[i] = s.adaptive ? adaptive : sgd;
  }
}

class AdaBelief : public ForeachOptimizer {
 public:
  AdaBelief(std::vector<ParamGroup> groups, double lr, std::string description, AdaBeliefConfig config)
      : ForeachOptimizer(std::move(groups), lr, std::move(description)), c_(config) {}

 private:
  bool updates_parameters_independently() const override { return true; }
  void step_group(GroupStep& g) override {
    for (std::size_t i = 0; i < g.params.size(); ++i) {
      if (!g.states[i]->empty()) continue;
      for (const char* key : {"exp_avg", "exp_avg_var"}) (*g.states[i])[key] = at::zeros_like(g.params[i]);
      if (c_.amsgrad) (*g.states[i])["max_exp_avg_var"] = at::zeros_like(g.params[i]);
    }
    // timm counts steps in a Python int.
    const std::vector<double> steps = increment_steps(g, at::kDouble);
    const Tensors exp_avgs = state_list(g, "exp_avg");
    const Tensors exp_avg_vars = state_list(g, "exp_avg_var");
    if (c_.one_pass && !c_.amsgrad && fused_cpu_kernels_apply({g.params, g.grads, exp_avgs, exp_avg_vars})) {
      for (std::size_t i = 0; i < g.params.size(); ++i) {
        run_one_pass_loop(g.params[i], g.grads[i], exp_avgs[i], exp_avg_vars[i], adabelief_one_pass,
                          scalars(g, steps[i]));
      }
      return;
    }

    Tensors grads = g.grads;
    if (c_.decoupled_decay) {
      const double decay = c_.fixed_decay ? g.weight_decay : g.lr * g.weight_decay;
      if (decay != 0) at::_foreach_mul_(g.params, 1.0 - decay);
    } else if (g.weight_decay != 0) {
      grads = at::_foreach_add(grads, g.params, g.weight_decay);
    }
    at::_foreach_lerp_(exp_avgs, grads, 1 - c_.beta1);
    const Tensors residuals = at::_foreach_sub(grads, exp_avgs);
    at::_foreach_mul_(exp_avg_vars, c_.beta2);
    at::_foreach_addcmul_(exp_avg_vars, residuals, residuals, 1 - c_.beta2);
    at::_foreach_add_(exp_avg_vars, c_.eps);
    if (c_.amsgrad) at::_foreach_maximum_(state_list(g, "max_exp_avg_var"), exp_avg_vars);

    if (c_.rectify) {
      rectified_update(g, steps, exp_avgs, exp_avg_vars);
      return;
    }
    std::vector<c10::Scalar> bias_correction2_sqrts;
    std::vector<c10::Scalar> step_sizes;
    for (double step : steps) {
      bias_correction2_sqrts.emplace_back(std::sqrt(1 - std::pow(c_.beta2, step)));
      step_sizes.emplace_back(-g.lr / (1 - std::pow(c_.beta1, step)));
    }
    Tensors denom = at::_foreach_sqrt(c_.amsgrad ? state_list(g, "max_exp_avg_var") : exp_avg_vars);
    at::_foreach_div_(denom, bias_correction2_sqrts);
    at::_foreach_add_(denom, c_.eps);
    at::_foreach_addcdiv_(g.params, exp_avgs, denom, step_sizes);
  }

  // RAdam's rectified step size (lr free) at `step` where the variance is
  // tractable (num_sma >= 5), else none.
  std::optional<double> adaptive_step_size(double step) const {
    const double num_sma_max = 2 / (1 - c_.beta2) - 1;
    const double beta2_t = std::pow(c_.beta2, step);
    const double num_sma = num_sma_max - 2 * step * beta2_t / (1 - beta2_t);
    if (num_sma < 5) return std::nullopt;
    return std::sqrt((1 - beta2_t) * (num_sma - 4) / (num_sma_max - 4) * (num_sma - 2) / num_sma * num_sma_max /
                     (num_sma_max - 2)) /
           (1 - std::pow(c_.beta1, step));
  }

  // RAdam's rule: adaptive where the variance is tractable (num_sma >= 5),
  // else SGD with momentum (degenerated_to_sgd) or no update.
  void rectified_update(const GroupStep& g, const std::vector<double>& steps, const Tensors& exp_avgs,
                        const Tensors& exp_avg_vars) const {
    std::vector<std::size_t> adaptive;
    std::vector<c10::Scalar> adaptive_sizes;
    std::vector<std::size_t> sgd;
    std::vector<c10::Scalar> sgd_sizes;
    for (std::size_t i = 0; i < steps.size(); ++i) {
      if (const std::optional<double> step_size = adaptive_step_size(steps[i])) {
        adaptive.push_back(i);
        adaptive_sizes.emplace_back(-*step_size * g.lr);
      } else if (c_.degenerated_to_sgd) {
        sgd.push_back(i);
        sgd_sizes.emplace_back(-(1.0 / (1 - std::pow(c_.beta1, steps[i]))) * g.lr);
      }
    }
    if (!adaptive.empty()) {
      Tensors denom = at::_foreach_sqrt(select(exp_avg_vars, adaptive));
      at::_foreach_add_(denom, c_.eps);
      at::_foreach_addcdiv_(select(g.params, adaptive), select(exp_avgs, adaptive), denom, adaptive_sizes);
    }
    // The first steps only; per tensor, as timm's single-tensor path (its
    // step sizes differ per parameter).
    for (std::size_t k = 0; k < sgd.size(); ++k) g.params[sgd[k]].add_(exp_avgs[sgd[k]], sgd_sizes[k]);
  }

  // One parameter's scalars at `step`, as the ops path computes them.
  AdaBeliefScalars scalars(const GroupStep& g, double step) const {
    AdaBeliefScalars s{};
    if (c_.decoupled_decay) {
      const double decay = c_.fixed_decay ? g.weight_decay : g.lr * g.weight_decay;
      s.param_factor = static_cast<float>(1.0 - decay);
    } else {
      s.param_factor = 1.0f;
      s.grad_decay = static_cast<float>(g.weight_decay);
    }
    s.lerp_weight = static_cast<float>(1 - c_.beta1);
    s.beta2 = static_cast<float>(c_.beta2);
    s.one_minus_beta2 = static_cast<float>(1 - c_.beta2);
    s.eps = static_cast<float>(c_.eps);
    s.adaptive = true;
    s.bias_correction2_sqrt = 1.0f;
    const double bias_correction1 = 1 - std::pow(c_.beta1, step);
    if (!c_.rectify) {
      s.bias_correction2_sqrt = static_cast<float>(std::sqrt(1 - std::pow(c_.beta2, step)));
      s.step = static_cast<float>(-g.lr / bias_correction1);
      return s;
    }
    const std::optional<double> size = adaptive_step_size(step);
    if (size) {
      s.step = static_cast<float>(-*size * g.lr);
    } else {
      s.adaptive = false;
      s.step = c_.degenerated_to_sgd ? static_cast<float>(-(1.0 / bias_correction1) * g.lr) : 0.0f;
    }
    return s;
  }

  AdaBeliefConfig c_;
};

}  // namespace

OptimizerPtr make_adabelief(std::vector<ParamGroup> groups, const OptimizerArgs& args) {
  const OptimizerKwargs kwargs(
      args, {"betas", "eps", "amsgrad", "decoupled_decay", "fixed_decay", "rectify", "degenerated_to_sgd", "foreach"});
  check_lr(args);
  const std::vector<double> betas = resolve_betas(args, kwargs, {0.9, 0.999});
  const EpsArg eps = resolve_eps(args, kwargs, 1e-16);
  AdaBeliefConfig c;
  c.beta1 = betas[0];
  c.beta2 = betas[1];
  c.eps = eps.value;
  c.amsgrad = kwargs.get_bool("amsgrad", false);
  c.decoupled_decay = kwargs.get_bool("decoupled_decay", true);
  c.fixed_decay = kwargs.get_bool("fixed_decay", false);
  c.rectify = kwargs.get_bool("rectify", true);
  c.degenerated_to_sgd = kwargs.get_bool("degenerated_to_sgd", true);
  c.one_pass = one_pass_requested(kwargs);
  const std::string description = describe_optimizer("AdaBelief", args.opt,
                                                     {{"lr", python_float_repr(args.lr)},
                                                      {"betas", betas_repr(args, betas, /*always_tuple=*/false)},
                                                      {"eps", eps.repr},
                                                      {"weight_decay", python_float_repr(args.weight_decay)},
                                                      {"amsgrad", py_bool(c.amsgrad)},
                                                      {"degenerated_to_sgd", py_bool(c.degenerated_to_sgd)},
                                                      {"decoupled_decay", py_bool(c.decoupled_decay)},
                                                      {"rectify", py_bool(c.rectify)},
                                                      {"fixed_decay", py_bool(c.fixed_decay)},
                                                      {"foreach", kwargs.repr("foreach", "None")}});
  return std::make_unique<AdaBelief>(std::move(groups), args.lr, description, c);
}

}  // namespace timm::adam
