#include "timm/dist/process_group.hpp"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <map>
#include <vector>

#include <c10/util/Exception.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "backends.hpp"
#include "timm/base/error.hpp"
#include "timm/log/log.hpp"

namespace timm::dist {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kHeartbeatPeriod = std::chrono::milliseconds(500);
// A rank whose heartbeat counter does not move over this long is dead or stalled.
constexpr auto kHeartbeatSilence = std::chrono::milliseconds(2500);
// The watchdog ends a wait() stuck this long past the collective timeout
// (Gloo raises its own timeout first; this is for backends that would hang).
constexpr auto kWatchdogGrace = std::chrono::seconds(30);
constexpr auto kDiagnosisTimeout = std::chrono::seconds(10);

std::string heartbeat_key(int rank) { return "heartbeat/" + std::to_string(rank); }
std::string failure_key(int rank) { return "failed/" + std::to_string(rank); }

std::string message_of(const std::exception& e) {
  if (const auto* c10_error = dynamic_cast<const c10::Error*>(&e)) return c10_error->what_without_backtrace();
  return e.what();
}

// `count_as_worker`: this connection is one of the world_size workers the
// server waits for (the rendezvous); the heartbeat connection is not.
c10::intrusive_ptr<c10d::Store> connect_store(const WorldInfo& world, std::chrono::seconds timeout, bool serve,
                                              bool count_as_worker) {
  c10d::TCPStoreOptions options;
  options.port = static_cast<std::uint16_t>(world.master_port);
  options.isServer = serve;
  options.timeout = timeout;
  options.multiTenant = true;
  if (count_as_worker) options.numWorkers = world.world_size;
  options.waitWorkers = count_as_worker;
  auto tcp = c10::make_intrusive<c10d::TCPStore>(world.master_addr, options);
  // A restarted torchrun job reuses the agent's store: keep its keys apart.
  return c10::make_intrusive<c10d::PrefixStore>("timm/" + std::to_string(world.restart_count), tcp);
}

std::atomic<int> g_stop_signal{0};

void on_stop_signal(int signal) {
  if (g_stop_signal.exchange(signal) != 0) _exit(128 + signal);  // a second signal: leave now
}

}  // namespace

std::string resolve_backend(const std::string& requested, const c10::Device& device) {
  if (requested.empty()) return device.is_cuda() ? "nccl" : "gloo";
  if (requested != "gloo" && requested != "nccl") {
    throw UsageError("--dist-backend " + in_quotes(requested) +
                     ": expected gloo or nccl (or nothing for the device's)");
  }
  if (requested == "nccl" && !device.is_cuda()) {
    throw UsageError("--dist-backend nccl needs a CUDA --device; got " + in_quotes(device.str()));
  }
  return requested;
}

bool nccl_available() { return detail::have_nccl(); }

ProcessGroup::ProcessGroup(WorldInfo world, std::string backend, std::chrono::seconds timeout)
    : world_(std::move(world)), backend_(std::move(backend)), timeout_(timeout) {}

std::unique_ptr<ProcessGroup> ProcessGroup::create(const WorldInfo& world, const c10::Device& device,
                                                   const GroupOptions& options) {
  const std::string backend = resolve_backend(options.backend, device);
  if (options.timeout.count() <= 0) {
    throw UsageError("--dist-timeout " + std::to_string(options.timeout.count()) +
                     ": expected a positive number of seconds");
  }
  std::unique_ptr<ProcessGroup> group(new ProcessGroup(world, backend, options.timeout));
  const std::string where = world.master_addr + ":" + std::to_string(world.master_port);
  try {
    group->store_ = connect_store(world, options.timeout, world.is_primary() && !world.agent_store, true);
    // Short: a stalled store must not hold up the diagnosis of a failure.
    group->heartbeat_store_ = connect_store(world, std::min(options.timeout, kDiagnosisTimeout), /*serve=*/false,
                                            /*count_as_worker=*/false);
  } catch (const std::exception& e) {
    throw Error(format("rank %d: rendezvous at %s (%s launch) failed within --dist-timeout %lld s: %s", world.rank,
                       where.c_str(), world.launcher.c_str(), static_cast<long long>(options.timeout.count()),
                       message_of(e).c_str()));
  }
  group->start_heartbeat();
  try {
    group->comm_ = backend == "nccl" ? detail::create_nccl(group->store_, world, device, options.timeout)
                                     : detail::create_gloo(group->store_, world, options.timeout);
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw Error(group->explain_failure("connecting the " + backend + " communicator", message_of(e)));
  }
  group->start_watchdog();
  return group;
}

ProcessGroup::~ProcessGroup() {
  stopping_ = true;
  if (watchdog_.joinable()) watchdog_.join();
  if (heartbeat_.joinable()) heartbeat_.join();
  if (comm_) {
    try {
      comm_->shutdown();
    } catch (const std::exception& e) {
      log_warning(std::string("shutting down the communicator: ") + message_of(e));
    }
  }
  comm_.reset();
  heartbeat_store_.reset();
  store_.reset();
}

void ProcessGroup::start_heartbeat() {
  heartbeat_ = std::thread([this] {
    const std::string key = heartbeat_key(world_.rank);
    while (!stopping_) {
      try {
        std::lock_guard lock(store_mutex_);
        heartbeat_store_->add(key, 1);
      } catch (const std::exception&) {
        return;  // the store is gone (rank 0 ended); a failing collective reports it
      }
      for (auto slept = std::chrono::milliseconds(0); slept < kHeartbeatPeriod && !stopping_;
           slept += std::chrono::milliseconds(50)) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
    }
  });
}

void ProcessGroup::start_watchdog() {
  watchdog_ = std::thread([this] {
    while (!stopping_) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      std::string watched;
      Clock::duration waited{};
      {
        std::lock_guard lock(watch_mutex_);
        if (watched_.empty()) continue;
        watched = watched_;
        waited = Clock::now() - watched_since_;
      }
      if (waited < timeout_ + kWatchdogGrace) continue;
      report_fatal_error(explain_failure(watched, format("no completion within --dist-timeout %lld s (watchdog)",
                                                         static_cast<long long>(timeout_.count()))));
      _exit(1);  // the collective cannot be cancelled; leaving is the only clean way out
    }
  });
}

void ProcessGroup::wait(const c10::intrusive_ptr<c10d::Work>& work, const std::string& what) {
  {
    std::lock_guard lock(watch_mutex_);
    watched_ = what;
    watched_since_ = Clock::now();
  }
  auto clear = [this] {
    std::lock_guard lock(watch_mutex_);
    watched_.clear();
  };
  try {
    work->wait(std::chrono::duration_cast<std::chrono::milliseconds>(timeout_));
  } catch (const std::exception& e) {
    clear();
    throw Error(explain_failure(what, message_of(e)));
  }
  clear();
}

std::string ProcessGroup::unresponsive_ranks() {
  auto read_beats = [this] {
    std::map<int, int64_t> beats;
    std::lock_guard lock(store_mutex_);
    for (int r = 0; r < world_.world_size; ++r) {
      if (r != world_.rank) beats[r] = heartbeat_store_->add(heartbeat_key(r), 0);
    }
    return beats;
  };
  try {
    const auto before = read_beats();
    std::this_thread::sleep_for(kHeartbeatSilence);
    const auto after = read_beats();
    std::string dead;
    for (const auto& [r, count] : before) {
      if (after.at(r) == count) dead += (dead.empty() ? "" : ", ") + std::to_string(r);
    }
    return dead.empty() ? "" : "rank " + dead + " stopped responding (no heartbeat: killed or stalled)";
  } catch (const std::exception&) {
    if (world_.rank == 0 && !world_.agent_store) return "";
    return "rank 0 stopped responding (its rendezvous store at " + world_.master_addr + ":" +
           std::to_string(world_.master_port) + " no longer answers: killed or stalled)";
  }
}

std::string ProcessGroup::explain_failure(const std::string& what, const std::string& cause) {
  std::string message = format("rank %d: %s failed: %s", world_.rank, what.c_str(), cause.c_str());
  std::string reported;
  try {
    std::lock_guard lock(store_mutex_);
    for (int r = 0; r < world_.world_size; ++r) {
      if (r == world_.rank || !heartbeat_store_->check({failure_key(r)})) continue;
      const auto bytes = heartbeat_store_->get(failure_key(r));
      reported += format("; rank %d failed first: %s", r, std::string(bytes.begin(), bytes.end()).c_str());
    }
  } catch (const std::exception&) {
    // The store is gone: unresponsive_ranks() says so.
  }
  if (!reported.empty()) return message + reported;
  const std::string dead = unresponsive_ranks();
  return dead.empty() ? message : message + "; " + dead;
}

void ProcessGroup::publish_failure(const std::string& message) noexcept {
  try {
    std::lock_guard lock(store_mutex_);
    heartbeat_store_->set(failure_key(world_.rank), std::vector<uint8_t>(message.begin(), message.end()));
  } catch (...) {
    // Best effort: the peers still see this rank's heartbeat stop.
  }
}

void install_stop_handlers() {
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
}

int stop_requested() { return g_stop_signal.load(); }

Interrupted::Interrupted(int signal)
    : Error(format("stopped by %s", signal == SIGINT    ? "SIGINT"
                                    : signal == SIGTERM ? "SIGTERM"
                                                        : "a signal")),
      signal_(signal) {}

}  // namespace timm::dist
