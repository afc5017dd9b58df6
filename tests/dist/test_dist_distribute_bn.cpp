// --dist-bn: distribute_bn over 3 thread ranks whose BatchNorm running
// stats differ: "reduce" leaves every rank with their average (tolerance
// kAtol, float32), "broadcast" with rank 0's (exactly); other buffers
// (num_batches_tracked) and parameters are untouched.
#include <vector>

#include <ATen/ATen.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/conv.h>

#include "gloo_threads.hpp"
#include "timm/base/error.hpp"
#include "timm/dist/distribute_bn.hpp"
#include "timm/layers/batch_norm.hpp"

// Last: c10/util/Logging.h defines a CHECK macro that doctest must override.
#include <doctest/doctest.h>

namespace test_dist_distribute_bn {

namespace {

constexpr int kWorld = 3;
constexpr double kAtol = 1e-6;

struct Buffers {
  at::Tensor mean0, var0, mean1, var1, tracked0, weight0;
};

// Rank-dependent running stats in two BatchNorms.
torch::nn::Sequential make_model(int rank) {
  torch::nn::Sequential model(timm::layers::BatchNorm2d(4), torch::nn::Conv2d(4, 4, 1), timm::layers::BatchNorm2d(4));
  auto gen = at::make_generator<at::CPUGeneratorImpl>(100 + rank);
  for (auto& item : model->named_buffers()) {
    if (item.key().find("running") != std::string::npos) item.value().copy_(at::rand({4}, gen) + rank);
    if (item.key().find("num_batches_tracked") != std::string::npos) item.value().fill_(rank + 1);
  }
  return model;
}

Buffers buffers(torch::nn::Sequential& model) {
  auto b = model->named_buffers();
  return {b["0.running_mean"].clone(),        b["0.running_var"].clone(),
          b["2.running_mean"].clone(),        b["2.running_var"].clone(),
          b["0.num_batches_tracked"].clone(), model->named_parameters()["0.weight"].clone()};
}

std::vector<Buffers> run(timm::dist::DistBnMode mode, std::vector<Buffers>& before) {
  std::vector<Buffers> after(kWorld);
  std::vector<int64_t> synchronised(kWorld);
  before.resize(kWorld);
  timm::test::run_gloo_ranks(kWorld, [&](int rank, const timm::dist::GroupPtr& group) {
    auto model = make_model(rank);
    before[rank] = buffers(model);
    synchronised[rank] = timm::dist::distribute_bn(*model, group, mode);
    after[rank] = buffers(model);
  });
  for (auto n : synchronised) CHECK(n == 4);  // running_mean and running_var of two BatchNorms
  return after;
}

}  // namespace

TEST_CASE("distribute_bn reduce averages the running stats over the ranks") {
  std::vector<Buffers> before;
  const auto after = run(timm::dist::DistBnMode::kReduce, before);
  const auto average = [&](auto field) {
    at::Tensor sum = at::zeros({4});
    for (const auto& b : before) sum += b.*field;
    return sum / kWorld;
  };
  for (int rank = 0; rank < kWorld; ++rank) {
    CHECK(at::allclose(after[rank].mean0, average(&Buffers::mean0), 0, kAtol));
    CHECK(at::allclose(after[rank].var0, average(&Buffers::var0), 0, kAtol));
    CHECK(at::allclose(after[rank].mean1, average(&Buffers::mean1), 0, kAtol));
    CHECK(at::allclose(after[rank].var1, average(&Buffers::var1), 0, kAtol));
    CHECK(at::equal(after[rank].tracked0, before[rank].tracked0));
    CHECK(at::equal(after[rank].weight0, before[rank].weight0));
  }
  CHECK(!at::allclose(before[0].mean0, before[1].mean0));  // there was something to average
}

TEST_CASE("distribute_bn broadcast copies rank 0's running stats") {
  std::vector<Buffers> before;
  const auto after = run(timm::dist::DistBnMode::kBroadcast, before);
  for (int rank = 0; rank < kWorld; ++rank) {
    CHECK(at::equal(after[rank].mean0, before[0].mean0));
    CHECK(at::equal(after[rank].var1, before[0].var1));
    CHECK(at::equal(after[rank].tracked0, before[rank].tracked0));
  }
}

TEST_CASE("parse_dist_bn") {
  CHECK(timm::dist::parse_dist_bn("reduce") == timm::dist::DistBnMode::kReduce);
  CHECK(timm::dist::parse_dist_bn("broadcast") == timm::dist::DistBnMode::kBroadcast);
  CHECK(!timm::dist::parse_dist_bn("").has_value());
  CHECK_THROWS_AS(timm::dist::parse_dist_bn("average"), timm::UsageError);
}

}  // namespace test_dist_distribute_bn
