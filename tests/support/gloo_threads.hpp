// Thread ranks for tests of collective code: `world` threads in this process,
// each with its own ProcessGroupGloo (loopback) over one shared HashStore,
// so a test needs no ports, no fork and no launcher.
#pragma once

#include <chrono>
#include <functional>

#include <c10/util/intrusive_ptr.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>

namespace timm::test {

using GroupPtr = c10::intrusive_ptr<c10d::Backend>;

// Runs fn(rank, group) on `world` threads and joins them; every group is
// destroyed only after all ranks have returned. Each collective
// times out after `timeout` (a rank that throws releases the others that
// way); the first exception of any rank is rethrown here, on the calling
// thread. Keep doctest checks on the calling thread: collect per-rank results
// in fn, check them after run_gloo_ranks returns.
void run_gloo_ranks(int world, const std::function<void(int rank, const GroupPtr& group)>& fn,
                    std::chrono::milliseconds timeout = std::chrono::seconds(60));

}  // namespace timm::test
