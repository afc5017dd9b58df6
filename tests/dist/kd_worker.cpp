// One rank of the distillation-under-DDP test: reads the world from
// torchrun-style variables, builds the task of MODE (kd_fixture.hpp: the
// teacher the same on every rank, the student and projection seeded per
// rank), lets the task wrap its trainable module in
// timm::dist::DistributedDataParallel (prepare_distributed) and trains STEPS
// SGD steps on its shard of the shared data. Writes to OUT_DIR:
//   rank<R>.pt     the flattened trainable parameters and buffers (student,
//                  projection) after the start-up broadcast and each step
//   local<R>.pt    the same before the broadcast (this rank's own init)
//   teacher<R>.pt  the teacher's flattened parameters and buffers before and
//                  after training
//   buckets<R>.txt the parameter names of DDP's buckets, one a line
//   kd_worker OUT_DIR logit|feature STEPS
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <optional>
#include <string>

#include <ATen/Parallel.h>
#include <c10/util/Exception.h>
#include <torch/serialize.h>

#include "ddp_fixture.hpp"
#include "kd_fixture.hpp"
#include "timm/base/error.hpp"
#include "timm/dist/ddp.hpp"
#include "timm/dist/process_group.hpp"
#include "timm/dist/sync_batchnorm.hpp"
#include "timm/dist/world.hpp"

int main(int argc, char** argv) {
  if (argc != 4) {
    std::cerr << "usage: kd_worker OUT_DIR logit|feature STEPS\n";
    return 2;
  }
  try {
    at::set_num_threads(1);
    const std::string out = argv[1];
    const std::string mode = argv[2];
    timm::test::DdpCase c;
    c.steps = std::stoll(argv[3]);
    const auto world = timm::dist::world_from_env(timm::dist::current_env());
    c.world = world.world_size;
    const std::string suffix = std::to_string(world.rank);
    auto group = timm::dist::ProcessGroup::create(world, c10::Device(c10::kCPU), {"gloo", std::chrono::seconds(30)});

    timm::test::KdSetup kd = timm::test::build_kd(mode, timm::test::kd_student_seed(world.rank));
    timm::TrainingTask& task = *kd.task;
    // The student's BatchNorm over the whole global batch, as the reference's
    // plain BatchNorm over 2B; the teacher's stays as it is (eval mode).
    timm::dist::convert_sync_batchnorm(*task.model(), group->comm());
    torch::save(std::vector<at::Tensor>{timm::test::flat_parameters(task.trainable_module())},
                out + "/local" + suffix + ".pt");
    const at::Tensor teacher_before = timm::test::flat_parameters(*kd.teacher);

    timm::dist::DdpOptions options;
    options.bucket_cap_bytes = 1024;  // several buckets for these small modules
    options.first_bucket_bytes = 256;
    options.broadcast_buffers = false;  // SyncBatchNorm keeps the statistics in step
    std::optional<timm::dist::DistributedDataParallel> ddp;
    task.prepare_distributed(
        [&](torch::nn::Module& module) { ddp.emplace(module, group->comm(), options, group.get()); });
    if (!ddp) throw timm::Error("prepare_distributed did not call wrap");
    std::ofstream buckets(out + "/buckets" + suffix + ".txt");
    for (const auto& bucket : ddp->bucket_parameter_names()) {
      for (const auto& name : bucket) buckets << name << "\n";
    }
    buckets.close();
    std::cout << "rank " << world.rank << ": " << task.describe() << ", " << ddp->bucket_parameter_names().size()
              << " buckets" << std::endl;

    task.train();
    const auto [x, y] = timm::test::global_data(c);
    std::vector<at::Tensor> states{timm::test::flat_parameters(task.trainable_module())};
    for (int64_t step = 0; step < c.steps; ++step) {
      const at::Tensor xs = x[step].narrow(0, world.rank * c.local_batch, c.local_batch);
      const at::Tensor ys = y[step].narrow(0, world.rank * c.local_batch, c.local_batch);
      ddp->before_forward();
      timm::TaskResult result = task.forward(xs, ys);
      result.loss.backward();
      timm::test::sgd_step(task.trainable_module(), c.lr);
      states.push_back(timm::test::flat_parameters(task.trainable_module()));
    }
    for (const auto& item : kd.teacher->named_parameters()) {
      if (item.value().requires_grad() || item.value().grad().defined()) {
        std::cerr << "the teacher's " << item.key() << " requires or got a gradient\n";
        return 1;
      }
    }
    if (kd.teacher->is_training()) {
      std::cerr << "the teacher is in training mode\n";
      return 1;
    }
    torch::save(states, out + "/rank" + suffix + ".pt");
    torch::save(std::vector<at::Tensor>{teacher_before, timm::test::flat_parameters(*kd.teacher)},
                out + "/teacher" + suffix + ".pt");
    return 0;
  } catch (const timm::Error& e) {
    std::cerr << "kd_worker: error: " << e.what() << std::endl;
    return e.exit_code();
  } catch (const c10::Error& e) {
    std::cerr << "kd_worker: error: " << e.what_without_backtrace() << std::endl;
    return 1;
  }
}
