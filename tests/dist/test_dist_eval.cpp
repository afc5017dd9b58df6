// Exact distributed evaluation: 2 and 3 thread ranks, each evaluating its
// ShardSampler share of a 37-sample set in batches of 4, report after one
// all-reduce exactly what one process reports over the whole set: equal
// top-1 / top-5 counts and sample count, loss within kLossRtol (the order of
// a double sum).
#include <cmath>
#include <vector>

#include <ATen/ATen.h>
#include <torch/nn/functional/loss.h>

#include "gloo_threads.hpp"
#include "timm/dist/eval.hpp"
#include "timm/dist/sampler.hpp"

// Last: c10/util/Logging.h defines a CHECK macro that doctest must override.
#include <doctest/doctest.h>

namespace test_dist_eval {

namespace {

constexpr int64_t kSamples = 37;  // divisible by neither 2 nor 3
constexpr int64_t kClasses = 10;
constexpr int64_t kBatch = 4;
constexpr double kLossRtol = 1e-12;

struct Data {
  at::Tensor logits, targets;  // what a model would output for each sample
};

Data make_data() {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(3);
  return {at::randn({kSamples, kClasses}, gen), at::randint(kClasses, {kSamples}, gen)};
}

timm::dist::EvalSums evaluate(const Data& data, const std::vector<int64_t>& indices) {
  timm::dist::EvalSums sums;
  for (size_t start = 0; start < indices.size(); start += kBatch) {
    const auto end = std::min(indices.size(), start + kBatch);
    const auto idx = at::tensor(std::vector<int64_t>(indices.begin() + start, indices.begin() + end), at::kLong);
    const auto logits = data.logits.index_select(0, idx), targets = data.targets.index_select(0, idx);
    const auto loss = at::cross_entropy_loss(logits, targets, {}, at::Reduction::None);
    sums.add_batch(logits, targets, loss);
  }
  return sums;
}

}  // namespace

TEST_CASE("a W-rank eval over ShardSampler shards reports what a 1-rank eval reports") {
  const auto data = make_data();
  const auto single = timm::dist::eval_metrics(evaluate(data, timm::dist::ShardSampler(kSamples, 1, 0).indices(0)));
  REQUIRE(single.count == kSamples);
  CHECK(single.top5 > single.top1);  // the test data exercises both
  for (int world : {2, 3}) {
    std::vector<timm::dist::EvalMetrics> metrics(world);
    timm::test::run_gloo_ranks(world, [&](int rank, const timm::dist::GroupPtr& group) {
      const auto local = evaluate(data, timm::dist::ShardSampler(kSamples, world, rank).indices(0));
      metrics[rank] = timm::dist::eval_metrics(timm::dist::all_reduce_eval_sums(local, group));
    });
    for (const auto& m : metrics) {
      INFO("world " << world);
      CHECK(m.count == single.count);
      CHECK(m.top1 == single.top1);
      CHECK(m.top5 == single.top5);
      MESSAGE("world " << world << ": loss " << m.loss << " vs " << single.loss << ", |diff| "
                       << std::abs(m.loss - single.loss));
      CHECK(std::abs(m.loss - single.loss) <= kLossRtol * std::abs(single.loss));
    }
  }
}

TEST_CASE("EvalSums names a batch whose sizes disagree") {
  timm::dist::EvalSums sums;
  CHECK_THROWS(sums.add_batch(at::zeros({3, 5}), at::zeros({2}, at::kLong), at::zeros({3})));
}

}  // namespace test_dist_eval
