// Inception-V3 plugin against timm (tests/oracle/inception_v3_oracle.py)
// through the shared harness (tests/support/model_parity.hpp), both ways:
// timm's weights load here and give timm's logits, eval forward_features /
// forward_head / pre-logits outputs, forward_intermediates, bfloat16 logits,
// gradients and BN statistics; our weights load in timm and give our logits.
// Tolerance for every float comparison: |ours - timm| <= 1e-4 + 1e-4 * |timm|.
//
// timm's InceptionV3 takes no drop_path_rate (a TypeError) and refuses grad
// checkpointing (an assert); ours refuses both: the harness runs with
// takes_drop_path false (no rates to compare). The oracle rescales timm's
// conv weights (std 0.1 whatever the fan-in) to std sqrt(2 / fan_in) so eval
// activations stay in range (see the oracle).
//
// Cases: inception_v3 at 75 px, the smallest input timm takes (1x1 after
// Mixed_7a); and with one input channel at 75x107, avgmax pooling, SiLU and
// BN eps 1e-5. One thread, as the oracle.
#include <map>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <nlohmann/json.hpp>

#include "model_parity.hpp"
#include "test_support.hpp"
#include "timm/base/error.hpp"
#include "timm/io/safetensors.hpp"
#include "timm/models/load_weights.hpp"
#include "timm/models/model.hpp"
#include "timm/models/state_dict.hpp"
#include "timm/plugin/registry.hpp"

// Last: c10/util/Logging.h defines a CHECK macro that doctest must override.
#include <doctest/doctest.h>

namespace test_inception_v3 {

namespace {

using timm::test::make_model;
using timm::test::ParityCase;
using timm::test::ParityOptions;

constexpr int64_t kNumClasses = timm::test::kParityNumClasses;
constexpr const char* kOracle = "inception_v3_oracle.py";

// Every name registered here: all of timm 1.0.31's inception_v3.py (its
// tf_ / adv_ / gluon_ names are deprecations that map to inception_v3 tags).
const std::vector<std::string> kNames = {"inception_v3"};

const std::vector<ParityCase> kSmallestCases = {
    {"inception_v3_75", "inception_v3", 3, 75, 2},
};
const std::vector<ParityCase> kOptionCases = {
    {"inception_v3_c1_75x107_avgmax_silu", "inception_v3", 1, 107, 2,
     nlohmann::json{{"global_pool", "avgmax"}, {"act_layer", "silu"}, {"norm_eps", 1e-5}}, 75},
};

// timm's InceptionV3 takes no drop_path_rate and has no drop path: no rates.
std::vector<double> no_block_rates(torch::nn::Module&) { return {}; }

const ParityOptions kOptions = {
    .tol = {1e-4, 1e-4},
    .block_rates = no_block_rates,
    .after_buffers = {"Conv2d_1a_3x3.bn.running_mean", "Conv2d_1a_3x3.bn.running_var",
                      "Conv2d_1a_3x3.bn.num_batches_tracked", "Mixed_5b.branch_pool.bn.running_mean",
                      "Mixed_6a.branch3x3.bn.running_var", "Mixed_6e.branch7x7dbl_5.bn.running_var",
                      "Mixed_7a.branch7x7x3_4.bn.running_mean", "Mixed_7c.branch3x3dbl_3b.bn.running_mean"},
    .min_grad_keys = 20,
    .takes_drop_path = false,
};

}  // namespace

TEST_CASE("inception_v3 has timm's state_dict keys, shapes, parameter count, pretrained_cfg and features") {
  // Also dtypes, no_weight_decay, group_matcher (rules equivalent to timm's
  // function, checked by the oracle) and feature_info.
  const auto info = timm::test::check_registered(kOracle, kNames, {"inception_v3*"}, kOptions);
  CHECK(info.at("list").at("inception_v3*").get<std::vector<std::string>>() == kNames);
  CHECK(timm::Registry::global().list(timm::PluginKind::kModel, "inception_v3*") == kNames);
}

TEST_CASE("inception_v3 matches timm both ways at 75 px, the smallest input") {
  timm::test::run_parity(kOracle, kSmallestCases, kOptions);
}

TEST_CASE("inception_v3 matches timm both ways: one channel at 75x107, avgmax pooling, SiLU, BN eps 1e-5") {
  timm::test::run_parity(kOracle, kOptionCases, kOptions);
}

TEST_CASE("inception_v3 forward_head without a classifier is the pre-logits features") {
  timm::test::check_head_split("inception_v3", 75);
}

TEST_CASE("inception_v3 init follows timm: trunc_normal std 0.1 convs and fc, BN 1 / 0 with eps 1e-3") {
  timm::test::check_init_stats(kOracle, {"inception_v3"});
  at::manual_seed(0);
  const timm::ModelPtr model = make_model("inception_v3");
  const auto params = model->named_parameters();
  CHECK(params["Mixed_6b.branch7x7_2.conv.weight"].std().item<double>() == doctest::Approx(0.1).epsilon(0.05));
  CHECK((params["Mixed_6b.branch7x7_2.conv.weight"].sizes() == at::IntArrayRef{128, 128, 1, 7}));
  CHECK((params["Mixed_7b.branch3x3_2b.conv.weight"].sizes() == at::IntArrayRef{384, 384, 3, 1}));
  CHECK(params["fc.weight"].std().item<double>() == doctest::Approx(0.1).epsilon(0.05));
  CHECK(params["Mixed_7c.branch_pool.bn.weight"].min().item<double>() == 1.0);
  CHECK(params["Mixed_7c.branch_pool.bn.bias"].abs().max().item<double>() == 0.0);
}

TEST_CASE("inception_v3 head options, keywords, group_matcher, forward_intermediates' levels and refusals") {
  c10::NoGradGuard no_grad;
  const at::Tensor x = at::randn({2, 3, 75, 75});
  timm::ModelPtr features = make_model("inception_v3", 3, 0);
  features->eval();
  // No classifier: Mixed_7c's output, pooled.
  CHECK((features->forward(x).sizes() == at::IntArrayRef{2, 2048}));
  // Five levels: Conv2d_2b_3x3, Conv2d_4a_3x3, Mixed_5d, Mixed_6e, Mixed_7c.
  const timm::Intermediates inter = features->forward_intermediates(x);
  REQUIRE(inter.intermediates.size() == 5);
  CHECK((inter.intermediates[0].sizes() == at::IntArrayRef{2, 64, 35, 35}));
  CHECK((inter.intermediates[1].sizes() == at::IntArrayRef{2, 192, 15, 15}));
  CHECK((inter.intermediates[2].sizes() == at::IntArrayRef{2, 288, 7, 7}));
  CHECK((inter.intermediates[3].sizes() == at::IntArrayRef{2, 768, 3, 3}));
  CHECK((inter.intermediates[4].sizes() == at::IntArrayRef{2, 2048, 1, 1}));
  CHECK(at::equal(inter.intermediates[4], inter.final));
  CHECK(features->feature_info()[2] == timm::FeatureInfo{288, 8, "Mixed_5d"});
  CHECK_THROWS_AS(features->forward_intermediates(x, timm::IntermediatesOptions().output_fmt("NLC")), timm::UsageError);
  // Below 75 px Mixed_7a has no 3x3 map left: refused in words (timm fails in a conv).
  CHECK_THROWS_AS(features->forward(at::randn({1, 3, 74, 90})), timm::UsageError);
  // Stopping early at the stem's levels needs no such size.
  const timm::Intermediates early = features->forward_intermediates(
      at::randn({1, 3, 32, 32}), timm::IntermediatesOptions().indices(std::vector<int64_t>{0}).stop_early(true));
  CHECK((early.final.sizes() == at::IntArrayRef{1, 64, 13, 13}));

  const auto matcher = features->group_matcher(false);
  REQUIRE(matcher.size() == 2);
  CHECK(matcher[0].first == "stem");
  REQUIRE(matcher[1].second.size() == 11);
  CHECK(matcher[1].second[10].pattern == R"(^Mixed_7c\.)");
  CHECK(matcher[1].second[10].suffix == std::vector<double>{10});

  // timm asserts grad checkpointing is not enabled.
  CHECK_THROWS_AS(features->set_grad_checkpointing(true), timm::UsageError);
  features->set_grad_checkpointing(false);

  timm::ModelArgs args;
  args.num_classes = kNumClasses;
  timm::test::check_head_dropout_gives_bias("inception_v3", args, "fc.bias", x);

  // Keywords at timm's defaults are taken.
  args.kwargs = {{"aux_logits", "false"}, {"norm_layer", "batchnorm2d"}, {"norm_eps", "0.001"}, {"act_layer", "relu"}};
  const timm::ModelPtr defaults = timm::create_model("inception_v3", args);
  CHECK(timm::count_parameters(*defaults) == timm::count_parameters(*make_model("inception_v3")));

  // As timm: no drop path (a TypeError there), no unknown keywords, a known
  // pool type; aux_logits=true is refused (its (logits, aux) pair has no place here).
  args.kwargs.clear();
  args.drop_path_rate = 0.1;
  CHECK_THROWS_WITH_AS(timm::create_model("inception_v3", args), doctest::Contains("drop_path_rate"), timm::UsageError);
  args.drop_path_rate.reset();
  for (const auto& [key, value] : std::map<std::string, std::string>{{"aux_logits", "true"},
                                                                     {"norm_layer", "layernorm2d"},
                                                                     {"norm_eps", "0"},
                                                                     {"act_layer", "nope"},
                                                                     {"output_stride", "16"}}) {
    CAPTURE(key);
    args.kwargs = {{key, value}};
    CHECK_THROWS_AS(timm::create_model("inception_v3", args), timm::UsageError);
  }
  args.kwargs.clear();
  args.global_pool = "none";
  CHECK_THROWS_AS(timm::create_model("inception_v3", args), timm::UsageError);
}

TEST_CASE("inception_v3 loads weights carrying AuxLogits.* (torchvision's) as timm, and still names missing keys") {
  // timm's tv_in1k weights have the auxiliary classifier, which the default
  // model (aux_logits false) has not: timm loads them with strict=False.
  timm::test::TempDir tmp;
  const timm::ModelPtr source = make_model("inception_v3", 3, 1000);
  CHECK_FALSE(source->pretrained_cfg().pretrained_strict);
  timm::NamedTensors weights = timm::state_dict(*source);
  weights.emplace_back("AuxLogits.conv0.conv.weight", at::randn({128, 768, 1, 1}));
  weights.emplace_back("AuxLogits.fc.weight", at::randn({1000, 768}));
  timm::write_safetensors(tmp / "tv.safetensors", weights);

  const timm::ModelPtr model = make_model("inception_v3", 3, 1000);
  timm::load_pretrained_file(*model, tmp / "tv.safetensors", 3, 1000);
  const auto loaded = model->named_parameters();
  for (const auto& [key, tensor] : timm::state_dict(*source)) {  // the head too: the file's 1000 classes
    if (loaded.contains(key)) CHECK_MESSAGE(at::equal(loaded[key], tensor), key);
  }

  // A key the model has and the file lacks is still an error, naming it.
  timm::NamedTensors partial(weights.begin() + 1, weights.end());
  timm::write_safetensors(tmp / "partial.safetensors", partial);
  CHECK_THROWS_WITH_AS(timm::load_pretrained_file(*model, tmp / "partial.safetensors", 3, 1000),
                       doctest::Contains(weights.front().first.c_str()), timm::Error);
}

}  // namespace test_inception_v3
