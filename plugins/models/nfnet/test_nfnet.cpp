// NormFreeNet plugin against timm (tests/oracle/nfnet_oracle.py) through the
// shared harness (tests/support/model_parity.hpp), both ways: timm's weights
// load here and give timm's logits, eval forward_features / forward_head /
// pre-logits outputs, forward_intermediates, bfloat16 logits and gradients;
// our weights load in timm and give our logits. The oracle also draws every
// ScaledStdConv2d gain and skipinit gain (timm's init leaves each residual
// branch at zero). Tolerance for every float comparison:
// |ours - timm| <= 1e-4 + 1e-4 * |timm|.
//
// One case per block / stem / attention type, each the smallest model that
// has it, at 64 px (one at 80x48 with one input channel and output_stride 8):
// test_nfnet (deep_quad stem, SE after conv3, grouped 3x3 + extra conv, SiLU
// with gamma in the convs, final conv), dm_nfnet_f0 ('SAME' padding, GELU
// with gamma in the activations, skipinit), eca_nfnet_l0 (ECA), nf_regnet_b0
// (3x3 stem, SE between conv2 and conv3, width factor) and nf_seresnet26
// (7x7 stem + max pool, ReLU, SE at 1/16). NFNet-F models are large (F7:
// 500M parameters): the registration checks are split so that each builds
// at most ~3G values in all.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <nlohmann/json.hpp>

#include "model_parity.hpp"
#include "test_support.hpp"
#include "timm/base/error.hpp"
#include "timm/layers/drop_path.hpp"
#include "timm/layers/std_conv.hpp"
#include "timm/models/features.hpp"
#include "timm/models/model.hpp"
#include "timm/models/state_dict.hpp"
#include "timm/plugin/registry.hpp"

// Last: c10/util/Logging.h defines a CHECK macro that doctest must override.
#include <doctest/doctest.h>

namespace test_nfnet {

namespace {

using timm::test::make_model;
using timm::test::ParityCase;

constexpr int64_t kNumClasses = timm::test::kParityNumClasses;
constexpr const char* kOracle = "nfnet_oracle.py";

// Every name registered here: all of timm 1.0.31's nfnet.py, in natural order.
const std::vector<std::string> kNfnetNames = {
    "dm_nfnet_f0",  "dm_nfnet_f1",  "dm_nfnet_f2",  "dm_nfnet_f3",  "dm_nfnet_f4", "dm_nfnet_f5", "dm_nfnet_f6",
    "eca_nfnet_l0", "eca_nfnet_l1", "eca_nfnet_l2", "eca_nfnet_l3", "nfnet_f0",    "nfnet_f1",    "nfnet_f2",
    "nfnet_f3",     "nfnet_f4",     "nfnet_f5",     "nfnet_f6",     "nfnet_f7",    "nfnet_l0",    "test_nfnet"};
const std::vector<std::string> kNfNames = {"nf_ecaresnet26", "nf_ecaresnet50", "nf_ecaresnet101", "nf_regnet_b0",
                                           "nf_regnet_b1",   "nf_regnet_b2",   "nf_regnet_b3",    "nf_regnet_b4",
                                           "nf_regnet_b5",   "nf_resnet26",    "nf_resnet50",     "nf_resnet101",
                                           "nf_seresnet26",  "nf_seresnet50",  "nf_seresnet101"};
// The registration checks build each model at full size: the NFNet-F1 .. F7
// (0.13G to 0.5G parameters each) in two groups of their own.
const std::vector<std::string> kSmallNames = {
    "dm_nfnet_f0",  "eca_nfnet_l0", "eca_nfnet_l1",   "eca_nfnet_l2",   "eca_nfnet_l3",    "nfnet_f0",
    "nfnet_l0",     "test_nfnet",   "nf_ecaresnet26", "nf_ecaresnet50", "nf_ecaresnet101", "nf_regnet_b0",
    "nf_regnet_b1", "nf_regnet_b2", "nf_regnet_b3",   "nf_regnet_b4",   "nf_regnet_b5",    "nf_resnet26",
    "nf_resnet50",  "nf_resnet101", "nf_seresnet26",  "nf_seresnet50",  "nf_seresnet101"};
const std::vector<std::string> kF1ToF3Names = {"dm_nfnet_f1", "dm_nfnet_f2", "dm_nfnet_f3",
                                               "nfnet_f1",    "nfnet_f2",    "nfnet_f3"};
const std::vector<std::string> kF4ToF7Names = {"dm_nfnet_f4", "dm_nfnet_f5", "dm_nfnet_f6", "nfnet_f4",
                                               "nfnet_f5",    "nfnet_f6",    "nfnet_f7"};

const std::vector<ParityCase> kTestCases = {
    {"test_nfnet", "test_nfnet", 3, 64, 2},
    // Dilated stages 2 and 3 (dilation 2, then 4 after a dilation-2 first conv), AvgPool2dSame shortcuts.
    {"test_nfnet_c1_80x48_os8", "test_nfnet", 1, 80, 2, nlohmann::json{{"output_stride", 8}}, 48},
};
const std::vector<ParityCase> kDmCases = {{"dm_nfnet_f0", "dm_nfnet_f0", 3, 64, 2}};
const std::vector<ParityCase> kEcaRegCases = {{"eca_nfnet_l0", "eca_nfnet_l0", 3, 64, 2},
                                              {"nf_regnet_b0", "nf_regnet_b0", 3, 64, 2}};
const std::vector<ParityCase> kResCases = {{"nf_seresnet26", "nf_seresnet26", 3, 64, 2}};

// The drop_prob of each block's drop_path (0 where it has none), in block order.
std::vector<double> block_drop_path_rates(torch::nn::Module& model) {
  std::vector<double> rates;
  for (const auto& stage : model.named_children()["stages"]->children()) {
    for (const auto& block : stage->children()) rates.push_back(timm::test::drop_prob(*block, "drop_path"));
  }
  return rates;
}

// timm's rates come from a float32 linspace.
const timm::test::ParityOptions kParity = {
    .tol = {1e-4, 1e-4},
    .block_rates = block_drop_path_rates,
    .rates_epsilon = 1e-6,
};

}  // namespace

TEST_CASE("every registered nfnet has timm's keys, shapes, parameter count, pretrained_cfg and features (F0, L, NF)") {
  // Also dtypes, no_weight_decay, group_matcher, drop-path rates and feature_info.
  const auto info = timm::test::check_registered(kOracle, kSmallNames, {"*nfnet*", "nf_*"}, kParity);
  CHECK(info.at("list").at("*nfnet*").get<std::vector<std::string>>() == kNfnetNames);
  CHECK(info.at("list").at("nf_*").get<std::vector<std::string>>() == kNfNames);
  CHECK(timm::Registry::global().list(timm::PluginKind::kModel, "*nfnet*") == kNfnetNames);
  CHECK(timm::Registry::global().list(timm::PluginKind::kModel, "nf_*") == kNfNames);
}

TEST_CASE("registered NFNet-F1 .. F3 (dm_ and plain) have timm's keys, shapes, pretrained_cfg and features") {
  timm::test::check_registered(kOracle, kF1ToF3Names, {}, kParity);
}

TEST_CASE("registered NFNet-F4 .. F7 (dm_ and plain) have timm's keys, shapes, pretrained_cfg and features") {
  timm::test::check_registered(kOracle, kF4ToF7Names, {}, kParity);
}

TEST_CASE("test_nfnet matches timm both ways at 64 px, and at 80x48 px, one channel, output_stride 8 (dilated)") {
  timm::test::run_parity(kOracle, kTestCases, kParity);
}

TEST_CASE("dm_nfnet_f0 matches timm both ways at 64 px: 'SAME' padding, gamma in the activations, skipinit") {
  timm::test::run_parity(kOracle, kDmCases, kParity);
}

TEST_CASE("eca_nfnet_l0 (ECA) and nf_regnet_b0 (3x3 stem, SE mid-block) match timm both ways at 64 px") {
  timm::test::run_parity(kOracle, kEcaRegCases, kParity);
}

TEST_CASE("nf_seresnet26 (7x7 stem + max pool, ReLU, SE 1/16) matches timm both ways at 64 px") {
  timm::test::run_parity(kOracle, kResCases, kParity);
}

TEST_CASE("nfnet forward_head without a classifier is the pre-logits features") {
  timm::test::check_head_split("test_nfnet", 64);
  timm::test::check_head_split("nf_regnet_b0", 64);
}

TEST_CASE("nfnet init follows timm: convs kaiming_normal fan_in, zero biases, gains 1 (conv3 0 or skipinit 0)") {
  timm::test::check_init_stats(kOracle, {"test_nfnet", "nf_regnet_b0", "dm_nfnet_f0"});
  at::manual_seed(0);
  auto params = make_model("test_nfnet")->named_parameters();
  // stages.1.0.conv2: 16 x 8 x 3 x 3 (group size 8): fan_in 72.
  const at::Tensor w = params["stages.1.0.conv2.weight"];
  CHECK((w.sizes() == at::IntArrayRef{16, 8, 3, 3}));
  CHECK(params["stages.1.0.conv3.gain"].abs().max().item<double>() == 0.0);
  CHECK(params["stages.1.0.conv2.gain"].min().item<double>() == 1.0);
  CHECK(params["head.fc.weight"].std().item<double>() == doctest::Approx(0.01).epsilon(0.1));
  auto dm = make_model("dm_nfnet_f0", 3, kNumClasses)->named_parameters();
  CHECK(dm["stages.2.3.skipinit_gain"].dim() == 0);
  CHECK(dm["stages.2.3.skipinit_gain"].item<double>() == 0.0);
  CHECK(dm["stages.2.3.conv3.gain"].min().item<double>() == 1.0);
}

TEST_CASE("ScaledStdConv2d standardises each output channel's weight and scales it by gain * gamma / sqrt(fan_in)") {
  c10::NoGradGuard no_grad;
  at::manual_seed(0);
  timm::layers::ScaledStdConv2d conv(timm::layers::ScaledStdConv2dOptions(4, 6, 3).groups(2).gamma(1.7).eps(0.0));
  conv->gain.uniform_(0.5, 1.5);
  CHECK((conv->gain.sizes() == at::IntArrayRef{6, 1, 1, 1}));
  CHECK(conv->scale() == doctest::Approx(1.7 / std::sqrt(18.0)));
  const at::Tensor w = conv->weight.to(at::kDouble);
  const at::Tensor flat = w.reshape({6, -1});
  const at::Tensor expected = ((flat - flat.mean(1, true)) / flat.var(1, /*unbiased=*/false, true).sqrt()).view_as(w) *
                              conv->gain.to(at::kDouble) * conv->scale();
  CHECK(at::allclose(conv->standardized_weight().to(at::kDouble), expected, 1e-5, 1e-6));
  // Symmetric padding: 'SAME' at stride 2 pads a 7x7 input to 4x4 outputs, as the symmetric one does.
  const at::Tensor x = at::randn({1, 4, 8, 7});
  CHECK((conv(x).sizes() == at::IntArrayRef{1, 6, 8, 7}));
  timm::layers::ScaledStdConv2dSame same(timm::layers::ScaledStdConv2dOptions(4, 6, 3).stride(2).groups(2));
  CHECK((same(x).sizes() == at::IntArrayRef{1, 6, 4, 4}));
  // A clone keeps the type (the 'SAME' padding) and the gain.
  same->gain.fill_(0.5);
  auto copy = std::dynamic_pointer_cast<timm::layers::ScaledStdConv2dImpl>(same->clone());
  REQUIRE(copy);
  CHECK(at::equal(copy->forward(x), same(x)));
  CHECK_THROWS_AS(timm::layers::ScaledStdConv2d(timm::layers::ScaledStdConv2dOptions(4, 6, 3).groups(4)),
                  timm::UsageError);
}

TEST_CASE("nfnet head options, feature levels, group_matcher and refusals") {
  c10::NoGradGuard no_grad;
  const at::Tensor x = at::randn({2, 3, 64, 64});
  timm::ModelPtr features = make_model("test_nfnet", 3, 0);
  features->eval();
  // No classifier: final_conv's 192 channels (128 * 1.5), pooled.
  CHECK((features->forward(x).sizes() == at::IntArrayRef{2, 192}));
  // Five levels: stem.conv3 (stride 2), stages 0..2, final_conv (before final_act).
  const timm::Intermediates inter = features->forward_intermediates(x);
  REQUIRE(inter.intermediates.size() == 5);
  CHECK((inter.intermediates[0].sizes() == at::IntArrayRef{2, 64, 32, 32}));
  CHECK((inter.intermediates[3].sizes() == at::IntArrayRef{2, 96, 4, 4}));
  CHECK((inter.intermediates[4].sizes() == at::IntArrayRef{2, 192, 2, 2}));
  CHECK(at::equal(inter.final, features->forward_features(x)));
  CHECK(features->feature_info()[0] == timm::FeatureInfo{64, 2, "stem.conv3"});
  CHECK(features->feature_info()[4] == timm::FeatureInfo{192, 32, "final_conv"});
  CHECK_THROWS_AS(features->forward_intermediates(x, timm::IntermediatesOptions().indices(std::vector<int64_t>{5})),
                  timm::UsageError);
  CHECK_THROWS_WITH_AS(features->forward_intermediates(x, timm::IntermediatesOptions().output_fmt("NLC")),
                       doctest::Contains("NLC"), timm::UsageError);

  const auto matcher = features->group_matcher(false);
  REQUIRE(matcher.size() == 2);
  CHECK(matcher[0].first == "stem");
  CHECK(matcher[1].second[0].pattern == R"(^stages\.(\d+)\.(\d+))");
  CHECK(matcher[1].second[1].pattern == "^final_conv");
  CHECK(features->group_matcher(true)[1].second[0].pattern == R"(^stages\.(\d+))");

  timm::ModelArgs args;
  args.num_classes = kNumClasses;
  timm::test::check_head_dropout_gives_bias("test_nfnet", args, "head.fc.bias", x);
  args.global_pool = "catavgmax";
  CHECK((timm::create_model("test_nfnet", args)->named_parameters()["head.fc.weight"].sizes() ==
         at::IntArrayRef{kNumClasses, 384}));

  // As timm: a known pool type, rates in [0, 1], no keyword outside NfCfg
  // (a TypeError there); ours takes output_stride alone of NfCfg's.
  args.global_pool = "none";
  CHECK_THROWS_AS(timm::create_model("test_nfnet", args), timm::UsageError);
  args.global_pool.reset();
  args.drop_path_rate = 1.5;
  CHECK_THROWS_AS(timm::create_model("test_nfnet", args), timm::UsageError);
  args.drop_path_rate.reset();
  args.kwargs["mlp_ratio"] = "2";
  CHECK_THROWS_AS(timm::create_model("test_nfnet", args), timm::UsageError);
  args.kwargs.clear();
  for (const char* bad : {"0", "12.5", "x"}) {
    CAPTURE(bad);
    args.kwargs["output_stride"] = bad;
    CHECK_THROWS_AS(timm::create_model("test_nfnet", args), timm::UsageError);
  }
  args.kwargs["output_stride"] = "16";
  CHECK(timm::create_model("test_nfnet", args)->feature_info()[4] == timm::FeatureInfo{192, 16, "final_conv"});
}

TEST_CASE("nfnet --grad-checkpointing: each stage checkpointed, the plain step's gradients") {
  timm::test::check_grad_checkpointing("test_nfnet", 64, 64);
  timm::test::check_grad_checkpointing("test_nfnet", 48, 64, {{"output_stride", "16"}});
}

}  // namespace test_nfnet
