// The training loop's parts against timm and torch (tests/oracle/
// train_parts_oracle.py): losses, ModelEmaV3, gradient clipping, the
// float16 gradient scaler and CPU autocast; --tta's reduction against a hand
// computation. The oracle draws the inputs and
// computes its results; we compute ours from the same inputs.
// Tolerance: |ours - timm| <= kAtol + kRtol * |timm| (float32 maths done in
// a different order), exact where noted.
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>
#include <c10/core/GradMode.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>

#include "test_support.hpp"
#include "timm/base/error.hpp"
#include "timm/io/safetensors.hpp"
#include "timm/models/model.hpp"
#include "timm/models/state_dict.hpp"
#include "timm/optim/optimizer.hpp"
#include "timm/train/amp.hpp"
#include "timm/train/clip_grad.hpp"
#include "timm/train/jsd_loss.hpp"
#include "timm/train/losses.hpp"
#include "timm/train/metrics.hpp"
#include "timm/train/model_ema.hpp"
#include "timm/train/summary.hpp"

// Last: c10/util/Logging.h defines a CHECK macro that doctest must override.
#include <doctest/doctest.h>

namespace test_train_parts {

namespace {

constexpr double kAtol = 1e-6;
constexpr double kRtol = 1e-5;

const at::Tensor& get(const std::string& name) { return timm::test::oracle_tensor("train_parts_oracle.py", name); }

void check_close(const at::Tensor& ours, const at::Tensor& expected, const std::string& what) {
  INFO(what);
  REQUIRE(ours.sizes() == expected.sizes());
  const at::Tensor a = ours.to(at::kDouble), b = expected.to(at::kDouble);
  const double excess = ((a - b).abs() - (kAtol + kRtol * b.abs())).max().item<double>();
  CHECK_MESSAGE(excess <= 0.0, what << ": max |diff| " << (a - b).abs().max().item<double>());
}

// Mirrors the oracle's Tiny: conv, bn, fc.
class TinyNetImpl : public timm::ClassifierImpl {
 public:
  TinyNetImpl() {
    conv = register_module("conv", torch::nn::Conv2d(torch::nn::Conv2dOptions(3, 4, 3).bias(false)));
    bn = register_module("bn", torch::nn::BatchNorm2d(4));
    fc = register_module("fc", torch::nn::Linear(4, 3));
  }
  at::Tensor forward(at::Tensor x) override {
    return fc->forward(at::relu(bn->forward(conv->forward(x))).mean({2, 3}));
  }
  int64_t num_classes() const override { return 3; }
  const timm::PretrainedCfg& pretrained_cfg() const override { return cfg_; }

  torch::nn::Conv2d conv{nullptr};
  torch::nn::BatchNorm2d bn{nullptr};
  torch::nn::Linear fc{nullptr};

 private:
  timm::PretrainedCfg cfg_;
};

timm::BinaryCrossEntropyOptions bce(double smoothing, std::optional<double> threshold = std::nullopt,
                                    std::optional<double> pos_weight = std::nullopt, bool sum_classes = false) {
  timm::BinaryCrossEntropyOptions options;
  options.smoothing = smoothing;
  options.target_threshold = threshold;
  options.pos_weight = pos_weight;
  options.sum_classes = sum_classes;
  return options;
}

timm::TrainLossArgs loss_args(double smoothing, bool bce_loss = false, bool mixup = false, int64_t jsd_splits = 0) {
  timm::TrainLossArgs args;
  args.smoothing = smoothing;
  args.bce_loss = bce_loss;
  args.mixup_active = mixup;
  args.jsd_loss = jsd_splits != 0;
  args.num_aug_splits = jsd_splits;
  return args;
}

void load_into(torch::nn::Module& module, const std::string& prefix) {
  torch::NoGradGuard no_grad;
  for (auto& [name, value] : timm::state_dict(module)) {
    const at::Tensor& source = get(prefix + name);
    value.copy_(source);
  }
}

}  // namespace

TEST_CASE("losses equal timm's") {
  const at::Tensor& logits = get("in.logits");
  const at::Tensor& target = get("in.target");
  const at::Tensor& dense = get("in.dense");
  check_close(timm::label_smoothing_cross_entropy(logits, target, 0.1), get("out.ls_ce_0.1"), "label smoothing CE");
  check_close(timm::soft_target_cross_entropy(logits, dense), get("out.soft_ce"), "soft-target CE");
  check_close(timm::binary_cross_entropy(logits, target, bce(0.1)), get("out.bce_0.1"), "BCE");
  check_close(timm::binary_cross_entropy(logits, target, bce(0.1, 0.2)), get("out.bce_thresh"),
              "BCE, target threshold");
  check_close(timm::binary_cross_entropy(logits, target, bce(0.0, std::nullopt, 2.0)), get("out.bce_pos"),
              "BCE, pos weight");
  check_close(timm::binary_cross_entropy(logits, target, bce(0.1, std::nullopt, std::nullopt, true)),
              get("out.bce_sum"), "BCE, summed classes");
  check_close(timm::binary_cross_entropy(logits, dense, bce(0.1, 0.15)), get("out.bce_dense"), "BCE, dense targets");
  check_close(timm::jsd_cross_entropy(logits, target, 3, 12.0, 0.1), get("out.jsd_0.1"), "JSD, 3 splits");
  check_close(timm::jsd_cross_entropy(logits, target, 2, 12.0, 0.0), get("out.jsd_0"), "JSD, 2 splits");
  CHECK_THROWS_WITH(timm::jsd_cross_entropy(logits, target, 5, 12.0, 0.0),
                    doctest::Contains("does not split into 5 equal parts"));
}

TEST_CASE("train.py's loss choice") {
  const at::Tensor& logits = get("in.logits");
  const at::Tensor& target = get("in.target");
  check_close(timm::create_train_loss(loss_args(0.1))(logits, target), get("out.ls_ce_0.1"), "smoothing > 0");
  check_close(timm::create_train_loss(loss_args(0.1, true))(logits, target), get("out.bce_0.1"), "--bce-loss");
  check_close(timm::create_train_loss(loss_args(0.1, false, true))(logits, get("in.dense")), get("out.soft_ce"),
              "mixup active");
  check_close(timm::create_train_loss(loss_args(0.1, false, false, 3))(logits, target), get("out.jsd_0.1"),
              "--jsd-loss");
  CHECK_THROWS_WITH(timm::create_train_loss(loss_args(0.1, false, false, 1)),
                    doctest::Contains("--jsd-loss needs --aug-splits"));
}

namespace {

// The oracle's ModelEmaV3(model, decay=0.99, use_warmup=True, min_decay=0.1).
timm::ModelEmaOptions oracle_ema_options() {
  timm::ModelEmaOptions options;
  options.decay = 0.99;
  options.min_decay = 0.1;
  options.use_warmup = true;
  return options;
}

}  // namespace

TEST_CASE("model EMA follows ModelEmaV3 with warmup") {
  auto model = std::make_shared<TinyNetImpl>();
  load_into(*model, "in.ema.init.");
  timm::ModelEma ema(std::make_shared<TinyNetImpl>(), *model, oracle_ema_options());
  for (int step = 1; step <= 5; ++step) {
    load_into(*model, "in.ema.step" + std::to_string(step) + ".");
    ema.update(*model, step);
  }
  for (const auto& [name, value] : timm::state_dict(*ema.module())) check_close(value, get("out.ema." + name), name);
  CHECK_FALSE(ema.module()->is_training());
  CHECK(ema.decay_at(std::nullopt) == 0.99);
  CHECK(ema.decay_at(1) == 0.0);
}

TEST_CASE("a task state the EMA follows is averaged as the model, as timm's EMA over the trainable module") {
  // The task state here is a second TinyNet holding the model's values at
  // every step: its average must be timm's average of the model.
  auto model = std::make_shared<TinyNetImpl>();
  auto task = std::make_shared<TinyNetImpl>();
  load_into(*model, "in.ema.init.");
  load_into(*task, "in.ema.init.");
  timm::ModelEma ema(std::make_shared<TinyNetImpl>(), *model, oracle_ema_options());
  CHECK(ema.task_state().empty());
  ema.follow_task_state(timm::state_dict(*task));
  for (int step = 1; step <= 5; ++step) {
    load_into(*model, "in.ema.step" + std::to_string(step) + ".");
    load_into(*task, "in.ema.step" + std::to_string(step) + ".");
    ema.update(*model, step, timm::state_dict(*task));
  }
  REQUIRE(ema.task_state().size() == timm::state_dict(*task).size());
  for (const auto& [name, value] : ema.task_state()) check_close(value, get("out.ema." + name), "task state " + name);
  INFO("a task state of other keys, or none, is an error naming what differs");
  const std::string count = std::to_string(ema.task_state().size());
  CHECK_THROWS_WITH_AS(ema.update(*model, 6),
                       ("model EMA: the EMA's task state has " + count + " state tensors, the task state 0").c_str(),
                       timm::Error);
  timm::NamedTensors renamed = timm::state_dict(*task);
  renamed.front().first = "projection.weight";
  CHECK_THROWS_WITH_AS(ema.update(*model, 6, renamed), doctest::Contains("differs from 'projection.weight'"),
                       timm::Error);
}

TEST_CASE("gradient clipping equals dispatch_clip_grad") {
  for (const std::string mode : {"norm", "value", "agc"}) {
    std::vector<at::Tensor> params;
    for (int i = 0; i < 4; ++i) {
      at::Tensor p = get("in.clip." + mode + ".p" + std::to_string(i)).clone().set_requires_grad(true);
      p.mutable_grad() = get("in.clip." + mode + ".g" + std::to_string(i)).clone();
      params.push_back(p);
    }
    const double value = mode == "norm" ? 1.0 : mode == "value" ? 0.05 : 0.01;
    timm::dispatch_clip_grad(params, value, mode);
    for (int i = 0; i < 4; ++i) {
      check_close(params[i].grad(), get("out.clip." + mode + ".g" + std::to_string(i)),
                  mode + " g" + std::to_string(i));
    }
  }
  CHECK_THROWS_WITH(timm::dispatch_clip_grad({}, 1.0, "max"),
                    doctest::Contains("--clip-mode 'max': expected norm, value or agc"));
}

TEST_CASE("the gradient scaler skips the non-finite step as torch's GradScaler") {
  timm::test::load_builtin_plugins();
  // One SGD parameter, as the oracle's torch.optim.SGD([w], lr=0.1).
  struct Holder : torch::nn::Module {
    at::Tensor w;
  };
  auto holder = std::make_shared<Holder>();
  holder->w = holder->register_parameter("w", get("in.scaler.w").clone());
  timm::OptimizerArgs args;
  args.opt = "momentum";  // timm's plain SGD (its "sgd" is Nesterov)
  args.lr = 0.1;
  args.momentum = 0.0;
  args.weight_decay = 0.0;
  timm::OptimizerPtr optimizer = timm::create_optimizer(*holder, {}, args);
  timm::GradScalerOptions scaler_options;
  scaler_options.init_scale = 1024.0;
  scaler_options.growth_interval = 2;
  timm::GradScaler scaler(at::kCPU, scaler_options);
  const std::vector<at::Tensor> params{holder->w};
  for (int step = 0; step < 6; ++step) {
    const at::Tensor x = get("in.scaler.x" + std::to_string(step));
    const at::Tensor loss = at::matmul(x, holder->w.t()).pow(2).mean();
    optimizer->zero_grad();
    scaler.scale(loss).backward();
    scaler.unscale_(params);
    timm::dispatch_clip_grad(params, 1.0, "norm");
    const bool stepped = scaler.step(*optimizer, params);
    scaler.update();
    CHECK(stepped == (step != 2));
    check_close(holder->w.detach(), get("out.scaler.w" + std::to_string(step)), "w after step " + std::to_string(step));
    CHECK(scaler.current_scale() == get("out.scaler.scale" + std::to_string(step)).item<double>());
  }
}

TEST_CASE("CPU bfloat16 autocast gives torch.autocast's output") {
  at::set_num_threads(1);
  auto model = std::make_shared<TinyNetImpl>();
  load_into(*model, "in.amp.");
  model->eval();
  torch::NoGradGuard no_grad;
  at::Tensor y;
  {
    timm::AutocastGuard autocast(at::kCPU, timm::parse_amp_dtype("bfloat16"));
    y = model->forward(get("in.amp.x"));
  }
  CHECK(get("out.amp.dtype_is_bf16").item<int64_t>() == 1);
  const bool is_bf16 = y.scalar_type() == at::kBFloat16;
  CHECK(is_bf16);
  // Same kernels on the same bfloat16 casts, one thread as the oracle: exact.
  const at::Tensor diff = (y.to(at::kFloat) - get("out.amp.y")).abs();
  CHECK_MESSAGE(diff.max().item<double>() == 0.0, "max |diff| " << diff.max().item<double>());
  // The guard restores the state it found.
  CHECK_FALSE(at::autocast::is_autocast_enabled(at::kCPU));
  CHECK_THROWS_WITH(timm::parse_amp_dtype("fp8"), doctest::Contains("--amp-dtype 'fp8': expected float16 or bfloat16"));
}

TEST_CASE("summary.csv: a resumed run continues the file; an epoch trained again replaces its row") {
  timm::test::TempDir tmp;
  const auto csv = tmp / "summary.csv";
  auto row = [&](int64_t epoch, double loss) { timm::update_summary(csv, epoch, {{"loss", loss}}, {}, 0.1); };
  row(0, 2.5);
  row(1, 2.0);
  row(2, 1.5);
  CHECK(timm::test::read_file(csv) == "epoch,train_loss,lr\r\n0,2.5,0.1\r\n1,2.0,0.1\r\n2,1.5,0.1\r\n");
  row(1, 1.75);  // resumed after epoch 0: epochs 1 and 2 are trained again
  CHECK(timm::test::read_file(csv) == "epoch,train_loss,lr\r\n0,2.5,0.1\r\n1,1.75,0.1\r\n");
  row(0, 3.0);  // a new run in the same folder
  CHECK(timm::test::read_file(csv) == "epoch,train_loss,lr\r\n0,3.0,0.1\r\n");
  timm::update_summary(csv, 1, {{"loss", 1.0}}, {{"top1", 50.0}}, 0.1);  // other columns: a new file
  CHECK(timm::test::read_file(csv) == "epoch,train_loss,eval_top1,lr\r\n1,1.0,50.0,0.1\r\n");
}

TEST_CASE("--tta's reduction averages each N consecutive outputs and keeps the first target of each N") {
  const at::Tensor output = at::randn({6, 4}, at::TensorOptions().dtype(at::kFloat));
  const at::Tensor target = at::tensor({3, 1, 0, 2, 2, 1}, at::TensorOptions().dtype(at::kLong));
  {
    INFO("N = 3: rows (0, 1, 2) and (3, 4, 5), targets 3 and 2");
    const timm::TtaReduced reduced = timm::reduce_tta(output, target, 3);
    const at::Tensor expected =
        at::stack({(output[0] + output[1] + output[2]) / 3.0, (output[3] + output[4] + output[5]) / 3.0});
    REQUIRE(reduced.output.sizes() == expected.sizes());
    CHECK(at::allclose(reduced.output, expected, /*rtol=*/1e-6, /*atol=*/1e-6));
    CHECK(at::equal(reduced.target, at::tensor({3, 2}, at::TensorOptions().dtype(at::kLong))));
  }
  {
    INFO("N = 2 on (B, C, D) outputs: three pairs");
    const at::Tensor output3 = at::randn({6, 2, 3});
    const timm::TtaReduced reduced = timm::reduce_tta(output3, target, 2);
    const at::Tensor expected =
        at::stack({(output3[0] + output3[1]) / 2.0, (output3[2] + output3[3]) / 2.0, (output3[4] + output3[5]) / 2.0});
    REQUIRE(reduced.output.sizes() == expected.sizes());
    CHECK(at::allclose(reduced.output, expected, 1e-6, 1e-6));
    CHECK(at::equal(reduced.target, at::tensor({3, 0, 2}, at::TensorOptions().dtype(at::kLong))));
  }
  {
    INFO("N = 6: one group");
    const timm::TtaReduced reduced = timm::reduce_tta(output, target, 6);
    CHECK(at::allclose(reduced.output, output.sum(0, /*keepdim=*/true) / 6.0, 1e-6, 1e-6));
    CHECK(reduced.target.sizes() == at::IntArrayRef{1});
    CHECK(reduced.target.item<int64_t>() == 3);
  }
  {
    INFO("a batch that is not a multiple of N: an error naming --tta (timm fails with a size mismatch)");
    try {
      timm::reduce_tta(output.narrow(0, 0, 5), target.narrow(0, 0, 5), 3);
      FAIL("no error");
    } catch (const timm::Error& e) {
      CHECK(std::string(e.what()).find("--tta 3: a validation batch of 5 samples is not a multiple of 3") !=
            std::string::npos);
    }
  }
}

}  // namespace test_train_parts
