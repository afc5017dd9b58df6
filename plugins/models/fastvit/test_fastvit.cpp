// FastViT plugin against timm (tests/oracle/fastvit_oracle.py) through the
// shared harness (tests/support/model_parity.hpp), both ways: timm's weights
// load here and give timm's logits, eval forward_features / forward_head /
// pre-logits outputs, forward_intermediates, bfloat16 logits and gradients;
// our weights load in timm and give our logits; and every case folded
// (reparameterize() on timm's weights against timm's reparameterize_model:
// the folded state_dict's keys in order and values, and its eval logits).
// Tolerance |ours - timm| <= 1e-4 + 1e-4 * |timm|, 2e-4 for the attention
// models.
//
// Cases at 64 px: fastvit_t8 (RepMixer stages: MobileOne branches,
// ReparamLargeKernelConv downsampling, final_conv with SE; folded: every
// MobileOneBlock, ReparamLargeKernelConv and RepMixer), fastvit_sa12
// (RepConditionalPosEnc and attention blocks in stage 3, the pos_emb folded too) and fastvit_sa12 with
// one input channel at 64x96 and max pooling. One thread, as the oracle.
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
#include "timm/layers/drop_path.hpp"
#include "timm/models/features.hpp"
#include "timm/models/model.hpp"
#include "timm/plugin/registry.hpp"

// Last: c10/util/Logging.h defines a CHECK macro that doctest must override.
#include <doctest/doctest.h>

namespace test_fastvit {

namespace {

using timm::test::make_model;
using timm::test::ParityOptions;

constexpr int64_t kNumClasses = timm::test::kParityNumClasses;
constexpr const char* kOracle = "fastvit_oracle.py";

// Every name registered here, in list_models order: timm 1.0.31's fastvit.py
// without the MobileCLIP towers fastvit_mci0 .. mci4.
const std::vector<std::string> kFastVitNames = {"fastvit_ma36", "fastvit_s12", "fastvit_sa12", "fastvit_sa24",
                                                "fastvit_sa36", "fastvit_t8",  "fastvit_t12"};
const std::vector<std::string> kSmallNames = {"fastvit_t8", "fastvit_t12", "fastvit_s12", "fastvit_sa12"};
const std::vector<std::string> kLargeNames = {"fastvit_sa24", "fastvit_sa36", "fastvit_ma36"};

// Per block, its drop path rate (drop_path in RepMixer blocks, drop_path1 in
// attention blocks; 0 without one).
std::vector<double> block_drop_path_rates(torch::nn::Module& model) {
  std::vector<double> rates;
  for (const auto& stage : model.named_children()["stages"]->children()) {
    for (const auto& block : stage->named_children()["blocks"]->children()) {
      double rate = 0.0;
      for (const auto& child : block->named_children()) {
        if (child.key() == "drop_path" || child.key() == "drop_path1") {
          rate = child.value()->as<timm::layers::DropPath>()->options.drop_prob();
        }
      }
      rates.push_back(rate);
    }
  }
  return rates;
}

const ParityOptions kParity = {.tol = {1e-4, 1e-4}, .block_rates = block_drop_path_rates, .reparam = true};
const ParityOptions kAttentionParity = {.tol = {2e-4, 2e-4}, .block_rates = block_drop_path_rates, .reparam = true};

timm::ModelPtr make(const std::string& name, timm::ModelArgs args = {}) {
  timm::test::load_builtin_plugins();
  return timm::create_model(name, args);
}

}  // namespace

TEST_CASE("registered fastvit_t8, t12, s12, sa12 have timm's state_dict, cfg, features; names") {
  const auto info = timm::test::check_registered(kOracle, kSmallNames, {"fastvit*"}, kParity);
  std::vector<std::string> timm_names;
  for (const auto& name : info.at("list").at("fastvit*").get<std::vector<std::string>>()) {
    if (name.rfind("fastvit_mci", 0) != 0) timm_names.push_back(name);
  }
  CHECK(timm_names == kFastVitNames);
  CHECK(timm::Registry::global().list(timm::PluginKind::kModel, "fastvit*") == kFastVitNames);
}

TEST_CASE("registered fastvit_sa24, sa36 and ma36 have timm's state_dict, cfg and features") {
  timm::test::check_registered(kOracle, kLargeNames, {}, kParity);
}

TEST_CASE("fastvit_t8 matches timm both ways at 64 px (RepMixer, MobileOne branches, final_conv with SE)") {
  timm::test::run_parity(kOracle, {{"fastvit_t8", "fastvit_t8", 3, 64, 2}}, kParity);
}

TEST_CASE("fastvit_sa12 matches timm both ways at 64 px (conditional pos enc, attention in stage 3)") {
  timm::test::run_parity(kOracle, {{"fastvit_sa12", "fastvit_sa12", 3, 64, 2}}, kAttentionParity);
}

TEST_CASE("fastvit_sa12 matches timm both ways: one channel at 64x96, max pool") {
  timm::test::run_parity(kOracle,
                         {{"fastvit_sa12_c1_64x96_max", "fastvit_sa12", 1, 64, 2, {{"global_pool", "max"}}, 96}},
                         kAttentionParity);
}

TEST_CASE("fastvit forward_head without a classifier is the pre-logits features") {
  timm::test::check_head_split("fastvit_t8", 64);
  timm::test::check_head_split("fastvit_sa12", 64, {{"global_pool", "avgmax"}});
}

TEST_CASE("fastvit init follows timm's statistics: torch defaults, trunc_normal(.02) Mlp and Linear, gamma 1e-5") {
  timm::test::check_init_stats(kOracle, {"fastvit_t8", "fastvit_sa12"});
  at::manual_seed(0);
  const auto params = make("fastvit_sa12")->named_parameters();
  CHECK(params["stages.2.blocks.3.mlp.fc1.weight"].std().item<double>() == doctest::Approx(0.02).epsilon(0.02));
  CHECK(params["stages.2.blocks.3.mlp.fc1.bias"].abs().max().item<double>() == 0.0);
  CHECK(params["stages.2.blocks.3.layer_scale.gamma"].min().item<double>() == doctest::Approx(1e-5));
  CHECK(params["stages.2.blocks.3.token_mixer.layer_scale.gamma"].max().item<double>() == doctest::Approx(1e-5));
  CHECK(params["stages.3.blocks.1.token_mixer.qkv.weight"].std().item<double>() == doctest::Approx(0.02).epsilon(0.02));
  CHECK(params["stages.3.blocks.1.layer_scale_2.gamma"].min().item<double>() == doctest::Approx(1e-5));
  CHECK(params["head.fc.bias"].abs().max().item<double>() == 0.0);
}

TEST_CASE("fastvit head options, feature_info, forward_intermediates' levels, group_matcher, pretrained cfg") {
  c10::NoGradGuard no_grad;
  const at::Tensor x = at::randn({2, 3, 64, 64});
  timm::ModelPtr features = make_model("fastvit_t8", 3, 0);
  features->eval();
  CHECK((features->forward(x).sizes() == at::IntArrayRef{2, 768}));
  const timm::Intermediates inter = features->forward_intermediates(x);
  REQUIRE(inter.intermediates.size() == 4);
  CHECK((inter.intermediates[0].sizes() == at::IntArrayRef{2, 48, 16, 16}));
  CHECK((inter.intermediates[2].sizes() == at::IntArrayRef{2, 192, 4, 4}));
  CHECK((inter.intermediates[3].sizes() == at::IntArrayRef{2, 384, 2, 2}));
  // The final output is final_conv's (twice the last width).
  CHECK(at::equal(inter.final, features->forward_features(x)));
  CHECK((inter.final.sizes() == at::IntArrayRef{2, 768, 2, 2}));
  const timm::Intermediates early = features->forward_intermediates(
      x, timm::IntermediatesOptions().indices(std::vector<int64_t>{1}).stop_early(true));
  REQUIRE(early.intermediates.size() == 1);
  CHECK(at::equal(early.final, early.intermediates[0]));
  CHECK(features->feature_info()[0] == timm::FeatureInfo{48, 4, "stages.0"});
  CHECK(features->feature_info()[3] == timm::FeatureInfo{384, 32, "stages.3"});
  CHECK_THROWS_AS(features->forward_intermediates(x, timm::IntermediatesOptions().output_fmt("NLC")), timm::UsageError);
  CHECK_THROWS_AS(features->forward_intermediates(x, timm::IntermediatesOptions().indices(int64_t{5})),
                  timm::UsageError);
  CHECK(features->group_matcher(false).size() == 2);
  CHECK(features->pretrained_cfg().classifier == "head.fc");
  CHECK(features->pretrained_cfg().first_conv == "stem.0.conv_kxk.0.conv");
  CHECK(make_model("fastvit_ma36")->pretrained_cfg().crop_pct == 0.95);

  timm::ModelArgs args;
  args.num_classes = kNumClasses;
  timm::test::check_head_dropout_gives_bias("fastvit_t8", args, "head.fc.bias", x);
}

TEST_CASE("fastvit reparameterize() folds what timm's reparameterize_model folds, once, keeping the eval output") {
  c10::NoGradGuard no_grad;
  const at::Tensor x = at::randn({2, 3, 64, 64});
  // fastvit_t8: stem.0-2, stages.1-3's PatchEmbed (proj.0 and proj.1), ten
  // RepMixers (their norm and mixer folded inside, counted once) and
  // final_conv; fastvit_sa12 adds stages.3.pos_emb (and has ten RepMixers too).
  const std::vector<std::pair<std::string, int64_t>> cases = {{"fastvit_t8", 20}, {"fastvit_sa12", 21}};
  for (const auto& c : cases) {
    const std::string& name = c.first;
    CAPTURE(name);
    timm::ModelPtr model = make_model(name);
    model->eval();
    const at::Tensor before = model->forward(x);
    CHECK(model->reparameterize() == c.second);
    CHECK(model->reparameterize() == 0);
    const auto params = model->named_parameters();
    CHECK(params.contains("stem.0.reparam_conv.weight"));
    CHECK_FALSE(params.contains("stem.0.conv_scale.conv.weight"));
    CHECK(params.contains("stages.0.blocks.0.token_mixer.reparam_conv.bias"));
    CHECK_FALSE(params.contains("stages.0.blocks.0.token_mixer.layer_scale.gamma"));
    CHECK(params.contains("stages.1.downsample.proj.0.reparam_conv.weight"));
    const at::Tensor after = model->forward(x);
    CHECK_MESSAGE(at::allclose(after, before, 1e-4, 1e-5),
                  name << " max abs diff " << (after - before).abs().max().item<double>());
  }
}

TEST_CASE("fastvit rejects what timm rejects") {
  timm::ModelArgs args;
  args.global_pool = "median";
  CHECK_THROWS_WITH_AS(make("fastvit_t8", args), doctest::Contains("'median'"), timm::UsageError);
  args = {};
  args.kwargs["not_a_fastvit_arg"] = "1";  // timm: TypeError
  CHECK_THROWS_AS(make("fastvit_t8", args), timm::UsageError);
  args = {};
  args.drop_path_rate = -0.1;
  CHECK_THROWS_AS(make("fastvit_t8", args), timm::UsageError);
}

TEST_CASE("fastvit --grad-checkpointing: each stage's blocks checkpointed, the plain step's gradients") {
  timm::test::check_grad_checkpointing("fastvit_t8", 32, 32);
  timm::test::check_grad_checkpointing("fastvit_sa12", 32, 64);
}

}  // namespace test_fastvit
