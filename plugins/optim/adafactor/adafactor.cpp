// "adafactor": timm's Adafactor (timm/optim/adafactor.py): second moments
// factored into row and column averages for tensors with two dims larger
// than min_dim_size_to_factor (the leading two of a conv weight, else the
// trailing two), updates clipped by their RMS, a first moment only with
// betas. train.py always passes an lr, so the relative step is off and the
// lr is used as given (timm applies no parameter scale to an external lr).
//
// The factored moments reduce over per-tensor dims, so this steps tensor by
// tensor as timm does.
#include <cmath>
#include <optional>
#include <utility>

#include <ATen/ATen.h>

#include "adafactor_bv.hpp"
#include "timm/base/error.hpp"
#include "timm/optim/foreach_optimizer.hpp"
#include "timm/optim/optimizer.hpp"
#include "timm/plugin/plugin.hpp"

namespace timm {
namespace {

struct AdafactorSettings {
  double eps = 1e-30;
  double clip_threshold = 1.0;
  double decay_rate = -0.8;
  std::optional<double> beta1;
  int64_t min_dim_size_to_factor = 16;
  bool caution = false;
};

// timm's _get_options: the (col, row) dims factored, if any.
std::optional<std::pair<int64_t, int64_t>> factored_dims(at::IntArrayRef shape, int64_t min_size) {
  const auto ndim = static_cast<int64_t>(shape.size());
  if (ndim > 2 && shape[0] > min_size && shape[1] > min_size) return std::make_pair<int64_t, int64_t>(0, 1);
  if (ndim >= 2 && shape[ndim - 2] > min_size && shape[ndim - 1] > min_size) {
    return std::make_pair(ndim - 2, ndim - 1);
  }
  return std::nullopt;
}

at::Tensor rms(const at::Tensor& t) { return t.norm(2) / std::pow(static_cast<double>(t.numel()), 0.5); }

class Adafactor : public ForeachOptimizer {
 public:
  Adafactor(std::vector<ParamGroup> groups, double lr, std::string description, AdafactorSettings settings)
      : ForeachOptimizer(std::move(groups), lr, std::move(description)), s_(settings) {}

 private:
  bool updates_parameters_independently() const override { return true; }
  void step_group(GroupStep& group) override {
    for (std::size_t i = 0; i < group.params.size(); ++i) {
      step_param(group, group.params[i], group.grads[i], *group.states[i]);
    }
  }

  void init_state(State& state, const at::Tensor& grad, const std::optional<std::pair<int64_t, int64_t>>& dims) {
    state["step"] = at::zeros({}, at::kLong);
    if (s_.beta1) state["exp_avg"] = at::zeros_like(grad);
    if (dims) {
      state["exp_avg_sq_row"] = at::zeros_like(grad.select(dims->second, 0));
      state["exp_avg_sq_col"] = at::zeros_like(grad.select(dims->first, 0));
    } else {
      state["exp_avg_sq"] = at::zeros_like(grad);
    }
  }

  void step_param(const GroupStep& group, at::Tensor param, at::Tensor grad, State& state) {
    const bool low_precision = param.scalar_type() == at::kHalf || param.scalar_type() == at::kBFloat16;
    if (grad.scalar_type() == at::kHalf || grad.scalar_type() == at::kBFloat16) grad = grad.to(at::kFloat);
    const auto dims = factored_dims(grad.sizes(), s_.min_dim_size_to_factor);
    if (state.empty()) init_state(state, grad, dims);
    at::Tensor p = low_precision ? param.to(at::kFloat) : param;
    state["step"].add_(1);
    state["RMS"] = rms(p);
    const double lr_t = group.lr;
    const double step = static_cast<double>(state["step"].item<int64_t>());
    const double beta2t = 1.0 - std::pow(step, s_.decay_rate);
    at::Tensor update = grad.pow(2) + s_.eps;
    if (dims) {
      const auto [dim_col, dim_row] = *dims;
      at::Tensor& row = state["exp_avg_sq_row"];
      at::Tensor& col = state["exp_avg_sq_col"];
      row.lerp_(update.mean(dim_row), 1.0 - beta2t);
      col.lerp_(update.mean(dim_col), 1.0 - beta2t);
      // The approximation of the squared-gradient average from its factors.
      const at::Tensor r_factor = (row / row.mean(dim_col, /*keepdim=*/true)).rsqrt_().unsqueeze(dim_row);
      const at::Tensor c_factor = col.unsqueeze(dim_col).rsqrt();
      update = at::mul(r_factor, c_factor);
      update.mul_(grad);
    } else {
      at::Tensor& exp_avg_sq = state["exp_avg_sq"];
      exp_avg_sq.lerp_(update, 1.0 - beta2t);
      update = exp_avg_sq.rsqrt().mul_(grad);
    }
    update.div_((rms(update) / s_.clip_threshold).clamp_(1.0));
    update.mul_(lr_t);
    if (s_.beta1) {
      at::Tensor& exp_avg = state["exp_avg"];
      exp_avg.lerp_(update, 1 - *s_.beta1);
      update = s_.caution ? cautioned({exp_avg}, {grad}).front() : exp_avg;
    }
    if (group.weight_decay != 0) p.add_(p, -group.weight_decay * lr_t);
    p.add_(-update);
    if (low_precision) param.copy_(p);
  }

  AdafactorSettings s_;
};

OptimizerPtr make_adafactor(std::vector<ParamGroup> groups, const OptimizerArgs& args) {
  const OptimizerKwargs kwargs(args, {"eps", "eps_scale", "clip_threshold", "decay_rate", "betas", "scale_parameter",
                                      "warmup_init", "min_dim_size_to_factor", "caution"});
  const std::string opt = timm::in_quotes(args.opt);
  AdafactorSettings s;
  s.eps = args.eps ? *args.eps : kwargs.get_double("eps", 1e-30);
  s.clip_threshold = kwargs.get_double("clip_threshold", 1.0);
  s.decay_rate = kwargs.get_double("decay_rate", -0.8);
  const bool has_betas = args.betas || kwargs.has("betas");
  std::string beta1_repr = "None";
  if (has_betas) {
    const std::vector<double> betas = args.betas ? *args.betas : kwargs.get_doubles("betas", {});
    if (betas.empty()) throw UsageError("optimizer " + opt + ": betas needs at least 1 value");
    s.beta1 = betas[0];
    beta1_repr = python_float_repr(betas[0]);
  }
  const double min_dim = kwargs.get_double("min_dim_size_to_factor", 16);
  s.min_dim_size_to_factor = static_cast<int64_t>(min_dim);
  s.caution = kwargs.get_bool("caution", false);
  if (kwargs.get_bool("warmup_init", false)) {
    throw UsageError("optimizer " + opt + ": warmup_init requires relative_step=True, which needs no --lr");
  }
  const std::string description =
      describe_optimizer("Adafactor", args.opt,
                         {{"lr", python_float_repr(args.lr)},
                          {"eps", args.eps ? python_float_repr(*args.eps) : kwargs.repr("eps", "1e-30")},
                          {"eps_scale", kwargs.repr("eps_scale", "0.001")},
                          {"clip_threshold", kwargs.repr("clip_threshold", "1.0")},
                          {"decay_rate", kwargs.repr("decay_rate", "-0.8")},
                          {"beta1", beta1_repr},
                          {"weight_decay", python_float_repr(args.weight_decay)},
                          {"scale_parameter", kwargs.repr("scale_parameter", "True")},
                          {"relative_step", "False"},
                          {"warmup_init", kwargs.repr("warmup_init", "False")},
                          {"min_dim_size_to_factor", kwargs.repr("min_dim_size_to_factor", "16")},
                          {"caution", kwargs.repr("caution", "False")}});
  return std::make_unique<Adafactor>(std::move(groups), args.lr, description, s);
}

}  // namespace
}  // namespace timm

TIMM_PLUGIN("adafactor") {
  // train.py scales --lr-base by the square root of the batch ratio for
  // timm's adaptive optimizers ("ada" in the name).
  const timm::OptimizerTraits sqrt_lr{.lr_base_scale = timm::LrBaseScale::kSqrt};
  registrar.add_optimizer("adafactor", "Memory-efficient implementation of Adam with factored gradients",
                          timm::make_adafactor, sqrt_lr);
  // Caution acts on the first moment, so timm turns beta1 on with it.
  registrar.add_optimizer("cadafactor", "Cautious Adafactor",
                          timm::bind_defaults(timm::make_adafactor, {{"caution", "True"}, {"betas", "(0.9, 0.999)"}}),
                          sqrt_lr);
  using timm::adafactor_bv::make_adafactor_bv;
  registrar.add_optimizer("adafactorbv",
                          "Big Vision variant of Adafactor with factored gradients, half precision momentum",
                          make_adafactor_bv, sqrt_lr);
  registrar.add_optimizer("adafactorbvc",
                          "Adafactor Big Vision with corrected weight decay (lr²/max_lr or lr/max_lr scaling)",
                          timm::bind_defaults(make_adafactor_bv, {{"corrected_weight_decay", "True"}}), sqrt_lr);
  registrar.add_optimizer("cadafactorbv", "Cautious Big Vision Adafactor",
                          timm::bind_defaults(make_adafactor_bv, {{"caution", "True"}}), sqrt_lr);
  registrar.add_optimizer(
      "cadafactorbvc", "Cautious Adafactor Big Vision with corrected weight decay",
      timm::bind_defaults(make_adafactor_bv, {{"caution", "True"}, {"corrected_weight_decay", "True"}}), sqrt_lr);
}
