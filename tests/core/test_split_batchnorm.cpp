// --split-bn: convert_splitbn_model against timm's (tests/oracle/dist_oracle.py
// splitbn, at test time) on conv -> BatchNorm2d -> BatchNorm+ReLU, 3 splits,
// two train steps and an eval forward from the same state: outputs, input and
// parameter gradients, and the final state_dict (aux_bn running stats and
// keys included) within |ours - timm| <= kAtol + kRtol * |timm|, float32, one
// thread. The BatchNorm+ReLU stands for a third-party SwappableBatchNorm with
// an activation (as timm's BatchNormAct2d, whose act timm keeps too).
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/conv.h>

#include "test_support.hpp"
#include "timm/base/error.hpp"
#include "timm/io/safetensors.hpp"
#include "timm/layers/batch_norm.hpp"
#include "timm/layers/norm_act.hpp"
#include "timm/layers/split_batchnorm.hpp"
#include "timm/models/state_dict.hpp"

// Last: c10/util/Logging.h defines a CHECK macro that doctest must override.
#include <doctest/doctest.h>

namespace test_split_batchnorm {

namespace {

constexpr double kAtol = 1e-5;
constexpr double kRtol = 1e-4;
constexpr int64_t kSplits = 3;
constexpr int kSteps = 2;

// A BatchNorm followed by ReLU in one module: its state_dict keys are the
// BatchNorm's, like timm's BatchNormAct2d.
class BatchNormReluImpl : public timm::layers::BatchNorm2dImpl {
 public:
  using timm::layers::BatchNorm2dImpl::BatchNorm2dImpl;
  at::Tensor forward(const at::Tensor& x) { return timm::layers::BatchNorm2dImpl::forward(x).relu(); }
};
TORCH_MODULE(BatchNormRelu);

// bnact: the test's BatchNormRelu, or the SDK's BatchNormAct2d (ReLU) when it has one.
torch::nn::Sequential make_model(bool sdk_bn_act = false) {
  torch::nn::Sequential model({{"conv", torch::nn::Conv2d(torch::nn::Conv2dOptions(3, 4, 3).bias(false))},
                               {"bn", timm::layers::BatchNorm2d(4)}});
  if (sdk_bn_act) {
    model->push_back("bnact", timm::layers::BatchNormAct2d(4));
    return model;
  }
  model->push_back("bnact", BatchNormRelu(4));
  return model;
}

void check_close(const std::string& what, const at::Tensor& ours, const at::Tensor& expected) {
  INFO(what);
  REQUIRE(expected.defined());
  REQUIRE(ours.sizes() == expected.sizes());
  const auto a = ours.to(at::kDouble), b = expected.to(at::kDouble);
  const double max_diff = (a - b).abs().max().item<double>();
  if (max_diff > 0) MESSAGE(what << ": max |diff| " << max_diff);
  CHECK(((a - b).abs() - (kAtol + kRtol * b.abs())).max().item<double>() <= 0);
}

void check_against_timm(bool sdk_bn_act) {
  at::set_num_threads(1);
  auto model = make_model(sdk_bn_act);
  auto gen = at::make_generator<at::CPUGeneratorImpl>(11);
  {
    torch::NoGradGuard no_grad;  // non-trivial BN state, so the aux copies are visible
    for (auto& item : model->named_parameters()) item.value().copy_(at::randn(item.value().sizes(), gen) * 0.5 + 0.5);
    for (auto& item : model->named_buffers()) {
      if (item.key().find("running") != std::string::npos)
        item.value().copy_(at::rand(item.value().sizes(), gen) + 0.5);
    }
  }
  timm::NamedTensors input;
  for (const auto& [name, t] : timm::state_dict(*model)) input.emplace_back("state." + name, t.clone());
  std::vector<at::Tensor> train, upstream;
  for (int i = 0; i < kSteps; ++i) {
    train.push_back(at::randn({2 * kSplits, 3, 6, 6}, gen) * (i + 1));
    upstream.push_back(at::randn({2 * kSplits, 4, 4, 4}, gen));
    input.emplace_back("train." + std::to_string(i), train.back());
    input.emplace_back("upstream." + std::to_string(i), upstream.back());
  }
  const auto eval_input = at::randn({5, 3, 6, 6}, gen);
  input.emplace_back("eval", eval_input);

  timm::test::TempDir dir;
  timm::write_safetensors(dir / "in.safetensors", input);
  timm::test::run_oracle("dist_oracle.py", {"splitbn", "--input", (dir / "in.safetensors").string(), "--output",
                                            (dir / "out.safetensors").string(), "--num-splits", std::to_string(kSplits),
                                            "--steps", std::to_string(kSteps)});
  std::map<std::string, at::Tensor> expected;
  for (auto& [name, t] : timm::read_safetensors(dir / "out.safetensors")) expected[name] = t;

  CHECK(timm::layers::convert_splitbn_model(*model, kSplits) == 2);
  model->train();
  for (int i = 0; i < kSteps; ++i) {
    auto x = train[i].clone().requires_grad_(true);
    auto y = model->forward(x);
    (y * upstream[i]).sum().backward();
    check_close("out." + std::to_string(i), y, expected["out." + std::to_string(i)]);
    check_close("input_grad." + std::to_string(i), x.grad(), expected["input_grad." + std::to_string(i)]);
  }
  for (const auto& item : model->named_parameters())
    check_close("grad." + item.key(), item.value().grad(), expected["grad." + item.key()]);
  std::vector<std::string> ours_keys, timm_keys;
  for (const auto& [name, t] : timm::state_dict(*model)) {
    ours_keys.push_back(name);
    check_close("state." + name, t, expected["state." + name]);
  }
  for (const auto& [name, t] : expected) {
    if (name.rfind("state.", 0) == 0) timm_keys.push_back(name.substr(6));
  }
  std::sort(ours_keys.begin(), ours_keys.end());
  CHECK(ours_keys == timm_keys);
  CHECK(std::find(ours_keys.begin(), ours_keys.end(), "bnact.aux_bn.1.running_var") != ours_keys.end());
  model->eval();
  torch::NoGradGuard no_grad;
  check_close("eval", model->forward(eval_input), expected["eval"]);
}

}  // namespace

TEST_CASE("convert_splitbn_model matches timm's SplitBatchNorm2d, keeping the activation") {
  check_against_timm(false);
}

TEST_CASE("convert_splitbn_model converts the SDK's BatchNormAct2d as timm's, keeping its activation") {
  check_against_timm(true);
}

TEST_CASE("convert_splitbn_model rejects fewer than 2 splits, plain torch BatchNorms and a second conversion") {
  auto model = make_model();
  CHECK_THROWS_AS(timm::layers::convert_splitbn_model(*model, 1), timm::UsageError);
  torch::nn::Sequential plain(torch::nn::BatchNorm2d(4));
  CHECK_THROWS_WITH_AS(timm::layers::convert_splitbn_model(*plain, 2), doctest::Contains("cannot convert '0'"),
                       timm::Error);
  timm::layers::convert_splitbn_model(*model, 2);
  CHECK_THROWS_WITH_AS(timm::layers::convert_splitbn_model(*model, 2),
                       doctest::Contains("already normalise another way"), timm::Error);
}

}  // namespace test_split_batchnorm
