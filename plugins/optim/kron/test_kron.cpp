// Parity of "kron", "kronw" and "kronc" with timm's Kron through
// create_optimizer_v2: 10 steps with weight-decay and layer-decay groups, lr
// changes, a parameter without gradient on some steps, on the small model and
// on the big one (conv kernels, 3-D tensors); the kwargs that shape the
// preconditioners (update probability, max_size_triangular, memory_save_mode,
// flatten, ...); the final parameters, the state (step, update_counter,
// momentum_buffer), the groups and the log line compared. Also: the Python
// random.Random(1337) the draws come from, against Python's; save / load
// round trips; bad arguments.
//
// The probes V come from torch's default CPU generator (timm's default,
// deterministic=False): the oracle seeds it with the case's seed and then
// builds its model, whose Conv2d and Linear draw their initial weights; our
// ParityModel draws the same, so each case seeds at::manual_seed(seed) before
// the harness builds its model. With deterministic=True the probes' seeds come
// from the Python rng (rng.randint(0, 2**31)).
#include <mutex>
#include <sstream>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <torch/nn/module.h>

#include "optim_parity.hpp"
#include "test_support.hpp"
#include "timm/base/error.hpp"
#include "timm/base/python_random.hpp"

#include <doctest/doctest.h>

namespace test_kron {

namespace {

using timm::test::optim_case;
using timm::test::OptimCase;
using timm::test::StateCase;

// timm runs _calc_A_and_conjB, _q_terms, _precond_grad and _balance_Q through
// torch.compile (inductor fuses and reorders their float32 ops); we run the
// same ATen ops eagerly. Measured with timm itself, eager (has_dynamo False)
// against the oracle's compiled run, over every case below: at most 4.8e-7 on
// the parameters ("big kron"), state equal; a Python transcription of this
// plugin's step equals timm's eager step exactly. 1e-5 leaves a factor 20 for
// the preconditioner's feedback; parameters are O(1).
constexpr double kTolerance = 1e-5;
// momentum_buffer, step and update_counter do not depend on Q: same kernels
// in the same order as timm's.
constexpr double kStateTolerance = 1e-6;

std::vector<OptimCase> make_cases() {
  std::vector<OptimCase> cases;
  cases.push_back(optim_case("kron", "kron", 1e-2, 0.05));
  cases.push_back(optim_case("kronw", "kronw", 1e-2, 0.05));
  cases.push_back(optim_case("kronc", "kronc", 1e-2, 0.5));
  cases.push_back(optim_case("kron p=1.0", "kron", 1e-2, 0.05, {{"preconditioner_update_probability", "1.0"}}));
  cases.push_back(optim_case("kron p=0.4", "kron", 1e-2, 0.05, {{"preconditioner_update_probability", "0.4"}}));
  cases.push_back(optim_case("kron max_size_triangular=3", "kron", 1e-2, 0.05, {{"max_size_triangular", "3"}}));
  cases.push_back(optim_case("kron one_diag", "kron", 1e-2, 0.05, {{"memory_save_mode", "one_diag"}}));
  cases.push_back(optim_case("kron smart_one_diag", "kronw", 1e-2, 0.05, {{"memory_save_mode", "'smart_one_diag'"}}));
  cases.push_back(optim_case("kron all_diag", "kron", 1e-2, 0.05, {{"memory_save_mode", "all_diag"}}));
  cases.push_back(optim_case("kron deterministic", "kron", 1e-2, 0.05, {{"deterministic", "True"}}));
  cases.push_back(optim_case("kron stochastic decay", "kronw", 1e-2, 0.5,
                             {{"stochastic_weight_decay", "True"}, {"deterministic", "True"}}));
  cases.push_back(optim_case("kron kwargs", "kron", 3e-3, 0.05,
                             {{"momentum_into_precond_update", "False"},
                              {"precond_lr", "0.3"},
                              {"precond_init_scale", "2.0"},
                              {"min_ndim_triangular", "3"},
                              {"mu_dtype", "None"},
                              {"precond_dtype", "None"}}));
  cases.back().momentum = 0.8;
  cases.push_back(optim_case("kron flatten", "kron", 1e-2, 0.05, {{"flatten", "True"}, {"flatten_start_dim", "1"}}));
  cases.push_back(optim_case("kron eps+betas dropped", "kron", 1e-2, 0.05));
  cases.back().eps = 1e-3;
  cases.back().betas = std::vector<double>{0.9, 0.99};
  cases.push_back(optim_case("kron layer-decay", "kron", 1e-2, 0.05));
  cases.back().layer_decay = 0.8;
  cases.push_back(optim_case("kronw layer-decay", "kronw", 1e-2, 0.05));
  cases.back().layer_decay = 0.7;
  return cases;
}

timm::test::OptimOracle oracle(make_cases());  // runs timm on first use

StateCase big(const std::string& name, const std::string& opt, double lr, double wd,
              std::map<std::string, std::string> kwargs = {}) {
  StateCase m = timm::test::state_case(name, opt, lr, wd, std::move(kwargs));
  m.big = true;
  return m;
}

std::vector<StateCase> make_big_cases() {
  std::vector<StateCase> cases;
  cases.push_back(big("big kron", "kron", 1e-2, 0.05));
  // The Python rng's draw 131 is below 0.01: _balance_Q runs once, on a (2, 3) parameter.
  cases.push_back(big("big kronw deterministic", "kronw", 1e-2, 0.05, {{"deterministic", "True"}}));
  cases.push_back(big("big kronc flatten", "kronc", 1e-2, 0.5, {{"flatten", "True"}}));
  cases.push_back(big("big kron max_size_triangular=18", "kron", 1e-2, 0.05, {{"max_size_triangular", "18"}}));
  cases.push_back(big("big kron one_diag", "kron", 1e-2, 0.05, {{"memory_save_mode", "one_diag"}}));
  cases.push_back(big("big kron smart_one_diag", "kron", 1e-2, 0.05, {{"memory_save_mode", "smart_one_diag"}}));
  return cases;
}

timm::test::StateOracle big_oracle(make_big_cases());

}  // namespace

TEST_CASE("kron, kronw and kronc match timm's Kron") {
  for (const char* name :
       {"kron", "kronw", "kronc", "kron p=1.0", "kron p=0.4", "kron max_size_triangular=3", "kron one_diag",
        "kron smart_one_diag", "kron all_diag", "kron deterministic", "kron stochastic decay", "kron kwargs",
        "kron flatten", "kron eps+betas dropped", "kron layer-decay", "kronw layer-decay"}) {
    // The probes come from the default generator, seeded as the oracle seeds it.
    at::manual_seed(static_cast<uint64_t>(oracle.get(name).seed));
    oracle.expect_parity(name, kTolerance, kStateTolerance);
  }
}

TEST_CASE("kron matches timm's Kron on conv kernels and 3-D tensors") {
  for (const char* name : {"big kron", "big kronw deterministic", "big kronc flatten",
                           "big kron max_size_triangular=18", "big kron one_diag", "big kron smart_one_diag"}) {
    at::manual_seed(static_cast<uint64_t>(big_oracle.get(name).c.seed));
    big_oracle.expect_parity(name, kTolerance);
  }
}

// With deterministic=True every draw comes from the optimizer's Python rng,
// which save() keeps (as timm's state_dict 'rng_state'), with Q.
TEST_CASE("kron state survives save and load") {
  oracle.expect_round_trips({"kron deterministic", "kron stochastic decay"});
  big_oracle.expect_round_trips({"big kronw deterministic"});
}

// With deterministic=False (timm's default) the probes come from torch's
// default generator, which the trainer's checkpoint keeps (not the
// optimizer's, as in timm): saved and restored around the optimizer's state
// here, as a resumed run does, resumed equals uninterrupted.
TEST_CASE("kron with the default generator resumes as the trainer resumes it") {
  timm::test::load_builtin_plugins();
  for (const char* opt : {"kron", "kronc"}) {
    CAPTURE(opt);
    timm::test::TempDir dir;
    timm::OptimizerArgs args;
    args.opt = opt;
    args.lr = 1e-2;
    args.weight_decay = 0.05;
    if (std::string(opt) == "kronc") args.kwargs = {{"flatten", "True"}};  // Q of the flattened kernel
    auto gen = at::detail::createCPUGenerator(1234);
    timm::test::BigParityModel a;
    timm::test::BigParityModel b;
    {
      at::NoGradGuard no_grad;
      for (auto& item : a.named_parameters()) item.value().copy_(at::randn(item.value().sizes(), gen));
      for (auto& item : b.named_parameters()) item.value().copy_(a.named_parameters()[item.key()]);
    }
    constexpr int kTotal = 8;
    constexpr int kSplit = 5;
    std::vector<std::map<std::string, at::Tensor>> grads(kTotal);
    for (auto& step : grads) {
      for (const auto& item : a.named_parameters()) step[item.key()] = at::randn(item.value().sizes(), gen);
    }
    auto run = [&](torch::nn::Module& model, timm::Optimizer& optimizer, int from, int to) {
      for (int k = from; k < to; ++k) {
        for (std::size_t g = 0; g < optimizer.num_groups(); ++g) optimizer.set_lr(g, args.lr * (1.0 - 0.1 * k));
        for (auto& item : model.named_parameters()) {
          if (item.value().requires_grad()) item.value().mutable_grad() = grads[k][item.key()].clone();
        }
        optimizer.step();
      }
    };
    at::manual_seed(7);
    timm::OptimizerPtr opt_a = timm::create_optimizer(a, a.no_weight_decay(), args);
    run(a, *opt_a, 0, kTotal);

    at::manual_seed(7);
    timm::OptimizerPtr opt_b = timm::create_optimizer(b, b.no_weight_decay(), args);
    run(b, *opt_b, 0, kSplit);
    const auto path = (dir / "optimizer.pt").string();
    at::Tensor rng_state;
    {
      at::Generator generator = at::detail::getDefaultCPUGenerator();
      std::lock_guard<std::mutex> lock(generator.mutex());
      rng_state = generator.get_state();
      torch::serialize::OutputArchive archive;
      opt_b->save(archive);
      archive.save_to(path);
    }
    at::manual_seed(99);  // a new process: another state until the checkpoint's is restored
    timm::test::BigParityModel resumed;
    {
      at::NoGradGuard no_grad;
      for (auto& item : resumed.named_parameters()) item.value().copy_(b.named_parameters()[item.key()]);
    }
    timm::OptimizerPtr opt_c = timm::create_optimizer(resumed, resumed.no_weight_decay(), args);
    {
      torch::serialize::InputArchive archive;
      archive.load_from(path);
      opt_c->load(archive);
      at::Generator generator = at::detail::getDefaultCPUGenerator();
      std::lock_guard<std::mutex> lock(generator.mutex());
      generator.set_state(rng_state);
    }
    run(resumed, *opt_c, kSplit, kTotal);
    double diff = 0.0;
    for (const auto& item : a.named_parameters()) {
      diff = timm::test::worst_diff(diff,
                                    (item.value() - resumed.named_parameters()[item.key()]).abs().max().item<double>());
    }
    timm::test::check_round_trip(opt, diff);
  }
}

TEST_CASE("kron's rng is Python's random.Random(1337)") {
  // random(), randint(0, 2**31) (rejection on 32 bits), getrandbits(k) and
  // randint(0, 10), across several of the twister's 624-word refills.
  const std::string script =
      "import random\n"
      "r = random.Random(1337)\n"
      "out = []\n"
      "for i in range(1000):\n"
      "    out.append(repr(r.random()))\n"
      "    out.append(str(r.randint(0, 2**31)))\n"
      "    out.append(str(r.getrandbits(1 + i % 32)))\n"
      "    out.append(str(r.randint(0, 10)))\n"
      "print(' '.join(out))\n";
  const timm::test::CommandResult result = timm::test::run_command({timm::test::python(), "-c", script});
  REQUIRE(result.exit_code == 0);
  std::istringstream want(result.output);
  timm::PyRandom rng(1337);
  int mismatches = 0;
  for (int i = 0; i < 1000; ++i) {
    double random = 0.0;
    int64_t randint = 0;
    int64_t bits = 0;
    int64_t small = 0;
    want >> random >> randint >> bits >> small;
    REQUIRE(want);
    // repr() is the shortest text that reads back as the same double.
    mismatches += rng.random() != random ? 1 : 0;
    mismatches += rng.randint(0, int64_t{1} << 31) != randint ? 1 : 0;
    mismatches += static_cast<int64_t>(rng.getrandbits(1 + i % 32)) != bits ? 1 : 0;
    mismatches += rng.randint(0, 10) != small ? 1 : 0;
  }
  CHECK(mismatches == 0);

  // The state round-trips.
  timm::PyRandom copy(1);
  copy.set_state(rng.state());
  CHECK(copy.random() == rng.random());
  CHECK_THROWS_AS(copy.set_state({1, 2, 3}), std::invalid_argument);
}

TEST_CASE("kron rejects bad arguments") {
  timm::test::load_builtin_plugins();
  timm::test::ParityModel model;
  auto rejects = [&](const std::string& opt, std::map<std::string, std::string> kwargs, const std::string& what,
                     double lr = 1e-2, double momentum = 0.9) {
    timm::OptimizerArgs args;
    args.opt = opt;
    args.lr = lr;
    args.momentum = momentum;
    args.kwargs = std::move(kwargs);
    CAPTURE(what);
    CHECK_THROWS_WITH_AS(timm::create_optimizer(model, {}, args), doctest::Contains(what.c_str()), timm::UsageError);
  };
  rejects("kron", {{"amsgrad", "True"}}, "amsgrad");
  rejects("kron", {}, "learning rate", -1.0);
  rejects("kron", {}, "momentum", 1e-2, 1.0);
  rejects("kron", {}, "momentum", 1e-2, -0.1);
  rejects("kronc", {}, "corrected weight decay", 0.0);
  rejects("kron", {{"memory_save_mode", "'some_diag'"}}, "memory_save_mode");
  rejects("kron", {{"mu_dtype", "torch.bfloat16"}}, "mu_dtype");
  rejects("kron", {{"precond_dtype", "'float16'"}}, "precond_dtype");
  rejects("kron", {{"preconditioner_update_probability", "0"}}, "preconditioner_update_probability");
  rejects("kron", {{"preconditioner_update_probability", "precond_update_prob_schedule"}},
          "preconditioner_update_probability");
  rejects("kron", {{"flatten_start_dim", "1.5"}}, "flatten_start_dim");
  rejects("kron", {{"max_size_triangular", "big"}}, "max_size_triangular");
  rejects("kron", {{"flatten", "maybe"}}, "flatten");
}

// Contracted left to right (torch.einsum without opt_einsum, timm's setup),
// one step on a 768x768 weight asks for 1.4 TB and on a 128x128x3x3 kernel
// for 9.7 GB: the outer product of the factors. Contracted the tensor first,
// both take a few MB.
TEST_CASE("kron steps model-sized weights without the factors' outer product") {
  timm::test::load_builtin_plugins();
  torch::nn::Module model;
  model.register_parameter("linear", at::randn({768, 768}) * 0.02);
  model.register_parameter("conv", at::randn({128, 128, 3, 3}) * 0.02);
  timm::OptimizerArgs args;
  args.opt = "kron";
  args.lr = 1e-3;
  timm::OptimizerPtr optimizer = timm::create_optimizer(model, {}, args);
  std::vector<at::Tensor> before;
  for (auto& p : model.parameters()) {
    p.mutable_grad() = at::randn_like(p) * 0.01;
    before.push_back(p.detach().clone());
  }
  for (int step = 0; step < 2; ++step) optimizer->step();  // a preconditioner update on each (probability 1)
  const auto params = model.parameters();
  for (std::size_t i = 0; i < params.size(); ++i) {
    CHECK(at::isfinite(params[i]).all().item<bool>());
    CHECK_FALSE(at::equal(params[i], before[i]));
  }
}

}  // namespace test_kron
