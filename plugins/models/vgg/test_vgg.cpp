// VGG plugin against timm (tests/oracle/vgg_oracle.py) through the shared
// harness (tests/support/model_parity.hpp), both ways: timm's weights load
// here and give timm's logits, eval forward_features / forward_head /
// pre-logits outputs, forward_intermediates, bfloat16 logits, gradients and
// BN statistics; our weights load in timm and give our logits. Tolerance for
// every float comparison: |ours - timm| <= 1e-4 + 1e-4 * |timm|.
//
// timm's VGG takes no drop_path_rate (a TypeError), and ours refuses it: the
// harness runs with takes_drop_path false (no rates to compare).
//
// VGG's fc1 alone is 102M parameters (a model is ~0.5 GB in float32): the
// cases are few and small, on one thread as the oracle.
#include <algorithm>
#include <cmath>
#include <filesystem>
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
#include "timm/models/model.hpp"
#include "timm/models/state_dict.hpp"
#include "timm/plugin/registry.hpp"

// Last: c10/util/Logging.h defines a CHECK macro that doctest must override.
#include <doctest/doctest.h>

namespace test_vgg {

namespace {

using timm::test::make_model;
using timm::test::ParityCase;
using timm::test::ParityOptions;

constexpr int64_t kNumClasses = timm::test::kParityNumClasses;
constexpr const char* kOracle = "vgg_oracle.py";

// Every name registered here: all of timm 1.0.31's vgg.py.
const std::vector<std::string> kNames = {"vgg11", "vgg11_bn", "vgg13", "vgg13_bn",
                                         "vgg16", "vgg16_bn", "vgg19", "vgg19_bn"};

// The features end at 2x2 for 64 px: ConvMlp pools them up to 7x7. The
// vgg11_bn case is 64 high and 256 wide (features 2x8): pooled up in height
// only, and fc1's output is 1x2, which the head then pools. At 224 px the
// features are 7x7, fc1's input as such.
const std::vector<ParityCase> kPlainCases = {{"vgg11", "vgg11", 3, 64, 2}};
const std::vector<ParityCase> kBnCases = {{"vgg11_bn_c1_64x256", "vgg11_bn", 1, 256, 2, nlohmann::json::object(), 64}};
const std::vector<ParityCase> k224Cases = {{"vgg11_224", "vgg11", 3, 224, 1}};

// timm's VGG takes no drop_path_rate and has no blocks: no rates.
std::vector<double> no_block_rates(torch::nn::Module&) { return {}; }

const ParityOptions kPlain = {.tol = {1e-4, 1e-4}, .block_rates = no_block_rates, .takes_drop_path = false};
const ParityOptions kWithBn = {
    .tol = {1e-4, 1e-4},
    .block_rates = no_block_rates,
    .after_buffers = {"features.1.running_mean", "features.1.running_var", "features.1.num_batches_tracked",
                      "features.26.running_mean", "features.26.running_var"},
    .takes_drop_path = false,
};

}  // namespace

TEST_CASE("every registered vgg has timm's state_dict keys, shapes, parameter count, pretrained_cfg and features") {
  // Also dtypes, no_weight_decay, group_matcher and feature_info.
  const auto info = timm::test::check_registered(kOracle, kNames, {"vgg*"}, kPlain);
  CHECK(info.at("list").at("vgg*").get<std::vector<std::string>>() == kNames);
  CHECK(timm::Registry::global().list(timm::PluginKind::kModel, "vgg*") == kNames);
}

TEST_CASE("vgg11 matches timm both ways at 64 px: 2x2 features, which ConvMlp pools up to 7x7") {
  timm::test::run_parity(kOracle, kPlainCases, kPlain);
}

TEST_CASE("vgg11_bn matches timm both ways at 64x256 px, one input channel: pooled up in height only, BN statistics") {
  timm::test::run_parity(kOracle, kBnCases, kWithBn);
}

TEST_CASE("vgg11 matches timm both ways at 224 px (7x7 features, no pooling in ConvMlp)") {
  timm::test::run_parity(kOracle, k224Cases, kPlain);
}

TEST_CASE("vgg forward_head without a classifier is the pre-logits features") {
  timm::test::check_head_split("vgg11", 64);
}

TEST_CASE("vgg init follows timm: kaiming_normal fan_out convs (fc1, fc2 too), zero biases, fc std 0.01, BN 1 / 0") {
  timm::test::check_init_stats(kOracle, {"vgg11_bn"});
  at::manual_seed(0);
  const auto params = make_model("vgg11_bn")->named_parameters();
  const at::Tensor fc1 = params["pre_logits.fc1.weight"];
  CHECK((fc1.sizes() == at::IntArrayRef{4096, 512, 7, 7}));
  CHECK(fc1.std().item<double>() == doctest::Approx(std::sqrt(2.0 / (4096.0 * 49.0))).epsilon(0.01));
  CHECK(params["pre_logits.fc2.weight"].std().item<double>() == doctest::Approx(std::sqrt(2.0 / 4096.0)).epsilon(0.01));
  CHECK(params["features.0.weight"].std().item<double>() ==
        doctest::Approx(std::sqrt(2.0 / (64.0 * 9.0))).epsilon(0.05));
  CHECK(params["features.0.bias"].abs().max().item<double>() == 0.0);
  CHECK(params["pre_logits.fc1.bias"].abs().max().item<double>() == 0.0);
  CHECK(params["features.1.weight"].min().item<double>() == 1.0);
  CHECK(params["head.fc.weight"].std().item<double>() == doctest::Approx(0.01).epsilon(0.05));
  CHECK(params["head.fc.bias"].abs().max().item<double>() == 0.0);
}

TEST_CASE("vgg head options, group_matcher, forward_intermediates' levels and refusals") {
  c10::NoGradGuard no_grad;
  const at::Tensor x = at::randn({2, 3, 64, 64});
  timm::ModelPtr features = make_model("vgg11", 3, 0);
  features->eval();
  // No classifier: ConvMlp's output, pooled.
  CHECK((features->forward(x).sizes() == at::IntArrayRef{2, 4096}));
  // Six levels: each max pool's input (strides 1 .. 16), then the last pool's output.
  const timm::Intermediates inter = features->forward_intermediates(x);
  REQUIRE(inter.intermediates.size() == 6);
  CHECK((inter.intermediates[0].sizes() == at::IntArrayRef{2, 64, 64, 64}));
  CHECK((inter.intermediates[4].sizes() == at::IntArrayRef{2, 512, 4, 4}));
  CHECK(at::equal(inter.intermediates[5], inter.final));
  CHECK(features->feature_info()[1] == timm::FeatureInfo{128, 2, "features.4"});

  const auto matcher = features->group_matcher(false);
  REQUIRE(matcher.size() == 2);
  CHECK(matcher[0].first == "stem");
  CHECK(matcher[0].second[0].pattern == R"(^features\.0)");
  CHECK(matcher[1].second[0].pattern == R"(^features\.(\d+))");

  // timm's set_grad_checkpointing asserts it is not enabled.
  CHECK_THROWS_AS(features->set_grad_checkpointing(true), timm::UsageError);
  features->set_grad_checkpointing(false);

  timm::ModelArgs args;
  args.num_classes = kNumClasses;
  timm::test::check_head_dropout_gives_bias("vgg11", args, "head.fc.bias", x);

  // As timm: no drop path (a TypeError there), no --model-kwargs, a known pool type.
  args.drop_path_rate = 0.1;
  CHECK_THROWS_WITH_AS(timm::create_model("vgg11", args), doctest::Contains("drop_path_rate"), timm::UsageError);
  args.drop_path_rate.reset();
  args.kwargs["mlp_ratio"] = "2";
  CHECK_THROWS_AS(timm::create_model("vgg11", args), timm::UsageError);
  args.kwargs.clear();
  args.global_pool = "none";
  CHECK_THROWS_AS(timm::create_model("vgg11", args), timm::UsageError);
}

}  // namespace test_vgg
