// timm's param_groups_weight_decay against Python timm on the same small
// model: group order, membership and weight decay.
#include <doctest/doctest.h>

#include <algorithm>
#include <iterator>

#include <nlohmann/json.hpp>

#include "optim_parity.hpp"
#include "test_support.hpp"
#include "timm/optim/optimizer.hpp"

namespace test_param_groups {

namespace {

constexpr double kWeightDecays[] = {1e-4, 0.05, 0.0};

// timm's groups for every weight decay of kWeightDecays, in one Python start.
const nlohmann::json& timm_groups(double weight_decay) {
  static const nlohmann::json all = [] {
    std::vector<std::string> argv{"groups"};
    for (double wd : kWeightDecays) argv.push_back(timm::python_float_repr(wd));
    return nlohmann::json::parse(timm::test::run_oracle("optim_oracle.py", argv));
  }();
  const auto* it = std::find(std::begin(kWeightDecays), std::end(kWeightDecays), weight_decay);
  REQUIRE(it != std::end(kWeightDecays));
  return all.at(static_cast<std::size_t>(it - std::begin(kWeightDecays)));
}

void check_groups(double weight_decay) {
  timm::test::ParityModel model;
  const auto groups = timm::param_groups_weight_decay(model, weight_decay, model.no_weight_decay());
  const nlohmann::json& want = timm_groups(weight_decay);
  REQUIRE(groups.size() == want.size());
  for (std::size_t i = 0; i < groups.size(); ++i) {
    CAPTURE(i);
    CHECK(groups[i].weight_decay == want[i].at("weight_decay").get<double>());
    CHECK(groups[i].names == want[i].at("names").get<std::vector<std::string>>());
    CHECK(groups[i].params.size() == groups[i].names.size());
    CHECK(groups[i].lr_scale == 1.0);
  }
}

}  // namespace

TEST_CASE("param groups match timm") {
  check_groups(1e-4);
  check_groups(0.05);
}

TEST_CASE("weight decay 0 puts everything in one no-decay group") { check_groups(0.0); }

TEST_CASE("only non-empty groups are emitted") {
  torch::nn::Module weights_only;
  weights_only.register_parameter("w", at::zeros({2, 2}));
  auto groups = timm::param_groups_weight_decay(weights_only, 0.1, {});
  REQUIRE(groups.size() == 1);
  CHECK(groups[0].weight_decay == 0.1);
  groups = timm::param_groups_weight_decay(weights_only, 0.1, {"*"});
  REQUIRE(groups.size() == 1);
  CHECK(groups[0].weight_decay == 0.0);
  torch::nn::Module frozen;
  frozen.register_parameter("w", at::zeros({2, 2}), /*requires_grad=*/false);
  CHECK(timm::param_groups_weight_decay(frozen, 0.1, {}).empty());
}

TEST_CASE("Python float repr") {
  CHECK(timm::python_float_repr(0.1) == "0.1");
  CHECK(timm::python_float_repr(2e-5) == "2e-05");
  CHECK(timm::python_float_repr(1e-4) == "0.0001");
  CHECK(timm::python_float_repr(1.0) == "1.0");
  CHECK(timm::python_float_repr(0.0) == "0.0");
  CHECK(timm::python_float_repr(-2.5e-7) == "-2.5e-07");
  CHECK(timm::python_float_repr(1e16) == "1e+16");
  CHECK(timm::python_float_repr(123456.0) == "123456.0");
  CHECK(timm::python_float_repr(0.016) == "0.016");
}

}  // namespace test_param_groups
