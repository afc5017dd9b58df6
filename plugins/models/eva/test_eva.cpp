// EVA / EVA-02 plugin against timm (tests/oracle/eva_oracle.py) through the
// shared harness (tests/support/model_parity.hpp), both ways: timm's weights
// load here and give timm's logits, eval forward_features / forward_head /
// pre-logits outputs, forward_intermediates, bfloat16 logits and gradients;
// our weights load in timm and give our logits. The oracle also draws the
// LayerScale factors and q / v biases and undoes the head's 0.001 init scale.
// Tolerance |ours - timm| <= 1e-4 + 1e-4 * |timm| (one thread, float32).
//
// Small inputs through timm's img_size kwarg (the RoPE grid then scales 4x4
// patches to the 16x16 reference grid); the block types only the big names
// use (EVA-g's GELU Mlp, EVA-02-L's separate q/k/v with SwiGLU norm and
// attention norm, EVA-02-CLIP-E's post-norm block) at a small width through
// timm's embed_dim / depth / num_heads kwargs.
#include <algorithm>
#include <array>
#include <cmath>
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
#include "timm/layers/rope.hpp"
#include "timm/models/model.hpp"
#include "timm/models/state_dict.hpp"
#include "timm/plugin/registry.hpp"

// Last: c10/util/Logging.h defines a CHECK macro that doctest must override.
#include <doctest/doctest.h>

namespace test_eva {

namespace {

using timm::test::ParityCase;

constexpr const char* kOracle = "eva_oracle.py";

// The names built in full against timm (up to ~90M parameters).
const std::vector<std::string> kNames = {"eva02_tiny_patch14_224",
                                         "eva02_small_patch14_224",
                                         "eva02_base_patch14_224",
                                         "eva02_tiny_patch14_336",
                                         "eva02_small_patch14_336",
                                         "eva02_base_patch14_448",
                                         "eva02_base_patch16_clip_224",
                                         "vit_medium_patch16_rope_reg1_gap_256",
                                         "vit_mediumd_patch16_rope_reg1_gap_256",
                                         "vit_betwixt_patch16_rope_reg4_gap_256",
                                         "vit_base_patch16_rope_reg1_gap_256"};
// ~300M parameters each: their own test case.
const std::vector<std::string> kLargeNames = {"eva02_large_patch14_224", "eva02_large_patch14_448",
                                              "eva02_large_patch14_clip_224", "eva02_large_patch14_clip_336"};
// 1.0B to 4.4B parameters (4 to 17 GB in float32): built here with one block.
const std::vector<std::string> kGiantNames = {"eva_giant_patch14_224", "eva_giant_patch14_336", "eva_giant_patch14_560",
                                              "eva_giant_patch14_clip_224", "eva02_enormous_patch14_clip_224"};

const nlohmann::json kSmallWidth = {{"embed_dim", 128}, {"depth", 3}, {"num_heads", 2}};

nlohmann::json with(nlohmann::json base, const nlohmann::json& extra) {
  for (const auto& [key, value] : extra.items()) base[key] = value;
  return base;
}

// EVA-02-Ti (fused qkv with q/v bias, packed SwiGLU, RoPE scaled to the
// reference grid, avg pool with fc_norm) at 56 px; with the class token pool
// (final norm), LayerScale and q/k norm on one channel at 42 px; dynamic
// sizes with padding on a non-square input (pos_embed resampled, a RoPE table
// per grid); EVA-02-B-CLIP's separate q/k/v, normed SwiGLU and attention
// norm; EVA-g's GELU Mlp without RoPE; EVA-02-CLIP-E's post-norm blocks; an
// SBB RoPE ViT (register token, no class token, no abs pos_embed, no qkv bias,
// LayerScale).
const std::vector<ParityCase> kEva02TinyCases = {
    {"eva02_tiny_56", "eva02_tiny_patch14_224", 3, 56, 2, {{"img_size", 56}}},
    {"eva02_tiny_c1_token_ls_qknorm",
     "eva02_tiny_patch14_224",
     1,
     42,
     2,
     {{"img_size", 42}, {"global_pool", "token"}, {"init_values", 1e-5}, {"qk_norm", true}}},
    {"eva02_tiny_dynamic_pad_44x70",
     "eva02_tiny_patch14_224",
     3,
     70,
     2,
     {{"dynamic_img_size", true}, {"dynamic_img_pad", true}},
     44},
};
const std::vector<ParityCase> kBlockCases = {
    {"eva02_base_clip_small", "eva02_base_patch16_clip_224", 3, 64, 2, with(kSmallWidth, {{"img_size", 64}})},
    {"eva_giant_small", "eva_giant_patch14_224", 3, 56, 2, with(kSmallWidth, {{"img_size", 56}})},
    {"eva02_enormous_small", "eva02_enormous_patch14_clip_224", 3, 56, 2, with(kSmallWidth, {{"img_size", 56}})},
    {"vit_mediumd_rope_reg1", "vit_mediumd_patch16_rope_reg1_gap_256", 3, 64, 2, {{"img_size", 64}, {"depth", 2}}},
};

std::vector<double> block_drop_path_rates(torch::nn::Module& model) {
  std::vector<double> rates;
  for (const auto& block : model.named_children()["blocks"]->children()) {
    rates.push_back(timm::test::drop_prob(*block, "drop_path1"));
  }
  return rates;
}

const timm::test::ParityOptions kParity = {.tol = {1e-4, 1e-4}, .block_rates = block_drop_path_rates};

const std::vector<std::string> kPatterns = {"eva*", "vit_*_rope_reg*"};

timm::ModelPtr make(const std::string& name, timm::ModelArgs args = {}) {
  timm::test::load_builtin_plugins();
  return timm::create_model(name, args);
}

}  // namespace

TEST_CASE("eva02_tiny matches timm both ways: img_size 56, token pool with LayerScale and qk_norm, dynamic sizes") {
  timm::test::run_parity(kOracle, kEva02TinyCases, kParity);
}

TEST_CASE("eva block types match timm both ways: EVA-02-CLIP, EVA-g, EVA-02-CLIP-E post-norm, RoPE ViT registers") {
  timm::test::run_parity(kOracle, kBlockCases, kParity);
}

TEST_CASE("eva forward_head without a classifier is the pre-logits features (avg + fc_norm, token, registers)") {
  timm::test::check_head_split("eva02_tiny_patch14_224", 28, {{"img_size", 28}});
  timm::test::check_head_split("eva02_base_patch16_clip_224", 32, with(kSmallWidth, {{"img_size", 32}}));
  timm::test::check_head_split("vit_medium_patch16_rope_reg1_gap_256", 32, {{"img_size", 32}, {"depth", 2}});
}

TEST_CASE("every registered eva has timm's state_dict, parameter count, pretrained cfg, no_weight_decay, groups") {
  const auto info = timm::test::check_registered(kOracle, kNames, kPatterns, kParity);
  // Our names are timm's names, and list_models('eva*') lists ours in timm's
  // order (timm's eva_large_* are VisionTransformers: the vit plugin registers them).
  for (const std::string pattern : {"eva*", "vit_*_rope_reg*"}) {
    std::vector<std::string> timm_listed;
    for (const auto& name : info.at("list").at(pattern).get<std::vector<std::string>>()) {
      if (timm::Registry::global().find(timm::PluginKind::kModel, name) != nullptr) timm_listed.push_back(name);
    }
    CHECK(timm::Registry::global().list(timm::PluginKind::kModel, pattern) == timm_listed);
  }
  for (const auto& name : kNames) {
    const auto& listed = info.at("list").at(name.rfind("vit_", 0) == 0 ? "vit_*_rope_reg*" : "eva*");
    CHECK_MESSAGE(std::find(listed.begin(), listed.end(), name) != listed.end(), name);
  }
}

TEST_CASE("every registered eva02 large has timm's state_dict, parameter count, pretrained cfg") {
  timm::test::check_registered(kOracle, kLargeNames, {}, kParity);
}

// EVA-g (1.0B) and EVA-02-CLIP-E (4.4B) are built here with one block
// (timm's depth kwarg) against timm's full model on the meta device.
TEST_CASE("the giant evas have timm's structure (built with one block), cfg and groups") {
  timm::test::check_registered_depth1(kOracle, kGiantNames);
}

TEST_CASE("eva init follows timm's statistics: trunc_normal(.02), depth-rescaled proj / fc2, head scaled by 1e-3") {
  timm::test::check_init_stats(
      kOracle, {"eva02_tiny_patch14_336", "eva02_base_patch14_448", "vit_medium_patch16_rope_reg1_gap_256"});
  at::manual_seed(0);
  const auto params = make("eva02_small_patch14_336")->named_parameters();
  CHECK(params["blocks.3.attn.q_bias"].abs().max().item<double>() == 0.0);
  CHECK(params["blocks.0.mlp.fc1.weight"].std().item<double>() == doctest::Approx(0.02).epsilon(0.02));
  // fix_init_weight: block i's proj and fc2 divided by sqrt(2 (i + 1)).
  CHECK(params["blocks.7.attn.proj.weight"].std().item<double>() == doctest::Approx(0.02 / 4.0).epsilon(0.03));
  CHECK(params["blocks.11.mlp.fc2.weight"].std().item<double>() ==
        doctest::Approx(0.02 / std::sqrt(24.0)).epsilon(0.03));
  CHECK(params["head.weight"].std().item<double>() == doctest::Approx(2e-5).epsilon(0.03));
  CHECK(params["cls_token"].std().item<double>() == doctest::Approx(0.02).epsilon(0.2));
  CHECK(params["fc_norm.weight"].min().item<double>() == 1.0);
}

TEST_CASE("eva head options: num_classes 0, global_pool '', drop_rate") {
  c10::NoGradGuard no_grad;
  const at::Tensor x = at::randn({2, 3, 56, 56});
  timm::ModelArgs args;
  args.kwargs["img_size"] = "56";
  args.num_classes = 0;
  timm::ModelPtr features = make("eva02_tiny_patch14_224", args);
  features->eval();
  CHECK((features->forward(x).sizes() == at::IntArrayRef{2, 192}));
  args.global_pool = "";
  timm::ModelPtr tokens = make("eva02_tiny_patch14_224", args);
  tokens->eval();
  CHECK((tokens->forward(x).sizes() == at::IntArrayRef{2, 1 + 16, 192}));
  // '' keeps the final norm on the tokens (timm's fc_norm is for 'avg' only).
  CHECK(tokens->named_parameters().contains("norm.weight"));
  CHECK_FALSE(tokens->named_parameters().contains("fc_norm.weight"));

  args.global_pool.reset();
  args.num_classes = 10;
  timm::test::check_head_dropout_gives_bias("eva02_tiny_patch14_224", args, "head.bias", x);
}

TEST_CASE("eva rejects what it does not support") {
  timm::ModelArgs args;
  args.global_pool = "map";
  CHECK_THROWS_WITH_AS(make("eva02_tiny_patch14_224", args), doctest::Contains("'map'"), timm::UsageError);
  args.global_pool = "token";
  CHECK_THROWS_WITH_AS(make("vit_medium_patch16_rope_reg1_gap_256", args), doctest::Contains("no class token"),
                       timm::UsageError);
  args = {};
  args.kwargs["rope_type"] = "mixed";
  CHECK_THROWS_AS(make("eva02_tiny_patch14_224", args), timm::UsageError);
  args.kwargs = {{"qk_norm", "true"}, {"depth", "1"}, {"embed_dim", "64"}, {"num_heads", "1"}};
  CHECK_THROWS_WITH_AS(make("eva02_enormous_patch14_clip_224", args), doctest::Contains("post-norm"), timm::UsageError);
  args.kwargs = {{"img_size", "50"}};
  CHECK_THROWS_WITH_AS(make("eva02_tiny_patch14_224", args), doctest::Contains("multiple of the patch size 14"),
                       timm::UsageError);
  args.kwargs = {{"img_size", "-14"}};
  CHECK_THROWS_WITH_AS(make("eva02_tiny_patch14_224", args), doctest::Contains("expected an integer in [1, 65536]"),
                       timm::UsageError);
  args.kwargs = {{"num_heads", "5"}};
  CHECK_THROWS_WITH_AS(make("eva02_tiny_patch14_224", args), doctest::Contains("must divide embed_dim"),
                       timm::UsageError);
  // A head width of 30: the rotary table needs a multiple of 4.
  args.kwargs = {{"embed_dim", "90"}, {"num_heads", "3"}};
  CHECK_THROWS_WITH_AS(make("eva02_tiny_patch14_224", args), doctest::Contains("multiple of 4"), timm::UsageError);
  args = {};
  args.drop_path_rate = 1.5;
  CHECK_THROWS_AS(make("eva02_tiny_patch14_224", args), timm::UsageError);
  args = {};
  args.kwargs["img_size"] = "56";
  timm::ModelPtr model = make("eva02_tiny_patch14_224", args);
  CHECK_THROWS_WITH_AS(model->forward(at::zeros({1, 3, 224, 224})), doctest::Contains("56x56"), timm::Error);
  args.kwargs = {{"dynamic_img_size", "true"}};
  model = make("eva02_tiny_patch14_224", args);
  CHECK_THROWS_WITH_AS(model->forward(at::zeros({1, 3, 50, 56})), doctest::Contains("multiples of the patch size"),
                       timm::Error);
  CHECK_THROWS_AS(
      model->forward_intermediates(at::zeros({1, 3, 56, 56}), timm::IntermediatesOptions().output_fmt("NHWC")),
      timm::UsageError);
}

TEST_CASE("RotaryEmbeddingCat: the cached table is the one built for its grid, in the dtype asked for") {
  auto options =
      timm::layers::RotaryEmbeddingCatOptions(64).in_pixels(false).ref_feat_shape(timm::layers::GridShape{16, 16});
  timm::layers::RotaryEmbeddingCat cached(options.feat_shape(timm::layers::GridShape{4, 6}));
  timm::layers::RotaryEmbeddingCat dynamic(options.feat_shape(std::nullopt));
  const at::Tensor table = cached->get_embed(at::TensorOptions().dtype(at::kFloat));
  CHECK((table.sizes() == at::IntArrayRef{24, 128}));
  CHECK(at::equal(table, dynamic->build_embed({4, 6}, c10::Device(c10::kCPU))));
  CHECK((cached->get_embed(at::TensorOptions().dtype(at::kBFloat16)).scalar_type() == at::kBFloat16));
  CHECK(at::equal(cached->get_embed(at::TensorOptions().dtype(at::kFloat)), table));
  // Position 0 has angle 0: sin 0 and cos 1; the rotation keeps norms per pair.
  CHECK(table[0].slice(0, 0, 64).abs().max().item<double>() == 0.0);
  CHECK(table[0].slice(0, 64).min().item<double>() == 1.0);
  const at::Tensor x = at::randn({2, 3, 24, 64});
  const at::Tensor rotated = timm::layers::apply_rot_embed_cat(x, table);
  const auto pair_norm = [](const at::Tensor& t) { return t.view({2, 3, 24, 32, 2}).pow(2).sum(-1); };
  CHECK(at::allclose(pair_norm(rotated), pair_norm(x), 1e-5, 1e-5));
  CHECK_THROWS_AS(dynamic->get_embed(at::TensorOptions()), timm::Error);
  CHECK_THROWS_AS(timm::layers::RotaryEmbeddingCat(timm::layers::RotaryEmbeddingCatOptions(30)), timm::UsageError);
}

TEST_CASE("eva --grad-checkpointing: each block checkpointed, the plain step's gradients") {
  timm::test::check_grad_checkpointing("eva02_tiny_patch14_224", 28, 28, {{"img_size", "28"}});
  timm::test::check_grad_checkpointing("eva02_enormous_patch14_clip_224", 28, 28,
                                       {{"img_size", "28"}, {"embed_dim", "64"}, {"depth", "2"}, {"num_heads", "2"}});
}

}  // namespace test_eva
