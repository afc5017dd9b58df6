// The SGD update both torch.optim.SGD ("sgd", "momentum": coupled L2 decay)
// and timm.optim.SGDW run, and SGDW's names ("sgdw" / "nesterovw" and its
// cautious / corrected-decay variants): SGD with momentum (Nesterov by timm's
// registry default) and decoupled weight decay (param *= 1 - lr * wd, or
// lr² / max_lr corrected), optional caution on the momentum update. No eps or
// betas (timm drops them).
#include <cmath>

#include "sgdw.hpp"
#include "timm/base/error.hpp"
#include "timm/optim/foreach_optimizer.hpp"

namespace timm::sgd {
namespace {

using Tensors = std::vector<at::Tensor>;

class Sgd : public ForeachOptimizer {
 public:
  Sgd(std::vector<ParamGroup> groups, double lr, std::string description, SgdConfig config)
      : ForeachOptimizer(std::move(groups), lr, std::move(description)), c_(config) {}

 private:
  // torch's _single_tensor_sgd and timm's _single_tensor_sgdw (their CPU
  // paths), as foreach ops.
  bool updates_parameters_independently() const override { return true; }
  void step_group(GroupStep& g) override {
    if (c_.decoupled_weight_decay) {
      const double wd_scale = c_.decay_lr(g.lr);
      const double keep = 1. - wd_scale * g.weight_decay;
      // x * 1.0 is x, bit for bit: the no-decay group skips the pass.
      if (keep != 1.0) at::_foreach_mul_(g.params, keep);
    }
    const Tensors buffers = existing_buffers(g);
    if (c_.fused && !c_.caution && fused_cpu_kernels_apply({g.params, g.grads, buffers})) {
      fused_step(g);
      return;
    }
    Tensors grads = c_.maximize ? at::_foreach_neg(g.grads) : g.grads;
    if (!c_.decoupled_weight_decay && g.weight_decay != 0) grads = at::_foreach_add(grads, g.params, g.weight_decay);

    Tensors updates = grads;
    if (c_.momentum != 0) {
      // A new buffer is the gradient itself; the others decay and add it.
      Tensors old_bufs;
      Tensors old_grads;
      for (std::size_t i = 0; i < g.params.size(); ++i) {
        auto& state = *g.states[i];
        if (state.empty()) {
          state["momentum_buffer"] = grads[i].clone().detach();
        } else {
          old_bufs.push_back(state.at("momentum_buffer"));
          old_grads.push_back(grads[i]);
        }
      }
      if (!old_bufs.empty()) {
        at::_foreach_mul_(old_bufs, c_.momentum);
        at::_foreach_add_(old_bufs, old_grads, 1 - c_.dampening);
      }
      Tensors bufs = state_list(g, "momentum_buffer");
      if (c_.caution) {
        if (c_.nesterov) bufs = at::_foreach_add(grads, bufs, c_.momentum);
        updates = cautioned(bufs, grads);
      } else if (c_.nesterov) {
        updates = at::_foreach_add(grads, bufs, c_.momentum);
      } else {
        updates = bufs;
      }
    }
    at::_foreach_add_(g.params, updates, -g.lr);
  }

  static Tensors existing_buffers(const GroupStep& g) {
    Tensors bufs;
    for (const State* state : g.states) {
      if (!state->empty()) bufs.push_back(state->at("momentum_buffer"));
    }
    return bufs;
  }

  // torch's fused=True SGD: one pass per parameter, bit for bit the
  // per-tensor ops above (measured on torch's CPU kernel). Decoupled decay
  // has been applied; coupled decay is the kernel's.
  void fused_step(GroupStep& g) {
    const double weight_decay = c_.decoupled_weight_decay ? 0.0 : g.weight_decay;
    auto run = [&](const Tensors& params, const Tensors& grads, const Tensors& bufs, bool first_step) {
      at::_fused_sgd_(params, grads, bufs, weight_decay, c_.momentum, g.lr, c_.dampening, c_.nesterov, c_.maximize,
                      first_step);
    };
    if (c_.momentum == 0) {
      run(g.params, g.grads, {}, /*first_step=*/false);
      return;
    }
    // The kernel's first step (buffer = gradient) is one flag per call.
    std::vector<std::size_t> fresh;
    std::vector<std::size_t> resumed;
    for (std::size_t i = 0; i < g.params.size(); ++i) {
      auto& state = *g.states[i];
      if (state.empty()) {
        state["momentum_buffer"] = at::empty_like(g.grads[i]);
        fresh.push_back(i);
      } else {
        resumed.push_back(i);
      }
    }
    const Tensors bufs = state_list(g, "momentum_buffer");
    for (const auto& [indices, first_step] : {std::pair{&fresh, true}, std::pair{&resumed, false}}) {
      if (!indices->empty())
        run(select(g.params, *indices), select(g.grads, *indices), select(bufs, *indices), first_step);
    }
  }

  SgdConfig c_;
};

}  // namespace

OptimizerPtr make_sgd_optimizer(std::vector<ParamGroup> groups, double lr, std::string description,
                                const SgdConfig& config) {
  return std::make_unique<Sgd>(std::move(groups), lr, std::move(description), config);
}

OptimizerPtr make_sgdw(std::vector<ParamGroup> groups, const OptimizerArgs& args) {
  // timm drops eps and betas (has_eps / has_betas False); foreach only picks
  // an implementation.
  const OptimizerKwargs kwargs(args, {"dampening", "nesterov", "caution", "corrected_weight_decay", "maximize",
                                      "foreach", "differentiable", "eps", "betas"});
  check_lr(args);
  const std::string opt = in_quotes(args.opt);
  reject_true_kwargs(args, kwargs, {"differentiable"});
  SgdConfig c;
  c.momentum = args.momentum;
  c.dampening = kwargs.get_double("dampening", 0.0);
  c.nesterov = kwargs.get_bool("nesterov", false);
  c.caution = kwargs.get_bool("caution", false);
  c.maximize = kwargs.get_bool("maximize", false);
  if (c.momentum < 0)
    throw UsageError("optimizer " + opt + ": invalid momentum value " + python_float_repr(c.momentum));
  const DecayLr decay_lr(args, kwargs);
  if (c.nesterov && (c.momentum <= 0 || c.dampening != 0)) {
    throw UsageError("optimizer " + opt + ": Nesterov momentum requires a momentum and zero dampening (--momentum " +
                     python_float_repr(c.momentum) + ", dampening " + python_float_repr(c.dampening) + ")");
  }
  c.decay_lr = decay_lr;
  const std::string description = describe_optimizer("SGDW", args.opt,
                                                     {{"lr", python_float_repr(args.lr)},
                                                      {"momentum", python_float_repr(c.momentum)},
                                                      {"dampening", kwargs.repr("dampening", "0.0")},
                                                      {"weight_decay", python_float_repr(args.weight_decay)},
                                                      {"nesterov", py_bool(c.nesterov)},
                                                      {"caution", py_bool(c.caution)},
                                                      {"corrected_weight_decay", py_bool(decay_lr.corrected())},
                                                      {"max_lr_snapshot", python_float_repr(args.lr)},
                                                      {"maximize", py_bool(c.maximize)},
                                                      {"foreach", kwargs.repr("foreach", "None")},
                                                      {"differentiable", "False"}});
  return make_sgd_optimizer(std::move(groups), args.lr, description, c);
}

}  // namespace timm::sgd
