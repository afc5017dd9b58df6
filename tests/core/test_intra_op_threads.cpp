// at::parallel_for in code built against the SDK runs on torch's intra-op
// threads. It is an inline template whose loop is parallel only when the
// including code is compiled with -fopenmp (ATen/ParallelOpenMP.h); the
// SDK's torch target adds the flag and links the wheel's libgomp.so.1
// (cmake/TimmTorch.cmake). Without it the optimizers' one-pass loops (adopt,
// laprop, lars, madgrad) ran on one thread whatever --threads said.
#include <atomic>

#include <ATen/ATen.h>
#include <ATen/Config.h>
#include <ATen/Parallel.h>

#include <doctest/doctest.h>

#if AT_PARALLEL_OPENMP
#include <omp.h>
#endif

namespace {

// Sets torch's intra-op thread count for one test case, then restores it.
class IntraOpThreads {
 public:
  explicit IntraOpThreads(int threads) : previous_(at::get_num_threads()) { at::set_num_threads(threads); }
  ~IntraOpThreads() { at::set_num_threads(previous_); }
  IntraOpThreads(const IntraOpThreads&) = delete;
  IntraOpThreads& operator=(const IntraOpThreads&) = delete;

 private:
  int previous_;
};

}  // namespace

TEST_CASE("at::parallel_for in SDK-built code runs its ranges on 2 intra-op threads") {
  const IntraOpThreads threads(2);
  std::atomic<int> thread_mask{0};
  std::atomic<int64_t> covered{0};
  at::parallel_for(0, 1000, 1, [&](int64_t begin, int64_t end) {
    thread_mask |= 1 << at::get_thread_num();
    covered += end - begin;
  });
  CHECK(covered.load() == 1000);
  CHECK(thread_mask.load() == 0b11);  // threads 0 and 1 both ran a range
}

#if AT_PARALLEL_OPENMP
TEST_CASE("the OpenMP runtime this code calls is torch's: at::set_num_threads sets its thread count") {
  // Two libgomp copies in one process would each keep their own count.
  const IntraOpThreads threads(2);
  CHECK(omp_get_max_threads() == 2);
  at::set_num_threads(1);
  CHECK(omp_get_max_threads() == 1);
}
#endif
