// One rank of the DDP equivalence test: reads the world from torchrun-style
// variables, trains TinyNet on its shard of the shared data under
// timm::dist::DistributedDataParallel and writes the flattened parameters
// after every step to <out>/rank<R>.pt.
//   ddp_worker OUT_DIR STEPS ACCUM [unused|find-unused|syncbn]
#include <cstdlib>
#include <iostream>
#include <string>

#include <ATen/Parallel.h>
#include <c10/util/Exception.h>
#include <torch/serialize.h>

#include "ddp_fixture.hpp"
#include "timm/base/error.hpp"
#include "timm/dist/ddp.hpp"
#include "timm/dist/process_group.hpp"
#include "timm/dist/sync_batchnorm.hpp"
#include "timm/dist/world.hpp"

int main(int argc, char** argv) {
  if (argc < 4) {
    std::cerr << "usage: ddp_worker OUT_DIR STEPS ACCUM [unused|find-unused]\n";
    return 2;
  }
  try {
    at::set_num_threads(1);
    const std::string out = argv[1];
    timm::test::DdpCase c;
    c.steps = std::stoll(argv[2]);
    c.accum = std::stoll(argv[3]);
    const std::string mode = argc > 4 ? argv[4] : "";
    const auto world = timm::dist::world_from_env(timm::dist::current_env());
    c.world = world.world_size;
    auto group = timm::dist::ProcessGroup::create(world, c10::Device(c10::kCPU), {"gloo", std::chrono::seconds(30)});

    // Each rank starts from different weights: the start-up broadcast must
    // make them rank 0's (seed 0).
    at::manual_seed(static_cast<uint64_t>(world.rank) * 7919);
    timm::test::TinyNet model(mode == "unused" || mode == "find-unused", mode == "syncbn");
    if (mode == "syncbn") timm::dist::convert_sync_batchnorm(*model, group->comm());
    timm::dist::DdpOptions options;
    options.bucket_cap_bytes = 1024;  // several buckets for this small model
    options.first_bucket_bytes = 256;
    options.find_unused_parameters = mode == "find-unused";
    options.broadcast_buffers = mode != "syncbn";  // SyncBatchNorm keeps the statistics in step
    timm::dist::DistributedDataParallel ddp(*model, group->comm(), options, group.get());
    std::cout << "rank " << world.rank << ": " << ddp.bucket_parameter_names().size() << " buckets" << std::endl;

    const auto [x, y] = timm::test::global_data(c);
    std::vector<at::Tensor> states{timm::test::flat_parameters(*model)};
    for (int64_t step = 0; step < c.steps; ++step) {
      for (int64_t micro = 0; micro < c.accum; ++micro) {
        const int64_t i = step * c.accum + micro;
        const at::Tensor xs = x[i].narrow(0, world.rank * c.local_batch, c.local_batch);
        const at::Tensor ys = y[i].narrow(0, world.rank * c.local_batch, c.local_batch);
        std::optional<timm::dist::DistributedDataParallel::NoSync> no_sync;
        if (micro + 1 < c.accum) no_sync.emplace(ddp.no_sync());
        ddp.before_forward();
        at::Tensor loss = at::cross_entropy_loss(model->forward(xs), ys) / static_cast<double>(c.accum);
        loss.backward();
      }
      timm::test::sgd_step(*model, c.lr);
      states.push_back(timm::test::flat_parameters(*model));
    }
    if (mode == "find-unused" && model->unused->weight.grad().defined()) {
      std::cerr << "unused.weight got a gradient although no rank used it\n";
      return 1;
    }
    torch::save(states, out + "/rank" + std::to_string(world.rank) + ".pt");
    return 0;
  } catch (const timm::Error& e) {
    std::cerr << "ddp_worker: error: " << e.what() << std::endl;
    return e.exit_code();
  } catch (const c10::Error& e) {
    std::cerr << "ddp_worker: error: " << e.what_without_backtrace() << std::endl;
    return 1;
  }
}
