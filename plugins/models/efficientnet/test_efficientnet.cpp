// EfficientNet / EfficientNetV2 / MobileNetV2 / MobileNetV3 / MnasNet / MixNet /
// LCNet / MobileNetV4 plugin against timm
// (tests/oracle/efficientnet_oracle.py) through the shared harness
// (tests/support/model_parity.hpp), both ways: for every registered name the
// state_dict keys, shapes, dtypes, parameter count, pretrained cfg,
// group_matcher and drop-path schedule equal timm's; for one model of each
// family and block kind, timm's random weights load here and give timm's
// eval logits, eval forward_features / forward_head / pre-logits outputs,
// train-mode logits, gradients and BN statistics, and our
// weights load in timm (strict) and give our logits. Tolerance for every float
// comparison: |ours - timm| <= 1e-4 + 1e-4 * |timm|.
//
// The parity case runs on one thread, as the oracle does: train-mode
// gradients through BatchNorm over few values per channel (8 in the last
// stage at 64 x 64, batch 2) depend on the summation order.
#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <nlohmann/json.hpp>

#include "model_parity.hpp"
#include "test_support.hpp"
#include "timm/base/error.hpp"
#include "timm/layers/conv2d_same.hpp"
#include "timm/layers/drop_path.hpp"
#include "timm/layers/global_context.hpp"
#include "timm/layers/mixed_conv2d.hpp"
#include "timm/layers/norm_act.hpp"
#include "timm/models/model.hpp"
#include "timm/models/state_dict.hpp"
#include "timm/plugin/registry.hpp"

// Last: c10/util/Logging.h defines a CHECK macro that doctest must override.
#include <doctest/doctest.h>

namespace test_efficientnet {

namespace {

using timm::test::make_model;
using timm::test::ParityCase;
using timm::test::ThreadCount;

constexpr int64_t kNumClasses = timm::test::kParityNumClasses;

const std::vector<std::string> kNames = {"efficientnet_b0",
                                         "efficientnet_b1",
                                         "efficientnet_b2",
                                         "efficientnet_b3",
                                         "efficientnet_b4",
                                         "efficientnet_b5",
                                         "efficientnet_b6",
                                         "efficientnet_b7",
                                         "efficientnet_b8",
                                         "tf_efficientnet_b0",
                                         "tf_efficientnet_b1",
                                         "tf_efficientnet_b2",
                                         "tf_efficientnet_b3",
                                         "tf_efficientnet_b4",
                                         "tf_efficientnet_b5",
                                         "tf_efficientnet_b6",
                                         "tf_efficientnet_b7",
                                         "tf_efficientnet_b8",
                                         "efficientnetv2_rw_t",
                                         "gc_efficientnetv2_rw_t",
                                         "efficientnetv2_rw_s",
                                         "efficientnetv2_rw_m",
                                         "efficientnetv2_s",
                                         "efficientnetv2_m",
                                         "efficientnetv2_l",
                                         "efficientnetv2_xl",
                                         "tf_efficientnetv2_s",
                                         "tf_efficientnetv2_m",
                                         "tf_efficientnetv2_l",
                                         "tf_efficientnetv2_xl",
                                         "tf_efficientnetv2_b0",
                                         "tf_efficientnetv2_b1",
                                         "tf_efficientnetv2_b2",
                                         "tf_efficientnetv2_b3",
                                         "mobilenetv2_035",
                                         "mobilenetv2_050",
                                         "mobilenetv2_075",
                                         "mobilenetv2_100",
                                         "mobilenetv2_110d",
                                         "mobilenetv2_120d",
                                         "mobilenetv2_140",
                                         "mobilenetv3_large_075",
                                         "mobilenetv3_large_100",
                                         "mobilenetv3_large_150d",
                                         "mobilenetv3_small_050",
                                         "mobilenetv3_small_075",
                                         "mobilenetv3_small_100",
                                         "tf_mobilenetv3_large_075",
                                         "tf_mobilenetv3_large_100",
                                         "tf_mobilenetv3_large_minimal_100",
                                         "tf_mobilenetv3_small_075",
                                         "tf_mobilenetv3_small_100",
                                         "tf_mobilenetv3_small_minimal_100",
                                         "mnasnet_050",
                                         "mnasnet_075",
                                         "mnasnet_100",
                                         "mnasnet_140",
                                         "mnasnet_small",
                                         "semnasnet_050",
                                         "semnasnet_075",
                                         "semnasnet_100",
                                         "semnasnet_140",
                                         "spnasnet_100",
                                         "fbnetc_100",
                                         "mixnet_s",
                                         "mixnet_m",
                                         "mixnet_l",
                                         "mixnet_xl",
                                         "mixnet_xxl",
                                         "tf_mixnet_s",
                                         "tf_mixnet_m",
                                         "tf_mixnet_l",
                                         "lcnet_035",
                                         "lcnet_050",
                                         "lcnet_075",
                                         "lcnet_100",
                                         "lcnet_150",
                                         "mobilenetv4_conv_small_035",
                                         "mobilenetv4_conv_small_050",
                                         "mobilenetv4_conv_small",
                                         "mobilenetv4_conv_medium",
                                         "mobilenetv4_conv_large",
                                         "mobilenetv4_hybrid_medium",
                                         "mobilenetv4_hybrid_large",
                                         "mobilenetv4_conv_aa_medium",
                                         "mobilenetv4_conv_blur_medium",
                                         "mobilenetv4_conv_aa_large",
                                         "mobilenetv4_hybrid_medium_075",
                                         "mobilenetv4_hybrid_large_075",
                                         "efficientnet_lite0",
                                         "efficientnet_lite1",
                                         "efficientnet_lite2",
                                         "efficientnet_lite3",
                                         "efficientnet_lite4",
                                         "tf_efficientnet_lite0",
                                         "tf_efficientnet_lite1",
                                         "tf_efficientnet_lite2",
                                         "tf_efficientnet_lite3",
                                         "tf_efficientnet_lite4",
                                         "efficientnet_es",
                                         "efficientnet_em",
                                         "efficientnet_el",
                                         "tf_efficientnet_es",
                                         "tf_efficientnet_em",
                                         "tf_efficientnet_el",
                                         "efficientnet_blur_b0",
                                         "efficientnet_b0_g16_evos",
                                         "tinynet_a",
                                         "tinynet_b",
                                         "tinynet_c",
                                         "tinynet_d",
                                         "tinynet_e",
                                         "mobilenetv1_100",
                                         "mobilenetv1_100h",
                                         "mobilenetv1_125",
                                         "mobilenet_edgetpu_100",
                                         "mobilenet_edgetpu_v2_xs",
                                         "mobilenet_edgetpu_v2_s",
                                         "mobilenet_edgetpu_v2_m",
                                         "mobilenet_edgetpu_v2_l",
                                         "test_efficientnet"};
// EfficientNet-L2 (about 480M parameters, 1.9 GB of float32): compared in a test case of its own.
const std::vector<std::string> kL2Names = {"efficientnet_l2", "tf_efficientnet_l2"};
const std::vector<std::string> kPatterns = {"efficientnet_b*",
                                            "tf_efficientnet_b*",
                                            "efficientnetv2_*",
                                            "tf_efficientnetv2_*",
                                            "gc_efficientnetv2_*",
                                            "mobilenetv2_*",
                                            "mobilenetv3_*",
                                            "tf_mobilenetv3_*",
                                            "mnasnet_*",
                                            "semnasnet_*",
                                            "spnasnet_*",
                                            "fbnetc_*",
                                            "mixnet_*",
                                            "tf_mixnet_*",
                                            "lcnet_*",
                                            "mobilenetv4_*",
                                            "efficientnet_lite*",
                                            "tf_efficientnet_lite*",
                                            "efficientnet_e*",
                                            "tf_efficientnet_e*",
                                            "tinynet_*",
                                            "mobilenetv1_*",
                                            "mobilenet_edgetpu_*",
                                            "test_efficientnet"};
const std::vector<std::string> kL2Patterns = {"efficientnet_l2", "tf_efficientnet_l2"};

// Smallest and largest EfficientNet (DS + IR with swish SE), MobileNetV3
// large (DS without SE, relu / hard_swish IR, hard_sigmoid SE, ConvBnAct,
// pooled head) and small (DS with SE and stride, fixed stem, 1 channel),
// MobileNetV2 (relu6, no SE) and its depth-scaled "d" variant; the TF ports
// ('same' padding, BN eps 1e-3): tf_efficientnet_b0 at 68 px, where the
// stride-2 convs pad asymmetrically at 68 and 34 (total 1: 0 before, 1 after)
// and symmetrically from 17 on (k5 at 17: 2 and 2), so neither PyTorch's
// padding nor one computed for a fixed size passes (at an odd size such as
// 65 every stride-2 'same' pad is symmetric, PyTorch's); and the minimal
// MobileNetV3 (relu, 3x3, no SE) at 64 px, every stride-2 pad asymmetric.
// EfficientNetV2: tf_efficientnetv2_b0 at 68 px (ConvBnAct, EdgeResidual
// and IR blocks with 'same' padding, asymmetric at 68 and 34, symmetric from
// 17 on; channels rounded with round_limit 0), efficientnetv2_rw_t
// (channels x0.8, depth x0.9; ConvBnAct and EdgeResidual with skips) and
// gc_efficientnetv2_rw_t (the SDK's GlobalContext in place of SE).
// mnasnet_100 (relu, a DS block without skip, IR without SE, the last IR
// noskip), lcnet_050 (MobileNetV3 class, 'dsa' blocks, SE with Python
// round() only in the last stage), mixnet_s (MixedConv2d: mixed depthwise
// kernels k3.5.7 .. k3.5.7.9.11, two-group pointwise convs a1.1 / p1.1; relu
// then swish with SE) and tf_mixnet_s (the same with 'same' padding per
// group: every stride-2 group a Conv2dSame, asymmetric at 64 px).
// 64x64 inputs unless said, batch 2.
const std::vector<ParityCase> kCases = {
    {"efficientnet_b0", "efficientnet_b0", 3, 64, 2},
    {"efficientnet_b7", "efficientnet_b7", 3, 64, 2},
    {"mobilenetv3_large_100", "mobilenetv3_large_100", 3, 64, 2},
    {"mobilenetv3_small_050_c1", "mobilenetv3_small_050", 1, 64, 2},
    {"mobilenetv2_100", "mobilenetv2_100", 3, 64, 2},
    {"mobilenetv2_110d", "mobilenetv2_110d", 3, 64, 2},
    {"tf_efficientnet_b0_68px", "tf_efficientnet_b0", 3, 68, 2},
    {"tf_mobilenetv3_small_minimal_100", "tf_mobilenetv3_small_minimal_100", 3, 64, 2},
    {"tf_efficientnetv2_b0_68px", "tf_efficientnetv2_b0", 3, 68, 2},
    {"efficientnetv2_rw_t", "efficientnetv2_rw_t", 3, 64, 2},
    {"gc_efficientnetv2_rw_t", "gc_efficientnetv2_rw_t", 3, 64, 2},
    {"mnasnet_100", "mnasnet_100", 3, 64, 2},
    {"lcnet_050", "lcnet_050", 3, 64, 2},
    {"mixnet_s", "mixnet_s", 3, 64, 2},
    {"tf_mixnet_s", "tf_mixnet_s", 3, 64, 2},
};

// The other generators of efficientnet.py: efficientnet_lite0 (relu6, no SE,
// fixed stem / first / last stage) and tf_efficientnet_lite0 at 68 px ('same'
// padding asymmetric at 68 and 34); efficientnet_es (EdgeResidual with forced
// input channels fc24 and noskip, relu) and tf_efficientnet_es at 68 px;
// tinynet_e (repeats rounded to the nearest, fixed stem, odd widths x0.51);
// mobilenetv1_100 ('dsa' blocks, relu6, no conv_head / bn2: the classifier
// on the last block's 1024 channels); mobilenet_edgetpu_v2_s (5x5 stem of 64,
// ConvBnAct 1x1, grouped EdgeResidual gs64); test_efficientnet (round_limit
// 0, stem 24, 256 head features); efficientnet_blur_b0 (BlurPool2d after the
// strided depthwise convs of DS / IR blocks); efficientnet_b0_g16_evos
// (grouped depthwise convs of 16 channels per group, channels rounded to 16).
// 64x64 unless said, batch 2.
const std::vector<ParityCase> kMoreCases = {
    {"efficientnet_lite0", "efficientnet_lite0", 3, 64, 2},
    {"tf_efficientnet_lite0_68px", "tf_efficientnet_lite0", 3, 68, 2},
    {"efficientnet_es", "efficientnet_es", 3, 64, 2},
    {"tf_efficientnet_es_68px", "tf_efficientnet_es", 3, 68, 2},
    {"tinynet_e", "tinynet_e", 3, 64, 2},
    {"mobilenetv1_100", "mobilenetv1_100", 3, 64, 2},
    {"mobilenet_edgetpu_v2_s", "mobilenet_edgetpu_v2_s", 3, 64, 2},
    {"test_efficientnet", "test_efficientnet", 3, 64, 2},
    {"efficientnet_blur_b0", "efficientnet_blur_b0", 3, 64, 2},
    {"efficientnet_b0_g16_evos", "efficientnet_b0_g16_evos", 3, 64, 2},
};

// MobileNetV4 (the MobileNetV3 class with norm_head): conv_small (ConvBnAct
// stages, UIR blocks of every kind: ExtraDW a/k, IR k only, ConvNeXt a
// only), conv_blur_medium (EdgeResidual and UIR with aa_layer 'blurpc': the
// strided convs at stride 1, then a zero-padded BlurPool2d; FFN UIR a0_k0)
// and hybrid_medium at 1 channel and 64 x 96 (Mobile MQA blocks with and
// without the kv down_conv + BatchNorm, shared single-head keys / values,
// layer scale 1e-5 in UIR and attention blocks), batch 2.
const std::vector<ParityCase> kMnv4Cases = {
    {"mobilenetv4_conv_small", "mobilenetv4_conv_small", 3, 64, 2},
    {"mobilenetv4_conv_blur_medium", "mobilenetv4_conv_blur_medium", 3, 64, 2},
    {"mobilenetv4_hybrid_medium_c1_64x96", "mobilenetv4_hybrid_medium", 1, 96, 2, nlohmann::json::object(), 64},
};

// The drop_prob of each block's drop_path (0 where it has none), in block order.
std::vector<double> block_drop_path_rates(const torch::nn::Module& model) {
  std::vector<double> rates;
  for (const auto& stage : model.named_children()["blocks"]->children()) {
    for (const auto& block : stage->children()) {
      rates.push_back(timm::test::drop_prob(*block, "drop_path"));
    }
  }
  return rates;
}

// The oracle writes every gradient of the stem, bn1, the first and the last block and the head: more than 8.
const timm::test::ParityOptions kParity = {
    .tol = {1e-4, 1e-4},
    .block_rates = block_drop_path_rates,
    .after_buffers = {"bn1.running_mean", "bn1.running_var", "bn1.num_batches_tracked"},
    .min_grad_keys = 9,
};

}  // namespace

TEST_CASE("every registered EfficientNet / MobileNet: keys, shapes, parameter count, cfg, group_matcher as timm") {
  const ThreadCount one_thread(1);  // 2 cores shared: OpenMP's spinning threads only slow it down
  // Keys, shapes, dtypes, parameter count, cfg, group_matcher, drop_rate 0 and timm's drop-path schedule
  // (rate * block / blocks), from one model made with drop_path_rate 0.2 (which adds no keys).
  const auto info = timm::test::check_registered("efficientnet_oracle.py", kNames, kPatterns, kParity);
  // Every name we register is one timm registers.
  std::vector<std::string> listed;
  for (const auto& pattern : kPatterns) {
    for (const auto& name : info.at("list").at(pattern).get<std::vector<std::string>>()) listed.push_back(name);
  }
  for (const auto& name : kNames) CHECK(std::find(listed.begin(), listed.end(), name) != listed.end());
  for (const auto& pattern : kPatterns) {
    for (const auto& name : timm::Registry::global().list(timm::PluginKind::kModel, pattern)) {
      CHECK_MESSAGE(std::find(kNames.begin(), kNames.end(), name) != kNames.end(),
                    name << " is registered but untested");
    }
  }
}

TEST_CASE("efficientnet_l2 / tf_efficientnet_l2: keys, shapes, parameter count, cfg, group_matcher as timm") {
  const ThreadCount one_thread(1);  // 2 cores shared: OpenMP's spinning threads only slow it down
  timm::test::check_registered("efficientnet_oracle.py", kL2Names, kL2Patterns, kParity);
}

TEST_CASE("efficientnet lite / edge / tinynet / mobilenetv1 / edgetpu / test / blur match timm both ways") {
  timm::test::run_parity("efficientnet_oracle.py", kMoreCases, kParity);
}

TEST_CASE("efficientnet lite / edge / mobilenetv1 / edgetpu / test: init statistics as timm's _init_weight_goog") {
  const ThreadCount one_thread(1);  // 2 cores shared: OpenMP's spinning threads only slow it down
  timm::test::check_init_stats("efficientnet_oracle.py", {"efficientnet_lite0", "efficientnet_es", "mobilenetv1_100",
                                                          "mobilenet_edgetpu_v2_s", "test_efficientnet"});
  // mobilenetv1_100 has no conv_head / bn2 (timm's nn.Identity): the classifier sees the last block's 1024 channels.
  timm::ModelPtr v1 = make_model("mobilenetv1_100");
  const auto params = v1->named_parameters();
  CHECK_FALSE(params.contains("conv_head.weight"));
  CHECK_FALSE(params.contains("bn2.weight"));
  CHECK((params["classifier.weight"].sizes() == at::IntArrayRef{kNumClasses, 1024}));
  CHECK((make_model("mobilenetv1_100h")->named_parameters()["conv_head.weight"].sizes() ==
         at::IntArrayRef{1024, 1024, 1, 1}));
}

TEST_CASE("efficientnet / mobilenet match timm both ways: logits, gradients, BN statistics, weights") {
  timm::test::run_parity("efficientnet_oracle.py", kCases, kParity);
}

TEST_CASE("mobilenetv4 matches timm both ways: UIR, aa_layer blurpc, Mobile MQA, norm_head") {
  timm::test::run_parity("efficientnet_oracle.py", kMnv4Cases, kParity);
}

TEST_CASE("mobilenetv4 structure: norm_head, aa children, layer scale, MQA keys") {
  const ThreadCount one_thread(1);  // 2 cores shared: OpenMP's spinning threads only slow it down
  timm::ModelPtr hybrid = make_model("mobilenetv4_hybrid_medium");
  const auto params = hybrid->named_parameters();
  CHECK(params.contains("norm_head.weight"));
  CHECK_FALSE(params.contains("conv_head.bias"));  // head_norm: never a bias
  // Layer scale starts at timm's 1e-5, in UIR and attention blocks (not in the EdgeResidual stem block).
  CHECK(params["blocks.2.4.layer_scale.gamma"].max().item<double>() == doctest::Approx(1e-5));
  CHECK(params["blocks.3.0.layer_scale.gamma"].min().item<double>() == doctest::Approx(1e-5));
  CHECK_FALSE(params.contains("blocks.0.0.layer_scale.gamma"));
  // kv stride 2 in stage 2: depthwise 3x3 down_conv + BatchNorm; none in stage 3.
  CHECK((params["blocks.2.4.attn.key.down_conv.weight"].sizes() == at::IntArrayRef{160, 1, 3, 3}));
  CHECK((params["blocks.2.4.attn.query.proj.weight"].sizes() == at::IntArrayRef{256, 160, 1, 1}));
  CHECK((params["blocks.2.4.attn.value.proj.weight"].sizes() == at::IntArrayRef{64, 160, 1, 1}));
  CHECK(params.contains("blocks.3.8.attn.key.proj.weight"));
  CHECK_FALSE(params.contains("blocks.3.8.attn.key.down_conv.weight"));
  CHECK(hybrid->named_buffers().contains("blocks.2.4.attn.key.norm.running_mean"));
  // The conv models have no layer scale; the aa models downsample in an "aa" child after the norm.
  timm::ModelPtr conv = make_model("mobilenetv4_conv_small");
  for (const auto& p : conv->named_parameters()) CHECK_FALSE(p.key().ends_with("gamma"));
  timm::ModelPtr aa = make_model("mobilenetv4_conv_aa_medium");
  const auto modules = aa->named_modules();
  CHECK(modules.contains("blocks.0.0.aa"));
  CHECK(modules.contains("blocks.1.0.dw_mid.aa"));
  CHECK_FALSE(modules.contains("blocks.1.0.dw_start.aa"));  // dw_start runs at stride 1 when dw_mid strides
  CHECK_FALSE(modules.contains("blocks.1.1.dw_mid.aa"));    // stride 1: no aa
  CHECK(modules["blocks.0.0.conv_exp"]->as<torch::nn::Conv2d>()->options.stride()->at(0) == 1);
  c10::NoGradGuard no_grad;
  aa->eval();
  hybrid->eval();
  CHECK((aa->forward(at::randn({1, 3, 64, 64})).sizes() == at::IntArrayRef{1, kNumClasses}));
  CHECK((hybrid->forward_features(at::randn({1, 3, 64, 64})).sizes() == at::IntArrayRef{1, 960, 2, 2}));
}

TEST_CASE("efficientnet forward_head without a classifier is the pre-logits features (EfficientNet, MobileNetV3)") {
  timm::test::check_head_split("efficientnet_b0", 64);
  timm::test::check_head_split("mobilenetv3_small_050", 64);
  timm::test::check_head_split("mobilenetv4_conv_small", 64);
  timm::test::check_head_split("mobilenetv1_100", 64);
}

TEST_CASE("efficientnet init follows timm's _init_weight_goog") {
  const ThreadCount one_thread(1);  // 2 cores shared: OpenMP's spinning threads only slow it down
  at::manual_seed(0);
  timm::ModelPtr model = make_model("efficientnet_b0", 3, 1000);
  const auto params = model->named_parameters();
  // Dense 1x1 conv: normal(0, sqrt(2 / (k * k * out))).
  const at::Tensor pwl = params["blocks.5.0.conv_pwl.weight"];  // 192 x 672 x 1 x 1
  CHECK(pwl.std().item<double>() == doctest::Approx(std::sqrt(2.0 / 192)).epsilon(0.03));
  // Depthwise: fan_out per group, sqrt(2 / (k * k * out / groups)) = sqrt(2 / 25).
  const at::Tensor dw = params["blocks.5.0.conv_dw.weight"];  // 672 x 1 x 5 x 5
  CHECK(dw.std().item<double>() == doctest::Approx(std::sqrt(2.0 / 25)).epsilon(0.03));
  CHECK(params["blocks.5.0.se.conv_reduce.bias"].abs().max().item<double>() == 0.0);
  CHECK(params["blocks.5.0.bn2.weight"].min().item<double>() == 1.0);
  // Linear: uniform(+-1 / sqrt(out_features)), bias zero.
  const at::Tensor fc = params["classifier.weight"];
  CHECK(fc.abs().max().item<double>() <= 1.0 / std::sqrt(1000.0));
  CHECK(fc.abs().max().item<double>() > 0.9 / std::sqrt(1000.0));
  CHECK(params["classifier.bias"].abs().max().item<double>() == 0.0);
  timm::ModelPtr mnv3 = make_model("mobilenetv3_small_050");
  CHECK(mnv3->named_parameters()["conv_head.bias"].abs().max().item<double>() == 0.0);
}

TEST_CASE(
    "tf_ ports: Conv2dSame where 'same' depends on the input, padded Conv2d elsewhere, BN eps 1e-3, timm's init") {
  const ThreadCount one_thread(1);  // 2 cores shared: OpenMP's spinning threads only slow it down
  at::manual_seed(0);
  timm::ModelPtr model = make_model("tf_efficientnet_b0");
  std::map<std::string, std::shared_ptr<torch::nn::Module>> modules;
  for (const auto& item : model->named_modules()) modules[item.key()] = item.value();
  // Stride 2: timm's Conv2dSame; stride 1 with an odd kernel: a Conv2d with the symmetric padding.
  for (const auto* name : {"conv_stem", "blocks.1.0.conv_dw", "blocks.2.0.conv_dw", "blocks.5.0.conv_dw"}) {
    CAPTURE(name);
    CHECK(modules.at(name)->as<timm::layers::Conv2dSame>() != nullptr);
  }
  for (const auto* name : {"blocks.0.0.conv_dw", "blocks.4.0.conv_dw", "blocks.1.0.conv_pw", "conv_head"}) {
    CAPTURE(name);
    CHECK(modules.at(name)->as<timm::layers::Conv2dSame>() == nullptr);
    REQUIRE(modules.at(name)->as<torch::nn::Conv2d>() != nullptr);
  }
  const auto& k5 = modules.at("blocks.4.0.conv_dw")->as<torch::nn::Conv2d>()->options.padding();
  CHECK((*std::get<torch::ExpandingArray<2>>(k5))[0] == 2);
  // _init_weight_goog reaches the Conv2dSame: depthwise 5x5, normal(0, sqrt(2 / 25)).
  const at::Tensor dw = model->named_parameters()["blocks.5.0.conv_dw.weight"];  // 672 x 1 x 5 x 5
  CHECK(dw.std().item<double>() == doctest::Approx(std::sqrt(2.0 / 25)).epsilon(0.03));
  int64_t norms = 0;
  timm::layers::for_each_batch_norm_act(*model, [&](const std::string& name, timm::layers::BatchNormAct2dImpl& bn) {
    CAPTURE(name);
    CHECK(bn.options.eps() == 0.001);
    CHECK(bn.options.momentum() == 0.1);
    ++norms;
  });
  CHECK(norms == 49);
  // --model-kwargs bn_eps overrides the port's default, as timm's kwargs.setdefault.
  timm::ModelArgs args;
  args.kwargs = {{"bn_eps", "1e-5"}};
  timm::ModelPtr eps_model = timm::create_model("tf_mobilenetv3_small_minimal_100", args);
  timm::layers::for_each_batch_norm_act(*eps_model, [&](const std::string& name, timm::layers::BatchNormAct2dImpl& bn) {
    CAPTURE(name);
    CHECK(bn.options.eps() == 1e-5);
  });
  // The PyTorch-native model has no Conv2dSame.
  timm::ModelPtr native = make_model("efficientnet_b0");
  for (const auto& item : native->named_modules()) CHECK(item.value()->as<timm::layers::Conv2dSame>() == nullptr);
}

TEST_CASE("EfficientNetV2: Conv2dSame in the tf_ ports' stride-2 convs, BN eps 1e-3, GlobalContext with timm's init") {
  const ThreadCount one_thread(1);  // 2 cores shared: OpenMP's spinning threads only slow it down
  at::manual_seed(0);
  timm::ModelPtr tf_b0 = make_model("tf_efficientnetv2_b0");
  std::map<std::string, std::shared_ptr<torch::nn::Module>> modules;
  for (const auto& item : tf_b0->named_modules()) modules[item.key()] = item.value();
  // Stride 2 (stem, the first EdgeResidual of a stage, the first IR's dw conv): timm's Conv2dSame.
  for (const auto* name : {"conv_stem", "blocks.1.0.conv_exp", "blocks.2.0.conv_exp", "blocks.3.0.conv_dw"}) {
    CAPTURE(name);
    CHECK(modules.at(name)->as<timm::layers::Conv2dSame>() != nullptr);
  }
  // Stride 1, 3x3: a Conv2d with padding 1 (ConvBnAct's conv, a repeated EdgeResidual's conv_exp).
  for (const auto* name : {"blocks.0.0.conv", "blocks.1.1.conv_exp", "blocks.1.1.conv_pwl"}) {
    CAPTURE(name);
    CHECK(modules.at(name)->as<timm::layers::Conv2dSame>() == nullptr);
    REQUIRE(modules.at(name)->as<torch::nn::Conv2d>() != nullptr);
  }
  const auto& k3 = modules.at("blocks.1.1.conv_exp")->as<torch::nn::Conv2d>()->options.padding();
  CHECK((*std::get<torch::ExpandingArray<2>>(k3))[0] == 1);
  int64_t norms = 0;
  timm::layers::for_each_batch_norm_act(*tf_b0, [&](const std::string& name, timm::layers::BatchNormAct2dImpl& bn) {
    CAPTURE(name);
    CHECK(bn.options.eps() == 0.001);
    ++norms;
  });
  CHECK(norms == 59);  // as timm's BatchNorm2d count

  timm::ModelPtr gc = make_model("gc_efficientnetv2_rw_t");
  std::shared_ptr<torch::nn::Module> se;
  for (const auto& item : gc->named_modules()) {
    if (item.key() == "blocks.5.0.se") se = item.value();
  }
  REQUIRE(se != nullptr);
  const auto* context = se->as<timm::layers::GlobalContextImpl>();
  REQUIRE(context != nullptr);
  CHECK(context->rd_channels() == 32);  // 768 mid channels * 0.25 / 6, make_divisible(., 1, round_limit=0)
  // _init_weight_goog reaches the GlobalContext's convs (over its kaiming init): normal(0, sqrt(2 / fan_out)).
  const auto params = gc->named_parameters();
  CHECK(params["blocks.5.0.se.conv_attn.weight"].std().item<double>() == doctest::Approx(std::sqrt(2.0)).epsilon(0.1));
  CHECK(params["blocks.5.0.se.conv_attn.bias"].abs().max().item<double>() == 0.0);
  CHECK(params["blocks.5.0.se.mlp_scale.fc1.weight"].std().item<double>() ==
        doctest::Approx(std::sqrt(2.0 / 32)).epsilon(0.03));
  CHECK(params["blocks.5.0.se.mlp_scale.norm.weight"].min().item<double>() == 1.0);
  CHECK(params["blocks.5.0.se.mlp_scale.norm.bias"].abs().max().item<double>() == 0.0);
  // The PyTorch-native model has no Conv2dSame.
  for (const auto& item : gc->named_modules()) CHECK(item.value()->as<timm::layers::Conv2dSame>() == nullptr);
}

TEST_CASE("MixNet: MixedConv2d groups with timm's splits, Conv2dSame per stride-2 group in tf_mixnet_s, timm's init") {
  const ThreadCount one_thread(1);  // 2 cores shared: OpenMP's spinning threads only slow it down
  at::manual_seed(0);
  timm::ModelPtr tf_s = make_model("tf_mixnet_s");
  std::map<std::string, std::shared_ptr<torch::nn::Module>> modules;
  for (const auto& item : tf_s->named_modules()) modules[item.key()] = item.value();
  // k3.5.7 over 144 mid channels (24 in, x6): three depthwise groups of 48.
  const auto* dw = modules.at("blocks.2.0.conv_dw")->as<timm::layers::MixedConv2d>();
  REQUIRE(dw != nullptr);
  CHECK(dw->splits() == std::vector<int64_t>{48, 48, 48});
  // a1.1: the expansion conv in two dense groups (16 -> 96: 8 -> 48 each); k3 alone is a plain conv.
  const auto* pw = modules.at("blocks.1.0.conv_pw")->as<timm::layers::MixedConv2d>();
  REQUIRE(pw != nullptr);
  CHECK(pw->splits() == std::vector<int64_t>{8, 8});
  CHECK(modules.at("blocks.1.0.conv_dw")->as<timm::layers::MixedConv2d>() == nullptr);
  // Stride 2: every group pads per input (Conv2dSame); stride 1 with odd kernels: Conv2d with the fixed padding.
  for (const auto* name :
       {"conv_stem", "blocks.1.0.conv_dw", "blocks.2.0.conv_dw.0", "blocks.2.0.conv_dw.2", "blocks.5.0.conv_dw.4"}) {
    CAPTURE(name);
    CHECK(modules.at(name)->as<timm::layers::Conv2dSame>() != nullptr);
  }
  for (const auto* name : {"blocks.2.1.conv_dw.0", "blocks.2.1.conv_dw.1", "blocks.2.1.conv_pw.0"}) {
    CAPTURE(name);
    CHECK(modules.at(name)->as<timm::layers::Conv2dSame>() == nullptr);
    REQUIRE(modules.at(name)->as<torch::nn::Conv2d>() != nullptr);
  }
  const auto& k5 = modules.at("blocks.2.1.conv_dw.1")->as<torch::nn::Conv2d>()->options.padding();
  CHECK((*std::get<torch::ExpandingArray<2>>(k5))[0] == 2);
  int64_t norms = 0;
  timm::layers::for_each_batch_norm_act(*tf_s, [&](const std::string& name, timm::layers::BatchNormAct2dImpl& bn) {
    CAPTURE(name);
    CHECK(bn.options.eps() == 0.001);
    ++norms;
  });
  CHECK(norms == 49);  // as timm's BatchNorm2d count
  // _init_weight_goog per group: depthwise 7x7 normal(0, sqrt(2 / 49)), the 1x1 group normal(0, sqrt(2 / 48)).
  const auto params = tf_s->named_parameters();
  CHECK(params["blocks.2.0.conv_dw.2.weight"].std().item<double>() ==
        doctest::Approx(std::sqrt(2.0 / 49)).epsilon(0.05));
  CHECK(params["blocks.1.0.conv_pw.1.weight"].std().item<double>() ==
        doctest::Approx(std::sqrt(2.0 / 48)).epsilon(0.1));
  // The PyTorch-native MixNet has no Conv2dSame.
  timm::ModelPtr native = make_model("mixnet_s");
  for (const auto& item : native->named_modules()) CHECK(item.value()->as<timm::layers::Conv2dSame>() == nullptr);
}

TEST_CASE("efficientnet head options: num_classes 0, global_pool, drop_rate; bad input rejected") {
  const ThreadCount one_thread(1);  // 2 cores shared: OpenMP's spinning threads only slow it down
  c10::NoGradGuard no_grad;
  const at::Tensor x = at::randn({2, 3, 64, 64});
  for (const auto* name : {"efficientnet_b0", "mobilenetv3_small_100"}) {
    CAPTURE(name);
    timm::ModelPtr features = make_model(name, 3, 0);
    features->eval();
    const int64_t num_features = std::string(name).starts_with("efficientnet") ? 1280 : 1024;
    CHECK((features->forward(x).sizes() == at::IntArrayRef{2, num_features}));

    timm::ModelArgs args;
    args.num_classes = kNumClasses;
    timm::test::check_head_dropout_gives_bias(name, args, "classifier.bias", x);

    args.global_pool = "catavgmax";
    timm::ModelPtr cat = timm::create_model(name, args);
    cat->eval();
    CHECK((cat->forward(x).sizes() == at::IntArrayRef{2, kNumClasses}));

    args.global_pool = "median";
    CHECK_THROWS_WITH_AS(timm::create_model(name, args), doctest::Contains("'median'"), timm::UsageError);
    args.global_pool = std::nullopt;
    args.kwargs["output_stride"] = "16";
    CHECK_THROWS_WITH_AS(timm::create_model(name, args), doctest::Contains("'output_stride'"), timm::UsageError);
    args.kwargs = {{"bn_eps", "abc"}};
    CHECK_THROWS_WITH_AS(timm::create_model(name, args), doctest::Contains("bn_eps='abc': expected a number"),
                         timm::UsageError);
    args.kwargs.clear();
    args.drop_path_rate = 1.5;
    CHECK_THROWS_AS(timm::create_model(name, args), timm::UsageError);
  }
  // --model-kwargs bn_eps / bn_momentum reach every BatchNorm, as timm's resolve_bn_args.
  timm::ModelArgs tf_bn;
  tf_bn.kwargs = {{"bn_eps", "0.001"}, {"bn_momentum", "0.01"}};
  timm::ModelPtr tf_model = timm::create_model("efficientnet_b0", tf_bn);
  int64_t tf_norms = 0;
  timm::layers::for_each_batch_norm_act(*tf_model, [&](const std::string& name, timm::layers::BatchNormAct2dImpl& bn) {
    CAPTURE(name);
    CHECK(bn.options.eps() == 0.001);
    CHECK(bn.options.momentum() == 0.01);
    ++tf_norms;
  });
  CHECK(tf_norms == 49);  // bn1, 16 blocks (DS: 2 norms, IR: 3), bn2

  // Every BN of the net is a BatchNormAct2d, so a SyncBatchNorm conversion reaches them all.
  timm::ModelPtr model = make_model("mobilenetv3_small_050");
  int64_t norm_acts = 0;
  timm::layers::for_each_batch_norm_act(*model,
                                        [&](const std::string&, timm::layers::BatchNormAct2dImpl&) { ++norm_acts; });
  int64_t running_means = 0;
  for (const auto& b : model->named_buffers()) running_means += b.key().ends_with("running_mean") ? 1 : 0;
  CHECK(norm_acts == running_means);
  CHECK(norm_acts > 30);
}

TEST_CASE("efficientnet --grad-checkpointing: each block checkpointed, the plain step's gradients") {
  // EfficientNet (conv_head + bn2 in forward_features) and MobileNetV3 (conv_head in the head), 32 px.
  timm::test::check_grad_checkpointing("efficientnet_b0", 32, 32);
  timm::test::check_grad_checkpointing("mobilenetv3_small_100", 32, 32);
  // MobileNetV4: UIR and Mobile MQA blocks, norm_head.
  timm::test::check_grad_checkpointing("mobilenetv4_hybrid_medium", 32, 32);
}

}  // namespace test_efficientnet
