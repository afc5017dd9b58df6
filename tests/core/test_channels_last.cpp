// --channels-last: a model and its input re-laid out as channels_last train
// as the contiguous ones do. One SGD step of resnet18 in train mode, both
// layouts from the same weights and batch, on one thread; ATen's NHWC and NCHW
// convolution kernels sum in different orders, so values agree to float
// rounding amplified by train-mode BatchNorm: |cl - contiguous| <= kAtol +
// kRtol * |contiguous| for logits, loss, gradients and updated weights.
#include <string>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/core/GradMode.h>

#include "test_support.hpp"
#include "timm/models/channels_last.hpp"
#include "timm/models/model.hpp"
#include "timm/models/state_dict.hpp"

// Last: c10/util/Logging.h defines a CHECK macro that doctest must override.
#include <doctest/doctest.h>

namespace test_channels_last {

namespace {

constexpr double kAtol = 1e-5;
constexpr double kRtol = 1e-4;
constexpr double kLr = 0.1;

using timm::test::ThreadCount;

timm::ModelPtr make() {
  timm::test::load_builtin_plugins();
  timm::ModelArgs args;
  args.num_classes = 10;
  return timm::create_model("resnet18", args);
}

struct StepResult {
  at::Tensor logits, loss;
  timm::NamedTensors grads, after;
};

StepResult train_step(timm::ClassifierImpl& model, const at::Tensor& input, const at::Tensor& target) {
  model.train();
  StepResult r;
  r.logits = model.forward(input);
  r.loss = at::cross_entropy_loss(r.logits, target);
  r.loss.backward();
  c10::NoGradGuard no_grad;
  for (const auto& p : model.named_parameters()) {
    r.grads.emplace_back(p.key(), p.value().grad().clone());
    p.value().sub_(p.value().grad() * kLr);
  }
  r.after = timm::state_dict(model);
  return r;
}

double worst(const at::Tensor& a, const at::Tensor& b) { return (a - b).abs().max().item<double>(); }

void check_close(const timm::NamedTensors& a, const timm::NamedTensors& b, const std::string& what) {
  REQUIRE(a.size() == b.size());
  double max_diff = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    REQUIRE(a[i].first == b[i].first);
    max_diff = timm::test::worst_diff(max_diff, worst(a[i].second.to(at::kDouble), b[i].second.to(at::kDouble)));
    CHECK_MESSAGE(at::allclose(a[i].second.to(at::kDouble), b[i].second.to(at::kDouble), kRtol, kAtol), a[i].first);
  }
  MESSAGE(what << ": max abs diff " << max_diff << " (atol " << kAtol << ", rtol " << kRtol << ")");
}

}  // namespace

TEST_CASE("a channels_last train step gives the contiguous step's loss, gradients and weights") {
  const ThreadCount one_thread(1);
  at::manual_seed(0);
  timm::ModelPtr plain = make();
  timm::ModelPtr cl = make();
  timm::load_state_dict(*cl, timm::state_dict(*plain));
  const at::Tensor input = at::randn({4, 3, 64, 64});
  const at::Tensor target = at::tensor({1, 3, 5, 7}, at::kLong);

  timm::to_channels_last(*cl);
  CHECK(timm::is_channels_last(*cl));
  CHECK_FALSE(timm::is_channels_last(*plain));
  const at::Tensor cl_input = input.contiguous(at::MemoryFormat::ChannelsLast);
  REQUIRE(cl_input.is_contiguous(at::MemoryFormat::ChannelsLast));
  REQUIRE_FALSE(cl_input.is_contiguous());
  const auto weight = cl->named_parameters()["layer2.0.conv1.weight"];
  CHECK(weight.is_contiguous(at::MemoryFormat::ChannelsLast));
  CHECK_FALSE(weight.is_contiguous());

  const StepResult a = train_step(*plain, input, target);
  const StepResult b = train_step(*cl, cl_input, target);
  MESSAGE("logits max abs diff " << worst(a.logits, b.logits) << ", loss diff " << worst(a.loss, b.loss));
  CHECK(at::allclose(a.logits, b.logits, kRtol, kAtol));
  CHECK(at::allclose(a.loss, b.loss, kRtol, kAtol));
  check_close(a.grads, b.grads, "gradients");
  check_close(a.after, b.after, "weights and BN statistics after the step");

  // The layout survives the step: gradients and updated weights stay channels_last.
  CHECK(cl->named_parameters()["layer2.0.conv1.weight"].grad().is_contiguous(at::MemoryFormat::ChannelsLast));
  CHECK(timm::is_channels_last(*cl));
}

}  // namespace test_channels_last
