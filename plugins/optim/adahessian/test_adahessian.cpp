// Parity of "adahessian" with timm's Adahessian through create_optimizer_v2:
// 10 steps of a loss with second derivatives on and off the diagonal
// (optim_oracle_more.py's loss(), evaluated the same way here), backward with
// create_graph as train.py's second order path, weight-decay groups, lr
// changes and a parameter outside the loss on some steps; parameters and
// state compared. The Rademacher samples come from the same seeded
// generator in both.
#include <doctest/doctest.h>

#include "optim_parity_more.hpp"
#include "test_support.hpp"
#include "timm/core/error.hpp"

namespace {

using timm::test::MoreCase;
using timm::test::OptimCase;

// Measured 0: the same CPU kernels as timm's per-tensor path (the foreach
// ops run them tensor by tensor on the CPU), in the same order. 1e-6 leaves
// room for float32 rounding on other builds; parameters are O(1).
constexpr double kTolerance = 1e-6;

MoreCase make(const std::string& name, double lr, double wd, std::map<std::string, std::string> kwargs = {}) {
  MoreCase m{OptimCase(name, "adahessian", lr, wd)};
  m.c.kwargs = std::move(kwargs);
  m.loss = true;
  return m;
}

std::vector<MoreCase> make_cases() {
  std::vector<MoreCase> cases;
  cases.push_back(make("adahessian", 1e-2, 0.05));
  cases.push_back(make("adahessian betas eps", 1e-2, 0.05));
  cases.back().c.betas = std::vector<double>{0.8, 0.99};
  cases.back().c.eps = 1e-4;
  cases.push_back(
      make("adahessian kwargs", 3e-3, 0.1,
           {{"hessian_power", "0.5"}, {"n_samples", "2"}, {"update_each", "2"}, {"avg_conv_kernel", "True"}}));
  return cases;
}

timm::test::MoreOracle oracle(make_cases());

}  // namespace

TEST_CASE("adahessian matches timm") {
  oracle.expect_parity("adahessian", kTolerance);
  oracle.expect_parity("adahessian betas eps", kTolerance);
  oracle.expect_parity("adahessian kwargs", kTolerance);
}

TEST_CASE("adahessian state survives save and load") {
  timm::test::load_builtin_plugins();
  for (const char* name : {"adahessian", "adahessian kwargs"}) {
    const double diff = timm::test::save_load_round_trip_more(oracle.get(name));
    MESSAGE(std::string(name) << " resumed vs uninterrupted: max diff = " << diff);
    CHECK(diff == 0.0);
  }
}

TEST_CASE("adahessian is second order and needs the gradients' graph") {
  timm::test::load_builtin_plugins();
  timm::test::ParityModel model;
  timm::OptimizerArgs args;
  args.opt = "adahessian";
  timm::OptimizerPtr optimizer = timm::create_optimizer(model, {}, args);
  CHECK(optimizer->is_second_order());
  for (auto& p : model.parameters()) {
    if (p.requires_grad()) p.mutable_grad() = at::ones_like(p);
  }
  CHECK_THROWS_WITH_AS(optimizer->step(), doctest::Contains("create_graph"), timm::Error);
  args.kwargs = {{"hessian_power", "2"}};
  CHECK_THROWS_AS(timm::create_optimizer(model, {}, args), timm::UsageError);
}
