// Parity of "adahessian" with timm's Adahessian through create_optimizer_v2:
// 10 steps of a loss with second derivatives on and off the diagonal
// (optim_oracle.py's loss(), evaluated the same way here), backward with
// create_graph as train.py's second order path, weight-decay groups, lr
// changes and a parameter outside the loss on some steps; parameters and
// state compared. The Rademacher samples come from the same seeded
// generator in both.
#include "optim_parity.hpp"
#include "test_support.hpp"
#include "timm/base/error.hpp"

#include <doctest/doctest.h>

namespace test_adahessian {

namespace {

using timm::test::StateCase;

// Measured 0: timm's per-tensor CPU kernels in timm's order (kSameKernelsTolerance).
constexpr double kTolerance = timm::test::kSameKernelsTolerance;

StateCase make(const std::string& name, double lr, double wd, std::map<std::string, std::string> kwargs = {}) {
  StateCase m = timm::test::state_case(name, "adahessian", lr, wd, std::move(kwargs));
  m.loss = true;
  return m;
}

std::vector<StateCase> make_cases() {
  std::vector<StateCase> cases;
  cases.push_back(make("adahessian", 1e-2, 0.05));
  cases.push_back(make("adahessian betas eps", 1e-2, 0.05));
  cases.back().c.betas = std::vector<double>{0.8, 0.99};
  cases.back().c.eps = 1e-4;
  cases.push_back(
      make("adahessian kwargs", 3e-3, 0.1,
           {{"hessian_power", "0.5"}, {"n_samples", "2"}, {"update_each", "2"}, {"avg_conv_kernel", "True"}}));
  return cases;
}

timm::test::StateOracle oracle(make_cases());

}  // namespace

TEST_CASE("adahessian matches timm") {
  oracle.expect_parity_each({"adahessian", "adahessian betas eps", "adahessian kwargs"}, kTolerance);
}

TEST_CASE("adahessian state survives save and load") { oracle.expect_round_trips({"adahessian", "adahessian kwargs"}); }

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

}  // namespace test_adahessian
