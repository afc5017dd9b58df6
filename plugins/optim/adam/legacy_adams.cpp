// timm's legacy Adam variants, which pre-date torch.optim's: NAdamLegacy
// ("nadamlegacy": Nesterov momentum with a warming momentum schedule, L2
// decay) and RAdamLegacy ("radamlegacy": rectified Adam, the step unadapted
// while the variance estimate is unreliable, weight decay applied to the
// weights). Both step tensor by tensor with Python floats for the
// schedules, as timm does; the ops are timm's, in its order.
#include <cmath>

#include "adam_family.hpp"
#include "timm/base/error.hpp"
#include "timm/optim/foreach_optimizer.hpp"

namespace timm::adam {
namespace {

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

      at::Tensor grad = g.grads[i];
      if (g.weight_decay != 0) grad = grad.add(p, g.weight_decay);

      const double momentum_cache_t = c_.beta1 * (1. - 0.5 * std::pow(0.96, t * c_.schedule_decay));
      const double momentum_cache_t_1 = c_.beta1 * (1. - 0.5 * std::pow(0.96, (t + 1) * c_.schedule_decay));
      const double m_schedule_new = m_schedule * momentum_cache_t;
      const double m_schedule_next = m_schedule * momentum_cache_t * momentum_cache_t_1;
      state.at("m_schedule").fill_(m_schedule_new);

      exp_avg.mul_(c_.beta1).add_(grad, 1. - c_.beta1);
      exp_avg_sq.mul_(c_.beta2).addcmul_(grad, grad, 1. - c_.beta2);

      const at::Tensor denom = (exp_avg_sq.sqrt() / std::sqrt(bias_correction2)).add_(c_.eps);
      p.addcdiv_(grad, denom, -g.lr * (1. - momentum_cache_t) / (1. - m_schedule_new));
      p.addcdiv_(exp_avg, denom, -g.lr * momentum_cache_t_1 / (1. - m_schedule_next));
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
      const at::Tensor grad = g.grads[i].to(at::kFloat);
      const at::Tensor p_fp32 = p.to(at::kFloat);  // p itself when float32
      at::Tensor exp_avg = state.at("exp_avg");
      at::Tensor exp_avg_sq = state.at("exp_avg_sq");

      exp_avg_sq.mul_(c_.beta2).addcmul_(grad, grad, 1 - c_.beta2);
      exp_avg.mul_(c_.beta1).add_(grad, 1 - c_.beta1);

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
