// Elapsed wall time on the monotonic clock, for the throughput and step-time
// figures of the trainer, the tools and the benchmarks:
//
//   timm::Stopwatch watch;
//   step();
//   double s = watch.seconds();  // since construction or the last restart()
//   double lap = watch.lap();    // the same, and restarts
#pragma once

#include <chrono>

namespace timm {

class Stopwatch {
 public:
  using Clock = std::chrono::steady_clock;

  Stopwatch() : start_(Clock::now()) {}

  double seconds() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }
  void restart() { start_ = Clock::now(); }
  double lap() {
    const Clock::time_point now = Clock::now();
    const double elapsed = std::chrono::duration<double>(now - start_).count();
    start_ = now;
    return elapsed;
  }

 private:
  Clock::time_point start_;
};

}  // namespace timm
