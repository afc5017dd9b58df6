// SyncBatchNorm over thread ranks (tests/support/gloo_threads.hpp) against
// torch::nn::BatchNorm2d over the concatenated batch: forward output,
// running stats, num_batches_tracked, and the input, weight and bias
// gradients (the local weight and bias gradients summed over the ranks, as
// DDP's all-reduce would), over two training steps, with even, uneven and
// empty local batches. Tolerance: |sync - reference| <= kAtol + kRtol *
// |reference| in float32 (the statistics merge in double; the reference
// reduces in a different order).
#include <cstdint>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/conv.h>

#include "gloo_threads.hpp"
#include "test_support.hpp"
#include "timm/base/error.hpp"
#include "timm/dist/sync_batchnorm.hpp"
#include "timm/layers/batch_norm.hpp"
#include "timm/layers/norm_act.hpp"
#include "timm/models/model.hpp"
#include "timm/models/state_dict.hpp"

// Last: c10/util/Logging.h defines a CHECK macro that doctest must override.
#include <doctest/doctest.h>

namespace test_dist_sync_batchnorm {

namespace {

constexpr double kAtol = 1e-5;
constexpr double kRtol = 1e-4;
constexpr int64_t kChannels = 3;
constexpr int kSteps = 2;

double max_excess(const at::Tensor& ours, const at::Tensor& expected) {
  const auto diff = (ours.to(at::kDouble) - expected.to(at::kDouble)).abs();
  return (diff - (kAtol + kRtol * expected.to(at::kDouble).abs())).max().item<double>();
}

void check_close(const std::string& what, const at::Tensor& ours, const at::Tensor& expected) {
  INFO(what);
  REQUIRE(ours.sizes() == expected.sizes());
  if (ours.numel() == 0) return;
  const double max_diff = (ours.to(at::kDouble) - expected.to(at::kDouble)).abs().max().item<double>();
  MESSAGE(what << ": max |diff| " << max_diff);
  CHECK(max_excess(ours, expected) <= 0.0);
}

struct Step {
  at::Tensor input, upstream;  // the global batch and d loss / d output
};

struct Result {
  std::vector<at::Tensor> outputs, input_grads;  // per step
  at::Tensor weight_grad, bias_grad, running_mean, running_var, num_batches_tracked;
};

torch::nn::BatchNormOptions bn_options(std::optional<double> momentum) {
  return torch::nn::BatchNormOptions(kChannels).momentum(momentum);
}

// Same random affine parameters and running stats in both modules.
void init_state(torch::nn::BatchNorm2dImpl& bn) {
  torch::NoGradGuard no_grad;
  auto gen = at::make_generator<at::CPUGeneratorImpl>(7);
  bn.weight.copy_(at::rand({kChannels}, gen) + 0.5);
  bn.bias.copy_(at::randn({kChannels}, gen));
  bn.running_mean.copy_(at::randn({kChannels}, gen));
  bn.running_var.copy_(at::rand({kChannels}, gen) + 0.5);
}

// Input layout and whether the input needs a gradient (a first layer does
// not: then backward skips the all-reduce, on every rank alike).
struct Variant {
  bool channels_last = false;
  bool input_grad = true;
};

Result run_step(torch::nn::BatchNorm2dImpl& bn, const std::function<at::Tensor(const at::Tensor&)>& forward,
                const std::vector<Step>& steps, Variant variant = {}) {
  Result r;
  bn.train();
  for (const auto& s : steps) {
    auto x = s.input.clone();
    if (variant.channels_last) x = x.contiguous(at::MemoryFormat::ChannelsLast);
    x.requires_grad_(variant.input_grad);
    auto y = forward(x);
    (y * s.upstream).sum().backward();
    r.outputs.push_back(y.detach());
    r.input_grads.push_back(variant.input_grad ? x.grad() : at::zeros_like(x));
  }
  r.weight_grad = bn.weight.grad();
  r.bias_grad = bn.bias.grad();
  r.running_mean = bn.running_mean.clone();
  r.running_var = bn.running_var.clone();
  r.num_batches_tracked = bn.num_batches_tracked.clone();
  return r;
}

std::vector<Step> make_steps(int64_t total, uint64_t seed) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  std::vector<Step> steps;
  for (int i = 0; i < kSteps; ++i) {
    steps.push_back({at::randn({total, kChannels, 4, 5}, gen) * 2 + 1, at::randn({total, kChannels, 4, 5}, gen)});
  }
  return steps;
}

void check_against_reference(const std::vector<int64_t>& local_sizes, std::optional<double> momentum,
                             Variant variant = {}) {
  at::set_num_threads(1);
  const int world = static_cast<int>(local_sizes.size());
  int64_t total = 0;
  std::vector<int64_t> offsets;
  for (auto n : local_sizes) offsets.push_back(total), total += n;
  const auto steps = make_steps(total, 1000 + total);

  torch::nn::BatchNorm2d reference(bn_options(momentum));
  init_state(*reference);
  const auto expected = run_step(
      *reference, [&](const at::Tensor& x) { return reference(x); }, steps);

  std::vector<Result> results(world);
  timm::test::run_gloo_ranks(world, [&](int rank, const timm::dist::GroupPtr& group) {
    timm::dist::SyncBatchNorm bn(bn_options(momentum), group);
    init_state(*bn);
    std::vector<Step> local;
    for (const auto& s : steps) {
      local.push_back({s.input.narrow(0, offsets[rank], local_sizes[rank]).clone(),
                       s.upstream.narrow(0, offsets[rank], local_sizes[rank]).clone()});
    }
    results[rank] = run_step(
        *bn, [&](const at::Tensor& x) { return bn(x); }, local);
  });

  for (int step = 0; step < kSteps; ++step) {
    std::vector<at::Tensor> outputs, grads;
    for (const auto& r : results) outputs.push_back(r.outputs[step]), grads.push_back(r.input_grads[step]);
    check_close("output, step " + std::to_string(step), at::cat(outputs), expected.outputs[step]);
    check_close("input grad, step " + std::to_string(step), at::cat(grads), expected.input_grads[step]);
  }
  at::Tensor weight_grad = at::zeros({kChannels}), bias_grad = at::zeros({kChannels});
  for (const auto& r : results) {
    weight_grad += r.weight_grad, bias_grad += r.bias_grad;
    check_close("running_mean", r.running_mean, expected.running_mean);
    check_close("running_var", r.running_var, expected.running_var);
    CHECK(r.num_batches_tracked.item<int64_t>() == kSteps);
  }
  check_close("weight grad (sum over ranks)", weight_grad, expected.weight_grad);
  check_close("bias grad (sum over ranks)", bias_grad, expected.bias_grad);
}

}  // namespace

TEST_CASE("SyncBatchNorm equals BatchNorm over the concatenated batch") {
  SUBCASE("2 ranks, even") { check_against_reference({4, 4}, 0.1); }
  SUBCASE("2 ranks, uneven") { check_against_reference({2, 5}, 0.1); }
  SUBCASE("2 ranks, one empty") { check_against_reference({0, 6}, 0.1); }
  SUBCASE("3 ranks, uneven") { check_against_reference({3, 1, 4}, 0.3); }
  SUBCASE("3 ranks, one empty, cumulative average (momentum None)") {
    check_against_reference({2, 0, 3}, std::nullopt);
  }
  SUBCASE("3 ranks, channels_last, input without gradient") {
    check_against_reference({3, 2, 2}, 0.1, {.channels_last = true, .input_grad = false});
  }
}

TEST_CASE("SyncBatchNorm in eval mode uses running stats and does not communicate") {
  // Only rank 0 runs the eval forward: a collective would wait for rank 1 and time out.
  torch::nn::BatchNorm2d reference(bn_options(0.1));
  init_state(*reference);
  reference->eval();
  const auto x = at::randn({3, kChannels, 4, 4});
  const auto expected = reference(x);
  at::Tensor output;
  timm::test::run_gloo_ranks(
      2,
      [&](int rank, const timm::dist::GroupPtr& group) {
        if (rank != 0) return;
        timm::dist::SyncBatchNorm bn(bn_options(0.1), group);
        init_state(*bn);
        bn->eval();
        output = bn(x);
      },
      std::chrono::seconds(30));
  check_close("eval output", output, expected);
}

TEST_CASE("convert_sync_batchnorm converts a ResNet in place, keeping its state_dict keys") {
  timm::test::load_builtin_plugins();
  std::vector<std::vector<std::string>> keys_before(2), keys_after(2);
  std::vector<int64_t> converted(2);
  std::vector<at::Tensor> stem_running_mean(2);
  timm::test::run_gloo_ranks(2, [&](int rank, const timm::dist::GroupPtr& group) {
    timm::ModelArgs args;
    args.num_classes = 10;
    auto model = timm::create_model("resnet18", args);
    for (const auto& [name, t] : timm::state_dict(*model)) keys_before[rank].push_back(name);
    converted[rank] = timm::dist::convert_sync_batchnorm(*model, group);
    for (const auto& [name, t] : timm::state_dict(*model)) keys_after[rank].push_back(name);
    // Different data on each rank; synchronized statistics make the running stats equal.
    model->train();
    auto gen = at::make_generator<at::CPUGeneratorImpl>(rank + 1);
    model->forward(at::randn({2, 3, 32, 32}, gen) * (rank + 1));
    stem_running_mean[rank] = model->named_buffers()["bn1.running_mean"].clone();
  });
  CHECK(converted[0] == 20);  // resnet18: bn1, 8 blocks x 2, 3 downsample BNs
  CHECK(keys_after[0] == keys_before[0]);
  CHECK(keys_after[1] == keys_before[1]);
  CHECK(at::equal(stem_running_mean[0], stem_running_mean[1]));
  CHECK(stem_running_mean[0].abs().sum().item<double>() > 0);
}

namespace {
// A third-party BatchNorm that is not a SwappableBatchNorm.
struct HomemadeNormImpl : torch::nn::Module {
  HomemadeNormImpl() { register_buffer("running_mean", at::zeros({4})); }
  at::Tensor forward(const at::Tensor& x) { return x; }
};
TORCH_MODULE(HomemadeNorm);
}  // namespace

TEST_CASE("convert_sync_batchnorm names every BatchNorm it cannot convert, converting nothing") {
  torch::nn::Sequential model(torch::nn::Conv2d(3, 4, 3), torch::nn::BatchNorm2d(4), timm::layers::BatchNorm2d(4),
                              HomemadeNorm());
  std::string message;
  timm::test::run_gloo_ranks(1, [&](int, const timm::dist::GroupPtr& group) {
    try {
      timm::dist::convert_sync_batchnorm(*model, group);
    } catch (const timm::Error& e) {
      message = e.what();
    }
  });
  CHECK(message.find("cannot convert '1', '3'") != std::string::npos);
  CHECK(!model->ptr(2)->as<timm::layers::BatchNorm2dImpl>()->has_swapped_normalization());
}

TEST_CASE("convert_sync_batchnorm converts the SDK's BatchNormAct2d, keeping its activation") {
  // 2 ranks with uneven batches against relu(BatchNorm2d(concatenated batch)).
  at::set_num_threads(1);
  const std::vector<int64_t> sizes{2, 5};
  const auto steps = make_steps(7, 77);
  torch::nn::BatchNorm2d reference(bn_options(0.1));
  init_state(*reference);
  reference->train();
  const auto expected = reference(steps[0].input).relu();
  torch::nn::BatchNorm2d initial(bn_options(0.1));  // the reference's state before its step
  init_state(*initial);
  std::vector<at::Tensor> outputs(2), running_var(2);
  timm::test::run_gloo_ranks(2, [&](int rank, const timm::dist::GroupPtr& group) {
    torch::nn::Sequential model{timm::layers::BatchNormAct2d(kChannels)};
    auto& bn = *model->ptr<timm::layers::BatchNormAct2dImpl>(0);
    {
      torch::NoGradGuard no_grad;
      bn.weight.copy_(initial->weight), bn.bias.copy_(initial->bias);
      bn.running_mean.copy_(initial->running_mean), bn.running_var.copy_(initial->running_var);
    }
    if (timm::dist::convert_sync_batchnorm(*model, group) != 1) throw std::runtime_error("not converted");
    model->train();
    outputs[rank] = model->forward(steps[0].input.narrow(0, rank == 0 ? 0 : 2, sizes[rank])).detach();
    running_var[rank] = bn.running_var.clone();
  });
  check_close("BatchNormAct2d output", at::cat(outputs), expected);
  check_close("BatchNormAct2d running_var", running_var[1], reference->running_var);
  CHECK(at::cat(outputs).min().item<double>() == 0.0);  // the ReLU is applied
}

}  // namespace test_dist_sync_batchnorm
