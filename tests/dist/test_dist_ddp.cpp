// DDP equivalence with real processes (Gloo on loopback): 2 ranks with batch B
// each give, step by step, the same parameters as 1 process with batch 2B,
// with and without gradient accumulation (no_sync); different initial weights
// per rank are overwritten by rank 0's; a parameter without gradient is an
// error naming it, unless find_unused_parameters.
#include <future>

#include <ATen/Parallel.h>
#include <torch/serialize.h>

#include "ddp_fixture.hpp"
#include "dist_support.hpp"
#include "test_support.hpp"
#include "timm/dist/ddp.hpp"

#include <doctest/doctest.h>

namespace test_dist_ddp {

namespace {

using timm::test::DdpCase;

std::string worker() { return (timm::test::bin_dir() / "ddp_worker").string(); }

// The job's ranks: run_workers of this test's worker.
std::vector<timm::test::CommandResult> run_workers(int world, const std::vector<std::string>& args) {
  return timm::test::run_workers(worker(), world, args);
}

// The single-process reference: rank 0's initial weights, batch world*B,
// the same accumulation.
std::vector<at::Tensor> reference(const DdpCase& c, bool with_bn) {
  at::set_num_threads(1);
  at::manual_seed(0);  // rank 0's seed in the worker
  timm::test::TinyNet model(false, with_bn);
  const auto [x, y] = timm::test::global_data(c);
  std::vector<at::Tensor> states{timm::test::flat_parameters(*model)};
  for (int64_t step = 0; step < c.steps; ++step) {
    for (int64_t micro = 0; micro < c.accum; ++micro) {
      const int64_t i = step * c.accum + micro;
      at::Tensor loss = at::cross_entropy_loss(model->forward(x[i]), y[i]) / static_cast<double>(c.accum);
      loss.backward();
    }
    timm::test::sgd_step(*model, c.lr);
    states.push_back(timm::test::flat_parameters(*model));
  }
  return states;
}

// `sync_bn`: the model has a BatchNorm, SyncBatchNorm on the ranks and plain
// BatchNorm over the whole batch in the reference.
void check_equivalence(const DdpCase& c, bool sync_bn = false) {
  timm::test::TempDir tmp;
  std::vector<std::string> args{tmp.path().string(), std::to_string(c.steps), std::to_string(c.accum)};
  if (sync_bn) args.push_back("syncbn");
  const auto results = run_workers(c.world, args);
  for (const auto& r : results) REQUIRE_MESSAGE(r.exit_code == 0, r.output);
  const auto expected = reference(c, sync_bn);
  // float32, one thread per process: only the summation order of the
  // gradient average differs (2 halves averaged vs one mean over 2B).
  const double tolerance = 1e-5;
  for (int r = 0; r < c.world; ++r) {
    std::vector<at::Tensor> states;
    torch::load(states, (tmp / ("rank" + std::to_string(r) + ".pt")).string());
    REQUIRE(states.size() == expected.size());
    for (std::size_t step = 0; step < states.size(); ++step) {
      const double diff = (states[step] - expected[step]).abs().max().item<double>();
      MESSAGE("rank " << r << " after step " << step << ": max |diff| = " << diff);
      CHECK(diff <= tolerance);
    }
    // Training moved the weights: the comparison is not vacuous.
    CHECK((states.back() - states.front()).abs().max().item<double>() > 1e-3);
  }
}

}  // namespace

TEST_CASE("2 ranks x batch B equal 1 process x batch 2B, step by step") {
  DdpCase c;
  c.steps = 4;
  check_equivalence(c);
}

TEST_CASE("with gradient accumulation (no_sync on the first micro-batches)") {
  DdpCase c;
  c.steps = 3;
  c.accum = 3;
  check_equivalence(c);
}

TEST_CASE("with BatchNorm under --sync-bn (SyncBatchNorm on the ranks), parameters and running stats") {
  DdpCase c;
  c.steps = 3;
  check_equivalence(c, /*sync_bn=*/true);
}

TEST_CASE("with BatchNorm under --sync-bn and gradient accumulation") {
  DdpCase c;
  c.steps = 2;
  c.accum = 2;
  check_equivalence(c, /*sync_bn=*/true);
}

TEST_CASE("a parameter that gets no gradient is an error naming it") {
  timm::test::TempDir tmp;
  const auto results = run_workers(2, {tmp.path().string(), "1", "1", "unused"});
  for (const auto& r : results) {
    CHECK(r.exit_code == 1);
    CHECK_MESSAGE(r.output.find("got no gradient in this backward: unused.weight, unused.bias") != std::string::npos,
                  r.output);
    CHECK(r.output.find("--ddp-find-unused-parameters") != std::string::npos);
  }
}

TEST_CASE("find_unused_parameters: the unused parameter keeps no gradient, training goes on") {
  timm::test::TempDir tmp;
  const auto results = run_workers(2, {tmp.path().string(), "2", "1", "find-unused"});
  for (const auto& r : results) CHECK_MESSAGE(r.exit_code == 0, r.output);
}

TEST_CASE("bucket assignment equals torch's _compute_bucket_assignment_by_size (oracle at test time)") {
  struct Spec {
    int64_t numel;
    at::ScalarType dtype;
  };
  const std::vector<std::vector<Spec>> cases = {
      {{100, at::kFloat},
       {300000, at::kFloat},
       {50, at::kFloat},
       {200000, at::kFloat},
       {7000000, at::kFloat},
       {10, at::kFloat},
       {262144, at::kFloat},
       {5, at::kFloat}},
      {{300, at::kFloat},
       {300, at::kDouble},
       {300, at::kFloat},
       {3000, at::kFloat},
       {100, at::kDouble},
       {1000, at::kDouble},
       {1, at::kFloat}},
  };
  for (const auto& [first, cap] :
       std::vector<std::pair<int64_t, int64_t>>{{1024 * 1024, 25 * 1024 * 1024}, {1000, 4000}}) {
    for (const auto& specs : cases) {
      std::vector<at::Tensor> tensors;
      std::vector<std::string> args{std::to_string(first), std::to_string(cap)};
      for (const auto& s : specs) {
        tensors.push_back(at::empty({s.numel}, at::TensorOptions().dtype(s.dtype)));
        args.push_back(std::to_string(s.numel) + ":" + (s.dtype == at::kFloat ? "float32" : "float64"));
      }
      std::string ours;
      for (const auto& bucket : timm::dist::assign_buckets(tensors, first, cap)) {
        for (std::size_t k = 0; k < bucket.size(); ++k) ours += (k ? " " : "") + std::to_string(bucket[k]);
        ours += "\n";
      }
      CHECK(ours == timm::test::run_oracle("ddp_buckets_oracle.py", args));
    }
  }
}

}  // namespace test_dist_ddp
