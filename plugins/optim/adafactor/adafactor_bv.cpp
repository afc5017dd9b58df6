// "adafactorbv": timm's AdafactorBigVision (timm/optim/adafactor_bv.py), the
// big_vision variant of Adafactor from 'Scaling Vision Transformers': second
// moments factored over the two largest dims (when the second largest has at
// least min_dim_size_to_factor), beta2 = min(beta2_cap, 1 - step^-decay_rate),
// an optional RMS clip, momentum (--momentum) kept in momentum_dtype
// (bfloat16 by default) and decoupled weight decay, lr-scaled or not
// (unscaled_wd), lr²/max_lr corrected or not, and optional caution.
//
// timm steps tensor by tensor (its only implementation); so does this.
#include "adafactor_bv.hpp"

#include <algorithm>
#include <cmath>
#include <optional>
#include <utility>

#include <ATen/ATen.h>

#include "timm/base/error.hpp"
#include "timm/optim/foreach_optimizer.hpp"

namespace timm::adafactor_bv {
namespace {

struct Settings {
  int64_t min_dim_size_to_factor = 16;
  double decay_rate = 0.8;
  int64_t decay_offset = 0;
  double beta2_cap = 0.999;
  double momentum = 0.9;
  at::ScalarType momentum_dtype = at::kBFloat16;
  std::optional<double> eps;  // None: 1e-30 (1e-7 for float16 gradients)
  std::optional<double> clipping_threshold;
  bool unscaled_wd = false;
  bool caution = false;
  DecayLr decay_lr;  // lr, or lr² / max_lr (corrected_weight_decay)
};

// timm's _factored_dims: the (column, row) dims, the second largest and the
// largest (ties by position), unless the second largest is below `min_size`.
std::optional<std::pair<int64_t, int64_t>> factored_dims(at::IntArrayRef shape, int64_t min_size) {
  if (shape.size() < 2) return std::nullopt;
  std::vector<std::pair<int64_t, int64_t>> sorted;  // (size, dim), as Python sorts the tuples
  for (std::size_t i = 0; i < shape.size(); ++i) sorted.emplace_back(shape[i], static_cast<int64_t>(i));
  std::sort(sorted.begin(), sorted.end());
  const auto& second = sorted[sorted.size() - 2];
  if (second.first < min_size) return std::nullopt;
  return std::make_pair(second.second, sorted.back().second);
}

class AdafactorBigVision : public ForeachOptimizer {
 public:
  AdafactorBigVision(std::vector<ParamGroup> groups, double lr, std::string description, Settings settings)
      : ForeachOptimizer(std::move(groups), lr, std::move(description)), s_(settings) {}

 private:
  bool updates_parameters_independently() const override { return true; }
  void step_group(GroupStep& group) override {
    for (std::size_t i = 0; i < group.params.size(); ++i) {
      step_param(group.lr, group.weight_decay, group.params[i], group.grads[i], *group.states[i]);
    }
  }

  void init_state(State& state, const at::Tensor& grad) const {
    const auto dims = factored_dims(grad.sizes(), s_.min_dim_size_to_factor);
    if (dims) {
      std::vector<int64_t> row_shape = grad.sizes().vec();
      row_shape[dims->second] = 1;
      std::vector<int64_t> col_shape = grad.sizes().vec();
      col_shape[dims->first] = 1;
      state["exp_avg_sq_r"] = grad.new_zeros(row_shape);
      state["exp_avg_sq_c"] = grad.new_zeros(col_shape);
    } else {
      state["exp_avg_sq"] = at::zeros_like(grad, at::MemoryFormat::Preserve);
    }
    state["exp_avg"] = at::zeros_like(grad, grad.options().dtype(s_.momentum_dtype));
  }

  // The update before momentum: the gradient scaled by the second moments.
  at::Tensor scaled_gradient(const at::Tensor& grad, State& state, double one_minus_beta2) const {
    const double eps = s_.eps ? *s_.eps : (grad.scalar_type() == at::kHalf ? 1e-7 : 1e-30);
    const at::Tensor grad_sqr = at::square(grad) + eps;
    if (state.count("exp_avg_sq") != 0) {
      at::Tensor& exp_avg_sq = state.at("exp_avg_sq");
      exp_avg_sq.lerp_(grad_sqr, one_minus_beta2);
      return grad * exp_avg_sq.rsqrt();
    }
    const auto [dc, dr] = *factored_dims(grad.sizes(), s_.min_dim_size_to_factor);
    at::Tensor& exp_avg_sq_r = state.at("exp_avg_sq_r");
    at::Tensor& exp_avg_sq_c = state.at("exp_avg_sq_c");
    exp_avg_sq_r.lerp_(grad_sqr.mean(dr, /*keepdim=*/true), one_minus_beta2);
    exp_avg_sq_c.lerp_(grad_sqr.mean(dc, /*keepdim=*/true), one_minus_beta2);
    const at::Tensor row_col_mean = exp_avg_sq_r.mean(dc, /*keepdim=*/true);
    const at::Tensor row_factor = (exp_avg_sq_r / row_col_mean).rsqrt();
    const at::Tensor col_factor = exp_avg_sq_c.rsqrt();
    return grad * row_factor * col_factor;
  }

  void step_param(double lr, double weight_decay, at::Tensor& param, const at::Tensor& grad, State& state) const {
    if (state.count("exp_avg") == 0) init_state(state, grad);
    at::Tensor& step_t = state.try_emplace("step", at::zeros({}, at::kFloat)).first->second;
    step_t.add_(1);
    const double step = step_t.item<double>();
    const double decay_step = std::max(step - static_cast<double>(s_.decay_offset), 1.0);
    const double beta2 = std::min(s_.beta2_cap, 1.0 - std::pow(decay_step, -s_.decay_rate));

    at::Tensor update = scaled_gradient(grad, state, 1 - beta2);
    if (s_.clipping_threshold) {
      const at::Tensor update_rms = update.norm(2) / std::pow(static_cast<double>(update.numel()), 0.5);
      update.div_((update_rms / *s_.clipping_threshold).clamp_(1.0));
    }
    at::Tensor& exp_avg = state.at("exp_avg");
    if (s_.momentum_dtype != grad.scalar_type()) {
      exp_avg.lerp_(update.to(s_.momentum_dtype), 1 - s_.momentum);
      update = exp_avg.to(grad.scalar_type());
    } else {
      exp_avg.lerp_(update, 1 - s_.momentum);
      update = exp_avg.clone();
    }
    if (s_.caution) update = cautioned({update}, {grad}).front();
    update.mul_(lr);
    if (weight_decay != 0) {
      // unscaled_wd: big_vision's decay without the lr (lr / max_lr when
      // corrected); else AdamW's lr * wd (lr² / max_lr when corrected).
      double scale = s_.decay_lr(lr);
      if (s_.unscaled_wd) scale = s_.decay_lr.corrected() ? lr / *s_.decay_lr.max_lr() : 1.0;
      param.mul_(1. - scale * weight_decay);
    }
    param.add_(update, -1.0);
  }

  Settings s_;
};

at::ScalarType parse_momentum_dtype(const OptimizerArgs& args, const OptimizerKwargs& kwargs, std::string& repr) {
  std::string name = kwargs.has("momentum_dtype") ? kwargs.repr("momentum_dtype", "") : "'bfloat16'";
  name.erase(std::remove(name.begin(), name.end(), '\''), name.end());
  if (name.rfind("torch.", 0) == 0) name = name.substr(6);
  repr = "torch." + name;
  if (name == "bfloat16") return at::kBFloat16;
  if (name == "float16") return at::kHalf;
  if (name == "float32") return at::kFloat;
  throw UsageError("optimizer " + in_quotes(args.opt) + ": momentum_dtype must be 'bfloat16', 'float16' or " +
                   "'float32', got " + in_quotes(name));
}

}  // namespace

OptimizerPtr make_adafactor_bv(std::vector<ParamGroup> groups, const OptimizerArgs& args) {
  // timm has no betas for it (has_betas False): accepted and dropped.
  const OptimizerKwargs kwargs(
      args, {"min_dim_size_to_factor", "decay_rate", "decay_offset", "beta2_cap", "momentum_dtype", "eps",
             "clipping_threshold", "unscaled_wd", "caution", "corrected_weight_decay", "betas"});
  const std::string opt = in_quotes(args.opt);
  check_lr(args);
  Settings s;
  s.min_dim_size_to_factor = static_cast<int64_t>(kwargs.get_double("min_dim_size_to_factor", 16));
  s.decay_rate = kwargs.get_double("decay_rate", 0.8);
  s.decay_offset = static_cast<int64_t>(kwargs.get_double("decay_offset", 0));
  s.beta2_cap = kwargs.get_double("beta2_cap", 0.999);
  s.momentum = args.momentum;
  std::string momentum_dtype_repr;
  s.momentum_dtype = parse_momentum_dtype(args, kwargs, momentum_dtype_repr);
  const OptionalFloatArg eps = optional_float_kwarg(args, kwargs, "eps", std::nullopt);
  s.eps = args.eps ? args.eps : eps.value;
  const std::string eps_repr = args.eps ? python_float_repr(*args.eps) : eps.repr;
  if (s.eps && *s.eps < 0) throw UsageError("optimizer " + opt + ": invalid epsilon " + python_float_repr(*s.eps));
  const OptionalFloatArg clipping = optional_float_kwarg(args, kwargs, "clipping_threshold", std::nullopt);
  s.clipping_threshold = clipping.value;
  s.unscaled_wd = kwargs.get_bool("unscaled_wd", false);
  s.caution = kwargs.get_bool("caution", false);
  s.decay_lr = DecayLr(args, kwargs);
  const std::string description =
      describe_optimizer("AdafactorBigVision", args.opt,
                         {{"lr", python_float_repr(args.lr)},
                          {"min_dim_size_to_factor", kwargs.repr("min_dim_size_to_factor", "16")},
                          {"decay_rate", kwargs.repr("decay_rate", "0.8")},
                          {"decay_offset", kwargs.repr("decay_offset", "0")},
                          {"beta2_cap", kwargs.repr("beta2_cap", "0.999")},
                          {"momentum", python_float_repr(s.momentum)},
                          {"momentum_dtype", momentum_dtype_repr},
                          {"eps", eps_repr},
                          {"weight_decay", python_float_repr(args.weight_decay)},
                          {"clipping_threshold", clipping.repr},
                          {"unscaled_wd", kwargs.repr("unscaled_wd", "False")},
                          {"caution", kwargs.repr("caution", "False")},
                          {"corrected_weight_decay", kwargs.repr("corrected_weight_decay", "False")},
                          {"max_lr_snapshot", python_float_repr(args.lr)}});
  return std::make_unique<AdafactorBigVision>(std::move(groups), args.lr, description, s);
}

}  // namespace timm::adafactor_bv
