// "adahessian": timm's Adahessian (timm/optim/adahessian.py). A second order
// optimizer: the trainer runs backward with create_graph, and each step
// estimates the Hessian diagonal by Hutchinson's method, z * (H z) with
// Rademacher z drawn from its own generator (seed 2147483647, the same z on
// every rank), differentiating the gradients once more. Then an AdamW-like
// update with the squared diagonal as second moment.
//
// Beyond timm, save() keeps the generator's state and the current Hessian
// estimates, so that a resumed run continues exactly as an uninterrupted one.
#include <cmath>
#include <map>
#include <mutex>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <torch/autograd.h>
#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>

#include "timm/base/error.hpp"
#include "timm/optim/foreach_optimizer.hpp"
#include "timm/optim/optimizer.hpp"
#include "timm/plugin/plugin.hpp"

namespace timm {
namespace {

using Tensors = std::vector<at::Tensor>;

constexpr uint64_t kSeed = 2147483647;
constexpr const char* kGeneratorKey = "adahessian_generator";

struct AdahessianSettings {
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double hessian_power = 1.0;
  int64_t update_each = 1;
  int64_t n_samples = 1;
  bool avg_conv_kernel = false;
};

at::Generator make_generator(const at::Device& device) {
  if (device.is_cpu()) return at::detail::createCPUGenerator(kSeed);
  at::Generator gen = at::globalContext().defaultGenerator(device).clone();
  gen.set_current_seed(kSeed);
  return gen;
}

class Adahessian : public ForeachOptimizer {
 public:
  Adahessian(std::vector<ParamGroup> groups, double lr, std::string description, AdahessianSettings settings)
      : ForeachOptimizer(std::move(groups), lr, std::move(description)), s_(settings) {
    init_hessian_steps();
  }
  // Backward with create_graph leaves each gradient holding a graph that
  // holds its parameter: a cycle that outlives model and optimizer (torch
  // warns of it; LeakSanitizer reports it). The optimizer that asked for the
  // graph drops the last step's gradients, which breaks it.
  ~Adahessian() override { zero_grad(); }
  Adahessian(const Adahessian&) = delete;
  Adahessian& operator=(const Adahessian&) = delete;

  bool is_second_order() const override { return true; }

  void step() override {
    at::NoGradGuard no_grad;
    zero_hessian();
    set_hessian();
    ForeachOptimizer::step();
  }

  void save(torch::serialize::OutputArchive& archive) const override {
    ForeachOptimizer::save(archive);
    if (generator_.defined()) {
      std::lock_guard<std::mutex> lock(generator_.mutex());
      archive.write(kGeneratorKey, generator_.get_state(), /*is_buffer=*/true);
    }
  }

  void load(torch::serialize::InputArchive& archive) override {
    ForeachOptimizer::load(archive);
    init_hessian_steps();
    at::Tensor state;
    if (archive.try_read(kGeneratorKey, state, /*is_buffer=*/true)) {
      generator_ = make_generator(first_param().device());
      std::lock_guard<std::mutex> lock(generator_.mutex());
      generator_.set_state(state);
    }
  }

 private:
  // timm sets state[p]["hessian step"] = 0 for every parameter at creation.
  void init_hessian_steps() {
    for (std::size_t g = 0; g < num_groups(); ++g) {
      for (std::size_t j = 0; j < param_group(g).params.size(); ++j) {
        State& state = mutable_state(g, j);
        if (state.count("hessian_step") == 0) state["hessian_step"] = at::zeros({}, at::kLong);
      }
    }
  }

  const at::Tensor& first_param() const {
    for (std::size_t g = 0; g < num_groups(); ++g) {
      if (!param_group(g).params.empty()) return param_group(g).params.front();
    }
    throw Error("adahessian: no parameters");
  }

  bool due(const State& state) const { return state.at("hessian_step").item<int64_t>() % s_.update_each == 0; }

  // Zeros the Hessian estimates due to be recomputed this step.
  void zero_hessian() {
    for (std::size_t g = 0; g < num_groups(); ++g) {
      for (std::size_t j = 0; j < param_group(g).params.size(); ++j) {
        State& state = mutable_state(g, j);
        if (state.count("hess") != 0 && due(state)) state["hess"].zero_();
      }
    }
  }

  // Hutchinson: hess += z * d(g . z)/dp / n_samples for the parameters due.
  void set_hessian() {
    Tensors params;
    Tensors grads;
    std::vector<State*> states;
    for (std::size_t g = 0; g < num_groups(); ++g) {
      const std::vector<at::Tensor>& group_params = param_group(g).params;
      for (std::size_t j = 0; j < group_params.size(); ++j) {
        if (!group_params[j].grad().defined()) continue;
        State& state = mutable_state(g, j);
        if (due(state) || state.count("hess") == 0) {
          params.push_back(group_params[j]);
          grads.push_back(group_params[j].grad());
          states.push_back(&state);
        }
        state["hessian_step"].add_(1);
      }
    }
    if (params.empty()) return;
    if (!generator_.defined() || generator_.device() != params.front().device()) {
      generator_ = make_generator(params.front().device());
    }
    for (const at::Tensor& grad : grads) {
      if (!grad.requires_grad()) {
        throw Error("adahessian needs the gradients' graph: run backward with create_graph (is_second_order)");
      }
    }
    for (int64_t n = 0; n < s_.n_samples; ++n) {
      Tensors zs;
      for (const at::Tensor& p : params) {
        zs.push_back(at::randint(0, 2, p.sizes(), generator_, at::TensorOptions().dtype(at::kLong).device(p.device())) *
                         2.0 -
                     1.0);
      }
      const Tensors h_zs = torch::autograd::grad(grads, params, zs, /*retain_graph=*/n < s_.n_samples - 1);
      for (std::size_t i = 0; i < params.size(); ++i) {
        const at::Tensor sample = h_zs[i] * zs[i] / static_cast<double>(s_.n_samples);
        State& state = *states[i];
        if (state.count("hess") == 0) {
          state["hess"] = sample;  // timm: 0.0 + sample
        } else {
          state["hess"].add_(sample);
        }
      }
    }
  }

  void step_group(GroupStep& group) override {
    std::map<int64_t, std::vector<std::size_t>> by_step;  // one foreach pass per step count
    for (std::size_t i = 0; i < group.params.size(); ++i) {
      State& state = *group.states[i];
      if (state.count("hess") == 0) continue;
      if (s_.avg_conv_kernel && group.params[i].dim() == 4) {
        state["hess"] = state["hess"].abs().mean({2, 3}, /*keepdim=*/true).expand_as(state["hess"]).clone();
      }
      if (state.count("step") == 0) {
        state["step"] = at::zeros({}, at::kLong);
        state["exp_avg"] = at::zeros_like(group.params[i]);
        state["exp_hessian_diag_sq"] = at::zeros_like(group.params[i]);
      }
      state["step"].add_(1);
      by_step[state["step"].item<int64_t>()].push_back(i);
    }
    for (const auto& [step, indices] : by_step) update(group.subset(indices), step);
  }

  void update(const GroupStep& group, int64_t step) {
    const Tensors& params = group.params;
    const Tensors& grads = group.grads;
    // Decoupled weight decay, as AdamW.
    at::_foreach_mul_(params, 1 - group.lr * group.weight_decay);
    const Tensors exp_avgs = state_list(group, "exp_avg");
    const Tensors exp_hessian_diag_sqs = state_list(group, "exp_hessian_diag_sq");
    const Tensors hess = state_list(group, "hess");
    at::_foreach_mul_(exp_avgs, s_.beta1);
    at::_foreach_add_(exp_avgs, grads, 1 - s_.beta1);
    at::_foreach_mul_(exp_hessian_diag_sqs, s_.beta2);
    at::_foreach_addcmul_(exp_hessian_diag_sqs, hess, hess, 1 - s_.beta2);
    const double bias_correction1 = 1 - std::pow(s_.beta1, static_cast<double>(step));
    const double bias_correction2 = 1 - std::pow(s_.beta2, static_cast<double>(step));
    Tensors denom = at::_foreach_div(exp_hessian_diag_sqs, bias_correction2);
    at::_foreach_pow_(denom, s_.hessian_power / 2);
    at::_foreach_add_(denom, s_.eps);
    at::_foreach_addcdiv_(params, exp_avgs, denom, -(group.lr / bias_correction1));
  }

  AdahessianSettings s_;
  mutable at::Generator generator_;  // mutable: its mutex guards get_state() in save()
};

OptimizerPtr make_adahessian(std::vector<ParamGroup> groups, const OptimizerArgs& args) {
  const OptimizerKwargs kwargs(args, {"betas", "eps", "hessian_power", "update_each", "n_samples", "avg_conv_kernel"});
  const std::string opt = timm::in_quotes(args.opt);
  AdahessianSettings s;
  const std::vector<double> betas = args.betas ? *args.betas : kwargs.get_doubles("betas", {0.9, 0.999});
  if (betas.size() != 2) {
    throw UsageError("optimizer " + opt + ": betas needs 2 values, got " + std::to_string(betas.size()));
  }
  s.beta1 = betas[0];
  s.beta2 = betas[1];
  s.eps = args.eps ? *args.eps : kwargs.get_double("eps", 1e-8);
  s.hessian_power = kwargs.get_double("hessian_power", 1.0);
  s.update_each = static_cast<int64_t>(kwargs.get_double("update_each", 1));
  s.n_samples = static_cast<int64_t>(kwargs.get_double("n_samples", 1));
  s.avg_conv_kernel = kwargs.get_bool("avg_conv_kernel", false);
  check_lr(args);
  if (s.eps < 0) throw UsageError("optimizer " + opt + ": invalid epsilon value " + python_float_repr(s.eps));
  for (std::size_t i = 0; i < 2; ++i) {
    if (betas[i] < 0 || betas[i] >= 1) {
      throw UsageError("optimizer " + opt + ": invalid beta parameter at index " + std::to_string(i) + ": " +
                       python_float_repr(betas[i]));
    }
  }
  if (s.hessian_power < 0 || s.hessian_power > 1) {
    throw UsageError("optimizer " + opt + ": invalid Hessian power value " + python_float_repr(s.hessian_power));
  }
  if (s.update_each < 1 || s.n_samples < 1) {
    throw UsageError("optimizer " + opt + ": update_each and n_samples must be at least 1");
  }
  const std::string description =
      describe_optimizer("Adahessian", args.opt,
                         {{"lr", python_float_repr(args.lr)},
                          {"betas", betas_repr(args, betas, /*always_tuple=*/false)},
                          {"eps", args.eps ? python_float_repr(*args.eps) : kwargs.repr("eps", "1e-08")},
                          {"weight_decay", python_float_repr(args.weight_decay)},
                          {"hessian_power", kwargs.repr("hessian_power", "1.0")}});
  return std::make_unique<Adahessian>(std::move(groups), args.lr, description, s);
}

}  // namespace
}  // namespace timm

TIMM_PLUGIN("adahessian") {
  // train.py scales --lr-base by the square root of the batch ratio for
  // timm's adaptive optimizers ("ada" in the name).
  registrar.add_optimizer("adahessian", "An Adaptive Second Order Optimizer", timm::make_adahessian,
                          timm::OptimizerTraits{.lr_base_scale = timm::LrBaseScale::kSqrt});
}
