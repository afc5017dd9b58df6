#include "gloo_threads.hpp"

#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>

namespace timm::test {

void run_gloo_ranks(int world, const std::function<void(int rank, const GroupPtr& group)>& fn,
                    std::chrono::milliseconds timeout) {
  auto store = c10::make_intrusive<c10d::HashStore>();
  std::mutex error_mutex;
  std::exception_ptr first_error;
  // Each group lives until every rank has returned: a rank that returns early
  // (or does no collective at all) must not close its side of a connection
  // another rank is still making or using, which fails that rank with
  // "Connection closed by peer".
  std::vector<GroupPtr> groups(world);
  std::vector<std::thread> threads;
  threads.reserve(world);
  for (int rank = 0; rank < world; ++rank) {
    threads.emplace_back([&, rank] {
      try {
        auto options = c10d::ProcessGroupGloo::Options::create(timeout);
        options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
        options->threads = 1;  // the box has 2 cores shared by everyone
        groups[rank] = c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, world, options);
        fn(rank, groups[rank]);
      } catch (...) {
        std::lock_guard<std::mutex> lock(error_mutex);
        if (!first_error) first_error = std::current_exception();
      }
    });
  }
  for (auto& thread : threads) thread.join();
  groups.clear();
  if (first_error) std::rethrow_exception(first_error);
}

}  // namespace timm::test
