// GhostNet plugin (GhostNet, GhostNetV2, GhostNetV3) against timm
// (tests/oracle/ghostnet_oracle.py) through the shared harness
// (tests/support/model_parity.hpp), both ways: timm's weights load here and
// give timm's logits, eval forward_features / forward_head / pre-logits
// outputs, feature_info and forward_intermediates, bfloat16 logits, gradients
// and BN statistics; our weights load in timm and give our logits. The
// GhostNetV3 case is also folded (reparameterize() on timm's weights against
// timm's reparameterize_model: the folded state_dict's keys in order and
// values, and its eval logits); GhostNet and GhostNetV2 have nothing to fold.
// timm's GhostNet takes no drop_path_rate, so the harness runs with
// takes_drop_path false. Tolerance for every float comparison: |ours - timm|
// <= 1e-4 + 1e-4 * |timm|.
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

namespace test_ghostnet {

namespace {

using timm::test::make_model;
using timm::test::ParityCase;

constexpr int64_t kNumClasses = timm::test::kParityNumClasses;
const std::string kOracle = "ghostnet_oracle.py";

// The smallest of each version; V2 (DFC attention) with one input channel at
// a non-square size. V3 on its own: its parity includes the folded model.
const std::vector<ParityCase> kCases = {
    {"ghostnet_050", "ghostnet_050", 3, 64, 2},
    {"ghostnetv2_100_c1", "ghostnetv2_100", 1, 64, 2, nlohmann::json::object(), 48},
};
const std::vector<ParityCase> kV3Cases = {{"ghostnetv3_050", "ghostnetv3_050", 3, 64, 2}};

// Every name timm 1.0.31's ghostnet.py registers, in timm's order.
const std::vector<std::string> kNames = {"ghostnet_050",   "ghostnet_100",   "ghostnet_130",   "ghostnetv2_100",
                                         "ghostnetv2_130", "ghostnetv2_160", "ghostnetv3_050", "ghostnetv3_100",
                                         "ghostnetv3_130", "ghostnetv3_160"};

std::vector<double> no_block_rates(torch::nn::Module& /*model*/) { return {}; }

const timm::test::ParityOptions kParity = {
    .tol = {1e-4, 1e-4},
    .block_rates = no_block_rates,
    .after_buffers = {"bn1.running_mean", "bn1.running_var", "bn1.num_batches_tracked"},
    .takes_drop_path = false,
};
const timm::test::ParityOptions kV3Parity = {
    .tol = {1e-4, 1e-4},
    .block_rates = no_block_rates,
    .after_buffers = {"bn1.running_mean", "bn1.running_var", "bn1.num_batches_tracked"},
    .takes_drop_path = false,
    .reparam = true,
};

}  // namespace

TEST_CASE(
    "every registered ghostnet has timm's state_dict keys, shapes, parameter count, pretrained_cfg and features") {
  // Also dtypes, no_weight_decay, group_matcher and feature_info.
  const auto info = timm::test::check_registered(kOracle, kNames, {"ghostnet*"}, kParity);
  CHECK(info.at("list").at("ghostnet*").get<std::vector<std::string>>() == kNames);
  CHECK(timm::Registry::global().list(timm::PluginKind::kModel, "ghostnet*") == kNames);
}

TEST_CASE("ghostnet matches timm both ways: ghostnet_050, ghostnetv2_100 (1 channel, 64x48)") {
  timm::test::run_parity(kOracle, kCases, kParity);
}

TEST_CASE("ghostnetv3_050 matches timm both ways, and folded as timm's reparameterize_model") {
  timm::test::run_parity(kOracle, kV3Cases, kV3Parity);
}

TEST_CASE("ghostnetv3 reparameterize() folds what timm's reparameterize_model folds, once, keeping the eval output") {
  c10::NoGradGuard no_grad;
  const at::Tensor x = at::randn({2, 3, 64, 64});
  timm::ModelPtr model = make_model("ghostnetv3_050");
  model->eval();
  const at::Tensor before = model->forward(x);
  // Each block's ghost1 and ghost2 (16 blocks) and the four strided blocks' depthwise branches.
  CHECK(model->reparameterize() == 36);
  CHECK(model->reparameterize() == 0);
  const auto params = model->named_parameters();
  CHECK(params.contains("blocks.0.0.ghost1.primary_conv.0.bias"));
  CHECK(params.contains("blocks.0.0.ghost2.cheap_operation.0.weight"));
  CHECK_FALSE(params.contains("blocks.0.0.ghost1.cheap_rpr_scale.conv.weight"));
  CHECK(params.contains("blocks.1.0.conv_dw.bias"));
  CHECK_FALSE(params.contains("blocks.1.0.dw_rpr_scale.conv.weight"));
  CHECK(params.contains("blocks.2.0.ghost1.short_conv.0.weight"));
  const at::Tensor after = model->forward(x);
  CHECK_MESSAGE(at::allclose(after, before, 1e-4, 1e-5),
                "max abs diff " << (after - before).abs().max().item<double>());
}

TEST_CASE("ghostnet forward_head without a classifier is the pre-logits features (after conv_head)") {
  timm::test::check_head_split("ghostnet_050", 64);
  timm::test::check_head_split("ghostnetv3_050", 64, nlohmann::json{{"global_pool", "max"}});
}

TEST_CASE("ghostnet init is PyTorch's default, as timm's (no init of its own)") {
  timm::test::check_init_stats(kOracle, {"ghostnet_050", "ghostnetv2_100", "ghostnetv3_050"});
  at::manual_seed(0);
  const auto params = make_model("ghostnet_050")->named_parameters();
  // conv_stem: 8 x 3 x 3 x 3, kaiming_uniform(a = sqrt(5)): |w| <= 1 / sqrt(fan_in).
  CHECK(params["conv_stem.weight"].abs().max().item<double>() <= 1.0 / std::sqrt(27.0));
  CHECK(params["bn1.weight"].min().item<double>() == 1.0);
  CHECK(params["conv_head.bias"].abs().max().item<double>() <= 1.0 / std::sqrt(480.0));
}

TEST_CASE("ghostnet head options, group_matcher, forward_intermediates' levels and refusals") {
  c10::NoGradGuard no_grad;
  const at::Tensor x = at::randn({2, 3, 64, 64});
  timm::ModelPtr features = make_model("ghostnet_050", 3, 0);
  features->eval();
  // GhostNet and GhostNetV2 have no blocks timm's reparameterize_model folds.
  CHECK(features->reparameterize() == 0);
  CHECK(make_model("ghostnetv2_100")->reparameterize() == 0);
  // No classifier: conv_head's 1280 channels.
  CHECK((features->forward(x).sizes() == at::IntArrayRef{2, 1280}));
  CHECK((features->forward_features(x).sizes() == at::IntArrayRef{2, 480, 2, 2}));
  const timm::Intermediates inter = features->forward_intermediates(x);
  REQUIRE(inter.intermediates.size() == 5);
  CHECK((inter.intermediates[0].sizes() == at::IntArrayRef{2, 8, 32, 32}));
  CHECK((inter.intermediates[4].sizes() == at::IntArrayRef{2, 80, 2, 2}));
  CHECK(at::equal(inter.final, features->forward_features(x)));
  // Stopping at the stem level: the final features are bn1 + act1 of it, as timm's.
  const timm::Intermediates stem_only = features->forward_intermediates(
      x, timm::IntermediatesOptions().indices(std::vector<int64_t>{0}).stop_early(true));
  REQUIRE(stem_only.intermediates.size() == 1);
  CHECK((stem_only.final.sizes() == at::IntArrayRef{2, 8, 32, 32}));
  CHECK(stem_only.final.min().item<double>() >= 0.0);
  const timm::Intermediates early = features->forward_intermediates(
      x, timm::IntermediatesOptions().indices(std::vector<int64_t>{2}).stop_early(true));
  REQUIRE(early.intermediates.size() == 1);
  CHECK(at::equal(early.final, early.intermediates[0]));
  CHECK(features->feature_info()[0] == timm::FeatureInfo{8, 2, "conv_stem"});
  CHECK(features->feature_info()[4] == timm::FeatureInfo{80, 32, "blocks.7"});
  CHECK_THROWS_AS(features->forward_intermediates(x, timm::IntermediatesOptions().output_fmt("NLC")), timm::UsageError);
  CHECK_THROWS_AS(features->forward_intermediates(x, timm::IntermediatesOptions().indices(int64_t{6})),
                  timm::UsageError);

  const auto matcher = features->group_matcher(false);
  REQUIRE(matcher.size() == 2);
  CHECK(matcher[0].second[0].pattern == R"(^conv_stem|bn1)");
  CHECK(matcher[1].second[0].pattern == R"(^blocks\.(\d+)\.(\d+))");
  CHECK(features->group_matcher(true)[1].second[0].pattern == R"(^blocks\.(\d+))");

  timm::ModelArgs args;
  args.num_classes = kNumClasses;
  args.global_pool = "catavgmax";  // timm asserts feat_mult() == 1
  CHECK_THROWS_AS(timm::create_model("ghostnet_050", args), timm::UsageError);
  args.global_pool.reset();
  args.kwargs["output_stride"] = "16";
  CHECK_THROWS_AS(timm::create_model("ghostnet_050", args), timm::UsageError);
  args.kwargs.clear();
  args.kwargs["width"] = "2";
  CHECK_THROWS_AS(timm::create_model("ghostnet_050", args), timm::UsageError);
  args.kwargs.clear();
  args.drop_path_rate = 0.1;  // timm's GhostNet raises TypeError
  CHECK_THROWS_AS(timm::create_model("ghostnet_050", args), timm::UsageError);
}

TEST_CASE("ghostnet --grad-checkpointing: each block of every stage checkpointed, the plain step's gradients") {
  // 2e-6 of the largest gradient: train-mode BatchNorm on 1x2 maps gives
  // input gradients of ~700 through forward_intermediates, whose checkpointed
  // sum of paths differs from the plain one by 9e-7 of that (rounding).
  timm::test::check_grad_checkpointing("ghostnet_050", 32, 48, {}, c10::Device(c10::kCPU), {2e-6, 0.0},
                                       /*takes_drop_path=*/false);
  timm::test::check_grad_checkpointing("ghostnetv3_050", 64, 64, {}, c10::Device(c10::kCPU), {2e-6, 0.0},
                                       /*takes_drop_path=*/false);
}

}  // namespace test_ghostnet
