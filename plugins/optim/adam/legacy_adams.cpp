// timm's legacy Adam variants, which pre-date torch.optim's: NAdamLegacy
// ("nadamlegacy": Nesterov momentum with a warming momentum schedule, L2
// decay) and RAdamLegacy ("radamlegacy": rectified Adam, the step unadapted
// while the variance estimate is unreliable, weight decay applied to the
// weights). Both step tensor by tensor with Python floats for the
// schedules, as timm does; the ops are timm's, in its order. Contiguous
// float32 CPU parameters take a loop of timm-cpp's own instead, one pass per
// parameter (neither class takes foreach; the ops run for other tensors).
#include <ATen/Parallel.h>

#include <cmath>

#include "adam_family.hpp"
#include "timm/base/error.hpp"
#include "timm/base/simd.hpp"
#include "timm/optim/foreach_optimizer.hpp"

namespace timm::adam {
namespace {

// ---- One-pass loops -----------------------------------------------------------
//
// The updates one element after another, each value read and written once
// where the per-tensor ops read or write about 20 values per element; within
// float32 rounding of the ops (ATen's formulas per element: add self + alpha
// * other, addcmul self + v * t1 * t2, addcdiv self + v * t1 / t2). Each arm
// of a choice is computed, then selected, so that the loops vectorise (the
// plugin builds with -fno-math-errno for sqrt), with an AVX2 clone where the
// CPU has it.

struct NAdamLegacyScalars {
  float weight_decay;  // L2: grad + wd * param
  float beta1;
  float one_minus_beta1;
  float beta2;
  float one_minus_beta2;
  float bias_correction2_sqrt;
  float eps;
  float grad_coef;     // the addcdiv value of the gradient
  float exp_avg_coef;  // and of exp_avg
};

TIMM_AVX2_CLONES
void nadam_legacy_one_pass(float* __restrict param, const float* __restrict grad, float* __restrict exp_avg,
                           float* __restrict exp_avg_sq, int64_t n, const NAdamLegacyScalars s) {
  for (int64_t i = 0; i < n; ++i) {
    const float decayed = grad[i] + s.weight_decay * param[i];
    const float g = s.weight_decay != 0 ? decayed : grad[i];
    const float m = exp_avg[i] * s.beta1 + s.one_minus_beta1 * g;
    const float v = exp_avg_sq[i] * s.beta2 + s.one_minus_beta2 * g * g;
    const float denom = std::sqrt(v) / s.bias_correction2_sqrt + s.eps;
    const float p = param[i] + s.grad_coef * g / denom;
    param[i] = p + s.exp_avg_coef * m / denom;
    exp_avg[i] = m;
    exp_avg_sq[i] = v;
  }
}

struct RAdamLegacyScalars {
  float beta1;
  float one_minus_beta1;
  float beta2;
  float one_minus_beta2;
  float decay;  // p + decay * p (-wd * lr); 0 without decay
  bool rectified;
  float eps;
  float neg_step_size;
};

TIMM_AVX2_CLONES
void radam_legacy_one_pass(float* __restrict param, const float* __restrict grad, float* __restrict exp_avg,
                           float* __restrict exp_avg_sq, int64_t n, const RAdamLegacyScalars s) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = grad[i];
    const float v = exp_avg_sq[i] * s.beta2 + s.one_minus_beta2 * g * g;
    const float m = exp_avg[i] * s.beta1 + s.one_minus_beta1 * g;
    const float decayed = param[i] + s.decay * param[i];
    const float p = s.decay != 0 ? decayed : param[i];
    const float adaptive = p + s.neg_step_size * m / (std::sqrt(v) + s.eps);
    const float plain = p + s.neg_step_size * m;
    param[i] = s.rectified ? adaptive : plain;
    exp_avg[i] = m;
    exp_avg_sq[i] = v;
  }
}

// Whether the loops take one parameter, its gradient and its moments.
bool loop_applies(const at::Tensor& param, const at::Tensor& grad, const at::Tensor& exp_avg,
                  const at::Tensor& exp_avg_sq) {
  const std::vector<at::Tensor> tensors{param, grad, exp_avg, exp_avg_sq};
  return fused_cpu_kernels_apply({tensors});
}

struct NAdamLegacyConfig {
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double schedule_decay = 4e-3;
};

class NAdamLegacy : public ForeachOptimizer {
 public:
  NAdamLegacy(std::vector<ParamGroup> groups, double lr, std::string description, NAdamLegacyConfig config)
      : ForeachOptimizer(std::move(groups), lr, std::move(description)), c_(config) {}

 private:
  bool updates_parameters_independently() const override { return true; }
  void step_group(GroupStep& g) override {
    for (std::size_t i = 0; i < g.params.size(); ++i) {
      State& state = *g.states[i];
      if (!state.empty()) continue;
      // timm keeps m_schedule as a Python float: a double here.
      state["m_schedule"] = at::scalar_tensor(1.0, at::kDouble);
      state["exp_avg"] = at::zeros_like(g.params[i]);
      state["exp_avg_sq"] = at::zeros_like(g.params[i]);
    }
    const std::vector<double> steps = increment_steps(g, at::kDouble);
    for (std::size_t i = 0; i < g.params.size(); ++i) {
      State& state = *g.states[i];
      const at::Tensor& p = g.params[i];
      at::Tensor exp_avg = state.at("exp_avg");
      at::Tensor exp_avg_sq = state.at("exp_avg_sq");
      const double m_schedule = state.at("m_schedule").item<double>();
      const double t = steps[i];
      const double bias_correction2 = 1 - std::pow(c_.beta2, t);
      const double momentum_cache_t = c_.beta1 * (1. - 0.5 * std::pow(0.96, t * c_.schedule_decay));
      const double momentum_cache_t_1 = c_.beta1 * (1. - 0.5 * std::pow(0.96, (t + 1) * c_.schedule_decay));
      const double m_schedule_new = m_schedule * momentum_cache_t;
      const double m_schedule_next = m_schedule * momentum_cache_t * momentum_cache_t_1;
      state.at("m_schedule").fill_(m_schedule_new);

      const double grad_coef = -g.lr * (1. - momentum_cache_t) / (1. - m_schedule_new);
      const double exp_avg_coef = -g.lr * momentum_cache_t_1 / (1. - m_schedule_next);
      if (loop_applies(p, g.grads[i], exp_avg, exp_avg_sq)) {
        const auto f = [](double x) { return static_cast<float>(x); };
        const NAdamLegacyScalars s{f(g.weight_decay), f(c_.beta1),      f(1. - c_.beta1),
                                   f(c_.beta2),       f(1. - c_.beta2), f(std::sqrt(bias_correction2)),
                                   f(c_.eps),         f(grad_coef),     f(exp_avg_coef)};
        run_one_pass_loop(p, g.grads[i], exp_avg, exp_avg_sq, nadam_legacy_one_pass, s);
        continue;
      }
      at::Tensor grad = g.grads[i];
      if (g.weight_decay != 0) grad = grad.add(p, g.weight_decay);
      exp_avg.mul_(c_.beta1).add_(grad, 1. - c_.beta1);
      exp_avg_sq.mul_(c_.beta2).addcmul_(grad, grad, 1. - c_.beta2);

      const at::Tensor denom = (exp_avg_sq.sqrt() / std::sqrt(bias_correction2)).add_(c_.eps);
      p.addcdiv_(grad, denom, grad_coef);
      p.addcdiv_(exp_avg, denom, exp_avg_coef);
    }
  }

  NAdamLegacyConfig c_;
};

struct RAdamLegacyConfig {
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
};

class RAdamLegacy : public ForeachOptimizer {
 public:
  RAdamLegacy(std::vector<ParamGroup> groups, double lr, std::string description, RAdamLegacyConfig config)
      : ForeachOptimizer(std::move(groups), lr, std::move(description)), c_(config) {}

 private:
  bool updates_parameters_independently() const override { return true; }
  void step_group(GroupStep& g) override {
    for (std::size_t i = 0; i < g.params.size(); ++i) {
      State& state = *g.states[i];
      if (!state.empty()) continue;
      // timm keeps the moments in float32 whatever the parameter's dtype.
      state["exp_avg"] = at::zeros_like(g.params[i], at::kFloat);
      state["exp_avg_sq"] = at::zeros_like(g.params[i], at::kFloat);
    }
    const std::vector<double> steps = increment_steps(g, at::kDouble);
    for (std::size_t i = 0; i < g.params.size(); ++i) {
      State& state = *g.states[i];
      const at::Tensor& p = g.params[i];
      at::Tensor exp_avg = state.at("exp_avg");
      at::Tensor exp_avg_sq = state.at("exp_avg_sq");
      const double step = steps[i];
      const double beta2_t = std::pow(c_.beta2, step);
      const double num_sma_max = 2 / (1 - c_.beta2) - 1;
      const double num_sma = num_sma_max - 2 * step * beta2_t / (1 - beta2_t);
      const bool rectified = num_sma >= 5;  // more conservative, as timm: an approximation
      const double step_size = rectified ? g.lr *
                                               std::sqrt((1 - beta2_t) * (num_sma - 4) / (num_sma_max - 4) *
                                                         (num_sma - 2) / num_sma * num_sma_max / (num_sma_max - 2)) /
                                               (1 - std::pow(c_.beta1, step))
                                         : g.lr / (1 - std::pow(c_.beta1, step));
      if (loop_applies(p, g.grads[i], exp_avg, exp_avg_sq)) {
        const auto f = [](double x) { return static_cast<float>(x); };
        const RAdamLegacyScalars s{
            f(c_.beta1), f(1 - c_.beta1), f(c_.beta2),  f(1 - c_.beta2), f(-g.weight_decay * g.lr),
            rectified,   f(c_.eps),       f(-step_size)};
        run_one_pass_loop(p, g.grads[i], exp_avg, exp_avg_sq, radam_legacy_one_pass, s);
        continue;
      }

      const at::Tensor grad = g.grads[i].to(at::kFloat);
      const at::Tensor p_fp32 = p.to(at::kFloat);  // p itself when float32
      exp_avg_sq.mul_(c_.beta2).addcmul_(grad, grad, 1 - c_.beta2);
      exp_avg.mul_(c_.beta1).add_(grad, 1 - c_.beta1);
      if (g.weight_decay != 0) p_fp32.add_(p_fp32, -g.weight_decay * g.lr);
      if (rectified) {
        const at::Tensor denom = exp_avg_sq.sqrt().add_(c_.eps);
        p_fp32.addcdiv_(exp_avg, denom, -step_size);
      } else {
        p_fp32.add_(exp_avg, -step_size);
      }
      if (!p_fp32.is_same(p)) p.copy_(p_fp32);
    }
  }

  RAdamLegacyConfig c_;
};

}  // namespace

OptimizerPtr make_nadam_legacy(std::vector<ParamGroup> groups, const OptimizerArgs& args) {
  const OptimizerKwargs kwargs(args, {"betas", "eps", "schedule_decay"});
  check_lr(args);
  const std::vector<double> betas = resolve_betas(args, kwargs, {0.9, 0.999});
  const EpsArg eps = resolve_eps(args, kwargs, 1e-8);
  NAdamLegacyConfig c;
  c.beta1 = betas[0];
  c.beta2 = betas[1];
  c.eps = eps.value;
  c.schedule_decay = kwargs.get_double("schedule_decay", 4e-3);
  const std::string description = describe_optimizer("NAdamLegacy", args.opt,
                                                     {{"lr", python_float_repr(args.lr)},
                                                      {"betas", betas_repr(args, betas, /*always_tuple=*/false)},
                                                      {"eps", eps.repr},
                                                      {"weight_decay", python_float_repr(args.weight_decay)},
                                                      {"schedule_decay", kwargs.repr("schedule_decay", "0.004")}});
  return std::make_unique<NAdamLegacy>(std::move(groups), args.lr, description, c);
}

OptimizerPtr make_radam_legacy(std::vector<ParamGroup> groups, const OptimizerArgs& args) {
  const OptimizerKwargs kwargs(args, {"betas", "eps"});
  check_lr(args);
  const std::vector<double> betas = resolve_betas(args, kwargs, {0.9, 0.999});
  const EpsArg eps = resolve_eps(args, kwargs, 1e-8);
  RAdamLegacyConfig c;
  c.beta1 = betas[0];
  c.beta2 = betas[1];
  c.eps = eps.value;
  const std::string description = describe_optimizer("RAdamLegacy", args.opt,
                                                     {{"lr", python_float_repr(args.lr)},
                                                      {"betas", betas_repr(args, betas, /*always_tuple=*/false)},
                                                      {"eps", eps.repr},
                                                      {"weight_decay", python_float_repr(args.weight_decay)}});
  return std::make_unique<RAdamLegacy>(std::move(groups), args.lr, description, c);
}

}  // namespace timm::adam
