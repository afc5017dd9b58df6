// Parity helpers for the optimizer tests: a small model mirrored by
// tests/oracle/optim_oracle.py (same parameter names, incl. ".bias", BN
// weights, a 1-D parameter, a frozen one and a no_weight_decay pattern), and
// runners that compare our optimizers with timm's step by step: OptimOracle
// (state, groups, layer decay) and StateOracle (a larger model for
// Adafactor's factored moments, gradients of a loss with second derivatives
// for AdaHessian, group-level state such as LAMB's step, Lookahead state).
#pragma once

#include <algorithm>
#include <cmath>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <torch/autograd.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>
#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>
#include <nlohmann/json.hpp>

#include "test_support.hpp"
#include "timm/optim/foreach_optimizer.hpp"
#include "timm/optim/lookahead.hpp"
#include "timm/optim/optimizer.hpp"
#include "timm/optim/param_groups.hpp"

#include <doctest/doctest.h>  // last: c10 defines a CHECK of its own

namespace timm::test {

// Small in optim_oracle.py.
class ParityModel : public torch::nn::Module {
 public:
  ParityModel() {
    register_parameter("pos_embed", at::zeros({1, 3, 4}));
    register_parameter("scale", at::ones({4}));
    register_parameter("frozen", at::zeros({3, 3}), /*requires_grad=*/false);
    register_module("conv", torch::nn::Conv2d(torch::nn::Conv2dOptions(3, 4, 3).bias(false)));
    register_module("bn", torch::nn::BatchNorm2d(4));
    for (const char* name : {"blk0", "blk1"}) {
      auto block = std::make_shared<torch::nn::Module>();
      block->register_parameter("gamma", at::zeros({2, 2}));
      block->register_parameter("weight", at::zeros({2, 3}));
      register_module(name, block);
    }
    auto proj = std::make_shared<torch::nn::Module>();
    proj->register_parameter("bias", at::zeros({2, 3}));  // 2-D, but named ".bias"
    register_module("proj", proj);
    register_module("fc", torch::nn::Linear(4, 5));
  }
  std::vector<std::string> no_weight_decay() const { return {"pos_embed", "blk?.gamma"}; }
  // As Small.group_matcher in optim_oracle.py.
  GroupMatcher group_matcher() const {
    return {{"stem", {{R"(^pos_embed|scale|frozen|conv|bn)", std::nullopt}}},
            {"blocks", {{R"(^blk(\d+))", std::nullopt}, {R"(^proj)", std::vector<double>{99999}}}}};
  }
};

// One optimizer configuration, as train.py's flags.
struct OptimCase {
  OptimCase(std::string name_, std::string opt_, double lr_, double weight_decay_)
      : name(std::move(name_)), opt(std::move(opt_)), lr(lr_), weight_decay(weight_decay_) {}

  std::string name;  // the test's label for it
  std::string opt;
  double lr = 0.1;
  double weight_decay = 0.0;
  double momentum = 0.9;
  std::optional<double> eps;
  std::optional<std::vector<double>> betas;
  std::map<std::string, std::string> kwargs;
  // --opt-kwargs timm-cpp takes and timm does not: ours only, not the oracle's.
  std::map<std::string, std::string> cpp_kwargs;
  std::optional<double> layer_decay;
  double layer_decay_min_scale = 0.0;
  std::optional<double> layer_decay_no_opt_scale;
  int steps = 10;
  int seed = 0;

  OptimizerArgs args() const {
    OptimizerArgs a;
    a.opt = opt;
    a.lr = lr;
    a.weight_decay = weight_decay;
    a.momentum = momentum;
    a.eps = eps;
    a.betas = betas;
    a.kwargs = kwargs;
    a.kwargs.insert(cpp_kwargs.begin(), cpp_kwargs.end());
    a.layer_decay = layer_decay;
    a.layer_decay_min_scale = layer_decay_min_scale;
    a.layer_decay_no_opt_scale = layer_decay_no_opt_scale;
    return a;
  }
};

// A case of `opt` with --opt-kwargs `kwargs`.
OptimCase optim_case(const std::string& name, const std::string& opt, double lr, double weight_decay,
                     std::map<std::string, std::string> kwargs = {});

// The tolerance of optimizers whose foreach ops run timm's per-tensor CPU
// kernels (tensor by tensor on the CPU) in the same order: measured 0; 1e-6
// leaves room for float32 rounding on other builds; parameters are O(1).
inline constexpr double kSameKernelsTolerance = 1e-6;

// For optimizers with a one-pass CPU loop of their own (float32 CPU
// parameters) beside their ops path (other dtypes): `steps` steps of one
// parameter of `numel` elements (over several of the loops' chunks), float32
// through the loop and float64 through the ops, the same random gradients;
// returns max |float32 - float64| over the final parameter.
double one_pass_vs_float64_ops(const OptimizerArgs& args, int64_t numel, int steps = 5);

// A parameter size over several of the one-pass loops' ranges (and over
// novograd's and madgrad's 32768-element chunks), so that a loop's split
// across threads and its cautious count over all ranges are exercised.
inline constexpr int64_t kOnePassNumel = 4 * 32768 + 1001;

// The arguments of one one_pass_vs_float64_ops case.
OptimizerArgs one_pass_case(const std::string& opt, double lr, double weight_decay,
                            std::map<std::string, std::string> kwargs = {});

// one_pass_vs_float64_ops for each of `cases` over kOnePassNumel elements:
// a MESSAGE with each difference and a check that it is finite and at most
// `tolerance` (float32 rounding of O(1) parameters over a few steps).
void expect_one_pass_near_float64_ops(const std::vector<OptimizerArgs>& cases, int steps = 5, double tolerance = 1e-5);

// The check of a save/load round trip: resumed equals uninterrupted exactly.
void check_round_trip(const std::string& name, double diff);

nlohmann::json to_json(const OptimCase& c);

// optim_oracle.py's "steps" on a JSON array of cases, in one Python start:
// timm's run of each case, in order.
std::vector<nlohmann::json> run_steps_oracle(const nlohmann::json& request);

// timm's runs of all `cases`, in one Python start.
std::vector<nlohmann::json> run_optim_oracle(const std::vector<OptimCase>& cases);

at::Tensor tensor_from_json(const nlohmann::json& values, at::IntArrayRef shape);

void load_values(torch::nn::Module& model, const nlohmann::json& values);

double max_abs_diff(torch::nn::Module& model, const nlohmann::json& expected);

// Largest differences of ours from timm's: absolute (elementwise) and
// relative (per tensor, max |ours - timm| / max |timm|), for the final
// parameters and for the optimizer state (ForeachOptimizer-based optimizers;
// state_checked false for others).
struct ParityResult {
  double param_abs = 0.0;
  double param_rel = 0.0;
  double state_abs = 0.0;
  double state_rel = 0.0;
  bool state_checked = false;
};

void accumulate(const at::Tensor& ours, const at::Tensor& want, double& abs_diff, double& rel_diff);

// Checks our groups' names, lr_scale and weight decay against timm's and
// compares every state entry (same keys as torch / timm).
void compare_state(const Optimizer& optimizer, const OptimCase& c, const nlohmann::json& o, ParityResult& result);

// Runs c.steps steps with the gradients and lr changes of timm's run `o`
// and compares the final parameters and state with timm's. Also checks the
// groups and the log line.
ParityResult optimizer_parity_full(const OptimCase& c, const nlohmann::json& o);

// The largest absolute difference of the final parameters from timm's.
double optimizer_parity(const OptimCase& c, const nlohmann::json& o);

// Makes the optimizer that runs the first steps of save_load_round_trip.
using InterruptedOptimizer = std::function<OptimizerPtr(ParityModel& model)>;

// Saves the optimizer state after `split` of `total` steps, loads it into a
// fresh model and optimizer, finishes there and compares with an
// uninterrupted run. Returns the largest absolute difference. The first steps
// run on `interrupted`'s optimizer when given (an older implementation whose
// checkpoints `c`'s optimizer must resume), else on `c`'s.
double save_load_round_trip(const OptimCase& c, int split = 5, int total = 8,
                            const InterruptedOptimizer& interrupted = {});

// For save_load_round_trip: LibTorch's optimizer `TorchOpt` with `defaults`
// (weight decay per group) over c's groups, wrapped in TorchOptimizer.
template <class TorchOpt, class Options>
InterruptedOptimizer libtorch_optimizer(const OptimCase& c, const Options& defaults) {
  return [c, defaults](ParityModel& model) -> OptimizerPtr {
    const auto groups = optimizer_param_groups(model, model.no_weight_decay(), c.args(), model.group_matcher());
    auto impl = std::make_unique<TorchOpt>(torch_param_groups(groups, defaults), defaults);
    return std::make_unique<TorchOptimizer>(std::move(impl), lr_scales(groups), "LibTorch " + c.opt);
  };
}

// Runs every case of a test file through timm once, on first use.
class OptimOracle {
 public:
  explicit OptimOracle(std::vector<OptimCase> cases) : cases_(std::move(cases)) {}

  const OptimCase& get(const std::string& name) const {
    for (const auto& c : cases_) {
      if (c.name == name) return c;
    }
    throw std::runtime_error("no optimizer case named " + name);
  }

  // Checks the case named `name`; returns the largest absolute difference.
  double check(const std::string& name) { return check_all(name).param_abs; }

  // Checks the case named `name`: parameters, groups and state.
  ParityResult check_all(const std::string& name) {
    if (want_.empty()) want_ = run_optim_oracle(cases_);
    for (std::size_t i = 0; i < cases_.size(); ++i) {
      if (cases_[i].name == name) return optimizer_parity_full(cases_[i], want_.at(i));
    }
    throw std::runtime_error("no optimizer case named " + name);
  }

  // The test of one case with its state: the final parameters within
  // `tolerance` (absolute) of timm's, every state tensor within
  // `state_tolerance` relative to its largest magnitude (moments span many
  // orders of magnitude), the groups as timm's.
  void expect_parity(const std::string& name, double tolerance, double state_tolerance) {
    load_builtin_plugins();
    const ParityResult r = check_all(name);
    MESSAGE(name << " after " << get(name).steps << " steps: params max abs " << r.param_abs << ", rel " << r.param_rel
                 << "; state max abs " << r.state_abs << ", rel " << r.state_rel);
    CHECK(r.param_abs <= tolerance);
    CHECK(r.state_checked);
    CHECK(r.state_rel <= state_tolerance);
  }

  // The test of one case: loads the built plugins, checks the case named
  // `name` and that its largest difference from timm is at most `tolerance`.
  void expect_parity(const std::string& name, double tolerance) {
    load_builtin_plugins();
    const double diff = check(name);
    MESSAGE(name << ": max |param - timm| after " << get(name).steps << " steps = " << diff);
    CHECK(diff <= tolerance);
  }

  // expect_parity of each case in `names`, with or without its state.
  void expect_parity_each(std::initializer_list<const char*> names, double tolerance) {
    for (const char* name : names) expect_parity(name, tolerance);
  }
  void expect_parity_each(std::initializer_list<const char*> names, double tolerance, double state_tolerance) {
    for (const char* name : names) expect_parity(name, tolerance, state_tolerance);
  }

  // check_round_trip of save_load_round_trip() for each case in `names`.
  void expect_round_trips(std::initializer_list<const char*> names) {
    load_builtin_plugins();
    for (const char* name : names) check_round_trip(name, save_load_round_trip(get(name)));
  }

 private:
  std::vector<OptimCase> cases_;
  std::vector<nlohmann::json> want_;
};

// Big in optim_oracle.py.
class BigParityModel : public ParityModel {
 public:
  BigParityModel() {
    register_parameter("wide", at::zeros({20, 18}));
    register_parameter("kernel", at::zeros({20, 17, 3, 3}));
    register_parameter("tall", at::zeros({3, 19, 17}));
  }
};

std::unique_ptr<ParityModel> make_parity_model(bool big);

// A case whose optimizer state is compared per parameter name, with the
// group-level state (ForeachOptimizer based optimizers, possibly wrapped in
// Lookahead); optim_oracle.py runs it with "model" and "loss" set.
struct StateCase {
  OptimCase c;
  bool big = false;   // BigParityModel
  bool loss = false;  // gradients of parity_loss() (second order optimizers)
};

std::vector<nlohmann::json> run_optim_oracle_state(const std::vector<StateCase>& cases);

// loss() of optim_oracle.py: sum(a * tanh(p)) + 0.5 * (0.1 * sum(b * p))^2
// over the parameters in `coeffs`.
at::Tensor parity_loss(torch::nn::Module& model,
                       const std::map<std::string, std::pair<at::Tensor, at::Tensor>>& coeffs);

// Sets the gradients of step `k` of timm's run `o`: its random gradients, or
// those of parity_loss() with its coefficients (create_graph for second order).
void set_step_grads(torch::nn::Module& model, Optimizer& optimizer, const StateCase& m, const nlohmann::json& o,
                    std::size_t k);

double max_rel_diff(const at::Tensor& ours, const std::vector<double>& want);

struct StateResult {
  double param_diff = 0.0;  // max |param - timm|
  double state_diff = 0.0;  // max |state - timm| / max(1, max |timm|), per tensor
};

// Compares the state of our optimizer (a ForeachOptimizer, possibly wrapped
// in Lookahead) with timm's; keys of timm's state that we lack fail.
double state_diff(const Optimizer& optimizer, const nlohmann::json& o);

// Runs timm's steps `o` of case `m` with ours; checks the groups and the log line.
StateResult optimizer_parity_state(const StateCase& m, const nlohmann::json& o);

// Every case of a test file through timm once, on first use.
class StateOracle {
 public:
  explicit StateOracle(std::vector<StateCase> cases) : cases_(std::move(cases)) {}

  const StateCase& get(const std::string& name) const {
    for (const auto& m : cases_) {
      if (m.c.name == name) return m;
    }
    throw std::runtime_error("no optimizer case named " + name);
  }

  // Checks the case named `name`: parameters within `tolerance` (absolute)
  // and state within `tolerance` relative to max(1, |timm's values|).
  void expect_parity(const std::string& name, double tolerance) {
    load_builtin_plugins();
    if (want_.empty()) want_ = run_optim_oracle_state(cases_);
    for (std::size_t i = 0; i < cases_.size(); ++i) {
      if (cases_[i].c.name != name) continue;
      const StateResult r = optimizer_parity_state(cases_[i], want_.at(i));
      MESSAGE(name << ": after " << cases_[i].c.steps << " steps max |param - timm| = " << r.param_diff
                   << ", max state diff = " << r.state_diff);
      CHECK(r.param_diff <= tolerance);
      CHECK(r.state_diff <= tolerance);
      return;
    }
    throw std::runtime_error("no optimizer case named " + name);
  }

  // expect_parity of each case in `names`.
  void expect_parity_each(std::initializer_list<const char*> names, double tolerance) {
    for (const char* name : names) expect_parity(name, tolerance);
  }

  // check_round_trip of save_load_round_trip_state() for each case in `names`.
  void expect_round_trips(std::initializer_list<const char*> names);

 private:
  std::vector<StateCase> cases_;
  std::vector<nlohmann::json> want_;
};

// Saves the state after `split` of `total` steps, loads it into a fresh model
// and optimizer, finishes there and returns the largest difference from an
// uninterrupted run. Gradients are random, or those of parity_loss() for
// second order optimizers.
double save_load_round_trip_state(const StateCase& m, int split = 5, int total = 8);

// A StateCase of `opt` with --opt-kwargs `kwargs` on the small model.
StateCase state_case(const std::string& name, const std::string& opt, double lr, double weight_decay,
                     std::map<std::string, std::string> kwargs = {});

}  // namespace timm::test
