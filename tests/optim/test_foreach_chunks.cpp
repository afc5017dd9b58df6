// ForeachOptimizer hands an optimizer that updates each parameter on its own
// (updates_parameters_independently()) its groups in runs of parameters, so
// that the foreach temporaries stay in cache. The runs must not change the
// result: for every registered optimizer built on ForeachOptimizer, three
// steps with each parameter in a run of its own (set_chunk_numel(1)) give
// the same parameters, bit for bit, as three steps with each group in one
// run. An optimizer that declared itself independent while its update reads
// the whole group (a global norm, a per-group counter) fails here.
#include <optional>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <torch/nn/module.h>

#include "test_support.hpp"
#include "timm/base/error.hpp"
#include "timm/optim/foreach_optimizer.hpp"
#include "timm/optim/optimizer.hpp"
#include "timm/plugin/registry.hpp"

#include <doctest/doctest.h>

namespace test_foreach_chunks {

namespace {

// A module whose parameters fall into timm's decay and no-decay groups.
std::shared_ptr<torch::nn::Module> make_model() {
  at::manual_seed(0);
  auto model = std::make_shared<torch::nn::Module>();
  model->register_parameter("conv_weight", at::randn({16, 8, 3, 3}) * 0.1);
  model->register_parameter("conv_bias", at::randn({16}) * 0.1);
  model->register_parameter("fc_weight", at::randn({10, 64}) * 0.1);
  model->register_parameter("fc_bias", at::randn({10}) * 0.1);
  model->register_parameter("proj_weight", at::randn({64, 32}) * 0.1);
  return model;
}

// The parameters after three steps of `opt` (nullopt when the optimizer
// cannot run here: a package it wraps, gradients with a graph).
std::optional<std::vector<at::Tensor>> train(const std::string& opt, int64_t chunk_numel, bool& foreach_based) {
  auto model = make_model();
  timm::OptimizerArgs args;
  args.opt = opt;
  args.lr = 1e-2;
  args.weight_decay = 0.05;
  timm::OptimizerPtr optimizer;
  try {
    optimizer = timm::create_optimizer(*model, {}, args);
  } catch (const timm::UsageError&) {
    return std::nullopt;  // bitsandbytes / APEX names: refused with the built-in to use
  }
  auto* foreach_optimizer = dynamic_cast<timm::ForeachOptimizer*>(optimizer.get());
  foreach_based = foreach_optimizer != nullptr;
  if (foreach_optimizer) foreach_optimizer->set_chunk_numel(chunk_numel);
  at::manual_seed(1);  // gradients, and the draws of optimizers that draw (Kron's probes)
  try {
    for (int step = 0; step < 3; ++step) {
      for (auto& p : model->parameters()) p.mutable_grad() = at::randn_like(p);
      optimizer->step();
    }
  } catch (const timm::Error& e) {
    // AdaHessian: needs gradients with a graph.
    REQUIRE_MESSAGE(std::string(e.what()).find("graph") != std::string::npos, e.what());
    return std::nullopt;
  }
  std::vector<at::Tensor> params;
  for (const auto& p : model->parameters()) params.push_back(p.detach().clone());
  return params;
}

}  // namespace

TEST_CASE("every ForeachOptimizer gives the same parameters whether its groups run whole or one parameter at a time") {
  timm::test::load_builtin_plugins();
  int checked = 0;
  std::string not_run, not_foreach;
  for (const timm::RegistryEntry* entry : timm::Registry::global().entries(timm::PluginKind::kOptimizer)) {
    const std::string& opt = entry->name;
    CAPTURE(opt);
    bool foreach_based = false;
    const auto whole = train(opt, timm::ForeachOptimizer::kChunkNumel, foreach_based);
    const auto apart = train(opt, 1, foreach_based);
    REQUIRE(whole.has_value() == apart.has_value());
    if (!whole) {
      not_run += " " + opt;
      continue;
    }
    if (!foreach_based) {
      not_foreach += " " + opt;
      continue;
    }
    REQUIRE(whole->size() == apart->size());
    for (std::size_t i = 0; i < whole->size(); ++i) {
      CAPTURE(i);
      CHECK(at::isfinite((*whole)[i]).all().item<bool>());
      CHECK(at::equal((*whole)[i], (*apart)[i]));
    }
    ++checked;
  }
  MESSAGE(checked << " optimizers checked; not run here:" << not_run << "; not on ForeachOptimizer:" << not_foreach);
  // 101 names: 15 wrap packages, adahessian needs a graph; the other 85
  // are on ForeachOptimizer.
  CHECK(checked >= 85);
}

}  // namespace test_foreach_chunks
