// validate.py's and benchmark.py's batch-size retry: a run that fails with
// an error a smaller batch may get past (out of memory) runs again with
// timm's next smaller batch size, down to 1.
//
//   const timm::BatchRetryOutcome outcome = timm::run_with_batch_retry(
//       256, "validation", [&](int64_t batch_size) { row = validate_one(..., batch_size); });
//   if (!outcome.ran) ...  // outcome.error: the last failure
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace timm {

// timm's decay_batch_step(batch_size, num_intra_steps, no_odd): the next
// batch size to try, stepping down between powers of two in
// `num_intra_steps` steps (2: 64, 48, 32, 24, 16, 12, 8, 6, 4, 3, 2, 1);
// 0 after 1. Computed as timm does, in floating point.
int64_t decay_batch_step(int64_t batch_size, int64_t num_intra_steps = 2, bool no_odd = false);

// timm's check_batch_size_retry: false where a smaller batch cannot help
// ("required rank": a conv that does not take channels_last; "illegal": a
// CUDA illegal memory access, which leaves the process unusable).
bool batch_size_retry_may_help(std::string_view error);

struct BatchRetryOutcome {
  bool ran = false;        // a try returned
  int64_t batch_size = 0;  // the batch size of the try that returned
  std::string error;       // the last try's error when none returned
};

// validate.py's / benchmark.py's _try_run: calls `run(batch_size)` from
// `initial` down by decay_batch_step while it throws an error of torch's
// (c10::Error, std::bad_alloc: Python's RuntimeError) that
// batch_size_retry_may_help, logging each ('"<error>" while running
// <what>.', "Reducing batch size to N for retry."). timm::Error and
// UsageError (bad input, not memory) pass through.
BatchRetryOutcome run_with_batch_retry(int64_t initial, const std::string& what,
                                       const std::function<void(int64_t)>& run);

}  // namespace timm
