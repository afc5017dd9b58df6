// The distributed world of one training run: the TCPStore rendezvous, the
// communicator (Gloo on CPU, NCCL on CUDA) and the fault handling around them.
//
//   auto world = timm::dist::world_from_env(timm::dist::current_env());
//   if (world.distributed()) {
//     auto group = timm::dist::ProcessGroup::create(world, device, {.backend = "", .timeout = 1800s});
//     group->wait(group->comm()->allreduce(tensors), "allreduce of the loss");
//   }  // the destructor shuts the communicator down, on every exit path
//
// Faults: every collective has the timeout given here (Gloo enforces it; a
// watchdog thread ends a wait() stuck past it for backends that would hang).
// A failed or timed-out collective becomes a timm::Error that names the
// collective and, from the heartbeats each rank keeps in the store, the rank
// that died or stalled.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include <c10/core/Device.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include "timm/base/error.hpp"
#include "timm/dist/world.hpp"

namespace timm::dist {

// What the distributed components take as their communicator.
using Communicator = c10::intrusive_ptr<c10d::Backend>;

struct GroupOptions {
  std::string backend;  // "gloo", "nccl" or "" (NCCL for a CUDA device, Gloo otherwise)
  std::chrono::seconds timeout{1800};
};

// The backend name for a device when none is asked for, as timm's
// init_distributed_device picks it; throws UsageError for an unknown name or
// NCCL on a CPU device.
std::string resolve_backend(const std::string& requested, const c10::Device& device);

// True when this build can create an NCCL communicator (torch with CUDA and
// nccl.h found at build time).
bool nccl_available();

class ProcessGroup {
 public:
  // Rendezvous through the TCPStore at world.master_addr:master_port (rank 0
  // serves it unless torchrun's agent does) and create the communicator.
  // Throws timm::Error when a peer does not show up within the timeout.
  static std::unique_ptr<ProcessGroup> create(const WorldInfo& world, const c10::Device& device,
                                              const GroupOptions& options);
  ~ProcessGroup();
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  const WorldInfo& world() const { return world_; }
  int rank() const { return world_.rank; }
  int size() const { return world_.world_size; }
  const Communicator& comm() const { return comm_; }
  c10d::Store& store() { return *store_; }
  const std::string& backend_name() const { return backend_; }
  std::chrono::seconds timeout() const { return timeout_; }

  // Waits for a collective; a failure or timeout throws timm::Error naming
  // `what` ("allreduce of gradient bucket 3") and the ranks that look dead.
  void wait(const c10::intrusive_ptr<c10d::Work>& work, const std::string& what);

  // A message for a failed collective: `what`, the cause, and which ranks
  // stopped beating or reported a failure of their own.
  std::string explain_failure(const std::string& what, const std::string& cause);

  // Tells the other ranks (through the store) why this rank is about to fail,
  // so their errors can name it. Never throws.
  void publish_failure(const std::string& message) noexcept;

  // The ranks whose heartbeat did not advance over ~2.5 heartbeat periods, or
  // every other rank when the store is gone (it lives on rank 0).
  std::string unresponsive_ranks();

 private:
  ProcessGroup(WorldInfo world, std::string backend, std::chrono::seconds timeout);
  void start_heartbeat();
  void start_watchdog();

  WorldInfo world_;
  std::string backend_;
  std::chrono::seconds timeout_;
  c10::intrusive_ptr<c10d::Store> store_;
  c10::intrusive_ptr<c10d::Store> heartbeat_store_;  // its own connection, used by the heartbeat thread
  Communicator comm_;

  std::atomic<bool> stopping_{false};
  std::thread heartbeat_;
  std::thread watchdog_;
  std::mutex store_mutex_;  // guards heartbeat_store_
  std::mutex watch_mutex_;  // guards watched_*
  std::string watched_;     // the collective being waited on, or ""
  std::chrono::steady_clock::time_point watched_since_;
};

// SIGINT and SIGTERM request a clean stop: the training loop polls
// stop_requested() and throws Interrupted, so every rank leaves through its
// destructors. A second signal exits at once.
void install_stop_handlers();
int stop_requested();  // the signal number, or 0

class Interrupted : public Error {
 public:
  explicit Interrupted(int signal);
  int exit_code() const noexcept override { return 128 + signal_; }

 private:
  int signal_;
};

}  // namespace timm::dist
