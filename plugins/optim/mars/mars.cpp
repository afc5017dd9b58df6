// "mars", "cmars": timm.optim.Mars (MARS, arXiv 2411.10438): a variance
// reduced gradient c_t = g + gamma·beta1/(1-beta1)·(g - g_prev), clipped to
// unit norm, feeds AdamW moments (mars_type "adamw") or a Lion sign update
// ("lion"). Per parameter, with its own step count and last gradient:
// parameters with fewer than two dims take plain AdamW steps with betas_1d
// and lr·lr_1d_factor unless optimize_1d. Decoupled weight decay (lr·wd·p),
// optional caution. Without caution, contiguous float32 CPU parameters take
// the update after the clipping's norm in one loop of timm-cpp's own
// (timm's Mars takes no foreach; the ops run for other tensors).
#include <ATen/Parallel.h>

#include <cmath>
#include <optional>

#include "timm/base/error.hpp"
#include "timm/base/simd.hpp"
#include "timm/optim/elementwise.hpp"
#include "timm/optim/foreach_optimizer.hpp"
#include "timm/plugin/plugin.hpp"

namespace timm {
namespace {

using Tensors = std::vector<at::Tensor>;
using Scalars = std::vector<c10::Scalar>;

struct MarsConfig {
  double beta1 = 0.9;
  double beta2 = 0.99;
  double eps = 1e-8;
  double gamma = 0.025;
  bool lion = false;  // mars_type "lion", else "adamw"
  bool optimize_1d = false;
  double lr_1d_factor = 1.0;
  double beta1_1d = 0.9;
  double beta2_1d = 0.99;
  bool caution = false;
};

// The update after c_t's norm one element after another: each value read
// and written once where the eleven ops after the norm read or write about
// 25 values per element; within float32 rounding of the ops (ATen's
// formulas per element). Vectorises (the plugin builds with -fno-math-errno
// for sqrt), with an AVX2 clone where the CPU has it.
struct MarsScalars {
  float norm;  // max(1, ||c_t||): c_t's divisor
  float beta1;
  float one_minus_beta1;
  float beta2;
  float one_minus_beta2;
  float bias_correction1;
  float bias_correction2_sqrt;
  float eps;
  float weight_decay;
  float neg_lr;
};

// mars_type "adamw": the AdamW moments and step of the clipped c_t.
TIMM_AVX2_CLONES
void mars_adamw_one_pass(float* __restrict param, const float* __restrict c_t, float* __restrict exp_avg,
                         float* __restrict exp_avg_sq, int64_t n, const MarsScalars s) {
  for (int64_t i = 0; i < n; ++i) {
    const float c = c_t[i] / s.norm;
    const float m = exp_avg[i] * s.beta1 + s.one_minus_beta1 * c;
    const float v = exp_avg_sq[i] * s.beta2 + s.one_minus_beta2 * c * c;
    const float denom = std::sqrt(v) / s.bias_correction2_sqrt + s.eps;
    const float update = param[i] * s.weight_decay + m / s.bias_correction1 / denom;
    param[i] = param[i] + s.neg_lr * update;
    exp_avg[i] = m;
    exp_avg_sq[i] = v;
  }
}

// mars_type "lion": the sign of the first moment (exp_avg_sq untouched).
TIMM_AVX2_CLONES
void mars_lion_one_pass(float* __restrict param, const float* __restrict c_t, float* __restrict exp_avg,
                        float* __restrict /*exp_avg_sq*/, int64_t n, const MarsScalars s) {
  for (int64_t i = 0; i < n; ++i) {
    const float m = exp_avg[i] * s.beta1 + s.one_minus_beta1 * (c_t[i] / s.norm);
    param[i] = param[i] + s.neg_lr * (param[i] * s.weight_decay + aten_sign(m));
    exp_avg[i] = m;
  }
}

// 1 - beta^step and sqrt(1 - beta2^step) of each step count.
Scalars bias_corrections(double beta, const std::vector<double>& steps, bool take_sqrt) {
  Scalars out;
  out.reserve(steps.size());
  for (double step : steps) {
    const double correction = 1.0 - std::pow(beta, step);
    out.emplace_back(take_sqrt ? std::sqrt(correction) : correction);
  }
  return out;
}

class Mars : public ForeachOptimizer {
 public:
  Mars(std::vector<ParamGroup> groups, double lr, std::string description, MarsConfig config)
      : ForeachOptimizer(std::move(groups), lr, std::move(description)), c_(config) {}

 private:
  bool updates_parameters_independently() const override { return true; }
  void step_group(GroupStep& g) override {
    for (std::size_t i = 0; i < g.params.size(); ++i) {
      if (!g.states[i]->empty()) continue;
      (*g.states[i])["exp_avg"] = at::zeros_like(g.params[i]);
      (*g.states[i])["last_grad"] = at::zeros_like(g.params[i]);
      (*g.states[i])["exp_avg_sq"] = at::zeros_like(g.params[i]);
    }
    // timm's step is a Python int: a float64 here.
    const std::vector<double> steps = increment_steps(g, at::kDouble);
    std::vector<std::size_t> mars;
    std::vector<std::size_t> adamw_1d;
    for (std::size_t i = 0; i < g.params.size(); ++i) {
      (c_.optimize_1d || g.grads[i].dim() >= 2 ? mars : adamw_1d).push_back(i);
    }
    if (!mars.empty()) mars_step(g.subset(mars), select_steps(steps, mars));
    if (!adamw_1d.empty()) adamw_1d_step(g.subset(adamw_1d), select_steps(steps, adamw_1d));
    // timm copies the gradient (a later in-place accumulation must not change it).
    at::_foreach_copy_(state_list(g, "last_grad"), g.grads);
  }

  static std::vector<double> select_steps(const std::vector<double>& steps, const std::vector<std::size_t>& indices) {
    std::vector<double> out;
    out.reserve(indices.size());
    for (std::size_t i : indices) out.push_back(steps[i]);
    return out;
  }

  // timm's _mars_single_tensor_step for 2-D+ (or all, optimize_1d) tensors.
  void mars_step(const GroupStep& a, const std::vector<double>& steps) {
    const double one_minus_beta1 = 1.0 - c_.beta1;
    // c_t: the gradient on a parameter's first step (timm's addition), else
    // the variance-reduced one.
    Tensors c_t = a.grads;
    std::vector<std::size_t> later;
    for (std::size_t i = 0; i < steps.size(); ++i) {
      if (steps[i] != 1) later.push_back(i);
    }
    if (!later.empty()) {
      const Tensors later_grads = select(a.grads, later);
      Tensors corrected = at::_foreach_sub(later_grads, select(state_list(a, "last_grad"), later));
      at::_foreach_mul_(corrected, c_.gamma * (c_.beta1 / one_minus_beta1));
      at::_foreach_add_(corrected, later_grads);
      for (std::size_t k = 0; k < later.size(); ++k) c_t[later[k]] = corrected[k];
    }
    // c_t / max(1, ||c_t||), not in place (c_t may be the gradient).
    std::vector<at::Tensor> norms = at::_foreach_norm(c_t);
    for (at::Tensor& norm : norms) norm.clamp_min_(1.0);
    const Tensors exp_avgs = state_list(a, "exp_avg");
    const Tensors exp_avg_sqs = state_list(a, "exp_avg_sq");
    if (!c_.caution && fused_cpu_kernels_apply({a.params, c_t, exp_avgs, exp_avg_sqs})) {
      for (std::size_t i = 0; i < steps.size(); ++i) {
        run_one_pass_loop(a.params[i], c_t[i], exp_avgs[i], exp_avg_sqs[i],
                          c_.lion ? mars_lion_one_pass : mars_adamw_one_pass, scalars(a, steps[i], norms[i]));
      }
      return;
    }
    c_t = at::_foreach_div(c_t, norms);

    at::_foreach_mul_(exp_avgs, c_.beta1);
    at::_foreach_add_(exp_avgs, c_t, one_minus_beta1);
    // Caution masks a copy: the state keeps the unmasked moment.
    const Tensors avgs = c_.caution ? cautioned(exp_avgs, a.grads) : exp_avgs;

    Tensors updates = at::_foreach_mul(a.params, a.weight_decay);
    if (c_.lion) {
      at::_foreach_add_(updates, at::_foreach_sign(avgs));
    } else {
      at::_foreach_mul_(exp_avg_sqs, c_.beta2);
      at::_foreach_addcmul_(exp_avg_sqs, c_t, c_t, 1.0 - c_.beta2);
      Tensors denom = at::_foreach_sqrt(exp_avg_sqs);
      at::_foreach_div_(denom, bias_corrections(c_.beta2, steps, /*take_sqrt=*/true));
      at::_foreach_add_(denom, c_.eps);
      Tensors adam = at::_foreach_div(avgs, bias_corrections(c_.beta1, steps, /*take_sqrt=*/false));
      at::_foreach_div_(adam, denom);
      at::_foreach_add_(updates, adam);
    }
    at::_foreach_add_(a.params, updates, -a.lr);
  }

  MarsScalars scalars(const GroupStep& a, double step, const at::Tensor& norm) const {
    const auto f = [](double x) { return static_cast<float>(x); };
    return {norm.item<float>(),
            f(c_.beta1),
            f(1.0 - c_.beta1),
            f(c_.beta2),
            f(1.0 - c_.beta2),
            f(1.0 - std::pow(c_.beta1, step)),
            f(std::sqrt(1.0 - std::pow(c_.beta2, step))),
            f(c_.eps),
            f(a.weight_decay),
            f(-a.lr)};
  }

  // timm's AdamW fallback for tensors with fewer than two dims.
  void adamw_1d_step(const GroupStep& a, const std::vector<double>& steps) {
    const Tensors exp_avgs = state_list(a, "exp_avg");
    const Tensors exp_avg_sqs = state_list(a, "exp_avg_sq");
    at::_foreach_mul_(exp_avgs, c_.beta1_1d);
    at::_foreach_add_(exp_avgs, a.grads, 1.0 - c_.beta1_1d);
    at::_foreach_mul_(exp_avg_sqs, c_.beta2_1d);
    at::_foreach_addcmul_(exp_avg_sqs, a.grads, a.grads, 1.0 - c_.beta2_1d);
    Tensors denom = at::_foreach_sqrt(exp_avg_sqs);
    at::_foreach_div_(denom, bias_corrections(c_.beta2_1d, steps, /*take_sqrt=*/true));
    at::_foreach_add_(denom, c_.eps);
    const Tensors avgs = c_.caution ? cautioned(exp_avgs, a.grads) : exp_avgs;
    Tensors adam = at::_foreach_div(avgs, bias_corrections(c_.beta1_1d, steps, /*take_sqrt=*/false));
    at::_foreach_div_(adam, denom);
    Tensors updates = at::_foreach_mul(a.params, a.weight_decay);
    at::_foreach_add_(updates, adam);
    at::_foreach_add_(a.params, updates, -(a.lr * c_.lr_1d_factor));
  }

  MarsConfig c_;
};

// A string kwarg as ParseKwargs reads it: quotes optional.
std::string string_kwarg(const OptimizerArgs& args, const std::string& key, const std::string& fallback) {
  const auto it = args.kwargs.find(key);
  if (it == args.kwargs.end()) return fallback;
  std::string s = it->second;
  s.erase(0, s.find_first_not_of(" \t"));
  s.erase(s.find_last_not_of(" \t") + 1);
  if (s.size() >= 2 && (s.front() == '\'' || s.front() == '"') && s.back() == s.front()) s = s.substr(1, s.size() - 2);
  return s;
}

OptimizerPtr make_mars(std::vector<ParamGroup> groups, const OptimizerArgs& args) {
  const OptimizerKwargs kwargs(
      args, {"betas", "eps", "gamma", "mars_type", "optimize_1d", "lr_1d_factor", "betas_1d", "caution"});
  const std::string opt = in_quotes(args.opt);
  check_lr(args);
  const std::vector<double> betas = resolve_betas(args, kwargs, {0.9, 0.99});
  const EpsArg eps = resolve_eps(args, kwargs, 1e-8);
  const std::string mars_type = string_kwarg(args, "mars_type", "adamw");
  if (mars_type != "adamw" && mars_type != "lion") {
    throw UsageError("optimizer " + opt + ": mars_type must be 'adamw' or 'lion', got " + in_quotes(mars_type));
  }
  // betas_1d None (the default) takes betas, as timm's `betas_1d or betas`.
  const bool own_betas_1d = kwargs.has("betas_1d") && string_kwarg(args, "betas_1d", "") != "None";
  const std::vector<double> betas_1d = own_betas_1d ? kwargs.get_doubles("betas_1d", betas) : betas;
  if (betas_1d.size() != 2) {
    throw UsageError("optimizer " + opt + ": betas_1d needs 2 values, got " + std::to_string(betas_1d.size()));
  }
  std::string betas_1d_repr = betas_repr(args, betas, /*always_tuple=*/false);
  if (own_betas_1d) {
    // Python's repr of the literal: a list or a tuple.
    const bool list = string_kwarg(args, "betas_1d", "").front() == '[';
    betas_1d_repr = list ? "[" : "(";
    for (std::size_t i = 0; i < betas_1d.size(); ++i) {
      betas_1d_repr += (i ? ", " : "") + python_float_repr(betas_1d[i]);
    }
    betas_1d_repr += list ? "]" : ")";
  }
  MarsConfig c;
  c.beta1 = betas[0];
  c.beta2 = betas[1];
  c.eps = eps.value;
  c.gamma = kwargs.get_double("gamma", 0.025);
  c.lion = mars_type == "lion";
  c.optimize_1d = kwargs.get_bool("optimize_1d", false);
  c.lr_1d_factor = kwargs.get_double("lr_1d_factor", 1.0);
  c.beta1_1d = betas_1d[0];
  c.beta2_1d = betas_1d[1];
  c.caution = kwargs.get_bool("caution", false);
  // timm prints the defaults with str(): mars_type without quotes.
  const std::string description = describe_optimizer("Mars", args.opt,
                                                     {{"lr", python_float_repr(args.lr)},
                                                      {"betas", betas_repr(args, betas, /*always_tuple=*/false)},
                                                      {"eps", eps.repr},
                                                      {"weight_decay", python_float_repr(args.weight_decay)},
                                                      {"mars_type", mars_type},
                                                      {"gamma", kwargs.repr("gamma", "0.025")},
                                                      {"optimize_1d", kwargs.repr("optimize_1d", "False")},
                                                      {"lr_1d_factor", kwargs.repr("lr_1d_factor", "1.0")},
                                                      {"betas_1d", betas_1d_repr},
                                                      {"caution", kwargs.repr("caution", "False")}});
  return std::make_unique<Mars>(std::move(groups), args.lr, description, c);
}

}  // namespace
}  // namespace timm

TIMM_PLUGIN("mars") {
  using timm::bind_defaults;
  registrar.add_optimizer("mars", "Unleashing the Power of Variance Reduction for Training Large Models",
                          timm::make_mars);
  registrar.add_optimizer("cmars", "Cautious MARS", bind_defaults(timm::make_mars, {{"caution", "True"}}));
}
