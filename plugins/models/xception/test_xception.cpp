// Xception plugin against timm (tests/oracle/xception_oracle.py) through the
// shared harness (tests/support/model_parity.hpp), both ways: timm's weights
// load here and give timm's logits, eval forward_features / forward_head /
// pre-logits outputs, forward_intermediates, bfloat16 logits, gradients and
// BN statistics; our weights load in timm and give our logits. Tolerance for
// every float comparison: |ours - timm| <= 1e-4 + 1e-4 * |timm|.
//
// timm's legacy Xception takes no drop_path_rate (a TypeError) and refuses
// grad checkpointing (an assert); ours refuses both: its cases run with
// takes_drop_path false (no rates to compare).
//
// Cases: xception41 (XceptionModule) at 64 px; xception41p
// (PreXceptionModule) with one input channel at 64x96; xception71 (a stride-1
// block with a shortcut, five entry blocks) at output_stride 16 (dilated exit
// flow) with avgmax pooling at 64 px; legacy_xception at 64 px. One thread,
// as the oracle.
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

namespace test_xception {

namespace {

using timm::test::make_model;
using timm::test::ParityCase;
using timm::test::ParityOptions;

constexpr int64_t kNumClasses = timm::test::kParityNumClasses;
constexpr const char* kOracle = "xception_oracle.py";

// Every name registered here: all of timm 1.0.31's xception_aligned.py, in
// list_models order, and xception.py's legacy_xception.
const std::vector<std::string> kAlignedNames = {"xception41", "xception41p", "xception65", "xception65p", "xception71"};
const std::vector<std::string> kLegacyNames = {"legacy_xception"};

const std::vector<ParityCase> kXception41Cases = {
    {"xception41", "xception41", 3, 64, 2},
};
const std::vector<ParityCase> kPreactCases = {
    {"xception41p_c1_64x96", "xception41p", 1, 96, 2, nlohmann::json::object(), 64},
};
const std::vector<ParityCase> kDilatedCases = {
    {"xception71_os16_avgmax", "xception71", 3, 64, 2,
     nlohmann::json{{"output_stride", 16}, {"global_pool", "avgmax"}}},
};
const std::vector<ParityCase> kLegacyCases = {
    {"legacy_xception", "legacy_xception", 3, 64, 2},
};

// Each aligned block's DropPath rate (0 where it has none), in block order.
std::vector<double> aligned_block_rates(torch::nn::Module& model) {
  std::vector<double> rates;
  for (const auto& child : model.named_children()) {
    if (child.key() != "blocks") continue;
    for (const auto& block : child.value()->children()) rates.push_back(timm::test::drop_prob(*block, "drop_path"));
  }
  return rates;
}

// timm's legacy Xception takes no drop_path_rate and has no drop path: no rates.
std::vector<double> no_block_rates(torch::nn::Module&) { return {}; }

ParityOptions aligned_options(std::vector<std::string> after_buffers) {
  return {
      .tol = {1e-4, 1e-4},
      .block_rates = aligned_block_rates,
      .after_buffers = std::move(after_buffers),
      .min_grad_keys = 20,
  };
}

const ParityOptions kXception41Options =
    aligned_options({"stem.0.bn.running_mean", "stem.0.bn.num_batches_tracked", "blocks.0.shortcut.bn.running_var",
                     "blocks.0.stack.conv1.bn_dw.running_mean", "blocks.3.stack.conv2.bn_pw.running_var",
                     "blocks.12.stack.conv3.bn_pw.running_var"});
const ParityOptions kPreactOptions =
    aligned_options({"stem.0.bn.running_mean", "blocks.0.norm.running_var", "blocks.1.stack.conv2.norm.running_mean",
                     "blocks.12.norm.running_mean", "blocks.12.stack.conv3.norm.running_var"});
const ParityOptions kDilatedOptions =
    aligned_options({"blocks.1.shortcut.bn.running_mean", "blocks.21.stack.conv3.bn_dw.running_var",
                     "blocks.22.stack.conv3.bn_pw.running_var"});
const ParityOptions kLegacyOptions = {
    .tol = {1e-4, 1e-4},
    .block_rates = no_block_rates,
    .after_buffers = {"bn1.running_mean", "bn2.num_batches_tracked", "block1.skipbn.running_var",
                      "block1.rep.1.running_mean", "block4.rep.2.running_var", "block12.rep.5.running_mean",
                      "bn4.running_var"},
    .min_grad_keys = 20,
    .takes_drop_path = false,
};

}  // namespace

TEST_CASE(
    "every registered xception has timm's state_dict keys, shapes, parameter count, pretrained_cfg and "
    "features") {
  // Also dtypes, no_weight_decay, group_matcher, drop-path rates and feature_info.
  const auto aligned = timm::test::check_registered(kOracle, kAlignedNames, {"xception*"}, kXception41Options);
  CHECK(aligned.at("list").at("xception*").get<std::vector<std::string>>() == kAlignedNames);
  CHECK(timm::Registry::global().list(timm::PluginKind::kModel, "xception*") == kAlignedNames);
  const auto legacy = timm::test::check_registered(kOracle, kLegacyNames, {"legacy_xception*"}, kLegacyOptions);
  CHECK(legacy.at("list").at("legacy_xception*").get<std::vector<std::string>>() == kLegacyNames);
  CHECK(timm::Registry::global().list(timm::PluginKind::kModel, "legacy_xception*") == kLegacyNames);
}

TEST_CASE("xception41 matches timm both ways at 64 px (XceptionModule blocks)") {
  timm::test::run_parity(kOracle, kXception41Cases, kXception41Options);
}

TEST_CASE("xception41p matches timm both ways with one input channel at 64x96 (PreXceptionModule blocks)") {
  timm::test::run_parity(kOracle, kPreactCases, kPreactOptions);
}

TEST_CASE("xception71 matches timm both ways at 64 px with output_stride 16 and avgmax pooling") {
  timm::test::run_parity(kOracle, kDilatedCases, kDilatedOptions);
}

TEST_CASE("legacy_xception matches timm both ways at 64 px") {
  timm::test::run_parity(kOracle, kLegacyCases, kLegacyOptions);
}

TEST_CASE("xception forward_head without a classifier is the pre-logits features") {
  timm::test::check_head_split("xception41", 64);
  timm::test::check_head_split("xception41p", 64);
  timm::test::check_head_split("legacy_xception", 64);
}

TEST_CASE("xception init follows timm: torch's defaults (aligned); kaiming_normal fan_out convs (legacy)") {
  timm::test::check_init_stats(kOracle, {"xception41", "xception41p", "legacy_xception"});
}

TEST_CASE("xception grad checkpointing gives the plain step's results") {
  timm::test::check_grad_checkpointing("xception41", 64, 64);
  timm::test::check_grad_checkpointing("xception41p", 64, 64);
}

TEST_CASE("xception head options, keywords, forward_intermediates' levels and refusals") {
  c10::NoGradGuard no_grad;
  const at::Tensor x = at::randn({2, 3, 64, 64});
  timm::ModelPtr features = make_model("xception41", 3, 0);
  features->eval();
  CHECK((features->forward(x).sizes() == at::IntArrayRef{2, 2048}));
  // Five levels: the taps inside blocks 0, 1, 2 and 11 (strides 2 to 16), block 12's output.
  const timm::Intermediates inter = features->forward_intermediates(x);
  REQUIRE(inter.intermediates.size() == 5);
  CHECK((inter.intermediates[0].sizes() == at::IntArrayRef{2, 128, 32, 32}));
  CHECK((inter.intermediates[3].sizes() == at::IntArrayRef{2, 1024, 4, 4}));
  CHECK((inter.intermediates[4].sizes() == at::IntArrayRef{2, 2048, 2, 2}));
  CHECK(at::equal(inter.intermediates[4], inter.final));
  CHECK(features->feature_info()[1] == timm::FeatureInfo{256, 4, "blocks.1.stack.act3"});
  CHECK_THROWS_AS(features->forward_intermediates(x, timm::IntermediatesOptions().output_fmt("NLC")), timm::UsageError);
  features->set_grad_checkpointing(true);
  features->set_grad_checkpointing(false);

  timm::ModelArgs args;
  args.num_classes = kNumClasses;
  timm::test::check_head_dropout_gives_bias("xception41", args, "head.fc.bias", x);
  timm::test::check_head_dropout_gives_bias("legacy_xception", args, "fc.bias", x);

  // output_stride 8: blocks from the third strided one on dilated, features at 8x8.
  args.kwargs = {{"output_stride", "8"}};
  const timm::ModelPtr dilated = timm::create_model("xception41", args);
  dilated->eval();
  CHECK((dilated->forward_features(x).sizes() == at::IntArrayRef{2, 2048, 8, 8}));
  CHECK(dilated->feature_info().back() == timm::FeatureInfo{2048, 8, "blocks.12"});
  args.kwargs.clear();

  // Legacy: no classifier gives act4's pooled output; five levels down to stride 32.
  timm::ModelPtr legacy = make_model("legacy_xception", 3, 0);
  legacy->eval();
  CHECK((legacy->forward(x).sizes() == at::IntArrayRef{2, 2048}));
  const timm::Intermediates legacy_inter = legacy->forward_intermediates(x);
  REQUIRE(legacy_inter.intermediates.size() == 5);
  CHECK((legacy_inter.intermediates[0].sizes() == at::IntArrayRef{2, 64, 29, 29}));
  CHECK((legacy_inter.intermediates[3].sizes() == at::IntArrayRef{2, 728, 4, 4}));
  CHECK(at::equal(legacy_inter.intermediates[4], legacy_inter.final));
  const auto matcher = legacy->group_matcher(false);
  REQUIRE(matcher.size() == 2);
  REQUIRE(matcher[1].second.size() == 2);
  CHECK(matcher[1].second[1].suffix == std::vector<double>{99});

  // As timm: legacy_xception has no drop path (a TypeError there), no
  // keywords and no grad checkpointing (an assert); the aligned models take
  // output_stride 8, 16 or 32 only (an assert) and no other keywords.
  CHECK_THROWS_AS(legacy->set_grad_checkpointing(true), timm::UsageError);
  legacy->set_grad_checkpointing(false);
  args.drop_path_rate = 0.1;
  CHECK_THROWS_WITH_AS(timm::create_model("legacy_xception", args), doctest::Contains("drop_path_rate"),
                       timm::UsageError);
  CHECK_NOTHROW(timm::create_model("xception41p", args));
  args.drop_path_rate.reset();
  args.kwargs = {{"output_stride", "16"}};
  CHECK_THROWS_AS(timm::create_model("legacy_xception", args), timm::UsageError);
  for (const auto& [key, value] : std::vector<std::pair<std::string, std::string>>{
           {"output_stride", "4"}, {"output_stride", "x"}, {"preact", "true"}, {"act_layer", "silu"}}) {
    CAPTURE(key);
    args.kwargs = {{key, value}};
    CHECK_THROWS_AS(timm::create_model("xception41", args), timm::UsageError);
  }
  args.kwargs.clear();
  args.global_pool = "none";
  CHECK_THROWS_AS(timm::create_model("xception41", args), timm::UsageError);
  CHECK_THROWS_AS(timm::create_model("legacy_xception", args), timm::UsageError);
}

}  // namespace test_xception
