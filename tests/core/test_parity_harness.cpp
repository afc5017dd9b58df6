// The parity harnesses themselves: each must fail when ours outputs NaN.
// (std::max(acc, NaN) returns acc, so a harness that folds its differences
// with it lets a NaN model, optimizer or schedule pass; these feed each one
// NaN and expect the comparison its tests CHECK to fail.)
#include <cmath>
#include <limits>
#include <string>

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include "model_parity.hpp"
#include "optim_parity.hpp"
#include "sched_parity.hpp"
#include "test_support.hpp"

#include <doctest/doctest.h>  // last: c10 defines a CHECK of its own

namespace test_parity_harness {

namespace test = timm::test;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// The parameters of `model` as the oracle writes them: name -> flat values.
nlohmann::json parameters_as_json(torch::nn::Module& model) {
  nlohmann::json values = nlohmann::json::object();
  for (const auto& item : model.named_parameters()) {
    const at::Tensor flat = item.value().detach().to(at::kDouble).reshape({-1}).contiguous();
    values[item.key()] = std::vector<double>(flat.data_ptr<double>(), flat.data_ptr<double>() + flat.numel());
  }
  return values;
}

}  // namespace

TEST_CASE("worst_diff and relative_diff keep a NaN in either place") {
  CHECK(std::isnan(test::worst_diff(0.0, kNaN)));
  CHECK(std::isnan(test::worst_diff(kNaN, 0.0)));
  CHECK(test::worst_diff(1.0, 2.0) == 2.0);
  CHECK(test::worst_diff(2.0, 1.0) == 2.0);
  CHECK(std::isnan(test::relative_diff(0.0, kNaN)));
  CHECK(std::isnan(test::relative_diff(kNaN, 0.0)));
  CHECK(test::relative_diff(0.0, 0.0) == 0.0);
  CHECK(test::relative_diff(1.0, 2.0) == doctest::Approx(0.5));
  CHECK_FALSE(test::relative_diff(std::numeric_limits<double>::infinity(), 1.0) <= 1e-9);
}

TEST_CASE("the optimizer harness fails on a NaN parameter") {
  test::ParityModel model;
  const nlohmann::json expected = parameters_as_json(model);
  CHECK(test::max_abs_diff(model, expected) == 0.0);
  {
    at::NoGradGuard no_grad;
    // The last parameter: a NaN after a finite difference is what std::max dropped.
    model.named_parameters().values().back().view(-1)[0] = kNaN;
  }
  const double diff = test::max_abs_diff(model, expected);
  CHECK(std::isnan(diff));
  CHECK_FALSE(diff <= test::kSameKernelsTolerance);

  double abs_diff = 0.0, rel_diff = 0.0;
  test::accumulate(at::ones({3}), at::ones({3}), abs_diff, rel_diff);
  CHECK(abs_diff == 0.0);
  test::accumulate(at::tensor({1.0, kNaN, 1.0}), at::ones({3}), abs_diff, rel_diff);
  CHECK(std::isnan(abs_diff));
  CHECK(std::isnan(rel_diff));
  test::accumulate(at::ones({3}), at::ones({3}), abs_diff, rel_diff);  // a later match does not hide it
  CHECK(std::isnan(abs_diff));
}

TEST_CASE("the scheduler harness fails on a NaN learning rate") {
  test::Schedule timm_schedule{.num_epochs = 2, .lrs = {{0.1, 0.01}, {0.05, 0.005}, {0.0, 0.0}}};
  test::Schedule ours = timm_schedule;
  CHECK(test::compare_schedules(ours, timm_schedule, 1e-9).worst == 0.0);
  CHECK(test::compare_schedules(ours, timm_schedule, 1e-9).beyond_tolerance.empty());

  ours.lrs[2][1] = kNaN;  // after finite entries, and where timm's is 0
  const test::ScheduleDiff d = test::compare_schedules(ours, timm_schedule, 1e-9);
  CHECK(d.same_shape);
  CHECK(std::isnan(d.worst));
  REQUIRE(d.beyond_tolerance.size() == 1);
  CHECK(d.beyond_tolerance[0].t == 2);
  CHECK(d.beyond_tolerance[0].group == 1);

  ours = timm_schedule;
  ours.lrs.pop_back();
  CHECK_FALSE(test::compare_schedules(ours, timm_schedule, 1e-9).same_shape);
}

TEST_CASE("the model harness fails on NaN logits") {
  const at::Tensor timm_logits = at::zeros({2, 5});
  at::Tensor ours = timm_logits.clone();
  CHECK(test::all_close(ours, timm_logits, test::Tolerance{}));
  ours[1][4] = kNaN;
  CHECK_FALSE(test::all_close(ours, timm_logits, test::Tolerance{}));
  CHECK(std::isnan(test::max_abs_diff(ours, timm_logits)));
  CHECK_FALSE(test::all_close(at::zeros({5, 2}), timm_logits, test::Tolerance{}));  // no broadcasting
}

}  // namespace test_parity_harness
