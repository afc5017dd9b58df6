// "lion" (and "clion", "lionc", "clionc"): timm.optim.Lion, the sign of an
// interpolated momentum as the update, decoupled weight decay (lr, or lr² /
// max_lr corrected), optional caution. No eps (timm drops --opt-eps). On
// the CPU in one pass per parameter (two with caution) instead of timm's five
// ops; foreach=False runs the ops.
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

struct LionConfig {
  double beta1 = 0.9;
  double beta2 = 0.99;
  bool caution = false;
  DecayLr decay_lr;      // lr, or lr² / max_lr (corrected_weight_decay)
  bool one_pass = true;  // --opt-kwargs foreach=False: timm's ops one by one
};

// The float32 scalars of one group's update, as the foreach ops cast them.
struct OnePassScalars {
  float decay_factor;  // 1 - wd_scale * weight_decay
  float weight1;       // 1 - beta1, the update's lerp weight
  float weight2;       // 1 - beta2, the momentum's
  float neg_lr;
};

// The loops below make timm's update one element after another, each value
// read and written once where the five per-tensor ops read or write about 12
// values per element. They vectorise, with an AVX2 clone where the CPU has it.

// The whole update without caution.
TIMM_AVX2_CLONES
void lion_one_pass(float* __restrict param, const float* __restrict grad, float* __restrict exp_avg, int64_t n,
                   const OnePassScalars s) {
  for (int64_t i = 0; i < n; ++i) {
    const float update = aten_sign(aten_lerp(exp_avg[i], grad[i], s.weight1));
    const float decayed = param[i] * s.decay_factor;
    param[i] = decayed + s.neg_lr * update;
    exp_avg[i] = aten_lerp(exp_avg[i], grad[i], s.weight2);
  }
}

// Caution's first pass: how many updates agree in sign with their gradient
// (timm's mask, update * grad > 0).
TIMM_AVX2_CLONES
int64_t lion_agreeing(const float* __restrict grad, const float* __restrict exp_avg, int64_t n,
                      const OnePassScalars s) {
  int64_t agreeing = 0;
  for (int64_t i = 0; i < n; ++i) agreeing += aten_sign(aten_lerp(exp_avg[i], grad[i], s.weight1)) * grad[i] > 0.0f;
  return agreeing;
}

// Caution's second pass: the update where it agrees with the gradient, times
// `mask_value` (timm's mask over its mean), 0 elsewhere; then the momentum.
TIMM_AVX2_CLONES
void lion_cautious_step(float* __restrict param, const float* __restrict grad, float* __restrict exp_avg, int64_t n,
                        float mask_value, const OnePassScalars s) {
  for (int64_t i = 0; i < n; ++i) {
    const float update = aten_sign(aten_lerp(exp_avg[i], grad[i], s.weight1));
    const float masked = update * (update * grad[i] > 0.0f ? mask_value : 0.0f);
    const float decayed = param[i] * s.decay_factor;
    param[i] = decayed + s.neg_lr * masked;
    exp_avg[i] = aten_lerp(exp_avg[i], grad[i], s.weight2);
  }
}

class Lion : public ForeachOptimizer {
 public:
  Lion(std::vector<ParamGroup> groups, double lr, std::string description, LionConfig config)
      : ForeachOptimizer(std::move(groups), lr, std::move(description)), c_(config) {}

 private:
  bool updates_parameters_independently() const override { return true; }
  void step_group(GroupStep& g) override {
    init_zero_states(g, {"exp_avg"});
    const Tensors exp_avgs = state_list(g, "exp_avg");
    const double wd_scale = c_.decay_lr(g.lr);
    if (c_.one_pass && fused_cpu_kernels_apply({g.params, g.grads, exp_avgs})) {
      const OnePassScalars s{static_cast<float>(1 - wd_scale * g.weight_decay), static_cast<float>(1 - c_.beta1),
                             static_cast<float>(1 - c_.beta2), static_cast<float>(-g.lr)};
      for (std::size_t i = 0; i < g.params.size(); ++i) update_in_passes(g.params[i], g.grads[i], exp_avgs[i], s);
      return;
    }
    at::_foreach_mul_(g.params, 1 - wd_scale * g.weight_decay);
    Tensors updates = at::_foreach_lerp(exp_avgs, g.grads, 1 - c_.beta1);
    at::_foreach_sign_(updates);
    if (c_.caution) updates = cautioned(updates, g.grads);
    at::_foreach_add_(g.params, updates, -g.lr);
    at::_foreach_lerp_(exp_avgs, g.grads, 1 - c_.beta2);
  }

  // The loops over one contiguous float32 parameter, in ranges across the
  // intra-op threads.
  void update_in_passes(const at::Tensor& param, const at::Tensor& grad, const at::Tensor& exp_avg,
                        const OnePassScalars& s) const {
    float* p = param.data_ptr<float>();
    const float* g = grad.data_ptr<float>();
    float* m = exp_avg.data_ptr<float>();
    const int64_t n = param.numel();
    if (!c_.caution) {
      at::parallel_for(0, n, at::internal::GRAIN_SIZE, [&](int64_t begin, int64_t end) {
        lion_one_pass(p + begin, g + begin, m + begin, end - begin, s);
      });
    } else {
      cautious_two_passes(
          n, [&](int64_t begin, int64_t end) { return lion_agreeing(g + begin, m + begin, end - begin, s); },
          [&](int64_t begin, int64_t end, float mask_value) {
            lion_cautious_step(p + begin, g + begin, m + begin, end - begin, mask_value, s);
          });
    }
    bump_versions({param, exp_avg});
  }

  LionConfig c_;
};

OptimizerPtr make_lion(std::vector<ParamGroup> groups, const OptimizerArgs& args) {
  // timm drops eps (has_eps False); foreach / maximize as Lion takes them.
  const OptimizerKwargs kwargs(args, {"betas", "eps", "caution", "corrected_weight_decay", "foreach", "maximize"});
  check_lr(args);
  reject_true_kwargs(args, kwargs, {"maximize"});
  const std::vector<double> betas = resolve_betas(args, kwargs, {0.9, 0.99});
  const DecayLr decay_lr(args, kwargs);
  LionConfig c;
  c.beta1 = betas[0];
  c.beta2 = betas[1];
  c.caution = kwargs.get_bool("caution", false);
  c.decay_lr = decay_lr;
  c.one_pass = one_pass_requested(kwargs);
  const std::string description = describe_optimizer("Lion", args.opt,
                                                     {{"lr", python_float_repr(args.lr)},
                                                      {"betas", betas_repr(args, betas, /*always_tuple=*/false)},
                                                      {"weight_decay", python_float_repr(args.weight_decay)},
                                                      {"caution", py_bool(c.caution)},
                                                      {"corrected_weight_decay", py_bool(decay_lr.corrected())},
                                                      {"max_lr_snapshot", python_float_repr(args.lr)},
                                                      {"foreach", kwargs.repr("foreach", "None")},
                                                      {"maximize", "False"}});
  return std::make_unique<Lion>(std::move(groups), args.lr, description, c);
}

}  // namespace
}  // namespace timm

TIMM_PLUGIN("lion") {
  using timm::bind_defaults;
  registrar.add_optimizer("lion", "Evolved Sign Momentum optimizer for improved convergence", timm::make_lion);
  registrar.add_optimizer("clion", "Cautious Lion", bind_defaults(timm::make_lion, {{"caution", "True"}}));
  registrar.add_optimizer("lionc", "Lion with corrected weight decay (lr²/max_lr scaling)",
                          bind_defaults(timm::make_lion, {{"corrected_weight_decay", "True"}}));
  registrar.add_optimizer("clionc", "Cautious Lion with corrected weight decay (lr²/max_lr scaling)",
                          bind_defaults(timm::make_lion, {{"caution", "True"}, {"corrected_weight_decay", "True"}}));
}
