// LeViT plugin against timm (tests/oracle/levit_oracle.py) through the shared
// harness (tests/support/model_parity.hpp), both ways: timm's weights load
// here and give timm's logits, eval forward_features / forward_head /
// pre-logits outputs, forward_intermediates, bfloat16 logits and gradients;
// our weights load in timm and give our logits. The oracle also draws the
// attention_biases (zeros at init). Tolerance |ours - timm| <= 1e-4 + 1e-4 * |timm|.
//
// LeViT's attention bias tables fix the input size at construction (img_size,
// default 224), so the cases pass img_size: levit_128s (linear mode, distilled
// heads) at 64 px (token grids 4, 2, 1) and levit_conv_128s (conv mode) with
// one input channel at 48 px (grids 3, 2, 1: the downsample's ceil). One
// thread, as the oracle.
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

namespace test_levit {

namespace {

using timm::test::ParityOptions;

constexpr int64_t kNumClasses = timm::test::kParityNumClasses;
constexpr const char* kOracle = "levit_oracle.py";

// Every name registered here, in list_models order: all of timm 1.0.31's levit.py.
const std::vector<std::string> kLevitNames = {
    "levit_128",      "levit_128s",        "levit_192",      "levit_256",         "levit_256d",
    "levit_384",      "levit_384_s8",      "levit_512",      "levit_512_s8",      "levit_512d",
    "levit_conv_128", "levit_conv_128s",   "levit_conv_192", "levit_conv_256",    "levit_conv_256d",
    "levit_conv_384", "levit_conv_384_s8", "levit_conv_512", "levit_conv_512_s8", "levit_conv_512d"};
const std::vector<std::string> kSmallNames = {"levit_128s",      "levit_128",      "levit_192",      "levit_256",
                                              "levit_conv_128s", "levit_conv_128", "levit_conv_192", "levit_conv_256"};
const std::vector<std::string> kLargeLinearNames = {"levit_384", "levit_384_s8", "levit_512_s8",
                                                    "levit_512", "levit_256d",   "levit_512d"};
const std::vector<std::string> kLargeConvNames = {"levit_conv_384", "levit_conv_384_s8", "levit_conv_512_s8",
                                                  "levit_conv_512", "levit_conv_256d",   "levit_conv_512d"};

double drop_path_rate_of(torch::nn::Module& module, const std::string& child_name) {
  for (const auto& child : module.named_children()) {
    if (child.key() == child_name) return child.value()->as<timm::layers::DropPath>()->options.drop_prob();
  }
  return 0.0;
}

// Per stage: its downsample's drop_path (stages 1 on), then each block's drop_path1 (0 without one).
std::vector<double> block_drop_path_rates(torch::nn::Module& model) {
  std::vector<double> rates;
  for (const auto& stage : model.named_children()["stages"]->children()) {
    auto children = stage->named_children();
    if (children.contains("downsample")) rates.push_back(drop_path_rate_of(*children["downsample"], "drop_path"));
    for (const auto& block : children["blocks"]->children()) rates.push_back(drop_path_rate_of(*block, "drop_path1"));
  }
  return rates;
}

const ParityOptions kParity = {.tol = {1e-4, 1e-4}, .block_rates = block_drop_path_rates};

timm::ModelPtr make(const std::string& name, timm::ModelArgs args = {}) {
  timm::test::load_builtin_plugins();
  return timm::create_model(name, args);
}

timm::ModelArgs sized(int64_t img_size, int64_t num_classes = kNumClasses) {
  timm::ModelArgs args;
  args.num_classes = num_classes;
  args.kwargs["img_size"] = std::to_string(img_size);
  return args;
}

}  // namespace

TEST_CASE("registered levit_128s .. 256 and their conv variants have timm's state_dict, cfg, features; names") {
  const auto info = timm::test::check_registered(kOracle, kSmallNames, {"levit*"}, kParity);
  CHECK(info.at("list").at("levit*").get<std::vector<std::string>>() == kLevitNames);
  CHECK(timm::Registry::global().list(timm::PluginKind::kModel, "levit*") == kLevitNames);
}

TEST_CASE("registered levit_384, 384_s8, 512_s8, 512, 256d and 512d have timm's state_dict, cfg and features") {
  timm::test::check_registered(kOracle, kLargeLinearNames, {}, kParity);
}

TEST_CASE("registered levit_conv_384, 384_s8, 512_s8, 512, 256d and 512d have timm's state_dict, cfg and features") {
  timm::test::check_registered(kOracle, kLargeConvNames, {}, kParity);
}

TEST_CASE("levit_128s matches timm both ways at img_size 64 (linear mode, distilled heads)") {
  timm::test::run_parity(kOracle, {{"levit_128s_64", "levit_128s", 3, 64, 2, {{"img_size", 64}}}}, kParity);
}

TEST_CASE("levit_conv_128s matches timm both ways: one channel at img_size 48 (conv mode, odd grid)") {
  timm::test::run_parity(kOracle, {{"levit_conv_128s_c1_48", "levit_conv_128s", 1, 48, 2, {{"img_size", 48}}}},
                         kParity);
}

TEST_CASE("levit forward_head without a classifier is the pre-logits features (linear and conv)") {
  timm::test::check_head_split("levit_128s", 64, {{"img_size", 64}});
  timm::test::check_head_split("levit_conv_128s", 48, {{"img_size", 48}});
}

TEST_CASE("levit init follows timm's statistics: torch defaults, bn weights 1 / 0, heads trunc_normal(.02)") {
  timm::test::check_init_stats(kOracle, {"levit_128s", "levit_conv_128s"});
  at::manual_seed(0);
  const auto params = make("levit_128s")->named_parameters();
  CHECK(params["stages.0.blocks.0.attn.proj.ln.bn.weight"].abs().max().item<double>() == 0.0);
  CHECK(params["stages.0.blocks.0.mlp.ln2.bn.weight"].abs().max().item<double>() == 0.0);
  CHECK(params["stages.1.downsample.attn_downsample.proj.ln.bn.weight"].min().item<double>() == 1.0);
  CHECK(params["stages.1.downsample.mlp.ln2.bn.weight"].abs().max().item<double>() == 0.0);
  CHECK(params["stages.2.blocks.0.attn.attention_biases"].abs().max().item<double>() == 0.0);
  CHECK(params["head_dist.linear.weight"].std().item<double>() == doctest::Approx(0.02).epsilon(0.05));
  CHECK(params["head.linear.bias"].abs().max().item<double>() == 0.0);
}

TEST_CASE("levit distilled head, feature_info, forward_intermediates' levels, pretrained cfg") {
  c10::NoGradGuard no_grad;
  const at::Tensor x = at::randn({2, 3, 64, 64});
  timm::ModelPtr model = make("levit_128s", sized(64));
  model->eval();
  CHECK(model->has_distillation_head());
  const auto [cls, dist] = model->forward_distilled(x);
  CHECK((cls.sizes() == at::IntArrayRef{2, kNumClasses}));
  CHECK(at::allclose(model->forward(x), (cls + dist) / 2, 1e-5, 1e-6));
  // timm averages the two heads in training too unless distilled_training is set.
  model->train();
  const at::Tensor train_out = model->forward(x);
  CHECK((train_out.sizes() == at::IntArrayRef{2, kNumClasses}));
  model->eval();
  CHECK_FALSE(make("levit_512", sized(64))->has_distillation_head());
  CHECK_FALSE(make("levit_128s", sized(64, 0))->has_distillation_head());

  for (const std::string name : {"levit_128s", "levit_conv_128s"}) {
    CAPTURE(name);
    timm::ModelPtr features = make(name, sized(64, 0));
    features->eval();
    CHECK((features->forward(x).sizes() == at::IntArrayRef{2, 384}));
    const timm::Intermediates inter = features->forward_intermediates(x);
    REQUIRE(inter.intermediates.size() == 3);
    CHECK((inter.intermediates[0].sizes() == at::IntArrayRef{2, 128, 4, 4}));
    CHECK((inter.intermediates[1].sizes() == at::IntArrayRef{2, 256, 2, 2}));
    CHECK((inter.intermediates[2].sizes() == at::IntArrayRef{2, 384, 1, 1}));
    CHECK(at::equal(inter.final, features->forward_features(x)));
    const timm::Intermediates early = features->forward_intermediates(
        x, timm::IntermediatesOptions().indices(std::vector<int64_t>{1}).stop_early(true));
    REQUIRE(early.intermediates.size() == 1);
    CHECK(features->feature_info()[0] == timm::FeatureInfo{128, 16, "stages.0"});
    CHECK(features->feature_info()[2] == timm::FeatureInfo{384, 64, "stages.2"});
    CHECK_THROWS_AS(features->forward_intermediates(x, timm::IntermediatesOptions().output_fmt("NLC")),
                    timm::UsageError);
    CHECK_THROWS_AS(features->forward_intermediates(x, timm::IntermediatesOptions().indices(int64_t{4})),
                    timm::UsageError);
    CHECK(features->pretrained_cfg().classifier == "head.linear");
    CHECK(features->pretrained_cfg().first_conv == "stem.conv1.linear");
  }
  CHECK(make("levit_384_s8", sized(64, 0))->feature_info()[0] == timm::FeatureInfo{384, 8, "stages.0"});
  CHECK(make("levit_512", sized(64, 0))->pretrained_cfg().hf_hub_id.empty());

  // No pooling and no classifier: the final tokens (linear) or map (conv).
  timm::ModelArgs args = sized(64, 0);
  args.global_pool = "";
  CHECK((make("levit_128s", args)->forward(x).sizes() == at::IntArrayRef{2, 1, 384}));
  CHECK((make("levit_conv_128s", args)->forward(x).sizes() == at::IntArrayRef{2, 384, 1, 1}));

  timm::test::check_head_dropout_gives_bias("levit_512", sized(64), "head.linear.bias", x);
}

TEST_CASE("levit rejects what timm rejects") {
  timm::ModelArgs args = sized(64);
  args.global_pool = "max";  // timm: assert global_pool in ('', 'avg')
  CHECK_THROWS_WITH_AS(make("levit_128s", args), doctest::Contains("'max'"), timm::UsageError);
  args.global_pool = "";
  CHECK_THROWS_WITH_AS(make("levit_conv_128s", args), doctest::Contains("--num-classes 0"), timm::UsageError);
  args = sized(64);
  args.kwargs["not_a_levit_arg"] = "5";  // timm: TypeError
  CHECK_THROWS_AS(make("levit_128s", args), timm::UsageError);
  args = {};
  args.kwargs["img_size"] = "8";  // smaller than the stem's stride: no token grid
  CHECK_THROWS_AS(make("levit_128s", args), timm::UsageError);
  args = {};
  args.drop_path_rate = -0.1;
  CHECK_THROWS_AS(make("levit_128s", args), timm::UsageError);
}

TEST_CASE("levit --grad-checkpointing: each stage checkpointed, the plain step's gradients") {
  timm::test::check_grad_checkpointing("levit_128s", 32, 32, {{"img_size", "32"}});
  timm::test::check_grad_checkpointing("levit_conv_128s", 32, 32, {{"img_size", "32"}});
}

}  // namespace test_levit
