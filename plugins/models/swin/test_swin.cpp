// Swin Transformer plugin (v1 and SwinV2) against timm
// (tests/oracle/swin_oracle.py), both ways: timm's weights load here and give
// timm's logits, eval forward_features / forward_head / pre-logits outputs
// and gradients (train mode with timm's default drop_path_rate 0.1, the
// DropPath draws seeded alike); our weights load in timm and give our logits.
// Tolerance for every float comparison: |ours - timm| <= 1e-4 + 1e-4 *
// |timm| (one thread, float32).
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
#include "timm/layers/window_attention.hpp"
#include "timm/models/model.hpp"
#include "timm/models/state_dict.hpp"
#include "timm/plugin/registry.hpp"

// Last: c10/util/Logging.h defines a CHECK macro that doctest must override.
#include <doctest/doctest.h>

namespace test_swin {

namespace {

using timm::test::ParityCase;

const std::vector<std::string> kNames = {"swin_tiny_patch4_window7_224",
                                         "swin_small_patch4_window7_224",
                                         "swin_base_patch4_window7_224",
                                         "swin_base_patch4_window12_384",
                                         "swin_s3_tiny_224",
                                         "swin_s3_small_224",
                                         "swin_s3_base_224"};
// 197M parameters each: a test case of their own, building one takes seconds.
const std::vector<std::string> kLargeNames = {"swin_large_patch4_window7_224", "swin_large_patch4_window12_384"};

// Small inputs through timm's img_size / window_size kwargs, each case a
// different window layout. swin_tiny at 64 px: 16x16 and 8x8 maps with 7x7
// windows (padded to 21 / 14, shifted by 3 in the odd blocks, masked), then
// maps of 4x4 and 2x2 that shrink the window to the map (no shift, smaller
// bias tables). At 56 px with window 4 on one input channel and the avgmax
// pool: 14x14 (padded to 16) and 7x7 maps with shift 2, PatchMerging padding
// the odd 7x7. swin_s3_tiny: per-stage windows (7, 7, 14, 7). always_partition
// keeps 7x7 windows and the shift on the 4x4 and 2x2 maps (padded, masked),
// with catavgmax's doubled head input.
const std::vector<ParityCase> kCases = {
    {"swin_tiny_64", "swin_tiny_patch4_window7_224", 3, 64, 2, {{"img_size", 64}}},
    {"swin_tiny_56_w4_avgmax_c1",
     "swin_tiny_patch4_window7_224",
     1,
     56,
     2,
     {{"img_size", 56}, {"window_size", 4}, {"global_pool", "avgmax"}}},
    {"swin_s3_tiny_64", "swin_s3_tiny_224", 3, 64, 2, {{"img_size", 64}}},
    {"swin_tiny_64_always_partition_catavgmax",
     "swin_tiny_patch4_window7_224",
     3,
     64,
     2,
     {{"img_size", 64}, {"always_partition", true}, {"global_pool", "catavgmax"}}},
};

// timm's swinv2_* of swin_transformer_v2.py (swinv2_cr_* is another family).
const std::vector<std::string> kV2Names = {
    "swinv2_tiny_window8_256",   "swinv2_tiny_window16_256",          "swinv2_small_window8_256",
    "swinv2_small_window16_256", "swinv2_base_window8_256",           "swinv2_base_window16_256",
    "swinv2_base_window12_192",  "swinv2_base_window12to16_192to256", "swinv2_base_window12to24_192to384"};
// 197M parameters each: a test case of their own.
const std::vector<std::string> kV2LargeNames = {"swinv2_large_window12_192", "swinv2_large_window12to16_192to256",
                                                "swinv2_large_window12to24_192to384"};

// SwinV2 in the v1 cases' layouts: swinv2_tiny at 64 px has 16x16 maps in 8x8
// windows shifted by 4 (masked), then maps of 8x8, 4x4 and 2x2 that the
// window covers whole (no shift; cpb tables of the smaller windows). At 56 px
// with window 4 on one input channel and the avgmax pool: 14x14 (padded to
// 16) and 7x7 maps with shift 2, the patch merging padding the odd 7x7.
// always_partition keeps 8x8 windows and the shift on the small maps, with
// catavgmax's doubled head input.
const std::vector<ParityCase> kV2Cases = {
    {"swinv2_tiny_64", "swinv2_tiny_window8_256", 3, 64, 2, {{"img_size", 64}}},
    {"swinv2_tiny_56_w4_avgmax_c1",
     "swinv2_tiny_window8_256",
     1,
     56,
     2,
     {{"img_size", 56}, {"window_size", 4}, {"global_pool", "avgmax"}}},
    {"swinv2_tiny_64_always_partition_catavgmax",
     "swinv2_tiny_window8_256",
     3,
     64,
     2,
     {{"img_size", 64}, {"always_partition", true}, {"global_pool", "catavgmax"}}},
};
// swinv2_base_window12to16_192to256 (87M parameters, the cheapest name with
// pretrained windows; a test case of its own) at 64 px with window 8: relative
// coordinates normalised by the pretrained windows 12, 12, 12, 6, not by the
// windows in use (8, 8, 4, 2 on these maps).
const std::vector<ParityCase> kV2PretrainedWindowCases = {
    {"swinv2_base_12to16_64_w8", "swinv2_base_window12to16_192to256", 3, 64, 2, {{"img_size", 64}, {"window_size", 8}}},
};

std::vector<double> block_drop_path_rates(torch::nn::Module& model) {
  std::vector<double> rates;
  for (const auto& stage : model.named_children()["layers"]->children()) {
    for (const auto& block : stage->named_children()["blocks"]->children()) {
      rates.push_back(timm::test::drop_prob(*block, "drop_path1"));
    }
  }
  return rates;
}

const timm::test::ParityOptions kParity = {.tol = {1e-4, 1e-4}, .block_rates = block_drop_path_rates};

timm::ModelPtr make(const std::string& name, timm::ModelArgs args = {}) {
  timm::test::load_builtin_plugins();
  return timm::create_model(name, args);
}

// Names matching `pattern` but swinv2_cr_* (swin_transformer_v2_cr.py's, not this plugin's).
std::vector<std::string> without_swinv2_cr(std::vector<std::string> names) {
  std::erase_if(names, [](const std::string& name) { return name.starts_with("swinv2_cr_"); });
  return names;
}

timm::ModelArgs small_args(int64_t num_classes = 10) {
  timm::ModelArgs args;
  args.num_classes = num_classes;
  args.kwargs["img_size"] = "64";
  return args;
}

}  // namespace

TEST_CASE("swin matches timm both ways: structure, eval and train logits, gradients, weights") {
  timm::test::run_parity("swin_oracle.py", kCases, kParity);
}

TEST_CASE("swin forward_head without a classifier is the pre-logits features (avg and avgmax pools)") {
  timm::test::check_head_split("swin_tiny_patch4_window7_224", 64, {{"img_size", 64}});
  timm::test::check_head_split("swin_tiny_patch4_window7_224", 64, {{"img_size", 64}, {"global_pool", "avgmax"}});
  timm::test::check_head_split("swin_s3_tiny_224", 64, {{"img_size", 64}});
}

TEST_CASE("every registered swin has timm's state_dict, parameter count, pretrained cfg, no_weight_decay, groups") {
  const auto info = timm::test::check_registered("swin_oracle.py", kNames, {"swin_*"}, kParity);
  // timm's swin_* are exactly ours (swinv2_* is another family), in timm's order.
  const auto timm_listed = info.at("list").at("swin_*").get<std::vector<std::string>>();
  CHECK(timm::Registry::global().list(timm::PluginKind::kModel, "swin_*") == timm_listed);
  CHECK(timm_listed.size() == kNames.size() + kLargeNames.size());
}

TEST_CASE("every registered large swin has timm's state_dict, parameter count, pretrained cfg") {
  timm::test::check_registered("swin_oracle.py", kLargeNames, {}, kParity);
}

TEST_CASE("swin init follows timm's statistics: trunc_normal(.02) linears and bias tables, default patch conv") {
  timm::test::check_init_stats("swin_oracle.py", {"swin_tiny_patch4_window7_224", "swin_s3_tiny_224"});
  at::manual_seed(0);
  const auto params = make("swin_tiny_patch4_window7_224")->named_parameters();
  CHECK(params["layers.2.blocks.3.mlp.fc1.weight"].std().item<double>() == doctest::Approx(0.02).epsilon(0.02));
  CHECK(params["layers.2.blocks.3.attn.qkv.bias"].abs().max().item<double>() == 0.0);
  CHECK(params["layers.2.blocks.3.attn.relative_position_bias_table"].abs().max().item<double>() <= 2.0);
  CHECK(params["layers.1.downsample.norm.weight"].min().item<double>() == 1.0);
  CHECK_FALSE(params.contains("layers.1.downsample.reduction.bias"));
}

TEST_CASE("swin state_dict leaves out timm's non-persistent buffers; windows shrink to small maps") {
  timm::ModelPtr model = make("swin_tiny_patch4_window7_224", small_args());
  for (const auto& [key, tensor] : timm::state_dict(*model)) {
    CAPTURE(key);
    CHECK(key.find("relative_position_index") == std::string::npos);
    CHECK(key.find("attn_mask") == std::string::npos);
  }
  const auto params = model->named_parameters();
  // 16x16 and 8x8 maps keep the 7x7 window (13 * 13 offsets); 4x4 and 2x2 shrink it.
  CHECK((params["layers.0.blocks.1.attn.relative_position_bias_table"].sizes() == at::IntArrayRef{169, 3}));
  CHECK((params["layers.2.blocks.0.attn.relative_position_bias_table"].sizes() == at::IntArrayRef{49, 12}));
  CHECK((params["layers.3.blocks.1.attn.relative_position_bias_table"].sizes() == at::IntArrayRef{9, 24}));
  std::vector<std::string> expected_nwd;
  for (const auto& item : params) {
    if (item.key().ends_with("relative_position_bias_table")) expected_nwd.push_back(item.key());
  }
  CHECK(model->no_weight_decay() == expected_nwd);
  CHECK(expected_nwd.size() == 12);
}

TEST_CASE("swin window layers: partition / reverse invert each other, index and mask as timm's construction") {
  const at::Tensor x = at::randn({2, 14, 21, 5});
  const at::Tensor windows = timm::layers::window_partition(x, {7, 7});
  CHECK((windows.sizes() == at::IntArrayRef{2 * 2 * 3, 7, 7, 5}));
  CHECK(at::equal(windows[4], x[0].slice(0, 7, 14).slice(1, 7, 14)));
  CHECK(at::equal(timm::layers::window_reverse(windows, {7, 7}, 14, 21), x));

  // Token (0, 0) against (1, 2) in a 3x4 window: offset (-1, -2) shifted to (1, 1), row times 2 * 4 - 1.
  const at::Tensor index = timm::layers::relative_position_index(3, 4);
  CHECK((index.sizes() == at::IntArrayRef{12, 12}));
  CHECK(index[0][1 * 4 + 2].item<int64_t>() == 1 * 7 + 1);
  CHECK(index.diagonal().eq(2 * 7 + 3).all().item<bool>());
  CHECK(index.max().item<int64_t>() == 5 * 7 - 1);

  CHECK_FALSE(timm::layers::shifted_window_attn_mask(14, 14, {7, 7}, {0, 0}).defined());
  // A 14x14 map (padded from 13) in 7x7 windows shifted by 3: the top-left
  // window holds one region, the bottom-right four; -100 between regions.
  const at::Tensor mask = timm::layers::shifted_window_attn_mask(13, 13, {7, 7}, {3, 3});
  CHECK((mask.sizes() == at::IntArrayRef{4, 49, 49}));
  CHECK(mask[0].eq(0).all().item<bool>());
  CHECK(mask[3][0][0].item<double>() == 0.0);
  CHECK(mask[3][0][48].item<double>() == -100.0);
  CHECK(mask.ne(0).logical_and(mask.ne(-100)).sum().item<int64_t>() == 0);
}

TEST_CASE("swin head options: num_classes 0, global_pool '' (per-position logits), drop_rate") {
  c10::NoGradGuard no_grad;
  const at::Tensor x = at::randn({2, 3, 64, 64});

  timm::ModelPtr features = make("swin_tiny_patch4_window7_224", small_args(0));
  features->eval();
  CHECK((features->forward(x).sizes() == at::IntArrayRef{2, 768}));
  CHECK((features->forward_features(x).sizes() == at::IntArrayRef{2, 2, 2, 768}));
  CHECK(timm::state_dict(*features).size() ==
        timm::state_dict(*make("swin_tiny_patch4_window7_224", small_args())).size() - 2);

  // No pooling: timm's Linear fc over the last dimension of the NHWC map.
  timm::ModelArgs args = small_args();
  args.global_pool = "";
  timm::ModelPtr unpooled = make("swin_tiny_patch4_window7_224", args);
  unpooled->eval();
  CHECK((unpooled->forward(x).sizes() == at::IntArrayRef{2, 2, 2, 10}));

  args = small_args();
  args.drop_path_rate = 0.0;
  timm::test::check_head_dropout_gives_bias("swin_tiny_patch4_window7_224", args, "head.fc.bias", x);
}

TEST_CASE("swin rejects what it does not support") {
  timm::ModelArgs args;
  args.global_pool = "median";
  CHECK_THROWS_WITH_AS(make("swin_tiny_patch4_window7_224", args), doctest::Contains("'median'"), timm::UsageError);
  args = {};
  args.kwargs["img_size"] = "66";  // not a multiple of the patch size 4
  CHECK_THROWS_AS(make("swin_tiny_patch4_window7_224", args), timm::UsageError);
  args.kwargs["img_size"] = "64.5";
  CHECK_THROWS_WITH_AS(make("swin_tiny_patch4_window7_224", args), doctest::Contains("expected an integer in [1, 65536]"),
                       timm::UsageError);
  args.kwargs = {{"window_size", "0"}};
  CHECK_THROWS_WITH_AS(make("swin_tiny_patch4_window7_224", args), doctest::Contains("expected an integer in [1, 65536]"),
                       timm::UsageError);
  args.kwargs = {{"dynamic_img_size", "true"}};
  CHECK_THROWS_WITH_AS(make("swin_tiny_patch4_window7_224", args), doctest::Contains("dynamic_img_size"),
                       timm::UsageError);
  args = {};
  args.drop_path_rate = 1.5;
  CHECK_THROWS_AS(make("swin_tiny_patch4_window7_224", args), timm::UsageError);
  // timm's strict_img_size: the input must be the model's size.
  timm::ModelPtr model = make("swin_tiny_patch4_window7_224", small_args());
  CHECK_THROWS_WITH_AS(model->forward(at::zeros({1, 3, 56, 56})), doctest::Contains("64x64"), timm::Error);
}

TEST_CASE("swin --grad-checkpointing: each stage's blocks checkpointed, the plain step's gradients") {
  // 64 px: shifted windows in stage 0, shrunken ones later.
  timm::test::check_grad_checkpointing("swin_tiny_patch4_window7_224", 64, 64, {{"img_size", "64"}});
}

TEST_CASE("swinv2 matches timm both ways: structure, eval and train logits, gradients, weights") {
  timm::test::run_parity("swin_oracle.py", kV2Cases, kParity);
}

TEST_CASE("swinv2 with pretrained windows matches timm both ways") {
  timm::test::run_parity("swin_oracle.py", kV2PretrainedWindowCases, kParity);
}

TEST_CASE("swinv2 forward_head without a classifier is the pre-logits features (avg and avgmax pools)") {
  timm::test::check_head_split("swinv2_tiny_window8_256", 64, {{"img_size", 64}});
  timm::test::check_head_split("swinv2_tiny_window8_256", 64, {{"img_size", 64}, {"global_pool", "avgmax"}});
}

TEST_CASE("every registered swinv2 has timm's state_dict, parameter count, pretrained cfg, no_weight_decay, groups") {
  const auto info = timm::test::check_registered("swin_oracle.py", kV2Names, {"swinv2_*"}, kParity);
  // timm's swinv2_* but swinv2_cr_* are exactly ours, in timm's order.
  const auto timm_listed = without_swinv2_cr(info.at("list").at("swinv2_*").get<std::vector<std::string>>());
  CHECK(without_swinv2_cr(timm::Registry::global().list(timm::PluginKind::kModel, "swinv2_*")) == timm_listed);
  CHECK(timm_listed.size() == kV2Names.size() + kV2LargeNames.size());
}

TEST_CASE("every registered large swinv2 has timm's state_dict, parameter count, pretrained cfg") {
  timm::test::check_registered("swin_oracle.py", kV2LargeNames, {}, kParity);
}

TEST_CASE("swinv2 init follows timm's statistics: trunc_normal(.02) linears, log(10) logit scales, zero post-norms") {
  timm::test::check_init_stats("swin_oracle.py", {"swinv2_tiny_window8_256"});
  at::manual_seed(0);
  const auto params = make("swinv2_tiny_window8_256")->named_parameters();
  CHECK(params["layers.2.blocks.3.mlp.fc1.weight"].std().item<double>() == doctest::Approx(0.02).epsilon(0.02));
  CHECK(params["layers.2.blocks.3.attn.cpb_mlp.0.weight"].std().item<double>() == doctest::Approx(0.02).epsilon(0.1));
  CHECK(params["layers.2.blocks.3.attn.cpb_mlp.0.bias"].abs().max().item<double>() == 0.0);
  CHECK(params["layers.2.blocks.3.attn.logit_scale"].eq(static_cast<float>(std::log(10.0))).all().item<bool>());
  CHECK(params["layers.2.blocks.3.attn.q_bias"].abs().max().item<double>() == 0.0);
  CHECK(params["layers.2.blocks.3.attn.v_bias"].abs().max().item<double>() == 0.0);
  // timm's _init_respostnorm: each block's post-norms start at zero; the other norms at one.
  CHECK(params["layers.2.blocks.3.norm1.weight"].abs().max().item<double>() == 0.0);
  CHECK(params["layers.2.blocks.3.norm2.weight"].abs().max().item<double>() == 0.0);
  CHECK(params["layers.1.downsample.norm.weight"].min().item<double>() == 1.0);
  // The v2 merging norms the reduced channels.
  CHECK((params["layers.1.downsample.norm.weight"].sizes() == at::IntArrayRef{192}));
  CHECK_FALSE(params.contains("layers.1.downsample.reduction.bias"));
  CHECK_FALSE(params.contains("layers.2.blocks.3.attn.qkv.bias"));
}

TEST_CASE("swinv2 state_dict leaves out timm's non-persistent buffers; logit_scale is capped at log(100)") {
  timm::ModelPtr model = make("swinv2_tiny_window8_256", small_args());
  for (const auto& [key, tensor] : timm::state_dict(*model)) {
    CAPTURE(key);
    for (const char* buffer : {"k_bias", "relative_coords_table", "relative_position_index", "attn_mask"}) {
      CHECK(key.find(buffer) == std::string::npos);
    }
  }
  // Per block: cpb_mlp.0.weight, cpb_mlp.0.bias, cpb_mlp.2.weight, logit_scale.
  CHECK(model->no_weight_decay().size() == 12 * 4);

  // Past the cap every temperature is 100: log(100) and 6 give the same logits, 4 others.
  // The post-norms at one first: at their zero init the attention does not reach the logits.
  model->eval();
  c10::NoGradGuard no_grad;
  for (const auto& item : model->named_parameters()) {
    if (item.key().ends_with("norm1.weight") || item.key().ends_with("norm2.weight")) item.value().fill_(1.0);
  }
  const at::Tensor x = at::randn({2, 3, 64, 64});
  auto logits_at = [&](double logit_scale) {
    for (const auto& item : model->named_parameters()) {
      if (item.key().ends_with("logit_scale")) item.value().fill_(logit_scale);
    }
    return model->forward(x);
  };
  const at::Tensor capped = logits_at(std::log(100.0));
  CHECK(at::equal(logits_at(6.0), capped));
  CHECK_FALSE(at::allclose(logits_at(4.0), capped));
}

TEST_CASE("swinv2 --grad-checkpointing: each stage's blocks checkpointed, the plain step's gradients") {
  timm::test::check_grad_checkpointing("swinv2_tiny_window8_256", 64, 64, {{"img_size", "64"}});
}

}  // namespace test_swin
