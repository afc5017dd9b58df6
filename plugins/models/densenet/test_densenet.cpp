// DenseNet plugin against timm (tests/oracle/densenet_oracle.py) through the
// shared harness (tests/support/model_parity.hpp), both ways: timm's weights
// load here and give timm's logits, eval forward_features / forward_head /
// pre-logits outputs, forward_intermediates, bfloat16 logits, gradients and
// BN statistics; our weights load in timm and give our logits. Tolerance for
// every float comparison: |ours - timm| <= 1e-4 + 1e-4 * |timm|.
//
// timm's DenseNet takes no drop_path_rate (a TypeError), and ours refuses it:
// the harness runs with takes_drop_path false (no rates to compare), and the
// grad-checkpointing check with dropout (drop_rate and proj_drop_rate)
// instead of drop path.
//
// Cases: densenet121 at 64 px (and with the deep-tiered stem and avgmax
// pooling); densenetblur121d (deep stem, BlurPool2d stem) at 64 px, and with
// one input channel at 64x96 with BlurPool2d in the transitions too and
// dropout after each dense layer; densenet264d (deep stem, growth rate 48,
// 130 dense layers) at 64 px with memory_efficient (checkpointed
// bottlenecks) on both sides. One thread, as the oracle.
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
#include "timm/layers/blur_pool.hpp"
#include "timm/models/model.hpp"
#include "timm/models/state_dict.hpp"
#include "timm/plugin/registry.hpp"

// Last: c10/util/Logging.h defines a CHECK macro that doctest must override.
#include <doctest/doctest.h>

namespace test_densenet {

namespace {

using timm::test::make_model;
using timm::test::ParityCase;
using timm::test::ParityOptions;

constexpr int64_t kNumClasses = timm::test::kParityNumClasses;
constexpr const char* kOracle = "densenet_oracle.py";

// Every name registered here: all of timm 1.0.31's densenet.py, in list_models order.
const std::vector<std::string> kNames = {"densenet121", "densenet161",  "densenet169",
                                         "densenet201", "densenet264d", "densenetblur121d"};

const std::vector<ParityCase> k121Cases = {
    {"densenet121", "densenet121", 3, 64, 2},
    {"densenet121_deep_tiered_avgmax", "densenet121", 3, 64, 2,
     nlohmann::json{{"stem_type", "deep_tiered"}, {"global_pool", "avgmax"}}},
};
// The second: maps 32x48 after the stem down to 2x3 after the last
// transition's BlurPool2d (reflect padding at its smallest).
const std::vector<ParityCase> kBlurCases = {
    {"densenetblur121d", "densenetblur121d", 3, 64, 2},
    {"densenetblur121d_c1_64x96_aa_transitions", "densenetblur121d", 1, 96, 2,
     nlohmann::json{{"aa_stem_only", false}, {"proj_drop_rate", 0.2}}, 64},
};
const std::vector<ParityCase> k264Cases = {
    {"densenet264d_memory_efficient", "densenet264d", 3, 64, 2, nlohmann::json{{"memory_efficient", true}}},
};

// timm's DenseNet takes no drop_path_rate and has no drop path: no rates.
std::vector<double> no_block_rates(torch::nn::Module&) { return {}; }

const ParityOptions kOptions = {
    .tol = {1e-4, 1e-4},
    .block_rates = no_block_rates,
    .after_buffers = {"features.norm0.running_mean", "features.norm0.running_var", "features.norm0.num_batches_tracked",
                      "features.denseblock1.denselayer1.norm1.running_mean", "features.transition1.norm.running_var",
                      "features.norm5.running_mean", "features.norm5.running_var"},
    .min_grad_keys = 20,
    .takes_drop_path = false,
};
// Under memory_efficient both sides run norm1 again in the backward pass,
// which moves its statistics a second time (num_batches_tracked 2).
const ParityOptions k264Options = {
    .tol = {1e-4, 1e-4},
    .block_rates = no_block_rates,
    .after_buffers = {"features.norm2.running_mean", "features.denseblock1.denselayer1.norm1.running_mean",
                      "features.denseblock1.denselayer1.norm1.running_var",
                      "features.denseblock1.denselayer1.norm1.num_batches_tracked",
                      "features.denseblock4.denselayer48.norm2.running_var", "features.norm5.running_var"},
    .min_grad_keys = 20,
    .takes_drop_path = false,
};

// DenseNet refuses drop_path_rate: the grad-checkpointing check runs with
// dropout before the classifier and after each dense layer at 0.2 instead, so
// the checkpointed run must draw the plain run's masks.
void check_grad_checkpointing(const std::string& name, int64_t height, int64_t width) {
  timm::test::check_grad_checkpointing(name, height, width, {{"proj_drop_rate", "0.2"}}, c10::Device(c10::kCPU),
                                       timm::test::Tolerance{1e-6, 0.0}, /*takes_drop_path=*/false);
}

}  // namespace

TEST_CASE(
    "every registered densenet has timm's state_dict keys, shapes, parameter count, pretrained_cfg and features") {
  // Also dtypes, no_weight_decay, group_matcher and feature_info.
  const auto info = timm::test::check_registered(kOracle, kNames, {"densenet*"}, kOptions);
  CHECK(info.at("list").at("densenet*").get<std::vector<std::string>>() == kNames);
  CHECK(timm::Registry::global().list(timm::PluginKind::kModel, "densenet*") == kNames);
}

TEST_CASE("densenet121 matches timm both ways at 64 px, and with the deep-tiered stem and avgmax pooling") {
  timm::test::run_parity(kOracle, k121Cases, kOptions);
}

TEST_CASE("densenetblur121d matches timm both ways: BlurPool2d stem; one channel at 64x96, BlurPool2d transitions") {
  timm::test::run_parity(kOracle, kBlurCases, kOptions);
}

TEST_CASE("densenet264d matches timm both ways at 64 px with memory_efficient (checkpointed bottlenecks)") {
  timm::test::run_parity(kOracle, k264Cases, k264Options);
}

TEST_CASE("densenet forward_head without a classifier is the pre-logits features") {
  timm::test::check_head_split("densenet121", 64);
  timm::test::check_head_split("densenetblur121d", 64);
}

TEST_CASE("densenet init follows timm: kaiming_normal (fan_in) convs, BN 1 / 0, classifier bias 0") {
  timm::test::check_init_stats(kOracle, {"densenet121", "densenetblur121d"});
  at::manual_seed(0);
  const auto params = make_model("densenet121")->named_parameters();
  const at::Tensor conv0 = params["features.conv0.weight"];
  CHECK(conv0.std().item<double>() == doctest::Approx(std::sqrt(2.0 / (3.0 * 49.0))).epsilon(0.05));
  const at::Tensor conv2 = params["features.denseblock3.denselayer24.conv2.weight"];
  CHECK(conv2.std().item<double>() == doctest::Approx(std::sqrt(2.0 / (128.0 * 9.0))).epsilon(0.05));
  CHECK(params["features.norm5.weight"].min().item<double>() == 1.0);
  CHECK(params["features.norm5.bias"].abs().max().item<double>() == 0.0);
  CHECK(params["classifier.bias"].abs().max().item<double>() == 0.0);
}

TEST_CASE("densenet grad checkpointing gives the plain step's logits, gradients and dropout masks") {
  check_grad_checkpointing("densenet121", 32, 48);
  check_grad_checkpointing("densenetblur121d", 32, 32);
}

TEST_CASE("densenet head options, keywords, group_matcher, forward_intermediates' levels and refusals") {
  c10::NoGradGuard no_grad;
  const at::Tensor x = at::randn({2, 3, 64, 64});
  timm::ModelPtr features = make_model("densenet121", 3, 0);
  features->eval();
  // No classifier: norm5's output, pooled.
  CHECK((features->forward(x).sizes() == at::IntArrayRef{2, 1024}));
  // Five levels: the stem before its pool, denseblock1..3 before their transitions, norm5.
  const timm::Intermediates inter = features->forward_intermediates(x);
  REQUIRE(inter.intermediates.size() == 5);
  CHECK((inter.intermediates[0].sizes() == at::IntArrayRef{2, 64, 32, 32}));
  CHECK((inter.intermediates[1].sizes() == at::IntArrayRef{2, 256, 16, 16}));
  CHECK((inter.intermediates[3].sizes() == at::IntArrayRef{2, 1024, 4, 4}));
  CHECK(at::equal(inter.intermediates[4], inter.final));
  CHECK(features->feature_info()[0] == timm::FeatureInfo{64, 2, "features.norm0"});
  CHECK(make_model("densenetblur121d")->feature_info()[0] == timm::FeatureInfo{64, 2, "features.norm2"});
  CHECK_THROWS_AS(features->forward_intermediates(x, timm::IntermediatesOptions().output_fmt("NLC")), timm::UsageError);

  const auto matcher = features->group_matcher(false);
  REQUIRE(matcher.size() == 2);
  CHECK(matcher[0].first == "stem");
  REQUIRE(matcher[1].second.size() == 2);
  CHECK(matcher[1].second[1].pattern == R"(^features\.transition(\d+))");
  CHECK(matcher[1].second[1].suffix == std::vector<double>{99999});

  features->set_grad_checkpointing(true);
  CHECK(at::equal(features->forward(x), features->forward(x)));
  features->set_grad_checkpointing(false);

  timm::ModelArgs args;
  args.num_classes = kNumClasses;
  timm::test::check_head_dropout_gives_bias("densenet121", args, "classifier.bias", x);

  // Keywords: growth rate 16, bottleneck 2 x 16: 32 stem channels, 512 at the end.
  args.kwargs = {{"growth_rate", "16"}, {"bn_size", "2"}, {"stem_type", "deep_tiered_narrow"}, {"act_layer", "silu"}};
  const timm::ModelPtr small = timm::create_model("densenet121", args);
  CHECK(small->feature_info().front() == timm::FeatureInfo{32, 2, "features.norm2"});
  CHECK(small->feature_info().back() == timm::FeatureInfo{512, 32, "features.norm5"});
  const auto small_params = small->named_parameters();
  CHECK((small_params["features.conv0.weight"].sizes() == at::IntArrayRef{12, 3, 3, 3}));
  CHECK((small_params["features.denseblock1.denselayer1.conv1.weight"].sizes() == at::IntArrayRef{32, 32, 1, 1}));
  small->eval();
  CHECK((small->forward(x).sizes() == at::IntArrayRef{2, kNumClasses}));

  // As timm: no drop path (a TypeError there), no unknown keywords, a known pool type.
  args.kwargs.clear();
  args.drop_path_rate = 0.1;
  CHECK_THROWS_WITH_AS(timm::create_model("densenet121", args), doctest::Contains("drop_path_rate"), timm::UsageError);
  args.drop_path_rate.reset();
  for (const auto& [key, value] : std::map<std::string, std::string>{{"output_stride", "16"},
                                                                     {"stem_type", "wide"},
                                                                     {"growth_rate", "2.5"},
                                                                     {"bn_size", "0"},
                                                                     {"act_layer", "nope"},
                                                                     {"proj_drop_rate", "1.5"},
                                                                     {"memory_efficient", "maybe"}}) {
    CAPTURE(key);
    args.kwargs = {{key, value}};
    CHECK_THROWS_AS(timm::create_model("densenet121", args), timm::UsageError);
  }
  args.kwargs.clear();
  args.global_pool = "none";
  CHECK_THROWS_AS(timm::create_model("densenet121", args), timm::UsageError);
}

TEST_CASE("BlurPool2d blurs with the binomial filter after reflect padding, keeps no state and follows the dtype") {
  c10::NoGradGuard no_grad;
  const at::Tensor x = at::randn({2, 4, 7, 5});
  const at::Tensor taps = at::tensor({1.0F, 2.0F, 1.0F}) / 4.0;
  const at::Tensor kernel = (taps.unsqueeze(1) * taps.unsqueeze(0)).expand({4, 1, 3, 3});
  const at::Tensor padded = at::pad(x, {1, 1, 1, 1}, "reflect");
  const std::array<int64_t, 2> stride = {2, 2}, no_padding = {0, 0}, dilation = {1, 1};
  auto depthwise = [&](const at::Tensor& in) {
    return at::conv2d(in, kernel, std::nullopt, stride, at::IntArrayRef(no_padding), dilation, 4);
  };
  const at::Tensor expected = depthwise(padded);

  timm::layers::BlurPool2d with_channels(timm::layers::BlurPool2dOptions(4));
  timm::layers::BlurPool2d any_channels;
  CHECK(timm::state_dict(*with_channels).empty());
  CHECK((with_channels->filt.sizes() == at::IntArrayRef{4, 1, 3, 3}));
  const at::Tensor out = with_channels(x);
  CHECK((out.sizes() == at::IntArrayRef{2, 4, 4, 3}));
  CHECK(at::allclose(out, expected, 1e-6, 1e-6));
  CHECK(at::allclose(any_channels(x), expected, 1e-6, 1e-6));

  timm::layers::BlurPool2d zeros(timm::layers::BlurPool2dOptions(4).pad_mode("constant"));
  const at::Tensor zero_padded = depthwise(at::pad(x, {1, 1, 1, 1}));
  CHECK(at::allclose(zeros(x), zero_padded, 1e-6, 1e-6));

  // filt_size 5: taps C(4, k) / 16.
  timm::layers::BlurPool2d five(timm::layers::BlurPool2dOptions().filt_size(5));
  const at::Tensor taps5 = at::tensor({1.0F, 4.0F, 6.0F, 4.0F, 1.0F}) / 16.0;
  CHECK(at::equal(five->filt[0][0], taps5.unsqueeze(1) * taps5.unsqueeze(0)));

  const at::Tensor out_bf16 = with_channels(x.to(at::kBFloat16));
  CHECK((out_bf16.scalar_type() == at::kBFloat16));
  CHECK(at::allclose(out_bf16.to(at::kFloat), expected, 5e-2, 5e-2));

  CHECK_THROWS_AS(with_channels(at::randn({1, 3, 8, 8})), timm::UsageError);
  CHECK_THROWS_AS(timm::layers::BlurPool2d(timm::layers::BlurPool2dOptions().filt_size(1)), timm::UsageError);
  CHECK_THROWS_AS(timm::layers::BlurPool2d(timm::layers::BlurPool2dOptions().pad_mode("mirror")), timm::UsageError);
}

}  // namespace test_densenet
