// Parity of "sgd", "nesterov" and "momentum" with timm's create_optimizer_v2
// (torch.optim.SGD), and of "sgdw", "nesterovw", "csgdw", "sgdc" and "csgdc"
// (timm's SGDW, parameters and state): 10 steps with weight-decay groups, lr
// changes between steps and a parameter without gradient on some steps.
#include <sstream>

#include <torch/optim/sgd.h>

#include "optim_parity.hpp"
#include "test_support.hpp"
#include "timm/base/error.hpp"

#include <doctest/doctest.h>

namespace test_sgd {

namespace {

using timm::test::optim_case;
using timm::test::OptimCase;

// float32 steps through the same ATen kernels: differences stay at rounding.
constexpr double kTolerance = 1e-6;
// SGDW's momentum buffers, relative to their largest value: the same ops in
// timm's order, float32 rounding only.
constexpr double kStateTolerance = 1e-5;

std::vector<OptimCase> make_cases() {
  std::vector<OptimCase> cases{OptimCase("sgd", "sgd", 0.1, 1e-2)};
  for (const char* name : {"nesterov", "SGD"}) {
    cases.emplace_back(name, name, 0.05, 1e-3);
    cases.back().momentum = 0.8;
  }
  cases.emplace_back("momentum", "momentum", 0.1, 1e-2);
  cases.emplace_back("momentum+dampening+eps", "momentum", 0.1, 1e-2);
  cases.back().eps = 1e-3;
  cases.back().kwargs = {{"dampening", "0.1"}};
  cases.emplace_back("sgd wd 0", "sgd", 0.1, 0.0);
  // The per-tensor ops instead of torch's fused kernel.
  cases.push_back(optim_case("momentum fused=False", "momentum", 0.1, 1e-2, {{"fused", "False"}}));
  cases.push_back(optim_case("sgd fused=False", "sgd", 0.1, 1e-2, {{"fused", "False"}}));
  // timm's SGDW: Nesterov by the registry's default, decoupled decay.
  for (const char* name : {"sgdw", "nesterovw", "csgdw"}) cases.push_back(optim_case(name, name, 0.1, 1e-2));
  // lr² / max_lr scaled decay; a larger decay so that it shows.
  for (const char* name : {"sgdc", "csgdc"}) cases.push_back(optim_case(name, name, 0.1, 0.5));
  // Classic momentum with dampening, maximize; --opt-eps dropped.
  cases.push_back(optim_case("sgdw kwargs", "sgdw", 0.05, 1e-2,
                             {{"nesterov", "False"}, {"dampening", "0.1"}, {"maximize", "True"}}));
  cases.back().momentum = 0.8;
  cases.back().eps = 1e-3;
  // No momentum: no buffers (timm's state entries stay empty).
  cases.push_back(optim_case("sgdw no momentum", "sgdw", 0.1, 1e-2, {{"nesterov", "False"}}));
  cases.back().momentum = 0.0;
  // Cautious classic momentum.
  cases.push_back(optim_case("csgdw classic", "csgdw", 0.1, 1e-2, {{"nesterov", "False"}}));
  cases.push_back(optim_case("sgdw layer-decay", "sgdw", 0.1, 1e-2));
  cases.back().layer_decay = 0.8;
  return cases;
}

timm::test::OptimOracle oracle(make_cases());  // runs timm on first use

// Parameters and momentum buffers, as torch's SGD keeps them.
void check_parity(const std::string& name) { oracle.expect_parity(name, kTolerance, kStateTolerance); }

}  // namespace

TEST_CASE("sgd (nesterov) matches timm") { check_parity("sgd"); }

TEST_CASE("nesterov is sgd, and names are case-insensitive") {
  check_parity("nesterov");
  check_parity("SGD");
}

TEST_CASE("momentum (classic) matches timm, with dampening, and eps ignored") {
  check_parity("momentum");
  check_parity("momentum+dampening+eps");
}

TEST_CASE("sgd without weight decay puts everything in one group") { check_parity("sgd wd 0"); }

TEST_CASE("sgd and momentum with fused=False run the per-tensor ops, as timm") {
  check_parity("sgd fused=False");
  check_parity("momentum fused=False");
}

TEST_CASE("sgd state survives save and load") { oracle.expect_round_trips({"sgd", "momentum+dampening+eps"}); }

// Until 2026-12-05 the "sgd" names wrapped LibTorch's SGD (TorchOptimizer),
// and checkpoints hold that optimizer's archive: momentum buffers keyed by
// TensorImpl address. LibTorch runs torch's ops in torch's order, so the
// resumed run ends as ours uninterrupted; buffers not carried over would put
// it lr-sized steps away.
TEST_CASE("sgd resumes from the state of LibTorch's SGD") {
  timm::test::load_builtin_plugins();
  for (const char* name : {"nesterov", "momentum+dampening+eps"}) {
    CAPTURE(name);
    const timm::test::OptimCase& c = oracle.get(name);
    const double dampening = c.kwargs.contains("dampening") ? std::stod(c.kwargs.at("dampening")) : 0.0;
    const auto defaults =
        torch::optim::SGDOptions(c.lr).momentum(c.momentum).dampening(dampening).nesterov(dampening == 0);
    const auto libtorch_sgd = timm::test::libtorch_optimizer<torch::optim::SGD>(c, defaults);
    CHECK(timm::test::save_load_round_trip(c, 5, 8, libtorch_sgd) <= kTolerance);
  }
}

// An archive written to bytes and read back, as a checkpoint's.
torch::serialize::InputArchive reread(torch::serialize::OutputArchive& archive) {
  std::stringstream bytes;
  archive.save_to(bytes);
  torch::serialize::InputArchive in;
  in.load_from(bytes);
  return in;
}

TEST_CASE("sgd refuses LibTorch optimizer state of other parameters, or incomplete, with the reason") {
  timm::test::load_builtin_plugins();
  timm::test::ParityModel model;
  timm::OptimizerArgs args;
  args.opt = "sgd";
  const auto optimizer = timm::create_optimizer(model, model.no_weight_decay(), args);
  // One group of one tensor; the parity model has two groups.
  auto w = torch::zeros({3}, torch::requires_grad());
  torch::optim::SGD other({w}, torch::optim::SGDOptions(0.1).momentum(0.9));
  w.mutable_grad() = torch::ones({3});
  other.step();
  torch::serialize::OutputArchive saved;
  other.save(saved);
  torch::serialize::InputArchive in = reread(saved);
  CHECK_THROWS_WITH_AS(optimizer->load(in), doctest::Contains("other sizes than this optimizer's"), timm::Error);
  // torch's version mark without the rest.
  torch::serialize::OutputArchive truncated;
  truncated.write("pytorch_version", c10::IValue("1.5.0"));
  torch::serialize::InputArchive in2 = reread(truncated);
  CHECK_THROWS_WITH_AS(optimizer->load(in2), doctest::Contains("cannot load optimizer state: "), timm::Error);
}

TEST_CASE("sgd rejects bad --opt-kwargs and flags") {
  timm::test::load_builtin_plugins();
  timm::test::ParityModel model;
  timm::OptimizerArgs args;
  args.opt = "sgd";
  args.kwargs = {{"foo", "1"}};
  CHECK_THROWS_WITH_AS(timm::create_optimizer(model, {}, args), doctest::Contains("has no argument 'foo'"),
                       timm::UsageError);
  args.kwargs = {{"momentum", "0.5"}};
  CHECK_THROWS_AS(timm::create_optimizer(model, {}, args), timm::UsageError);
  args.kwargs = {{"dampening", "0.1"}};
  CHECK_THROWS_WITH_AS(timm::create_optimizer(model, {}, args), doctest::Contains("Nesterov"), timm::UsageError);
  args.kwargs = {};
  args.opt = "lookahead_sgd";  // wraps sgd (tests/core/test_lookahead.cpp checks it against timm)
  CHECK(timm::create_optimizer(model, {}, args)->describe().rfind("Lookahead (lookahead_sgd) optimizer: ", 0) == 0);
  args.opt = "sgdd";
  CHECK_THROWS_AS(timm::create_optimizer(model, {}, args), timm::UsageError);
}

TEST_CASE("sgdw and its variants match timm's SGDW") {
  oracle.expect_parity_each({"sgdw", "nesterovw", "csgdw", "sgdc", "csgdc", "sgdw kwargs", "sgdw no momentum",
                             "csgdw classic", "sgdw layer-decay"},
                            kTolerance, kStateTolerance);
}

TEST_CASE("sgdw state survives save and load") { oracle.expect_round_trips({"sgdw", "csgdc", "sgdw kwargs"}); }

TEST_CASE("sgdw rejects bad arguments") {
  timm::test::load_builtin_plugins();
  timm::test::ParityModel model;
  timm::OptimizerArgs args;
  args.opt = "sgdw";
  args.kwargs = {{"amsgrad", "True"}};
  CHECK_THROWS_WITH_AS(timm::create_optimizer(model, {}, args), doctest::Contains("'sgdw' has no argument 'amsgrad'"),
                       timm::UsageError);
  args.kwargs = {{"dampening", "0.1"}};
  CHECK_THROWS_WITH_AS(timm::create_optimizer(model, {}, args), doctest::Contains("Nesterov"), timm::UsageError);
  args.kwargs = {};
  args.momentum = 0.0;  // Nesterov (the default) needs a momentum
  CHECK_THROWS_WITH_AS(timm::create_optimizer(model, {}, args), doctest::Contains("Nesterov"), timm::UsageError);
  args.momentum = -0.5;
  args.kwargs = {{"nesterov", "False"}};
  CHECK_THROWS_WITH_AS(timm::create_optimizer(model, {}, args), doctest::Contains("invalid momentum value -0.5"),
                       timm::UsageError);
  args.momentum = 0.9;
  args.kwargs = {{"differentiable", "True"}};
  CHECK_THROWS_AS(timm::create_optimizer(model, {}, args), timm::UsageError);
  args.kwargs = {};
  args.lr = -0.1;
  CHECK_THROWS_WITH_AS(timm::create_optimizer(model, {}, args), doctest::Contains("invalid learning rate"),
                       timm::UsageError);
  args.opt = "sgdc";
  args.lr = 0.0;
  CHECK_THROWS_WITH_AS(timm::create_optimizer(model, {}, args), doctest::Contains("requires a positive max lr"),
                       timm::UsageError);
}

TEST_CASE("sgd's log line is train.py's") {
  timm::test::load_builtin_plugins();
  timm::test::ParityModel model;
  timm::OptimizerArgs args;
  args.opt = "sgd";
  args.lr = 0.1;
  args.weight_decay = 2e-5;
  const auto optimizer = timm::create_optimizer(model, model.no_weight_decay(), args);
  CHECK(optimizer->describe() ==
        "SGD (sgd) optimizer: lr: 0.1, momentum: 0.9, dampening: 0, weight_decay: 2e-05, nesterov: True, "
        "maximize: False, foreach: None, differentiable: False, fused: None");
  CHECK(optimizer->weight_decay(0) == 0.0);
  CHECK(optimizer->weight_decay(1) == 2e-5);
  CHECK(optimizer->mean_lr() == 0.1);
}

}  // namespace test_sgd
