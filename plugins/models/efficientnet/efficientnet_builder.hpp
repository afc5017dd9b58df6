// timm's EfficientNet builder (timm/models/_efficientnet_builder.py): the
// block-string decoder, channel rounding, per-stage depth scaling and the
// builder that turns decoded block arguments into stages of blocks
// (efficientnet_blocks.hpp). Internal to this plugin.
//
// Block strings: "<type>_<op>_<op>...", type ds / dsa (DepthwiseSeparableConv,
// dsa with a point-wise activation and no skip), ir (InvertedResidual), cn
// (ConvBnAct), er (EdgeResidual); ops
// r<repeats> k<kernel> s<stride> e<expansion> c<out channels> se<ratio>
// a<exp kernel> p<pw kernel> gs<group size> fc<forced in channels>, n<act>
// with re / r6 / hs / sw / mi (relu, relu6, hard_swish, swish, mish),
// noskip / skip. A kernel size with dots ("k3.5.7", "a1.1", "p1.1") is
// timm's kernel list: a MixedConv2d with one group per size (MixNet).
// MobileNetV4: uir (UniversalInvertedResidual; a<k> dw_start, k<k> dw_mid,
// p<k> dw_end, 0 for none; e required) and mqa (MobileAttention with
// multi-query attention; k<k> kv down_conv kernel, h<heads>, d<key and value
// dim>, v<kv stride>, default 1). CondConv ("cc"), space-to-depth ("d" of
// ds / ir) and the mha type throw UsageError.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <torch/nn/modules/container/sequential.h>

#include "efficientnet_blocks.hpp"
#include "timm/models/features.hpp"

namespace timm::efficientnet {

struct BlockArgs {
  std::string block_type;  // "ds", "dsa", "ir", "er", "cn", "uir", "mqa"
  int64_t out_chs = 0;     // before round_chs_fn
  int64_t stride = 1;
  std::optional<std::string> act_layer;  // the model default when unset
  KernelSizes dw_kernel_size = {3};      // ds, ir
  KernelSizes exp_kernel_size = {1};     // ir (a<k>), er (k<k>)
  KernelSizes pw_kernel_size = {1};      // p<k>
  KernelSizes kernel_size = {1};         // cn (an int in timm: never a list)
  double exp_ratio = 1.0;                // ir, er
  double se_ratio = 0.0;
  bool noskip = false;
  bool pw_act = false;                // dsa
  bool skip = false;                  // cn: forced skip
  int64_t force_in_chs = 0;           // er
  std::optional<int64_t> group_size;  // the block's default when unset
  int64_t dw_kernel_size_start = 0;   // uir (a<k>)
  int64_t dw_kernel_size_mid = 3;     // uir (k<k>)
  int64_t dw_kernel_size_end = 0;     // uir (p<k>)
  int64_t num_heads = 8;              // mqa (h)
  int64_t kv_dim = 64;                // mqa (d): key_dim and value_dim
  int64_t kv_stride = 1;              // mqa (v)
};

// One stage's blocks, already repeated.
using StageArgs = std::vector<BlockArgs>;
using ArchArgs = std::vector<StageArgs>;

// timm's _decode_block_str: the block's arguments and its repeat count.
std::pair<BlockArgs, int64_t> decode_block_str(const std::string& block_str);

// timm's depth_trunc: a stage's scaled repeats rounded up ('ceil', EfficientNet's default) or to the
// nearest, at least 1 ('round', MixNet-M / L / XL).
enum class DepthTrunc { kCeil, kRound };

// timm's decode_arch_def(arch_def, depth_multiplier, depth_trunc,
// fix_first_last, group_size): decodes every string and scales each stage's
// repeats (_scale_stage_depth).
ArchArgs decode_arch_def(const std::vector<std::vector<std::string>>& arch_def, double depth_multiplier = 1.0,
                         bool fix_first_last = false, std::optional<int64_t> group_size = std::nullopt,
                         DepthTrunc depth_trunc = DepthTrunc::kCeil);

// The same with one depth multiplier per stage (timm's tuple depth_multiplier, e.g. efficientnetv2_rw_m);
// throws UsageError unless there is one per stage.
ArchArgs decode_arch_def(const std::vector<std::vector<std::string>>& arch_def,
                         const std::vector<double>& depth_multipliers, bool fix_first_last = false,
                         std::optional<int64_t> group_size = std::nullopt, DepthTrunc depth_trunc = DepthTrunc::kCeil);

// timm's round_channels(channels, multiplier, divisor, channel_min=None, round_limit).
int64_t round_channels(double channels, double multiplier = 1.0, int64_t divisor = 8, double round_limit = 0.9);

using RoundChsFn = std::function<int64_t(int64_t)>;

// The SqueezeExcite flavour of a model family.
struct SeConfig {
  bool from_exp = false;  // rd channels from the block's mid channels (MobileNetV3) or input (EfficientNet)
  std::string gate = "sigmoid";
  std::optional<std::string> force_act;    // MobileNetV3: relu whatever the block's act
  bool round_with_make_divisible = false;  // rd_round_fn=round_channels (MobileNetV3), else Python round()
  // timm's se_layer: "se" (this plugin's SqueezeExcite) or "gc" (the SDK's GlobalContext with
  // rd_ratio, which rounds its rd channels itself, make_divisible(chs * rd_ratio, 1, round_limit=0);
  // gate, force_act and round_with_make_divisible then do not apply). Last, so the families'
  // aggregate initialisers stay valid.
  std::string layer = "se";
};

struct BuilderConfig {
  RoundChsFn round_chs_fn;
  std::string act_layer;
  SeConfig se;
  double drop_path_rate = 0.0;
  NormArgs norm;
  std::string pad_type;                          // timm's pad_type for every block conv: '' or 'same'
  std::string aa_layer;                          // timm's aa_layer: '' (none), 'avg' or 'blurpc'
  std::optional<double> layer_scale_init_value;  // uir / mqa blocks' LayerScale2d when set
};

// timm's EfficientNetBuilder(...)(in_chs, arch): one Sequential per stage,
// blocks numbered in order. Returns the stages; `out_chs` gets the last block's channels.
std::vector<torch::nn::Sequential> build_stages(const BuilderConfig& config, int64_t in_chs, const ArchArgs& arch,
                                                int64_t& out_chs);

// One of timm's EfficientNetBuilder.features: a FeatureInfo and its 'stage',
// the forward step whose output it is (0: the stem, k + 1: block stack k).
struct StageFeature {
  FeatureInfo info;
  int64_t stage = 0;
};

// timm's EfficientNetBuilder feature levels (feature_location 'bottleneck', no
// output_stride): 'bn1' when the first block strides, then each stack followed
// by a strided stack, and the last stack, as "blocks.<stack>" with its output
// channels and total stride. `in_chs`: the stem's channels.
std::vector<StageFeature> stage_features(const BuilderConfig& config, int64_t in_chs, const ArchArgs& arch);

}  // namespace timm::efficientnet
