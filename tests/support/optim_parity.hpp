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
    a.layer_decay = layer_decay;
    a.layer_decay_min_scale = layer_decay_min_scale;
    a.layer_decay_no_opt_scale = layer_decay_no_opt_scale;
    return a;
  }
};

// A case of `opt` with --opt-kwargs `kwargs`.
inline OptimCase optim_case(const std::string& name, const std::string& opt, double lr, double weight_decay,
                            std::map<std::string, std::string> kwargs = {}) {
  OptimCase c(name, opt, lr, weight_decay);
  c.kwargs = std::move(kwargs);
  return c;
}

// The tolerance of optimizers whose foreach ops run timm's per-tensor CPU
// kernels (tensor by tensor on the CPU) in the same order: measured 0; 1e-6
// leaves room for float32 rounding on other builds; parameters are O(1).
inline constexpr double kSameKernelsTolerance = 1e-6;

// The check of a save/load round trip: resumed equals uninterrupted exactly.
inline void check_round_trip(const std::string& name, double diff) {
  MESSAGE(name << " resumed vs uninterrupted: max diff = " << diff);
  CHECK(diff == 0.0);
}

inline nlohmann::json to_json(const OptimCase& c) {
  nlohmann::json kwargs = nlohmann::json::array();
  for (const auto& [k, v] : c.kwargs) kwargs.push_back(k + "=" + v);
  return {{"opt", c.opt},
          {"lr", c.lr},
          {"weight_decay", c.weight_decay},
          {"momentum", c.momentum},
          {"opt_eps", c.eps ? nlohmann::json(*c.eps) : nlohmann::json(nullptr)},
          {"opt_betas", c.betas ? nlohmann::json(*c.betas) : nlohmann::json(nullptr)},
          {"opt_kwargs", kwargs},
          {"steps", c.steps},
          {"seed", c.seed},
          {"layer_decay", c.layer_decay ? nlohmann::json(*c.layer_decay) : nlohmann::json(nullptr)},
          {"layer_decay_min_scale", c.layer_decay_min_scale},
          {"layer_decay_no_opt_scale",
           c.layer_decay_no_opt_scale ? nlohmann::json(*c.layer_decay_no_opt_scale) : nlohmann::json(nullptr)}};
}

// optim_oracle.py's "steps" on a JSON array of cases, in one Python start:
// timm's run of each case, in order.
inline std::vector<nlohmann::json> run_steps_oracle(const nlohmann::json& request) {
  TempDir dir;
  const auto out = dir / "optim.json";
  run_oracle("optim_oracle.py", {"steps", out.string(), request.dump()});
  std::ifstream in(out);
  return nlohmann::json::parse(in).get<std::vector<nlohmann::json>>();
}

// timm's runs of all `cases`, in one Python start.
inline std::vector<nlohmann::json> run_optim_oracle(const std::vector<OptimCase>& cases) {
  nlohmann::json request = nlohmann::json::array();
  for (const auto& c : cases) request.push_back(to_json(c));
  return run_steps_oracle(request);
}

inline at::Tensor tensor_from_json(const nlohmann::json& values, at::IntArrayRef shape) {
  std::vector<float> data;
  for (const auto& v : values) data.push_back(static_cast<float>(v.get<double>()));
  return at::tensor(data, at::kFloat).reshape(shape);
}

inline void load_values(torch::nn::Module& model, const nlohmann::json& values) {
  at::NoGradGuard no_grad;
  for (auto& item : model.named_parameters()) {
    item.value().copy_(tensor_from_json(values.at(item.key()), item.value().sizes()));
  }
}

inline double max_abs_diff(torch::nn::Module& model, const nlohmann::json& expected) {
  double diff = 0.0;
  for (const auto& item : model.named_parameters()) {
    const at::Tensor want = tensor_from_json(expected.at(item.key()), item.value().sizes());
    diff = std::max(diff, (item.value().detach() - want).abs().max().item<double>());
  }
  return diff;
}

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

inline void accumulate(const at::Tensor& ours, const at::Tensor& want, double& abs_diff, double& rel_diff) {
  const double diff = (ours.detach().to(at::kDouble) - want.to(at::kDouble)).abs().max().item<double>();
  const double scale = want.to(at::kDouble).abs().max().item<double>();
  abs_diff = std::max(abs_diff, diff);
  rel_diff = std::max(rel_diff, scale > 0 ? diff / scale : diff);
}

// Checks our groups' names, lr_scale and weight decay against timm's and
// compares every state entry (same keys as torch / timm).
inline void compare_state(const Optimizer& optimizer, const OptimCase& c, const nlohmann::json& o,
                          ParityResult& result) {
  ParityModel fresh;  // groups of the same layout, without touching the run's model
  const OptimizerArgs args = c.args();
  const std::vector<ParamGroup> groups =
      args.layer_decay ? param_groups_layer_decay(fresh, fresh.group_matcher(), fresh.no_weight_decay(),
                                                  {args.weight_decay, *args.layer_decay, args.layer_decay_min_scale,
                                                   args.layer_decay_no_opt_scale})
                       : param_groups_weight_decay(fresh, args.weight_decay, fresh.no_weight_decay());
  const nlohmann::json& info = o.at("group_info");
  REQUIRE(groups.size() == info.size());
  for (std::size_t g = 0; g < groups.size(); ++g) {
    CAPTURE(g);
    CHECK(groups[g].names == info[g].at("names").get<std::vector<std::string>>());
    CHECK(optimizer.lr_scale(g) == info[g].at("lr_scale").get<double>());
    CHECK(optimizer.weight_decay(g) == info[g].at("weight_decay").get<double>());
  }
  const auto* foreach = dynamic_cast<const ForeachOptimizer*>(&optimizer);
  if (foreach == nullptr) return;
  result.state_checked = true;
  const nlohmann::json& state = o.at("state");
  for (std::size_t g = 0; g < groups.size(); ++g) {
    for (std::size_t j = 0; j < groups[g].names.size(); ++j) {
      const std::string& name = groups[g].names[j];
      const ForeachOptimizer::State& ours = foreach->state(g, j);
      CAPTURE(name);
      if (!state.contains(name)) {
        CHECK(ours.empty());
        continue;
      }
      const nlohmann::json& want = state.at(name);
      REQUIRE(ours.size() == want.size());
      for (const auto& [key, value] : ours) {
        CAPTURE(key);
        REQUIRE(want.contains(key));
        const at::Tensor expected = want.at(key).is_array() ? tensor_from_json(want.at(key), value.sizes())
                                                            : at::tensor(want.at(key).get<double>(), at::kDouble);
        accumulate(value, expected, result.state_abs, result.state_rel);
      }
    }
  }
}

// Runs c.steps steps with the gradients and lr changes of timm's run `o`
// and compares the final parameters and state with timm's. Also checks the
// groups and the log line.
inline ParityResult optimizer_parity_full(const OptimCase& c, const nlohmann::json& o) {
  ParityModel model;
  std::vector<std::string> names;
  for (const auto& item : model.named_parameters()) names.push_back(item.key());
  REQUIRE(names == o.at("names").get<std::vector<std::string>>());
  load_values(model, o.at("initial"));

  OptimizerPtr optimizer = create_optimizer(model, model.no_weight_decay(), c.args(), model.group_matcher());
  REQUIRE(optimizer->num_groups() == o.at("groups").size());
  CHECK(optimizer->describe() == o.at("describe").get<std::string>());

  const auto factors = o.at("lr_factors").get<std::vector<double>>();
  for (std::size_t k = 0; k < factors.size(); ++k) {
    for (std::size_t g = 0; g < optimizer->num_groups(); ++g) optimizer->set_lr(g, c.lr * factors[k]);
    const nlohmann::json& grads = o.at("grads").at(k);
    for (auto& item : model.named_parameters()) {
      if (!grads.contains(item.key())) continue;
      const nlohmann::json& grad = grads.at(item.key());
      item.value().mutable_grad() = grad.is_null() ? at::Tensor() : tensor_from_json(grad, item.value().sizes());
    }
    optimizer->step();
  }
  ParityResult result;
  for (const auto& item : model.named_parameters()) {
    const at::Tensor want = tensor_from_json(o.at("final").at(item.key()), item.value().sizes());
    accumulate(item.value(), want, result.param_abs, result.param_rel);
  }
  if (o.contains("group_info")) compare_state(*optimizer, c, o, result);
  return result;
}

// The largest absolute difference of the final parameters from timm's.
inline double optimizer_parity(const OptimCase& c, const nlohmann::json& o) {
  return optimizer_parity_full(c, o).param_abs;
}

// Saves the optimizer state after `split` of `total` steps, loads it into a
// fresh model and optimizer, finishes there and compares with an
// uninterrupted run. Returns the largest absolute difference.
inline double save_load_round_trip(const OptimCase& c, int split = 5, int total = 8) {
  TempDir dir;
  const OptimizerArgs args = c.args();
  auto gen = at::detail::createCPUGenerator(1234);
  ParityModel a;  // uninterrupted
  ParityModel b;  // interrupted
  {
    at::NoGradGuard no_grad;
    for (auto& item : a.named_parameters()) item.value().copy_(at::randn(item.value().sizes(), gen));
    for (auto& item : b.named_parameters()) item.value().copy_(a.named_parameters()[item.key()]);
  }
  std::vector<std::map<std::string, at::Tensor>> grads(total);
  for (auto& step : grads) {
    for (const auto& item : a.named_parameters()) step[item.key()] = at::randn(item.value().sizes(), gen);
  }
  auto run = [&](torch::nn::Module& model, Optimizer& optimizer, int from, int to) {
    for (int k = from; k < to; ++k) {
      for (std::size_t g = 0; g < optimizer.num_groups(); ++g) optimizer.set_lr(g, c.lr * (1.0 - 0.1 * k));
      for (auto& item : model.named_parameters()) item.value().mutable_grad() = grads[k][item.key()].clone();
      optimizer.step();
    }
  };
  OptimizerPtr opt_a = create_optimizer(a, a.no_weight_decay(), args, a.group_matcher());
  run(a, *opt_a, 0, total);

  OptimizerPtr opt_b = create_optimizer(b, b.no_weight_decay(), args, b.group_matcher());
  opt_b->set_initial_lr(0, c.lr);
  run(b, *opt_b, 0, split);
  const auto path = (dir / "optimizer.pt").string();
  {
    torch::serialize::OutputArchive archive;
    opt_b->save(archive);
    archive.save_to(path);
  }
  ParityModel resumed;
  {
    at::NoGradGuard no_grad;
    for (auto& item : resumed.named_parameters()) item.value().copy_(b.named_parameters()[item.key()]);
  }
  OptimizerPtr opt_c = create_optimizer(resumed, resumed.no_weight_decay(), args, resumed.group_matcher());
  {
    torch::serialize::InputArchive archive;
    archive.load_from(path);
    opt_c->load(archive);
  }
  // torch's load_state_dict restores the groups' lr; timm's initial_lr too.
  for (std::size_t g = 0; g < opt_c->num_groups(); ++g) CHECK(opt_c->lr(g) == opt_b->lr(g));
  CHECK(opt_c->initial_lr(0) == std::optional<double>(c.lr));
  CHECK(!opt_c->initial_lr(1).has_value());
  run(resumed, *opt_c, split, total);

  double diff = 0.0;
  for (const auto& item : a.named_parameters()) {
    diff = std::max(diff, (item.value() - resumed.named_parameters()[item.key()]).abs().max().item<double>());
  }
  return diff;
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

inline std::unique_ptr<ParityModel> make_parity_model(bool big) {
  if (big) return std::make_unique<BigParityModel>();
  return std::make_unique<ParityModel>();
}

// A case whose optimizer state is compared per parameter name, with the
// group-level state (ForeachOptimizer based optimizers, possibly wrapped in
// Lookahead); optim_oracle.py runs it with "model" and "loss" set.
struct StateCase {
  OptimCase c;
  bool big = false;   // BigParityModel
  bool loss = false;  // gradients of parity_loss() (second order optimizers)
};

inline std::vector<nlohmann::json> run_optim_oracle_state(const std::vector<StateCase>& cases) {
  nlohmann::json request = nlohmann::json::array();
  for (const auto& m : cases) {
    nlohmann::json j = to_json(m.c);
    j["model"] = m.big ? "big" : "small";
    j["loss"] = m.loss;
    request.push_back(j);
  }
  return run_steps_oracle(request);
}

// loss() of optim_oracle.py: sum(a * tanh(p)) + 0.5 * (0.1 * sum(b * p))^2
// over the parameters in `coeffs`.
inline at::Tensor parity_loss(torch::nn::Module& model,
                              const std::map<std::string, std::pair<at::Tensor, at::Tensor>>& coeffs) {
  at::Tensor total = at::zeros({});
  at::Tensor s = at::zeros({});
  for (auto& item : model.named_parameters()) {
    const auto it = coeffs.find(item.key());
    if (it == coeffs.end()) continue;
    total = total + (it->second.first * at::tanh(item.value())).sum();
    s = s + (it->second.second * item.value()).sum();
  }
  s = s * 0.1;
  return total + 0.5 * s * s;
}

// Sets the gradients of step `k` of timm's run `o`: its random gradients, or
// those of parity_loss() with its coefficients (create_graph for second order).
inline void set_step_grads(torch::nn::Module& model, Optimizer& optimizer, const StateCase& m, const nlohmann::json& o,
                           std::size_t k) {
  const nlohmann::json& grads = o.at("grads").at(k);
  if (!m.loss) {
    for (auto& item : model.named_parameters()) {
      if (!grads.contains(item.key())) continue;
      const nlohmann::json& grad = grads.at(item.key());
      item.value().mutable_grad() = grad.is_null() ? at::Tensor() : tensor_from_json(grad, item.value().sizes());
    }
    return;
  }
  std::map<std::string, std::pair<at::Tensor, at::Tensor>> coeffs;
  for (auto& item : model.named_parameters()) {
    if (!grads.contains(item.key())) continue;
    const auto& ab = grads.at(item.key());
    coeffs[item.key()] = {tensor_from_json(ab.at(0), item.value().sizes()),
                          tensor_from_json(ab.at(1), item.value().sizes())};
  }
  optimizer.zero_grad();
  parity_loss(model, coeffs).backward({}, std::nullopt, optimizer.is_second_order());
}

inline double max_rel_diff(const at::Tensor& ours, const std::vector<double>& want) {
  const at::Tensor w = at::tensor(want, at::kDouble);
  const at::Tensor o = ours.detach().to(at::kDouble).reshape({-1});
  if (o.numel() != w.numel()) return 1e30;
  if (w.numel() == 0) return 0.0;
  return ((o - w).abs().max() / std::max(1.0, w.abs().max().item<double>())).item<double>();
}

struct StateResult {
  double param_diff = 0.0;  // max |param - timm|
  double state_diff = 0.0;  // max |state - timm| / max(1, max |timm|), per tensor
};

// Compares the state of our optimizer (a ForeachOptimizer, possibly wrapped
// in Lookahead) with timm's; keys of timm's state that we lack fail.
inline double state_diff(const Optimizer& optimizer, const nlohmann::json& o) {
  double diff = 0.0;
  const auto* lookahead = dynamic_cast<const Lookahead*>(&optimizer);
  const Optimizer& base = lookahead ? lookahead->base() : optimizer;
  const auto* ours = dynamic_cast<const ForeachOptimizer*>(&base);
  std::map<std::string, ForeachOptimizer::State> by_name;
  if (ours != nullptr) {
    for (std::size_t g = 0; g < ours->num_groups(); ++g) {
      const std::vector<std::string>& names = ours->param_group(g).names;
      for (std::size_t i = 0; i < names.size(); ++i) by_name[names[i]] = ours->state(g, i);
      for (const auto& [key, value] : o.at("group_state").at(g).items()) {
        const ForeachOptimizer::State& state = ours->group_state(g);
        INFO("group " << g << " state " << key);
        REQUIRE(state.count(key) == 1);
        diff = std::max(diff, max_rel_diff(state.at(key), value.get<std::vector<double>>()));
      }
    }
  }
  if (lookahead != nullptr && ours != nullptr) {
    // timm keeps the slow weights in the base's state.
    for (std::size_t g = 0; g < ours->num_groups(); ++g) {
      const std::vector<std::string>& names = ours->param_group(g).names;
      for (std::size_t i = 0; i < names.size(); ++i) {
        const nlohmann::json& want = o.at("state").at(names[i]);
        const at::Tensor& slow = lookahead->slow_weights(g, i);
        INFO("lookahead_slow_buff of " << names[i]);
        REQUIRE(want.contains("lookahead_slow_buff") == slow.defined());
        if (slow.defined()) {
          diff = std::max(diff, max_rel_diff(slow, want.at("lookahead_slow_buff").get<std::vector<double>>()));
        }
      }
    }
  }
  for (const auto& [name, values] : o.at("state").items()) {
    for (const auto& [key, value] : values.items()) {
      INFO("state of " << name << ": " << key);
      if (key == "lookahead_slow_buff") continue;  // above
      if (ours == nullptr) continue;               // a torch::optim base: its state is its own
      REQUIRE(by_name.count(name) == 1);
      REQUIRE(by_name.at(name).count(key) == 1);
      diff = std::max(diff, max_rel_diff(by_name.at(name).at(key), value.get<std::vector<double>>()));
    }
  }
  return diff;
}

// Runs timm's steps `o` of case `m` with ours; checks the groups and the log line.
inline StateResult optimizer_parity_state(const StateCase& m, const nlohmann::json& o) {
  std::unique_ptr<ParityModel> model = make_parity_model(m.big);
  std::vector<std::string> names;
  for (const auto& item : model->named_parameters()) names.push_back(item.key());
  REQUIRE(names == o.at("names").get<std::vector<std::string>>());
  load_values(*model, o.at("initial"));

  OptimizerPtr optimizer = create_optimizer(*model, model->no_weight_decay(), m.c.args());
  REQUIRE(optimizer->num_groups() == o.at("groups").size());
  CHECK(optimizer->describe() == o.at("describe").get<std::string>());

  const auto factors = o.at("lr_factors").get<std::vector<double>>();
  for (std::size_t k = 0; k < factors.size(); ++k) {
    for (std::size_t g = 0; g < optimizer->num_groups(); ++g) optimizer->set_lr(g, m.c.lr * factors[k]);
    set_step_grads(*model, *optimizer, m, o, k);
    optimizer->step();
  }
  StateResult r;
  r.param_diff = max_abs_diff(*model, o.at("final"));
  r.state_diff = state_diff(*optimizer, o);
  return r;
}

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
inline double save_load_round_trip_state(const StateCase& m, int split = 5, int total = 8) {
  TempDir dir;
  const OptimizerArgs args = m.c.args();
  auto gen = at::detail::createCPUGenerator(1234);
  auto a = make_parity_model(m.big);  // uninterrupted
  auto b = make_parity_model(m.big);  // interrupted
  {
    at::NoGradGuard no_grad;
    for (auto& item : a->named_parameters()) item.value().copy_(at::randn(item.value().sizes(), gen));
    for (auto& item : b->named_parameters()) item.value().copy_(a->named_parameters()[item.key()]);
  }
  std::vector<std::map<std::string, std::pair<at::Tensor, at::Tensor>>> coeffs(total);
  for (auto& step : coeffs) {
    for (const auto& item : a->named_parameters()) {
      step[item.key()] = {at::randn(item.value().sizes(), gen), at::randn(item.value().sizes(), gen)};
    }
  }
  auto run = [&](torch::nn::Module& model, Optimizer& optimizer, int from, int to) {
    for (int k = from; k < to; ++k) {
      for (std::size_t g = 0; g < optimizer.num_groups(); ++g) optimizer.set_lr(g, m.c.lr * (1.0 - 0.1 * k));
      if (m.loss) {
        optimizer.zero_grad();
        parity_loss(model, coeffs[k]).backward({}, std::nullopt, optimizer.is_second_order());
      } else {
        for (auto& item : model.named_parameters()) {
          if (item.value().requires_grad()) item.value().mutable_grad() = coeffs[k][item.key()].first.clone();
        }
      }
      optimizer.step();
    }
  };
  OptimizerPtr opt_a = create_optimizer(*a, a->no_weight_decay(), args);
  run(*a, *opt_a, 0, total);

  OptimizerPtr opt_b = create_optimizer(*b, b->no_weight_decay(), args);
  opt_b->set_initial_lr(0, m.c.lr);
  run(*b, *opt_b, 0, split);
  const auto path = (dir / "optimizer.pt").string();
  {
    torch::serialize::OutputArchive archive;
    opt_b->save(archive);
    archive.save_to(path);
  }
  auto resumed = make_parity_model(m.big);
  {
    at::NoGradGuard no_grad;
    for (auto& item : resumed->named_parameters()) item.value().copy_(b->named_parameters()[item.key()]);
  }
  OptimizerPtr opt_c = create_optimizer(*resumed, resumed->no_weight_decay(), args);
  {
    torch::serialize::InputArchive archive;
    archive.load_from(path);
    opt_c->load(archive);
  }
  for (std::size_t g = 0; g < opt_c->num_groups(); ++g) CHECK(opt_c->lr(g) == opt_b->lr(g));
  CHECK(opt_c->initial_lr(0) == std::optional<double>(m.c.lr));
  run(*resumed, *opt_c, split, total);

  double diff = 0.0;
  for (const auto& item : a->named_parameters()) {
    diff = std::max(diff, (item.value() - resumed->named_parameters()[item.key()]).abs().max().item<double>());
  }
  return diff;
}

inline void StateOracle::expect_round_trips(std::initializer_list<const char*> names) {
  load_builtin_plugins();
  for (const char* name : names) check_round_trip(name, save_load_round_trip_state(get(name)));
}

// A StateCase of `opt` with --opt-kwargs `kwargs` on the small model.
inline StateCase state_case(const std::string& name, const std::string& opt, double lr, double weight_decay,
                            std::map<std::string, std::string> kwargs = {}) {
  return StateCase{optim_case(name, opt, lr, weight_decay, std::move(kwargs))};
}

}  // namespace timm::test
