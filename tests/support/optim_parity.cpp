// The optimizer parity harness's functions, compiled once for every test
// that includes optim_parity.hpp (each of a dozen optimizer tests compiled
// them again when they were inline: 24-30 s a file).
#include "optim_parity.hpp"

#include <doctest/doctest.h>  // last: c10 defines a CHECK of its own

namespace timm::test {

OptimCase optim_case(const std::string& name, const std::string& opt, double lr, double weight_decay,
                     std::map<std::string, std::string> kwargs) {
  OptimCase c(name, opt, lr, weight_decay);
  c.kwargs = std::move(kwargs);
  return c;
}

void check_round_trip(const std::string& name, double diff) {
  MESSAGE(name << " resumed vs uninterrupted: max diff = " << diff);
  CHECK(diff == 0.0);
}

nlohmann::json to_json(const OptimCase& c) {
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

std::vector<nlohmann::json> run_steps_oracle(const nlohmann::json& request) {
  TempDir dir;
  const auto out = dir / "optim.json";
  run_oracle("optim_oracle.py", {"steps", out.string(), request.dump()});
  std::ifstream in(out);
  return nlohmann::json::parse(in).get<std::vector<nlohmann::json>>();
}

std::vector<nlohmann::json> run_optim_oracle(const std::vector<OptimCase>& cases) {
  nlohmann::json request = nlohmann::json::array();
  for (const auto& c : cases) request.push_back(to_json(c));
  return run_steps_oracle(request);
}

at::Tensor tensor_from_json(const nlohmann::json& values, at::IntArrayRef shape) {
  std::vector<float> data;
  for (const auto& v : values) data.push_back(static_cast<float>(v.get<double>()));
  return at::tensor(data, at::kFloat).reshape(shape);
}

void load_values(torch::nn::Module& model, const nlohmann::json& values) {
  at::NoGradGuard no_grad;
  for (auto& item : model.named_parameters()) {
    item.value().copy_(tensor_from_json(values.at(item.key()), item.value().sizes()));
  }
}

double max_abs_diff(torch::nn::Module& model, const nlohmann::json& expected) {
  double diff = 0.0;
  for (const auto& item : model.named_parameters()) {
    const at::Tensor want = tensor_from_json(expected.at(item.key()), item.value().sizes());
    diff = worst_diff(diff, (item.value().detach() - want).abs().max().item<double>());
  }
  return diff;
}

void accumulate(const at::Tensor& ours, const at::Tensor& want, double& abs_diff, double& rel_diff) {
  const double diff = (ours.detach().to(at::kDouble) - want.to(at::kDouble)).abs().max().item<double>();
  const double scale = want.to(at::kDouble).abs().max().item<double>();
  abs_diff = worst_diff(abs_diff, diff);
  rel_diff = worst_diff(rel_diff, scale > 0 ? diff / scale : diff);
}

void compare_state(const Optimizer& optimizer, const OptimCase& c, const nlohmann::json& o, ParityResult& result) {
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

ParityResult optimizer_parity_full(const OptimCase& c, const nlohmann::json& o) {
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

double optimizer_parity(const OptimCase& c, const nlohmann::json& o) { return optimizer_parity_full(c, o).param_abs; }

double save_load_round_trip(const OptimCase& c, int split, int total, const InterruptedOptimizer& interrupted) {
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

  OptimizerPtr opt_b = interrupted ? interrupted(b) : create_optimizer(b, b.no_weight_decay(), args, b.group_matcher());
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
    diff = worst_diff(diff, (item.value() - resumed.named_parameters()[item.key()]).abs().max().item<double>());
  }
  return diff;
}

std::unique_ptr<ParityModel> make_parity_model(bool big) {
  if (big) return std::make_unique<BigParityModel>();
  return std::make_unique<ParityModel>();
}

std::vector<nlohmann::json> run_optim_oracle_state(const std::vector<StateCase>& cases) {
  nlohmann::json request = nlohmann::json::array();
  for (const auto& m : cases) {
    nlohmann::json j = to_json(m.c);
    j["model"] = m.big ? "big" : "small";
    j["loss"] = m.loss;
    request.push_back(j);
  }
  return run_steps_oracle(request);
}

at::Tensor parity_loss(torch::nn::Module& model,
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

void set_step_grads(torch::nn::Module& model, Optimizer& optimizer, const StateCase& m, const nlohmann::json& o,
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

double max_rel_diff(const at::Tensor& ours, const std::vector<double>& want) {
  const at::Tensor w = at::tensor(want, at::kDouble);
  const at::Tensor o = ours.detach().to(at::kDouble).reshape({-1});
  if (o.numel() != w.numel()) return 1e30;
  if (w.numel() == 0) return 0.0;
  return ((o - w).abs().max() / std::max(1.0, w.abs().max().item<double>())).item<double>();
}

double state_diff(const Optimizer& optimizer, const nlohmann::json& o) {
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
        diff = worst_diff(diff, max_rel_diff(state.at(key), value.get<std::vector<double>>()));
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
          diff = worst_diff(diff, max_rel_diff(slow, want.at("lookahead_slow_buff").get<std::vector<double>>()));
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
      diff = worst_diff(diff, max_rel_diff(by_name.at(name).at(key), value.get<std::vector<double>>()));
    }
  }
  return diff;
}

StateResult optimizer_parity_state(const StateCase& m, const nlohmann::json& o) {
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

double save_load_round_trip_state(const StateCase& m, int split, int total) {
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
    diff = worst_diff(diff, (item.value() - resumed->named_parameters()[item.key()]).abs().max().item<double>());
  }
  return diff;
}

void StateOracle::expect_round_trips(std::initializer_list<const char*> names) {
  load_builtin_plugins();
  for (const char* name : names) check_round_trip(name, save_load_round_trip_state(get(name)));
}

StateCase state_case(const std::string& name, const std::string& opt, double lr, double weight_decay,
                     std::map<std::string, std::string> kwargs) {
  return StateCase{optim_case(name, opt, lr, weight_decay, std::move(kwargs))};
}
double one_pass_vs_float64_ops(const OptimizerArgs& args, int64_t numel, int steps) {
  at::manual_seed(0);
  const at::Tensor w32 = at::randn({numel}).requires_grad_();
  const at::Tensor w64 = w32.detach().to(at::kDouble).requires_grad_();
  auto make = [&](const at::Tensor& w) {
    ParamGroup group;
    group.params = {w};
    group.weight_decay = args.weight_decay;
    return create_optimizer(std::vector<ParamGroup>{group}, args);
  };
  const OptimizerPtr one_pass = make(w32);
  const OptimizerPtr ops = make(w64);
  for (int step = 0; step < steps; ++step) {
    const at::Tensor grad = at::randn({numel});
    w32.mutable_grad() = grad.clone();
    w64.mutable_grad() = grad.to(at::kDouble);
    one_pass->step();
    ops->step();
  }
  return (w32.detach().to(at::kDouble) - w64.detach()).abs().max().item<double>();
}

OptimizerArgs one_pass_case(const std::string& opt, double lr, double weight_decay,
                            std::map<std::string, std::string> kwargs) {
  OptimizerArgs args;
  args.opt = opt;
  args.lr = lr;
  args.weight_decay = weight_decay;
  args.kwargs = std::move(kwargs);
  return args;
}

void expect_one_pass_near_float64_ops(const std::vector<OptimizerArgs>& cases, int steps, double tolerance) {
  for (const OptimizerArgs& args : cases) {
    const double diff = one_pass_vs_float64_ops(args, kOnePassNumel, steps);
    std::string kwargs;
    for (const auto& [key, value] : args.kwargs) kwargs += " " + key + "=" + value;
    MESSAGE(args.opt << kwargs << " momentum " << args.momentum << ": max |float32 loops - float64 ops| = " << diff);
    CHECK(std::isfinite(diff));
    CHECK(diff <= tolerance);
  }
}

}  // namespace timm::test
