// ReXNet plugin against timm (tests/oracle/rexnet_oracle.py) through the
// shared harness (tests/support/model_parity.hpp), both ways: timm's weights
// load here and give timm's logits, eval forward_features / forward_head /
// pre-logits outputs, feature_info and forward_intermediates, bfloat16
// logits, gradients and BN statistics; our weights load in timm and give our
// logits. Tolerance for every float comparison: |ours - timm| <= 1e-4 + 1e-4 * |timm|.
#include <cmath>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <nlohmann/json.hpp>

#include "model_parity.hpp"
#include "test_support.hpp"
#include "timm/base/error.hpp"
#include "timm/models/features.hpp"
#include "timm/models/model.hpp"
#include "timm/plugin/registry.hpp"

// Last: c10/util/Logging.h defines a CHECK macro that doctest must override.
#include <doctest/doctest.h>

namespace test_rexnet {

namespace {

using timm::test::make_model;
using timm::test::ParityCase;

constexpr int64_t kNumClasses = timm::test::kParityNumClasses;
const std::string kOracle = "rexnet_oracle.py";

// The smallest of each kind (plain channels; rounded to 8 with one input
// channel at a non-square size; output_stride 16: dilated depthwise convs).
const std::vector<ParityCase> kCases = {
    {"rexnet_100", "rexnet_100", 3, 64, 2},
    {"rexnetr_100_c1", "rexnetr_100", 1, 64, 2, nlohmann::json::object(), 48},
    {"rexnet_130_os16", "rexnet_130", 3, 64, 2, nlohmann::json{{"output_stride", 16}}},
};

// Every name timm 1.0.31's rexnet.py registers, in timm's order.
const std::vector<std::string> kNames = {"rexnet_100",  "rexnet_130",  "rexnet_150",  "rexnet_200",  "rexnet_300",
                                         "rexnetr_100", "rexnetr_130", "rexnetr_150", "rexnetr_200", "rexnetr_300"};

// The drop_prob of each module of `features` (0 where it has none: the final conv).
std::vector<double> block_drop_path_rates(torch::nn::Module& model) {
  std::vector<double> rates;
  for (const auto& block : model.named_children()["features"]->children()) {
    rates.push_back(timm::test::drop_prob(*block, "drop_path"));
  }
  return rates;
}

const timm::test::ParityOptions kParity = {
    .tol = {1e-4, 1e-4},
    .block_rates = block_drop_path_rates,
    .after_buffers = {"stem.bn.running_mean", "stem.bn.running_var", "features.3.se.bn.running_mean",
                      "features.3.se.bn.running_var"},
};

}  // namespace

TEST_CASE("every registered rexnet has timm's state_dict keys, shapes, parameter count, pretrained_cfg and features") {
  // Also dtypes, no_weight_decay, group_matcher, drop-path rates and feature_info.
  const auto info = timm::test::check_registered(kOracle, kNames, {"rexnet*"}, kParity);
  CHECK(info.at("list").at("rexnet*").get<std::vector<std::string>>() == kNames);
  CHECK(timm::Registry::global().list(timm::PluginKind::kModel, "rexnet*") == kNames);
}

TEST_CASE("rexnet matches timm both ways: rexnet_100, rexnetr_100 (1 channel, 64x48), rexnet_130 at output_stride 16") {
  timm::test::run_parity(kOracle, kCases, kParity);
}

TEST_CASE("rexnet forward_head without a classifier is the pre-logits features") {
  timm::test::check_head_split("rexnet_100", 64);
  timm::test::check_head_split("rexnetr_100", 64, nlohmann::json{{"global_pool", "catavgmax"}});
}

TEST_CASE("rexnet init follows timm's efficientnet_init_weights: convs normal(0, sqrt(2 / fan_out)), BN 1 / 0") {
  timm::test::check_init_stats(kOracle, {"rexnet_100", "rexnetr_100"});
  at::manual_seed(0);
  const auto params = make_model("rexnet_100")->named_parameters();
  // features.1.conv_exp: 96 x 16 x 1 x 1, fan_out 96.
  CHECK(params["features.1.conv_exp.conv.weight"].std().item<double>() ==
        doctest::Approx(std::sqrt(2.0 / 96.0)).epsilon(0.05));
  CHECK(params["features.3.se.fc1.bias"].abs().max().item<double>() == 0.0);
  CHECK(params["features.3.se.bn.weight"].min().item<double>() == 1.0);
  CHECK(params["head.fc.bias"].abs().max().item<double>() == 0.0);
  const double range = 1.0 / std::sqrt(static_cast<double>(kNumClasses));
  CHECK(params["head.fc.weight"].abs().max().item<double>() <= range);
}

TEST_CASE("rexnet head options, group_matcher, forward_intermediates' levels and refusals") {
  c10::NoGradGuard no_grad;
  const at::Tensor x = at::randn({2, 3, 64, 64});
  timm::ModelPtr features = make_model("rexnet_100", 3, 0);
  features->eval();
  CHECK((features->forward(x).sizes() == at::IntArrayRef{2, 1280}));
  const timm::Intermediates inter = features->forward_intermediates(x);
  REQUIRE(inter.intermediates.size() == 5);
  CHECK((inter.intermediates[0].sizes() == at::IntArrayRef{2, 16, 32, 32}));
  CHECK((inter.intermediates[4].sizes() == at::IntArrayRef{2, 185, 2, 2}));
  CHECK(at::equal(inter.final, features->forward_features(x)));
  // Stopping at level 3 (features.10): the final features are that block's output.
  const timm::Intermediates early = features->forward_intermediates(
      x, timm::IntermediatesOptions().indices(std::vector<int64_t>{3}).stop_early(true));
  REQUIRE(early.intermediates.size() == 1);
  CHECK(at::equal(early.final, early.intermediates[0]));
  // Stopping at the last level still runs the final conv, as timm's.
  const timm::Intermediates last = features->forward_intermediates(
      x, timm::IntermediatesOptions().indices(std::vector<int64_t>{4}).stop_early(true));
  CHECK((last.final.sizes() == at::IntArrayRef{2, 1280, 2, 2}));
  CHECK(features->feature_info()[1] == timm::FeatureInfo{38, 4, "features.2"});
  CHECK(features->feature_info()[4] == timm::FeatureInfo{185, 32, "features.15"});
  CHECK_THROWS_AS(features->forward_intermediates(x, timm::IntermediatesOptions().output_fmt("NLC")), timm::UsageError);
  CHECK_THROWS_AS(features->forward_intermediates(x, timm::IntermediatesOptions().indices(int64_t{6})),
                  timm::UsageError);

  timm::ModelArgs args;
  args.num_classes = kNumClasses;
  args.global_pool = "catavgmax";
  timm::ModelPtr cat = timm::create_model("rexnet_100", args);
  CHECK((cat->named_parameters()["head.fc.weight"].sizes() == at::IntArrayRef{kNumClasses, 2560}));
  const auto matcher = cat->group_matcher(false);
  REQUIRE(matcher.size() == 2);
  CHECK(matcher[0].first == "stem");
  CHECK(matcher[1].second[0].pattern == R"(^features\.(\d+))");

  // output_stride 8: levels 2 to 4 at stride 8.
  args.global_pool.reset();
  args.kwargs["output_stride"] = "8";
  timm::ModelPtr os8 = timm::create_model("rexnet_100", args);
  CHECK(os8->feature_info()[4] == timm::FeatureInfo{185, 8, "features.15"});
  os8->eval();
  CHECK((os8->forward_features(x).sizes() == at::IntArrayRef{2, 1280, 8, 8}));

  args.kwargs["output_stride"] = "4";
  CHECK_THROWS_AS(timm::create_model("rexnet_100", args), timm::UsageError);
  args.kwargs.clear();
  args.kwargs["depth_mult"] = "2";
  CHECK_THROWS_AS(timm::create_model("rexnet_100", args), timm::UsageError);
  args.kwargs.clear();
  args.drop_path_rate = 1.5;
  CHECK_THROWS_AS(timm::create_model("rexnet_100", args), timm::UsageError);
}

TEST_CASE("rexnet --grad-checkpointing: each module of features checkpointed, the plain step's gradients") {
  timm::test::check_grad_checkpointing("rexnet_100", 32, 48);
}

}  // namespace test_rexnet
