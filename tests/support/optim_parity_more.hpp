// Parity helpers for the optimizers checked with tests/oracle/optim_oracle_more.py:
// optim_parity.hpp's runs plus a larger model (Adafactor's factored moments),
// gradients of a loss with second derivatives (AdaHessian), and a comparison
// of the optimizer state with timm's.
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <torch/autograd.h>
#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>
#include <nlohmann/json.hpp>

#include "optim_parity.hpp"
#include "test_support.hpp"
#include "timm/optim/lookahead.hpp"
#include "timm/optim/param_state_optimizer.hpp"

namespace timm::test {

// Big in optim_oracle_more.py.
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

struct MoreCase {
  OptimCase c;
  bool big = false;   // BigParityModel
  bool loss = false;  // gradients of parity_loss() (second order optimizers)
};

inline std::vector<nlohmann::json> run_optim_oracle_more(const std::vector<MoreCase>& cases) {
  TempDir dir;
  const auto out = dir / "optim.json";
  nlohmann::json request = nlohmann::json::array();
  for (const auto& m : cases) {
    nlohmann::json j = to_json(m.c);
    j["model"] = m.big ? "big" : "small";
    j["loss"] = m.loss;
    request.push_back(j);
  }
  run_oracle("optim_oracle_more.py", {"steps", out.string(), request.dump()});
  std::ifstream in(out);
  return nlohmann::json::parse(in).get<std::vector<nlohmann::json>>();
}

// loss() of optim_oracle_more.py: sum(a * tanh(p)) + 0.5 * (0.1 * sum(b * p))^2
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
inline void set_step_grads(torch::nn::Module& model, Optimizer& optimizer, const MoreCase& m, const nlohmann::json& o,
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

struct MoreResult {
  double param_diff = 0.0;  // max |param - timm|
  double state_diff = 0.0;  // max |state - timm| / max(1, max |timm|), per tensor
};

// Compares the state of our optimizer (a ParamStateOptimizer, possibly
// wrapped in Lookahead) with timm's; keys of timm's state that we lack fail.
inline double state_diff(const Optimizer& optimizer, const nlohmann::json& o) {
  double diff = 0.0;
  const auto* lookahead = dynamic_cast<const Lookahead*>(&optimizer);
  const Optimizer& base = lookahead ? lookahead->base() : optimizer;
  const auto* ours = dynamic_cast<const ParamStateOptimizer*>(&base);
  std::map<std::string, ParamStateOptimizer::State> by_name;
  if (ours != nullptr) {
    for (const auto& group : ours->groups()) {
      for (std::size_t i = 0; i < group.names.size(); ++i) by_name[group.names[i]] = group.states[i];
    }
    for (std::size_t g = 0; g < ours->groups().size(); ++g) {
      for (const auto& [key, value] : o.at("group_state").at(g).items()) {
        const auto& state = ours->groups()[g].state;
        INFO("group " << g << " state " << key);
        REQUIRE(state.count(key) == 1);
        diff = std::max(diff, max_rel_diff(state.at(key), value.get<std::vector<double>>()));
      }
    }
  }
  if (lookahead != nullptr && ours != nullptr) {
    // timm keeps the slow weights in the base's state.
    for (std::size_t g = 0; g < ours->groups().size(); ++g) {
      for (std::size_t i = 0; i < ours->groups()[g].names.size(); ++i) {
        const nlohmann::json& want = o.at("state").at(ours->groups()[g].names[i]);
        const at::Tensor& slow = lookahead->slow_weights(g, i);
        INFO("lookahead_slow_buff of " << ours->groups()[g].names[i]);
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
inline MoreResult optimizer_parity_more(const MoreCase& m, const nlohmann::json& o) {
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
  MoreResult r;
  r.param_diff = max_abs_diff(*model, o.at("final"));
  r.state_diff = state_diff(*optimizer, o);
  return r;
}

// Every case of a test file through timm once, on first use.
class MoreOracle {
 public:
  explicit MoreOracle(std::vector<MoreCase> cases) : cases_(std::move(cases)) {}

  const MoreCase& get(const std::string& name) const {
    for (const auto& m : cases_) {
      if (m.c.name == name) return m;
    }
    throw std::runtime_error("no optimizer case named " + name);
  }

  // Checks the case named `name`: parameters within `tolerance` (absolute)
  // and state within `tolerance` relative to max(1, |timm's values|).
  void expect_parity(const std::string& name, double tolerance) {
    load_builtin_plugins();
    if (want_.empty()) want_ = run_optim_oracle_more(cases_);
    for (std::size_t i = 0; i < cases_.size(); ++i) {
      if (cases_[i].c.name != name) continue;
      const MoreResult r = optimizer_parity_more(cases_[i], want_.at(i));
      MESSAGE(name << ": after " << cases_[i].c.steps << " steps max |param - timm| = " << r.param_diff
                   << ", max state diff = " << r.state_diff);
      CHECK(r.param_diff <= tolerance);
      CHECK(r.state_diff <= tolerance);
      return;
    }
    throw std::runtime_error("no optimizer case named " + name);
  }

 private:
  std::vector<MoreCase> cases_;
  std::vector<nlohmann::json> want_;
};

// Saves the state after `split` of `total` steps, loads it into a fresh model
// and optimizer, finishes there and returns the largest difference from an
// uninterrupted run. Gradients are random, or those of parity_loss() for
// second order optimizers.
inline double save_load_round_trip_more(const MoreCase& m, int split = 5, int total = 8) {
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

}  // namespace timm::test
