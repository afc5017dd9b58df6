// "laprop", "lapropc", "claprop": timm.optim.LaProp (arXiv 2002.04839):
// the gradient normalised by the root of its (bias-corrected) second moment
// feeds a momentum that carries the lr; the first moment's bias correction is
// an average of the past lrs (exp_avg_lr_1), so that lr changes are
// corrected too. Decoupled weight decay after the update (lr, or lr² / max_lr
// corrected), optional caution. On the CPU in one pass per parameter (two
// with caution) instead of timm's ten ops; foreach=False runs the ops.
#include <ATen/Parallel.h>

#include <cmath>
#include <map>
#include <optional>

#include "timm/base/error.hpp"
#include "timm/base/simd.hpp"
#include "timm/optim/foreach_optimizer.hpp"
#include "timm/plugin/plugin.hpp"

namespace timm {
namespace {

using Tensors = std::vector<at::Tensor>;

struct LapropConfig {
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-15;
  bool caution = false;
  DecayLr decay_lr;      // lr, or lr² / max_lr (corrected_weight_decay)
  bool one_pass = true;  // --opt-kwargs foreach=False: timm's ops one by one
};

// The float32 scalars of one parameter's update, as the per-tensor ops cast
// them.
struct OnePassScalars {
  float beta1;
  float beta2;
  float one_minus_beta2;
  float bias_correction2;
  float eps;
  float lr_one_minus_beta1;
  float step_size;
  float decay;  // wd_scale * weight_decay, 0 without decay
};

// One element's moments as timm's ops compute them.
struct Moments {
  float exp_avg;
  float exp_avg_sq;
};
inline Moments update_moments(float g, float exp_avg, float exp_avg_sq, const OnePassScalars& s) {
  const float v = exp_avg_sq * s.beta2 + s.one_minus_beta2 * g * g;
  const float denom = std::sqrt(v / s.bias_correction2) + s.eps;
  return {exp_avg * s.beta1 + s.lr_one_minus_beta1 * (g / denom), v};
}

// Computed, then selected: a branch with float arithmetic in it would keep
// the loops from vectorising.
inline float decayed(float p, const OnePassScalars& s) {
  const float decayed = p - s.decay * p;
  return s.decay != 0 ? decayed : p;
}

// The loops below make timm's update one element after another, each value
// read and written once where the ten per-tensor ops read or write about 25
// values per element. They vectorise (the plugin builds with -fno-math-errno
// for sqrt), with an AVX2 clone where the CPU has it.

// The whole update without caution.
TIMM_AVX2_CLONES
void laprop_one_pass(float* __restrict param, const float* __restrict grad, float* __restrict exp_avg,
                     float* __restrict exp_avg_sq, int64_t n, const OnePassScalars s) {
  for (int64_t i = 0; i < n; ++i) {
    const Moments m = update_moments(grad[i], exp_avg[i], exp_avg_sq[i], s);
    exp_avg[i] = m.exp_avg;
    exp_avg_sq[i] = m.exp_avg_sq;
    param[i] = decayed(param[i] - s.step_size * m.exp_avg, s);
  }
}

// Caution's first pass: the moments, and how many new exp_avg values agree
// in sign with their gradient (timm's mask, exp_avg * grad > 0).
TIMM_AVX2_CLONES
int64_t laprop_moments(const float* __restrict /*param*/, const float* __restrict grad, float* __restrict exp_avg,
                       float* __restrict exp_avg_sq, int64_t n, const OnePassScalars s) {
  int64_t agreeing = 0;
  for (int64_t i = 0; i < n; ++i) {
    const Moments m = update_moments(grad[i], exp_avg[i], exp_avg_sq[i], s);
    exp_avg[i] = m.exp_avg;
    exp_avg_sq[i] = m.exp_avg_sq;
    agreeing += m.exp_avg * grad[i] > 0;
  }
  return agreeing;
}

// Caution's second pass: the step along exp_avg where it agrees with the
// gradient, times `mask_value` (timm's mask over its mean), 0 elsewhere.
TIMM_AVX2_CLONES
void laprop_cautious_step(float* __restrict param, const float* __restrict grad, const float* __restrict exp_avg,
                          const float* __restrict /*exp_avg_sq*/, int64_t n, float mask_value, const OnePassScalars s) {
  for (int64_t i = 0; i < n; ++i) {
    const float m = exp_avg[i];
    const float update = m * (m * grad[i] > 0 ? mask_value : 0.0f);
    param[i] = decayed(param[i] - s.step_size * update, s);
  }
}

class Laprop : public ForeachOptimizer {
 public:
  Laprop(std::vector<ParamGroup> groups, double lr, std::string description, LapropConfig config)
      : ForeachOptimizer(std::move(groups), lr, std::move(description)), c_(config) {}

 private:
  bool updates_parameters_independently() const override { return true; }
  void step_group(GroupStep& g) override {
    const double one_minus_beta1 = 1 - c_.beta1;
    const double one_minus_beta2 = 1 - c_.beta2;
    for (std::size_t i = 0; i < g.params.size(); ++i) {
      State& state = *g.states[i];
      if (state.empty()) {
        state["step"] = at::zeros({}, at::kFloat);  // timm's _init_scalar: float32 on the CPU
        state["exp_avg"] = at::zeros_like(g.params[i]);
        // A Python float in timm (float lr): a float64 here.
        state["exp_avg_lr_1"] = at::zeros({}, at::kDouble);
        state["exp_avg_lr_2"] = at::zeros({}, at::kFloat);
        state["exp_avg_sq"] = at::zeros_like(g.params[i]);
      }
      // Per parameter: the parameters of a group can be at different steps.
      state["step"].add_(1);
      const double exp_avg_lr_1 = state["exp_avg_lr_1"].item<double>();
      state["exp_avg_lr_1"].fill_(exp_avg_lr_1 * c_.beta1 + one_minus_beta1 * g.lr);
      // float32 tensor arithmetic, as timm's.
      state["exp_avg_lr_2"] = state["exp_avg_lr_2"] * c_.beta2 + one_minus_beta2;
    }
    update(g);
  }

  // timm's _single_tensor_laprop (its CPU path): in one pass over each
  // contiguous float32 parameter on the CPU, two with caution (within float32
  // rounding of the ops, as torch's fused Adam), else op by op over the
  // tensors.
  void update(const GroupStep& a) {
    const double lr = a.lr;
    std::vector<double> bias_corrections2;
    std::vector<double> step_sizes;
    for (const State* state : a.states) {
      bias_corrections2.push_back(state->at("exp_avg_lr_2").item<double>());
      // 1 / bias_correction1 with bias_correction1 = exp_avg_lr_1 / lr; 0 when lr is.
      const double exp_avg_lr_1 = state->at("exp_avg_lr_1").item<double>();
      step_sizes.push_back(exp_avg_lr_1 != 0 ? lr / exp_avg_lr_1 : 0.0);
    }
    const Tensors exp_avgs = state_list(a, "exp_avg");
    const Tensors exp_avg_sqs = state_list(a, "exp_avg_sq");
    const double decay = a.weight_decay == 0 ? 0.0 : c_.decay_lr(lr) * a.weight_decay;
    if (c_.one_pass && fused_cpu_kernels_apply({a.params, a.grads, exp_avgs, exp_avg_sqs})) {
      for (std::size_t i = 0; i < a.params.size(); ++i) {
        const OnePassScalars s{static_cast<float>(c_.beta1),      static_cast<float>(c_.beta2),
                               static_cast<float>(1 - c_.beta2),  static_cast<float>(bias_corrections2[i]),
                               static_cast<float>(c_.eps),        static_cast<float>(lr * (1 - c_.beta1)),
                               static_cast<float>(step_sizes[i]), static_cast<float>(decay)};
        update_in_passes(a.params[i], a.grads[i], exp_avgs[i], exp_avg_sqs[i], s);
      }
      return;
    }

    at::_foreach_mul_(exp_avg_sqs, c_.beta2);
    at::_foreach_addcmul_(exp_avg_sqs, a.grads, a.grads, 1 - c_.beta2);
    Tensors denom = at::_foreach_div(exp_avg_sqs, to_scalars(bias_corrections2));
    at::_foreach_sqrt_(denom);
    at::_foreach_add_(denom, c_.eps);
    const Tensors step_of_this_grad = at::_foreach_div(a.grads, denom);
    at::_foreach_mul_(exp_avgs, c_.beta1);
    at::_foreach_add_(exp_avgs, step_of_this_grad, lr * (1 - c_.beta1));

    // Caution masks a copy: the state keeps the unmasked moment.
    const Tensors updates = c_.caution ? cautioned(exp_avgs, a.grads) : exp_avgs;
    std::map<double, std::vector<std::size_t>> by_step_size;  // usually one: the same steps and lr
    for (std::size_t i = 0; i < step_sizes.size(); ++i) by_step_size[step_sizes[i]].push_back(i);
    for (const auto& [step_size, indices] : by_step_size) {
      at::_foreach_add_(select(a.params, indices), select(updates, indices), -step_size);
    }
    if (decay != 0) at::_foreach_add_(a.params, a.params, -decay);
  }

  // The loops over one contiguous float32 parameter, in ranges across the
  // intra-op threads.
  void update_in_passes(const at::Tensor& param, const at::Tensor& grad, const at::Tensor& exp_avg,
                        const at::Tensor& exp_avg_sq, const OnePassScalars& s) const {
    if (c_.caution) {
      run_cautious_loops(param, grad, exp_avg, exp_avg_sq, laprop_moments, laprop_cautious_step, s);
    } else {
      run_one_pass_loop(param, grad, exp_avg, exp_avg_sq, laprop_one_pass, s);
    }
  }

  LapropConfig c_;
};

OptimizerPtr make_laprop(std::vector<ParamGroup> groups, const OptimizerArgs& args) {
  const OptimizerKwargs kwargs(args, {"betas", "eps", "caution", "corrected_weight_decay", "foreach"});
  check_lr(args);
  const std::vector<double> betas = resolve_betas(args, kwargs, {0.9, 0.999});
  const EpsArg eps = resolve_eps(args, kwargs, 1e-15);
  const DecayLr decay_lr(args, kwargs);
  LapropConfig c;
  c.beta1 = betas[0];
  c.beta2 = betas[1];
  c.eps = eps.value;
  c.caution = kwargs.get_bool("caution", false);
  c.decay_lr = decay_lr;
  c.one_pass = one_pass_requested(kwargs);
  const std::string description =
      describe_optimizer("LaProp", args.opt,
                         {{"lr", python_float_repr(args.lr)},
                          {"betas", betas_repr(args, betas, /*always_tuple=*/false)},
                          {"eps", eps.repr},
                          {"weight_decay", python_float_repr(args.weight_decay)},
                          {"caution", kwargs.repr("caution", "False")},
                          {"corrected_weight_decay", kwargs.repr("corrected_weight_decay", "False")},
                          {"max_lr_snapshot", python_float_repr(args.lr)},
                          {"foreach", kwargs.repr("foreach", "None")}});
  return std::make_unique<Laprop>(std::move(groups), args.lr, description, c);
}

}  // namespace
}  // namespace timm

TIMM_PLUGIN("laprop") {
  using timm::bind_defaults;
  registrar.add_optimizer("laprop", "Separating Momentum and Adaptivity in Adam", timm::make_laprop);
  registrar.add_optimizer("lapropc", "LaProp with corrected weight decay (lr²/max_lr scaling)",
                          bind_defaults(timm::make_laprop, {{"corrected_weight_decay", "True"}}));
  registrar.add_optimizer("claprop", "Cautious LaProp", bind_defaults(timm::make_laprop, {{"caution", "True"}}));
}
