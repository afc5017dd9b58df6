// A base class for optimizers written with ATen's multi-tensor ops, and the
// argument helpers timm's optimizers share.
//
// torch::optim has no NAdam, RAdam, Lion, ... and no per-parameter step
// counts in the form timm's classes keep them. ForeachOptimizer holds timm's
// parameter groups (lr, weight decay, lr_scale), a state of named tensors per
// parameter (created lazily, at the parameter's first step with a gradient,
// as torch does) and per group, and saves and loads them. A subclass
// implements step_group(), which sees the group's parameters that have a
// gradient and updates them with at::_foreach_* ops over the whole list:
//
//   class MyOpt : public ForeachOptimizer {
//     void step_group(GroupStep& g) override {
//       for (State* s : g.states) if (s->empty()) (*s)["exp_avg"] = ...;
//       std::vector<at::Tensor> exp_avgs = state_list(g, "exp_avg");
//       at::_foreach_lerp_(exp_avgs, g.grads, 0.1);
//       at::_foreach_add_(g.params, exp_avgs, -g.lr);
//     }
//   };
//
// An optimizer whose step needs all groups at once (LAMB's global grad norm,
// AdaHessian's Hessian estimates) overrides step() too, does that part, and
// calls ForeachOptimizer::step() for the per-group updates.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include "timm/base/python_repr.hpp"
#include "timm/optim/optimizer.hpp"

namespace timm {

class ForeachOptimizer : public Optimizer {
 public:
  // One tensor per key ("step", "exp_avg", ...), as torch's optimizer.state[p].
  using State = std::map<std::string, at::Tensor>;

  // `lr` is the initial lr of every group (timm passes one lr; layer decay's
  // lr_scale is applied by the scheduler, not here).
  ForeachOptimizer(std::vector<ParamGroup> groups, double lr, std::string description);

  void step() override;
  void zero_grad() override;
  std::size_t num_groups() const override { return groups_.size(); }
  double lr(std::size_t group) const override;
  void set_lr(std::size_t group, double lr) override;
  double lr_scale(std::size_t group) const override;
  double weight_decay(std::size_t group) const override;
  // Every group's lr and state and every parameter's state, keyed by the
  // parameter's position in the groups; load() checks the layout and shapes.
  // load() also reads the archive torch::optim's optimizers write (through
  // TorchOptimizer): its state under torch's names, step counts as float32.
  void save(torch::serialize::OutputArchive& archive) const override;
  void load(torch::serialize::InputArchive& archive) override;
  std::string describe() const override { return description_; }

  // The parameters of `group` (names, tensors, weight decay, lr_scale) as
  // given at creation.
  const ParamGroup& param_group(std::size_t group) const;

  // The state of the j-th parameter of `group` (empty before its first step).
  const State& state(std::size_t group, std::size_t j) const;

  static constexpr int64_t kChunkNumel = int64_t{1} << 20;
  // The most elements per run that step() hands step_group() when the
  // optimizer updates its parameters independently (default kChunkNumel; 1
  // puts each parameter in a run of its own). The results do not depend on
  // it (test_foreach_chunks); the speed does.
  void set_chunk_numel(int64_t numel);

  // State that timm keeps in the param group rather than per parameter
  // (LAMB's step); empty unless a subclass sets it. Saved and loaded; it
  // stays on the host.
  const State& group_state(std::size_t group) const;

 protected:
  // The parameters of one group that have a gradient, in group order, with
  // their gradients and states (a state is empty at a parameter's first step).
  struct GroupStep {
    std::size_t index = 0;
    double lr = 0.0;
    double weight_decay = 0.0;
    std::vector<at::Tensor> params;
    std::vector<at::Tensor> grads;
    std::vector<State*> states;

    // The parameters at `indices` (positions in this step's lists), for
    // updates that differ between them, e.g. by their own step counts.
    GroupStep subset(const std::vector<std::size_t>& indices) const;
  };

  virtual void step_group(GroupStep& group) = 0;

  // Whether each parameter's update depends on that parameter alone (its
  // gradient, its state, the group's lr and decay), not on the rest of the
  // group. Then step() hands step_group() the group in runs of at most
  // set_chunk_numel() elements (chunks()), so the foreach ops' temporaries stay in
  // cache as in torch's single-tensor step (its CPU default): over a whole
  // group, an update that reads a temporary twice reads it from memory
  // (NAdam on resnet50's parameters: 1.21x torch's time in one list, below
  // it in runs). Off by default: global norms, shared random draws or
  // per-group counters need the whole group at once.
  virtual bool updates_parameters_independently() const { return false; }

  // For steps that also touch parameters without a gradient or other groups
  // (an overridden step()); the state is created lazily as in step_group().
  State& mutable_state(std::size_t group, std::size_t j);
  State& mutable_group_state(std::size_t group);

  // `group` split into runs of consecutive parameters of at most `max_numel`
  // elements in all (a larger tensor alone), so that the foreach ops'
  // temporaries stay small and cache-resident on the CPU, as timm chunks its
  // foreach steps on CUDA. Each run carries the group's index, lr and decay.
  static std::vector<GroupStep> chunks(const GroupStep& group, int64_t max_numel = kChunkNumel);

  // state[key] of every parameter of `group`; the tensors share storage with
  // the state, so in-place ops update it.
  static std::vector<at::Tensor> state_list(const GroupStep& group, const std::string& key);

  // At each parameter's first step (its state empty), zeros shaped as the
  // parameter (memory format kept) under each of `keys`, as torch's
  // optimizers create their moments.
  static void init_zero_states(const GroupStep& group, const std::vector<std::string>& keys);

  // Increments state["step"] (a 0-dim CPU tensor of `dtype`, created at 0,
  // as torch keeps it) and returns each parameter's new step count.
  static std::vector<double> increment_steps(const GroupStep& group, at::ScalarType dtype = at::kFloat);

 private:
  struct Group {
    ParamGroup spec;
    double lr = 0.0;
    std::vector<State> states;  // one per spec.params
    State state;                // group_state()
  };

  std::vector<Group> groups_;
  std::string description_;
  int64_t chunk_numel_ = kChunkNumel;
};

// ---- Helpers for optimizer plugins -----------------------------------------

// timm's caution ('Cautious Optimizers', arXiv 2411.16085): each update
// masked where it disagrees in sign with the gradient (update * grad <= 0),
// the mask scaled by 1 / max(mean(mask), 1e-3). New tensors; the updates are
// left as they were.
std::vector<at::Tensor> cautioned(const std::vector<at::Tensor>& updates, const std::vector<at::Tensor>& grads);

// cautioned()'s scale of one tensor's mask from the count of its elements
// that agree in sign (`agreeing` of `numel`), for one-pass loops that count
// them: 1 / max(mean(mask), 1e-3) in float32, as timm computes it.
float caution_mask_value(int64_t agreeing, int64_t numel);

// timm's caution in a one-pass CPU loop, as two passes over `numel`
// elements in ranges across the intra-op threads: `moments(begin, end)`
// updates its range's moments and returns how many of them agree in sign
// with the gradient; then `step(begin, end, mask_value)` moves its range's
// parameters, with the caution_mask_value of the whole count.
template <class Moments, class Step>
void cautious_two_passes(int64_t numel, const Moments& moments, const Step& step) {
  const int64_t agreeing = at::parallel_reduce(
      0, numel, at::internal::GRAIN_SIZE, int64_t{0},
      [&](int64_t begin, int64_t end, int64_t sum) { return sum + moments(begin, end); }, std::plus<int64_t>());
  const float mask_value = caution_mask_value(agreeing, numel);
  at::parallel_for(0, numel, at::internal::GRAIN_SIZE,
                   [&](int64_t begin, int64_t end) { step(begin, end, mask_value); });
}

// Bumps the autograd version of each of `tensors` as an in-place op would:
// for one-pass loops, whose writes through data pointers bypass the
// dispatcher.
void bump_versions(std::initializer_list<std::reference_wrapper<const at::Tensor>> tensors);

// A one-pass CPU loop over a contiguous float32 parameter and two state
// tensors of its shape (see fused_cpu_kernels_apply): `loop(param, grad,
// state_a, state_b, n, scalars)` on each range of elements across the
// intra-op threads, the pointers offset to the range; then the versions of
// the three written tensors bumped.
template <class Loop, class Scalars>
void run_one_pass_loop(const at::Tensor& param, const at::Tensor& grad, const at::Tensor& state_a,
                       const at::Tensor& state_b, Loop loop, const Scalars& scalars) {
  float* p = param.data_ptr<float>();
  const float* g = grad.data_ptr<float>();
  float* a = state_a.data_ptr<float>();
  float* b = state_b.data_ptr<float>();
  at::parallel_for(0, param.numel(), at::internal::GRAIN_SIZE, [&](int64_t begin, int64_t end) {
    loop(p + begin, g + begin, a + begin, b + begin, end - begin, scalars);
  });
  bump_versions({param, state_a, state_b});
}

// run_one_pass_loop with timm's caution, in cautious_two_passes' two passes:
// `moments(param, grad, state_a, state_b, n, scalars)` updates a range's
// states and returns how many of its updates agree in sign with the
// gradient; then `step(param, grad, state_a, state_b, n, mask_value,
// scalars)` moves the range's parameters. The versions of the three written
// tensors are bumped.
template <class Moments, class Step, class Scalars>
void run_cautious_loops(const at::Tensor& param, const at::Tensor& grad, const at::Tensor& state_a,
                        const at::Tensor& state_b, Moments moments, Step step, const Scalars& scalars) {
  float* p = param.data_ptr<float>();
  const float* g = grad.data_ptr<float>();
  float* a = state_a.data_ptr<float>();
  float* b = state_b.data_ptr<float>();
  cautious_two_passes(
      param.numel(),
      [&](int64_t begin, int64_t end) {
        return moments(p + begin, g + begin, a + begin, b + begin, end - begin, scalars);
      },
      [&](int64_t begin, int64_t end, float mask_value) {
        step(p + begin, g + begin, a + begin, b + begin, end - begin, mask_value, scalars);
      });
  bump_versions({param, state_a, state_b});
}

// timm's _rms_clip_denom_ (AdamW's and NAdamW's clipping_threshold): each
// denominator multiplied in place by max(1, rms(grad / denom) / threshold).
void rms_clip_denominators(const std::vector<at::Tensor>& denoms, const std::vector<at::Tensor>& grads,
                           double threshold);

// `values` as the scalar lists of the at::_foreach_* ops (a per-tensor lr).
std::vector<c10::Scalar> to_scalars(const std::vector<double>& values);

// The tensors of `list` at `indices`.
std::vector<at::Tensor> select(const std::vector<at::Tensor>& list, const std::vector<std::size_t>& indices);

// Whether torch's fused CPU optimizer kernels (at::_fused_sgd_,
// at::_fused_adam_, at::_fused_adamw_, ...) take these lists: every tensor a
// contiguous float32 CPU tensor. Those kernels make one pass over each
// parameter where the per-tensor ops make one per op (torch's fused=True).
bool fused_cpu_kernels_apply(std::initializer_list<std::reference_wrapper<const std::vector<at::Tensor>>> lists);

// --opt-kwargs fused: torch's fused kernels unless it is False (timm-cpp's
// default is None, read as True: torch picks the per-tensor path on CPU).
bool fused_requested(const OptimizerKwargs& kwargs);

// --opt-kwargs foreach, for optimizers with a one-pass CPU loop of
// timm-cpp's own whose timm class takes `foreach` but not `fused`: the loop
// unless it is False (timm's ops one by one).
bool one_pass_requested(const OptimizerKwargs& kwargs);

// The betas an optimizer receives: --opt-betas, else --opt-kwargs betas=...,
// else `fallback`. Throws UsageError unless there are `count` values in
// [0, 1), as the optimizers check them.
std::vector<double> resolve_betas(const OptimizerArgs& args, const OptimizerKwargs& kwargs,
                                  const std::vector<double>& fallback, std::size_t count = 2);

// The betas as Python prints them in the optimizer's defaults: torch's own
// optimizers store a tuple; timm's keep what they were given (a list from
// --opt-betas, the literal's brackets from --opt-kwargs, else the default
// tuple).
std::string betas_repr(const OptimizerArgs& args, const std::vector<double>& betas, bool always_tuple);

// eps from --opt-eps, else --opt-kwargs eps=..., else `fallback`; with its
// repr for describe(). Throws UsageError if negative.
struct EpsArg {
  double value;
  std::string repr;
};
EpsArg resolve_eps(const OptimizerArgs& args, const OptimizerKwargs& kwargs, double fallback);

// Throws UsageError "optimizer '<opt>': invalid learning rate ..." if lr < 0.
void check_lr(const OptimizerArgs& args);

// Throws UsageError "--opt-kwargs <key>=True: not supported by timm-cpp's
// '<opt>'" for the first of `keys` (torch's maximize, capturable,
// differentiable, fused, ...) that --opt-kwargs sets true: options that only
// pick another implementation, accepted at their defaults.
void reject_true_kwargs(const OptimizerArgs& args, const OptimizerKwargs& kwargs,
                        std::initializer_list<const char*> keys);

// The lr that decoupled weight decay scales by: the step's lr, or with
// --opt-kwargs corrected_weight_decay=True timm's lr² / max_lr, max_lr the
// constructor's lr (timm's _max_lr_snapshot).
class DecayLr {
 public:
  DecayLr() = default;  // not corrected
  // Reads --opt-kwargs corrected_weight_decay (default false); throws
  // UsageError when it is on with an lr that is not positive.
  DecayLr(const OptimizerArgs& args, const OptimizerKwargs& kwargs);

  bool corrected() const { return max_lr_.has_value(); }
  // The constructor's lr when corrected.
  const std::optional<double>& max_lr() const { return max_lr_; }
  // lr, or lr² / max_lr when corrected.
  double operator()(double lr) const { return max_lr_ ? lr * lr / *max_lr_ : lr; }

 private:
  std::optional<double> max_lr_;
};

// timm's OptimInfo.defaults: `factory` with `defaults` (--opt-kwargs as
// typed, e.g. {"caution", "True"}) set where neither --opt-kwargs nor the
// argument's own flag (--opt-betas, --opt-eps) sets them, as timm's
// partial(opt_class, **defaults). For registering variants ("cadopt", ...).
OptimizerFactory bind_defaults(OptimizerFactory factory, std::map<std::string, std::string> defaults);

// A float argument that may be None ("clip_exp=None"): --opt-kwargs `key`,
// else `fallback`; with its repr ("None" when unset).
struct OptionalFloatArg {
  std::optional<double> value;
  std::string repr;
};
OptionalFloatArg optional_float_kwarg(const OptimizerArgs& args, const OptimizerKwargs& kwargs, const std::string& key,
                                      std::optional<double> fallback);

}  // namespace timm
