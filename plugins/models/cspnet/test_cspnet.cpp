// CSPNet plugin against timm (tests/oracle/cspnet_oracle.py) through the
// shared harness (tests/support/model_parity.hpp), both ways: timm's weights
// load here and give timm's logits, eval forward_features / forward_head /
// pre-logits outputs, forward_intermediates, bfloat16 logits, gradients and
// BN statistics; our weights load in timm and give our logits. Tolerance for
// every float comparison: |ours - timm| <= 1e-4 + 1e-4 * |timm|.
//
// One case per stem / stage / block / attention type, each in the smallest
// model that has it, at 64 px: cs3darknet_s (two-conv stem, CrossStage3,
// dark blocks, SiLU; also one channel at 96x64 with output_stride 16, the
// last stage dilated), cs3darknet_focus_s (6x6 / 2 stem, padding 2),
// cspresnet50d (deep stem + max pool, CrossStage with bottleneck blocks, a
// stride-1 first stage, linear expansion), cspresnext50 (7x7 stem, groups 32,
// avgmax pooling), darknet17 (stride-1 stem, DarkStage, LeakyReLU),
// sedarknet21 (SE in dark blocks), cspdarknet53 (CrossStage with dark
// blocks, down_growth), darknetaa53 (avg_down: 2x2 average pool + 1x1 conv),
// cs3sedarknet_xdw (CrossStage, bottleneck + SE, depthwise 3x3) and
// cs3se_edgenet_x (edge blocks with SE at rd_ratio 0.25). timm's CspNet
// refuses grad checkpointing (an assert), and so does ours. One thread, as
// the oracle.
#include <map>
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

namespace test_cspnet {

namespace {

using timm::test::make_model;
using timm::test::ParityCase;

constexpr int64_t kNumClasses = timm::test::kParityNumClasses;
constexpr const char* kOracle = "cspnet_oracle.py";

// Every name registered here: all of timm 1.0.31's cspnet.py, in list_models order.
const std::vector<std::string> kCs3Names = {
    "cs3darknet_focus_l", "cs3darknet_focus_m", "cs3darknet_focus_s", "cs3darknet_focus_x", "cs3darknet_l",
    "cs3darknet_m",       "cs3darknet_s",       "cs3darknet_x",       "cs3edgenet_x",       "cs3se_edgenet_x",
    "cs3sedarknet_l",     "cs3sedarknet_x",     "cs3sedarknet_xdw"};
const std::vector<std::string> kCspNames = {"cspdarknet53", "cspresnet50", "cspresnet50d", "cspresnet50w",
                                            "cspresnext50"};
const std::vector<std::string> kDarkNames = {"darknet17", "darknet21", "darknet53", "darknetaa53", "sedarknet21"};

const std::vector<ParityCase> kCs3SmallCases = {
    {"cs3darknet_s", "cs3darknet_s", 3, 64, 2},
    {"cs3darknet_s_c1_96x64_os16", "cs3darknet_s", 1, 96, 2, nlohmann::json{{"output_stride", 16}}, 64},
    {"cs3darknet_focus_s", "cs3darknet_focus_s", 3, 64, 2},
};
const std::vector<ParityCase> kCspResCases = {
    {"cspresnet50d", "cspresnet50d", 3, 64, 2},
    {"cspresnext50_avgmax", "cspresnext50", 3, 64, 2, nlohmann::json{{"global_pool", "avgmax"}}},
};
const std::vector<ParityCase> kDarkCases = {
    {"darknet17", "darknet17", 3, 64, 2},
    {"sedarknet21", "sedarknet21", 3, 64, 2},
};
const std::vector<ParityCase> kCspDarkCases = {{"cspdarknet53", "cspdarknet53", 3, 64, 2}};
const std::vector<ParityCase> kAvgDownCases = {{"darknetaa53", "darknetaa53", 3, 64, 2}};
const std::vector<ParityCase> kXdwCases = {{"cs3sedarknet_xdw", "cs3sedarknet_xdw", 3, 64, 2}};
const std::vector<ParityCase> kEdgeCases = {{"cs3se_edgenet_x", "cs3se_edgenet_x", 3, 64, 2}};

// The drop_prob of each block's drop_path (0 where it has none), in block order.
std::vector<double> block_drop_path_rates(torch::nn::Module& model) {
  std::vector<double> rates;
  for (const auto& stage : model.named_children()["stages"]->children()) {
    for (const auto& block : stage->named_children()["blocks"]->children()) {
      rates.push_back(timm::test::drop_prob(*block, "drop_path"));
    }
  }
  return rates;
}

// timm's rates come from a float32 linspace.
const timm::test::ParityOptions kParity = {
    .tol = {1e-4, 1e-4},
    .block_rates = block_drop_path_rates,
    .rates_epsilon = 1e-6,
    .after_buffers = {"stem.conv1.bn.running_mean", "stem.conv1.bn.running_var", "stem.conv1.bn.num_batches_tracked",
                      "stages.0.blocks.0.conv1.bn.running_mean", "stages.0.blocks.0.conv2.bn.running_var"},
    .min_grad_keys = 20,
};

}  // namespace

TEST_CASE("every registered cs3* model has timm's keys, shapes, parameter count, pretrained_cfg and features") {
  // Also dtypes, no_weight_decay, group_matcher, drop-path rates and feature_info.
  const auto info = timm::test::check_registered(kOracle, kCs3Names, {"cs3*"}, kParity);
  CHECK(info.at("list").at("cs3*").get<std::vector<std::string>>() == kCs3Names);
  CHECK(timm::Registry::global().list(timm::PluginKind::kModel, "cs3*") == kCs3Names);
}

TEST_CASE(
    "every registered csp* and darknet model has timm's keys, shapes, parameter count, pretrained_cfg and "
    "features") {
  const auto info =
      timm::test::check_registered(kOracle, kCspNames, {"cspdarknet*", "cspresne*", "*darknet*"}, kParity);
  timm::test::check_registered(kOracle, kDarkNames, {}, kParity);
  // timm's csp* also lists byobnet.py's cspnext_*, which are not this plugin's.
  auto timm_csp = info.at("list").at("cspdarknet*").get<std::vector<std::string>>();
  for (const auto& name : info.at("list").at("cspresne*")) timm_csp.push_back(name.get<std::string>());
  CHECK(timm_csp == kCspNames);
  CHECK(timm::Registry::global().list(timm::PluginKind::kModel, "csp*") == kCspNames);
  CHECK(timm::Registry::global().list(timm::PluginKind::kModel, "*darknet*") ==
        info.at("list").at("*darknet*").get<std::vector<std::string>>());
  CHECK(timm::Registry::global().list(timm::PluginKind::kModel, "darknet*") ==
        std::vector<std::string>{"darknet17", "darknet21", "darknet53", "darknetaa53"});
}

TEST_CASE("cs3darknet_s (also one channel at 96x64, output_stride 16) and cs3darknet_focus_s match timm both ways") {
  timm::test::run_parity(kOracle, kCs3SmallCases, kParity);
}

TEST_CASE("cspresnet50d (deep stem, CrossStage, bottleneck) and cspresnext50 (groups 32, avgmax) match timm") {
  timm::test::run_parity(kOracle, kCspResCases, kParity);
}

TEST_CASE("darknet17 (DarkStage, dark blocks) and sedarknet21 (SE) match timm both ways at 64 px") {
  timm::test::run_parity(kOracle, kDarkCases, kParity);
}

TEST_CASE("cspdarknet53 (CrossStage with dark blocks, down_growth) matches timm both ways at 64 px") {
  timm::test::run_parity(kOracle, kCspDarkCases, kParity);
}

TEST_CASE("darknetaa53 (avg_down: 2x2 average pool then 1x1 conv) matches timm both ways at 64 px") {
  timm::test::run_parity(kOracle, kAvgDownCases, kParity);
}

TEST_CASE("cs3sedarknet_xdw (CrossStage, bottleneck + SE, depthwise 3x3) matches timm both ways at 64 px") {
  timm::test::run_parity(kOracle, kXdwCases, kParity);
}

TEST_CASE("cs3se_edgenet_x (edge blocks, SE at rd_ratio 0.25) matches timm both ways at 64 px") {
  timm::test::run_parity(kOracle, kEdgeCases, kParity);
}

TEST_CASE("cspnet forward_head without a classifier is the pre-logits features") {
  timm::test::check_head_split("cs3darknet_s", 64);
  timm::test::check_head_split("darknet17", 64);
}

TEST_CASE("cspnet init follows timm: convs kaiming_normal fan_out, BN 1 / 0 (last BN of a block 0), fc N(0, 0.01)") {
  timm::test::check_init_stats(kOracle, {"cs3darknet_s", "cspresnet50d", "sedarknet21"});
  at::manual_seed(0);
  auto params = make_model("cs3darknet_s")->named_parameters();
  CHECK(params["stages.0.blocks.0.conv2.bn.weight"].abs().max().item<double>() == 0.0);
  CHECK(params["stages.0.blocks.0.conv1.bn.weight"].min().item<double>() == 1.0);
  timm::ModelArgs args;
  args.kwargs["zero_init_last"] = "false";
  auto kept = timm::create_model("cs3darknet_s", args)->named_parameters();
  CHECK(kept["stages.0.blocks.0.conv2.bn.weight"].min().item<double>() == 1.0);
  auto resnet = make_model("cspresnet50", 3, kNumClasses)->named_parameters();
  CHECK(resnet["stages.0.blocks.0.conv3.bn.weight"].abs().max().item<double>() == 0.0);
  CHECK(resnet["head.fc.bias"].abs().max().item<double>() == 0.0);
}

TEST_CASE("cspnet feature levels, forward_intermediates, group_matcher, keywords and refusals") {
  c10::NoGradGuard no_grad;
  const at::Tensor x = at::randn({2, 3, 64, 64});
  timm::ModelPtr features = make_model("darknet17", 3, 0);
  features->eval();
  CHECK((features->forward(x).sizes() == at::IntArrayRef{2, 1024}));
  // Six levels: the stride-1 stem conv, then the five stages.
  const timm::Intermediates inter = features->forward_intermediates(x);
  REQUIRE(inter.intermediates.size() == 6);
  CHECK((inter.intermediates[0].sizes() == at::IntArrayRef{2, 32, 64, 64}));
  CHECK((inter.intermediates[5].sizes() == at::IntArrayRef{2, 1024, 2, 2}));
  CHECK(at::equal(inter.final, features->forward_features(x)));
  CHECK(features->feature_info()[0] == timm::FeatureInfo{32, 1, "stem.conv1"});
  CHECK_THROWS_AS(features->forward_intermediates(x, timm::IntermediatesOptions().indices(std::vector<int64_t>{6})),
                  timm::UsageError);
  CHECK_THROWS_WITH_AS(features->forward_intermediates(x, timm::IntermediatesOptions().output_fmt("NLC")),
                       doctest::Contains("NLC"), timm::UsageError);
  // cspresnet50: the stem conv before the pool, then a stride-1 first stage at 4.
  const auto resnet_info = make_model("cspresnet50")->feature_info();
  REQUIRE(resnet_info.size() == 5);
  CHECK(resnet_info[0] == timm::FeatureInfo{64, 2, "stem.conv1"});
  CHECK(resnet_info[1] == timm::FeatureInfo{128, 4, "stages.0"});

  const auto matcher = features->group_matcher(false);
  REQUIRE(matcher.size() == 2);
  CHECK(matcher[0].first == "stem");
  REQUIRE(matcher[1].second.size() == 3);
  CHECK(matcher[1].second[1].pattern == R"(^stages\.(\d+)\..*transition)");
  CHECK(matcher[1].second[1].suffix == std::vector<double>{99999});
  CHECK(features->group_matcher(true)[1].second[0].pattern == R"(^stages\.(\d+))");

  // As timm's assert: no grad checkpointing; disabling is a no-op.
  CHECK_THROWS_AS(features->set_grad_checkpointing(true), timm::UsageError);
  features->set_grad_checkpointing(false);

  timm::ModelArgs args;
  args.num_classes = kNumClasses;
  timm::test::check_head_dropout_gives_bias("cs3darknet_s", args, "head.fc.bias", x);

  // output_stride 8: the last two stages dilated, 8x8 maps at the end.
  args.kwargs = {{"output_stride", "8"}, {"act_layer", "relu"}};
  const timm::ModelPtr dilated = timm::create_model("cs3darknet_s", args);
  CHECK(dilated->feature_info().back() == timm::FeatureInfo{512, 8, "stages.3"});
  dilated->eval();
  CHECK((dilated->forward_features(x).sizes() == at::IntArrayRef{2, 512, 8, 8}));

  // As timm: output_stride in (8, 16, 32), rates in [0, 1], a known pool type, no other keywords.
  for (const auto& [key, value] : std::map<std::string, std::string>{
           {"output_stride", "12"}, {"act_layer", "nope"}, {"zero_init_last", "maybe"}, {"stem_type", "deep"}}) {
    CAPTURE(key);
    args.kwargs = {{key, value}};
    CHECK_THROWS_AS(timm::create_model("cs3darknet_s", args), timm::UsageError);
  }
  args.kwargs = {{"output_stride", "x"}};
  CHECK_THROWS_AS(timm::create_model("cs3darknet_s", args), timm::UsageError);
  args.kwargs.clear();
  args.drop_path_rate = 1.5;
  CHECK_THROWS_AS(timm::create_model("cs3darknet_s", args), timm::UsageError);
  args.drop_path_rate.reset();
  args.global_pool = "none";
  CHECK_THROWS_AS(timm::create_model("cs3darknet_s", args), timm::UsageError);
}

}  // namespace test_cspnet
