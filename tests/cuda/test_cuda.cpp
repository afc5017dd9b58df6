// CUDA paths, run on the GPU machine by scripts/device/cuda-check.sh (built
// only with -DTIMM_CUDA_TESTS=ON, so a machine without a GPU never counts
// them): model outputs on CUDA equal the CPU's, the float16 gradient scaler
// skips a non-finite step and backs off, grad checkpointing redraws the CUDA
// generator's masks, checkpoints restore the CUDA generator, the loader's
// batches are page-locked with pin_memory, and timm-run trains with --amp,
// --channels-last and --pin-mem on the GPU.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>

#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <c10/core/GradMode.h>
#include <torch/cuda.h>
#include <torch/nn/module.h>

#include "e2e_support.hpp"
#include "model_parity.hpp"
#include "test_support.hpp"
#include "timm/data/loader.hpp"
#include "timm/models/model.hpp"
#include "timm/optim/optimizer.hpp"
#include "timm/train/amp.hpp"
#include "timm/train/checkpoint.hpp"

// Last: c10/util/Logging.h defines a CHECK macro that doctest must override.
#include <doctest/doctest.h>

namespace {

// CUDA and CPU float32 convolutions sum in different orders; TF32 is off.
constexpr double kAtol = 1e-3;
constexpr double kRtol = 1e-3;

void require_gpu() { REQUIRE_MESSAGE(torch::cuda::is_available(), "this test needs a CUDA device"); }

// Eight 4x4 RGB images of one value each, the index's class.
class TinyDataset final : public timm::Dataset {
 public:
  std::size_t size() const override { return 8; }
  timm::Image image(std::size_t index) const override {
    timm::Image img(4, 4, 3);
    std::fill(img.pixels.begin(), img.pixels.end(), static_cast<std::uint8_t>(index));
    return img;
  }
  int64_t target(std::size_t index) const override { return static_cast<int64_t>(index % 2); }
  int64_t num_classes() const override { return 2; }
  std::string describe(std::size_t index) const override { return "tiny[" + std::to_string(index) + "]"; }
};

// The first batch of a loader over TinyDataset.
timm::Batch first_batch(bool pin_memory) {
  timm::LoaderOptions options;
  options.batch_size = 4;
  options.num_workers = 1;
  options.pin_memory = pin_memory;
  auto dataset = std::make_shared<TinyDataset>();
  timm::Loader loader(dataset, timm::make_local_sampler(dataset->size(), false, 0), timm::TransformPipeline(), options);
  loader.start_epoch(0);
  auto batch = loader.next();
  REQUIRE(batch.has_value());
  return std::move(*batch);
}

}  // namespace

TEST_CASE("resnet50 and efficientnet_b0 give the CPU's eval logits on CUDA") {
  require_gpu();
  timm::test::load_builtin_plugins();
  at::globalContext().setAllowTF32CuBLAS(false);
  at::globalContext().setAllowTF32CuDNN(false);
  for (const std::string name : {"resnet50", "efficientnet_b0"}) {
    timm::ModelArgs args;
    args.num_classes = 10;
    timm::ModelPtr model = timm::create_model(name, args);
    model->eval();
    torch::NoGradGuard no_grad;
    const at::Tensor x = at::randn({4, 3, 96, 96});
    const at::Tensor cpu = model->forward(x);
    model->to(torch::Device(torch::kCUDA));
    const at::Tensor gpu = model->forward(x.cuda()).cpu();
    const double excess = ((gpu - cpu).abs() - (kAtol + kRtol * cpu.abs())).max().item<double>();
    CHECK_MESSAGE(excess <= 0.0, name << ": max |cuda - cpu| " << (gpu - cpu).abs().max().item<double>());
  }
}

TEST_CASE("the float16 gradient scaler skips a non-finite step on CUDA and halves its scale") {
  require_gpu();
  timm::test::load_builtin_plugins();
  const torch::Device cuda(torch::kCUDA);
  struct Holder : torch::nn::Module {
    at::Tensor w;
  };
  auto holder = std::make_shared<Holder>();
  holder->w = holder->register_parameter("w", at::randn({8, 8}, at::TensorOptions().device(cuda)));
  timm::OptimizerArgs args;
  args.opt = "momentum";
  args.lr = 0.1;
  timm::OptimizerPtr optimizer = timm::create_optimizer(*holder, {}, args);
  timm::GradScaler scaler(cuda);
  const std::vector<at::Tensor> params{holder->w};
  for (int step = 0; step < 3; ++step) {
    at::Tensor x = at::randn({4, 8}, at::TensorOptions().device(cuda));
    if (step == 1) x[0][0] = INFINITY;
    const at::Tensor before = holder->w.detach().clone();
    at::Tensor loss;
    {
      timm::AutocastGuard autocast(at::kCUDA, at::kHalf);
      loss = at::matmul(x, holder->w.t()).to(at::kFloat).pow(2).mean();
    }
    optimizer->zero_grad();
    const double scale_before = scaler.current_scale();
    scaler.scale(loss).backward();
    const bool stepped = scaler.step(*optimizer, params);
    scaler.update();
    CHECK(stepped == (step != 1));
    CHECK(at::equal(holder->w.detach(), before) == (step == 1));
    if (step == 1) CHECK(scaler.current_scale() == scale_before * 0.5);
  }
}

TEST_CASE("grad checkpointing on CUDA: drop path masks drawn again from the CUDA generator") {
  require_gpu();
  at::globalContext().setAllowTF32CuBLAS(false);
  at::globalContext().setAllowTF32CuDNN(false);
  at::globalContext().setDeterministicCuDNN(true);
  // Kernels may sum in another order between the two steps; a mask drawn
  // from the wrong generator state would be off by far more than this.
  timm::test::check_grad_checkpointing("vit_tiny_patch16_224", 32, 32, {{"dynamic_img_size", "true"}},
                                       c10::Device(c10::kCUDA), timm::test::Tolerance{1e-4, 1e-4});
  timm::test::check_grad_checkpointing("convnext_atto", 32, 32, {}, c10::Device(c10::kCUDA),
                                       timm::test::Tolerance{1e-4, 1e-4});
}

TEST_CASE("a checkpoint restores the CUDA generator's state, and a CPU-written one leaves it alone") {
  require_gpu();
  timm::test::load_builtin_plugins();
  const torch::Device cuda(torch::kCUDA, 0);
  timm::ModelArgs model_args;
  model_args.num_classes = 10;
  timm::ModelPtr model = timm::create_model("resnet18", model_args);
  timm::OptimizerArgs opt_args;
  opt_args.opt = "sgd";
  timm::OptimizerPtr optimizer = timm::create_optimizer(*model, {}, opt_args);
  timm::test::TempDir dir;
  at::manual_seed(7);  // seeds the CUDA generators too
  timm::CheckpointParts parts{*model, *optimizer};
  parts.rng_states.cuda.push_back(timm::cuda_rng_state(cuda));
  timm::save_checkpoint(dir.path(), "last", parts, timm::TrainingState{});
  const at::Tensor expected = at::rand({16}, at::TensorOptions().device(cuda)).cpu();

  auto draws_after_resume = [&](const std::string& stem) {
    at::manual_seed(99);
    timm::ResumeTargets targets{*model};
    targets.device = cuda;
    timm::resume_checkpoint(dir / stem, targets);
    return at::rand({16}, at::TensorOptions().device(cuda)).cpu();
  };
  CHECK(at::equal(draws_after_resume("last"), expected));
  // Without a CUDA state (a run on the CPU wrote it) the generator keeps its own.
  timm::save_checkpoint(dir.path(), "cpu", timm::CheckpointParts{*model, *optimizer}, timm::TrainingState{});
  at::manual_seed(99);
  const at::Tensor own = at::rand({16}, at::TensorOptions().device(cuda)).cpu();
  CHECK(at::equal(draws_after_resume("cpu"), own));
}

TEST_CASE("with pin_memory the loader's batches are page-locked and copy to the GPU asynchronously") {
  require_gpu();
  const timm::Batch pinned = first_batch(/*pin_memory=*/true);
  CHECK(pinned.images.is_pinned());
  CHECK(pinned.targets.is_pinned());
  const timm::Batch pageable = first_batch(/*pin_memory=*/false);
  CHECK_FALSE(pageable.images.is_pinned());
  CHECK_FALSE(pageable.targets.is_pinned());
  // The copies the train loop makes: non-blocking, the same values.
  const at::Tensor images = pinned.images.to(at::kCUDA, /*non_blocking=*/true);
  const at::Tensor targets = pinned.targets.to(at::kCUDA, /*non_blocking=*/true);
  CHECK(at::equal(images.cpu(), pageable.images));
  CHECK(at::equal(targets.cpu(), pageable.targets));
}

TEST_CASE("timm-run trains resnet18 on CUDA with float16 AMP, channels-last and pinned batches") {
  require_gpu();
  const char* data = std::getenv("TIMM_FASHION_MNIST_DIR");
  std::vector<std::string> argv = {(timm::test::bin_dir() / "timm-run").string(),
                                   "--model",
                                   "resnet18",
                                   "--device",
                                   "cuda",
                                   "--amp",
                                   "--channels-last",
                                   "--pin-mem",
                                   "--epochs",
                                   "1",
                                   "--train-num-samples",
                                   "8192",
                                   "--val-num-samples",
                                   "2000",
                                   "-b",
                                   "128",
                                   "--lr",
                                   "0.1",
                                   "--warmup-epochs",
                                   "0",
                                   "--sched-on-updates",
                                   "--no-aug",
                                   "-j",
                                   "4",
                                   "--output",
                                   "/tmp/timm-cuda-test"};
  if (data != nullptr) argv.insert(argv.end(), {"--dataset", "fashion-mnist", "--data-dir", data});
  const auto run = timm::test::run_command(argv, std::chrono::seconds(600));
  REQUIRE_MESSAGE(run.exit_code == 0, run.output);
  MESSAGE(run.output.substr(run.output.size() > 1200 ? run.output.size() - 1200 : 0));
  CHECK(run.output.find("Using native Torch AMP. Training in mixed precision.") != std::string::npos);
  CHECK(run.output.find("batches are not pinned") == std::string::npos);
  CHECK(timm::test::number_after(run.output, "Test top-1:") > 60.0);
}
