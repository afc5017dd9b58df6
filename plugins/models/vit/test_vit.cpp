// ViT / DeiT plugin against timm (tests/oracle/vit_oracle.py), both ways:
// timm's weights load here and give timm's logits, eval forward_features /
// forward_head / pre-logits outputs and gradients; our weights load in timm
// and give our logits. Tolerance for every float comparison:
// |ours - timm| <= 1e-4 + 1e-4 * |timm| (one thread, float32).
#include <algorithm>
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

namespace test_vit {

namespace {

using timm::test::ParityCase;

const std::vector<std::string> kNames = {"vit_tiny_patch16_224",
                                         "vit_tiny_patch16_384",
                                         "vit_small_patch32_224",
                                         "vit_small_patch32_384",
                                         "vit_small_patch16_224",
                                         "vit_small_patch16_384",
                                         "vit_small_patch8_224",
                                         "vit_base_patch32_224",
                                         "vit_base_patch32_384",
                                         "vit_base_patch16_224",
                                         "vit_base_patch16_384",
                                         "vit_base_patch8_224",
                                         "vit_medium_patch16_gap_240",
                                         "vit_medium_patch16_gap_256",
                                         "vit_medium_patch16_gap_384",
                                         "vit_betwixt_patch16_gap_256",
                                         "vit_base_patch16_gap_224",
                                         "vit_wee_patch16_reg1_gap_256",
                                         "vit_little_patch16_reg1_gap_256",
                                         "vit_little_patch16_reg4_gap_256",
                                         "vit_medium_patch16_reg1_gap_256",
                                         "vit_medium_patch16_reg4_gap_256",
                                         "vit_mediumd_patch16_reg4_gap_256",
                                         "vit_mediumd_patch16_reg4_gap_384",
                                         "vit_betwixt_patch16_reg1_gap_256",
                                         "vit_betwixt_patch16_reg4_gap_256",
                                         "vit_betwixt_patch16_reg4_gap_384",
                                         "vit_base_patch16_reg4_gap_256",
                                         "deit_tiny_patch16_224",
                                         "deit_small_patch16_224",
                                         "deit_base_patch16_224",
                                         "deit_base_patch16_384",
                                         "deit_tiny_distilled_patch16_224",
                                         "deit_small_distilled_patch16_224",
                                         "deit_base_distilled_patch16_224",
                                         "deit_base_distilled_patch16_384",
                                         "deit3_small_patch16_224",
                                         "deit3_small_patch16_384",
                                         "deit3_medium_patch16_224",
                                         "deit3_base_patch16_224",
                                         "deit3_base_patch16_384"};

// The models of 130M parameters and more, each test case on its own: building
// one here (allocation and timm's trunc_normal init) takes seconds.
const std::vector<std::string> kLargeNames = {
    "vit_large_patch32_224", "vit_large_patch32_384",   "vit_large_patch16_224",  "vit_large_patch16_384",
    "vit_large_patch14_224", "deit3_large_patch16_224", "deit3_large_patch16_384"};
// timm's EVA-L (ViT-L/14, ~304M parameters, average pool with fc_norm, OpenAI
// CLIP mean/std): VisionTransformers in vision_transformer.py, registered here.
const std::vector<std::string> kEvaLargeNames = {"eva_large_patch14_196", "eva_large_patch14_336"};
const std::vector<std::string> kHugeNames = {"vit_huge_patch14_224",
                                             "deit3_huge_patch14_224",
                                             "vit_so150m_patch16_reg4_gap_256",
                                             "vit_so150m_patch16_reg4_gap_384",
                                             "vit_so150m2_patch16_reg1_gap_256",
                                             "vit_so150m2_patch16_reg1_gap_384",
                                             "vit_so150m2_patch16_reg1_gap_448"};

// The smallest and the largest (by parameters) member, each head and block
// option: token pool; avg pool with fc_norm on one input channel; LayerScale
// with q/k norm; DeiT's distillation token and second head; register tokens
// with no_embed_class (pos_embed over the patches only); DeiT-III's class
// token with no_embed_class and LayerScale; dynamic_img_size at sizes other
// than the model's, non-square (pos_embed resampled with and without its
// prefix entries), and dynamic_img_pad at a size no multiple of the patch.
const std::vector<ParityCase> kCases = {
    {"vit_tiny", "vit_tiny_patch16_224", 3, 224, 2, nlohmann::json::object()},
    {"vit_tiny_avg_c1", "vit_tiny_patch16_224", 1, 224, 2, {{"global_pool", "avg"}}},
    {"vit_tiny_ls_qknorm", "vit_tiny_patch16_224", 3, 224, 2, {{"init_values", 1e-5}, {"qk_norm", true}}},
    {"deit_tiny_distilled", "deit_tiny_distilled_patch16_224", 3, 224, 2, nlohmann::json::object()},
    {"vit_base_patch32_384", "vit_base_patch32_384", 3, 384, 2, nlohmann::json::object()},
    {"vit_little_reg4", "vit_little_patch16_reg4_gap_256", 3, 256, 2, nlohmann::json::object()},
    {"deit3_small", "deit3_small_patch16_224", 3, 224, 2, nlohmann::json::object()},
    {"vit_tiny_dynamic_48x64", "vit_tiny_patch16_224", 3, 64, 2, {{"dynamic_img_size", true}}, 48},
    {"vit_tiny_dynamic_pad_50x70",
     "vit_tiny_patch16_224",
     3,
     70,
     2,
     {{"dynamic_img_size", true}, {"dynamic_img_pad", true}},
     50},
    {"vit_wee_reg1_dynamic_48x80", "vit_wee_patch16_reg1_gap_256", 3, 80, 2, {{"dynamic_img_size", true}}, 48},
};

std::vector<double> block_drop_path_rates(torch::nn::Module& model) {
  std::vector<double> rates;
  for (const auto& block : model.named_children()["blocks"]->children()) {
    double rate = 0.0;
    for (const auto& child : block->named_children()) {
      if (child.key() == "drop_path1") rate = child.value()->as<timm::layers::DropPath>()->options.drop_prob();
    }
    rates.push_back(rate);
  }
  return rates;
}

const timm::test::ParityOptions kParity = {.tol = {1e-4, 1e-4}, .block_rates = block_drop_path_rates};

const std::vector<std::string> kPatterns = {"vit_*", "deit_*", "deit3_*"};

// The list_models pattern a name of ours falls under.
std::string pattern_of(const std::string& name) {
  if (name.rfind("vit_", 0) == 0) return "vit_*";
  return name.rfind("deit3_", 0) == 0 ? "deit3_*" : "deit_*";
}

timm::ModelPtr make(const std::string& name, timm::ModelArgs args = {}) {
  timm::test::load_builtin_plugins();
  return timm::create_model(name, args);
}

}  // namespace

TEST_CASE("vit matches timm both ways: structure, eval and train logits, gradients, weights") {
  timm::test::run_parity("vit_oracle.py", kCases, kParity);
}

TEST_CASE(
    "vit forward_head without a classifier is the pre-logits features (token, avg + fc_norm, distilled, registers)") {
  timm::test::check_head_split("vit_tiny_patch16_224", 224);
  timm::test::check_head_split("vit_tiny_patch16_224", 224, {{"global_pool", "avg"}});
  timm::test::check_head_split("deit_tiny_distilled_patch16_224", 224);
  timm::test::check_head_split("vit_wee_patch16_reg1_gap_256", 256);
}

TEST_CASE("every registered vit/deit has timm's state_dict, parameter count, pretrained cfg, no_weight_decay, groups") {
  const auto info = timm::test::check_registered("vit_oracle.py", kNames, kPatterns, kParity);
  // Our names are timm's names, and --list-models 'deit_*' lists them in timm's order.
  for (const auto& name : kNames) {
    const auto& listed = info.at("list").at(pattern_of(name));
    CHECK_MESSAGE(std::find(listed.begin(), listed.end(), name) != listed.end(), name);
  }
  for (const std::string pattern : {"deit_*", "deit3_*"}) {
    std::vector<std::string> timm_listed;
    for (const auto& name : info.at("list").at(pattern).get<std::vector<std::string>>()) {
      if (timm::Registry::global().find(timm::PluginKind::kModel, name) != nullptr) timm_listed.push_back(name);
    }
    CHECK(timm::Registry::global().list(timm::PluginKind::kModel, pattern) == timm_listed);
  }
}

TEST_CASE("every registered large vit / deit3 has timm's state_dict, parameter count, pretrained cfg") {
  timm::test::check_registered("vit_oracle.py", kLargeNames, {}, kParity);
}

TEST_CASE("eva_large_patch14_196/336 have timm's state_dict, parameter count, pretrained cfg, feature_info") {
  const auto info = timm::test::check_registered("vit_oracle.py", kEvaLargeNames, {"eva_large_*"}, kParity);
  // timm's list_models('eva_large_*') is exactly these two, in this order.
  CHECK(info.at("list").at("eva_large_*").get<std::vector<std::string>>() == kEvaLargeNames);
  CHECK(timm::Registry::global().list(timm::PluginKind::kModel, "eva_large_*") == kEvaLargeNames);
}

TEST_CASE("every registered huge and so150m vit / deit3 has timm's state_dict, parameter count, pretrained cfg") {
  timm::test::check_registered("vit_oracle.py", kHugeNames, {}, kParity);
}

// ViT-g/14, ViT-G/14 and ViT-g/16 gap (1.0B to 1.8B parameters, 4 to 7 GB in
// float32 on each side) are too big to build against timm here: only their
// registration is checked, nothing is built.
TEST_CASE("the giant vits are registered (not built: 1B+ parameters)") {
  timm::test::load_builtin_plugins();
  for (const std::string name : {"vit_giant_patch14_224", "vit_gigantic_patch14_224", "vit_giant_patch16_gap_224"}) {
    CHECK_MESSAGE(timm::Registry::global().find(timm::PluginKind::kModel, name) != nullptr, name);
  }
}

TEST_CASE("vit init follows timm's statistics: trunc_normal(.02) linears and pos_embed, tiny cls/reg tokens") {
  timm::test::check_init_stats("vit_oracle.py", {"vit_tiny_patch16_224", "deit_tiny_distilled_patch16_224",
                                                 "vit_wee_patch16_reg1_gap_256", "deit3_small_patch16_224"});
  at::manual_seed(0);
  const auto params = make("vit_small_patch16_224")->named_parameters();
  CHECK(params["blocks.3.attn.qkv.bias"].abs().max().item<double>() == 0.0);
  CHECK(params["blocks.3.mlp.fc1.weight"].std().item<double>() == doctest::Approx(0.02).epsilon(0.02));
  CHECK(params["pos_embed"].std().item<double>() == doctest::Approx(0.02).epsilon(0.05));
  CHECK(params["cls_token"].abs().max().item<double>() < 1e-5);
  CHECK(params["norm.weight"].min().item<double>() == 1.0);
}

TEST_CASE("vit head options: num_classes 0, global_pool '', drop_rate") {
  c10::NoGradGuard no_grad;
  const at::Tensor x = at::randn({2, 3, 224, 224});

  timm::ModelArgs args;
  args.num_classes = 0;
  timm::ModelPtr features = make("vit_tiny_patch16_224", args);
  features->eval();
  CHECK((features->forward(x).sizes() == at::IntArrayRef{2, 192}));
  CHECK(timm::state_dict(*features).size() == timm::state_dict(*make("vit_tiny_patch16_224")).size() - 2);

  args.global_pool = "";
  timm::ModelPtr tokens = make("vit_tiny_patch16_224", args);
  tokens->eval();
  CHECK((tokens->forward(x).sizes() == at::IntArrayRef{2, 197, 192}));

  args = {};
  args.num_classes = 10;
  timm::test::check_head_dropout_gives_bias("vit_tiny_patch16_224", args, "head.bias", x);
}

TEST_CASE("vit rejects what it does not support") {
  timm::ModelArgs args;
  args.global_pool = "map";
  CHECK_THROWS_WITH_AS(make("vit_tiny_patch16_224", args), doctest::Contains("'map'"), timm::UsageError);
  args.global_pool = "avg";
  CHECK_THROWS_AS(make("deit_tiny_distilled_patch16_224", args), timm::UsageError);
  args = {};
  args.kwargs["reg_tokens"] = "4";
  CHECK_THROWS_AS(make("vit_tiny_patch16_224", args), timm::UsageError);
  args.kwargs = {{"qk_norm", "maybe"}};
  CHECK_THROWS_WITH_AS(make("vit_tiny_patch16_224", args), doctest::Contains("'maybe'"), timm::UsageError);
  args = {};
  args.drop_path_rate = 1.5;
  CHECK_THROWS_AS(make("vit_tiny_patch16_224", args), timm::UsageError);
  timm::ModelPtr model = make("vit_tiny_patch16_224");
  CHECK_THROWS_WITH_AS(model->forward(at::zeros({1, 3, 64, 64})), doctest::Contains("224x224"), timm::Error);
  // No class token to pool, as timm's assert.
  args = {};
  args.global_pool = "token";
  CHECK_THROWS_WITH_AS(make("vit_wee_patch16_reg1_gap_256", args), doctest::Contains("no class token"),
                       timm::UsageError);
  // dynamic_img_size without dynamic_img_pad: sizes must be multiples of the patch.
  args = {};
  args.kwargs["dynamic_img_size"] = "true";
  model = make("vit_tiny_patch16_224", args);
  CHECK_THROWS_WITH_AS(model->forward(at::zeros({1, 3, 50, 64})), doctest::Contains("multiples of the patch size"),
                       timm::Error);
}

TEST_CASE("vit dynamic_img_size: tokens follow the input's grid, pos_embed is resampled, not replaced") {
  c10::NoGradGuard no_grad;
  timm::ModelArgs args;
  args.num_classes = 0;
  args.global_pool = "";
  args.kwargs["dynamic_img_size"] = "true";
  timm::ModelPtr model = make("vit_tiny_patch16_224", args);
  model->eval();
  CHECK((model->forward(at::randn({1, 3, 48, 64})).sizes() == at::IntArrayRef{1, 1 + 3 * 4, 192}));
  CHECK((model->forward(at::randn({1, 3, 224, 224})).sizes() == at::IntArrayRef{1, 197, 192}));
  CHECK((model->named_parameters()["pos_embed"].sizes() == at::IntArrayRef{1, 197, 192}));
  args.kwargs["dynamic_img_pad"] = "true";
  model = make("vit_tiny_patch16_224", args);
  model->eval();
  CHECK((model->forward(at::randn({1, 3, 50, 70})).sizes() == at::IntArrayRef{1, 1 + 4 * 5, 192}));
  // Without dynamic_img_size, the same size as the model's (no resampling):
  // the same output as a model that resamples nothing.
  timm::ModelArgs fixed_args = args;
  fixed_args.kwargs.clear();
  timm::ModelPtr fixed = make("vit_tiny_patch16_224", fixed_args);
  fixed->eval();
  timm::load_state_dict(*fixed, timm::state_dict(*model), /*strict=*/true);
  const at::Tensor x = at::randn({1, 3, 224, 224});
  CHECK(at::allclose(fixed->forward(x), model->forward(x)));
}

TEST_CASE("vit --grad-checkpointing: each block checkpointed, the plain step's gradients") {
  // dynamic_img_size: a 2x2 patch grid at 32 px keeps the 12 blocks cheap.
  timm::test::check_grad_checkpointing("vit_tiny_patch16_224", 32, 32, {{"dynamic_img_size", "true"}});
}

}  // namespace test_vit
