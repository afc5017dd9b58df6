// ConvNeXt plugin against timm (tests/oracle/convnext_oracle.py), both ways:
// timm's weights load here and give timm's logits, eval forward_features /
// forward_head / pre-logits outputs and gradients; our weights load in timm
// and give our logits. Tolerance for every float comparison:
// |ours - timm| <= 1e-4 + 1e-4 * |timm| (one thread, float32).
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <nlohmann/json.hpp>

#include "model_parity.hpp"
#include "test_support.hpp"
#include "timm/base/error.hpp"
#include "timm/layers/drop_path.hpp"
#include "timm/models/model.hpp"
#include "timm/models/state_dict.hpp"
#include "timm/plugin/registry.hpp"

// Last: c10/util/Logging.h defines a CHECK macro that doctest must override.
#include <doctest/doctest.h>

namespace test_convnext {

namespace {

using timm::test::ParityCase;

const std::vector<std::string> kNames = {
    "convnext_atto",     "convnext_atto_ols",  "convnext_femto",        "convnext_femto_ols", "convnext_pico",
    "convnext_pico_ols", "convnext_nano",      "convnext_nano_ols",     "convnext_tiny_hnf",  "convnext_tiny",
    "convnext_small",    "convnext_base",      "convnext_large",        "convnext_large_mlp", "convnext_xlarge",
    "convnext_xxlarge",  "convnextv2_atto",    "convnextv2_femto",      "convnextv2_pico",    "convnextv2_nano",
    "convnextv2_tiny",   "convnextv2_small",   "convnextv2_base",       "convnextv2_large",   "convnextv2_huge",
    "convnext_atto_rms", "convnext_zepto_rms", "convnext_zepto_rms_ols"};

// Smallest (atto) and largest (base) member, both block types (conv_mlp with
// LayerNorm2d: atto..nano; channels-last LayerNorm + Linear: tiny..base), and
// another pool type on one input channel; the overlapping stems (tiered: atto_ols,
// plain: nano_ols), head norm first (tiny_hnf: norm_pre + ClassifierHead), and
// ConvNeXt-V2's GRN both ways (NCHW in v2_atto's conv Mlp, channels last in
// v2_tiny's Linear Mlp; no gamma), and the norm-layer variants (SimpleNorm2d
// in zepto_rms, with the conv-GELU-conv stem in zepto_rms_ols; RmsNorm2d in
// atto_rms; each also as head.norm). 64x64 inputs: any multiple of 32 works.
const std::vector<ParityCase> kCases = {
    {"convnext_atto", "convnext_atto", 3, 64, 2, nlohmann::json::object()},
    {"convnext_atto_avgmax_c1", "convnext_atto", 1, 64, 2, {{"global_pool", "avgmax"}}},
    {"convnext_tiny", "convnext_tiny", 3, 64, 2, nlohmann::json::object()},
    {"convnext_base", "convnext_base", 3, 64, 2, nlohmann::json::object()},
    {"convnext_atto_ols", "convnext_atto_ols", 3, 64, 2, nlohmann::json::object()},
    {"convnext_nano_ols", "convnext_nano_ols", 3, 64, 2, nlohmann::json::object()},
    {"convnext_tiny_hnf", "convnext_tiny_hnf", 3, 64, 2, nlohmann::json::object()},
    {"convnextv2_atto", "convnextv2_atto", 3, 64, 2, nlohmann::json::object()},
    {"convnextv2_tiny", "convnextv2_tiny", 3, 64, 2, nlohmann::json::object()},
    {"convnext_zepto_rms", "convnext_zepto_rms", 3, 64, 2, nlohmann::json::object()},
    {"convnext_zepto_rms_ols", "convnext_zepto_rms_ols", 3, 64, 2, nlohmann::json::object()},
    {"convnext_atto_rms_avgmax", "convnext_atto_rms", 3, 64, 2, {{"global_pool", "avgmax"}}},
};

std::vector<double> block_drop_path_rates(torch::nn::Module& model) {
  std::vector<double> rates;
  for (const auto& stage : model.named_children()["stages"]->children()) {
    for (const auto& block : stage->named_children()["blocks"]->children()) {
      double rate = 0.0;
      for (const auto& child : block->named_children()) {
        if (child.key() == "drop_path") rate = child.value()->as<timm::layers::DropPath>()->options.drop_prob();
      }
      rates.push_back(rate);
    }
  }
  return rates;
}

const timm::test::ParityOptions kParity = {.tol = {1e-4, 1e-4}, .block_rates = block_drop_path_rates};

timm::ModelPtr make(const std::string& name, timm::ModelArgs args = {}) {
  timm::test::load_builtin_plugins();
  return timm::create_model(name, args);
}

}  // namespace

TEST_CASE("convnext matches timm both ways: structure, eval and train logits, gradients, weights") {
  timm::test::run_parity("convnext_oracle.py", kCases, kParity);
}

TEST_CASE("convnext forward_head without a classifier is the pre-logits features (avg and avgmax pools)") {
  timm::test::check_head_split("convnext_atto", 64);
  timm::test::check_head_split("convnext_atto", 64, {{"global_pool", "avgmax"}});
  timm::test::check_head_split("convnext_tiny_hnf", 64);
  timm::test::check_head_split("convnextv2_atto", 64);
  timm::test::check_head_split("convnext_zepto_rms", 64);
}

TEST_CASE("every registered convnext has timm's state_dict, parameter count, pretrained cfg, no_weight_decay, groups") {
  const std::vector<std::string> patterns = {"convnext_*", "convnextv2_*"};
  const auto info = timm::test::check_registered("convnext_oracle.py", kNames, patterns, kParity);
  size_t listed = 0;
  for (const auto& pattern : patterns) {
    CAPTURE(pattern);
    std::vector<std::string> timm_listed;
    for (const auto& name : info.at("list").at(pattern).get<std::vector<std::string>>()) {
      if (timm::Registry::global().find(timm::PluginKind::kModel, name) != nullptr) timm_listed.push_back(name);
    }
    CHECK(timm::Registry::global().list(timm::PluginKind::kModel, pattern) == timm_listed);
    listed += timm_listed.size();
  }
  CHECK(listed == kNames.size());
}

TEST_CASE("convnext init follows timm's statistics: trunc_normal(.02) convs and linears, gamma 1e-6, GRN zeros") {
  timm::test::check_init_stats("convnext_oracle.py",
                               {"convnext_atto", "convnext_tiny", "convnext_atto_ols", "convnextv2_atto"});
  at::manual_seed(0);
  const auto params = make("convnext_tiny")->named_parameters();
  CHECK(params["stages.2.blocks.4.mlp.fc1.weight"].std().item<double>() == doctest::Approx(0.02).epsilon(0.02));
  CHECK(params["stages.2.blocks.4.mlp.fc1.bias"].abs().max().item<double>() == 0.0);
  CHECK(params["stages.2.blocks.4.gamma"].min().item<double>() == doctest::Approx(1e-6));
  CHECK(params["head.norm.weight"].min().item<double>() == 1.0);
}

TEST_CASE("convnext head options: num_classes 0, global_pool '', drop_rate") {
  c10::NoGradGuard no_grad;
  const at::Tensor x = at::randn({2, 3, 64, 64});

  timm::ModelArgs args;
  args.num_classes = 0;
  timm::ModelPtr features = make("convnext_atto", args);
  features->eval();
  CHECK((features->forward(x).sizes() == at::IntArrayRef{2, 320}));
  CHECK(timm::state_dict(*features).size() == timm::state_dict(*make("convnext_atto")).size() - 2);

  // No pooling: timm's head turns fc into a 1x1 conv over the 2x2 feature map.
  args.num_classes = 10;
  args.global_pool = "";
  timm::ModelPtr unpooled = make("convnext_atto", args);
  unpooled->eval();
  CHECK((unpooled->named_parameters()["head.fc.weight"].sizes() == at::IntArrayRef{10, 320, 1, 1}));
  CHECK((unpooled->forward(x).sizes() == at::IntArrayRef{2, 10, 2, 2}));

  args = {};
  args.num_classes = 10;
  timm::test::check_head_dropout_gives_bias("convnext_atto", args, "head.fc.bias", x);
}

TEST_CASE("convnext head variants: norm_pre with a plain ClassifierHead (tiny_hnf), V2 blocks without gamma") {
  c10::NoGradGuard no_grad;
  timm::ModelArgs args;
  args.num_classes = 10;
  timm::ModelPtr hnf = make("convnext_tiny_hnf", args);
  const auto params = hnf->named_parameters();
  CHECK(params.contains("norm_pre.weight"));
  CHECK_FALSE(params.contains("head.norm.weight"));
  CHECK((params["head.fc.weight"].sizes() == at::IntArrayRef{10, 768}));
  hnf->eval();
  const at::Tensor x = at::randn({2, 3, 64, 64});
  // norm_pre belongs to forward_features: the head only pools and classifies.
  const at::Tensor features = hnf->forward_features(x);
  const at::Tensor pooled = features.mean({2, 3});
  CHECK(at::allclose(hnf->forward_head(features, /*pre_logits=*/true), pooled, 1e-5, 1e-6));

  const auto v2 = make("convnextv2_atto")->named_parameters();
  CHECK_FALSE(v2.contains("stages.0.blocks.0.gamma"));
  CHECK((v2["stages.3.blocks.1.mlp.grn.weight"].sizes() == at::IntArrayRef{1280}));
  CHECK(v2["stages.3.blocks.1.mlp.grn.weight"].abs().max().item<double>() == 0.0);
}

TEST_CASE("convnext rejects what it does not support") {
  timm::ModelArgs args;
  args.global_pool = "catavgmax";
  CHECK_THROWS_WITH_AS(make("convnext_atto", args), doctest::Contains("'catavgmax'"), timm::UsageError);
  args.global_pool = "median";
  CHECK_THROWS_WITH_AS(make("convnext_atto", args), doctest::Contains("'median'"), timm::UsageError);
  args = {};
  args.kwargs["stem_type"] = "overlap";
  CHECK_THROWS_AS(make("convnext_atto", args), timm::UsageError);
  args = {};
  args.drop_path_rate = -0.1;
  CHECK_THROWS_AS(make("convnext_atto", args), timm::UsageError);
  args = {};
  args.global_pool = "";
  CHECK_THROWS_WITH_AS(make("convnext_tiny_hnf", args), doctest::Contains("--num-classes 0"), timm::UsageError);
}

TEST_CASE("convnext --grad-checkpointing: each stage's blocks checkpointed, the plain step's gradients") {
  timm::test::check_grad_checkpointing("convnext_atto", 32, 32);
}

}  // namespace test_convnext
