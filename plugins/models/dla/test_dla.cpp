// DLA plugin against timm (tests/oracle/dla_oracle.py) through the shared
// harness (tests/support/model_parity.hpp), both ways: timm's weights load
// here and give timm's logits, eval forward_features / forward_head /
// pre-logits outputs, forward_intermediates, bfloat16 logits, gradients and
// BN statistics; our weights load in timm and give our logits. Tolerance for
// every float comparison: |ours - timm| <= 1e-4 + 1e-4 * |timm|.
//
// timm's DLA takes no drop_path_rate (a TypeError) and refuses grad
// checkpointing (an assert); ours refuses both: the harness runs with
// takes_drop_path false (no rates to compare).
//
// Cases: dla34 (DlaBasic) at 64 px; dla46_c (DlaBottleneck) at 64 px and
// dla46x_c (grouped bottlenecks) with one input channel at 64x96; dla60x_c
// (depth-3 trees in level4) with shortcut_root and avgmax pooling at 64 px;
// dla60_res2next (DlaBottle2neck, grouped) at 64 px. One thread, as the oracle.
#include <cmath>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <nlohmann/json.hpp>

#include "model_parity.hpp"
#include "test_support.hpp"
#include "timm/base/error.hpp"
#include "timm/models/model.hpp"
#include "timm/plugin/registry.hpp"

// Last: c10/util/Logging.h defines a CHECK macro that doctest must override.
#include <doctest/doctest.h>

namespace test_dla {

namespace {

using timm::test::make_model;
using timm::test::ParityCase;
using timm::test::ParityOptions;

constexpr int64_t kNumClasses = timm::test::kParityNumClasses;
constexpr const char* kOracle = "dla_oracle.py";

// Every name registered here: all of timm 1.0.31's dla.py, in list_models order.
const std::vector<std::string> kNames = {"dla34",  "dla46_c",  "dla46x_c", "dla60",   "dla60_res2net", "dla60_res2next",
                                         "dla60x", "dla60x_c", "dla102",   "dla102x", "dla102x2",      "dla169"};

const std::vector<ParityCase> kBasicCases = {
    {"dla34", "dla34", 3, 64, 2},
};
const std::vector<ParityCase> kBottleneckCases = {
    {"dla46_c", "dla46_c", 3, 64, 2},
    {"dla46x_c_c1_64x96", "dla46x_c", 1, 96, 2, nlohmann::json::object(), 64},
};
const std::vector<ParityCase> kDeepTreeCases = {
    {"dla60x_c_shortcut_root_avgmax", "dla60x_c", 3, 64, 2,
     nlohmann::json{{"shortcut_root", true}, {"global_pool", "avgmax"}}},
};
const std::vector<ParityCase> kRes2NetCases = {
    {"dla60_res2next", "dla60_res2next", 3, 64, 2},
};

// timm's DLA takes no drop_path_rate and has no drop path: no rates.
std::vector<double> no_block_rates(torch::nn::Module&) { return {}; }

ParityOptions options(std::vector<std::string> after_buffers) {
  return {
      .tol = {1e-4, 1e-4},
      .block_rates = no_block_rates,
      .after_buffers = std::move(after_buffers),
      .min_grad_keys = 20,
      .takes_drop_path = false,
  };
}

const ParityOptions kOptions =
    options({"base_layer.1.running_mean", "base_layer.1.running_var", "base_layer.1.num_batches_tracked",
             "level1.1.running_var", "level2.root.bn.running_mean", "level5.tree1.bn1.running_var"});
// level3..5 of the bottleneck models have depth-2 trees: their blocks sit a level lower.
const ParityOptions kBottleneckOptions =
    options({"base_layer.1.running_mean", "level2.tree1.bn2.running_mean", "level2.project.1.running_var",
             "level3.tree2.root.bn.running_mean", "level5.tree2.bn3.running_var"});
const ParityOptions kDeepTreeOptions =
    options({"level4.tree1.tree1.tree1.bn1.running_mean", "level4.tree2.tree2.root.bn.running_var",
             "level5.root.bn.running_mean"});
const ParityOptions kRes2NetOptions = options({"level2.tree1.bns.0.running_mean", "level2.tree1.bns.2.running_var",
                                               "level2.tree2.bns.1.running_mean", "level5.tree1.bn3.running_var"});

}  // namespace

TEST_CASE("every registered dla has timm's state_dict keys, shapes, parameter count, pretrained_cfg and features") {
  // Also dtypes, no_weight_decay, group_matcher and feature_info.
  const auto info = timm::test::check_registered(kOracle, kNames, {"dla*"}, kOptions);
  CHECK(info.at("list").at("dla*").get<std::vector<std::string>>() == kNames);
  CHECK(timm::Registry::global().list(timm::PluginKind::kModel, "dla*") == kNames);
}

TEST_CASE("dla34 matches timm both ways at 64 px (DlaBasic blocks)") {
  timm::test::run_parity(kOracle, kBasicCases, kOptions);
}

TEST_CASE("dla46_c and dla46x_c match timm both ways: bottlenecks; grouped, one channel at 64x96") {
  timm::test::run_parity(kOracle, kBottleneckCases, kBottleneckOptions);
}

TEST_CASE("dla60x_c matches timm both ways at 64 px with depth-3 trees, root shortcuts and avgmax pooling") {
  timm::test::run_parity(kOracle, kDeepTreeCases, kDeepTreeOptions);
}

TEST_CASE("dla60_res2next matches timm both ways at 64 px (DlaBottle2neck, grouped)") {
  timm::test::run_parity(kOracle, kRes2NetCases, kRes2NetOptions);
}

TEST_CASE("dla forward_head without a classifier is the pre-logits features") {
  timm::test::check_head_split("dla34", 64);
  timm::test::check_head_split("dla60_res2next", 64);
}

TEST_CASE("dla init follows timm: convs (fc too) N(0, sqrt(2 / (k * k * out))), BN 1 / 0") {
  timm::test::check_init_stats(kOracle, {"dla34", "dla46x_c", "dla60_res2net"});
  at::manual_seed(0);
  const auto params = make_model("dla34")->named_parameters();
  const at::Tensor base = params["base_layer.0.weight"];
  CHECK(base.std().item<double>() == doctest::Approx(std::sqrt(2.0 / (49.0 * 16.0))).epsilon(0.05));
  const at::Tensor conv2 = params["level5.tree2.conv2.weight"];
  CHECK(conv2.std().item<double>() == doctest::Approx(std::sqrt(2.0 / (9.0 * 512.0))).epsilon(0.05));
  const at::Tensor fc = params["fc.weight"];
  CHECK(fc.std().item<double>() == doctest::Approx(std::sqrt(2.0 / kNumClasses)).epsilon(0.05));
  CHECK(params["level5.root.bn.weight"].min().item<double>() == 1.0);
  CHECK(params["level5.root.bn.bias"].abs().max().item<double>() == 0.0);
}

TEST_CASE("dla head options, keywords, group_matcher, forward_intermediates' levels and refusals") {
  c10::NoGradGuard no_grad;
  const at::Tensor x = at::randn({2, 3, 64, 64});
  timm::ModelPtr features = make_model("dla34", 3, 0);
  features->eval();
  // No classifier: level5's output, pooled.
  CHECK((features->forward(x).sizes() == at::IntArrayRef{2, 512}));
  // Six levels: level0 (stride 1) to level5 (stride 32).
  const timm::Intermediates inter = features->forward_intermediates(x);
  REQUIRE(inter.intermediates.size() == 6);
  CHECK((inter.intermediates[0].sizes() == at::IntArrayRef{2, 16, 64, 64}));
  CHECK((inter.intermediates[2].sizes() == at::IntArrayRef{2, 64, 16, 16}));
  CHECK((inter.intermediates[5].sizes() == at::IntArrayRef{2, 512, 2, 2}));
  CHECK(at::equal(inter.intermediates[5], inter.final));
  CHECK(features->feature_info()[1] == timm::FeatureInfo{32, 2, "level1"});
  CHECK_THROWS_AS(features->forward_intermediates(x, timm::IntermediatesOptions().output_fmt("NLC")), timm::UsageError);

  const auto matcher = features->group_matcher(false);
  REQUIRE(matcher.size() == 2);
  CHECK(matcher[0].first == "stem");
  REQUIRE(matcher[1].second.size() == 3);
  CHECK(matcher[1].second[1].pattern == R"(^level(\d+)\.root)");
  CHECK(matcher[1].second[1].suffix == std::vector<double>{2});

  // timm asserts grad checkpointing is not enabled.
  CHECK_THROWS_AS(features->set_grad_checkpointing(true), timm::UsageError);
  features->set_grad_checkpointing(false);

  timm::ModelArgs args;
  args.num_classes = kNumClasses;
  timm::test::check_head_dropout_gives_bias("dla34", args, "fc.bias", x);

  // global_pool '': the 1x1 conv classifier over the unpooled map, not flattened.
  args.global_pool = "";
  const timm::ModelPtr unpooled = timm::create_model("dla34", args);
  unpooled->eval();
  CHECK((unpooled->forward(x).sizes() == at::IntArrayRef{2, kNumClasses, 2, 2}));
  CHECK((unpooled->forward_head(unpooled->forward_features(x), true).sizes() == at::IntArrayRef{2, 512, 2, 2}));
  args.global_pool.reset();

  // Keywords: cardinality 8 with base width 8 on dla46_c: 64 * 8 / 64 * 8 / 2 = 32 wide in level2.
  args.kwargs = {{"cardinality", "8"}, {"base_width", "8"}, {"shortcut_root", "true"}, {"output_stride", "32"}};
  const timm::ModelPtr grouped = timm::create_model("dla46_c", args);
  const auto grouped_params = grouped->named_parameters();
  CHECK((grouped_params["level2.tree1.conv2.weight"].sizes() == at::IntArrayRef{32, 4, 3, 3}));
  grouped->eval();
  CHECK((grouped->forward(x).sizes() == at::IntArrayRef{2, kNumClasses}));

  // As timm: no drop path (a TypeError there), output_stride 32 only (an
  // assert), widths the groups divide (a ValueError), no unknown keywords, a
  // known pool type.
  args.kwargs.clear();
  args.drop_path_rate = 0.1;
  CHECK_THROWS_WITH_AS(timm::create_model("dla34", args), doctest::Contains("drop_path_rate"), timm::UsageError);
  args.drop_path_rate.reset();
  for (const auto& [key, value] : std::map<std::string, std::string>{{"output_stride", "16"},
                                                                     {"cardinality", "0"},
                                                                     {"base_width", "0"},
                                                                     {"shortcut_root", "maybe"},
                                                                     {"block", "DlaBasic"}}) {
    CAPTURE(key);
    args.kwargs = {{key, value}};
    CHECK_THROWS_AS(timm::create_model("dla34", args), timm::UsageError);
  }
  args.kwargs = {{"base_width", "1"}};
  CHECK_THROWS_AS(timm::create_model("dla46x_c", args), timm::UsageError);
  args.kwargs.clear();
  args.global_pool = "none";
  CHECK_THROWS_AS(timm::create_model("dla34", args), timm::UsageError);
}

}  // namespace test_dla
