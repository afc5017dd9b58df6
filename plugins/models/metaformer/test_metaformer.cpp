// MetaFormer plugin against timm (tests/oracle/metaformer_oracle.py) through
// the shared harness (tests/support/model_parity.hpp), both ways: timm's
// weights load here and give timm's logits, eval forward_features /
// forward_head / pre-logits outputs, forward_intermediates, bfloat16 logits
// and gradients; our weights load in timm and give our logits. The oracle
// also perturbs the layer / res / StarReLU scales (see its docstring).
// Tolerance |ours - timm| <= 1e-4 + 1e-4 * |timm|, 2e-4 for CAFormer's attention.
//
// Cases: the smallest member of each kind at 64 px (poolformer_s12: GroupNorm1
// with bias, GELU, layer scale; poolformerv2_s12: bias-free GroupNorm1,
// StarReLU, res scale; convformer_s18: SepConv, MlpHead; caformer_s18:
// attention on tokens in stages 2-3), poolformerv2_s12 with one input
// channel at 96x64 and avgmax pooling, caformer_s18 with one channel at
// 64x96 and max pooling. One thread, as the oracle.
#include <map>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <nlohmann/json.hpp>

#include "model_parity.hpp"
#include "test_support.hpp"
#include "timm/base/error.hpp"
#include "timm/layers/drop_path.hpp"
#include "timm/models/features.hpp"
#include "timm/models/model.hpp"
#include "timm/plugin/registry.hpp"

// Last: c10/util/Logging.h defines a CHECK macro that doctest must override.
#include <doctest/doctest.h>

namespace test_metaformer {

namespace {

using timm::test::make_model;
using timm::test::ParityCase;
using timm::test::ParityOptions;

constexpr int64_t kNumClasses = timm::test::kParityNumClasses;
constexpr const char* kOracle = "metaformer_oracle.py";

// Every name registered here, in list_models order per pattern: all of timm 1.0.31's metaformer.py.
const std::vector<std::string> kPoolFormerNames = {
    "poolformer_m36",   "poolformer_m48",   "poolformer_s12",   "poolformer_s24",   "poolformer_s36",
    "poolformerv2_m36", "poolformerv2_m48", "poolformerv2_s12", "poolformerv2_s24", "poolformerv2_s36"};
const std::vector<std::string> kConvFormerNames = {"convformer_b36", "convformer_m36", "convformer_s18",
                                                   "convformer_s36"};
const std::vector<std::string> kCAFormerNames = {"caformer_b36", "caformer_m36", "caformer_s18", "caformer_s36"};

const std::vector<std::string> kSmallNames = {"poolformer_s12",   "poolformer_s24",   "poolformer_s36",
                                              "poolformerv2_s12", "poolformerv2_s24", "poolformerv2_s36",
                                              "convformer_s18",   "caformer_s18"};
const std::vector<std::string> kMediumPoolNames = {"poolformer_m36", "poolformer_m48", "poolformerv2_m36",
                                                   "poolformerv2_m48"};
const std::vector<std::string> kLargeConvNames = {"convformer_s36", "convformer_m36", "convformer_b36"};
const std::vector<std::string> kLargeCANames = {"caformer_s36", "caformer_m36", "caformer_b36"};

// Per block, its drop_path1 rate (0 without one).
std::vector<double> block_drop_path_rates(torch::nn::Module& model) {
  std::vector<double> rates;
  for (const auto& stage : model.named_children()["stages"]->children()) {
    for (const auto& block : stage->named_children()["blocks"]->children()) {
      double rate = 0.0;
      for (const auto& child : block->named_children()) {
        if (child.key() == "drop_path1") rate = child.value()->as<timm::layers::DropPath>()->options.drop_prob();
      }
      rates.push_back(rate);
    }
  }
  return rates;
}

const ParityOptions kParity = {.tol = {1e-4, 1e-4}, .block_rates = block_drop_path_rates};
const ParityOptions kAttentionParity = {.tol = {2e-4, 2e-4}, .block_rates = block_drop_path_rates};

timm::ModelPtr make(const std::string& name, timm::ModelArgs args = {}) {
  timm::test::load_builtin_plugins();
  return timm::create_model(name, args);
}

}  // namespace

TEST_CASE("registered poolformer*_s*, convformer_s18 and caformer_s18 have timm's state_dict, cfg, features; names") {
  const std::vector<std::string> patterns = {"poolformer*", "convformer*", "caformer*"};
  const auto info = timm::test::check_registered(kOracle, kSmallNames, patterns, kParity);
  const std::map<std::string, std::vector<std::string>> expected = {
      {"poolformer*", kPoolFormerNames}, {"convformer*", kConvFormerNames}, {"caformer*", kCAFormerNames}};
  for (const auto& [pattern, names] : expected) {
    CAPTURE(pattern);
    CHECK(info.at("list").at(pattern).get<std::vector<std::string>>() == names);
    CHECK(timm::Registry::global().list(timm::PluginKind::kModel, pattern) == names);
  }
}

TEST_CASE("registered poolformer_m36, m48 and poolformerv2_m36, m48 have timm's state_dict, cfg and features") {
  timm::test::check_registered(kOracle, kMediumPoolNames, {}, kParity);
}

TEST_CASE("registered convformer_s36, m36 and b36 have timm's state_dict, cfg and features") {
  timm::test::check_registered(kOracle, kLargeConvNames, {}, kParity);
}

TEST_CASE("registered caformer_s36, m36 and b36 have timm's state_dict, cfg and features") {
  timm::test::check_registered(kOracle, kLargeCANames, {}, kParity);
}

TEST_CASE("poolformer_s12 matches timm both ways at 64 px (GroupNorm1 with bias, GELU, layer scale)") {
  timm::test::run_parity(kOracle, {{"poolformer_s12", "poolformer_s12", 3, 64, 2}}, kParity);
}

TEST_CASE("poolformerv2_s12 matches timm both ways: one channel at 96x64, avgmax pool") {
  timm::test::run_parity(
      kOracle, {{"poolformerv2_s12_c1_96x64_avgmax", "poolformerv2_s12", 1, 96, 2, {{"global_pool", "avgmax"}}, 64}},
      kParity);
}

TEST_CASE("convformer_s18 matches timm both ways at 64 px (SepConv, StarReLU, MlpHead)") {
  timm::test::run_parity(kOracle, {{"convformer_s18", "convformer_s18", 3, 64, 2}}, kParity);
}

TEST_CASE("caformer_s18 matches timm both ways at 64 px (attention stages on tokens)") {
  timm::test::run_parity(kOracle, {{"caformer_s18", "caformer_s18", 3, 64, 2}}, kAttentionParity);
}

TEST_CASE("caformer_s18 matches timm both ways: one channel at 64x96, max pool") {
  timm::test::run_parity(kOracle,
                         {{"caformer_s18_c1_64x96_max", "caformer_s18", 1, 64, 2, {{"global_pool", "max"}}, 96}},
                         kAttentionParity);
}

TEST_CASE("metaformer forward_head without a classifier is the pre-logits features (Linear and MlpHead)") {
  timm::test::check_head_split("poolformer_s12", 64);
  timm::test::check_head_split("poolformerv2_s12", 64, {{"global_pool", "avgmax"}});
  timm::test::check_head_split("convformer_s18", 64);
  timm::test::check_head_split("caformer_s18", 64, {{"global_pool", "max"}});
}

TEST_CASE("poolformer init follows timm's statistics: trunc_normal(.02), layer scale 1e-5, res scale 1") {
  timm::test::check_init_stats(kOracle, {"poolformer_s12", "poolformerv2_s12"});
  at::manual_seed(0);
  const auto params = make("poolformer_s12")->named_parameters();
  CHECK(params["stages.2.blocks.3.mlp.fc1.weight"].std().item<double>() == doctest::Approx(0.02).epsilon(0.02));
  CHECK(params["stages.2.blocks.3.mlp.fc1.bias"].abs().max().item<double>() == 0.0);
  CHECK(params["stages.2.blocks.3.layer_scale1.scale"].min().item<double>() == doctest::Approx(1e-5));
  CHECK(params["stages.2.blocks.3.norm1.weight"].min().item<double>() == 1.0);
  const auto v2 = make("poolformerv2_s12")->named_parameters();
  CHECK(v2["stages.3.blocks.1.res_scale2.scale"].min().item<double>() == 1.0);
  CHECK_FALSE(v2.contains("stages.1.blocks.0.res_scale1.scale"));
  CHECK_FALSE(v2.contains("stages.1.blocks.0.layer_scale1.scale"));
  CHECK(v2["stages.0.blocks.0.mlp.act.scale"].item<double>() == 1.0);
  CHECK(v2["stages.0.blocks.0.mlp.act.bias"].item<double>() == 0.0);
}

TEST_CASE("convformer and caformer init follow timm's statistics (StarReLU 1 / 0, MlpHead)") {
  timm::test::check_init_stats(kOracle, {"convformer_s18", "caformer_s18"});
  at::manual_seed(0);
  const auto params = make("caformer_s18")->named_parameters();
  CHECK(params["stages.2.blocks.0.token_mixer.qkv.weight"].std().item<double>() == doctest::Approx(0.02).epsilon(0.02));
  CHECK(params["head.fc.fc2.bias"].abs().max().item<double>() == 0.0);
  CHECK(params["head.fc.norm.weight"].min().item<double>() == 1.0);
  CHECK(params["stages.0.blocks.0.token_mixer.act1.scale"].item<double>() == 1.0);
}

TEST_CASE("metaformer head options, feature_info, forward_intermediates' levels, pretrained cfg") {
  c10::NoGradGuard no_grad;
  const at::Tensor x = at::randn({2, 3, 64, 64});
  timm::ModelPtr features = make_model("caformer_s18", 3, 0);
  features->eval();
  CHECK((features->forward(x).sizes() == at::IntArrayRef{2, 512}));
  const timm::Intermediates inter = features->forward_intermediates(x);
  REQUIRE(inter.intermediates.size() == 4);
  CHECK((inter.intermediates[0].sizes() == at::IntArrayRef{2, 64, 16, 16}));
  CHECK((inter.intermediates[2].sizes() == at::IntArrayRef{2, 320, 4, 4}));
  CHECK((inter.intermediates[3].sizes() == at::IntArrayRef{2, 512, 2, 2}));
  CHECK(at::equal(inter.final, features->forward_features(x)));
  CHECK(at::equal(inter.final, inter.intermediates[3]));
  const timm::Intermediates early = features->forward_intermediates(
      x, timm::IntermediatesOptions().indices(std::vector<int64_t>{1}).stop_early(true));
  REQUIRE(early.intermediates.size() == 1);
  CHECK(at::equal(early.final, early.intermediates[0]));
  CHECK(features->feature_info()[0] == timm::FeatureInfo{64, 4, "stages.0"});
  CHECK(features->feature_info()[3] == timm::FeatureInfo{512, 32, "stages.3"});
  CHECK_THROWS_AS(features->forward_intermediates(x, timm::IntermediatesOptions().output_fmt("NLC")), timm::UsageError);
  CHECK_THROWS_AS(features->forward_intermediates(x, timm::IntermediatesOptions().indices(int64_t{5})),
                  timm::UsageError);
  // timm's MetaFormer has no group_matcher.
  CHECK(features->group_matcher(false).empty());
  CHECK(features->group_matcher(true).empty());
  CHECK(features->pretrained_cfg().classifier == "head.fc.fc2");
  CHECK(make_model("poolformer_s12")->pretrained_cfg().classifier == "head.fc");

  // No pooling and no classifier: the head's LayerNorm2d on the feature map.
  timm::ModelArgs args;
  args.num_classes = 0;
  args.global_pool = "";
  timm::ModelPtr unpooled = make("poolformer_s12", args);
  unpooled->eval();
  CHECK((unpooled->forward(x).sizes() == at::IntArrayRef{2, 512, 2, 2}));

  args = {};
  args.num_classes = kNumClasses;
  timm::test::check_head_dropout_gives_bias("poolformer_s12", args, "head.fc.bias", x);
}

TEST_CASE("metaformer rejects what timm rejects") {
  timm::ModelArgs args;
  args.global_pool = "catavgmax";
  CHECK_THROWS_WITH_AS(make("poolformer_s12", args), doctest::Contains("'catavgmax'"), timm::UsageError);
  args.global_pool = "median";
  CHECK_THROWS_WITH_AS(make("convformer_s18", args), doctest::Contains("'median'"), timm::UsageError);
  args.global_pool = "";
  CHECK_THROWS_WITH_AS(make("caformer_s18", args), doctest::Contains("--num-classes 0"), timm::UsageError);
  args = {};
  args.kwargs["not_a_mixer_arg"] = "5";  // timm: TypeError (token-mixer keywords are not taken either)
  CHECK_THROWS_AS(make("poolformer_s12", args), timm::UsageError);
  args = {};
  args.drop_path_rate = -0.1;
  CHECK_THROWS_AS(make("poolformer_s12", args), timm::UsageError);
}

TEST_CASE("metaformer --grad-checkpointing: each stage's blocks checkpointed, the plain step's gradients") {
  timm::test::check_grad_checkpointing("poolformer_s12", 32, 32);
  timm::test::check_grad_checkpointing("caformer_s18", 32, 64);
}

}  // namespace test_metaformer
