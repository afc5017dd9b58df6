// Activation checkpointing (timm/models/grad_checkpoint.hpp): a checkpointed
// run gives the plain run's output, input gradient and parameter gradients
// (within 1e-6; they agree bit for bit here) with dropout and drop path drawing
// the same masks in the rerun, leaves the CPU generator where the plain run
// does, reruns each checkpointed block once in the backward pass, and follows
// timm's checkpoint_seq for `every` and `skip_last`. A model without support
// refuses set_grad_checkpointing(true) by name.
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>

#include "timm/base/error.hpp"
#include "timm/layers/drop_path.hpp"
#include "timm/models/grad_checkpoint.hpp"
#include "timm/models/model.hpp"
#include "timm/train/amp.hpp"

// Last: c10/util/Logging.h defines a CHECK macro that doctest must override.
#include <doctest/doctest.h>

namespace test_grad_checkpoint {

namespace {

constexpr int64_t kDim = 8;
constexpr int kBlocks = 4;

// A residual block with dropout and drop path (both draw from the CPU
// generator) that counts its forward calls: a rerun is a second call.
class CountingBlockImpl : public torch::nn::Module {
 public:
  CountingBlockImpl() {
    fc = register_module("fc", torch::nn::Linear(kDim, kDim));
    drop_path = register_module("drop_path", timm::layers::DropPath(0.5));
  }
  at::Tensor forward(const at::Tensor& x) {
    ++calls;
    return x + drop_path(at::dropout(at::gelu(fc(x)), 0.3, is_training()));
  }

  torch::nn::Linear fc{nullptr};
  timm::layers::DropPath drop_path{nullptr};
  int calls = 0;
};
TORCH_MODULE(CountingBlock);

torch::nn::Sequential make_net() {
  at::manual_seed(0);
  torch::nn::Sequential net;
  for (int i = 0; i < kBlocks; ++i) net->push_back(CountingBlock());
  net->train();
  return net;
}

std::vector<int> calls(const torch::nn::Sequential& net) {
  std::vector<int> counts;
  for (size_t i = 0; i < net->size(); ++i) counts.push_back(net->ptr<CountingBlockImpl>(i)->calls);
  return counts;
}

struct Run {
  at::Tensor output;
  at::Tensor input_grad;  // undefined when the input needs no gradient
  std::vector<at::Tensor> grads;
  at::Tensor next_draw;  // the CPU generator's next numbers after the step
  std::vector<int> calls;
};

// One step: a fixed input and seed, a weighted sum of the output as the loss,
// backward, then what the generator draws next.
Run step(torch::nn::Sequential& net, const std::function<at::Tensor(const at::Tensor&)>& forward,
         bool input_grad = true) {
  net->zero_grad();
  for (size_t i = 0; i < net->size(); ++i) net->ptr<CountingBlockImpl>(i)->calls = 0;
  at::manual_seed(1);
  const at::Tensor x = at::randn({6, kDim}).requires_grad_(input_grad);
  at::manual_seed(3);
  Run run;
  run.output = forward(x);
  const at::Tensor weights = at::linspace(-1.0, 1.0, run.output.numel()).view_as(run.output);
  (run.output.to(at::kFloat) * weights).sum().backward();
  run.input_grad = x.grad();
  for (const auto& p : net->parameters()) run.grads.push_back(p.grad());
  run.next_draw = at::rand({16});
  run.calls = calls(net);
  return run;
}

bool close(const at::Tensor& ours, const at::Tensor& expected) {
  // allclose is false on NaN.
  return ours.defined() && expected.defined() && ours.sizes() == expected.sizes() &&
         at::allclose(ours.to(at::kFloat), expected.to(at::kFloat), /*rtol=*/0.0, /*atol=*/1e-6);
}

void check_same(const Run& checkpointed, const Run& plain) {
  CHECK(close(checkpointed.output, plain.output));
  CHECK(checkpointed.input_grad.defined() == plain.input_grad.defined());
  if (plain.input_grad.defined()) CHECK(close(checkpointed.input_grad, plain.input_grad));
  REQUIRE(checkpointed.grads.size() == plain.grads.size());
  for (size_t i = 0; i < plain.grads.size(); ++i) CHECK_MESSAGE(close(checkpointed.grads[i], plain.grads[i]), i);
  CHECK(at::equal(checkpointed.next_draw, plain.next_draw));
}

at::Tensor plain_forward(torch::nn::Sequential& net, const at::Tensor& x) { return net->forward(x); }

// A model that does not override set_grad_checkpointing.
class PlainModelImpl : public timm::ClassifierImpl {
 public:
  at::Tensor forward(at::Tensor x) override { return x; }
  int64_t num_classes() const override { return 0; }
  const timm::PretrainedCfg& pretrained_cfg() const override { return cfg_; }

 private:
  timm::PretrainedCfg cfg_;
};

}  // namespace

TEST_CASE("checkpoint_seq over blocks with dropout and drop path gives the plain run's output and gradients") {
  auto net = make_net();
  const Run plain = step(net, [&](const at::Tensor& x) { return plain_forward(net, x); });
  const Run checkpointed =
      step(net, [&](const at::Tensor& x) { return timm::checkpoint_seq(timm::sequence_modules(net), x); });
  check_same(checkpointed, plain);
  CHECK(plain.calls == std::vector<int>(kBlocks, 1));
  CHECK(checkpointed.calls == std::vector<int>(kBlocks, 2));  // each block rerun once in backward
}

TEST_CASE("checkpoint_seq follows timm's every and skip_last") {
  auto net = make_net();
  const Run plain = step(net, [&](const at::Tensor& x) { return plain_forward(net, x); });
  const auto modules = timm::sequence_modules(net);
  {
    INFO("every=3 over 4 blocks: chunks of 3 and 1, all rerun");
    const Run run = step(net, [&](const at::Tensor& x) { return timm::checkpoint_seq(modules, x, 3); });
    check_same(run, plain);
    CHECK(run.calls == std::vector<int>{2, 2, 2, 2});
  }
  {
    INFO("every=2 with skip_last: chunks [0, 1] and [2], the last block runs plainly once");
    const Run run = step(net, [&](const at::Tensor& x) { return timm::checkpoint_seq(modules, x, 2, true); });
    check_same(run, plain);
    CHECK(run.calls == std::vector<int>{2, 2, 2, 1});
  }
  {
    INFO("sequence_modules of several Sequentials lists their modules in order (timm's flatten)");
    CHECK(timm::sequence_modules(std::vector<torch::nn::Sequential>{net, net}).size() == 2 * kBlocks);
  }
  CHECK_THROWS_AS(timm::checkpoint_seq(modules, at::zeros({1, kDim}), 0), timm::Error);
}

TEST_CASE("checkpoint of a function gives its parameters gradients when the input needs none") {
  auto net = make_net();
  const Run plain = step(
      net, [&](const at::Tensor& x) { return plain_forward(net, x); }, /*input_grad=*/false);
  const Run checkpointed = step(
      net,
      [&](const at::Tensor& x) {
        return timm::checkpoint([&](const at::Tensor& input) { return net->forward(input); }, x, net->parameters());
      },
      /*input_grad=*/false);
  CHECK(checkpointed.output.requires_grad());
  check_same(checkpointed, plain);
  CHECK(checkpointed.calls == std::vector<int>(kBlocks, 2));
}

TEST_CASE("checkpoint of a module without grad mode is the plain call, run once") {
  at::manual_seed(0);
  CountingBlock block;
  const at::Tensor x = at::randn({6, kDim});
  at::manual_seed(3);
  const at::Tensor plain = block->forward(x);
  block->calls = 0;
  const c10::NoGradGuard no_grad;
  at::manual_seed(3);
  const at::Tensor out = timm::checkpoint(torch::nn::AnyModule(block), x);
  CHECK(at::equal(out, plain));
  CHECK(!out.requires_grad());
  CHECK(block->calls == 1);
}

TEST_CASE("the rerun uses the forward pass's autocast state (CPU bfloat16)") {
  auto net = make_net();
  // The loss and backward run outside the guard, as in the trainer.
  auto under_autocast = [](const std::function<at::Tensor(const at::Tensor&)>& forward) {
    return [forward](const at::Tensor& x) {
      const timm::AutocastGuard autocast(c10::DeviceType::CPU, at::kBFloat16);
      return forward(x);
    };
  };
  const Run float32 = step(net, [&](const at::Tensor& x) { return plain_forward(net, x); });
  const Run plain = step(net, under_autocast([&](const at::Tensor& x) { return plain_forward(net, x); }));
  const Run checkpointed = step(
      net, under_autocast([&](const at::Tensor& x) { return timm::checkpoint_seq(timm::sequence_modules(net), x); }));
  // bfloat16 moves the gradients well beyond the tolerance, so a float32 rerun would show.
  CHECK(!close(plain.grads[0], float32.grads[0]));
  check_same(checkpointed, plain);
}

TEST_CASE("a model without set_grad_checkpointing refuses it, naming the model and its plugin") {
  auto model = std::make_shared<PlainModelImpl>();
  model->set_registered("my_net", "/plugins/libmy_net.so");
  CHECK_THROWS_AS(model->set_grad_checkpointing(true), timm::UsageError);
  CHECK_THROWS_WITH(model->set_grad_checkpointing(true),
                    doctest::Contains("model 'my_net' (from plugin '/plugins/libmy_net.so') does not support "
                                      "gradient checkpointing"));
  CHECK_NOTHROW(model->set_grad_checkpointing(false));
}

}  // namespace test_grad_checkpoint
