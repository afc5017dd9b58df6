// "novograd" (and "novogradw", "novogradc"): timm.optim.NvNovoGrad, Adam
// whose second moment is one number per tensor (the running average of the
// gradient's squared L2 norm), the gradient normalized by it before the
// momentum; weight decay added to the normalized gradient (L2, as in the
// paper) or, with decoupled_decay, applied to the weights (lr, or lr² /
// max_lr corrected).
//
// A contiguous float32 parameter takes two passes of timm-cpp's own: its
// squared norm, then the update (normalise, decay, momentum, step) element by
// element. timm's per-tensor ops make about seven, each with a temporary or a
// full read and write (vit_base's parameters at 2 threads: 146-188 ms per
// step for timm, 119-162 ms for the same ops here before this loop).
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "timm/base/error.hpp"
#include "timm/base/simd.hpp"
#include "timm/optim/foreach_optimizer.hpp"
#include "timm/plugin/plugin.hpp"

namespace timm {
namespace {

struct NovoGradConfig {
  double beta1 = 0.95;
  double beta2 = 0.98;
  double eps = 1e-8;
  bool grad_averaging = false;
  bool amsgrad = false;
  bool decoupled_decay = false;
  DecayLr decay_lr;  // lr, or lr² / max_lr (corrected_weight_decay)
};

// Elements per task of the two loops: a few hundred KiB of each stream.
constexpr int64_t kChunk = 32768;

// The scalars of one parameter's update, as float32 as timm's ops use them.
struct UpdateScalars {
  float denom = 0;        // sqrt(second moment) + eps: the update is grad / denom
  float l2_decay = 0;     // added to the normalised gradient, times p
  float param_scale = 1;  // decoupled decay: p *= param_scale first
  float grad_scale = 1;   // grad_averaging: 1 - beta1
  float beta1 = 0;
  float neg_lr = 0;
};

TIMM_AVX2_CLONES
double sum_of_squares(const float* __restrict g, int64_t n) {
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(g[i]) * g[i];
  return sum;
}

TIMM_AVX2_CLONES
void update_chunk(float* __restrict p, const float* __restrict g, float* __restrict exp_avg, int64_t n,
                  const UpdateScalars c) {
  for (int64_t i = 0; i < n; ++i) {
    const float param = c.param_scale != 1 ? p[i] * c.param_scale : p[i];
    float update = g[i] / c.denom;
    if (c.l2_decay != 0) update = update + c.l2_decay * param;
    if (c.grad_scale != 1) update = update * c.grad_scale;
    const float m = exp_avg[i] * c.beta1 + update;
    exp_avg[i] = m;
    p[i] = param + c.neg_lr * m;
  }
}

// ||grad||^2 over kChunk-sized pieces across the intra-op threads, each piece
// summed in double and the pieces in order: the same value at any thread
// count (timm's float32 sum differs from it in the last bits).
float squared_norm(const at::Tensor& grad) {
  const float* g = grad.data_ptr<float>();
  const int64_t n = grad.numel();
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  std::vector<double> partial(static_cast<std::size_t>(chunks));
  at::parallel_for(0, chunks, 1, [&](int64_t first, int64_t last) {
    for (int64_t chunk = first; chunk < last; ++chunk) {
      const int64_t b = chunk * kChunk;
      partial[static_cast<std::size_t>(chunk)] = sum_of_squares(g + b, std::min(kChunk, n - b));
    }
  });
  double sum = 0;
  for (double x : partial) sum += x;
  return static_cast<float>(sum);
}

// The update of one contiguous float32 parameter in one pass. The writes
// bypass the dispatcher, so the versions are bumped as in-place ops would.
void update_in_one_pass(const at::Tensor& param, const at::Tensor& grad, const at::Tensor& exp_avg,
                        const UpdateScalars& c) {
  float* p = param.data_ptr<float>();
  const float* g = grad.data_ptr<float>();
  float* m = exp_avg.data_ptr<float>();
  const int64_t n = param.numel();
  at::parallel_for(0, (n + kChunk - 1) / kChunk, 1, [&](int64_t first, int64_t last) {
    for (int64_t chunk = first; chunk < last; ++chunk) {
      const int64_t b = chunk * kChunk;
      update_chunk(p + b, g + b, m + b, std::min(kChunk, n - b), c);
    }
  });
  bump_versions({param, exp_avg});
}

class NvNovoGrad : public ForeachOptimizer {
 public:
  NvNovoGrad(std::vector<ParamGroup> groups, double lr, std::string description, NovoGradConfig config)
      : ForeachOptimizer(std::move(groups), lr, std::move(description)), c_(config) {}

 private:
  // timm's step, tensor by tensor as timm runs it (the norms are per tensor).
  bool updates_parameters_independently() const override { return true; }
  void step_group(GroupStep& g) override {
    for (std::size_t i = 0; i < g.params.size(); ++i) {
      State& state = *g.states[i];
      if (!state.empty()) continue;
      state["exp_avg"] = at::zeros_like(g.params[i]);
      // timm: torch.zeros([]) (the default dtype) on the parameter's device.
      const auto scalar = at::TensorOptions().dtype(at::kFloat).device(g.params[i].device());
      state["exp_avg_sq"] = at::zeros({}, scalar);
      if (c_.amsgrad) state["max_exp_avg_sq"] = at::zeros({}, scalar);
    }
    increment_steps(g);  // timm counts steps (a Python int) but does not use them
    const std::vector<at::Tensor> exp_avgs = state_list(g, "exp_avg");
    const bool one_pass = fused_cpu_kernels_apply({g.params, g.grads, exp_avgs});
    for (std::size_t i = 0; i < g.params.size(); ++i) {
      if (!one_pass) {
        step_with_ops(g, i);
        continue;
      }
      const at::Tensor norm = at::scalar_tensor(squared_norm(g.grads[i]), at::kFloat);
      const at::Tensor denom = update_second_moment(*g.states[i], norm);
      update_in_one_pass(g.params[i], g.grads[i], exp_avgs[i], scalars(g, denom.item<float>()));
    }
  }

  // exp_avg_sq (and with amsgrad its running max) from this step's squared
  // norm, as timm updates them; returns denom, sqrt(second moment) + eps.
  at::Tensor update_second_moment(State& state, const at::Tensor& norm) const {
    at::Tensor exp_avg_sq = state.at("exp_avg_sq");
    if (exp_avg_sq.item<double>() == 0) {
      exp_avg_sq.copy_(norm);
    } else {
      exp_avg_sq.mul_(c_.beta2).add_(norm, 1 - c_.beta2);
    }
    if (!c_.amsgrad) return exp_avg_sq.sqrt().add_(c_.eps);
    at::Tensor max_exp_avg_sq = state.at("max_exp_avg_sq");
    at::max_out(max_exp_avg_sq, max_exp_avg_sq, exp_avg_sq);
    return max_exp_avg_sq.sqrt().add_(c_.eps);
  }

  UpdateScalars scalars(const GroupStep& g, float denom) const {
    UpdateScalars c;
    c.denom = denom;
    if (g.weight_decay != 0 && !c_.decoupled_decay) c.l2_decay = static_cast<float>(g.weight_decay);
    if (g.weight_decay != 0 && c_.decoupled_decay) {
      c.param_scale = static_cast<float>(1. - c_.decay_lr(g.lr) * g.weight_decay);
    }
    if (c_.grad_averaging) c.grad_scale = static_cast<float>(1 - c_.beta1);
    c.beta1 = static_cast<float>(c_.beta1);
    c.neg_lr = static_cast<float>(-g.lr);
    return c;
  }

  // timm's ops one by one, for parameters the loop does not take (not
  // float32, not contiguous, not on the CPU).
  void step_with_ops(const GroupStep& g, std::size_t i) const {
    State& state = *g.states[i];
    const at::Tensor& p = g.params[i];
    const at::Tensor& grad = g.grads[i];
    at::Tensor exp_avg = state.at("exp_avg");
    const at::Tensor denom = update_second_moment(state, at::sum(at::pow(grad, 2)));
    // A new tensor: the gradient is left as it was.
    at::Tensor update = grad / denom;
    if (g.weight_decay != 0) {
      if (c_.decoupled_decay) {
        p.mul_(1. - c_.decay_lr(g.lr) * g.weight_decay);
      } else {
        update.add_(p, g.weight_decay);
      }
    }
    if (c_.grad_averaging) update.mul_(1 - c_.beta1);
    exp_avg.mul_(c_.beta1).add_(update);
    p.add_(exp_avg, -g.lr);
  }

  NovoGradConfig c_;
};

OptimizerPtr make_novograd(std::vector<ParamGroup> groups, const OptimizerArgs& args) {
  const OptimizerKwargs kwargs(
      args, {"betas", "eps", "grad_averaging", "amsgrad", "decoupled_decay", "corrected_weight_decay"});
  check_lr(args);
  const std::vector<double> betas = resolve_betas(args, kwargs, {0.95, 0.98});
  const EpsArg eps = resolve_eps(args, kwargs, 1e-8);
  const DecayLr decay_lr(args, kwargs);
  NovoGradConfig c;
  c.beta1 = betas[0];
  c.beta2 = betas[1];
  c.eps = eps.value;
  c.grad_averaging = kwargs.get_bool("grad_averaging", false);
  c.amsgrad = kwargs.get_bool("amsgrad", false);
  c.decoupled_decay = kwargs.get_bool("decoupled_decay", false);
  // timm corrects the decay only when it is decoupled.
  c.decay_lr = decay_lr;
  const std::string description = describe_optimizer("NvNovoGrad", args.opt,
                                                     {{"lr", python_float_repr(args.lr)},
                                                      {"betas", betas_repr(args, betas, /*always_tuple=*/false)},
                                                      {"eps", eps.repr},
                                                      {"weight_decay", python_float_repr(args.weight_decay)},
                                                      {"grad_averaging", py_bool(c.grad_averaging)},
                                                      {"amsgrad", py_bool(c.amsgrad)},
                                                      {"decoupled_decay", py_bool(c.decoupled_decay)},
                                                      {"corrected_weight_decay", py_bool(decay_lr.corrected())},
                                                      {"max_lr_snapshot", python_float_repr(args.lr)}});
  return std::make_unique<NvNovoGrad>(std::move(groups), args.lr, description, c);
}

}  // namespace
}  // namespace timm

TIMM_PLUGIN("novograd") {
  using timm::bind_defaults;
  // train.py's --lr-base scaling is linear for these names (no "ada" in them).
  registrar.add_optimizer("novograd", "Normalized Adam with L2 norm gradient normalization", timm::make_novograd);
  registrar.add_optimizer("novogradw", "NovoGrad with decoupled weight decay",
                          bind_defaults(timm::make_novograd, {{"decoupled_decay", "True"}}));
  registrar.add_optimizer(
      "novogradc", "NovoGrad with corrected decoupled weight decay (lr²/max_lr scaling)",
      bind_defaults(timm::make_novograd, {{"decoupled_decay", "True"}, {"corrected_weight_decay", "True"}}));
}
