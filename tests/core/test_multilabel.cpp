// Multi-label classification against timm (tests/oracle/multilabel_oracle.py):
// MultiLabelClassificationEvaluator's loss, mAP and F1 metrics over batches
// with tied scores, a class without positives, a constant column, soft
// targets, integer targets, float64 logits, max_samples and no batch at all;
// MultiLabelClassificationTask's loss, logits and gradients with an explicit
// BinaryCrossEntropy(smoothing=0.1), timm's default multi-label criterion
// (dense-target smoothing), its Mixup form and the BCE options; the errors
// timm raises. Then 2 and 3 thread ranks with uneven row counts (one rank
// with none, one with max_samples cutting padding) against one process.
// Tolerances: loss |ours - timm| <= kLossRtol * |timm| (float32 batch means,
// summed in float64); mAP and F1 |ours - timm| <= kMetricAtol percentage
// points (float64 sums of the same float32 inputs); the task's tensors
// |diff| <= kAtol + kRtol * |timm|. Every comparison fails on NaN.
#include <cmath>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>

#include "gloo_threads.hpp"
#include "test_support.hpp"
#include "timm/base/error.hpp"
#include "timm/io/safetensors.hpp"
#include "timm/models/model.hpp"
#include "timm/train/losses.hpp"
#include "timm/train/multilabel.hpp"

// Last: c10/util/Logging.h defines a CHECK macro that doctest must override.
#include <doctest/doctest.h>

namespace test_multilabel {

namespace {

constexpr double kLossRtol = 1e-6;
constexpr double kMetricAtol = 1e-9;
constexpr double kAtol = 1e-6;
constexpr double kRtol = 1e-5;

const at::Tensor& get(const std::string& name) { return timm::test::oracle_tensor("multilabel_oracle.py", name); }

// NaN-safe: a NaN on either side fails.
bool close(double ours, double expected, double atol, double rtol = 0.0) {
  return std::abs(ours - expected) <= atol + rtol * std::abs(expected);
}

void check_metrics(const timm::MultiLabelMetrics& ours, const at::Tensor& expected, const std::string& what) {
  INFO(what);
  REQUIRE(expected.numel() == 5);
  const auto items = ours.items();
  REQUIRE(items.size() == 5);
  for (size_t i = 0; i < items.size(); ++i) {
    const double theirs = expected[static_cast<int64_t>(i)].item<double>();
    const bool ok =
        i == 0 ? close(items[i].second, theirs, 0.0, kLossRtol) : close(items[i].second, theirs, kMetricAtol);
    CHECK_MESSAGE(ok, what << " " << items[i].first << ": ours " << items[i].second << ", timm " << theirs);
  }
}

void check_tensor(const at::Tensor& ours, const at::Tensor& expected, const std::string& what) {
  INFO(what);
  REQUIRE(ours.sizes() == expected.sizes());
  const at::Tensor a = ours.to(at::kDouble), b = expected.to(at::kDouble);
  const double excess = ((a - b).abs() - (kAtol + kRtol * b.abs())).max().item<double>();
  CHECK_MESSAGE(excess <= 0.0, what << ": max |diff| " << (a - b).abs().max().item<double>());
}

// Feeds the oracle's batches of `name` to a fresh evaluator with its settings.
timm::MultiLabelClassificationEvaluator evaluate_case(const std::string& name) {
  const double threshold = get("in." + name + ".threshold").item<double>();
  const int64_t max_samples = get("in." + name + ".max_samples").item<int64_t>();
  timm::MultiLabelClassificationEvaluator evaluator(
      threshold, max_samples < 0 ? std::nullopt : std::optional<int64_t>(max_samples));
  const int64_t batches = get("in." + name + ".batches").item<int64_t>();
  for (int64_t i = 0; i < batches; ++i) {
    const std::string prefix = "in." + name + ".b" + std::to_string(i);
    evaluator.update(get(prefix + ".logits"), get(prefix + ".target"));
  }
  return evaluator;
}

// Mirrors the oracle's nn.Linear(8, 5).
class LinearNetImpl : public timm::ClassifierImpl {
 public:
  LinearNetImpl() { fc = register_module("fc", torch::nn::Linear(8, 5)); }
  at::Tensor forward(at::Tensor x) override { return fc->forward(x); }
  int64_t num_classes() const override { return 5; }
  const timm::PretrainedCfg& pretrained_cfg() const override { return cfg_; }

  torch::nn::Linear fc{nullptr};

 private:
  timm::PretrainedCfg cfg_;
};

std::shared_ptr<LinearNetImpl> make_model() {
  auto model = std::make_shared<LinearNetImpl>();
  torch::NoGradGuard no_grad;
  model->fc->weight.copy_(get("in.task.weight"));
  model->fc->bias.copy_(get("in.task.bias"));
  return model;
}

timm::BinaryCrossEntropyOptions bce(double smoothing) {
  timm::BinaryCrossEntropyOptions options;
  options.smoothing = smoothing;
  return options;
}

// The 'main' case's rows, in order, as float32 logits and targets.
std::pair<at::Tensor, at::Tensor> main_rows() {
  std::vector<at::Tensor> logits, targets;
  for (int64_t i = 0; i < get("in.main.batches").item<int64_t>(); ++i) {
    logits.push_back(get("in.main.b" + std::to_string(i) + ".logits").to(at::kFloat));
    targets.push_back(get("in.main.b" + std::to_string(i) + ".target").to(at::kFloat));
  }
  return {at::cat(logits), at::cat(targets)};
}

// Feeds rows [begin, end) in batches of `batch`, then `padding` more rows:
// what a padding sampler repeats, the first rows of the set.
void feed(timm::MultiLabelClassificationEvaluator& evaluator, const at::Tensor& logits, const at::Tensor& targets,
          int64_t begin, int64_t end, int64_t batch, int64_t padding = 0) {
  const at::Tensor x = at::cat({logits.slice(0, begin, end), logits.slice(0, 0, padding)});
  const at::Tensor t = at::cat({targets.slice(0, begin, end), targets.slice(0, 0, padding)});
  for (int64_t start = 0; start < x.size(0); start += batch) {
    evaluator.update(x.slice(0, start, start + batch), t.slice(0, start, start + batch));
  }
}

}  // namespace

TEST_CASE("the evaluator's metrics equal timm's") {
  for (const std::string name : {"main", "thresh", "soft", "max", "wide", "empty"}) {
    const auto evaluator = evaluate_case(name);
    check_metrics(evaluator.compute(), get("out." + name + ".metrics"), name);
    CHECK_MESSAGE(evaluator.compute().count == get("out." + name + ".count").item<int64_t>(), name);
    CHECK_MESSAGE(evaluator.warned_soft_targets() == (get("out." + name + ".warned").item<int64_t>() == 1), name);
    CHECK_MESSAGE(close(evaluator.summary().loss, evaluator.compute().loss, 0.0), name);
  }
  // The cases exercise what they are meant to.
  const auto main = evaluate_case("main").compute(), thresh = evaluate_case("thresh").compute();
  CHECK(main.count == 21);
  CHECK(main.micro_f1 != thresh.micro_f1);
  CHECK(evaluate_case("max").num_samples() == 15);
  CHECK(evaluate_case("soft").warned_soft_targets());
}

TEST_CASE("the evaluator's reset forgets every batch") {
  auto evaluator = evaluate_case("main");
  evaluator.reset();
  CHECK(evaluator.num_samples() == 0);
  check_metrics(evaluator.compute(), get("out.empty.metrics"), "after reset");
}

TEST_CASE("the task's loss, logits and gradients equal timm's MultiLabelClassificationTask") {
  const at::Tensor& x = get("in.task.x");
  struct Case {
    std::string name;
    timm::LossFn criterion;
    std::string target;
  };
  timm::BinaryCrossEntropyOptions options = bce(0.2);
  options.target_threshold = 0.3;
  options.pos_weight = 2.0;
  options.sum_classes = true;
  const std::vector<Case> cases = {
      {"explicit",
       [](const at::Tensor& logits, const at::Tensor& target) {
         return timm::binary_cross_entropy(logits, target, bce(0.1));
       },
       "in.task.target"},
      {"default", timm::create_multilabel_loss(bce(0.1), /*soft_targets=*/false), "in.task.target"},
      {"mixup", timm::create_multilabel_loss(bce(0.1), /*soft_targets=*/true), "in.task.soft"},
      {"options", timm::create_multilabel_loss(options, /*soft_targets=*/false), "in.task.soft"},
  };
  for (const auto& c : cases) {
    auto model = make_model();
    timm::MultiLabelClassificationTask task(model, c.criterion);
    task.train();
    const timm::TaskResult result = task.forward(x, get(c.target));
    result.loss.backward();
    check_tensor(result.loss, get("out.task." + c.name + ".loss"), c.name + " loss");
    check_tensor(result.output, get("out.task." + c.name + ".output"), c.name + " output");
    check_tensor(model->fc->weight.grad(), get("out.task." + c.name + ".grad_weight"), c.name + " weight grad");
    check_tensor(model->fc->bias.grad(), get("out.task." + c.name + ".grad_bias"), c.name + " bias grad");
    CHECK(result.parts.empty());
  }
  // Dense-target smoothing is what separates timm's default criterion from a plain BinaryCrossEntropy.
  CHECK(get("out.task.default.loss").item<double>() != get("out.task.explicit.loss").item<double>());
}

TEST_CASE("the task describes itself and refuses what timm refuses") {
  auto model = make_model();
  const timm::LossFn criterion = timm::create_multilabel_loss(bce(0.1), false);
  CHECK(timm::MultiLabelClassificationTask(model, criterion).describe() ==
        "MultiLabelClassificationTask: threshold=0.5");
  CHECK(timm::MultiLabelClassificationTask(model, criterion, 0.25).threshold() == 0.25);

  // timm raises for each of these too.
  for (const std::string name : {"threshold_0", "threshold_1", "eval_threshold_0", "eval_threshold_1", "target_1d",
                                 "target_int", "eval_shape"}) {
    CHECK_MESSAGE(get("out.err." + name).item<int64_t>() == 1, name);
  }
  CHECK_THROWS_AS(timm::MultiLabelClassificationTask(model, criterion, 0.0), timm::UsageError);
  CHECK_THROWS_WITH(timm::MultiLabelClassificationTask(model, criterion, 0.0),
                    "multi-label prediction threshold 0.0: expected a value between 0 and 1, both excluded");
  CHECK_THROWS_WITH_AS(timm::MultiLabelClassificationTask(model, criterion, 1.0),
                       doctest::Contains("threshold 1.0: expected a value between 0 and 1"), timm::UsageError);
  CHECK_THROWS_AS(timm::MultiLabelClassificationTask(model, criterion, std::nan("")), timm::UsageError);
  CHECK_THROWS_AS(timm::MultiLabelClassificationEvaluator(0.0), timm::UsageError);
  CHECK_THROWS_AS(timm::MultiLabelClassificationEvaluator(1.0), timm::UsageError);
  CHECK_THROWS_AS(timm::MultiLabelClassificationEvaluator(0.5, -1), timm::UsageError);

  timm::MultiLabelClassificationTask task(model, criterion);
  const at::Tensor& x = get("in.task.x");
  const at::Tensor& target = get("in.task.target");
  CHECK_THROWS_WITH_AS(task.forward(x, target.select(1, 0)),
                       "multi-label training: target of shape (4,) and dtype Float; expected dense floating-point "
                       "targets shaped (batch, num_classes)",
                       timm::Error);
  CHECK_THROWS_WITH_AS(task.forward(x, target.to(at::kLong)),
                       doctest::Contains("target of shape (4, 5) and dtype Long"), timm::Error);
  CHECK_THROWS_WITH_AS(
      task.forward(x, target.slice(1, 0, 3)),
      "multi-label training: logits of shape (4, 5) but target of shape (4, 3); expected the same shape", timm::Error);

  timm::MultiLabelClassificationEvaluator evaluator;
  CHECK_THROWS_WITH_AS(evaluator.update(target, target.slice(1, 0, 3)),
                       doctest::Contains("logits of shape (4, 5) and targets of shape (4, 3)"), timm::Error);
  CHECK_THROWS_AS(evaluator.update(target.select(1, 0), target.select(1, 0)), timm::Error);
  CHECK(evaluator.num_samples() == 0);
}

TEST_CASE("thread ranks with uneven row counts report what one process reports") {
  const auto [logits, targets] = main_rows();
  REQUIRE(logits.size(0) == 21);
  // Rank r's rows [begin, end), batch size, padding rows cut by max_samples.
  struct Share {
    int64_t begin, end, batch, padding;
  };
  const std::vector<std::vector<Share>> worlds = {
      {{0, 13, 5, 0}, {13, 21, 3, 2}},
      {{0, 4, 4, 0}, {4, 4, 4, 1}, {4, 21, 6, 0}},  // rank 1: one padding row, cut: no rows
  };
  for (const auto& shares : worlds) {
    const int world = static_cast<int>(shares.size());
    // One process, the same batches in rank order.
    timm::MultiLabelClassificationEvaluator single;
    for (const auto& s : shares) feed(single, logits, targets, s.begin, s.end, s.batch);
    const timm::MultiLabelMetrics expected = single.compute();
    check_metrics(expected, get("out.main.metrics"), "one process");

    std::vector<timm::MultiLabelMetrics> metrics(world);
    timm::test::run_gloo_ranks(world, [&](int rank, const timm::dist::GroupPtr& group) {
      const Share& s = shares[rank];
      timm::MultiLabelClassificationEvaluator evaluator(0.5, s.end - s.begin);
      feed(evaluator, logits, targets, s.begin, s.end, s.batch, s.padding);
      metrics[rank] = evaluator.compute(group);
    });
    for (int rank = 0; rank < world; ++rank) {
      INFO("world " << world << ", rank " << rank);
      const auto& m = metrics[rank];
      CHECK(m.count == expected.count);
      CHECK(close(m.loss, expected.loss, 0.0, 1e-12));
      CHECK(m.map == expected.map);
      CHECK(m.micro_f1 == expected.micro_f1);
      CHECK(m.macro_f1 == expected.macro_f1);
      CHECK(m.sample_f1 == expected.sample_f1);
    }
  }
}

}  // namespace test_multilabel
