// MaxxVit plugin (MaxViT, CoAtNet, MaxxViT, CoAtNeXt) against timm
// (tests/oracle/maxxvit_oracle.py) through the shared harness
// (tests/support/model_parity.hpp), both ways: timm's weights load here and
// give timm's logits, eval forward_features / forward_head / pre-logits
// outputs, forward_intermediates, bfloat16 logits, train logits, gradients
// and BatchNorm statistics; our weights load in timm and give our logits.
// Tolerance |ours - timm| <= 2e-4 + 2e-4 * |timm| (attention).
//
// Cases, small through timm's img_size kwarg (the MaxViT window and grid are
// img_size // 32; the CoAtNet attention covers each stage's map):
// test_maxvit at 64 px (MbConv with depthwise stride, window + grid
// attention, RelPosBias), also with one channel and avgmax pooling;
// maxvit_rmlp_pico_rw_256 at 64 px (RelPosMlp, its dropout in the train
// step); maxvit_tiny_tf_224 at 64 px (TF ports: 'same' padding, tanh GELU,
// BatchNorm eps 1e-3, RelPosBiasTf, interleaved heads, NormMlp head) and
// at img_size 32 (1x1 windows) on a 50x40 input (odd maps through the
// 'same' convs and pools); maxvit_tiny_pm_256 at 64 px (parallel blocks);
// test_coatnet at 64 px (pooled MbConv stride, TransformerBlock2d);
// coatnet_rmlp_1_rw_224 (max pools, SE before norm2, 2-D RelPosMlp);
// coatnet_bn_0_rw_224 (BatchNorm transformer norms); coatnet_0_224 (paper
// cfg: expand-first attention, NormMlp head); maxxvit_rmlp_nano_rw_256
// (ConvNeXt conv blocks, LayerNormAct2d stem); maxxvitv2_nano_rw_256 (no
// window attention); coatnext_nano_rw_224 (ConvNeXt 'C' stages). One thread,
// as the oracle.
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
#include "timm/layers/drop_path.hpp"
#include "timm/models/features.hpp"
#include "timm/models/model.hpp"
#include "timm/plugin/registry.hpp"

// Last: c10/util/Logging.h defines a CHECK macro that doctest must override.
#include <doctest/doctest.h>

namespace test_maxxvit {

namespace {

using timm::test::ParityOptions;

constexpr const char* kOracle = "maxxvit_oracle.py";

// timm.list_models patterns of the family; every name each gives is registered.
const std::vector<std::string> kPatterns = {"*maxvit*", "*coatnet*", "*maxxvit*", "coatnext*"};

// Names compared whole, in groups that keep each test's memory and time small.
const std::vector<std::string> kMaxVitNames = {"test_maxvit",
                                               "maxvit_pico_rw_256",
                                               "maxvit_nano_rw_256",
                                               "maxvit_tiny_rw_224",
                                               "maxvit_tiny_rw_256",
                                               "maxvit_rmlp_pico_rw_256",
                                               "maxvit_rmlp_nano_rw_256",
                                               "maxvit_rmlp_tiny_rw_256",
                                               "maxvit_tiny_pm_256",
                                               "maxvit_tiny_tf_224",
                                               "maxvit_tiny_tf_384",
                                               "maxvit_tiny_tf_512",
                                               "maxvit_small_tf_224",
                                               "maxvit_small_tf_384",
                                               "maxvit_small_tf_512",
                                               "maxvit_rmlp_small_rw_224",
                                               "maxvit_rmlp_small_rw_256"};
const std::vector<std::string> kMaxVitBaseNames = {"maxvit_rmlp_base_rw_224", "maxvit_rmlp_base_rw_384",
                                                   "maxvit_base_tf_224", "maxvit_base_tf_384", "maxvit_base_tf_512"};
const std::vector<std::string> kMaxVitLargeNames = {"maxvit_large_tf_224", "maxvit_large_tf_384",
                                                    "maxvit_large_tf_512"};
const std::vector<std::string> kCoatNetNames = {"test_coatnet",
                                                "coatnet_pico_rw_224",
                                                "coatnet_nano_rw_224",
                                                "coatnet_nano_cc_224",
                                                "coatnet_rmlp_nano_rw_224",
                                                "coatnet_0_rw_224",
                                                "coatnet_bn_0_rw_224",
                                                "coatnet_rmlp_0_rw_224",
                                                "coatnet_0_224",
                                                "coatnet_1_rw_224",
                                                "coatnet_rmlp_1_rw_224",
                                                "coatnet_rmlp_1_rw2_224",
                                                "coatnet_1_224",
                                                "coatnet_2_rw_224",
                                                "coatnet_rmlp_2_rw_224",
                                                "coatnet_rmlp_2_rw_384",
                                                "coatnet_2_224"};
const std::vector<std::string> kCoatNetLargeNames = {"coatnet_3_rw_224", "coatnet_rmlp_3_rw_224", "coatnet_3_224",
                                                     "coatnet_4_224"};
const std::vector<std::string> kMaxxVitNames = {
    "maxxvit_rmlp_nano_rw_256", "maxxvit_rmlp_tiny_rw_256",   "maxxvit_rmlp_small_rw_256", "maxxvitv2_nano_rw_256",
    "coatnext_nano_rw_224",     "maxxvitv2_rmlp_base_rw_224", "maxxvitv2_rmlp_base_rw_384"};
const std::vector<std::string> kMaxxVitLargeNames = {"maxxvitv2_rmlp_large_rw_224"};
// Registered and listed, not built here: 475M to 690M parameters each (see the check of names).
const std::vector<std::string> kGiantNames = {"maxvit_xlarge_tf_224", "maxvit_xlarge_tf_384", "maxvit_xlarge_tf_512",
                                              "coatnet_5_224"};

// Per block, the rate of its first DropPath in module order (the conv block's in a MaxViT block).
std::vector<double> block_drop_path_rates(torch::nn::Module& model) {
  std::vector<double> rates;
  for (const auto& stage : model.named_children()["stages"]->children()) {
    for (const auto& block : stage->named_children()["blocks"]->children()) {
      double rate = 0.0;
      for (const auto& m : block->modules(/*include_self=*/true)) {
        if (const auto* dp = m->as<timm::layers::DropPathImpl>()) {
          rate = dp->options.drop_prob();
          break;
        }
      }
      rates.push_back(rate);
    }
  }
  return rates;
}

const timm::test::Tolerance kTol{2e-4, 2e-4};
const ParityOptions kParity = {.tol = kTol, .block_rates = block_drop_path_rates};
// The MaxViT cases' BatchNorms (stem and MbConv) after the train step.
const ParityOptions kMaxVitParity = {
    .tol = kTol,
    .block_rates = block_drop_path_rates,
    .after_buffers = {"stem.norm1.running_mean", "stem.norm1.running_var", "stem.norm1.num_batches_tracked",
                      "stages.3.blocks.0.conv.norm2.running_mean", "stages.3.blocks.0.conv.norm2.running_var"}};
const ParityOptions kCoatNetParity = {
    .tol = kTol,
    .block_rates = block_drop_path_rates,
    .after_buffers = {"stem.norm1.running_var", "stages.0.blocks.0.norm1.running_mean",
                      "stages.0.blocks.0.norm1.running_var"}};
const ParityOptions kCoatNetBnParity = {
    .tol = kTol,
    .block_rates = block_drop_path_rates,
    .after_buffers = {"stages.2.blocks.0.norm1.norm.running_mean", "stages.2.blocks.0.norm1.norm.running_var",
                      "stages.3.blocks.1.norm2.running_var", "norm.running_mean", "norm.running_var"}};

const nlohmann::json kImg64 = {{"img_size", 64}};

timm::ModelPtr make(const std::string& name, timm::ModelArgs args = {}) {
  timm::test::load_builtin_plugins();
  return timm::create_model(name, args);
}

timm::ModelArgs img_args(int64_t img_size, int64_t num_classes = timm::test::kParityNumClasses) {
  timm::ModelArgs args;
  args.num_classes = num_classes;
  args.kwargs["img_size"] = std::to_string(img_size);
  return args;
}

}  // namespace

TEST_CASE("maxxvit registers every name timm lists; the giants are registered, not built") {
  timm::test::load_builtin_plugins();
  const auto info = nlohmann::json::parse(
      timm::test::run_oracle(kOracle, {"info", "--names", "test_maxvit", "--patterns", timm::test::join(kPatterns)}));
  size_t total = 0;
  for (const auto& pattern : kPatterns) {
    CAPTURE(pattern);
    const auto timm_names = info.at("list").at(pattern).get<std::vector<std::string>>();
    CHECK(!timm_names.empty());
    CHECK(timm::Registry::global().list(timm::PluginKind::kModel, pattern) == timm_names);
    total += timm_names.size();
  }
  CHECK(total == 58);
  // Each compared name group plus the giants covers the family exactly once.
  std::vector<std::string> covered;
  for (const auto* group : {&kMaxVitNames, &kMaxVitBaseNames, &kMaxVitLargeNames, &kCoatNetNames, &kCoatNetLargeNames,
                            &kMaxxVitNames, &kMaxxVitLargeNames, &kGiantNames}) {
    covered.insert(covered.end(), group->begin(), group->end());
  }
  std::sort(covered.begin(), covered.end());
  CHECK(std::adjacent_find(covered.begin(), covered.end()) == covered.end());
  CHECK(covered.size() == total);
}

TEST_CASE("registered maxvit tiny/small names have timm's state_dict, cfg and features") {
  timm::test::check_registered(kOracle, kMaxVitNames, {}, kParity);
}

TEST_CASE("registered maxvit base names have timm's state_dict, cfg and features") {
  timm::test::check_registered(kOracle, kMaxVitBaseNames, {}, kParity);
}

TEST_CASE("registered maxvit large names have timm's state_dict, cfg and features") {
  timm::test::check_registered(kOracle, kMaxVitLargeNames, {}, kParity);
}

TEST_CASE("registered coatnet names up to 2 have timm's state_dict, cfg and features") {
  timm::test::check_registered(kOracle, kCoatNetNames, {}, kParity);
}

TEST_CASE("registered coatnet 3 and 4 have timm's state_dict, cfg and features") {
  timm::test::check_registered(kOracle, kCoatNetLargeNames, {}, kParity);
}

TEST_CASE("registered maxxvit, maxxvitv2 and coatnext names have timm's state_dict, cfg and features") {
  timm::test::check_registered(kOracle, kMaxxVitNames, {}, kParity);
  timm::test::check_registered(kOracle, kMaxxVitLargeNames, {}, kParity);
}

TEST_CASE("maxvit RW blocks match timm both ways: test_maxvit, one channel avgmax, rmlp pico") {
  timm::test::run_parity(
      kOracle,
      {{"test_maxvit_64", "test_maxvit", 3, 64, 2, kImg64},
       {"test_maxvit_c1_avgmax", "test_maxvit", 1, 64, 2, {{"img_size", 64}, {"global_pool", "avgmax"}}},
       {"maxvit_rmlp_pico_64", "maxvit_rmlp_pico_rw_256", 3, 64, 2, kImg64}},
      kMaxVitParity);
}

TEST_CASE("maxvit TF port matches timm both ways at 64 px and on odd maps with 1x1 windows") {
  timm::test::run_parity(kOracle,
                         {{"maxvit_tiny_tf_64", "maxvit_tiny_tf_224", 3, 64, 2, kImg64},
                          {"maxvit_tiny_tf_50x40_w1", "maxvit_tiny_tf_224", 3, 50, 2, {{"img_size", 32}}, 40}},
                         kMaxVitParity);
}

TEST_CASE("maxvit parallel blocks (maxvit_tiny_pm_256) match timm both ways at 64 px") {
  ParityOptions opts = kMaxVitParity;
  opts.after_buffers = {"stem.norm1.running_mean", "stages.3.blocks.1.conv.1.norm1.running_var"};
  timm::test::run_parity(kOracle, {{"maxvit_tiny_pm_64", "maxvit_tiny_pm_256", 3, 64, 2, kImg64}}, opts);
}

TEST_CASE("coatnet matches timm both ways: test_coatnet, rmlp_1 (max pools, early SE), paper coatnet_0") {
  timm::test::run_parity(kOracle,
                         {{"test_coatnet_64", "test_coatnet", 3, 64, 2, kImg64},
                          {"coatnet_rmlp_1_64", "coatnet_rmlp_1_rw_224", 3, 64, 2, kImg64},
                          {"coatnet_0_64", "coatnet_0_224", 3, 64, 2, kImg64}},
                         kCoatNetParity);
}

TEST_CASE("coatnet_bn_0_rw_224 (BatchNorm transformer norms) matches timm both ways at 64 px") {
  timm::test::run_parity(kOracle, {{"coatnet_bn_0_64", "coatnet_bn_0_rw_224", 3, 64, 2, kImg64}}, kCoatNetBnParity);
}

TEST_CASE("maxxvit, maxxvitv2 and coatnext (ConvNeXt conv blocks) match timm both ways at 64 px") {
  timm::test::run_parity(kOracle,
                         {{"maxxvit_rmlp_nano_64", "maxxvit_rmlp_nano_rw_256", 3, 64, 2, kImg64},
                          {"maxxvitv2_nano_64", "maxxvitv2_nano_rw_256", 3, 64, 2, kImg64},
                          {"coatnext_nano_64", "coatnext_nano_rw_224", 3, 64, 2, kImg64}},
                         kParity);
}

TEST_CASE("maxxvit forward_head without a classifier is the pre-logits features (ClassifierHead, NormMlp head)") {
  timm::test::check_head_split("test_maxvit", 64, kImg64);
  timm::test::check_head_split("test_coatnet", 64, {{"img_size", 64}, {"global_pool", "max"}});
  timm::test::check_head_split("maxvit_tiny_tf_224", 64, kImg64);
}

TEST_CASE("maxxvit init follows timm's statistics (vit_eff and normal schemes, ConvNeXt defaults)") {
  timm::test::check_init_stats(kOracle, {"maxvit_nano_rw_256", "test_coatnet", "coatnext_nano_rw_224"});
  // The relative position MLPs, pooled over every block (a head's bias alone is a handful of values):
  // xavier_uniform weights and normal(1e-6) biases, as timm's _init_transformer on an 'mlp' name.
  at::manual_seed(0);
  const timm::ModelPtr model = make("maxvit_rmlp_nano_rw_256");
  std::vector<at::Tensor> fc1_scaled, fc2_bias;
  for (const auto& item : model->named_parameters()) {
    const std::string& key = item.key();
    if (key.find("rel_pos.mlp.fc1.weight") != std::string::npos) {
      const double bound = std::sqrt(6.0 / static_cast<double>(item.value().size(0) + item.value().size(1)));
      fc1_scaled.push_back(item.value().flatten() / bound);  // uniform(-1, 1)
    }
    if (key.find("rel_pos.mlp.fc2.bias") != std::string::npos) fc2_bias.push_back(item.value().flatten());
  }
  REQUIRE(fc1_scaled.size() == 14);  // 7 blocks, window and grid attention
  const at::Tensor u = at::cat(fc1_scaled);
  CHECK(u.abs().max().item<double>() <= 1.0);
  CHECK(u.std().item<double>() == doctest::Approx(1.0 / std::sqrt(3.0)).epsilon(0.02));
  const at::Tensor b = at::cat(fc2_bias);
  CHECK(b.numel() >= 50);
  CHECK(b.std().item<double>() == doctest::Approx(1e-6).epsilon(0.3));
  CHECK(model->named_parameters()["stages.0.blocks.0.attn_block.attn.proj.bias"].abs().max().item<double>() == 0.0);
}

TEST_CASE("maxxvit feature_info, forward_intermediates' levels, no_weight_decay, group_matcher, pretrained cfgs") {
  c10::NoGradGuard no_grad;
  const timm::ModelPtr model = make("test_maxvit", img_args(64, 0));
  model->eval();
  const at::Tensor x = at::randn({2, 3, 64, 64});
  CHECK((model->forward(x).sizes() == at::IntArrayRef{2, 128}));
  const timm::Intermediates inter = model->forward_intermediates(x);
  REQUIRE(inter.intermediates.size() == 5);
  CHECK((inter.intermediates[0].sizes() == at::IntArrayRef{2, 32, 32, 32}));  // the stem
  CHECK((inter.intermediates[4].sizes() == at::IntArrayRef{2, 128, 2, 2}));
  CHECK(at::equal(inter.final, model->forward_features(x)));
  CHECK(model->feature_info()[0] == timm::FeatureInfo{32, 2, "stem"});
  CHECK(model->feature_info()[4] == timm::FeatureInfo{128, 32, "stages.3"});
  CHECK_THROWS_AS(model->forward_intermediates(x, timm::IntermediatesOptions().output_fmt("NHWC")), timm::UsageError);
  CHECK_THROWS_AS(model->forward_intermediates(x, timm::IntermediatesOptions().indices(int64_t{6})), timm::UsageError);
  const auto nwd = model->no_weight_decay();
  CHECK(nwd.size() == 8);  // a table per window and grid attention, four blocks
  CHECK(std::find(nwd.begin(), nwd.end(), "stages.0.blocks.0.attn_block.attn.rel_pos.relative_position_bias_table") !=
        nwd.end());
  CHECK(model->pretrained_cfg().hf_hub_id.empty());
  CHECK(model->pretrained_cfg().input_size == std::vector<int64_t>{3, 160, 160});
  const timm::ModelPtr tf = make("maxvit_tiny_tf_384", img_args(64));
  CHECK(tf->pretrained_cfg().hf_hub_id == "timm/maxvit_tiny_tf_384.in1k");
  CHECK(tf->pretrained_cfg().crop_mode == "squash");
  CHECK(tf->pretrained_cfg().mean == std::vector<double>{0.5, 0.5, 0.5});

  timm::ModelArgs args;
  args.num_classes = timm::test::kParityNumClasses;
  args.kwargs["img_size"] = "64";
  timm::test::check_head_dropout_gives_bias("test_coatnet", args, "head.fc.bias", x);
}

TEST_CASE("maxxvit rejects what timm rejects or it does not support") {
  const timm::ModelPtr maxvit = make("test_maxvit", img_args(64));
  // 80 px: a 5x5 map in stage 2, not divisible by the 2x2 window (timm asserts).
  CHECK_THROWS_WITH_AS(maxvit->forward(at::randn({1, 3, 80, 80})), doctest::Contains("window"), timm::UsageError);
  CHECK_THROWS_WITH_AS(maxvit->forward(at::randn({1, 1, 64, 64})), doctest::Contains("(N, 3, H, W)"), timm::UsageError);
  // The CoAtNet attention covers the img_size maps only.
  const timm::ModelPtr coatnet = make("test_coatnet", img_args(64));
  CHECK_THROWS_WITH_AS(coatnet->forward(at::randn({1, 3, 96, 96})), doctest::Contains("img_size"), timm::UsageError);
  CHECK_THROWS_WITH_AS(make("test_maxvit", img_args(16)), doctest::Contains("img_size=16"), timm::UsageError);
  timm::ModelArgs args;
  args.kwargs = {{"img_size", "64.5"}};
  CHECK_THROWS_AS(make("test_maxvit", args), timm::UsageError);
  args.kwargs = {{"img_size", "0"}};
  CHECK_THROWS_AS(make("test_coatnet", args), timm::UsageError);
  args.kwargs = {{"transformer_dim_head", "16"}};  // timm's cfg overlay kwargs are not supported here
  CHECK_THROWS_WITH_AS(make("test_maxvit", args), doctest::Contains("transformer_dim_head"), timm::UsageError);
  args = {};
  args.global_pool = "median";
  CHECK_THROWS_WITH_AS(make("test_maxvit", args), doctest::Contains("'median'"), timm::UsageError);
  CHECK_THROWS_WITH_AS(make("maxvit_tiny_tf_224", args), doctest::Contains("'median'"), timm::UsageError);
  args = {};
  args.drop_path_rate = 1.5;
  CHECK_THROWS_AS(make("test_coatnet", args), timm::UsageError);
}

// Not bit for bit as most families: the checkpointed blocks' first pass runs
// without grad, and the CPU's scaled_dot_product_attention takes another
// kernel when its inputs require grad (in torch, 32 windows x 2 heads x 16
// tokens: outputs 9.5e-7 apart), so values move by float32 rounding: 1e-6 on
// the logits, up to 1.7e-5 on the stem's gradients. A wrong dropout or
// drop-path mask on the rerun moves them by O(1).
const timm::test::Tolerance kCheckpointTolerance{2e-5, 1e-5};

TEST_CASE("maxxvit --grad-checkpointing: each block checkpointed, the plain step's gradients") {
  const c10::Device cpu(c10::kCPU);
  timm::test::check_grad_checkpointing("test_maxvit", 64, 64, {{"img_size", "64"}}, cpu, kCheckpointTolerance);
  timm::test::check_grad_checkpointing("maxvit_rmlp_pico_rw_256", 64, 64, {{"img_size", "64"}}, cpu,
                                       kCheckpointTolerance);
  timm::test::check_grad_checkpointing("test_coatnet", 64, 64, {{"img_size", "64"}}, cpu, kCheckpointTolerance);
}

}  // namespace test_maxxvit
