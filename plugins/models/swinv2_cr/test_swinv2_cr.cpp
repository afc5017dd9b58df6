// Swin Transformer V2 CR plugin against timm (tests/oracle/swinv2_cr_oracle.py)
// through the shared harness (tests/support/model_parity.hpp), both ways:
// timm's weights load here and give timm's logits, eval forward_features /
// forward_head / pre-logits outputs, forward_intermediates, bfloat16 logits
// and gradients; our weights load in timm and give our logits. The oracle
// also perturbs the attention's logit_scale (see its docstring).
// Tolerance |ours - timm| <= 2e-4 + 2e-4 * |timm| (cosine attention).
//
// Cases, small inputs through timm's img_size / window_size kwargs:
// swinv2_cr_tiny_224 at 64 px (16x16 to 2x2 maps, windows 2x2, unshifted in
// the last stage); swinv2_cr_tiny_ns_224 with one channel at 96 px, window 4,
// avgmax pool (a 6x6 map padded to 8x8 in stage 2, the last window clamped to
// 3x3, a norm3 ending every stage); swinv2_cr_tiny_224 at 64 px, window 4,
// always_partition (the 2x2 last map padded and shifted). One thread, as the oracle.
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
#include "timm/models/features.hpp"
#include "timm/models/model.hpp"
#include "timm/plugin/registry.hpp"

// Last: c10/util/Logging.h defines a CHECK macro that doctest must override.
#include <doctest/doctest.h>

namespace test_swinv2_cr {

namespace {

using timm::test::ParityCase;
using timm::test::ParityOptions;

constexpr const char* kOracle = "swinv2_cr_oracle.py";

// Every name registered here, in list_models order: all of timm 1.0.31's swin_transformer_v2_cr.py.
const std::vector<std::string> kAllNames = {
    "swinv2_cr_base_224",     "swinv2_cr_base_384",  "swinv2_cr_base_ns_224", "swinv2_cr_giant_224",
    "swinv2_cr_giant_384",    "swinv2_cr_huge_224",  "swinv2_cr_huge_384",    "swinv2_cr_large_224",
    "swinv2_cr_large_384",    "swinv2_cr_small_224", "swinv2_cr_small_384",   "swinv2_cr_small_ns_224",
    "swinv2_cr_small_ns_256", "swinv2_cr_tiny_224",  "swinv2_cr_tiny_384",    "swinv2_cr_tiny_ns_224"};
const std::vector<std::string> kSmallNames = {"swinv2_cr_tiny_224",    "swinv2_cr_tiny_384",  "swinv2_cr_tiny_ns_224",
                                              "swinv2_cr_small_224",   "swinv2_cr_small_384", "swinv2_cr_small_ns_224",
                                              "swinv2_cr_small_ns_256"};
const std::vector<std::string> kBaseLargeNames = {"swinv2_cr_base_224", "swinv2_cr_base_384", "swinv2_cr_base_ns_224",
                                                  "swinv2_cr_large_224", "swinv2_cr_large_384"};
const std::vector<std::string> kHugeNames = {"swinv2_cr_huge_224", "swinv2_cr_huge_384"};

// Per block, its drop_path1 rate.
std::vector<double> block_drop_path_rates(torch::nn::Module& model) {
  std::vector<double> rates;
  for (const auto& stage : model.named_children()["stages"]->children()) {
    for (const auto& block : stage->named_children()["blocks"]->children()) {
      rates.push_back(block->named_children()["drop_path1"]->as<timm::layers::DropPath>()->options.drop_prob());
    }
  }
  return rates;
}

const ParityOptions kParity = {.tol = {2e-4, 2e-4}, .block_rates = block_drop_path_rates};

timm::ModelPtr make(const std::string& name, timm::ModelArgs args = {}) {
  timm::test::load_builtin_plugins();
  return timm::create_model(name, args);
}

}  // namespace

TEST_CASE("registered swinv2_cr tiny and small have timm's state_dict, cfg, features; names") {
  const auto info = timm::test::check_registered(kOracle, kSmallNames, {"swinv2_cr_*"}, kParity);
  CHECK(info.at("list").at("swinv2_cr_*").get<std::vector<std::string>>() == kAllNames);
  CHECK(timm::Registry::global().list(timm::PluginKind::kModel, "swinv2_cr_*") == kAllNames);
}

TEST_CASE("registered swinv2_cr base and large have timm's state_dict, cfg and features") {
  timm::test::check_registered(kOracle, kBaseLargeNames, {}, kParity);
}

TEST_CASE("registered swinv2_cr huge has timm's state_dict, cfg and features (norm3 every 6th block)") {
  timm::test::check_registered(kOracle, kHugeNames, {}, kParity);
}

// swinv2_cr_giant_224 / _384 are not compared: about 2.6e9 parameters each,
// over 10 GB of float32 per model on each side. They differ from huge in
// their widths, depths and heads only (kAllNames checks they are registered).

TEST_CASE("swinv2_cr_tiny_224 matches timm both ways at 64 px (2x2 windows)") {
  timm::test::run_parity(kOracle, {{"swinv2_cr_tiny_64", "swinv2_cr_tiny_224", 3, 64, 2, {{"img_size", 64}}}}, kParity);
}

TEST_CASE("swinv2_cr_tiny_ns_224 matches timm both ways: one channel at 96 px, window 4, avgmax pool") {
  timm::test::run_parity(kOracle,
                         {{"swinv2_cr_tiny_ns_c1_96_w4_avgmax",
                           "swinv2_cr_tiny_ns_224",
                           1,
                           96,
                           2,
                           {{"img_size", 96}, {"window_size", 4}, {"global_pool", "avgmax"}}}},
                         kParity);
}

TEST_CASE("swinv2_cr_tiny_224 matches timm both ways at 64 px, window 4, always_partition") {
  timm::test::run_parity(kOracle,
                         {{"swinv2_cr_tiny_64_w4_always_partition",
                           "swinv2_cr_tiny_224",
                           3,
                           64,
                           2,
                           {{"img_size", 64}, {"window_size", 4}, {"always_partition", true}}}},
                         kParity);
}

TEST_CASE("swinv2_cr forward_head without a classifier is the pre-logits features (avg and avgmax pools)") {
  timm::test::check_head_split("swinv2_cr_tiny_224", 64, {{"img_size", 64}});
  timm::test::check_head_split("swinv2_cr_tiny_ns_224", 64, {{"img_size", 64}, {"global_pool", "avgmax"}});
}

TEST_CASE("swinv2_cr init follows timm's statistics: torch default linears, log(10) logit scales, zero post-norms") {
  timm::test::check_init_stats(kOracle, {"swinv2_cr_tiny_224"});
  at::manual_seed(0);
  const auto params = make("swinv2_cr_tiny_224")->named_parameters();
  CHECK(params["stages.1.blocks.1.norm1.weight"].abs().max().item<double>() == 0.0);
  CHECK(params["stages.1.blocks.1.norm2.weight"].abs().max().item<double>() == 0.0);
  CHECK(params["stages.3.blocks.1.norm3.weight"].min().item<double>() == 1.0);
  CHECK(params["stages.0.blocks.0.attn.logit_scale"].min().item<double>() == doctest::Approx(std::log(10.0)));
}

TEST_CASE("swinv2_cr state_dict leaves out timm's non-persistent buffers; feature_info, intermediates, groups") {
  c10::NoGradGuard no_grad;
  timm::ModelArgs args;
  args.kwargs["img_size"] = "64";
  args.num_classes = 0;
  const timm::ModelPtr model = make("swinv2_cr_tiny_224", args);
  model->eval();
  for (const auto& item : model->named_buffers()) {
    CAPTURE(item.key());
    CHECK(false);  // relative_coordinates_log and attn_mask are timm's persistent=False buffers
  }
  const auto params = model->named_parameters();
  CHECK_FALSE(params.contains("stages.0.blocks.0.norm3.weight"));
  CHECK(params.contains("stages.3.blocks.1.norm3.weight"));
  CHECK_FALSE(params.contains("stages.0.downsample.norm.weight"));
  CHECK(params.contains("stages.1.downsample.reduction.weight"));
  const at::Tensor x = at::randn({2, 3, 64, 64});
  CHECK((model->forward(x).sizes() == at::IntArrayRef{2, 768}));
  const timm::Intermediates inter = model->forward_intermediates(x);
  REQUIRE(inter.intermediates.size() == 4);
  CHECK((inter.intermediates[0].sizes() == at::IntArrayRef{2, 96, 16, 16}));
  CHECK((inter.intermediates[3].sizes() == at::IntArrayRef{2, 768, 2, 2}));
  CHECK(at::equal(inter.final, model->forward_features(x)));
  const timm::Intermediates early =
      model->forward_intermediates(x, timm::IntermediatesOptions().indices(std::vector<int64_t>{1}).stop_early(true));
  REQUIRE(early.intermediates.size() == 1);
  CHECK(at::equal(early.final, early.intermediates[0]));
  CHECK(model->feature_info()[0] == timm::FeatureInfo{96, 4, "stages.0"});
  CHECK(model->feature_info()[3] == timm::FeatureInfo{768, 32, "stages.3"});
  CHECK_THROWS_AS(model->forward_intermediates(x, timm::IntermediatesOptions().output_fmt("NHWC")), timm::UsageError);
  CHECK_THROWS_AS(model->forward_intermediates(x, timm::IntermediatesOptions().indices(int64_t{5})), timm::UsageError);
  CHECK(model->pretrained_cfg().classifier == "head.fc");
  CHECK(model->pretrained_cfg().hf_hub_id.empty());  // untrained
  CHECK(make("swinv2_cr_small_224")->pretrained_cfg().hf_hub_id == "timm/swinv2_cr_small_224.sw_in1k");
}

TEST_CASE("swinv2_cr bfloat16 forward runs and is close to float32") {
  c10::NoGradGuard no_grad;
  timm::ModelArgs args;
  args.kwargs["img_size"] = "64";
  const timm::ModelPtr model = make("swinv2_cr_tiny_224", args);
  model->eval();
  const at::Tensor x = at::randn({1, 3, 64, 64});
  const at::Tensor ref = model->forward_features(x);
  model->to(at::kBFloat16);
  const at::Tensor y = model->forward_features(x.to(at::kBFloat16));
  CHECK((y.scalar_type() == at::kBFloat16));
  CHECK(y.isfinite().all().item<bool>());
  CHECK((y.sizes() == ref.sizes()));
}

TEST_CASE("swinv2_cr rejects what timm rejects or it does not support") {
  timm::ModelArgs args;
  args.kwargs["img_size"] = "64";
  const timm::ModelPtr model = make("swinv2_cr_tiny_224", args);
  // timm's strict_img_size: the input must be the model's size.
  CHECK_THROWS_WITH_AS(model->forward(at::randn({1, 3, 96, 96})), doctest::Contains("img_size"), timm::UsageError);
  args.kwargs = {{"window_size", "0"}};
  CHECK_THROWS_AS(make("swinv2_cr_tiny_224", args), timm::UsageError);
  args.kwargs = {{"img_size", "64.5"}};
  CHECK_THROWS_AS(make("swinv2_cr_tiny_224", args), timm::UsageError);
  args.kwargs = {{"dynamic_img_size", "true"}};
  CHECK_THROWS_WITH_AS(make("swinv2_cr_tiny_224", args), doctest::Contains("dynamic_img_size"), timm::UsageError);
  args = {};
  args.global_pool = "median";
  CHECK_THROWS_WITH_AS(make("swinv2_cr_tiny_224", args), doctest::Contains("'median'"), timm::UsageError);
  args = {};
  args.drop_path_rate = 1.5;
  CHECK_THROWS_AS(make("swinv2_cr_tiny_224", args), timm::UsageError);
}

TEST_CASE("swinv2_cr --grad-checkpointing: each block checkpointed, the plain step's gradients") {
  timm::test::check_grad_checkpointing("swinv2_cr_tiny_224", 64, 64, {{"img_size", "64"}});
}

}  // namespace test_swinv2_cr
