// HRNet plugin against timm (tests/oracle/hrnet_oracle.py) through the shared
// harness (tests/support/model_parity.hpp), both ways: timm's weights load
// here and give timm's logits, eval forward_features / forward_head /
// pre-logits outputs, forward_intermediates, bfloat16 logits, gradients and
// BN statistics; our weights load in timm and give our logits. Tolerance for
// every float comparison: |ours - timm| <= 1e-4 + 1e-4 * |timm|. The oracle
// recalibrates the perturbed BN running statistics (see its docstring) so the
// eval forward stays well conditioned through the repeated fusions.
//
// timm's HRNet takes no drop_path_rate (a TypeError) and refuses grad
// checkpointing (an assert); ours refuses both: the harness runs with
// takes_drop_path false (no rates to compare).
//
// Cases: hrnet_w18_small (the smallest: one module per stage, a one-block
// stage1 of width 32, whose transition1 changes the width) at 64 px;
// hrnet_w18_small_v2 (several modules per stage) with one input channel at
// 96x64, stem_width 32, head_conv_bias false and avgmax pooling;
// hrnet_w18_ssld (the hrnet_wN layout: four blocks per branch, 4 and 3
// modules; head convs without bias) at 64 px. One thread, as the oracle.
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
#include "timm/models/features.hpp"
#include "timm/models/model.hpp"
#include "timm/plugin/registry.hpp"

// Last: c10/util/Logging.h defines a CHECK macro that doctest must override.
#include <doctest/doctest.h>

namespace test_hrnet {

namespace {

using timm::test::make_model;
using timm::test::ParityCase;
using timm::test::ParityOptions;

constexpr int64_t kNumClasses = timm::test::kParityNumClasses;
constexpr const char* kOracle = "hrnet_oracle.py";

// Every name registered here: all of timm 1.0.31's hrnet.py, in list_models order.
const std::vector<std::string> kNames = {"hrnet_w18", "hrnet_w18_small", "hrnet_w18_small_v2", "hrnet_w18_ssld",
                                         "hrnet_w30", "hrnet_w32",       "hrnet_w40",          "hrnet_w44",
                                         "hrnet_w48", "hrnet_w48_ssld",  "hrnet_w64"};
const std::vector<std::string> kSmallNames = {"hrnet_w18",      "hrnet_w18_small", "hrnet_w18_small_v2",
                                              "hrnet_w18_ssld", "hrnet_w30",       "hrnet_w32"};
const std::vector<std::string> kMidNames = {"hrnet_w40", "hrnet_w44", "hrnet_w48"};
const std::vector<std::string> kLargeNames = {"hrnet_w48_ssld", "hrnet_w64"};

const std::vector<ParityCase> kSmallCases = {
    {"hrnet_w18_small", "hrnet_w18_small", 3, 64, 2},
};
const std::vector<ParityCase> kSmallV2Cases = {
    {"hrnet_w18_small_v2_c1_96x64_kwargs", "hrnet_w18_small_v2", 1, 96, 2,
     nlohmann::json{{"stem_width", 32}, {"head_conv_bias", false}, {"global_pool", "avgmax"}}, 64},
};
const std::vector<ParityCase> kSsldCases = {
    {"hrnet_w18_ssld", "hrnet_w18_ssld", 3, 64, 2},
};

// timm's HRNet takes no drop_path_rate and has no drop path: no rates.
std::vector<double> no_block_rates(torch::nn::Module&) { return {}; }

ParityOptions options(std::vector<std::string> after_buffers) {
  return {
      .tol = {1e-4, 1e-4},
      .block_rates = no_block_rates,
      .after_buffers = std::move(after_buffers),
      .min_grad_keys = 100,
      .takes_drop_path = false,
  };
}

const ParityOptions kSmallOptions = options(
    {"bn1.running_mean", "bn1.num_batches_tracked", "stage4.0.fuse_layers.3.0.2.1.running_var",
     "transition3.3.0.1.running_mean", "incre_modules.3.0.downsample.1.running_var", "final_layer.1.running_mean"});
const ParityOptions kSmallV2Options =
    options({"bn1.running_mean", "layer1.1.bn3.running_var", "stage3.2.fuse_layers.2.0.1.1.running_mean",
             "stage4.1.branches.3.1.bn2.running_var", "downsamp_modules.2.1.running_mean"});
const ParityOptions kSsldOptions = options({"transition1.0.1.running_mean", "stage4.2.fuse_layers.0.3.1.running_mean",
                                            "incre_modules.0.0.bn3.running_var", "final_layer.1.running_var"});

}  // namespace

TEST_CASE(
    "registered hrnet_w18* .. w32 have timm's state_dict keys, shapes, parameter count, pretrained_cfg and features") {
  // Also dtypes, no_weight_decay, group_matcher and feature_info.
  const auto info = timm::test::check_registered(kOracle, kSmallNames, {"hrnet*"}, kSmallOptions);
  CHECK(info.at("list").at("hrnet*").get<std::vector<std::string>>() == kNames);
  CHECK(timm::Registry::global().list(timm::PluginKind::kModel, "hrnet*") == kNames);
}

TEST_CASE("registered hrnet_w40, w44 and w48 have timm's state_dict keys, shapes, pretrained_cfg and features") {
  timm::test::check_registered(kOracle, kMidNames, {}, kSmallOptions);
}

TEST_CASE("registered hrnet_w48_ssld and hrnet_w64 have timm's state_dict keys, shapes, pretrained_cfg and features") {
  timm::test::check_registered(kOracle, kLargeNames, {}, kSmallOptions);
}

TEST_CASE("hrnet_w18_small matches timm both ways at 64 px") {
  timm::test::run_parity(kOracle, kSmallCases, kSmallOptions);
}

TEST_CASE("hrnet_w18_small_v2 matches timm both ways: one channel at 96x64, stem_width, no head conv bias, avgmax") {
  timm::test::run_parity(kOracle, kSmallV2Cases, kSmallV2Options);
}

TEST_CASE("hrnet_w18_ssld matches timm both ways at 64 px (four-block branches, 4 and 3 modules, no head conv bias)") {
  timm::test::run_parity(kOracle, kSsldCases, kSsldOptions);
}

TEST_CASE("hrnet forward_head without a classifier is the pre-logits features") {
  timm::test::check_head_split("hrnet_w18_small", 64);
  timm::test::check_head_split("hrnet_w18_small_v2", 64, nlohmann::json{{"global_pool", "catavgmax"}});
}

TEST_CASE("hrnet init follows timm: convs kaiming normal (fan_out, relu), BN 1 / 0, Linear's default") {
  timm::test::check_init_stats(kOracle, {"hrnet_w18_small", "hrnet_w18_ssld"});
  at::manual_seed(0);
  const auto params = make_model("hrnet_w18_small")->named_parameters();
  const at::Tensor conv1 = params["conv1.weight"];
  CHECK(conv1.std().item<double>() == doctest::Approx(std::sqrt(2.0 / (9.0 * 64.0))).epsilon(0.05));
  const at::Tensor final_conv = params["final_layer.0.weight"];
  CHECK(final_conv.std().item<double>() == doctest::Approx(std::sqrt(2.0 / 2048.0)).epsilon(0.05));
  CHECK(params["stage4.0.fuse_layers.0.3.1.weight"].min().item<double>() == 1.0);
  CHECK(params["stage4.0.fuse_layers.0.3.1.bias"].abs().max().item<double>() == 0.0);
}

TEST_CASE("hrnet head options, keywords, group_matcher, forward_intermediates' levels and refusals") {
  c10::NoGradGuard no_grad;
  const at::Tensor x = at::randn({2, 3, 64, 64});
  timm::ModelPtr features = make_model("hrnet_w18_small", 3, 0);
  features->eval();
  // No classifier: final_layer's 2048 channels, pooled.
  CHECK((features->forward(x).sizes() == at::IntArrayRef{2, 2048}));
  // Five levels: the stem (stride 2), then the incre modules' outputs (strides 4 to 32).
  const timm::Intermediates inter = features->forward_intermediates(x);
  REQUIRE(inter.intermediates.size() == 5);
  CHECK((inter.intermediates[0].sizes() == at::IntArrayRef{2, 64, 32, 32}));
  CHECK((inter.intermediates[1].sizes() == at::IntArrayRef{2, 128, 16, 16}));
  CHECK((inter.intermediates[4].sizes() == at::IntArrayRef{2, 1024, 2, 2}));
  CHECK((inter.final.sizes() == at::IntArrayRef{2, 2048, 2, 2}));
  CHECK(at::equal(inter.final, features->forward_features(x)));
  // Stopping at the stem: the stem is the final features too.
  const timm::Intermediates stem_only = features->forward_intermediates(
      x, timm::IntermediatesOptions().indices(std::vector<int64_t>{0}).stop_early(true));
  REQUIRE(stem_only.intermediates.size() == 1);
  CHECK(at::equal(stem_only.final, stem_only.intermediates[0]));
  // Stopping before the last branch: timm's final features are the list of
  // branch outputs, which Intermediates cannot hold: none.
  const timm::Intermediates early = features->forward_intermediates(
      x, timm::IntermediatesOptions().indices(std::vector<int64_t>{2}).stop_early(true));
  REQUIRE(early.intermediates.size() == 1);
  CHECK((early.intermediates[0].sizes() == at::IntArrayRef{2, 256, 8, 8}));
  CHECK(!early.final.defined());
  CHECK(features->feature_info()[0] == timm::FeatureInfo{64, 2, "stem"});
  CHECK(features->feature_info()[4] == timm::FeatureInfo{1024, 32, "stage4"});
  CHECK_THROWS_AS(features->forward_intermediates(x, timm::IntermediatesOptions().output_fmt("NLC")), timm::UsageError);
  CHECK_THROWS_AS(features->forward_intermediates(x, timm::IntermediatesOptions().indices(int64_t{6})),
                  timm::UsageError);

  const auto matcher = features->group_matcher(false);
  REQUIRE(matcher.size() == 2);
  CHECK(matcher[0].first == "stem");
  CHECK(matcher[1].first == "block_types");
  REQUIRE(matcher[1].second.size() == 3);
  CHECK(matcher[1].second[2].pattern == R"(^transition(\d+))");
  CHECK(matcher[1].second[2].suffix == std::vector<double>{99999});

  // timm asserts grad checkpointing is not enabled.
  CHECK_THROWS_AS(features->set_grad_checkpointing(true), timm::UsageError);
  features->set_grad_checkpointing(false);

  timm::ModelArgs args;
  args.num_classes = kNumClasses;
  timm::test::check_head_dropout_gives_bias("hrnet_w18_small", args, "classifier.bias", x);

  // Keywords: stem_width sets conv1's width, head_conv_bias the head convs' biases.
  args.kwargs = {
      {"stem_width", "32"}, {"head_conv_bias", "false"}, {"output_stride", "32"}, {"head", "classification"}};
  const timm::ModelPtr narrow = timm::create_model("hrnet_w18_small", args);
  const auto narrow_params = narrow->named_parameters();
  CHECK((narrow_params["conv1.weight"].sizes() == at::IntArrayRef{32, 3, 3, 3}));
  CHECK((narrow_params["conv2.weight"].sizes() == at::IntArrayRef{64, 32, 3, 3}));
  CHECK(!narrow_params.contains("final_layer.0.bias"));
  CHECK(!narrow_params.contains("downsamp_modules.0.0.bias"));
  narrow->eval();
  CHECK((narrow->forward(x).sizes() == at::IntArrayRef{2, kNumClasses}));
  // The _ssld models default to head convs without bias; the keyword restores them.
  args.kwargs.clear();
  CHECK(!timm::create_model("hrnet_w18_ssld", args)->named_parameters().contains("final_layer.0.bias"));
  args.kwargs = {{"head_conv_bias", "true"}};
  CHECK(timm::create_model("hrnet_w18_ssld", args)->named_parameters().contains("final_layer.0.bias"));

  // As timm: no drop path (a TypeError there), output_stride 32 only (an
  // assert), no unknown keywords; plus the keywords' values and a head that
  // returns a single tensor.
  args.kwargs.clear();
  args.drop_path_rate = 0.1;
  CHECK_THROWS_WITH_AS(timm::create_model("hrnet_w18_small", args), doctest::Contains("drop_path_rate"),
                       timm::UsageError);
  args.drop_path_rate.reset();
  for (const auto& [key, value] : std::map<std::string, std::string>{{"output_stride", "16"},
                                                                     {"head", "incre"},
                                                                     {"stem_width", "0"},
                                                                     {"head_conv_bias", "maybe"},
                                                                     {"stage1", "{}"}}) {
    CAPTURE(key);
    args.kwargs = {{key, value}};
    CHECK_THROWS_AS(timm::create_model("hrnet_w18_small", args), timm::UsageError);
  }
  args.kwargs.clear();
  args.global_pool = "none";
  CHECK_THROWS_AS(timm::create_model("hrnet_w18_small", args), timm::UsageError);
}

}  // namespace test_hrnet
