// Feature extraction helpers (timm/models/features.hpp): feature_take_indices
// follows timm's feature_take_indices (None: every level, n: the last n, a
// list: those levels, negative from the end) with its messages, and
// check_output_fmt / take_mask. The models' forward_intermediates are compared
// with timm's in each model plugin's parity test.
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "timm/base/error.hpp"
#include "timm/models/features.hpp"

// Last: c10/util/Logging.h defines a CHECK macro that doctest must override.
#include <doctest/doctest.h>

namespace test_features {

namespace {

std::string usage_error_of(int64_t num_features, const timm::FeatureIndices& indices) {
  try {
    timm::feature_take_indices(num_features, indices);
  } catch (const timm::UsageError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("feature_take_indices: None takes every level, n the last n, a list those levels") {
  using Take = std::pair<std::vector<int64_t>, int64_t>;
  CHECK(timm::feature_take_indices(5, std::monostate{}) == Take{{0, 1, 2, 3, 4}, 4});
  CHECK(timm::feature_take_indices(5, int64_t{2}) == Take{{3, 4}, 4});
  CHECK(timm::feature_take_indices(5, int64_t{5}) == Take{{0, 1, 2, 3, 4}, 4});
  CHECK(timm::feature_take_indices(5, std::vector<int64_t>{0, -1}) == Take{{0, 4}, 4});
  // Order as given; the largest is the last level to run.
  CHECK(timm::feature_take_indices(12, std::vector<int64_t>{7, 2, -12}) == Take{{7, 2, 0}, 7});
}

TEST_CASE("feature_take_indices refuses levels out of range with timm's messages") {
  CHECK(usage_error_of(5, int64_t{0}) == "forward_intermediates: last-n (0) is out of range (1 to 5)");
  CHECK(usage_error_of(5, int64_t{6}) == "forward_intermediates: last-n (6) is out of range (1 to 5)");
  CHECK(usage_error_of(5, std::vector<int64_t>{5}) ==
        "forward_intermediates: feature index 5 is out of range (0 to 4)");
  CHECK(usage_error_of(5, std::vector<int64_t>{-6}) ==
        "forward_intermediates: feature index -1 is out of range (0 to 4)");
  CHECK(usage_error_of(5, std::vector<int64_t>{}) ==
        "forward_intermediates: indices is an empty list; expected at least one level");
}

TEST_CASE("check_output_fmt names the model, the format and what it supports") {
  CHECK_NOTHROW(timm::check_output_fmt("vit_tiny", "NLC", {"NCHW", "NLC"}));
  try {
    timm::check_output_fmt("resnet18", "NLC", {"NCHW"});
    FAIL("no error");
  } catch (const timm::UsageError& e) {
    CHECK(std::string(e.what()) == "resnet18: forward_intermediates output_fmt must be NCHW, got 'NLC'");
  }
  CHECK_THROWS_WITH_AS(timm::check_output_fmt("vit_tiny", "NHWC", {"NCHW", "NLC"}),
                       "vit_tiny: forward_intermediates output_fmt must be NCHW or NLC, got 'NHWC'", timm::UsageError);
}

TEST_CASE("take_mask marks the levels taken") {
  CHECK(timm::take_mask(4, {3, 1}) == std::vector<bool>{false, true, false, true});
  CHECK(timm::take_mask(2, {0, 0}) == std::vector<bool>{true, false});
}

TEST_CASE("run_feature_steps takes the levels' outputs in level order, stops early and skips the final") {
  // Five steps, each adding 10^i: x's value records which steps ran. Levels
  // end at steps 1, 2 and 4.
  std::vector<size_t> ran;
  auto step = [&](size_t i, at::Tensor x) {
    ran.push_back(i);
    return x + std::pow(10.0, static_cast<double>(i));
  };
  auto value = [](const at::Tensor& t) { return t.item<double>(); };
  const std::vector<size_t> ends = {1, 2, 4};
  const at::Tensor x = at::zeros({});

  const timm::Intermediates all = timm::run_feature_steps(x, 5, ends, step, {});
  REQUIRE(all.intermediates.size() == 3);
  CHECK(value(all.intermediates[0]) == 11.0);
  CHECK(value(all.intermediates[1]) == 111.0);
  CHECK(value(all.intermediates[2]) == 11111.0);
  CHECK(value(all.final) == 11111.0);

  // Indices as given, out of order: returned in level order; without
  // stop_early every step runs.
  ran.clear();
  const timm::Intermediates some =
      timm::run_feature_steps(x, 5, ends, step, timm::IntermediatesOptions().indices(std::vector<int64_t>{1, 0}));
  REQUIRE(some.intermediates.size() == 2);
  CHECK(value(some.intermediates[0]) == 11.0);
  CHECK(value(some.intermediates[1]) == 111.0);
  CHECK(ran == std::vector<size_t>{0, 1, 2, 3, 4});

  // stop_early: up to level 1's step (2); its output is the final features.
  ran.clear();
  const timm::Intermediates early = timm::run_feature_steps(
      x, 5, ends, step, timm::IntermediatesOptions().indices(std::vector<int64_t>{0, -2}).stop_early(true));
  CHECK(ran == std::vector<size_t>{0, 1, 2});
  CHECK(value(early.final) == 111.0);

  const timm::Intermediates only = timm::run_feature_steps(
      x, 5, ends, step, timm::IntermediatesOptions().indices(int64_t{1}).intermediates_only(true));
  REQUIRE(only.intermediates.size() == 1);
  CHECK(value(only.intermediates[0]) == 11111.0);
  CHECK_FALSE(only.final.defined());
  CHECK_THROWS_AS(timm::run_feature_steps(x, 5, ends, step, timm::IntermediatesOptions().indices(int64_t{4})),
                  timm::UsageError);
}

}  // namespace test_features
