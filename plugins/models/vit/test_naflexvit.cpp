// NaFlexVit against timm: image input through the model-parity harness
// (tests/oracle/vit_oracle.py, both ways), NaFlex patch batches through
// tests/oracle/naflex_patches_oracle.py (timm's weights, a batch of five
// images of four grid sizes padded to one length: eval logits, the train
// loss and every parameter's gradient). Tolerance for every float
// comparison: |ours - timm| <= 1e-4 + 1e-4 * |timm| (one thread, float32).
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

namespace test_naflexvit {

namespace {

using timm::test::ParityCase;

const nlohmann::json kSmall = {{"embed_dim", 64}, {"num_heads", 2}, {"depth", 2}};

nlohmann::json small(nlohmann::json extra = nlohmann::json::object()) {
  nlohmann::json kwargs = kSmall;
  kwargs.update(extra);
  return kwargs;
}

// Image input, reduced through timm's cfg keywords: the 16 x 16 position
// table resampled (bicubic, antialias) to 4 x 4 and to a 3 x 5 grid, square
// and aspect-preserving (par: a 5 x 5 resample cropped), factorized (par),
// the 'map' pool, SigLIP (bilinear, GELU tanh) at its own grid, RADIO (class
// token pool, no final norm, 128 x 128 table bilinear without antialias,
// align_corners), SO150M2 (no qkv bias), dynamic_img_pad at 50 x 70, and a
// class token with avgmax over the prefix tokens too.
const std::vector<ParityCase> kCases = {
    {"gap_64", "naflexvit_base_patch16_gap", 3, 64, 2, small()},
    {"gap_48x80", "naflexvit_base_patch16_gap", 3, 80, 2, small(), 48},
    {"par_gap_48x80", "naflexvit_base_patch16_par_gap", 3, 80, 2, small(), 48},
    {"parfac_gap_48x80", "naflexvit_base_patch16_parfac_gap", 3, 80, 2, small(), 48},
    {"map_64_c1", "naflexvit_base_patch16_map", 1, 64, 2, small()},
    {"siglip_256", "naflexvit_base_patch16_siglip", 3, 256, 2, small({{"depth", 1}})},
    {"radio_v3_48x64", "naflexvit_base_patch16_radio_v3", 3, 64, 2, small(), 48},
    {"so150m2_map_64", "naflexvit_so150m2_patch16_reg1_map", 3, 64, 2, small()},
    {"gap_pad_50x70", "naflexvit_base_patch16_gap", 3, 70, 2, small({{"dynamic_img_pad", true}}), 50},
    {"cls_avgmax_prefix", "naflexvit_base_patch16_gap", 3, 64, 2,
     small({{"class_token", true}, {"global_pool", "avgmax"}, {"pool_include_prefix", true}})},
    {"gap_channels_first_48x80", "naflexvit_base_patch16_gap", 3, 80, 2, small({{"patchify_channels_last", false}}),
     48},
};

const timm::test::ParityOptions kParity = {.tol = {1e-4, 1e-4}, .block_rates = timm::test::blocks_drop_path1_rates};

// NaFlex patch input: each pool and position embedding kind, the key-only
// mask, the prefix tokens in the pool, RADIO's and SigLIP's resampling.
struct PatchCase {
  std::string id;
  std::string name;
  nlohmann::json kwargs;
  int64_t batch_patch = 0;  // the batch's patch size, as (B, N, Ph, Pw, C); 0: the model's, flat
};

const std::vector<PatchCase> kPatchCases = {
    {"gap", "naflexvit_base_patch16_gap", small()},
    {"par_gap", "naflexvit_base_patch16_par_gap", small()},
    {"parfac_gap", "naflexvit_base_patch16_parfac_gap", small()},
    {"map", "naflexvit_base_patch16_map", small()},
    {"siglip", "naflexvit_base_patch16_siglip", small()},
    {"radio_v3", "naflexvit_base_patch16_radio_v3", small()},
    {"max_keyonly_prefix", "naflexvit_base_patch16_gap",
     small({{"global_pool", "max"}, {"use_key_only_attn_mask", true}, {"pool_include_prefix", true}})},
    {"map_prefix_avgmax_cls", "naflexvit_base_patch16_map",
     small({{"class_token", true}, {"pool_include_prefix", true}})},
    {"avgmax_factorized", "naflexvit_base_patch16_gap",
     small({{"global_pool", "avgmax"}, {"pos_embed", "factorized"}})},
    // timm's variable patch size batches: the projection resampled (bicubic,
    // bilinear for SigLIP) to 8x8 patches; 16x16 ones unflattened.
    {"interp_p8", "naflexvit_base_patch16_gap", small({{"enable_patch_interpolator", true}}), 8},
    {"interp_p8_siglip", "naflexvit_base_patch16_siglip", small({{"enable_patch_interpolator", true}}), 8},
    {"interp_p16", "naflexvit_base_patch16_map", small({{"enable_patch_interpolator", true}}), 16},
    // Channels-first patches ((C, Ph, Pw) flat; (B, N, C, Ph, Pw) unflattened).
    {"gap_channels_first", "naflexvit_base_patch16_gap", small({{"patchify_channels_last", false}})},
    {"interp_p8_channels_first", "naflexvit_base_patch16_gap",
     small({{"enable_patch_interpolator", true}, {"patchify_channels_last", false}}), 8},
};

timm::ModelPtr make(const std::string& name, const nlohmann::json& kwargs, int64_t num_classes = 10) {
  timm::test::load_builtin_plugins();
  timm::ModelArgs args = timm::test::parity_args(ParityCase{name, name, 3, 224, 2, kwargs});
  args.num_classes = num_classes;
  return timm::create_model(name, args);
}

// An image batch as NaFlex patches with every patch valid (the layout of
// timm's batch_patchify), plus `padding` zero patches per sample.
timm::PatchBatch as_patches(const at::Tensor& images, int64_t patch, int64_t padding = 0) {
  const int64_t b = images.size(0), c = images.size(1), gh = images.size(2) / patch, gw = images.size(3) / patch;
  at::Tensor patches =
      images.reshape({b, c, gh, patch, gw, patch}).permute({0, 2, 4, 3, 5, 1}).reshape({b, gh * gw, -1});
  const at::Tensor ys = at::arange(gh).repeat_interleave(gw);
  const at::Tensor xs = at::arange(gw).repeat(gh);
  at::Tensor coord = at::stack({ys, xs}, 1).unsqueeze(0).expand({b, -1, -1});
  at::Tensor valid = at::ones({b, gh * gw}, at::kBool);
  if (padding > 0) {
    patches = at::cat({patches, at::zeros({b, padding, patches.size(2)})}, 1);
    coord = at::cat({coord, at::zeros({b, padding, 2}, at::kLong)}, 1);
    valid = at::cat({valid, at::zeros({b, padding}, at::kBool)}, 1);
  }
  return {patches, coord.contiguous(), valid};
}

}  // namespace

TEST_CASE("naflexvit on images matches timm both ways: eval and train logits, gradients, weights, intermediates") {
  timm::test::run_parity("vit_oracle.py", kCases, kParity);
}

TEST_CASE("naflexvit on NaFlex patch batches matches timm: eval logits, train loss, every gradient") {
  nlohmann::json cases = nlohmann::json::array();
  for (const auto& c : kPatchCases) {
    nlohmann::json one = {{"id", c.id}, {"name", c.name}, {"kwargs", c.kwargs}};
    if (c.batch_patch > 0) one["batch_patch"] = c.batch_patch;
    cases.push_back(one);
  }
  const auto timm_out = timm::test::oracle_tensors("naflex_patches_oracle.py", {cases.dump()});
  const timm::test::ThreadCount one_thread(1);
  const timm::test::Tolerance tol{1e-4, 1e-4};
  for (const auto& c : kPatchCases) {
    CAPTURE(c.id);
    const std::string prefix = c.id + ".";
    const auto at_key = [&](const std::string& key) -> const at::Tensor& {
      const std::string name = prefix + key;
      const auto it = timm_out.find(name);
      REQUIRE_MESSAGE(it != timm_out.end(), name);
      return it->second;
    };
    timm::ModelPtr model = make(c.name, c.kwargs);
    timm::NamedTensors weights;
    for (const auto& [key, tensor] : timm_out) {
      if (key.rfind(prefix + "model.", 0) == 0) weights.emplace_back(key.substr(prefix.size() + 6), tensor);
    }
    timm::load_state_dict(*model, weights, /*strict=*/true);
    const timm::PatchBatch batch{at_key("patches"), at_key("patch_coord"), at_key("patch_valid")};
    model->eval();
    {
      c10::NoGradGuard no_grad;
      const at::Tensor logits = model->forward_patches(batch);
      CHECK(timm::test::all_close(logits, at_key("logits"), tol));
    }
    model->train();
    const at::Tensor loss = at::cross_entropy_loss(model->forward_patches(batch), at_key("target"));
    loss.backward();
    CHECK(timm::test::all_close(loss.reshape({1}), at_key("loss"), tol));
    for (const auto& param : model->named_parameters()) {
      CAPTURE(param.key());
      REQUIRE(param.value().grad().defined());
      CHECK(timm::test::all_close(param.value().grad(), at_key("grad." + param.key()), tol));
    }
  }
}

TEST_CASE("naflexvit: an image as all-valid patches gives the image's logits, and padding changes nothing") {
  const timm::test::ThreadCount one_thread(1);
  c10::NoGradGuard no_grad;
  for (const std::string name : {"naflexvit_base_patch16_gap", "naflexvit_base_patch16_map",
                                 "naflexvit_base_patch16_parfac_gap", "naflexvit_base_patch16_radio_v3"}) {
    CAPTURE(name);
    at::manual_seed(0);
    timm::ModelPtr model = make(name, small());
    model->eval();
    REQUIRE(model->patch_size() == std::array<int64_t, 2>{16, 16});
    const at::Tensor images = at::randn({2, 3, 48, 80});
    const at::Tensor logits = model->forward(images);
    REQUIRE(at::isfinite(logits).all().item<bool>());
    CHECK(timm::test::all_close(model->forward_patches(as_patches(images, 16)), logits, {1e-5, 1e-5}));
    CHECK(timm::test::all_close(model->forward_patches(as_patches(images, 16, 7)), logits, {1e-5, 1e-5}));
  }
}

TEST_CASE("naflexvit refuses bad input and arguments with a message naming them") {
  c10::NoGradGuard no_grad;
  timm::ModelPtr model = make("naflexvit_base_patch16_gap", small());
  CHECK_THROWS_WITH_AS(model->forward(at::randn({1, 3, 40, 48})), doctest::Contains("multiples of the patch size 16"),
                       timm::UsageError);
  CHECK_THROWS_WITH_AS(model->forward(at::randn({1, 1, 32, 32})), doctest::Contains("(N, 3, H, W)"), timm::UsageError);
  timm::PatchBatch batch = as_patches(at::randn({2, 3, 32, 32}), 16);
  timm::PatchBatch wrong_dim{batch.patches.slice(2, 0, 100), batch.patch_coord, batch.patch_valid};
  CHECK_THROWS_WITH_AS(model->forward_patches(wrong_dim), doctest::Contains("expected patches (B, N, 768)"),
                       timm::UsageError);
  timm::PatchBatch float_coord{batch.patches, batch.patch_coord.to(at::kFloat), batch.patch_valid};
  CHECK_THROWS_AS(model->forward_patches(float_coord), timm::UsageError);
  timm::PatchBatch no_valid{batch.patches, batch.patch_coord, at::Tensor()};
  CHECK_THROWS_WITH_AS(model->forward_patches(no_valid), doctest::Contains("none"), timm::UsageError);
  // Patches of another size need the patch interpolator.
  const timm::PatchBatch eights = as_patches(at::randn({2, 3, 32, 32}), 8);
  const timm::PatchBatch unflat{eights.patches.view({2, 16, 8, 8, 3}), eights.patch_coord, eights.patch_valid};
  CHECK_THROWS_WITH_AS(model->forward_patches(unflat),
                       doctest::Contains("patches of 8x8, but its patch size is 16 (--model-kwargs "
                                         "enable_patch_interpolator=true"),
                       timm::UsageError);
  // A channels-first model reads 5-D patches as (B, N, C, Ph, Pw).
  timm::ModelPtr first = make("naflexvit_base_patch16_gap",
                              small({{"patchify_channels_last", false}, {"enable_patch_interpolator", true}}));
  CHECK(model->patchify_channels_last());
  CHECK_FALSE(first->patchify_channels_last());
  CHECK_THROWS_WITH_AS(first->forward_patches(unflat), doctest::Contains("or (B, N, 3, Ph, Pw), integer patch_coord"),
                       timm::UsageError);
  CHECK_THROWS_WITH_AS(make("naflexvit_base_patch16_gap", small({{"pos_embed", "rope"}})),
                       doctest::Contains("pos_embed=rope: expected one of 'learned'"), timm::UsageError);
  CHECK_THROWS_WITH_AS(make("naflexvit_base_patch16_gap", small({{"global_pool", "token"}})),
                       doctest::Contains("has no class token"), timm::UsageError);
  CHECK_THROWS_WITH_AS(make("naflexvit_base_patch16_gap", small({{"rope_type", "axial"}})),
                       doctest::Contains("rope_type"), timm::UsageError);
  // A model that takes images only says so.
  timm::ModelPtr vit = make("vit_tiny_patch16_224", nlohmann::json{{"depth", 1}});
  CHECK_FALSE(vit->patch_size().has_value());
  CHECK_THROWS_WITH_AS(vit->forward_patches(batch), doctest::Contains("takes images only"), timm::UsageError);
}

TEST_CASE("naflexvit grad checkpointing gives the plain run's logits and gradients") {
  timm::test::check_grad_checkpointing("naflexvit_base_patch16_gap", 48, 64,
                                       {{"embed_dim", "64"}, {"num_heads", "2"}, {"depth", "3"}});
}

TEST_CASE("every naflexvit timm lists is registered, in timm's order, with timm's state_dict, count and cfg") {
  const std::vector<std::string> names = {"naflexvit_base_patch16_gap",        "naflexvit_base_patch16_par_gap",
                                          "naflexvit_base_patch16_parfac_gap", "naflexvit_base_patch16_map",
                                          "naflexvit_base_patch16_siglip",     "naflexvit_base_patch16_radio_v3"};
  const auto info = timm::test::check_registered("vit_oracle.py", names, {"naflexvit_*"}, kParity);
  CHECK(timm::Registry::global().list(timm::PluginKind::kModel, "naflexvit_*") ==
        info.at("list").at("naflexvit_*").get<std::vector<std::string>>());
  CHECK(info.at("list").at("naflexvit_*").size() == 14);
}

TEST_CASE("naflexvit starts as timm's: init statistics of every tensor (fix_init, tokens, tables, attn_pool)") {
  timm::test::check_init_stats("vit_oracle.py", {"naflexvit_base_patch16_gap", "naflexvit_base_patch16_map",
                                                 "naflexvit_base_patch16_parfac_gap"});
}

// SO150M2 to ViT-g (150M to 1.1B parameters): built at depth 1.
TEST_CASE("the large naflexvits have timm's blocks, parameter count and pretrained cfg (built at depth 1)") {
  timm::test::check_registered_depth1(
      "vit_oracle.py",
      {"naflexvit_so150m2_patch16_reg1_gap", "naflexvit_so150m2_patch16_reg1_map", "naflexvit_so400m_patch16_siglip",
       "naflexvit_large_patch16_radio_v3", "naflexvit_huge_patch16_radio_v3", "naflexvit_giant_patch16_radio_v3",
       "naflexvit_so400m_patch16_radio_v4", "naflexvit_huge_patch16_radio_v4"});
}

}  // namespace test_naflexvit
