#include "timm/tools/batch_retry.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <new>

#include <c10/util/Exception.h>

#include "timm/log/log.hpp"

namespace timm {
namespace {

// Python's float floor division a // b for b > 0, bit for bit (CPython's
// float_floor_div): timm's log(n) // log(2) lands below an exact power of
// two where the logs round so, and its batch sizes follow that.
double python_floor_div(double a, double b) {
  double mod = std::fmod(a, b);
  double div = (a - mod) / b;
  if (mod != 0.0 && ((b < 0) != (mod < 0))) div -= 1.0;
  double floor_div = std::floor(div);
  if (div - floor_div > 0.5) floor_div += 1.0;
  return floor_div;
}

std::string lower(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

}  // namespace

int64_t decay_batch_step(int64_t batch_size, int64_t num_intra_steps, bool no_odd) {
  if (batch_size <= 1) return 0;
  const double exponent = python_floor_div(std::log(static_cast<double>(batch_size - 1)), std::log(2.0));
  const auto base = static_cast<int64_t>(std::pow(2.0, exponent));
  const int64_t step = std::max<int64_t>(base / num_intra_steps, 1);
  // Python's // on the (non-negative) integers.
  int64_t next = base + ((batch_size - base - 1) / step) * step;
  if (no_odd && next % 2 != 0) next -= 1;
  return next;
}

bool batch_size_retry_may_help(std::string_view error) {
  const std::string text = lower(error);
  return text.find("required rank") == std::string::npos && text.find("illegal") == std::string::npos;
}

BatchRetryOutcome run_with_batch_retry(int64_t initial, const std::string& what,
                                       const std::function<void(int64_t)>& run) {
  BatchRetryOutcome outcome;
  outcome.error = "Unknown";
  for (int64_t batch_size = initial; batch_size > 0;) {
    try {
      run(batch_size);
      outcome.ran = true;
      outcome.batch_size = batch_size;
      return outcome;
    } catch (const c10::Error& e) {
      outcome.error = e.what_without_backtrace();
    } catch (const std::bad_alloc& e) {
      outcome.error = e.what();
    }
    log_error("\"" + outcome.error + "\" while running " + what + ".");
    if (!batch_size_retry_may_help(outcome.error)) break;
    batch_size = decay_batch_step(batch_size);
    log_warning("Reducing batch size to " + std::to_string(batch_size) + " for retry.");
  }
  return outcome;
}

}  // namespace timm
