// "madgrad" and "madgradw": timm's MADGRAD (timm/optim/madgrad.py), dual
// averaging with a cube-root denominator; momentum as an average of the
// iterate with its starting point; madgradw decouples the weight decay.
// Dense gradients only. On the CPU in one pass per parameter, chunk by chunk,
// instead of timm's seven ops; other tensors run the ops.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "timm/base/error.hpp"
#include "timm/base/simd.hpp"
#include "timm/optim/foreach_optimizer.hpp"
#include "timm/optim/optimizer.hpp"
#include "timm/plugin/plugin.hpp"

namespace timm {
namespace {

using Tensors = std::vector<at::Tensor>;

struct MadgradSettings {
  double momentum = 0.9;
  double eps = 1e-6;
  bool decoupled_decay = false;
};

// The float32 scalars of one parameter's update, as timm's per-tensor ops
// cast them.
struct ChunkScalars {
  float lamb;  // lr * sqrt(step)
  float eps;
  float grad_decay;   // coupled weight decay, added to the gradient; 0 otherwise
  float param_scale;  // decoupled: p *= 1 - lr * weight_decay first; 1 otherwise
  float keep;         // momentum: p = p * keep + ck * z
  float ck;
};

// The loops below make timm's update one element after another over a chunk
// of a parameter; the cube root between them is torch's pow over the chunk
// (in cache), so that it rounds as timm's. Each value of p, the gradient and
// the state is read and written once from memory where timm's ops make about
// 22 accesses per element.

// grad_sum_sq += lamb g², s += lamb g; g with the coupled decay.
TIMM_AVX2_CLONES
void accumulate(const float* __restrict param, const float* __restrict grad, float* __restrict grad_sum_sq,
                float* __restrict s, int64_t n, const ChunkScalars c) {
  for (int64_t i = 0; i < n; ++i) {
    const float coupled = grad[i] + c.grad_decay * param[i];  // then selected: no branch in the loop
    const float g = c.grad_decay != 0 ? coupled : grad[i];
    grad_sum_sq[i] = grad_sum_sq[i] + c.lamb * g * g;
    s[i] = s[i] + c.lamb * g;
  }
}

// With momentum: p = p * (1 - ck) + ck * z, z = x0 - s / (cbrt + eps).
TIMM_AVX2_CLONES
void momentum_step(float* __restrict param, const float* __restrict x0, const float* __restrict s,
                   const float* __restrict cube_root, int64_t n, const ChunkScalars c) {
  for (int64_t i = 0; i < n; ++i) {
    const float z = x0[i] - s[i] / (cube_root[i] + c.eps);
    const float scaled = param[i] * c.param_scale;
    const float p = c.param_scale != 1 ? scaled : param[i];
    param[i] = p * c.keep + c.ck * z;
  }
}

// Without momentum, before accumulate: timm's x0 = p + s / (cbrt + eps)
// from the state before this step (p decayed first).
TIMM_AVX2_CLONES
void dual_anchor(const float* __restrict param, const float* __restrict s, const float* __restrict cube_root,
                 float* __restrict x0, int64_t n, const ChunkScalars c) {
  for (int64_t i = 0; i < n; ++i) {
    const float scaled = param[i] * c.param_scale;
    const float p = c.param_scale != 1 ? scaled : param[i];
    x0[i] = p + s[i] / (cube_root[i] + c.eps);
  }
}

// Without momentum: p = x0 - s / (cbrt + eps).
TIMM_AVX2_CLONES
void dual_step(float* __restrict param, const float* __restrict x0, const float* __restrict s,
               const float* __restrict cube_root, int64_t n, const ChunkScalars c) {
  for (int64_t i = 0; i < n; ++i) param[i] = x0[i] - s[i] / (cube_root[i] + c.eps);
}

// Elements per chunk: the chunk's cube roots (and x0 without momentum) stay
// in L2 between the loops; a chunk costs a few microseconds of op overhead.
constexpr int64_t kChunk = 32768;

// grad_sum_sq ^ (1/3) into `out`, with timm's op (torch's vectorised pow).
void cube_root(const float* grad_sum_sq, int64_t n, const at::Tensor& out) {
  const at::Tensor in = at::from_blob(const_cast<float*>(grad_sum_sq), {n}, at::TensorOptions(at::kFloat));
  at::Tensor target = out.narrow(0, 0, n);
  at::pow_out(target, in, 1.0 / 3);
}

class Madgrad : public ForeachOptimizer {
 public:
  Madgrad(std::vector<ParamGroup> groups, double lr, std::string description, MadgradSettings settings)
      : ForeachOptimizer(std::move(groups), lr, std::move(description)), s_(settings) {}

 private:
  bool updates_parameters_independently() const override { return true; }
  void step_group(GroupStep& group) override {
    for (std::size_t i = 0; i < group.params.size(); ++i) {
      State& state = *group.states[i];
      if (state.empty()) {
        state["step"] = at::zeros({}, at::kLong);
        state["grad_sum_sq"] = at::zeros_like(group.params[i]);
        state["s"] = at::zeros_like(group.params[i]);
        if (s_.momentum != 0) state["x0"] = group.params[i].detach().clone();
      }
      state["step"].add_(1);
    }
    const Tensors grad_sum_sq = state_list(group, "grad_sum_sq");
    const Tensors s = state_list(group, "s");
    const Tensors x0 = s_.momentum != 0 ? state_list(group, "x0") : Tensors{};
    if (fused_cpu_kernels_apply({group.params, group.grads, grad_sum_sq, s, x0})) {
      for (std::size_t i = 0; i < group.params.size(); ++i) {
        const int64_t step = group.states[i]->at("step").item<int64_t>();
        update_in_chunks(group.params[i], group.grads[i], grad_sum_sq[i], s[i], s_.momentum != 0 ? x0[i] : at::Tensor(),
                         scalars(group, step));
      }
      return;
    }
    // Parameters skipped on some steps have their own step count, hence
    // their own lamb: one foreach pass per distinct step.
    std::map<int64_t, std::vector<std::size_t>> by_step;
    for (std::size_t i = 0; i < group.params.size(); ++i) {
      by_step[group.states[i]->at("step").item<int64_t>()].push_back(i);
    }
    for (const auto& [step, indices] : by_step) {
      update(group.subset(indices), step, select(grad_sum_sq, indices), select(s, indices),
             s_.momentum != 0 ? select(x0, indices) : Tensors{});
    }
  }

  ChunkScalars scalars(const GroupStep& group, int64_t step) const {
    const double lr = group.lr + s_.eps;
    const double wd = group.weight_decay;
    const double ck = 1 - s_.momentum;
    return {static_cast<float>(lr * std::sqrt(static_cast<double>(step))),
            static_cast<float>(s_.eps),
            static_cast<float>(wd != 0 && !s_.decoupled_decay ? wd : 0.0),
            static_cast<float>(s_.decoupled_decay ? 1.0 - group.lr * wd : 1.0),
            static_cast<float>(1 - ck),
            static_cast<float>(ck)};
  }

  // The loops over one contiguous float32 parameter, chunk by chunk, the
  // chunks across the intra-op threads. The writes bypass the dispatcher, so
  // the versions are bumped here as the in-place ops would.
  void update_in_chunks(const at::Tensor& param, const at::Tensor& grad, const at::Tensor& grad_sum_sq,
                        const at::Tensor& s, const at::Tensor& x0, const ChunkScalars& c) const {
    float* p = param.data_ptr<float>();
    const float* g = grad.data_ptr<float>();
    float* v = grad_sum_sq.data_ptr<float>();
    float* sp = s.data_ptr<float>();
    const float* anchor = x0.defined() ? x0.data_ptr<float>() : nullptr;
    const int64_t n = param.numel();
    const int64_t chunks = (n + kChunk - 1) / kChunk;
    at::parallel_for(0, chunks, 1, [&](int64_t first, int64_t last) {
      const int64_t size = std::min(kChunk, n);
      const at::Tensor root = at::empty({size}, at::kFloat);
      const at::Tensor dual_x0 = anchor ? at::Tensor() : at::empty({size}, at::kFloat);
      const float* r = root.data_ptr<float>();
      float* x = anchor ? nullptr : dual_x0.data_ptr<float>();
      for (int64_t chunk = first; chunk < last; ++chunk) {
        const int64_t b = chunk * kChunk;
        const int64_t len = std::min(kChunk, n - b);
        if (anchor) {
          accumulate(p + b, g + b, v + b, sp + b, len, c);
          cube_root(v + b, len, root);
          momentum_step(p + b, anchor + b, sp + b, r, len, c);
        } else {
          cube_root(v + b, len, root);
          dual_anchor(p + b, sp + b, r, x, len, c);
          accumulate(p + b, g + b, v + b, sp + b, len, c);
          cube_root(v + b, len, root);
          dual_step(p + b, x, sp + b, r, len, c);
        }
      }
    });
    bump_versions({param, grad_sum_sq, s});
  }

  // The op path over parameters that share a step count, on their state
  // lists; `anchor` is x0 with momentum, empty without.
  void update(const GroupStep& group, int64_t step, const Tensors& grad_sum_sq, const Tensors& s,
              const Tensors& anchor) {
    const Tensors& params = group.params;
    Tensors grads = group.grads;
    const double eps = s_.eps;
    const double lr = group.lr + eps;
    const double wd = group.weight_decay;
    const double ck = 1 - s_.momentum;
    const double lamb = lr * std::sqrt(static_cast<double>(step));
    if (wd != 0) {
      if (s_.decoupled_decay) {
        at::_foreach_mul_(params, 1.0 - group.lr * wd);
      } else {
        grads = at::_foreach_add(grads, params, wd);  // p.grad left unmodified
      }
    }
    Tensors x0 = anchor;
    if (s_.momentum == 0) {
      // x0 from the other known quantities.
      Tensors rms = at::_foreach_pow(grad_sum_sq, 1.0 / 3);
      at::_foreach_add_(rms, eps);
      x0 = at::_foreach_addcdiv(params, s, rms, 1);
    }
    at::_foreach_addcmul_(grad_sum_sq, grads, grads, lamb);
    Tensors rms = at::_foreach_pow(grad_sum_sq, 1.0 / 3);
    at::_foreach_add_(rms, eps);
    at::_foreach_add_(s, grads, lamb);
    const Tensors z = at::_foreach_addcdiv(x0, s, rms, -1);
    if (s_.momentum == 0) {
      at::_foreach_copy_(params, z);
    } else {
      // p is a moving average of z
      at::_foreach_mul_(params, 1 - ck);
      at::_foreach_add_(params, z, ck);
    }
  }

  MadgradSettings s_;
};

OptimizerPtr make_madgrad(std::vector<ParamGroup> groups, const OptimizerArgs& args, bool decoupled_default) {
  const OptimizerKwargs kwargs(args, {"eps", "decoupled_decay", "betas"});
  const std::string opt = timm::in_quotes(args.opt);
  MadgradSettings s;
  s.momentum = args.momentum;
  s.eps = args.eps ? *args.eps : kwargs.get_double("eps", 1e-6);
  s.decoupled_decay = kwargs.get_bool("decoupled_decay", decoupled_default);
  if (s.momentum < 0 || s.momentum >= 1) {
    throw UsageError("optimizer " + opt + ": --momentum " + python_float_repr(s.momentum) + " must be in [0, 1)");
  }
  if (args.lr <= 0)
    throw UsageError("optimizer " + opt + ": learning rate " + python_float_repr(args.lr) + " must be positive");
  if (args.weight_decay < 0) {
    throw UsageError("optimizer " + opt + ": --weight-decay " + python_float_repr(args.weight_decay) +
                     " must be non-negative");
  }
  if (s.eps < 0) throw UsageError("optimizer " + opt + ": eps must be non-negative");
  const std::string description =
      describe_optimizer("MADGRAD", args.opt,
                         {{"lr", python_float_repr(args.lr)},
                          {"eps", args.eps ? python_float_repr(*args.eps) : kwargs.repr("eps", "1e-06")},
                          {"momentum", python_float_repr(s.momentum)},
                          {"weight_decay", python_float_repr(args.weight_decay)},
                          {"decoupled_decay", kwargs.repr("decoupled_decay", py_bool(decoupled_default))}});
  return std::make_unique<Madgrad>(std::move(groups), args.lr, description, s);
}

}  // namespace
}  // namespace timm

TIMM_PLUGIN("madgrad") {
  using timm::OptimizerArgs;
  using timm::ParamGroup;
  registrar.add_optimizer("madgrad", "Momentum-based Adaptive gradient method",
                          [](std::vector<ParamGroup> groups, const OptimizerArgs& args) {
                            return timm::make_madgrad(std::move(groups), args, /*decoupled_default=*/false);
                          });
  registrar.add_optimizer("madgradw", "MADGRAD with decoupled weight decay",
                          [](std::vector<ParamGroup> groups, const OptimizerArgs& args) {
                            return timm::make_madgrad(std::move(groups), args, /*decoupled_default=*/true);
                          });
}
