// Lookahead ("lookahead_<opt>") against timm's Lookahead through
// create_optimizer_v2, wrapping optimizers of several plugins (torch's SGD
// and AdamW, timm's RMSpropTF and Lamb, a second order one): 12 steps (two slow-weight syncs), parameters
// and state (slow weights included) compared; and resume from a checkpoint.
#include "optim_parity.hpp"
#include "test_support.hpp"
#include "timm/base/error.hpp"
#include "timm/optim/lookahead.hpp"

#include <doctest/doctest.h>

namespace test_lookahead {

namespace {

using timm::test::OptimCase;
using timm::test::StateCase;

// Measured 0 (the same CPU kernels as timm's per-tensor path); 1e-6 leaves
// room for float32 rounding on other builds.
constexpr double kTolerance = 1e-6;

StateCase make(const std::string& name, const std::string& opt, double lr, double wd) {
  StateCase m{OptimCase(name, opt, lr, wd)};
  m.c.steps = 12;
  return m;
}

std::vector<StateCase> make_cases() {
  std::vector<StateCase> cases;
  cases.push_back(make("lookahead_sgd", "lookahead_sgd", 0.1, 0.05));
  cases.push_back(make("Lookahead_AdamW", "Lookahead_AdamW", 1e-2, 0.05));
  cases.back().c.kwargs = {{"amsgrad", "True"}};
  cases.push_back(make("lookahead_rmsproptf", "lookahead_rmsproptf", 1e-2, 0.05));
  cases.push_back(make("lookahead_lamb", "lookahead_lamb", 1e-2, 0.05));
  cases.back().c.betas = std::vector<double>{0.8, 0.99};
  cases.push_back(make("lookahead_adahessian", "lookahead_adahessian", 1e-2, 0.05));
  cases.back().loss = true;
  return cases;
}

timm::test::StateOracle oracle(make_cases());

}  // namespace

TEST_CASE("lookahead wraps torch's optimizers as timm") {
  oracle.expect_parity("lookahead_sgd", kTolerance);
  oracle.expect_parity("Lookahead_AdamW", kTolerance);
}

TEST_CASE("lookahead wraps timm-cpp's optimizers as timm") {
  oracle.expect_parity("lookahead_rmsproptf", kTolerance);
  oracle.expect_parity("lookahead_lamb", kTolerance);
  oracle.expect_parity("lookahead_adahessian", kTolerance);
}

TEST_CASE("lookahead state survives save and load") {
  timm::test::load_builtin_plugins();
  for (const char* name : {"lookahead_sgd", "lookahead_lamb", "lookahead_adahessian"}) {
    // Split after the first sync so the slow weights are in the checkpoint.
    const double diff = timm::test::save_load_round_trip_state(oracle.get(name), 7, 12);
    MESSAGE(std::string(name) << " resumed vs uninterrupted: max diff = " << diff);
    CHECK(diff == 0.0);
  }
}

TEST_CASE("lookahead loads a checkpoint of its base optimizer") {
  timm::test::load_builtin_plugins();
  timm::test::ParityModel model;
  timm::OptimizerArgs args;
  args.opt = "lamb";
  timm::OptimizerPtr base = timm::create_optimizer(model, model.no_weight_decay(), args);
  for (auto& p : model.parameters()) {
    if (p.requires_grad()) p.mutable_grad() = at::ones_like(p);
  }
  base->step();
  torch::serialize::OutputArchive out;
  base->save(out);
  timm::test::TempDir dir;
  const auto path = (dir / "base.pt").string();
  out.save_to(path);

  args.opt = "lookahead_lamb";
  timm::OptimizerPtr wrapped = timm::create_optimizer(model, model.no_weight_decay(), args);
  torch::serialize::InputArchive in;
  in.load_from(path);
  wrapped->load(in);
  const auto& lookahead = dynamic_cast<const timm::Lookahead&>(*wrapped);
  CHECK(lookahead.lookahead_step(0) == 0);
  CHECK(!lookahead.slow_weights(0, 0).defined());
}

TEST_CASE("lookahead rejects bad settings and unknown base optimizers") {
  timm::test::load_builtin_plugins();
  timm::test::ParityModel model;
  timm::OptimizerArgs args;
  args.opt = "lookahead_nosuchopt";
  CHECK_THROWS_AS(timm::create_optimizer(model, {}, args), timm::UsageError);
  args.opt = "sgd";
  auto make_base = [&] { return timm::create_optimizer(model, {}, args); };
  std::vector<std::vector<at::Tensor>> params;
  for (const auto& group : timm::param_groups_weight_decay(model, args.weight_decay, {}))
    params.push_back(group.params);
  CHECK_THROWS_AS(timm::Lookahead(make_base(), params, 1.5, 6), timm::UsageError);
  CHECK_THROWS_AS(timm::Lookahead(make_base(), params, 0.5, 0), timm::UsageError);
}

}  // namespace test_lookahead
