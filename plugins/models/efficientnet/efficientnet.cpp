// EfficientNet (timm/models/efficientnet.py) and MobileNetV3
// (timm/models/mobilenetv3.py) through timm's block-string builder, with
// timm's module names so state_dict keys equal timm's:
// - efficientnet_b0 .. efficientnet_b8 (timm's PyTorch-native variants:
//   symmetric padding, BN eps 1e-5, swish, SE from the block input) and
//   tf_efficientnet_b0 .. b8 (the TF ports: 'same' padding, BN eps 1e-3);
// - EfficientNetV2 (ConvBnAct with skip, EdgeResidual / FusedMBConv and
//   InvertedResidual stages, silu): efficientnetv2_rw_t / rw_s / rw_m (timm's
//   own variants), gc_efficientnetv2_rw_t (GlobalContext in place of SE),
//   efficientnetv2_s / m / l / xl, and the TF ports tf_efficientnetv2_s / m /
//   l / xl and tf_efficientnetv2_b0 .. b3;
// - mobilenetv2_035/050/075/100/140 and mobilenetv2_110d/120d (relu6, depth
//   scaled with the stem and head kept), the same EfficientNet class;
// - the NAS-found nets in the same class (relu, SE from the block input):
//   mnasnet_050/075/100/140 (MnasNet-B1), semnasnet_050/075/100/140
//   (MnasNet-A1, with SE), mnasnet_small, spnasnet_100, fbnetc_100;
// - MixNet (mixed depthwise kernels, grouped pointwise convs: the SDK's
//   MixedConv2d; relu, then swish with SE): mixnet_s/m/l/xl/xxl and the TF
//   ports tf_mixnet_s/m/l;
// - mobilenetv3_large_075/100, mobilenetv3_large_150d,
//   mobilenetv3_small_050/075/100 (hard_swish, hard_sigmoid SE with relu,
//   pooled head: conv_head with bias and no BN, then flatten), and the TF
//   ports tf_mobilenetv3_large_075/100, tf_mobilenetv3_small_075/100 and the
//   'minimal' tf_mobilenetv3_large/small_minimal_100 (relu, k3, no SE);
// - lcnet_035/050/075/100/150 (PP-LCNet, timm's MobileNetV3 class with
//   'dsa' blocks, SE only in the last stage);
// - MobileNetV4 (timm's MobileNetV3 class with a normed head: conv_head
//   without bias, norm_head = BatchNormAct2d, no act2):
//   mobilenetv4_conv_small_035/050, conv_small, conv_medium, conv_large
//   (ConvBnAct, EdgeResidual and UniversalInvertedResidual blocks),
//   conv_aa_medium / conv_aa_large (aa_layer 'avg': AvgPool2d after the
//   strided convs), conv_blur_medium (aa_layer 'blurpc': BlurPool2d, zero
//   padded), hybrid_medium / hybrid_large and their _075 widths (Mobile MQA
//   attention blocks, layer scale 1e-5 in the UIR and attention blocks).
// - efficientnet_lite0 .. lite4 and tf_ ports (relu6, no SE, fixed stem and
//   first / last stages); EfficientNet-EdgeTPU efficientnet_es / em / el and
//   tf_ ports (EdgeResidual stages); efficientnet_l2 / tf_efficientnet_l2;
//   efficientnet_blur_b0 (aa_layer blurpc); efficientnet_b0_g16_evos
//   (grouped convs of 16, BatchNorm as timm 1.0.31); tinynet_a .. e;
//   mobilenetv1_100 / 100h / 125 (dsa blocks; without head_conv no conv_head
//   / bn2); mobilenet_edgetpu_100 and _v2_xs / s / m / l (stem kernel 3, 5 or
//   7, grouped EdgeResidual); test_efficientnet.
//
// Every model has timm's feature_info (the stem when the first block strides,
// then each block stack that ends a resolution) and forward_intermediates.
//
// Supported: num_classes (0: the pooled features come out), in_chans,
// drop_rate (dropout before the classifier), drop_path_rate (timm's
// rate * block / blocks schedule), global_pool, and --model-kwargs bn_eps,
// bn_momentum (every BatchNorm, as timm's resolve_bn_args; over the tf_
// models' eps 1e-3 as over timm's kwargs.setdefault).
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <ATen/ATen.h>
#include <torch/nn/functional/dropout.h>
#include <torch/nn/init.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>

#include "efficientnet_blocks.hpp"
#include "efficientnet_builder.hpp"
#include "timm/base/error.hpp"
#include "timm/layers/activations.hpp"
#include "timm/layers/classifier.hpp"
#include "timm/layers/conv2d_same.hpp"
#include "timm/layers/linear.hpp"
#include "timm/layers/norm_act.hpp"
#include "timm/layers/weight_init.hpp"
#include "timm/log/log.hpp"
#include "timm/models/grad_checkpoint.hpp"
#include "timm/models/model.hpp"
#include "timm/plugin/plugin.hpp"

namespace timm::efficientnet {
namespace {

namespace nn = torch::nn;

// timm 1.0.31's default pretrained tag of each model (the first tag of its
// default_cfgs); a model without one has no pretrained weights in timm.
const std::map<std::string, std::string> kDefaultTags = {{"efficientnet_b0", "ra_in1k"},
                                                         {"efficientnet_b1", "ra4_e3600_r240_in1k"},
                                                         {"efficientnet_b2", "ra_in1k"},
                                                         {"efficientnet_b3", "ra2_in1k"},
                                                         {"efficientnet_b4", "ra2_in1k"},
                                                         {"efficientnet_b5", "sw_in12k_ft_in1k"},
                                                         {"tf_efficientnet_b0", "ns_jft_in1k"},
                                                         {"tf_efficientnet_b1", "ns_jft_in1k"},
                                                         {"tf_efficientnet_b2", "ns_jft_in1k"},
                                                         {"tf_efficientnet_b3", "ns_jft_in1k"},
                                                         {"tf_efficientnet_b4", "ns_jft_in1k"},
                                                         {"tf_efficientnet_b5", "ns_jft_in1k"},
                                                         {"tf_efficientnet_b6", "ns_jft_in1k"},
                                                         {"tf_efficientnet_b7", "ns_jft_in1k"},
                                                         {"tf_efficientnet_b8", "ap_in1k"},
                                                         {"efficientnetv2_rw_t", "ra2_in1k"},
                                                         {"gc_efficientnetv2_rw_t", "agc_in1k"},
                                                         {"efficientnetv2_rw_s", "ra2_in1k"},
                                                         {"efficientnetv2_rw_m", "agc_in1k"},
                                                         {"tf_efficientnetv2_s", "in21k_ft_in1k"},
                                                         {"tf_efficientnetv2_m", "in21k_ft_in1k"},
                                                         {"tf_efficientnetv2_l", "in21k_ft_in1k"},
                                                         {"tf_efficientnetv2_xl", "in21k_ft_in1k"},
                                                         {"tf_efficientnetv2_b0", "in1k"},
                                                         {"tf_efficientnetv2_b1", "in1k"},
                                                         {"tf_efficientnetv2_b2", "in1k"},
                                                         {"tf_efficientnetv2_b3", "in21k_ft_in1k"},
                                                         {"mobilenetv2_050", "lamb_in1k"},
                                                         {"mobilenetv2_100", "ra_in1k"},
                                                         {"mobilenetv2_110d", "ra_in1k"},
                                                         {"mobilenetv2_120d", "ra_in1k"},
                                                         {"mobilenetv2_140", "ra_in1k"},
                                                         {"mnasnet_100", "rmsp_in1k"},
                                                         {"semnasnet_075", "rmsp_in1k"},
                                                         {"semnasnet_100", "rmsp_in1k"},
                                                         {"mnasnet_small", "lamb_in1k"},
                                                         {"spnasnet_100", "rmsp_in1k"},
                                                         {"fbnetc_100", "rmsp_in1k"},
                                                         {"mixnet_s", "ft_in1k"},
                                                         {"mixnet_m", "ft_in1k"},
                                                         {"mixnet_l", "ft_in1k"},
                                                         {"mixnet_xl", "ra_in1k"},
                                                         {"tf_mixnet_s", "in1k"},
                                                         {"tf_mixnet_m", "in1k"},
                                                         {"tf_mixnet_l", "in1k"},
                                                         {"mobilenetv3_large_100", "ra_in1k"},
                                                         {"mobilenetv3_large_150d", "ra4_e3600_r256_in1k"},
                                                         {"mobilenetv3_small_050", "lamb_in1k"},
                                                         {"mobilenetv3_small_075", "lamb_in1k"},
                                                         {"mobilenetv3_small_100", "lamb_in1k"},
                                                         {"tf_mobilenetv3_large_075", "in1k"},
                                                         {"tf_mobilenetv3_large_100", "in1k"},
                                                         {"tf_mobilenetv3_large_minimal_100", "in1k"},
                                                         {"tf_mobilenetv3_small_075", "in1k"},
                                                         {"tf_mobilenetv3_small_100", "in1k"},
                                                         {"tf_mobilenetv3_small_minimal_100", "in1k"},
                                                         {"lcnet_050", "ra2_in1k"},
                                                         {"lcnet_075", "ra2_in1k"},
                                                         {"lcnet_100", "ra2_in1k"},
                                                         {"mobilenetv4_conv_small_050", "e3000_r224_in1k"},
                                                         {"mobilenetv4_conv_small", "e2400_r224_in1k"},
                                                         {"mobilenetv4_conv_medium", "e500_r256_in1k"},
                                                         {"mobilenetv4_conv_large", "e600_r384_in1k"},
                                                         {"mobilenetv4_hybrid_medium", "e200_r256_in12k_ft_in1k"},
                                                         {"mobilenetv4_hybrid_large", "ix_e600_r384_in1k"},
                                                         {"mobilenetv4_conv_blur_medium", "e500_r224_in1k"},
                                                         {"mobilenetv4_conv_aa_large", "e230_r448_in12k_ft_in1k"},
                                                         {"efficientnet_lite0", "ra_in1k"},
                                                         {"tf_efficientnet_lite0", "in1k"},
                                                         {"tf_efficientnet_lite1", "in1k"},
                                                         {"tf_efficientnet_lite2", "in1k"},
                                                         {"tf_efficientnet_lite3", "in1k"},
                                                         {"tf_efficientnet_lite4", "in1k"},
                                                         {"efficientnet_es", "ra_in1k"},
                                                         {"efficientnet_em", "ra2_in1k"},
                                                         {"efficientnet_el", "ra_in1k"},
                                                         {"tf_efficientnet_es", "in1k"},
                                                         {"tf_efficientnet_em", "in1k"},
                                                         {"tf_efficientnet_el", "in1k"},
                                                         {"tf_efficientnet_l2", "ns_jft_in1k_475"},
                                                         {"tinynet_a", "in1k"},
                                                         {"tinynet_b", "in1k"},
                                                         {"tinynet_c", "in1k"},
                                                         {"tinynet_d", "in1k"},
                                                         {"tinynet_e", "in1k"},
                                                         {"mobilenetv1_100", "ra4_e3600_r224_in1k"},
                                                         {"mobilenetv1_100h", "ra4_e3600_r224_in1k"},
                                                         {"mobilenetv1_125", "ra4_e3600_r224_in1k"},
                                                         {"mobilenet_edgetpu_v2_m", "ra4_e3600_r224_in1k"},
                                                         {"test_efficientnet", "r160_in1k"}};

// timm's test_input_size / test_crop_pct of the models whose default cfg has them
// (validate.py evaluates at them unless --use-train-size).
const std::map<std::string, TestSize> kTestSizes = {{"efficientnet_b1", {288, 1.0}},
                                                    {"efficientnet_b2", {288, 1.0}},
                                                    {"efficientnet_b3", {320, 1.0}},
                                                    {"efficientnet_b4", {384, 1.0}},
                                                    {"efficientnetv2_rw_t", {288, std::nullopt}},
                                                    {"gc_efficientnetv2_rw_t", {288, std::nullopt}},
                                                    {"efficientnetv2_rw_s", {384, std::nullopt}},
                                                    {"efficientnetv2_rw_m", {416, std::nullopt}},
                                                    {"tf_efficientnetv2_s", {384, std::nullopt}},
                                                    {"tf_efficientnetv2_m", {480, std::nullopt}},
                                                    {"tf_efficientnetv2_l", {480, std::nullopt}},
                                                    {"tf_efficientnetv2_xl", {512, std::nullopt}},
                                                    {"tf_efficientnetv2_b0", {224, std::nullopt}},
                                                    {"tf_efficientnetv2_b1", {240, std::nullopt}},
                                                    {"tf_efficientnetv2_b2", {260, std::nullopt}},
                                                    {"tf_efficientnetv2_b3", {300, std::nullopt}},
                                                    {"mobilenetv3_large_150d", {320, 1.0}},
                                                    {"mobilenetv4_conv_small_035", {256, 0.95}},
                                                    {"mobilenetv4_conv_small_050", {256, 0.95}},
                                                    {"mobilenetv4_conv_small", {256, 0.95}},
                                                    {"mobilenetv4_conv_medium", {320, 1.0}},
                                                    {"mobilenetv4_conv_large", {448, 1.0}},
                                                    {"mobilenetv4_hybrid_medium", {320, 1.0}},
                                                    {"mobilenetv4_hybrid_large", {448, 1.0}},
                                                    {"mobilenetv4_conv_blur_medium", {256, 1.0}},
                                                    {"mobilenetv4_conv_aa_large", {544, 1.0}},
                                                    {"mobilenetv1_100", {256, 0.95}},
                                                    {"mobilenetv1_100h", {256, 0.95}},
                                                    {"mobilenetv1_125", {256, 1.0}},
                                                    {"mobilenet_edgetpu_v2_m", {256, 0.95}},
                                                    {"efficientnetv2_s", {384, std::nullopt}},
                                                    {"efficientnetv2_m", {416, std::nullopt}},
                                                    {"efficientnetv2_l", {480, std::nullopt}},
                                                    {"efficientnetv2_xl", {512, std::nullopt}}};

enum class Family { kEfficientNet, kMobileNetV3 };

// One registered architecture: what timm's _gen_* function passes to the model class.
struct Spec {
  std::string name;
  std::string description;
  Family family = Family::kEfficientNet;
  std::vector<std::vector<std::string>> arch_def;
  double channel_multiplier = 1.0;
  double depth_multiplier = 1.0;
  std::vector<double> stage_depth_multipliers;  // timm's tuple depth_multiplier (one per stage) when not empty
  double round_limit = 0.9;                     // round_channels' round_limit in round_chs_fn
  int64_t channel_divisor = 8;                  // round_channels' divisor in round_chs_fn
  std::optional<int64_t> group_size;            // decode_arch_def(group_size): every block's default
  bool fix_first_last = false;                  // decode_arch_def(fix_first_last)
  DepthTrunc depth_trunc = DepthTrunc::kCeil;   // decode_arch_def(depth_trunc)
  bool fix_stem = false;                        // stem channels not rounded
  int64_t stem_size = 32;
  int64_t stem_kernel_size = 3;  // timm's stem_kernel_size (MobileNet-EdgeTPU-v2: 5, 7)
  // Already resolved (rounded where timm rounds it); 0 (EfficientNet class only): no conv_head / bn2, the
  // classifier sees the last block's channels (timm's nn.Identity head, MobileNet-V1 without head_conv).
  int64_t num_features = 1280;
  std::string act_layer;
  SeConfig se;
  PretrainedCfg cfg;
  std::string pad_type;  // '' (symmetric) or 'same' (the tf_ ports)
  NormArgs norm;         // the defaults --model-kwargs bn_eps / bn_momentum override
  // MobileNetV3 class: timm's head_norm (MobileNetV4: conv_head without bias, then norm_head, a
  // BatchNormAct2d, in place of act2).
  bool head_norm = false;
  std::string aa_layer;                          // timm's aa_layer: '', 'avg' or 'blurpc'
  std::optional<double> layer_scale_init_value;  // uir / mqa blocks' layer scale
};

// The tf_ ports: timm's kwargs.setdefault('bn_eps', BN_EPS_TF_DEFAULT) and setdefault('pad_type', 'same').
Spec tf_port(Spec spec) {
  spec.name = "tf_" + spec.name;
  spec.description += ", TF port ('same' padding, BN eps 1e-3)";
  spec.pad_type = "same";
  spec.norm.eps = 1e-3;
  return spec;
}

// A --model-kwargs number that must be positive, or `fallback` when absent.
double positive_kwarg(const std::string& model, const ModelArgs& args, const std::string& key, double fallback) {
  const std::optional<double> value = model_kwarg_double(model, args, key);
  if (value && !(*value > 0.0)) {
    throw UsageError(model + ": " + key + "=" + args.kwargs.at(key) + ": expected a positive number");
  }
  return value.value_or(fallback);
}

// timm's resolve_bn_args: --model-kwargs bn_eps=..., bn_momentum=... set every BatchNorm of the net.
NormArgs norm_args(const std::string& model, const ModelArgs& args, NormArgs norm) {
  norm.eps = positive_kwarg(model, args, "bn_eps", norm.eps);
  norm.momentum = positive_kwarg(model, args, "bn_momentum", norm.momentum);
  return norm;
}

// timm's EfficientNet (conv_head + bn2 before the pool, classifier through
// create_classifier) and MobileNetV3 (pool, conv_head with bias, act2,
// flatten, classifier) in one class: the trunk is the same.
class EfficientNetImpl : public ClassifierImpl {
 public:
  EfficientNetImpl(const Spec& spec, const ModelArgs& args)
      : family_(spec.family), cfg_(spec.cfg), num_classes_(args.num_classes), drop_rate_(args.drop_rate) {
    validate_model_args(spec.name, args, {"bn_eps", "bn_momentum"});
    cfg_.hf_hub_id = timm_hub_id(spec.name, kDefaultTags);
    set_test_size(cfg_, spec.name, kTestSizes);
    const NormArgs norm = norm_args(spec.name, args, spec.norm);
    const double multiplier = spec.channel_multiplier;
    const double round_limit = spec.round_limit;
    const int64_t divisor = spec.channel_divisor;
    RoundChsFn round_chs = [multiplier, round_limit, divisor](int64_t chs) {
      return round_channels(static_cast<double>(chs), multiplier, divisor, round_limit);
    };
    const int64_t stem_size = spec.fix_stem ? spec.stem_size : round_chs(spec.stem_size);
    layers::Conv2dArgs stem_args;
    stem_args.stride = 2;
    conv_stem = layers::create_conv2d_pad(args.in_chans, stem_size, spec.stem_kernel_size, stem_args, spec.pad_type);
    register_module("conv_stem", conv_stem.ptr());
    bn1 = register_module("bn1", norm_act(stem_size, spec.act_layer, norm));

    BuilderConfig builder{round_chs, spec.act_layer, spec.se,       args.drop_path_rate.value_or(0.0),
                          norm,      spec.pad_type,  spec.aa_layer, spec.layer_scale_init_value};
    int64_t head_chs = 0;
    const auto arch = spec.stage_depth_multipliers.empty()
                          ? decode_arch_def(spec.arch_def, spec.depth_multiplier, spec.fix_first_last, spec.group_size,
                                            spec.depth_trunc)
                          : decode_arch_def(spec.arch_def, spec.stage_depth_multipliers, spec.fix_first_last,
                                            spec.group_size, spec.depth_trunc);
    // A ModuleList of Sequentials: keys blocks.<stage>.<block>, as timm's Sequential of Sequentials.
    stages_ = build_stages(builder, stem_size, arch, head_chs);
    for (const auto& feature : stage_features(builder, stem_size, arch)) {
      feature_info_.push_back(feature.info);
      stage_ends_.push_back(feature.stage);
    }
    for (auto& stage : stages_) blocks->push_back(stage);
    register_module("blocks", blocks);

    const std::string pool_type = args.global_pool.value_or("avg");
    if (family_ == Family::kEfficientNet) {
      make_efficientnet_head(spec, head_chs, pool_type, norm);
    } else {
      make_mobilenetv3_head(spec, head_chs, pool_type, norm);
    }
    layers::efficientnet_init_weights(*this);
  }

  // timm's forward_features: stem, blocks and (EfficientNet) conv_head + bn2,
  // (N, C, H, W); MobileNetV3's conv_head comes after the pool, in the head.
  // With grad checkpointing each block is checkpointed (timm's
  // checkpoint_seq over the flattened stages).
  at::Tensor forward_features(at::Tensor input) override {
    at::Tensor x = bn1(conv_stem.forward(input));
    if (grad_checkpointing_) {
      x = checkpoint_seq(sequence_modules(stages_), x);
    } else {
      for (auto& stage : stages_) x = stage->forward(x);
    }
    return efficientnet_head_conv(x);
  }

  // timm's feature_info: bn1 (only when the first block strides), then the
  // block stacks that end a resolution, e.g. blocks.0/1/2/4/6 for
  // efficientnet_b0.
  std::vector<FeatureInfo> feature_info() const override { return feature_info_; }

  // timm's forward_intermediates: the indices count feature_info's levels,
  // each the output of step stage_ends_[level] (0: the stem, k + 1: block
  // stack k). EfficientNet's final features get conv_head + bn2 only when
  // every stack ran; MobileNetV3's are the last stack's output (its conv_head
  // is in the head) and, as timm asserts, it stops early only for
  // intermediates_only.
  Intermediates forward_intermediates(at::Tensor input,
                                      const IntermediatesOptions& options = IntermediatesOptions()) override {
    check_output_fmt(describe_model(*this), options.output_fmt(), {"NCHW"});
    if (family_ == Family::kMobileNetV3 && options.stop_early() && !options.intermediates_only()) {
      throw UsageError(describe_model(*this) +
                       ": forward_intermediates: Must use intermediates_only for early stopping.");
    }
    const auto [levels, max_level] = feature_take_indices(static_cast<int64_t>(stage_ends_.size()), options.indices());
    std::vector<int64_t> steps;
    for (const int64_t level : levels) steps.push_back(stage_ends_[static_cast<size_t>(level)]);
    const std::vector<bool> take = take_mask(static_cast<int64_t>(stages_.size()) + 1, steps);
    Intermediates out;
    at::Tensor x = bn1(conv_stem.forward(input));
    if (take[0]) out.intermediates.push_back(x);
    const size_t stacks_run =
        options.stop_early() ? static_cast<size_t>(stage_ends_[static_cast<size_t>(max_level)]) : stages_.size();
    for (size_t i = 0; i < stacks_run; ++i) {
      x = grad_checkpointing_ ? checkpoint_seq(sequence_modules(stages_[i]), x) : stages_[i]->forward(x);
      if (take[i + 1]) out.intermediates.push_back(x);
    }
    if (options.intermediates_only()) return out;
    if (stacks_run == stages_.size()) x = efficientnet_head_conv(x);
    out.final = x;
    return out;
  }

  // timm's forward_head: global_pool, (MobileNetV3: conv_head, act2 or
  // MobileNetV4's norm_head, flatten), dropout, then the classifier unless pre_logits.
  at::Tensor forward_head(at::Tensor features, bool pre_logits = false) override {
    at::Tensor x = global_pool(features);
    if (family_ == Family::kMobileNetV3) {
      x = conv_head.forward(x);
      x = norm_head ? norm_head(x) : act2(x);
      if (!global_pool->is_identity()) x = x.flatten(1);
    }
    if (drop_rate_ > 0.0) {
      x = nn::functional::dropout(x, nn::functional::DropoutFuncOptions().p(drop_rate_).training(is_training()));
    }
    return pre_logits ? x : classifier.forward(x);
  }

  at::Tensor forward(at::Tensor x) override { return forward_head(forward_features(x)); }
  void set_grad_checkpointing(bool enable) override { grad_checkpointing_ = enable; }
  int64_t num_classes() const override { return num_classes_; }
  const PretrainedCfg& pretrained_cfg() const override { return cfg_; }
  GroupMatcher group_matcher(bool coarse) const override {
    const std::string blocks_rule = coarse ? R"(^blocks\.(\d+))" : R"(^blocks\.(\d+)\.(\d+))";
    if (family_ == Family::kMobileNetV3)
      return {{"stem", {{R"(^conv_stem|bn1)", std::nullopt}}}, {"blocks", {{blocks_rule, std::nullopt}}}};
    return {{"stem", {{R"(^conv_stem|bn1)", std::nullopt}}},
            {"blocks", {{blocks_rule, std::nullopt}, {R"(conv_head|bn2)", std::vector<double>{99999}}}}};
  }

  nn::AnyModule conv_stem;  // Conv2d, or Conv2dSame for 'same' padding
  layers::BatchNormAct2d bn1{nullptr};
  nn::ModuleList blocks;
  nn::AnyModule conv_head;              // empty: EfficientNet with num_features 0
  layers::BatchNormAct2d bn2{nullptr};  // EfficientNet with num_features > 0 only
  layers::SelectAdaptivePool2d global_pool{nullptr};
  layers::BatchNormAct2d norm_head{nullptr};  // MobileNetV3 class with head_norm (MobileNetV4) only
  layers::Activation act2{nullptr};           // MobileNetV3 class without head_norm only
  nn::AnyModule classifier;

 private:
  // EfficientNet's conv_head + bn2 at the end of forward_features; none for MobileNetV3 or without head features.
  at::Tensor efficientnet_head_conv(const at::Tensor& x) {
    if (family_ != Family::kEfficientNet || !bn2) return x;
    return bn2(conv_head.forward(x));
  }

  // With num_features 0 timm's conv_head and bn2 are nn.Identity (no keys) and the pool sees head_chs.
  void make_efficientnet_head(const Spec& spec, int64_t head_chs, const std::string& pool_type, const NormArgs& norm) {
    int64_t num_features = head_chs;
    if (spec.num_features > 0) {
      num_features = spec.num_features;
      conv_head = layers::create_conv2d_pad(head_chs, num_features, 1, layers::Conv2dArgs{}, spec.pad_type);
      register_module("conv_head", conv_head.ptr());
      bn2 = register_module("bn2", norm_act(num_features, spec.act_layer, norm));
    }
    auto head = layers::create_classifier(num_features, num_classes_, pool_type);
    global_pool = register_module("global_pool", head.global_pool);
    classifier = head.fc;
    register_module("classifier", classifier.ptr());
  }

  // The pool comes first, unflattened; conv_head maps the pooled channels.
  // With head_norm (MobileNetV4) conv_head has no bias and norm_head (norm +
  // act) replaces act2, timm's nn.Identity there.
  void make_mobilenetv3_head(const Spec& spec, int64_t head_chs, const std::string& pool_type, const NormArgs& norm) {
    global_pool = register_module("global_pool", layers::SelectAdaptivePool2d(pool_type));
    const int64_t pooled = head_chs * global_pool->feat_mult();
    layers::Conv2dArgs head_args;
    head_args.bias = !spec.head_norm;
    conv_head = layers::create_conv2d_pad(pooled, spec.num_features, 1, head_args, spec.pad_type);
    register_module("conv_head", conv_head.ptr());
    if (spec.head_norm) {
      norm_head = register_module("norm_head", norm_act(spec.num_features, spec.act_layer, norm));
    } else {
      // In place, as timm's act_layer(inplace=True): it overwrites conv_head's output.
      act2 = register_module("act2", layers::create_act(spec.act_layer, /*inplace=*/true));
    }
    if (num_classes_ > 0) {
      classifier = nn::AnyModule(layers::Linear(spec.num_features, num_classes_));
    } else {
      classifier = nn::AnyModule(nn::Identity());
    }
    register_module("classifier", classifier.ptr());
  }

  Family family_;
  std::vector<nn::Sequential> stages_;
  std::vector<FeatureInfo> feature_info_;
  std::vector<int64_t> stage_ends_;  // timm's stage_ends: the forward step of each feature level
  PretrainedCfg cfg_;
  int64_t num_classes_;
  double drop_rate_;
  bool grad_checkpointing_ = false;
};

PretrainedCfg make_cfg(int64_t size, double crop_pct, const std::string& interpolation = "bicubic",
                       const std::string& crop_mode = "center", bool half_mean_std = false) {
  PretrainedCfg cfg;
  cfg.input_size = {3, size, size};
  cfg.crop_pct = crop_pct;
  cfg.interpolation = interpolation;
  cfg.crop_mode = crop_mode;
  if (half_mean_std) cfg.mean = cfg.std = {0.5, 0.5, 0.5};
  cfg.first_conv = "conv_stem";
  cfg.classifier = "classifier";
  return cfg;
}

// timm's _gen_efficientnet: (channel, depth) multipliers per size; default
// tags ra_in1k (b0, b2), ra4_e3600_r240_in1k (b1), ra2_in1k (b3, b4),
// sw_in12k_ft_in1k (b5), untrained (b6, b7, b8); the tf_ ports ns_jft_in1k
// (b0 .. b7), ap_in1k (b8), with their own cfgs (TF's resolutions).
std::vector<Spec> efficientnet_specs() {
  const std::vector<std::vector<std::string>> arch = {{"ds_r1_k3_s1_e1_c16_se0.25"},  {"ir_r2_k3_s2_e6_c24_se0.25"},
                                                      {"ir_r2_k5_s2_e6_c40_se0.25"},  {"ir_r3_k3_s2_e6_c80_se0.25"},
                                                      {"ir_r3_k5_s1_e6_c112_se0.25"}, {"ir_r4_k5_s2_e6_c192_se0.25"},
                                                      {"ir_r1_k3_s1_e6_c320_se0.25"}};
  struct Size {
    double channel, depth;
    PretrainedCfg cfg, tf_cfg;
  };
  const std::vector<Size> sizes = {{1.0, 1.0, make_cfg(224, 0.875), make_cfg(224, 0.875)},
                                   {1.0, 1.1, make_cfg(240, 0.9, "bicubic", "center", true), make_cfg(240, 0.882)},
                                   {1.1, 1.2, make_cfg(256, 0.875), make_cfg(260, 0.89)},
                                   {1.2, 1.4, make_cfg(288, 0.875), make_cfg(300, 0.904)},
                                   {1.4, 1.8, make_cfg(320, 0.875), make_cfg(380, 0.922)},
                                   {1.6, 2.2, make_cfg(448, 1.0, "bicubic", "squash"), make_cfg(456, 0.934)},
                                   {1.8, 2.6, make_cfg(528, 0.942), make_cfg(528, 0.942)},
                                   {2.0, 3.1, make_cfg(600, 0.949), make_cfg(600, 0.949)},
                                   {2.2, 3.6, make_cfg(672, 0.954), make_cfg(672, 0.954, "bicubic", "center", true)}};
  std::vector<Spec> specs;
  std::vector<Spec> tf_specs;
  for (size_t i = 0; i < sizes.size(); ++i) {
    Spec s;
    s.name = "efficientnet_b" + std::to_string(i);
    s.description = "EfficientNet-B" + std::to_string(i) + " (channels x" + timm::format("%g", sizes[i].channel) +
                    ", depth x" + timm::format("%g", sizes[i].depth) + ")";
    s.arch_def = arch;
    s.channel_multiplier = sizes[i].channel;
    s.depth_multiplier = sizes[i].depth;
    s.num_features = round_channels(1280, sizes[i].channel);
    s.act_layer = "swish";
    s.cfg = sizes[i].cfg;
    specs.push_back(s);
    s.cfg = sizes[i].tf_cfg;
    tf_specs.push_back(tf_port(s));
  }
  specs.insert(specs.end(), tf_specs.begin(), tf_specs.end());
  return specs;
}

// timm's _gen_efficientnetv2_s / _m / _l / _xl / _base (silu, SE from the
// block input). Default tags: ra2_in1k (rw_t, rw_s), agc_in1k (gc_rw_t,
// rw_m), untrained (s, m, l, xl); the TF ports in21k_ft_in1k (s, m, l, xl,
// b3), in1k (b0, b1, b2). timm's test_input_size is not part of our
// PretrainedCfg.
std::vector<Spec> efficientnetv2_specs() {
  using ArchDef = std::vector<std::vector<std::string>>;
  const ArchDef arch_s = {{"cn_r2_k3_s1_e1_c24_skip"},    {"er_r4_k3_s2_e4_c48"},
                          {"er_r4_k3_s2_e4_c64"},         {"ir_r6_k3_s2_e4_c128_se0.25"},
                          {"ir_r9_k3_s1_e6_c160_se0.25"}, {"ir_r15_k3_s2_e6_c256_se0.25"}};
  // rw: timm's original small model, from the paper's figure before the reference code.
  ArchDef arch_rw = arch_s;
  arch_rw.front() = {"er_r2_k3_s1_e1_c24"};
  arch_rw.back() = {"ir_r15_k3_s2_e6_c272_se0.25"};
  const ArchDef arch_m = {{"cn_r3_k3_s1_e1_c24_skip"},     {"er_r5_k3_s2_e4_c48"},
                          {"er_r5_k3_s2_e4_c80"},          {"ir_r7_k3_s2_e4_c160_se0.25"},
                          {"ir_r14_k3_s1_e6_c176_se0.25"}, {"ir_r18_k3_s2_e6_c304_se0.25"},
                          {"ir_r5_k3_s1_e6_c512_se0.25"}};
  const ArchDef arch_l = {{"cn_r4_k3_s1_e1_c32_skip"},     {"er_r7_k3_s2_e4_c64"},
                          {"er_r7_k3_s2_e4_c96"},          {"ir_r10_k3_s2_e4_c192_se0.25"},
                          {"ir_r19_k3_s1_e6_c224_se0.25"}, {"ir_r25_k3_s2_e6_c384_se0.25"},
                          {"ir_r7_k3_s1_e6_c640_se0.25"}};
  const ArchDef arch_xl = {{"cn_r4_k3_s1_e1_c32_skip"},     {"er_r8_k3_s2_e4_c64"},
                           {"er_r8_k3_s2_e4_c96"},          {"ir_r16_k3_s2_e4_c192_se0.25"},
                           {"ir_r24_k3_s1_e6_c256_se0.25"}, {"ir_r32_k3_s2_e6_c512_se0.25"},
                           {"ir_r8_k3_s1_e6_c640_se0.25"}};
  const ArchDef arch_base = {{"cn_r1_k3_s1_e1_c16_skip"},    {"er_r2_k3_s2_e4_c32"},
                             {"er_r2_k3_s2_e4_c48"},         {"ir_r3_k3_s2_e4_c96_se0.25"},
                             {"ir_r5_k3_s1_e6_c112_se0.25"}, {"ir_r8_k3_s2_e6_c192_se0.25"}};
  auto v2 = [](const std::string& name, const std::string& description, const ArchDef& arch, double channel,
               double depth, int64_t stem_size, int64_t num_features, const PretrainedCfg& cfg) {
    Spec s;
    s.name = name;
    s.description =
        description + " (channels x" + timm::format("%g", channel) + ", depth x" + timm::format("%g", depth) + ")";
    s.arch_def = arch;
    s.channel_multiplier = channel;
    s.depth_multiplier = depth;
    s.stem_size = stem_size;
    s.num_features = num_features;
    s.act_layer = "silu";
    s.cfg = cfg;
    return s;
  };
  // _gen_efficientnetv2_s rounds num_features with round_chs_fn; _m, _l, _xl keep 1280.
  auto v2_s = [&](const std::string& name, bool rw, double channel, double depth, const PretrainedCfg& cfg) {
    return v2(name, rw ? "EfficientNetV2-S (rw)" : "EfficientNetV2-S", rw ? arch_rw : arch_s, channel, depth, 24,
              round_channels(rw ? 1792 : 1280, channel), cfg);
  };
  // _gen_efficientnetv2_base: round_chs_fn with round_limit=0 (stem, blocks and num_features).
  auto v2_base = [&](int index, double channel, double depth, const PretrainedCfg& cfg) {
    const std::string b = "b" + std::to_string(index);
    Spec s = v2("efficientnetv2_" + b, "EfficientNetV2-B" + std::to_string(index), arch_base, channel, depth, 32,
                round_channels(1280, channel, 8, /*round_limit=*/0.0), cfg);
    s.round_limit = 0.0;
    return s;
  };
  const PretrainedCfg tf_s_cfg = make_cfg(300, 1.0, "bicubic", "center", true);
  const PretrainedCfg tf_large_cfg = make_cfg(384, 1.0, "bicubic", "squash", true);  // m, l, xl

  std::vector<Spec> specs;
  specs.push_back(v2_s("efficientnetv2_rw_t", false, 0.8, 0.9, make_cfg(224, 1.0)));
  Spec gc = v2_s("gc_efficientnetv2_rw_t", false, 0.8, 0.9, make_cfg(224, 1.0));
  gc.description += ", GlobalContext attention in place of SE";
  gc.se.layer = "gc";
  specs.push_back(gc);
  specs.push_back(v2_s("efficientnetv2_rw_s", true, 1.0, 1.0, make_cfg(288, 1.0)));
  Spec rw_m = v2_s("efficientnetv2_rw_m", true, 1.2, 1.2, make_cfg(320, 1.0));
  rw_m.description = "EfficientNetV2-M (rw) (channels x1.2, depth x1.2 in stages 0-3, x1.6 in 4-5)";
  rw_m.stage_depth_multipliers = {1.2, 1.2, 1.2, 1.2, 1.6, 1.6};
  specs.push_back(rw_m);
  const Spec small = v2_s("efficientnetv2_s", false, 1.0, 1.0, make_cfg(288, 1.0));
  const Spec medium = v2("efficientnetv2_m", "EfficientNetV2-M", arch_m, 1.0, 1.0, 24, 1280, make_cfg(320, 1.0));
  const Spec large = v2("efficientnetv2_l", "EfficientNetV2-L", arch_l, 1.0, 1.0, 32, 1280, make_cfg(384, 1.0));
  const Spec xlarge = v2("efficientnetv2_xl", "EfficientNetV2-XL", arch_xl, 1.0, 1.0, 32, 1280, make_cfg(384, 1.0));
  const std::vector<Spec> sizes = {small, medium, large, xlarge};
  specs.insert(specs.end(), sizes.begin(), sizes.end());
  for (Spec port : sizes) {
    port.cfg = port.name == "efficientnetv2_s" ? tf_s_cfg : tf_large_cfg;
    specs.push_back(tf_port(port));
  }
  // timm registers the B sizes only as TF ports.
  specs.push_back(tf_port(v2_base(0, 1.0, 1.0, make_cfg(192, 0.875))));
  specs.push_back(tf_port(v2_base(1, 1.0, 1.1, make_cfg(192, 0.882))));
  specs.push_back(tf_port(v2_base(2, 1.1, 1.2, make_cfg(208, 0.89))));
  specs.push_back(tf_port(v2_base(3, 1.2, 1.4, make_cfg(240, 0.9, "bicubic", "squash", true))));
  return specs;
}

// timm's _gen_mnasnet_b1 (mnasnet_*), _gen_mnasnet_a1 (semnasnet_*: SE in
// three stages), _gen_mnasnet_small, _gen_spnasnet and _gen_fbnetc: the
// EfficientNet class with its defaults (relu, SE from the block input,
// num_features not scaled with the channels). Default tags rmsp_in1k
// (mnasnet_100, semnasnet_075 / 100, spnasnet_100, fbnetc_100), lamb_in1k
// (mnasnet_small), untrained otherwise; spnasnet and fbnetc bilinear.
std::vector<Spec> nas_specs() {
  using ArchDef = std::vector<std::vector<std::string>>;
  const ArchDef b1 = {{"ds_r1_k3_s1_c16_noskip"},    {"ir_r3_k3_s2_e3_c24"}, {"ir_r3_k5_s2_e3_c40"},
                      {"ir_r3_k5_s2_e6_c80"},        {"ir_r2_k3_s1_e6_c96"}, {"ir_r4_k5_s2_e6_c192"},
                      {"ir_r1_k3_s1_e6_c320_noskip"}};
  const ArchDef a1 = {{"ds_r1_k3_s1_e1_c16_noskip"}, {"ir_r2_k3_s2_e6_c24"},         {"ir_r3_k5_s2_e3_c40_se0.25"},
                      {"ir_r4_k3_s2_e6_c80"},        {"ir_r2_k3_s1_e6_c112_se0.25"}, {"ir_r3_k5_s2_e6_c160_se0.25"},
                      {"ir_r1_k3_s1_e6_c320"}};
  const ArchDef small = {{"ds_r1_k3_s1_c8"},
                         {"ir_r1_k3_s2_e3_c16"},
                         {"ir_r2_k3_s2_e6_c16"},
                         {"ir_r4_k5_s2_e6_c32_se0.25"},
                         {"ir_r3_k3_s1_e6_c32_se0.25"},
                         {"ir_r3_k5_s2_e6_c88_se0.25"},
                         {"ir_r1_k3_s1_e6_c144"}};
  const ArchDef spnasnet = {{"ds_r1_k3_s1_c16_noskip"},
                            {"ir_r3_k3_s2_e3_c24"},
                            {"ir_r1_k5_s2_e6_c40", "ir_r3_k3_s1_e3_c40"},
                            {"ir_r1_k5_s2_e6_c80", "ir_r3_k3_s1_e3_c80"},
                            {"ir_r1_k5_s1_e6_c96", "ir_r3_k5_s1_e3_c96"},
                            {"ir_r4_k5_s2_e6_c192"},
                            {"ir_r1_k3_s1_e6_c320_noskip"}};
  const ArchDef fbnetc = {{"ir_r1_k3_s1_e1_c16"},
                          {"ir_r1_k3_s2_e6_c24", "ir_r2_k3_s1_e1_c24"},
                          {"ir_r1_k5_s2_e6_c32", "ir_r1_k5_s1_e3_c32", "ir_r1_k5_s1_e6_c32", "ir_r1_k3_s1_e6_c32"},
                          {"ir_r1_k5_s2_e6_c64", "ir_r1_k5_s1_e3_c64", "ir_r2_k5_s1_e6_c64"},
                          {"ir_r3_k5_s1_e6_c112", "ir_r1_k5_s1_e3_c112"},
                          {"ir_r4_k5_s2_e6_c184"},
                          {"ir_r1_k3_s1_e6_c352"}};
  auto nas = [](const std::string& name, const std::string& description, const ArchDef& arch, double channel,
                int64_t stem_size, int64_t num_features, const PretrainedCfg& cfg) {
    Spec s;
    s.name = name;
    s.description = description + " (channels x" + timm::format("%g", channel) + ")";
    s.arch_def = arch;
    s.channel_multiplier = channel;
    s.stem_size = stem_size;
    s.num_features = num_features;
    s.act_layer = "relu";
    s.cfg = cfg;
    return s;
  };
  std::vector<Spec> specs;
  const std::vector<std::pair<std::string, double>> widths = {{"050", 0.5}, {"075", 0.75}, {"100", 1.0}, {"140", 1.4}};
  for (const auto& [suffix, channel] : widths) {
    specs.push_back(nas("mnasnet_" + suffix, "MnasNet-B1", b1, channel, 32, 1280, make_cfg(224, 0.875)));
  }
  for (const auto& [suffix, channel] : widths) {
    specs.push_back(nas("semnasnet_" + suffix, "MnasNet-A1 (SE)", a1, channel, 32, 1280, make_cfg(224, 0.875)));
  }
  specs.push_back(nas("mnasnet_small", "MnasNet small", small, 1.0, 8, 1280, make_cfg(224, 0.875)));
  specs.push_back(
      nas("spnasnet_100", "Single-Path NAS (Pixel 1)", spnasnet, 1.0, 32, 1280, make_cfg(224, 0.875, "bilinear")));
  specs.push_back(nas("fbnetc_100", "FBNet-C", fbnetc, 1.0, 16, 1984, make_cfg(224, 0.875, "bilinear")));
  return specs;
}

// timm's _gen_mixnet_s and _gen_mixnet_m (MixNet-M, and -L / XL / XXL by
// channel and depth, repeats rounded: depth_trunc='round'): the EfficientNet
// class, relu in the first two stages and swish with SE (from the block
// input) after; "k3.5.7" mixes depthwise kernels, "a1.1" / "p1.1" split the
// pointwise convs in two groups (the SDK's MixedConv2d). 1536 head features
// at every width. Default tags ft_in1k (s, m, l), ra_in1k (xl), untrained
// (xxl); the TF ports ('same' padding per group, BN eps 1e-3) in1k.
std::vector<Spec> mixnet_specs() {
  using ArchDef = std::vector<std::vector<std::string>>;
  const ArchDef arch_s = {
      {"ds_r1_k3_s1_e1_c16"},
      {"ir_r1_k3_a1.1_p1.1_s2_e6_c24", "ir_r1_k3_a1.1_p1.1_s1_e3_c24"},
      {"ir_r1_k3.5.7_s2_e6_c40_se0.5_nsw", "ir_r3_k3.5_a1.1_p1.1_s1_e6_c40_se0.5_nsw"},
      {"ir_r1_k3.5.7_p1.1_s2_e6_c80_se0.25_nsw", "ir_r2_k3.5_p1.1_s1_e6_c80_se0.25_nsw"},
      {"ir_r1_k3.5.7_a1.1_p1.1_s1_e6_c120_se0.5_nsw", "ir_r2_k3.5.7.9_a1.1_p1.1_s1_e3_c120_se0.5_nsw"},
      {"ir_r1_k3.5.7.9.11_s2_e6_c200_se0.5_nsw", "ir_r2_k3.5.7.9_p1.1_s1_e6_c200_se0.5_nsw"}};
  const ArchDef arch_m = {{"ds_r1_k3_s1_e1_c24"},
                          {"ir_r1_k3.5.7_a1.1_p1.1_s2_e6_c32", "ir_r1_k3_a1.1_p1.1_s1_e3_c32"},
                          {"ir_r1_k3.5.7.9_s2_e6_c40_se0.5_nsw", "ir_r3_k3.5_a1.1_p1.1_s1_e6_c40_se0.5_nsw"},
                          {"ir_r1_k3.5.7_s2_e6_c80_se0.25_nsw", "ir_r3_k3.5.7.9_a1.1_p1.1_s1_e6_c80_se0.25_nsw"},
                          {"ir_r1_k3_s1_e6_c120_se0.5_nsw", "ir_r3_k3.5.7.9_a1.1_p1.1_s1_e3_c120_se0.5_nsw"},
                          {"ir_r1_k3.5.7.9_s2_e6_c200_se0.5_nsw", "ir_r3_k3.5.7.9_p1.1_s1_e6_c200_se0.5_nsw"}};
  auto mixnet = [&](const std::string& size, const std::string& label, double channel, double depth) {
    const bool is_small = size == "s";
    Spec s;
    s.name = "mixnet_" + size;
    s.description = "MixNet-" + label + " (channels x" + timm::format("%g", channel) + ", depth x" +
                    timm::format("%g", depth) + ")";
    s.arch_def = is_small ? arch_s : arch_m;
    s.channel_multiplier = channel;
    s.depth_multiplier = depth;
    s.depth_trunc = is_small ? DepthTrunc::kCeil : DepthTrunc::kRound;
    s.stem_size = is_small ? 16 : 24;
    s.num_features = 1536;
    s.act_layer = "relu";
    s.cfg = make_cfg(224, 0.875);
    return s;
  };
  const std::vector<Spec> ported = {mixnet("s", "S", 1.0, 1.0), mixnet("m", "M", 1.0, 1.0), mixnet("l", "L", 1.3, 1.0)};
  std::vector<Spec> specs = ported;
  specs.push_back(mixnet("xl", "XL", 1.6, 1.2));
  specs.push_back(mixnet("xxl", "XXL", 2.4, 1.3));
  for (const auto& s : ported) specs.push_back(tf_port(s));
  return specs;
}

// timm's _gen_mobilenet_v2; the "d" variants scale depth with fix_stem_head.
std::vector<Spec> mobilenetv2_specs() {
  const std::vector<std::vector<std::string>> arch = {
      {"ds_r1_k3_s1_c16"},    {"ir_r2_k3_s2_e6_c24"},  {"ir_r3_k3_s2_e6_c32"}, {"ir_r4_k3_s2_e6_c64"},
      {"ir_r3_k3_s1_e6_c96"}, {"ir_r3_k3_s2_e6_c160"}, {"ir_r1_k3_s1_e6_c320"}};
  struct Variant {
    std::string suffix;
    double channel, depth;
    bool fix_stem_head;
  };
  const std::vector<Variant> variants = {{"035", 0.35, 1.0, false}, {"050", 0.5, 1.0, false}, {"075", 0.75, 1.0, false},
                                         {"100", 1.0, 1.0, false},  {"140", 1.4, 1.0, false}, {"110d", 1.1, 1.2, true},
                                         {"120d", 1.2, 1.4, true}};
  std::vector<Spec> specs;
  for (const auto& v : variants) {
    Spec s;
    s.name = "mobilenetv2_" + v.suffix;
    s.description =
        "MobileNet-V2 (channels x" + timm::format("%g", v.channel) + ", depth x" + timm::format("%g", v.depth) + ")";
    s.arch_def = arch;
    s.channel_multiplier = v.channel;
    s.depth_multiplier = v.depth;
    s.fix_first_last = v.fix_stem_head;
    s.fix_stem = v.fix_stem_head;
    s.num_features = v.fix_stem_head ? 1280 : std::max<int64_t>(1280, round_channels(1280, v.channel));
    s.act_layer = "relu6";
    s.cfg = make_cfg(224, 0.875);
    specs.push_back(s);
  }
  return specs;
}

// timm's _gen_mobilenet_v3; the 'minimal' architectures (relu, 3x3 kernels,
// no SE) only as timm registers them, TF ports.
std::vector<Spec> mobilenetv3_specs() {
  const std::vector<std::vector<std::string>> large = {
      {"ds_r1_k3_s1_e1_c16_nre"},
      {"ir_r1_k3_s2_e4_c24_nre", "ir_r1_k3_s1_e3_c24_nre"},
      {"ir_r3_k5_s2_e3_c40_se0.25_nre"},
      {"ir_r1_k3_s2_e6_c80", "ir_r1_k3_s1_e2.5_c80", "ir_r2_k3_s1_e2.3_c80"},
      {"ir_r2_k3_s1_e6_c112_se0.25"},
      {"ir_r3_k5_s2_e6_c160_se0.25"},
      {"cn_r1_k1_s1_c960"}};
  const std::vector<std::vector<std::string>> small = {{"ds_r1_k3_s2_e1_c16_se0.25_nre"},
                                                       {"ir_r1_k3_s2_e4.5_c24_nre", "ir_r1_k3_s1_e3.67_c24_nre"},
                                                       {"ir_r1_k5_s2_e4_c40_se0.25", "ir_r2_k5_s1_e6_c40_se0.25"},
                                                       {"ir_r2_k5_s1_e3_c48_se0.25"},
                                                       {"ir_r3_k5_s2_e6_c96_se0.25"},
                                                       {"cn_r1_k1_s1_c576"}};
  const std::vector<std::vector<std::string>> large_minimal = {
      {"ds_r1_k3_s1_e1_c16"},  {"ir_r1_k3_s2_e4_c24", "ir_r1_k3_s1_e3_c24"},
      {"ir_r3_k3_s2_e3_c40"},  {"ir_r1_k3_s2_e6_c80", "ir_r1_k3_s1_e2.5_c80", "ir_r2_k3_s1_e2.3_c80"},
      {"ir_r2_k3_s1_e6_c112"}, {"ir_r3_k3_s2_e6_c160"},
      {"cn_r1_k1_s1_c960"}};
  const std::vector<std::vector<std::string>> small_minimal = {{"ds_r1_k3_s2_e1_c16"},
                                                               {"ir_r1_k3_s2_e4.5_c24", "ir_r1_k3_s1_e3.67_c24"},
                                                               {"ir_r1_k3_s2_e4_c40", "ir_r2_k3_s1_e6_c40"},
                                                               {"ir_r2_k3_s1_e3_c48"},
                                                               {"ir_r3_k3_s2_e6_c96"},
                                                               {"cn_r1_k1_s1_c576"}};
  struct Variant {
    std::string name;
    double channel, depth;
    PretrainedCfg cfg;
    bool tf_port = false;
  };
  // The TF ports' cfg: bilinear, mean = std = 0.5; default tag in1k.
  const PretrainedCfg tf_cfg = make_cfg(224, 0.875, "bilinear", "center", true);
  // Default tags: untrained (large_075), ra_in1k (large_100), ra4_e3600_r256_in1k (large_150d), lamb_in1k (small).
  const std::vector<Variant> variants = {
      {"mobilenetv3_large_075", 0.75, 1.0, make_cfg(224, 0.875, "bilinear")},
      {"mobilenetv3_large_100", 1.0, 1.0, make_cfg(224, 0.875)},
      {"mobilenetv3_large_150d", 1.5, 1.2, make_cfg(256, 0.95, "bilinear", "center", true)},
      {"mobilenetv3_small_050", 0.5, 1.0, make_cfg(224, 0.875)},
      {"mobilenetv3_small_075", 0.75, 1.0, make_cfg(224, 0.875)},
      {"mobilenetv3_small_100", 1.0, 1.0, make_cfg(224, 0.875)},
      {"mobilenetv3_large_075", 0.75, 1.0, tf_cfg, true},
      {"mobilenetv3_large_100", 1.0, 1.0, tf_cfg, true},
      {"mobilenetv3_large_minimal_100", 1.0, 1.0, tf_cfg, true},
      {"mobilenetv3_small_075", 0.75, 1.0, tf_cfg, true},
      {"mobilenetv3_small_100", 1.0, 1.0, tf_cfg, true},
      {"mobilenetv3_small_minimal_100", 1.0, 1.0, tf_cfg, true}};
  std::vector<Spec> specs;
  for (const auto& v : variants) {
    // timm's _gen_mobilenet_v3 picks the architecture by 'small' / 'minimal' in the name.
    const bool is_small = v.name.find("small") != std::string::npos;
    const bool minimal = v.name.find("minimal") != std::string::npos;
    Spec s;
    s.name = v.name;
    s.description = std::string("MobileNet-V3 ") + (is_small ? "small" : "large") + (minimal ? " minimal" : "") +
                    " (channels x" + timm::format("%g", v.channel) + ", depth x" + timm::format("%g", v.depth) + ")";
    s.family = Family::kMobileNetV3;
    if (minimal) {
      s.arch_def = is_small ? small_minimal : large_minimal;
    } else {
      s.arch_def = is_small ? small : large;
    }
    s.channel_multiplier = v.channel;
    s.depth_multiplier = v.depth;
    s.fix_stem = v.channel < 0.75;
    s.stem_size = 16;
    s.num_features = is_small ? 1024 : 1280;
    s.act_layer = minimal ? "relu" : "hard_swish";
    s.se = SeConfig{/*from_exp=*/true, "hard_sigmoid", "relu", /*round_with_make_divisible=*/true};
    s.cfg = v.cfg;
    specs.push_back(v.tf_port ? tf_port(s) : s);
  }
  return specs;
}

// timm's _gen_lcnet (mobilenetv3.py, PP-LCNet): the MobileNetV3 class (pooled
// head, conv_head with bias) over 'dsa' blocks (DepthwiseSeparableConv with
// the act after the pointwise conv, no skip), hard_swish, SE only in the last
// stage (on the block input, Python round(), relu, hard_sigmoid), stem 16
// rounded with the channels, 1280 head features. Default tags ra2_in1k
// (050, 075, 100; bicubic), untrained (035, 150; MobileNetV3's bilinear).
std::vector<Spec> lcnet_specs() {
  const std::vector<std::vector<std::string>> arch = {{"dsa_r1_k3_s1_c32"},  {"dsa_r2_k3_s2_c64"},
                                                      {"dsa_r2_k3_s2_c128"}, {"dsa_r1_k3_s2_c256", "dsa_r1_k5_s1_c256"},
                                                      {"dsa_r4_k5_s1_c256"}, {"dsa_r2_k5_s2_c512_se0.25"}};
  const std::vector<std::pair<std::string, double>> widths = {
      {"035", 0.35}, {"050", 0.5}, {"075", 0.75}, {"100", 1.0}, {"150", 1.5}};
  std::vector<Spec> specs;
  for (const auto& [suffix, channel] : widths) {
    Spec s;
    s.name = "lcnet_" + suffix;
    s.description = "PP-LCNet (channels x" + timm::format("%g", channel) + ")";
    s.family = Family::kMobileNetV3;
    s.arch_def = arch;
    s.channel_multiplier = channel;
    s.stem_size = 16;
    s.num_features = 1280;
    s.act_layer = "hard_swish";
    s.se = SeConfig{/*from_exp=*/true, "hard_sigmoid", "relu", /*round_with_make_divisible=*/false};
    const bool trained = kDefaultTags.count(s.name) > 0;
    s.cfg = make_cfg(224, 0.875, trained ? "bicubic" : "bilinear");
    specs.push_back(s);
  }
  return specs;
}

// timm's _gen_mobilenet_v4: the MobileNetV3 class with head_norm, 1280 head
// features (not scaled), stem 32 (medium, small) or 24 (large), fixed below
// width 1.0; relu, gelu for hybrid_large; the hybrids add Mobile MQA blocks
// and layer scale 1e-5. conv_aa_* take aa_layer 'avg', conv_blur_medium
// 'blurpc'. Default tags as kDefaultTags (untrained: conv_small_035,
// conv_aa_medium, hybrid_*_075); cfgs of those tags (bicubic; conv_small_035
// / 050 with mean = std = 0.5).
std::vector<Spec> mobilenetv4_specs() {
  using ArchDef = std::vector<std::vector<std::string>>;
  const ArchDef conv_small = {{"cn_r1_k3_s2_e1_c32", "cn_r1_k1_s1_e1_c32"},
                              {"cn_r1_k3_s2_e1_c96", "cn_r1_k1_s1_e1_c64"},
                              {"uir_r1_a5_k5_s2_e3_c96", "uir_r4_a0_k3_s1_e2_c96", "uir_r1_a3_k0_s1_e4_c96"},
                              {"uir_r1_a3_k3_s2_e6_c128", "uir_r1_a5_k5_s1_e4_c128", "uir_r1_a0_k5_s1_e4_c128",
                               "uir_r1_a0_k5_s1_e3_c128", "uir_r2_a0_k3_s1_e4_c128"},
                              {"cn_r1_k1_s1_c960"}};
  const ArchDef conv_medium = {
      {"er_r1_k3_s2_e4_c48"},
      {"uir_r1_a3_k5_s2_e4_c80", "uir_r1_a3_k3_s1_e2_c80"},
      {"uir_r1_a3_k5_s2_e6_c160", "uir_r2_a3_k3_s1_e4_c160", "uir_r1_a3_k5_s1_e4_c160", "uir_r1_a3_k3_s1_e4_c160",
       "uir_r1_a3_k0_s1_e4_c160", "uir_r1_a0_k0_s1_e2_c160", "uir_r1_a3_k0_s1_e4_c160"},
      {"uir_r1_a5_k5_s2_e6_c256", "uir_r1_a5_k5_s1_e4_c256", "uir_r2_a3_k5_s1_e4_c256", "uir_r1_a0_k0_s1_e4_c256",
       "uir_r1_a3_k0_s1_e4_c256", "uir_r1_a3_k5_s1_e2_c256", "uir_r1_a5_k5_s1_e4_c256", "uir_r2_a0_k0_s1_e4_c256",
       "uir_r1_a5_k0_s1_e2_c256"},
      {"cn_r1_k1_s1_c960"}};
  const ArchDef conv_large = {
      {"er_r1_k3_s2_e4_c48"},
      {"uir_r1_a3_k5_s2_e4_c96", "uir_r1_a3_k3_s1_e4_c96"},
      {"uir_r1_a3_k5_s2_e4_c192", "uir_r3_a3_k3_s1_e4_c192", "uir_r1_a3_k5_s1_e4_c192", "uir_r5_a5_k3_s1_e4_c192",
       "uir_r1_a3_k0_s1_e4_c192"},
      {"uir_r4_a5_k5_s2_e4_c512", "uir_r1_a5_k0_s1_e4_c512", "uir_r1_a5_k3_s1_e4_c512", "uir_r2_a5_k0_s1_e4_c512",
       "uir_r1_a5_k3_s1_e4_c512", "uir_r1_a5_k5_s1_e4_c512", "uir_r3_a5_k0_s1_e4_c512"},
      {"cn_r1_k1_s1_c960"}};
  const ArchDef hybrid_medium = {
      {"er_r1_k3_s2_e4_c48"},
      {"uir_r1_a3_k5_s2_e4_c80", "uir_r1_a3_k3_s1_e2_c80"},
      {"uir_r1_a3_k5_s2_e6_c160", "uir_r1_a0_k0_s1_e2_c160", "uir_r1_a3_k3_s1_e4_c160", "uir_r1_a3_k5_s1_e4_c160",
       "mqa_r1_k3_h4_s1_v2_d64_c160", "uir_r1_a3_k3_s1_e4_c160", "mqa_r1_k3_h4_s1_v2_d64_c160",
       "uir_r1_a3_k0_s1_e4_c160", "mqa_r1_k3_h4_s1_v2_d64_c160", "uir_r1_a3_k3_s1_e4_c160",
       "mqa_r1_k3_h4_s1_v2_d64_c160", "uir_r1_a3_k0_s1_e4_c160"},
      {"uir_r1_a5_k5_s2_e6_c256", "uir_r1_a5_k5_s1_e4_c256", "uir_r2_a3_k5_s1_e4_c256", "uir_r1_a0_k0_s1_e2_c256",
       "uir_r1_a3_k5_s1_e2_c256", "uir_r1_a0_k0_s1_e2_c256", "uir_r1_a0_k0_s1_e4_c256", "mqa_r1_k3_h4_s1_d64_c256",
       "uir_r1_a3_k0_s1_e4_c256", "mqa_r1_k3_h4_s1_d64_c256", "uir_r1_a5_k5_s1_e4_c256", "mqa_r1_k3_h4_s1_d64_c256",
       "uir_r1_a5_k0_s1_e4_c256", "mqa_r1_k3_h4_s1_d64_c256", "uir_r1_a5_k0_s1_e4_c256"},
      {"cn_r1_k1_s1_c960"}};
  const ArchDef hybrid_large = {
      {"er_r1_k3_s2_e4_c48"},
      {"uir_r1_a3_k5_s2_e4_c96", "uir_r1_a3_k3_s1_e4_c96"},
      {"uir_r1_a3_k5_s2_e4_c192", "uir_r3_a3_k3_s1_e4_c192", "uir_r1_a3_k5_s1_e4_c192", "uir_r2_a5_k3_s1_e4_c192",
       "mqa_r1_k3_h8_s1_v2_d48_c192", "uir_r1_a5_k3_s1_e4_c192", "mqa_r1_k3_h8_s1_v2_d48_c192",
       "uir_r1_a5_k3_s1_e4_c192", "mqa_r1_k3_h8_s1_v2_d48_c192", "uir_r1_a5_k3_s1_e4_c192",
       "mqa_r1_k3_h8_s1_v2_d48_c192", "uir_r1_a3_k0_s1_e4_c192"},
      {"uir_r4_a5_k5_s2_e4_c512", "uir_r1_a5_k0_s1_e4_c512", "uir_r1_a5_k3_s1_e4_c512", "uir_r2_a5_k0_s1_e4_c512",
       "uir_r1_a5_k3_s1_e4_c512", "uir_r1_a5_k5_s1_e4_c512", "mqa_r1_k3_h8_s1_d64_c512", "uir_r1_a5_k0_s1_e4_c512",
       "mqa_r1_k3_h8_s1_d64_c512", "uir_r1_a5_k0_s1_e4_c512", "mqa_r1_k3_h8_s1_d64_c512", "uir_r1_a5_k0_s1_e4_c512",
       "mqa_r1_k3_h8_s1_d64_c512", "uir_r1_a5_k0_s1_e4_c512"},
      {"cn_r1_k1_s1_c960"}};
  struct Variant {
    std::string suffix;
    double channel;
    std::string aa_layer;
    PretrainedCfg cfg;
  };
  const PretrainedCfg small_half = make_cfg(224, 0.875, "bicubic", "center", true);
  const std::vector<Variant> variants = {{"conv_small_035", 0.35, "", small_half},
                                         {"conv_small_050", 0.5, "", small_half},
                                         {"conv_small", 1.0, "", make_cfg(224, 0.875)},
                                         {"conv_medium", 1.0, "", make_cfg(256, 0.95)},
                                         {"conv_large", 1.0, "", make_cfg(384, 0.95)},
                                         {"hybrid_medium", 1.0, "", make_cfg(256, 0.95)},
                                         {"hybrid_large", 1.0, "", make_cfg(384, 0.95)},
                                         {"conv_aa_medium", 1.0, "avg", make_cfg(256, 0.95)},
                                         {"conv_blur_medium", 1.0, "blurpc", make_cfg(224, 0.95)},
                                         {"conv_aa_large", 1.0, "avg", make_cfg(448, 0.95)},
                                         {"hybrid_medium_075", 0.75, "", make_cfg(224, 0.95)},
                                         {"hybrid_large_075", 0.75, "", make_cfg(256, 0.95)}};
  std::vector<Spec> specs;
  for (const auto& v : variants) {
    // timm's _gen_mobilenet_v4 picks the architecture by 'hybrid' and 'small' / 'medium' / 'large' in the name.
    const bool hybrid = v.suffix.find("hybrid") != std::string::npos;
    const bool small = v.suffix.find("small") != std::string::npos;
    const bool medium = v.suffix.find("medium") != std::string::npos;
    Spec s;
    s.name = "mobilenetv4_" + v.suffix;
    s.description = std::string("MobileNet-V4 ") + (hybrid ? "hybrid " : "conv ");
    s.description += small ? "small" : (medium ? "medium" : "large");
    if (!v.aa_layer.empty()) s.description += " (aa_layer " + v.aa_layer + ")";
    s.description += " (channels x" + timm::format("%g", v.channel) + ")";
    s.family = Family::kMobileNetV3;
    if (hybrid) {
      s.arch_def = medium ? hybrid_medium : hybrid_large;
      s.layer_scale_init_value = 1e-5;
    } else if (small) {
      s.arch_def = conv_small;
    } else {
      s.arch_def = medium ? conv_medium : conv_large;
    }
    s.channel_multiplier = v.channel;
    s.fix_stem = v.channel < 1.0;
    s.stem_size = small || medium ? 32 : 24;
    s.num_features = 1280;
    s.act_layer = hybrid && !medium ? "gelu" : "relu";
    s.head_norm = true;
    s.aa_layer = v.aa_layer;
    s.cfg = v.cfg;
    specs.push_back(s);
  }
  return specs;
}

// timm's _gen_efficientnet_lite (relu6, no SE, stem and the first and last
// stages not scaled: fix_stem, fix_first_last; 1280 head features at every
// width). Default tags ra_in1k (lite0), untrained (lite1 .. lite4); the TF
// ports in1k (mean = std = 0.5; lite3, lite4 bilinear).
std::vector<Spec> efficientnet_lite_specs() {
  const std::vector<std::vector<std::string>> arch = {
      {"ds_r1_k3_s1_e1_c16"},  {"ir_r2_k3_s2_e6_c24"},  {"ir_r2_k5_s2_e6_c40"}, {"ir_r3_k3_s2_e6_c80"},
      {"ir_r3_k5_s1_e6_c112"}, {"ir_r4_k5_s2_e6_c192"}, {"ir_r1_k3_s1_e6_c320"}};
  struct Size {
    double channel, depth;
    PretrainedCfg cfg, tf_cfg;
  };
  const std::vector<Size> sizes = {{1.0, 1.0, make_cfg(224, 0.875), make_cfg(224, 0.875, "bicubic", "center", true)},
                                   {1.0, 1.1, make_cfg(240, 0.882), make_cfg(240, 0.882, "bicubic", "center", true)},
                                   {1.1, 1.2, make_cfg(260, 0.89), make_cfg(260, 0.89, "bicubic", "center", true)},
                                   {1.2, 1.4, make_cfg(300, 0.904), make_cfg(300, 0.904, "bilinear", "center", true)},
                                   {1.4, 1.8, make_cfg(380, 0.922), make_cfg(380, 0.92, "bilinear", "center", true)}};
  std::vector<Spec> specs;
  std::vector<Spec> tf_specs;
  for (size_t i = 0; i < sizes.size(); ++i) {
    Spec s;
    s.name = "efficientnet_lite" + std::to_string(i);
    s.description = "EfficientNet-Lite" + std::to_string(i) + " (channels x" + timm::format("%g", sizes[i].channel) +
                    ", depth x" + timm::format("%g", sizes[i].depth) + ")";
    s.arch_def = arch;
    s.channel_multiplier = sizes[i].channel;
    s.depth_multiplier = sizes[i].depth;
    s.fix_first_last = true;
    s.fix_stem = true;
    s.num_features = 1280;
    s.act_layer = "relu6";
    s.cfg = sizes[i].cfg;
    specs.push_back(s);
    s.cfg = sizes[i].tf_cfg;
    tf_specs.push_back(tf_port(s));
  }
  specs.insert(specs.end(), tf_specs.begin(), tf_specs.end());
  return specs;
}

// timm's _gen_efficientnet_edge (EfficientNet-EdgeTPU S / M / L): three
// EdgeResidual stages (the first sized from 24 forced input channels, 'fc24',
// without skip), then IR stages without SE; relu, head features scaled with
// the channels. Default tags ra_in1k (es, el), ra2_in1k (em); TF ports in1k.
std::vector<Spec> efficientnet_edge_specs() {
  const std::vector<std::vector<std::string>> arch = {{"er_r1_k3_s1_e4_c24_fc24_noskip"},
                                                      {"er_r2_k3_s2_e8_c32"},
                                                      {"er_r4_k3_s2_e8_c48"},
                                                      {"ir_r5_k5_s2_e8_c96"},
                                                      {"ir_r4_k5_s1_e8_c144"},
                                                      {"ir_r2_k5_s2_e8_c192"}};
  struct Size {
    std::string suffix, label;
    double channel, depth;
    PretrainedCfg cfg;
  };
  const std::vector<Size> sizes = {{"es", "Small", 1.0, 1.0, make_cfg(224, 0.875)},
                                   {"em", "Medium", 1.0, 1.1, make_cfg(240, 0.882)},
                                   {"el", "Large", 1.2, 1.4, make_cfg(300, 0.904)}};
  std::vector<Spec> specs;
  std::vector<Spec> tf_specs;
  for (const auto& size : sizes) {
    Spec s;
    s.name = "efficientnet_" + size.suffix;
    s.description = "EfficientNet-EdgeTPU-" + size.label + " (channels x" + timm::format("%g", size.channel) +
                    ", depth x" + timm::format("%g", size.depth) + ")";
    s.arch_def = arch;
    s.channel_multiplier = size.channel;
    s.depth_multiplier = size.depth;
    s.num_features = round_channels(1280, size.channel);
    s.act_layer = "relu";
    s.cfg = size.cfg;
    specs.push_back(s);
    PretrainedCfg tf_cfg = size.cfg;
    tf_cfg.mean = tf_cfg.std = {0.5, 0.5, 0.5};
    s.cfg = tf_cfg;
    tf_specs.push_back(tf_port(s));
  }
  specs.insert(specs.end(), tf_specs.begin(), tf_specs.end());
  return specs;
}

// The other users of timm's EfficientNet builder in efficientnet.py:
// - efficientnet_l2 / tf_efficientnet_l2 (_gen_efficientnet at channels x4.3,
//   depth x5.3); efficientnet_blur_b0 (B0 with aa_layer 'blurpc');
// - efficientnet_b0_g16_evos (B0 with group size 16 and channel divisor 16;
//   timm 1.0.31 builds it with BatchNorm, its EvoNorm left commented out);
// - tinynet_a .. e (_gen_tinynet: B0's blocks, repeats rounded to the
//   nearest, fixed stem, head max(1280, rounded));
// - mobilenetv1_100 / _125 (_gen_mobilenet_v1: 'dsa' blocks, relu6, no
//   conv_head: the classifier sees the last block) and mobilenetv1_100h
//   (with a 1024-feature conv_head);
// - mobilenet_edgetpu_100 and _v2_xs / s / m / l (_gen_mobilenet_edgetpu:
//   ConvBnAct 1x1, EdgeResidual (grouped in v2: gs64, gs128 for l) and IR
//   stages, relu, stem 32 / 64 with a 3, 5 or 7 kernel);
// - test_efficientnet (_gen_test_efficientnet: a tiny ConvBnAct / ER / IR
//   net, channels rounded with round_limit 0, silu).
std::vector<Spec> efficientnet_other_specs() {
  using ArchDef = std::vector<std::vector<std::string>>;
  std::vector<Spec> specs;
  // L2 and blur B0: B0's blocks.
  const ArchDef b0 = {{"ds_r1_k3_s1_e1_c16_se0.25"}, {"ir_r2_k3_s2_e6_c24_se0.25"},  {"ir_r2_k5_s2_e6_c40_se0.25"},
                      {"ir_r3_k3_s2_e6_c80_se0.25"}, {"ir_r3_k5_s1_e6_c112_se0.25"}, {"ir_r4_k5_s2_e6_c192_se0.25"},
                      {"ir_r1_k3_s1_e6_c320_se0.25"}};
  Spec l2;
  l2.name = "efficientnet_l2";
  l2.description = "EfficientNet-L2 (channels x4.3, depth x5.3)";
  l2.arch_def = b0;
  l2.channel_multiplier = 4.3;
  l2.depth_multiplier = 5.3;
  l2.num_features = round_channels(1280, 4.3);
  l2.act_layer = "swish";
  l2.cfg = make_cfg(800, 0.961);
  specs.push_back(l2);
  l2.cfg = make_cfg(475, 0.936);
  specs.push_back(tf_port(l2));
  Spec blur;
  blur.name = "efficientnet_blur_b0";
  blur.description = "EfficientNet-B0 with BlurPool anti-aliasing (aa_layer blurpc)";
  blur.arch_def = b0;
  blur.num_features = 1280;
  blur.act_layer = "swish";
  blur.aa_layer = "blurpc";
  blur.cfg = make_cfg(224, 0.875);
  specs.push_back(blur);
  // timm 1.0.31 leaves its EvoNorm norm_layer commented out: BatchNorm, grouped convs of 16, channels divisible by 16.
  Spec g16;
  g16.name = "efficientnet_b0_g16_evos";
  g16.description = "EfficientNet-B0 with grouped convs (group size 16, channels rounded to 16)";
  g16.arch_def = b0;
  g16.channel_divisor = 16;
  g16.group_size = 16;
  g16.num_features = round_channels(1280, 1.0, 16);
  g16.act_layer = "swish";
  g16.cfg = make_cfg(224, 0.875);
  specs.push_back(g16);

  struct TinyNet {
    std::string suffix;
    double width, depth;
    int64_t size;
  };
  for (const auto& t : std::vector<TinyNet>{{"a", 1.0, 1.2, 192},
                                            {"b", 0.75, 1.1, 188},
                                            {"c", 0.54, 0.85, 184},
                                            {"d", 0.54, 0.695, 152},
                                            {"e", 0.51, 0.6, 106}}) {
    Spec s;
    s.name = "tinynet_" + t.suffix;
    s.description = "TinyNet-" + std::string(1, static_cast<char>(std::toupper(t.suffix[0]))) + " (channels x" +
                    timm::format("%g", t.width) + ", depth x" + timm::format("%g", t.depth) + ")";
    s.arch_def = b0;
    s.channel_multiplier = t.width;
    s.depth_multiplier = t.depth;
    s.depth_trunc = DepthTrunc::kRound;
    s.fix_stem = true;
    s.num_features = std::max<int64_t>(1280, round_channels(1280, t.width));
    s.act_layer = "swish";
    s.cfg = make_cfg(t.size, 0.875);
    specs.push_back(s);
  }

  const ArchDef v1 = {{"dsa_r1_k3_s1_c64"},
                      {"dsa_r2_k3_s2_c128"},
                      {"dsa_r2_k3_s2_c256"},
                      {"dsa_r6_k3_s2_c512"},
                      {"dsa_r2_k3_s2_c1024"}};
  struct V1 {
    std::string suffix;
    double channel;
    bool head_conv;
    double crop_pct;
  };
  for (const auto& v :
       std::vector<V1>{{"100", 1.0, false, 0.875}, {"100h", 1.0, true, 0.875}, {"125", 1.25, false, 0.9}}) {
    Spec s;
    s.name = "mobilenetv1_" + v.suffix;
    s.description = "MobileNet-V1 (channels x" + timm::format("%g", v.channel) + (v.head_conv ? ", conv_head)" : ")");
    s.arch_def = v1;
    s.channel_multiplier = v.channel;
    s.num_features = v.head_conv ? std::max<int64_t>(1024, round_channels(1024, v.channel)) : 0;
    s.act_layer = "relu6";
    s.cfg = make_cfg(224, v.crop_pct, "bicubic", "center", true);
    specs.push_back(s);
  }

  const ArchDef edgetpu_v1 = {{"cn_r1_k1_s1_c16"},
                              {"er_r1_k3_s2_e8_c32", "er_r3_k3_s1_e4_c32"},
                              {"er_r1_k3_s2_e8_c48", "er_r3_k3_s1_e4_c48"},
                              {"ir_r1_k3_s2_e8_c96", "ir_r3_k3_s1_e4_c96"},
                              {"ir_r1_k3_s1_e8_c96_noskip", "ir_r3_k3_s1_e4_c96"},
                              {"ir_r1_k5_s2_e8_c160", "ir_r3_k5_s1_e4_c160"},
                              {"ir_r1_k3_s1_e8_c192"}};
  auto edgetpu_v2 = [](const std::vector<int64_t>& chs, int64_t group_size) -> ArchDef {
    const std::string gs = "_gs" + std::to_string(group_size);
    auto c = [&](size_t i) { return "_c" + std::to_string(chs[i]); };
    return {
        {"cn_r1_k1_s1" + c(0)},
        {"er_r1_k3_s2_e8" + c(1), "er_r1_k3_s1_e4" + gs + c(1)},
        {"er_r1_k3_s2_e8" + c(2), "er_r1_k3_s1_e4" + gs + c(2), "er_r1_k3_s1_e4" + c(2), "er_r1_k3_s1_e4" + gs + c(2)},
        {"er_r1_k3_s2_e8" + c(3), "ir_r3_k3_s1_e4" + c(3)},
        {"ir_r1_k3_s1_e8" + c(4), "ir_r3_k3_s1_e4" + c(4)},
        {"ir_r1_k3_s2_e8" + c(5), "ir_r3_k3_s1_e4" + c(5)},
        {"ir_r1_k3_s1_e8" + c(6)}};
  };
  struct EdgeTpu {
    std::string suffix, label;
    ArchDef arch;
    int64_t stem_size, stem_kernel_size, num_features;
  };
  const std::vector<EdgeTpu> edgetpus = {
      {"100", "v1", edgetpu_v1, 32, 3, 1280},
      {"v2_xs", "v2 XS", edgetpu_v2({16, 32, 48, 96, 144, 160, 192}, 64), 32, 3, 1280},
      {"v2_s", "v2 S", edgetpu_v2({24, 48, 64, 128, 160, 192, 256}, 64), 64, 5, 1280},
      {"v2_m", "v2 M", edgetpu_v2({32, 64, 80, 160, 192, 240, 320}, 64), 64, 5, 1344},
      {"v2_l", "v2 L", edgetpu_v2({32, 64, 96, 192, 240, 256, 384}, 128), 64, 7, 1408}};
  for (const auto& e : edgetpus) {
    Spec s;
    s.name = "mobilenet_edgetpu_" + e.suffix;
    s.description = "MobileNet-EdgeTPU-" + e.label;
    s.arch_def = e.arch;
    s.stem_size = e.stem_size;
    s.stem_kernel_size = e.stem_kernel_size;
    s.num_features = e.num_features;
    s.act_layer = "relu";
    s.cfg = make_cfg(224, 0.9, "bicubic", "center", kDefaultTags.count(s.name) > 0);
    specs.push_back(s);
  }

  Spec test;
  test.name = "test_efficientnet";
  test.description = "tiny test EfficientNet (ConvBnAct, EdgeResidual, IR with SE)";
  test.arch_def = {{"cn_r1_k3_s1_e1_c16_skip"},
                   {"er_r1_k3_s2_e4_c24"},
                   {"er_r1_k3_s2_e4_c32"},
                   {"ir_r1_k3_s2_e4_c48_se0.25"},
                   {"ir_r1_k3_s2_e4_c64_se0.25"}};
  test.round_limit = 0.0;
  test.stem_size = 24;
  test.num_features = 256;  // round_channels(256, 1.0, round_limit=0)
  test.act_layer = "silu";
  test.cfg = make_cfg(160, 0.95);
  specs.push_back(test);
  return specs;
}

std::vector<Spec> all_specs() {
  std::vector<Spec> specs = efficientnet_specs();
  for (auto& s : efficientnetv2_specs()) specs.push_back(s);
  for (auto& s : mobilenetv2_specs()) specs.push_back(s);
  for (auto& s : mobilenetv3_specs()) specs.push_back(s);
  for (auto& s : nas_specs()) specs.push_back(s);
  for (auto& s : mixnet_specs()) specs.push_back(s);
  for (auto& s : lcnet_specs()) specs.push_back(s);
  for (auto& s : mobilenetv4_specs()) specs.push_back(s);
  for (auto& s : efficientnet_lite_specs()) specs.push_back(s);
  for (auto& s : efficientnet_edge_specs()) specs.push_back(s);
  for (auto& s : efficientnet_other_specs()) specs.push_back(s);
  return specs;
}

}  // namespace
}  // namespace timm::efficientnet

TIMM_PLUGIN("efficientnet") {
  for (const auto& spec : timm::efficientnet::all_specs()) {
    registrar.add_model(spec.name, spec.description, [spec](const timm::ModelArgs& args) -> timm::ModelPtr {
      return std::make_shared<timm::efficientnet::EfficientNetImpl>(spec, args);
    });
  }
}
