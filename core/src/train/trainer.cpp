// run_training: the flags read once, the world started, then set-up, epochs
// and report; the parts live beside this file (trainer_internal.hpp).
#include "timm/train/trainer.hpp"

#include <c10/util/Exception.h>

#include "timm/base/error.hpp"
#include "timm/dist/setup_check.hpp"
#include "timm/log/log.hpp"
#include "trainer_internal.hpp"

namespace timm {

using namespace train_detail;

namespace {

// The training itself, once the world is set up.
TrainResult train(const TrainArgs& args, const Config& config, const std::vector<LoadedPlugin>& plugins,
                  Distributed& dist, const torch::Device& device) {
  TrainSetup setup = set_up_training(args, config, dist, device);
  RunOutput output = open_run_output(args, config, plugins, setup, dist, device);
  const int64_t start_epoch = resume_if_asked(args, output.dir, setup, dist, device);
  open_checkpoint_saver(args, setup, dist, start_epoch, output);
  return train_epochs(args, setup, output, dist, device, start_epoch);
}

// Tells the peers why this rank stops, then leaves through the destructors
// (the DDP hooks first, then the communicator). Called from a catch block.
[[noreturn]] void fail_distributed(const std::exception& e, const Distributed& dist) {
  if (const int signal = dist::stop_requested(); signal != 0) throw dist::Interrupted(signal);
  const Error* error = dynamic_cast<const Error*>(&e);
  const c10::Error* c10_error = dynamic_cast<const c10::Error*>(&e);
  const std::string message = c10_error != nullptr ? std::string(c10_error->what_without_backtrace()) : e.what();
  dist.group->publish_failure(message);
  if (error != nullptr) throw;
  // A collective outside our waits (e.g. a layer's own) failed: name the rank.
  throw Error(dist.group->explain_failure("a collective in the training step", message));
}

}  // namespace

TrainResult run_training(const Config& config, const std::vector<LoadedPlugin>& plugins) {
  check_implemented(config);
  const TrainArgs args = train_args_from_config(config);
  dist::install_stop_handlers();
  Distributed dist;
  dist.world = dist::world_from_env(dist::current_env());
  const torch::Device device = resolve_device(args, dist.world);
  if (!dist.world.distributed()) {
    log_info("Training with a single process on 1 device (" + device.str() + ").");
    return train(args, config, plugins, dist, device);
  }
  start_process_group(args, device, dist);
  try {
    dist::check_same_setup(*dist.group, dist::describe_plugins(plugins), dist::describe_config(config));
    return train(args, config, plugins, dist, device);
  } catch (const dist::Interrupted&) {
    throw;
  } catch (const std::exception& e) {
    fail_distributed(e, dist);
  }
}

}  // namespace timm
