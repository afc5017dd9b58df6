// "adan", "adanw", "cadan", "cadanw": timm.optim.Adan (Adaptive Nesterov
// Momentum, arXiv 2208.06677): moments of the gradient, of the gradient
// difference and of the squared Nesterov-corrected gradient, with three
// betas and a group-level step; the weight decay as a proximal division
// (adan) or decoupled (adanw, no_prox); optional caution on the first
// moment. On the CPU in one pass per parameter (two with caution) instead
// of timm's seventeen ops; foreach=False runs the ops.
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

struct AdanConfig {
  double beta1 = 0.98;
  double beta2 = 0.92;
  double beta3 = 0.99;
  double eps = 1e-8;
  bool no_prox = false;
  bool caution = false;
  bool one_pass = true;  // --opt-kwargs foreach=False: timm's ops one by one
};

// The float32 scalars of one group's update, as the ops cast them.
struct OnePassScalars {
  float lerp_weight;  // 1 - beta1
  float beta2;
  float one_minus_beta2;
  float beta3;
  float one_minus_beta3;
  float bias_correction3_sqrt;
  float eps;
  float neg_step_size;       // -lr / bias_correction1
  float neg_step_size_diff;  // -lr * beta2 / bias_correction2
  // The decay: no_prox multiplies first by 1 - lr * wd, else divides last
  // by 1 + lr * wd; the other is 1 (exact), so that the loops need no branch.
  float decay_factor;
  float decay_divisor;
};

// One element's moments (in place) from its gradient and the negated
// previous one; returns the denominator.
inline float update_moments(float g, float neg_pre_grad, float& exp_avg, float& exp_avg_diff, float& exp_avg_sq,
                            const OnePassScalars& s) {
  const float diff = neg_pre_grad + g;
  exp_avg = aten_lerp(exp_avg, g, s.lerp_weight);
  exp_avg_diff = exp_avg_diff * s.beta2 + s.one_minus_beta2 * diff;
  const float nesterov = diff * s.beta2 + g;
  exp_avg_sq = exp_avg_sq * s.beta3 + s.one_minus_beta3 * nesterov * nesterov;
  return std::sqrt(exp_avg_sq) / s.bias_correction3_sqrt + s.eps;
}

// The parameter after the two addcdiv steps and the decay, in timm's order.
inline float stepped(float param, float update, float exp_avg_diff, float denom, const OnePassScalars& s) {
  float p = param * s.decay_factor;
  p = p + s.neg_step_size * update / denom;
  p = p + s.neg_step_size_diff * exp_avg_diff / denom;
  return p / s.decay_divisor;
}

// timm's zero_() then add_(grad, alpha=-1).
inline float negated(float g) { return 0.0f + -1.0f * g; }

// The loops below make timm's update one element after another, each value
// read and written once where the seventeen ops read or write about 45
// values per element. They vectorise (the plugin builds with
// -fno-math-errno for sqrt), with an AVX2 clone where the CPU has it.

// The whole update without caution.
TIMM_AVX2_CLONES
void adan_one_pass(float* __restrict param, const float* __restrict grad, float* __restrict exp_avg,
                   float* __restrict exp_avg_diff, float* __restrict exp_avg_sq, float* __restrict neg_pre_grad,
                   int64_t n, const OnePassScalars s) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = grad[i];
    float m = exp_avg[i];
    float d = exp_avg_diff[i];
    float v = exp_avg_sq[i];
    const float denom = update_moments(g, neg_pre_grad[i], m, d, v, s);
    param[i] = stepped(param[i], m, d, denom, s);
    exp_avg[i] = m;
    exp_avg_diff[i] = d;
    exp_avg_sq[i] = v;
    neg_pre_grad[i] = negated(g);
  }
}

// Caution's first pass: the moments, and how many new exp_avg values agree
// in sign with their gradient (timm's mask, exp_avg * grad > 0).
TIMM_AVX2_CLONES
int64_t adan_moments(const float* __restrict grad, float* __restrict exp_avg, float* __restrict exp_avg_diff,
                     float* __restrict exp_avg_sq, float* __restrict neg_pre_grad, int64_t n, const OnePassScalars s) {
  int64_t agreeing = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float g = grad[i];
    float m = exp_avg[i];
    float d = exp_avg_diff[i];
    float v = exp_avg_sq[i];
    update_moments(g, neg_pre_grad[i], m, d, v, s);
    exp_avg[i] = m;
    exp_avg_diff[i] = d;
    exp_avg_sq[i] = v;
    neg_pre_grad[i] = negated(g);
    agreeing += m * g > 0;
  }
  return agreeing;
}

// Caution's second pass: the step along exp_avg where it agrees with the
// gradient (times `mask_value`, 0 elsewhere) and along exp_avg_diff.
TIMM_AVX2_CLONES
void adan_cautious_step(float* __restrict param, const float* __restrict grad, const float* __restrict exp_avg,
                        const float* __restrict exp_avg_diff, const float* __restrict exp_avg_sq, int64_t n,
                        float mask_value, const OnePassScalars s) {
  for (int64_t i = 0; i < n; ++i) {
    const float m = exp_avg[i];
    const float update = m * (m * grad[i] > 0 ? mask_value : 0.0f);
    const float denom = std::sqrt(exp_avg_sq[i]) / s.bias_correction3_sqrt + s.eps;
    param[i] = stepped(param[i], update, exp_avg_diff[i], denom, s);
  }
}

class Adan : public ForeachOptimizer {
 public:
  Adan(std::vector<ParamGroup> groups, double lr, std::string description, AdanConfig config)
      : ForeachOptimizer(std::move(groups), lr, std::move(description)), c_(config) {}

  void step() override {
    // timm counts group['step'] (a Python int) for every group, also one
    // without gradients this step.
    for (std::size_t g = 0; g < num_groups(); ++g) {
      State& state = mutable_group_state(g);
      if (state.count("step") == 0) state["step"] = at::zeros({}, at::kDouble);
      state["step"].add_(1);
    }
    ForeachOptimizer::step();
  }

 private:
  bool updates_parameters_independently() const override { return true; }
  void step_group(GroupStep& g) override {
    const double step = group_state(g.index).at("step").item<double>();
    for (std::size_t i = 0; i < g.params.size(); ++i) {
      State& state = *g.states[i];
      if (state.empty()) {
        state["exp_avg"] = at::zeros_like(g.params[i]);
        state["exp_avg_sq"] = at::zeros_like(g.params[i]);
        state["exp_avg_diff"] = at::zeros_like(g.params[i]);
      }
      // The previous gradient, negated; the current one on a parameter's
      // first step (so that the first difference is zero) and on the group's.
      if (state.count("neg_pre_grad") == 0 || step == 1) state["neg_pre_grad"] = at::neg(g.grads[i]);
    }
    const double bias_correction1 = 1.0 - std::pow(c_.beta1, step);
    const double bias_correction2 = 1.0 - std::pow(c_.beta2, step);
    const double bias_correction3_sqrt = std::sqrt(1.0 - std::pow(c_.beta3, step));
    // Each tensor's update is its own: in chunks, timm's _single_tensor_adan
    // (the CPU path) op by op.
    update(g, bias_correction1, bias_correction2, bias_correction3_sqrt);
  }

  void update(const GroupStep& a, double bias_correction1, double bias_correction2, double bias_correction3_sqrt) {
    Tensors exp_avgs = state_list(a, "exp_avg");
    const Tensors exp_avg_sqs = state_list(a, "exp_avg_sq");
    const Tensors exp_avg_diffs = state_list(a, "exp_avg_diff");
    const Tensors neg_pre_grads = state_list(a, "neg_pre_grad");
    if (c_.one_pass &&
        fused_cpu_kernels_apply({a.params, a.grads, exp_avgs, exp_avg_sqs, exp_avg_diffs, neg_pre_grads})) {
      const auto f = [](double x) { return static_cast<float>(x); };
      const double lr = a.lr;
      const OnePassScalars s{f(1 - c_.beta1),
                             f(c_.beta2),
                             f(1 - c_.beta2),
                             f(c_.beta3),
                             f(1 - c_.beta3),
                             f(bias_correction3_sqrt),
                             f(c_.eps),
                             f(-(lr / bias_correction1)),
                             f(-(lr * c_.beta2 / bias_correction2)),
                             f(c_.no_prox ? 1 - lr * a.weight_decay : 1.0),
                             f(c_.no_prox ? 1.0 : 1 + lr * a.weight_decay)};
      for (std::size_t i = 0; i < a.params.size(); ++i) {
        update_in_passes(a.params[i], a.grads[i], exp_avgs[i], exp_avg_diffs[i], exp_avg_sqs[i], neg_pre_grads[i], s);
      }
      return;
    }

    // neg_pre_grads hold the gradient difference, then the Nesterov term.
    at::_foreach_add_(neg_pre_grads, a.grads);
    at::_foreach_lerp_(exp_avgs, a.grads, 1 - c_.beta1);  // m_t
    at::_foreach_mul_(exp_avg_diffs, c_.beta2);
    at::_foreach_add_(exp_avg_diffs, neg_pre_grads, 1 - c_.beta2);  // diff_t
    at::_foreach_mul_(neg_pre_grads, c_.beta2);
    at::_foreach_add_(neg_pre_grads, a.grads);
    at::_foreach_mul_(exp_avg_sqs, c_.beta3);
    at::_foreach_addcmul_(exp_avg_sqs, neg_pre_grads, neg_pre_grads, 1 - c_.beta3);  // n_t

    Tensors denom = at::_foreach_sqrt(exp_avg_sqs);
    at::_foreach_div_(denom, bias_correction3_sqrt);
    at::_foreach_add_(denom, c_.eps);
    const double lr = a.lr;
    const double step_size_diff = lr * c_.beta2 / bias_correction2;
    const double step_size = lr / bias_correction1;
    // Caution masks a copy: the state keeps the unmasked moment.
    if (c_.caution) exp_avgs = cautioned(exp_avgs, a.grads);

    if (c_.no_prox) {
      at::_foreach_mul_(a.params, 1 - lr * a.weight_decay);
      at::_foreach_addcdiv_(a.params, exp_avgs, denom, -step_size);
      at::_foreach_addcdiv_(a.params, exp_avg_diffs, denom, -step_size_diff);
    } else {
      at::_foreach_addcdiv_(a.params, exp_avgs, denom, -step_size);
      at::_foreach_addcdiv_(a.params, exp_avg_diffs, denom, -step_size_diff);
      at::_foreach_div_(a.params, 1 + lr * a.weight_decay);
    }
    at::_foreach_zero_(neg_pre_grads);
    at::_foreach_add_(neg_pre_grads, a.grads, -1.0);
  }

  // The loops over one contiguous float32 parameter, in ranges across the
  // intra-op threads.
  void update_in_passes(const at::Tensor& param, const at::Tensor& grad, const at::Tensor& exp_avg,
                        const at::Tensor& exp_avg_diff, const at::Tensor& exp_avg_sq, const at::Tensor& neg_pre_grad,
                        const OnePassScalars& s) const {
    float* p = param.data_ptr<float>();
    const float* g = grad.data_ptr<float>();
    float* m = exp_avg.data_ptr<float>();
    float* d = exp_avg_diff.data_ptr<float>();
    float* v = exp_avg_sq.data_ptr<float>();
    float* npg = neg_pre_grad.data_ptr<float>();
    const int64_t n = param.numel();
    if (!c_.caution) {
      at::parallel_for(0, n, at::internal::GRAIN_SIZE, [&](int64_t b, int64_t e) {
        adan_one_pass(p + b, g + b, m + b, d + b, v + b, npg + b, e - b, s);
      });
    } else {
      cautious_two_passes(
          n, [&](int64_t b, int64_t e) { return adan_moments(g + b, m + b, d + b, v + b, npg + b, e - b, s); },
          [&](int64_t b, int64_t e, float mask_value) {
            adan_cautious_step(p + b, g + b, m + b, d + b, v + b, e - b, mask_value, s);
          });
    }
    bump_versions({param, exp_avg, exp_avg_diff, exp_avg_sq, neg_pre_grad});
  }

  AdanConfig c_;
};

OptimizerPtr make_adan(std::vector<ParamGroup> groups, const OptimizerArgs& args) {
  const OptimizerKwargs kwargs(args, {"betas", "eps", "no_prox", "caution", "foreach"});
  check_lr(args);
  const std::vector<double> betas = resolve_betas(args, kwargs, {0.98, 0.92, 0.99}, 3);
  const EpsArg eps = resolve_eps(args, kwargs, 1e-8);
  AdanConfig c;
  c.beta1 = betas[0];
  c.beta2 = betas[1];
  c.beta3 = betas[2];
  c.eps = eps.value;
  c.no_prox = kwargs.get_bool("no_prox", false);
  c.caution = kwargs.get_bool("caution", false);
  c.one_pass = one_pass_requested(kwargs);
  const std::string description = describe_optimizer("Adan", args.opt,
                                                     {{"lr", python_float_repr(args.lr)},
                                                      {"betas", betas_repr(args, betas, /*always_tuple=*/false)},
                                                      {"eps", eps.repr},
                                                      {"weight_decay", python_float_repr(args.weight_decay)},
                                                      {"no_prox", kwargs.repr("no_prox", "False")},
                                                      {"caution", kwargs.repr("caution", "False")},
                                                      {"foreach", kwargs.repr("foreach", "None")}});
  return std::make_unique<Adan>(std::move(groups), args.lr, description, c);
}

}  // namespace
}  // namespace timm

TIMM_PLUGIN("adan") {
  using timm::bind_defaults;
  // train.py scales --lr-base by the square root for names containing "ada".
  const timm::OptimizerTraits sqrt_lr{.lr_base_scale = timm::LrBaseScale::kSqrt};
  registrar.add_optimizer("adan", "Adaptive Nesterov Momentum Algorithm",
                          bind_defaults(timm::make_adan, {{"no_prox", "False"}}), sqrt_lr);
  registrar.add_optimizer("adanw", "Adaptive Nesterov Momentum with decoupled weight decay",
                          bind_defaults(timm::make_adan, {{"no_prox", "True"}}), sqrt_lr);
  registrar.add_optimizer("cadan", "Cautious Adaptive Nesterov Momentum Algorithm",
                          bind_defaults(timm::make_adan, {{"caution", "True"}, {"no_prox", "False"}}), sqrt_lr);
  registrar.add_optimizer("cadanw", "Cautious Adaptive Nesterov Momentum with decoupled weight decay",
                          bind_defaults(timm::make_adan, {{"caution", "True"}, {"no_prox", "True"}}), sqrt_lr);
}
