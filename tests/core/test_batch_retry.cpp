// The tools' batch-size retry against timm's (tests/oracle/tools_oracle.py
// decay): decay_batch_step for every batch size up to 1100 (timm's
// floating-point quirks at 9, 65 and 129 included), check_batch_size_retry,
// and _try_run's loop: tries down the decay steps while a torch error
// allows it, stops at an error a smaller batch cannot fix, and lets bad
// input through.
#include <string>
#include <vector>

#include <c10/util/Exception.h>
#include <nlohmann/json.hpp>

#include "test_support.hpp"
#include "timm/base/error.hpp"
#include "timm/tools/batch_retry.hpp"

// Last: c10/util/Logging.h defines a CHECK macro that doctest must override.
#include <doctest/doctest.h>

namespace test_batch_retry {

const nlohmann::json& timm_decay() {
  static const nlohmann::json decay = nlohmann::json::parse(timm::test::run_oracle("tools_oracle.py", {"decay", "-"}));
  return decay;
}

TEST_CASE("decay_batch_step and batch_size_retry_may_help equal timm's decay_batch_step and check_batch_size_retry") {
  const nlohmann::json& decay = timm_decay();
  int64_t compared = 0;
  for (const int64_t steps : {1, 2, 4}) {
    for (const bool no_odd : {false, true}) {
      const auto expected = decay.at(std::to_string(steps) + "_" + (no_odd ? "1" : "0")).get<std::vector<int64_t>>();
      REQUIRE(expected.size() == 1101);
      for (int64_t n = 0; n < static_cast<int64_t>(expected.size()); ++n) {
        CAPTURE(steps);
        CAPTURE(no_odd);
        CAPTURE(n);
        CHECK(timm::decay_batch_step(n, steps, no_odd) == expected[static_cast<std::size_t>(n)]);
        ++compared;
      }
    }
  }
  CHECK(compared == 6 * 1101);
  for (const auto& [error, retry] : decay.at("retry").items()) {
    CAPTURE(error);
    CHECK(timm::batch_size_retry_may_help(error) == retry.get<bool>());
  }
}

TEST_CASE("run_with_batch_retry tries timm's decay steps while a torch error allows, and lets bad input through") {
  const auto expected = timm_decay().at("2_0").get<std::vector<int64_t>>();
  std::vector<int64_t> tried;
  auto fits_at_most = [&](int64_t limit) {
    return [&tried, limit](int64_t batch_size) {
      tried.push_back(batch_size);
      TORCH_CHECK(batch_size <= limit, "DefaultCPUAllocator: not enough memory for a batch of ", batch_size);
    };
  };
  const timm::BatchRetryOutcome fitted = timm::run_with_batch_retry(256, "validation", fits_at_most(40));
  CHECK(fitted.ran);
  // timm's sequence from 256 to the first size that fits.
  std::vector<int64_t> steps{256};
  while (steps.back() > 40) steps.push_back(expected[static_cast<std::size_t>(steps.back())]);
  CHECK(tried == steps);
  CHECK(fitted.batch_size == steps.back());
  CHECK(steps.size() > 3);

  tried.clear();
  const timm::BatchRetryOutcome never = timm::run_with_batch_retry(5, "benchmark", fits_at_most(0));
  CHECK_FALSE(never.ran);
  CHECK(tried == std::vector<int64_t>{5, 4, 3, 2, 1});
  CHECK(never.error.find("not enough memory for a batch of 1") != std::string::npos);

  tried.clear();
  const timm::BatchRetryOutcome layout = timm::run_with_batch_retry(64, "validation", [&](int64_t batch_size) {
    tried.push_back(batch_size);
    TORCH_CHECK(false, "required rank 4 tensor to use channels_last format");
  });
  CHECK_FALSE(layout.ran);
  CHECK(tried == std::vector<int64_t>{64});  // a smaller batch cannot fix it

  CHECK_THROWS_AS(
      timm::run_with_batch_retry(64, "validation", [](int64_t) { throw timm::UsageError("--crop-pct: expected > 0"); }),
      timm::UsageError);
}

}  // namespace test_batch_retry
