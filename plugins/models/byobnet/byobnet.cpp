// Bring-Your-Own-Blocks networks (timm/models/byobnet.py), with timm's
// module names so state_dict keys equal timm's: RepVGG (repvgg_a0 / a1 / a2 /
// b0 / b1 / b1g4 / b2 / b2g4 / b3 / b3g4 / d2se), the GPU-Efficient networks
// (gernet_s / m / l), MobileOne (mobileone_s0 .. s4), RegNetZ (regnetz_b16 /
// c16 / d32 / d8 / e8, and the EvoNorm ones regnetz_b16_evos / c16_evos /
// d8_evos) and the ResNet-like models (resnet51q, resnet61q, resnext26ts,
// gcresnext26ts, seresnext26ts, eca_resnext26ts, bat_resnext26ts, resnet32ts,
// resnet33ts, gcresnet33ts, seresnet33ts, eca_resnet33ts, gcresnet50t,
// gcresnext50ts), the CLIP ResNets (resnet50_clip, resnet101_clip,
// resnet50x4_clip, resnet50x16_clip, resnet50x64_clip, each also *_gap),
// resnet50_mlp and test_byobnet: all 53 of timm 1.0.31's byobnet.py names; and mobilevit.py's
// MobileViT models (mobilevit_xxs / xs / s, mobilevitv2_050 / 075 / 100 /
// 125 / 150 / 175 / 200), which timm builds with ByobNet and its own
// 'mobilevit' / 'mobilevit2' block types.
// - stem: RepVGG's RepVggBlock or MobileOne's MobileOneBlock at stride 2
//   ('rep', 'one'), one 3x3 / 2 ConvNormAct ('3x3' without pool), or timm's
//   Stem of 3x3 convs at stride 4 ('quad': 4 ConvNormActs; 'quad2': the first
//   two plain convs; 'tiered': 3 convs of 3/8, 1/2 and all of stem_chs;
//   'deep': 3 convs of stem_chs; the CLIP ResNets': 3 convs of (32, 32, 64)
//   times width_factor), its last conv strided or followed by a 3x3 / 2 max
//   pool or a 2x2 / 2 average pool ('avg2') (byobnet_blocks.cpp);
// - stages: Sequentials of blocks, the first at the stage stride:
//   RepVggBlock ('rep': identity BN where shapes allow, conv_kxk and conv_1x1
//   ConvNormAct without act, summed, then attn (SE in repvgg_d2se) and ReLU),
//   MobileOneBlock ('one': identity BN, num_conv_branches kxk branches and a
//   1x1 scale branch summed, attn, ReLU; byobnet_blocks.cpp),
//   BasicBlock ('basic': shortcut, conv1_kxk, conv2_kxk without act,
//   attn_last, add, act), DarkBlock ('dark': shortcut, conv1_1x1, conv2_kxk
//   without act, attn_last, add, act), BottleneckBlock ('bottle': shortcut,
//   conv1_1x1, conv2_kxk grouped, [conv2b_kxk with extra_conv], attn,
//   conv3_1x1 without act, add, act) or EdgeBlock ('edge': shortcut,
//   conv1_kxk, attn, conv2_1x1 without act, add, act); the shortcut is a 1x1
//   ConvNormAct without act where the shape changes (timm's 'conv1x1'), a
//   2x2 average pool and that conv ('avg': DownsampleAvg,
//   byobnet_blocks.cpp), none (no residual) with downsample '' (MobileViT,
//   RegNetZ); inverted residuals are 'bottle' with bottle_in
//   (mid = in * br) and linear_out (no act after the sum); attn is the
//   model's attn_layer ('se', 'eca', 'gca', 'bat': SDK SEModule, EcaModule,
//   GlobalContext, BatNonLocalAttn) or a block's own (MobileOne s4's SE);
//   aa_layer 'avg' (the CLIP ResNets): a strided conv of a residual block runs
//   at stride 1, a stride x stride average pool after its norm and act;
// - MobileViT's MobileVitBlock ('mobilevit'): conv_kxk, conv_1x1, unfold into
//   patches, timm's ViT Blocks (transformer), LayerNorm, fold, conv_proj and
//   conv_fusion over [input, x]; a stage may hold several block types (timm's
//   tuple of ByoBlockCfgs);
// - MobileViTv2's MobileVitV2Block ('mobilevit2'): (bilinear resize to a
//   multiple of the patch size, align_corners, kept after the block as timm),
//   depthwise conv_kxk, conv_1x1, unfold to [B, C, P, N], LinearTransformerBlocks
//   (GroupNorm1, LinearSelfAttention, ConvMlp), GroupNorm1, fold, conv_proj
//   without act;
// - norm: BatchNorm (BatchNormAct2d with the model's act) after every conv,
//   or for the *_evos RegNetZs EvoNorm2dS0a (timm/layers/evo_norm.hpp, group
//   size 16, eps 1e-3: group statistics of the input, no running statistics,
//   its own x * sigmoid(x * v) activation in place of SiLU; "bn.weight",
//   "bn.bias", "bn.v") in the stem, the bottlenecks and final_conv
//   (ByobCna, byobnet_blocks.cpp);
// - final_conv: a 1x1 ConvNormAct to num_features, else none;
// - head: timm's ClassifierHead (global_pool, dropout at drop_rate, fc); for
//   the CLIP ResNets (not *_gap) AttentionPool2d (SDK attention_pool.hpp:
//   mean query token, learned pos_embed for img_size / 32, q / k / v, heads of
//   64, dropout, proj; global_pool 'token' or ''), for resnet50_mlp
//   NormMlpClassifierHead (pool, BatchNorm2d, fc 1024 + ReLU, dropout, fc).
// RepVGG and MobileOne are built in their training (multi-branch) form;
// reparameterize() folds them as timm's reparameterize_model (inference_mode
// at construction is not supported). timm's RotAttentionPool2d head
// ('attn_rot') is used by no registered model and is not here.
//
// Supported: num_classes (0: no fc), in_chans, drop_rate, drop_path_rate
// (stage-wise linear schedule), global_pool, grad checkpointing, and the timm
// keywords output_stride (8, 16 or 32: later stages dilated), zero_init_last
// and img_size (an int: the attention pool's grid; other inputs resample its
// pos_embed; default the cfg's input size, as timm's fixed_input_size; the
// other heads ignore it, as timm's) as --model-kwargs. Other keywords are
// refused.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <torch/nn/init.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>

#include "timm/base/error.hpp"
#include "timm/layers/activations.hpp"
#include "timm/layers/attention.hpp"
#include "timm/layers/attention_pool.hpp"
#include "timm/layers/classifier.hpp"
#include "timm/layers/drop_path.hpp"
#include "timm/layers/mlp.hpp"
#include "timm/layers/norm.hpp"
#include "timm/layers/norm_act.hpp"
#include "timm/layers/reparam.hpp"
#include "timm/layers/squeeze_excite.hpp"
#include "timm/models/features.hpp"
#include "timm/models/grad_checkpoint.hpp"
#include "timm/models/model.hpp"
#include "timm/plugin/plugin.hpp"

#include "byobnet_blocks.hpp"

namespace timm::byobnet {
namespace {

// timm 1.0.31's default pretrained tag of each model.
const std::map<std::string, std::string> kByobDefaultTags = {
    {"gernet_s", "idstcv_in1k"},        {"gernet_m", "idstcv_in1k"},        {"gernet_l", "idstcv_in1k"},
    {"repvgg_a0", "rvgg_in1k"},         {"repvgg_a1", "rvgg_in1k"},         {"repvgg_a2", "rvgg_in1k"},
    {"repvgg_b0", "rvgg_in1k"},         {"repvgg_b1", "rvgg_in1k"},         {"repvgg_b1g4", "rvgg_in1k"},
    {"repvgg_b2", "rvgg_in1k"},         {"repvgg_b2g4", "rvgg_in1k"},       {"repvgg_b3", "rvgg_in1k"},
    {"repvgg_b3g4", "rvgg_in1k"},       {"repvgg_d2se", "rvgg_in1k"},       {"mobilevit_xxs", "cvnets_in1k"},
    {"mobilevit_xs", "cvnets_in1k"},    {"mobilevit_s", "cvnets_in1k"},     {"mobilevitv2_050", "cvnets_in1k"},
    {"mobilevitv2_075", "cvnets_in1k"}, {"mobilevitv2_100", "cvnets_in1k"}, {"mobilevitv2_125", "cvnets_in1k"},
    {"mobilevitv2_150", "cvnets_in1k"}, {"mobilevitv2_175", "cvnets_in1k"}, {"mobilevitv2_200", "cvnets_in1k"},
    {"mobileone_s0", "apple_in1k"},     {"mobileone_s1", "apple_in1k"},     {"mobileone_s2", "apple_in1k"},
    {"mobileone_s3", "apple_in1k"},     {"mobileone_s4", "apple_in1k"},     {"regnetz_b16", "ra3_in1k"},
    {"regnetz_c16", "ra3_in1k"},        {"regnetz_d32", "ra3_in1k"},        {"regnetz_d8", "ra3_in1k"},
    {"regnetz_e8", "ra3_in1k"},         {"regnetz_c16_evos", "ch_in1k"},    {"regnetz_d8_evos", "ch_in1k"},
    {"resnet51q", "ra2_in1k"},          {"resnet61q", "ra2_in1k"},          {"resnext26ts", "ra2_in1k"},
    {"gcresnext26ts", "ch_in1k"},       {"seresnext26ts", "ch_in1k"},       {"eca_resnext26ts", "ch_in1k"},
    {"resnet32ts", "ra2_in1k"},         {"resnet33ts", "ra2_in1k"},         {"gcresnet33ts", "ra2_in1k"},
    {"seresnet33ts", "ra2_in1k"},       {"eca_resnet33ts", "ra2_in1k"},     {"gcresnet50t", "ra2_in1k"},
    {"gcresnext50ts", "ch_in1k"},       {"test_byobnet", "r160_in1k"},      {"resnet50_clip", "openai"},
    {"resnet101_clip", "openai"},       {"resnet50x4_clip", "openai"},      {"resnet50x16_clip", "openai"},
    {"resnet50x64_clip", "openai"},     {"resnet50_clip_gap", "openai"},    {"resnet101_clip_gap", "openai"},
    {"resnet50x4_clip_gap", "openai"},  {"resnet50x16_clip_gap", "openai"}, {"resnet50x64_clip_gap", "openai"},
    {"bat_resnext26ts", "ch_in1k"},
};

// timm's test_input_size / test_crop_pct of the models whose default cfg has them
// (validate.py evaluates at them unless --use-train-size).
const std::map<std::string, TestSize> kTestSizes = {
    {"regnetz_b16", {288, 1.0}},     {"regnetz_c16", {320, 1.0}},   {"regnetz_d32", {320, std::nullopt}},
    {"regnetz_d8", {320, 1.0}},      {"regnetz_e8", {320, 1.0}},    {"regnetz_c16_evos", {320, std::nullopt}},
    {"regnetz_d8_evos", {320, 1.0}}, {"resnet51q", {288, 1.0}},     {"resnet61q", {288, 1.0}},
    {"resnext26ts", {288, 1.0}},     {"gcresnext26ts", {288, 1.0}}, {"seresnext26ts", {288, 1.0}},
    {"eca_resnext26ts", {288, 1.0}}, {"resnet32ts", {288, 1.0}},    {"resnet33ts", {288, 1.0}},
    {"gcresnet33ts", {288, 1.0}},    {"seresnet33ts", {288, 1.0}},  {"eca_resnet33ts", {288, 1.0}},
    {"gcresnet50t", {288, 1.0}},     {"gcresnext50ts", {288, 1.0}}, {"regnetz_b16_evos", {288, std::nullopt}}};

const std::vector<std::string> kByobKnownKwargs = {"output_stride", "zero_init_last", "img_size"};

// timm's ByoBlockCfg (gs < 0: RepVGG's grouped-every-other-block lambda,
// groups = -gs on odd block indices); same_stage: part of the previous cfg's
// stage (timm's tuple of cfgs), its s unused.
struct BlockCfg {
  std::string type;  // rep, basic, bottle, mobilevit
  int64_t d = 1;
  double c = 64;
  int64_t s = 2;
  int64_t gs = 0;
  double br = 1.0;
  bool same_stage = false;
  // block_kwargs: the bottleneck's bottle_in / linear_out / extra_conv, MobileOneBlock's
  // kernel_size and num_conv_branches, MobileVitBlock's transformer.
  bool bottle_in = false;
  bool linear_out = false;
  bool extra_conv = false;
  int64_t kernel_size = 3;
  int64_t num_conv_branches = 1;
  std::optional<AttnCfg> attn = std::nullopt;  // the block's attn_layer, else the model's
  int64_t transformer_dim = 0;
  int64_t transformer_depth = 0;
  int64_t patch_size = 0;
};

// timm's ByoModelCfg, the fields these models use.
struct ByobCfg {
  std::vector<BlockCfg> blocks;
  std::string stem_type = "3x3";  // rep, one, quad, quad2, tiered, deep or 3x3
  std::string stem_pool;          // "" or maxpool (quad / tiered stems)
  int64_t stem_chs = 32;
  int64_t num_features = 0;
  AttnCfg attn;
  std::string act = "relu";
  // timm's norm_layer: "batchnorm", or "evos" (EvoNorm2dS0a, group size 16,
  // its own activation) in the basic / dark / edge / bottleneck blocks, the
  // 3x3 / Stem convs and final_conv (the *_evos RegNetZs).
  std::string norm = "batchnorm";
  std::string downsample = "conv1x1";  // or "": no shortcut where the shape changes
  // The CLIP ResNets' and resnet50_mlp's: a Stem of these widths (times
  // width_factor, rounded) with stem_type "", the stage widths times
  // width_factor (make_divisible), anti-aliased strided stage convs (aa
  // "avg"), and the head: "classifier" (ClassifierHead), "attn_abs"
  // (AttentionPool2d) or "mlp" (NormMlpClassifierHead with BatchNorm and the
  // model's act, head_hidden_size wide).
  std::vector<int64_t> stem_chs_list;
  double width_factor = 1.0;
  std::string aa;
  std::string head_type = "classifier";
  int64_t head_hidden_size = 0;
};

struct ByobSpec {
  std::string name;
  ByobCfg cfg;
  int64_t img_size = 224;
  double crop_pct = 0.875;
  bool repvgg = false;
  bool mobilevit = false;
  std::string interpolation = "bilinear";  // MobileViT's bicubic regardless
  bool inception_norm = false;             // mean and std 0.5 (RegNetZ)
  std::string description = {};            // else describe() composes one
  bool clip_norm = false;                  // OpenAI CLIP's mean and std
  int64_t pretrained_num_classes = 1000;   // the default tag's classifier size (0: none)
};

// timm's vision_transformer Block as MobileVitBlock builds it: pre-norm
// torch.nn.LayerNorm, Attention (qkv bias), Mlp (ratio 2, the model's act),
// no layer scale, drop path on both branches.
class MobileVitTransformerBlockImpl : public nn::Module {
 public:
  MobileVitTransformerBlockImpl(int64_t dim, int64_t num_heads, const std::string& act, double drop_path) {
    norm1 = register_module("norm1", layers::LayerNorm(layers::torch_layer_norm_options(dim)));
    attn =
        register_module("attn", layers::Attention(layers::AttentionOptions(dim).num_heads(num_heads).qkv_bias(true)));
    if (drop_path > 0.0) drop_path1 = register_module("drop_path1", layers::DropPath(drop_path));
    norm2 = register_module("norm2", layers::LayerNorm(layers::torch_layer_norm_options(dim)));
    mlp = register_module("mlp", layers::Mlp(layers::MlpOptions(dim).hidden_features(dim * 2).act_layer(act)));
    if (drop_path > 0.0) drop_path2 = register_module("drop_path2", layers::DropPath(drop_path));
  }

  at::Tensor forward(at::Tensor x) {
    at::Tensor y = attn(norm1(x));
    x = x + (drop_path1 ? drop_path1(y) : y);
    y = mlp(norm2(x));
    return x + (drop_path2 ? drop_path2(y) : y);
  }

  layers::LayerNorm norm1{nullptr}, norm2{nullptr};
  layers::Attention attn{nullptr};
  layers::Mlp mlp{nullptr};
  layers::DropPath drop_path1{nullptr}, drop_path2{nullptr};
};
TORCH_MODULE(MobileVitTransformerBlock);

// timm's GroupNorm1: GroupNorm with one group (eps 1e-5).
layers::GroupNorm group_norm1(int64_t dim) { return layers::GroupNorm(layers::GroupNormOptions(dim).num_groups(1)); }

// timm's LinearSelfAttention on [B, C, P, N] (self-attention only): 1x1 convs
// qkv_proj (1 + 2 C outputs) and out_proj; softmax of the query over the
// patches weighs the keys into one context vector per pixel position.
class LinearSelfAttentionImpl : public nn::Module {
 public:
  explicit LinearSelfAttentionImpl(int64_t dim) : dim_(dim) {
    qkv_proj = register_module("qkv_proj", nn::Conv2d(nn::Conv2dOptions(dim, 1 + 2 * dim, 1)));
    out_proj = register_module("out_proj", nn::Conv2d(nn::Conv2dOptions(dim, dim, 1)));
  }

  at::Tensor forward(const at::Tensor& x) {
    const std::vector<at::Tensor> qkv = qkv_proj(x).split_with_sizes({1, dim_, dim_}, 1);
    const at::Tensor scores = at::softmax(qkv[0], -1);
    const at::Tensor context = (qkv[1] * scores).sum(-1, /*keepdim=*/true);
    return out_proj(at::relu(qkv[2]) * context.expand_as(qkv[2]));
  }

  nn::Conv2d qkv_proj{nullptr}, out_proj{nullptr};

 private:
  int64_t dim_;
};
TORCH_MODULE(LinearSelfAttention);

// timm's LinearTransformerBlock: pre-norm GroupNorm1, LinearSelfAttention,
// ConvMlp (ratio 2, the model's act), drop path on both branches.
class LinearTransformerBlockImpl : public nn::Module {
 public:
  LinearTransformerBlockImpl(int64_t dim, const std::string& act, double drop_path) {
    norm1 = register_module("norm1", group_norm1(dim));
    attn = register_module("attn", LinearSelfAttention(dim));
    if (drop_path > 0.0) drop_path1 = register_module("drop_path1", layers::DropPath(drop_path));
    norm2 = register_module("norm2", group_norm1(dim));
    mlp = register_module("mlp", layers::ConvMlp(layers::ConvMlpOptions(dim).hidden_features(dim * 2).act_layer(act)));
    if (drop_path > 0.0) drop_path2 = register_module("drop_path2", layers::DropPath(drop_path));
  }

  at::Tensor forward(at::Tensor x) {
    at::Tensor y = attn(norm1(x));
    x = x + (drop_path1 ? drop_path1(y) : y);
    y = mlp(norm2(x));
    return x + (drop_path2 ? drop_path2(y) : y);
  }

  layers::GroupNorm norm1{nullptr}, norm2{nullptr};
  LinearSelfAttention attn{nullptr};
  layers::ConvMlp mlp{nullptr};
  layers::DropPath drop_path1{nullptr}, drop_path2{nullptr};
};
TORCH_MODULE(LinearTransformerBlock);

// timm's RepVggBlock, BasicBlock, BottleneckBlock and EdgeBlock (downsample
// 'conv1x1' or '', attention per the model's attn_layer) and mobilevit.py's
// blocks in one module, each with timm's children in timm's order.
class ByobBlockImpl : public ByobBlockBaseImpl {
 public:
  explicit ByobBlockImpl(const ByobBlockArgs& a) : type_(a.type) {
    const std::pair<int64_t, int64_t> dil{a.first_dilation, a.dilation};
    if (type_ == "mobilevit") {
      build_mobilevit(a);
      return;
    }
    if (type_ == "mobilevit2") {
      build_mobilevit2(a);
      return;
    }
    if (type_ == "rep") {
      const int64_t groups = num_groups(a.group_size, a.in_chs);
      const bool use_ident = a.in_chs == a.out_chs && a.stride == 1 && dil.first == dil.second;
      if (use_ident) {
        identity = register_module("identity",
                                   layers::BatchNormAct2d(layers::BatchNormAct2dOptions(a.out_chs).apply_act(false)));
      }
      conv_kxk = register_module(
          "conv_kxk", byob_cna(a.in_chs, a.out_chs, 3, a.stride, dil.first, groups, /*apply_act=*/false, a.act));
      conv_1x1 = register_module("conv_1x1", byob_cna(a.in_chs, a.out_chs, 1, a.stride, 1, groups, false, a.act));
      if (a.drop_path > 0.0 && use_ident) drop_path = register_module("drop_path", layers::DropPath(a.drop_path));
      attn = BlockAttn(*this, "attn", a.attn, a.out_chs);
    } else {
      const int64_t mid_chs =
          layers::make_divisible(static_cast<double>(a.bottle_in ? a.in_chs : a.out_chs) * a.bottle_ratio);
      const int64_t groups = num_groups(a.group_size, mid_chs);
      // timm's create_shortcut: none (no residual) with downsample '' where the shape changes.
      if (a.in_chs != a.out_chs || a.stride != 1 || dil.first != dil.second) {
        if (a.downsample.empty()) {
          residual_ = false;
        } else if (a.downsample == "avg") {
          avg_shortcut =
              register_module("shortcut", DownsampleAvg(a.in_chs, a.out_chs, a.stride, a.first_dilation, a.act));
        } else {
          shortcut = make_cna(a.norm, a.in_chs, a.out_chs, 1, a.stride, dil.first, 1, false, a.act, a.aa)
                         .register_on(*this, "shortcut");
        }
      }
      // timm's attn_last: after the last conv for basic and dark blocks, else on the mid channels.
      if (type_ == "basic") {
        conv1 = make_cna(a.norm, a.in_chs, mid_chs, 3, a.stride, dil.first, 1, true, a.act, a.aa)
                    .register_on(*this, "conv1_kxk");
        conv2 = make_cna(a.norm, mid_chs, a.out_chs, 3, 1, dil.second, groups, false, a.act)
                    .register_on(*this, "conv2_kxk");
        attn = BlockAttn(*this, "attn_last", a.attn, a.out_chs);
      } else if (type_ == "dark") {
        conv1 = make_cna(a.norm, a.in_chs, mid_chs, 1, 1, 1, 1, true, a.act).register_on(*this, "conv1_1x1");
        conv2 = make_cna(a.norm, mid_chs, a.out_chs, 3, a.stride, dil.first, groups, false, a.act, a.aa)
                    .register_on(*this, "conv2_kxk");
        attn = BlockAttn(*this, "attn_last", a.attn, a.out_chs);
      } else if (type_ == "edge") {
        conv1 = make_cna(a.norm, a.in_chs, mid_chs, 3, a.stride, dil.first, groups, true, a.act, a.aa)
                    .register_on(*this, "conv1_kxk");
        attn = BlockAttn(*this, "attn", a.attn, mid_chs);
        conv2 = make_cna(a.norm, mid_chs, a.out_chs, 1, 1, 1, 1, false, a.act).register_on(*this, "conv2_1x1");
      } else {
        conv1 = make_cna(a.norm, a.in_chs, mid_chs, 1, 1, 1, 1, true, a.act).register_on(*this, "conv1_1x1");
        conv2 = make_cna(a.norm, mid_chs, mid_chs, 3, a.stride, dil.first, groups, true, a.act, a.aa)
                    .register_on(*this, "conv2_kxk");
        if (a.extra_conv) {
          conv2b = make_cna(a.norm, mid_chs, mid_chs, 3, 1, dil.second, groups, true, a.act)
                       .register_on(*this, "conv2b_kxk");
        }
        attn = BlockAttn(*this, "attn", a.attn, mid_chs);
        conv3 = make_cna(a.norm, mid_chs, a.out_chs, 1, 1, 1, 1, false, a.act).register_on(*this, "conv3_1x1");
      }
      if (a.drop_path > 0.0) drop_path = register_module("drop_path", layers::DropPath(a.drop_path));
    }
    // In place, as timm's layers.act(inplace=True): its input is always a
    // fresh sum, attention gate, norm or conv output.
    if (!a.linear_out) act = register_module("act", layers::create_act(a.act, /*inplace=*/true));
  }

  at::Tensor forward(const at::Tensor& input) override {
    if (type_ == "mobilevit") return forward_mobilevit(input);
    if (type_ == "mobilevit2") return forward_mobilevit2(input);
    at::Tensor x;
    if (type_ == "rep") {
      if (reparam_conv) return act(attn.forward(reparam_conv(input)));
      x = conv_1x1(input) + conv_kxk(input);
      if (identity) {
        if (drop_path) x = drop_path(x);
        x.add_(identity(input));  // timm's x += identity
      }
      return act(attn.forward(x));
    }
    if (type_ == "basic" || type_ == "dark") {
      x = attn.forward(conv2(conv1(input)));
    } else if (type_ == "edge") {
      x = conv2(attn.forward(conv1(input)));
    } else {
      x = conv2(conv1(input));
      if (conv2b) x = conv2b(x);
      x = conv3(attn.forward(x));
    }
    if (drop_path) x = drop_path(x);
    if (residual_) x = x + (shortcut ? shortcut(input) : avg_shortcut ? avg_shortcut(input) : input);
    return act ? act(x) : x;
  }

  // timm's block init_weights after the model-wide init: RepVGG's BNs
  // weight N(0.1, 0.1), bias N(0, 0.1); the residual blocks' last BN weight
  // (BatchNorm or EvoNorm) zero with zero_init_last; then attn's
  // reset_parameters (GlobalContext's).
  void init_block(bool zero_init_last) override {
    if (type_ == "rep") {
      layers::for_each_batch_norm_act(*this, [](const std::string&, layers::BatchNormAct2dImpl& bn) {
        bn.weight.normal_(0.1, 0.1);
        bn.bias.normal_(0.0, 0.1);
      });
      return;
    }
    if (type_ == "mobilevit" || type_ == "mobilevit2") return;
    // timm zeroes it only where the block has a shortcut (identity or conv).
    if (zero_init_last && residual_) nn::init::zeros_((conv3 ? conv3 : conv2).norm_weight());
    attn.reset_parameters();
  }

  // timm's RepVggBlock.reparameterize: conv_kxk, conv_1x1 (padded to kxk)
  // and the identity BatchNorm folded into one biased conv, reparam_conv,
  // registered last as timm's; the branches and drop_path are removed.
  // Returns false for other block types and a block already folded.
  bool reparameterize() override {
    if (type_ != "rep" || reparam_conv) return false;
    const auto& kxk = conv_kxk->conv->options;
    const int64_t kernel = (*kxk.kernel_size())[0];
    layers::ConvWeights fused = layers::fuse_conv_bn(*conv_kxk);
    layers::ConvWeights scale = layers::fuse_conv_bn(*conv_1x1);
    scale.weight = layers::pad_kernel_to(scale.weight, kernel);
    fused += scale;
    if (identity) {
      const at::Tensor eye = layers::identity_kernel(kxk.out_channels(), kxk.groups(), kernel, fused.weight.options());
      fused += layers::fuse_bn(eye, *identity);
    }
    for (const char* name : {"identity", "conv_kxk", "conv_1x1", "drop_path"}) {
      if (named_children().contains(name)) unregister_module(name);
    }
    reparam_conv = register_module("reparam_conv", layers::make_reparam_conv(*conv_kxk->conv, fused));
    identity = nullptr;
    conv_kxk = conv_1x1 = nullptr;
    drop_path = nullptr;
    return true;
  }

  layers::BatchNormAct2d identity{nullptr};
  layers::ConvNormAct conv_kxk{nullptr}, conv_1x1{nullptr};
  nn::Conv2d reparam_conv{nullptr};
  ByobCna shortcut;
  DownsampleAvg avg_shortcut{nullptr};  // "shortcut" with downsample 'avg'
  ByobCna conv1, conv2, conv2b, conv3;  // of the model's norm layer (BatchNorm or EvoNorm)
  layers::DropPath drop_path{nullptr};
  BlockAttn attn;  // attn_last for basic blocks
  layers::Activation act{nullptr};
  // MobileVitBlock's (conv_kxk above is its local conv).
  nn::Conv2d mv_conv_1x1{nullptr};
  nn::Sequential transformer{nullptr};
  layers::LayerNorm norm{nullptr};
  layers::GroupNorm norm2d{nullptr};  // MobileVitV2Block's "norm"
  layers::ConvNormAct conv_proj{nullptr}, conv_fusion{nullptr};

 private:
  // timm's MobileVitBlock (num_heads 4, mlp_ratio 2, with fusion).
  void build_mobilevit(const ByobBlockArgs& a) {
    const int64_t groups = num_groups(a.group_size, a.in_chs);
    const int64_t dim = a.transformer_dim > 0 ? a.transformer_dim
                                              : layers::make_divisible(a.bottle_ratio * static_cast<double>(a.in_chs));
    conv_kxk =
        register_module("conv_kxk", byob_cna(a.in_chs, a.in_chs, 3, a.stride, a.first_dilation, groups, true, a.act));
    mv_conv_1x1 = register_module("conv_1x1", nn::Conv2d(nn::Conv2dOptions(a.in_chs, dim, 1).bias(false)));
    transformer = nn::Sequential();
    for (int64_t i = 0; i < a.transformer_depth; ++i) {
      transformer->push_back(std::to_string(i), MobileVitTransformerBlock(dim, 4, a.act, a.drop_path));
    }
    register_module("transformer", transformer);
    norm = register_module("norm", layers::LayerNorm(layers::torch_layer_norm_options(dim)));
    conv_proj = register_module("conv_proj", byob_cna(dim, a.out_chs, 1, 1, 1, 1, true, a.act));
    conv_fusion = register_module("conv_fusion", byob_cna(a.in_chs + a.out_chs, a.out_chs, 3, 1, 1, 1, true, a.act));
    patch_size_ = a.patch_size;
  }

  // timm's MobileVitBlock.forward: local convs, unfold into patch_size
  // patches (bilinear resize to a multiple of it first where needed), the
  // transformer over the patches, fold back, conv_proj, fusion with the input.
  at::Tensor forward_mobilevit(const at::Tensor& input) {
    at::Tensor x = mv_conv_1x1(conv_kxk(input));
    const int64_t ph = patch_size_;
    const int64_t pw = patch_size_;
    const int64_t b = x.size(0), c = x.size(1), h = x.size(2), w = x.size(3);
    const int64_t new_h = (h + ph - 1) / ph * ph;
    const int64_t new_w = (w + pw - 1) / pw * pw;
    const int64_t nph = new_h / ph, npw = new_w / pw;
    const int64_t num_patches = nph * npw;
    const int64_t area = ph * pw;
    const bool resize = new_h != h || new_w != w;
    if (resize) x = at::upsample_bilinear2d(x, {new_h, new_w}, /*align_corners=*/false);
    x = x.reshape({b * c * nph, ph, npw, pw}).transpose(1, 2);
    x = x.reshape({b, c, num_patches, area}).transpose(1, 3).reshape({b * area, num_patches, -1});
    x = norm(transformer->forward(x));
    x = x.contiguous().view({b, area, num_patches, -1});
    x = x.transpose(1, 3).reshape({b * c * nph, npw, ph, pw});
    x = x.transpose(1, 2).reshape({b, c, nph * ph, npw * pw});
    if (resize) x = at::upsample_bilinear2d(x, {h, w}, /*align_corners=*/false);
    x = conv_proj(x);
    return conv_fusion(at::cat({input, x}, 1));
  }

  // timm's MobileVitV2Block (mlp_ratio 2, depthwise conv_kxk at stride 1).
  void build_mobilevit2(const ByobBlockArgs& a) {
    const int64_t groups = num_groups(a.group_size, a.in_chs);
    const int64_t dim = a.transformer_dim > 0 ? a.transformer_dim
                                              : layers::make_divisible(a.bottle_ratio * static_cast<double>(a.in_chs));
    conv_kxk = register_module("conv_kxk", byob_cna(a.in_chs, a.in_chs, 3, 1, a.first_dilation, groups, true, a.act));
    mv_conv_1x1 = register_module("conv_1x1", nn::Conv2d(nn::Conv2dOptions(a.in_chs, dim, 1).bias(false)));
    transformer = nn::Sequential();
    for (int64_t i = 0; i < a.transformer_depth; ++i) {
      transformer->push_back(std::to_string(i), LinearTransformerBlock(dim, a.act, a.drop_path));
    }
    register_module("transformer", transformer);
    norm2d = register_module("norm", group_norm1(dim));
    conv_proj = register_module("conv_proj", byob_cna(dim, a.out_chs, 1, 1, 1, 1, false, a.act));
    patch_size_ = a.patch_size;
  }

  // timm's MobileVitV2Block.forward (not coreml_exportable): the input
  // resized to a multiple of patch_size (align_corners) where needed and
  // left at that size, then convs, unfold, transformer, norm, fold, conv_proj.
  at::Tensor forward_mobilevit2(const at::Tensor& input) {
    const int64_t ph = patch_size_;
    const int64_t pw = patch_size_;
    const int64_t b = input.size(0), h = input.size(2), w = input.size(3);
    const int64_t new_h = (h + ph - 1) / ph * ph;
    const int64_t new_w = (w + pw - 1) / pw * pw;
    const int64_t nph = new_h / ph, npw = new_w / pw;
    const int64_t num_patches = nph * npw;
    at::Tensor x = input;
    if (new_h != h || new_w != w) x = at::upsample_bilinear2d(x, {new_h, new_w}, /*align_corners=*/true);
    x = mv_conv_1x1(conv_kxk(x));
    const int64_t c = x.size(1);
    x = x.reshape({b, c, nph, ph, npw, pw}).permute({0, 1, 3, 5, 2, 4});
    x = x.reshape({b, c, -1, num_patches});
    x = norm2d(transformer->forward(x));
    x = x.reshape({b, c, ph, pw, nph, npw}).permute({0, 1, 4, 2, 5, 3});
    x = x.reshape({b, c, nph * ph, npw * pw});
    return conv_proj(x);
  }

  std::string type_;
  bool residual_ = true;
  int64_t patch_size_ = 0;
};
TORCH_MODULE(ByobBlock);

// One stage: timm's nn.Sequential of blocks (children "0", "1", ...).
// A block of timm's type: MobileOneBlock for 'one', else ByobBlock.
ByobBlockPtr make_block(const ByobBlockArgs& a) {
  // EvoNorm is wired into the residual blocks only, as the *_evos RegNetZs use
  // it: RepVGG / MobileOne / MobileViT blocks and DownsampleAvg keep BatchNorm.
  TORCH_INTERNAL_ASSERT(a.norm == "batchnorm" || (a.type != "rep" && a.type != "one" && a.type != "mobilevit" &&
                                                  a.type != "mobilevit2" && a.downsample != "avg"),
                        "byobnet: norm ", a.norm, " in a ", a.type, " block");
  // Anti-aliasing likewise: the residual blocks' strided convs only (the CLIP ResNets' bottlenecks).
  TORCH_INTERNAL_ASSERT(
      a.aa.empty() || (a.type != "rep" && a.type != "one" && a.type != "mobilevit" && a.type != "mobilevit2"),
      "byobnet: anti-aliasing in a ", a.type, " block");
  if (a.type == "one") return std::make_shared<MobileOneBlockImpl>(a);
  return std::make_shared<ByobBlockImpl>(a);
}

class ByobStageImpl : public nn::Module {
 public:
  explicit ByobStageImpl(const std::vector<ByobBlockArgs>& blocks) {
    for (size_t i = 0; i < blocks.size(); ++i) {
      ByobBlockPtr b = register_module(std::to_string(i), make_block(blocks[i]));
      blocks_.push_back(b);
      any_blocks_.emplace_back(b);
    }
  }

  // The blocks in order; with checkpointing each block is checkpointed
  // (timm's checkpoint_seq), the same values as the plain run.
  at::Tensor forward(at::Tensor x, bool checkpointing = false) {
    if (checkpointing) return checkpoint_seq(any_blocks_, x);
    for (auto& b : blocks_) x = b->forward(x);
    return x;
  }

  const std::vector<ByobBlockPtr>& blocks() const { return blocks_; }

 private:
  std::vector<ByobBlockPtr> blocks_;
  std::vector<nn::AnyModule> any_blocks_;
};
TORCH_MODULE(ByobStage);

class ByobNetImpl : public ClassifierImpl {
 public:
  ByobNetImpl(const ByobSpec& spec, const ModelArgs& args) : num_classes_(args.num_classes) {
    const std::string& name = spec.name;
    validate_model_args(name, args, kByobKnownKwargs);
    const ByobCfg& cfg = spec.cfg;
    int64_t output_stride = 32;
    if (const std::optional<double> os = model_kwarg_double(name, args, "output_stride")) {
      if (*os != 8.0 && *os != 16.0 && *os != 32.0) {
        throw UsageError(name + ": output_stride=" + args.kwargs.at("output_stride") + ": expected 8, 16 or 32");
      }
      output_stride = static_cast<int64_t>(*os);
    }
    const bool zero_init_last = model_kwarg_bool(name, args, "zero_init_last").value_or(true);
    // timm's img_size: the attention pool's pos_embed grid (img_size / 32, or
    // / output_stride); timm's create_model passes the default cfg's input
    // size (fixed_input_size). The other heads ignore it, as timm's ByobNet.
    const int64_t img_size = model_kwarg_positive_int(name, args, "img_size").value_or(spec.img_size);

    cfg_.input_size = {3, spec.img_size, spec.img_size};
    cfg_.interpolation = spec.mobilevit ? "bicubic" : spec.interpolation;
    cfg_.crop_pct = spec.crop_pct;
    if (spec.mobilevit) {
      cfg_.mean = {0.0, 0.0, 0.0};
      cfg_.std = {1.0, 1.0, 1.0};
    } else if (spec.inception_norm) {
      cfg_.mean = {0.5, 0.5, 0.5};
      cfg_.std = {0.5, 0.5, 0.5};
    } else if (spec.clip_norm) {
      cfg_.mean.assign(std::begin(kOpenaiClipMean), std::end(kOpenaiClipMean));
      cfg_.std.assign(std::begin(kOpenaiClipStd), std::end(kOpenaiClipStd));
    }
    cfg_.crop_mode = "center";
    cfg_.classifier = cfg.head_type == "attn_abs" ? "head.proj" : "head.fc";
    cfg_.hf_hub_id = timm_hub_id(name, kByobDefaultTags);
    set_test_size(cfg_, name, kTestSizes);
    cfg_.num_classes = spec.pretrained_num_classes;

    // The stem (timm's create_byob_stem): a RepVggBlock or MobileOneBlock at
    // stride 2, a Stem of 3x3 convs at stride 4 (its feature levels before
    // its last stride), or one 3x3 / 2 ConvNormAct. timm's first_conv of the
    // RepVGG / MobileOne stems is a pair (the kxk and the 1x1 conv): the first here.
    const auto stem_chs = static_cast<int64_t>(std::llround(static_cast<double>(cfg.stem_chs) * cfg.width_factor));
    FeatureInfo stem_feat{stem_chs, 2, "stem"};
    if (cfg.stem_type == "rep" || cfg.stem_type == "one") {
      ByobBlockArgs a;
      a.type = cfg.stem_type;
      a.in_chs = args.in_chans;
      a.out_chs = stem_chs;
      a.stride = 2;
      a.attn = cfg.attn;
      a.act = cfg.act;
      a.norm = cfg.norm;
      block_stem = register_module("stem", make_block(a));
      cfg_.first_conv = cfg.stem_type == "rep" ? "stem.conv_kxk.conv" : "stem.conv_kxk.0.conv";
    } else if (cfg.stem_type == "3x3") {
      conv_stem = make_cna(cfg.norm, args.in_chans, stem_chs, 3, 2, 1, 1, true, cfg.act).register_on(*this, "stem");
      cfg_.first_conv = "stem.conv";
    } else {
      std::vector<int64_t> chs;
      int64_t num_act = 0;
      if (cfg.stem_type.empty()) {  // a Stem of the given widths (the CLIP ResNets')
        for (const int64_t c : cfg.stem_chs_list) {
          chs.push_back(static_cast<int64_t>(std::llround(static_cast<double>(c) * cfg.width_factor)));
        }
        num_act = static_cast<int64_t>(chs.size());
      } else if (cfg.stem_type == "quad" || cfg.stem_type == "quad2") {
        // timm's round(out_chs * 0.5 ** i), reversed (exact halvings for these widths).
        for (int64_t i = 3; i >= 0; --i) chs.push_back(stem_chs >> i);
        num_act = cfg.stem_type == "quad2" ? 2 : 4;
      } else if (cfg.stem_type == "deep") {  // ResNet-D's: three convs of stem_chs
        chs = {stem_chs, stem_chs, stem_chs};
        num_act = 3;
      } else {  // tiered
        chs = {3 * stem_chs / 8, stem_chs / 2, stem_chs};
        num_act = 3;
      }
      seq_stem = make_byob_stem(args.in_chans, chs, cfg.stem_pool, num_act, cfg.act, cfg.norm);
      register_module("stem", seq_stem.seq);
      cfg_.first_conv = seq_stem.first_conv;
      stem_feat = seq_stem.feature_info.back();
      for (size_t i = 0; i + 1 < seq_stem.feature_info.size(); ++i) {
        feature_info_.push_back(seq_stem.feature_info[i]);
        stage_ends_.push_back(0);
      }
    }
    build_stages(cfg, args.drop_path_rate.value_or(0.0), output_stride, stem_feat, img_size);
    if (cfg.num_features > 0) {
      num_features_ = cfg.num_features;
      final_conv =
          make_cna(cfg.norm, last_chs_, num_features_, 1, 1, 1, 1, true, cfg.act).register_on(*this, "final_conv");
    } else {
      num_features_ = last_chs_;
    }
    feature_info_.push_back(FeatureInfo{num_features_, last_reduction_, "final_conv"});
    stage_ends_.push_back(static_cast<int64_t>(stage_list_.size()));

    build_head(name, cfg, args);
    init_weights(zero_init_last);
  }

  at::Tensor run_stem(const at::Tensor& x) {
    if (block_stem) return block_stem->forward(x);
    return seq_stem.seq ? seq_stem.seq->forward(x) : conv_stem(x);
  }

  // timm's forward_features: stem, stages (checkpointed per stage with
  // grad checkpointing), final_conv.
  at::Tensor forward_features(at::Tensor x) override {
    x = run_stem(x);
    for (auto& stage : stage_list_) x = stage(x, grad_checkpointing_);
    return final_conv ? final_conv(x) : x;
  }

  // timm's feature_info: the stem, each stage before a strided one, then
  // final_conv (the last stage's output through final_conv where there is one).
  std::vector<FeatureInfo> feature_info() const override { return feature_info_; }

  // timm's forward_intermediates: level i is the output of stage
  // stage_ends[i] (0 the stem); final_conv is applied after the last stage.
  // With stop_early, only the stages up to the last level taken run. norm is
  // ignored (no final norm); NCHW only.
  Intermediates forward_intermediates(at::Tensor x,
                                      const IntermediatesOptions& options = IntermediatesOptions()) override {
    check_output_fmt(describe_model(*this), options.output_fmt(), {"NCHW"});
    const auto num_levels = static_cast<int64_t>(stage_ends_.size());
    const auto [take_indices, max_index] = feature_take_indices(num_levels, options.indices());
    std::vector<int64_t> take_stages;
    for (const int64_t i : take_indices) take_stages.push_back(stage_ends_[static_cast<size_t>(i)]);
    const int64_t max_stage = stage_ends_[static_cast<size_t>(max_index)];
    auto taken = [&](int64_t idx) {
      return std::find(take_stages.begin(), take_stages.end(), idx) != take_stages.end();
    };
    Intermediates out;
    // timm's stem level: a Stem's tapped layer (before its last stride), else the stem's output.
    if (seq_stem.seq) {
      at::Tensor tapped;
      std::tie(x, tapped) = stem_forward_intermediates(seq_stem, x);
      if (taken(0)) out.intermediates.push_back(tapped.defined() ? tapped : x);
    } else {
      x = run_stem(x);
      if (taken(0)) out.intermediates.push_back(x);
    }
    const int64_t last_idx = stage_ends_.back();
    const auto num_stages = static_cast<int64_t>(stage_list_.size());
    const int64_t stages_run = options.stop_early() ? std::min(num_stages, max_stage) : num_stages;
    for (int64_t s = 0; s < stages_run; ++s) {
      const int64_t feat_idx = s + 1;
      x = stage_list_[static_cast<size_t>(s)](x, grad_checkpointing_);
      if (feat_idx == last_idx && final_conv) x = final_conv(x);
      if (taken(feat_idx)) out.intermediates.push_back(x);
    }
    if (!options.intermediates_only()) out.final = x;
    return out;
  }

  at::Tensor forward_head(at::Tensor x, bool pre_logits = false) override {
    if (attn_pool) return attn_pool->forward(x, pre_logits);
    if (mlp_head) return pre_logits ? mlp_head->forward_pre_logits(x) : mlp_head(x);
    return pre_logits ? head->forward_pre_logits(x) : head(x);
  }

  at::Tensor forward(at::Tensor x) override { return forward_head(forward_features(x)); }

  void set_grad_checkpointing(bool enable) override { grad_checkpointing_ = enable; }
  int64_t reparameterize() override {
    return layers::reparameterize_children(*this, [](nn::Module& module) {
      auto* block = module.as<ByobBlockBaseImpl>();
      return block != nullptr && block->reparameterize();
    });
  }
  int64_t num_classes() const override { return num_classes_; }
  const PretrainedCfg& pretrained_cfg() const override { return cfg_; }
  // timm's: the stem, then each block (coarse: each stage); final_conv joins the last group.
  GroupMatcher group_matcher(bool coarse) const override {
    return {{"stem", {{"^stem", std::nullopt}}},
            {"blocks",
             {{coarse ? R"(^stages\.(\d+))" : R"(^stages\.(\d+)\.(\d+))", std::nullopt},
              {"^final_conv", std::vector<double>{99999}}}}};
  }

  ByobBlockPtr block_stem;  // RepVGG's / MobileOne's
  ByobCna conv_stem;
  ByobStem seq_stem;
  nn::Sequential stages{nullptr};
  ByobCna final_conv;
  // "head": one of timm's ClassifierHead, AttentionPool2d (head_type
  // attn_abs) or NormMlpClassifierHead (mlp).
  layers::ClassifierHeadModule head{nullptr};
  layers::AttentionPool2d attn_pool{nullptr};
  layers::NormMlpClassifierHead mlp_head{nullptr};

 private:
  // timm's head by cfg.head_type. The attention pool takes global_pool
  // "token" (its default) or "" (the unpooled map), a query token of the
  // mean, q / k / v Linears, 64-wide heads and the pos_embed grid of
  // feat_size_; the MLP head's norm is timm's get_norm_layer('batchnorm'), a
  // BatchNorm2d (the SDK head's LayerNorm2d replaced), its act the model's.
  void build_head(const std::string& name, const ByobCfg& cfg, const ModelArgs& args) {
    if (cfg.head_type == "attn_abs") {
      const std::string pool = args.global_pool.value_or("token");
      if (pool != "token" && !pool.empty()) {
        throw UsageError(name + ": global_pool=" + in_quotes(pool) +
                         ": the attention-pool head supports only token pooling (or none, '')");
      }
      if (feat_size_[0] < 1 || feat_size_[1] < 1) {
        throw UsageError(name + ": img_size " + std::to_string(img_size_) + " gives an empty " +
                         std::to_string(feat_size_[0]) + "x" + std::to_string(feat_size_[1]) +
                         " attention-pool grid: expected img_size >= " + std::to_string(last_reduction_));
      }
      attn_pool = register_module("head", layers::AttentionPool2d(layers::AttentionPool2dOptions(num_features_)
                                                                      .feat_size(feat_size_)
                                                                      .out_features(num_classes_)
                                                                      .qkv_separate(true)
                                                                      .pool_type(pool)
                                                                      .drop_rate(args.drop_rate)));
    } else if (cfg.head_type == "mlp") {
      mlp_head = register_module(
          "head", layers::NormMlpClassifierHead(layers::NormMlpClassifierHeadOptions(num_features_, num_classes_)
                                                    .hidden_size(cfg.head_hidden_size)
                                                    .pool_type(args.global_pool.value_or("avg"))
                                                    .drop_rate(args.drop_rate)
                                                    .act_layer(cfg.act)));
      layers::BatchNormAct2d norm(layers::BatchNormAct2dOptions(num_features_).apply_act(false));
      mlp_head->norm = nn::AnyModule(norm);
      mlp_head->replace_module("norm", norm);
    } else {
      head = register_module(
          "head", layers::ClassifierHeadModule(layers::ClassifierHeadModuleOptions(num_features_, num_classes_)
                                                   .pool_type(args.global_pool.value_or("avg"))
                                                   .drop_rate(args.drop_rate)));
    }
  }

  // timm's create_byob_stages: output_stride dilates the stages past it;
  // a feature level before each strided stage; a stage's stride is its
  // first cfg's.
  void build_stages(const ByobCfg& cfg, double drop_path_rate, int64_t output_stride, const FeatureInfo& stem_feat,
                    int64_t img_size) {
    // timm's feat_size: img_size through the stem's and each strided stage's reduction (floor).
    img_size_ = img_size;
    feat_size_ = {img_size / stem_feat.reduction, img_size / stem_feat.reduction};
    std::vector<std::vector<BlockCfg>> stage_cfgs;
    for (const auto& b : cfg.blocks) {
      if (b.same_stage && !stage_cfgs.empty()) {
        stage_cfgs.back().push_back(b);
      } else {
        stage_cfgs.push_back({b});
      }
    }
    int64_t total_depth = 0;
    for (const auto& b : cfg.blocks) total_depth += b.d;
    const std::vector<double> rates =
        drop_path_rate > 0.0 ? layers::drop_path_rates(drop_path_rate, total_depth) : std::vector<double>{};
    int64_t dilation = 1;
    int64_t net_stride = stem_feat.reduction;
    int64_t prev_chs = stem_feat.num_chs;
    FeatureInfo prev_feat = stem_feat;
    int64_t prev_stage = 0;
    size_t block = 0;
    stages = nn::Sequential();
    for (size_t stage_idx = 0; stage_idx < stage_cfgs.size(); ++stage_idx) {
      int64_t stride = stage_cfgs[stage_idx].front().s;
      if (stride != 1) {
        feature_info_.push_back(prev_feat);
        stage_ends_.push_back(prev_stage);
      }
      if (net_stride >= output_stride && stride > 1) {
        dilation *= stride;
        stride = 1;
      }
      net_stride *= stride;
      if (stride > 1) feat_size_ = {feat_size_[0] / stride, feat_size_[1] / stride};
      int64_t first_dilation = dilation == 1 || dilation == 2 ? 1 : 2;
      std::vector<ByobBlockArgs> stage_blocks;
      int64_t i = 0;  // the block index in the stage
      for (const BlockCfg& bc : stage_cfgs[stage_idx]) {
        const int64_t out_chs = layers::make_divisible(bc.c * cfg.width_factor);
        for (int64_t r = 0; r < bc.d; ++r, ++i) {
          ByobBlockArgs a;
          a.type = bc.type;
          a.in_chs = prev_chs;
          a.out_chs = out_chs;
          a.stride = i == 0 ? stride : 1;
          a.first_dilation = first_dilation;
          a.dilation = dilation;
          if (bc.gs < 0) {
            a.group_size = (i + 1) % 2 == 0 ? out_chs / -bc.gs : 0;
          } else {
            a.group_size = bc.gs;
          }
          a.bottle_ratio = bc.br;
          a.drop_path = rates.empty() ? 0.0 : rates[block];
          ++block;
          a.attn = bc.attn.value_or(cfg.attn);
          a.act = cfg.act;
          a.norm = cfg.norm;
          a.downsample = cfg.downsample;
          a.aa = cfg.aa;
          a.kernel_size = bc.kernel_size;
          a.num_conv_branches = bc.num_conv_branches;
          a.bottle_in = bc.bottle_in;
          a.linear_out = bc.linear_out;
          a.extra_conv = bc.extra_conv;
          a.transformer_dim = bc.transformer_dim;
          a.transformer_depth = bc.transformer_depth;
          a.patch_size = bc.patch_size;
          stage_blocks.push_back(a);
          first_dilation = dilation;
          prev_chs = out_chs;
        }
      }
      ByobStage stage(stage_blocks);
      for (const auto& b : stage->blocks()) block_list_.push_back(b);
      stage_list_.push_back(stage);
      stages->push_back(std::to_string(stage_idx), stage);
      prev_feat = FeatureInfo{prev_chs, net_stride, "stages." + std::to_string(stage_idx)};
      prev_stage = static_cast<int64_t>(stage_idx) + 1;
    }
    register_module("stages", stages);
    last_chs_ = prev_chs;
    last_reduction_ = net_stride;
  }

  // timm's _init_weights: convs N(0, sqrt(2 / fan_out)) with fan_out
  // k * k * out / groups, bias zero; the fc N(0, 0.01), bias zero; BN 1 / 0;
  // then each block's init_weights (RepVGG's BN draws, zero_init_last).
  void init_weights(bool zero_init_last) {
    c10::NoGradGuard no_grad;
    for (auto& module : modules(/*include_self=*/false)) {
      if (auto* c = module->as<nn::Conv2d>()) {
        const auto& o = c->options;
        const int64_t fan_out = (*o.kernel_size())[0] * (*o.kernel_size())[1] * o.out_channels() / o.groups();
        c->weight.normal_(0.0, std::sqrt(2.0 / static_cast<double>(fan_out)));
        if (c->bias.defined()) c->bias.zero_();
      } else if (auto* l = module->as<nn::Linear>()) {
        l->weight.normal_(0.0, 0.01);
        if (l->bias.defined()) l->bias.zero_();
      } else if (auto* bn = module->as<layers::BatchNormAct2dImpl>()) {
        if (bn->weight.defined()) bn->weight.fill_(1.0);
        if (bn->bias.defined()) bn->bias.zero_();
      }
    }
    if (block_stem) block_stem->init_block(zero_init_last);
    for (auto& b : block_list_) b->init_block(zero_init_last);
    // timm's named_apply reaches AttentionPool2d after its Linears: its own init_weights redraws q / k / v.
    if (attn_pool) attn_pool->init_weights();
  }

  PretrainedCfg cfg_;
  int64_t num_classes_;
  int64_t num_features_ = 0;
  int64_t last_chs_ = 0;
  int64_t last_reduction_ = 0;
  int64_t img_size_ = 0;
  layers::FeatSize2d feat_size_ = {0, 0};
  bool grad_checkpointing_ = false;
  std::vector<int64_t> stage_ends_;
  std::vector<ByobStage> stage_list_;
  std::vector<ByobBlockPtr> block_list_;
  std::vector<FeatureInfo> feature_info_;
};

// timm's _rep_vgg_bcfg: widths (64, 128, 256, 512) times wf; groups > 0
// groups every other block (gs < 0 here).
std::vector<BlockCfg> rep_vgg_bcfg(std::vector<int64_t> d, std::vector<double> wf, int64_t groups = 0) {
  const double c[4] = {64, 128, 256, 512};
  std::vector<BlockCfg> blocks;
  for (size_t i = 0; i < 4; ++i)
    blocks.push_back(BlockCfg{"rep", d[i], c[i] * wf[i], 2, groups > 0 ? -groups : 0, 1.0});
  return blocks;
}

ByobCfg repvgg_cfg(std::vector<int64_t> d, std::vector<double> wf, int64_t stem_chs, int64_t groups = 0,
                   bool se = false) {
  ByobCfg cfg;
  cfg.blocks = rep_vgg_bcfg(std::move(d), std::move(wf), groups);
  cfg.stem_type = "rep";
  cfg.stem_chs = stem_chs;
  if (se) cfg.attn = AttnCfg{"se", 0.0625, 1};
  return cfg;
}

ByobCfg gernet_cfg(std::vector<BlockCfg> blocks, int64_t stem_chs, int64_t num_features) {
  ByobCfg cfg;
  cfg.blocks = std::move(blocks);
  cfg.stem_chs = stem_chs;
  cfg.num_features = num_features;
  return cfg;
}

// mobilevit.py's _inverted_residual_block: a depthwise bottleneck on in_chs * br, linear out.
BlockCfg inverted_residual(int64_t d, double c, int64_t s, double br = 4.0) {
  BlockCfg b{"bottle", d, c, s, 1, br};
  b.bottle_in = true;
  b.linear_out = true;
  return b;
}

// mobilevit.py's _mobilevit_block: an inverted residual, then a MobileVitBlock in the same stage.
void add_mobilevit_stage(std::vector<BlockCfg>& blocks, double c, int64_t transformer_dim, int64_t transformer_depth,
                         double br = 4.0) {
  blocks.push_back(inverted_residual(1, c, 2, br));
  BlockCfg m{"mobilevit", 1, c, 1, 0, 1.0};
  m.same_stage = true;
  m.transformer_dim = transformer_dim;
  m.transformer_depth = transformer_depth;
  m.patch_size = 2;
  blocks.push_back(m);
}

// mobilevit.py's v1 cfgs: widths of the five stages, transformer dims, num_features.
ByobCfg mobilevit_cfg(const std::vector<double>& c, const std::vector<int64_t>& dims, int64_t num_features, double br) {
  ByobCfg cfg;
  cfg.blocks.push_back(inverted_residual(1, c[0], 1, br));
  cfg.blocks.push_back(inverted_residual(3, c[1], 2, br));
  add_mobilevit_stage(cfg.blocks, c[2], dims[0], 2, br);
  add_mobilevit_stage(cfg.blocks, c[3], dims[1], 4, br);
  add_mobilevit_stage(cfg.blocks, c[4], dims[2], 3, br);
  cfg.stem_chs = 16;
  cfg.act = "silu";
  cfg.downsample = "";
  cfg.num_features = num_features;
  return cfg;
}

// mobilevit.py's _mobilevitv2_cfg: widths int(c * multiplier), MobileVitV2Blocks
// (transformer_br 0.5, depthwise) after an inverted residual in stages 2..4.
ByobCfg mobilevitv2_cfg(double multiplier) {
  std::vector<double> chs = {64, 128, 256, 384, 512};
  if (multiplier != 1.0) {
    for (double& c : chs) c = std::floor(c * multiplier);
  }
  ByobCfg cfg;
  cfg.blocks.push_back(inverted_residual(1, chs[0], 1, 2.0));
  cfg.blocks.push_back(inverted_residual(2, chs[1], 2, 2.0));
  const int64_t depths[3] = {2, 4, 3};
  for (size_t i = 0; i < 3; ++i) {
    cfg.blocks.push_back(inverted_residual(1, chs[i + 2], 2, 2.0));
    BlockCfg m{"mobilevit2", 1, chs[i + 2], 1, 1, 0.5};
    m.same_stage = true;
    m.transformer_depth = depths[i];
    m.patch_size = 2;
    cfg.blocks.push_back(m);
  }
  cfg.stem_chs = static_cast<int64_t>(std::floor(32 * multiplier));
  cfg.act = "silu";
  cfg.downsample = "";
  return cfg;
}

// timm's _mobileone_bcfg: per stage d pairs of a depthwise kxk block (c the
// previous width) and a pointwise 1x1 block (c * wf), the last se_blocks
// pairs of a stage with SE (timm's defaults: rd_ratio 1 / 16, rd_divisor 8).
ByobCfg mobileone_cfg(const std::vector<double>& wf, const std::vector<int64_t>& se_blocks, int64_t num_conv_branches,
                      int64_t stem_chs) {
  const double c[4] = {64, 128, 256, 512};
  const int64_t d[4] = {2, 8, 10, 1};
  double prev_c = std::min(64.0, c[0] * wf[0]);
  ByobCfg cfg;
  for (size_t s = 0; s < 4; ++s) {
    for (int64_t i = 0; i < d[s]; ++i) {
      const double out_c = c[s] * wf[s];
      const bool se = !se_blocks.empty() && i >= d[s] - se_blocks[s];
      BlockCfg dw{"one", 1, prev_c, 2, 1, 1.0};
      dw.same_stage = i > 0;
      BlockCfg pw{"one", 1, out_c, 2, 0, 1.0};
      pw.same_stage = true;
      pw.kernel_size = 1;
      for (BlockCfg* b : {&dw, &pw}) {
        b->num_conv_branches = num_conv_branches;
        if (se) b->attn = AttnCfg{"se"};
      }
      cfg.blocks.push_back(dw);
      cfg.blocks.push_back(pw);
      prev_c = out_c;
    }
  }
  cfg.stem_type = "one";
  cfg.stem_chs = stem_chs;
  return cfg;
}

// Four stages of timm's ByoBlockCfg(type, d, c, s, gs, br) with the same
// type (the ResNet-like and RegNetZ models).
std::vector<BlockCfg> four_stages(const std::string& type, const std::vector<int64_t>& d, const std::vector<double>& c,
                                  const std::vector<int64_t>& s, const std::vector<int64_t>& gs,
                                  const std::vector<double>& br) {
  std::vector<BlockCfg> blocks;
  for (size_t i = 0; i < 4; ++i) blocks.push_back(BlockCfg{type, d[i], c[i], s[i], gs[i], br[i]});
  return blocks;
}

// The RegNetZ cfgs: inverted bottlenecks (bottle_in, linear_out, no
// shortcut where the shape changes), SE at rd_ratio 0.25, SiLU; norm "evos"
// for the *_evos models (EvoNorm2dS0a, group size 16, in place of BatchNorm
// and SiLU after each conv).
ByobSpec regnetz_spec(const std::string& name, std::vector<BlockCfg> blocks, int64_t stem_chs,
                      const std::string& stem_type, int64_t num_features, int64_t img_size, double crop_pct,
                      const std::string& norm = "batchnorm") {
  ByobCfg cfg;
  for (BlockCfg& b : blocks) {
    b.bottle_in = true;
    b.linear_out = true;
  }
  cfg.blocks = std::move(blocks);
  cfg.stem_type = stem_type;
  cfg.stem_chs = stem_chs;
  cfg.downsample = "";
  cfg.num_features = num_features;
  cfg.act = "silu";
  cfg.norm = norm;
  cfg.attn = AttnCfg{"se", 0.25, 8};
  ByobSpec spec{name, cfg, img_size, crop_pct};
  spec.interpolation = "bicubic";
  spec.inception_norm = true;
  spec.description = "RegNetZ (ByobNet, " + stem_type + " stem, SE inverted bottlenecks, group size " +
                     std::to_string(cfg.blocks[0].gs) + (norm == "evos" ? ", EvoNorm-S0a)" : ")");
  return spec;
}

// The ResNet-like 'ts' / 'q' models: bottlenecks with 1x1 conv shortcuts,
// a tiered or quad stem, the model's attention (se, eca, gca or none).
ByobSpec resnet_spec(const std::string& name, std::vector<BlockCfg> blocks, const std::string& stem_type,
                     int64_t stem_chs, const std::string& stem_pool, int64_t num_features, const std::string& attn,
                     const std::string& act = "silu") {
  ByobCfg cfg;
  cfg.blocks = std::move(blocks);
  cfg.stem_type = stem_type;
  cfg.stem_chs = stem_chs;
  cfg.stem_pool = stem_pool;
  cfg.num_features = num_features;
  cfg.act = act;
  cfg.attn = AttnCfg{attn};
  ByobSpec spec{name, cfg, 256, 0.9};
  spec.interpolation = "bicubic";
  std::string text = "ResNet (ByobNet, " + stem_type + " stem";
  if (!stem_pool.empty()) text += " + " + stem_pool;
  text += ", bottlenecks";
  if (!attn.empty()) text += " with " + attn + " attention";
  spec.description = text + ")";
  return spec;
}

// The CLIP ResNets (OpenAI's ModifiedResNet) and resnet50_mlp: a Stem of
// three 3x3 convs (32, 32, 64 times width_factor) and a 2x2 average pool,
// bottlenecks with average-pool shortcuts and anti-aliased 3x3 convs (stride
// 1, then a stride-sized average pool), and the head of `head_type`:
// AttentionPool2d (attn_abs; the default tag's classifier size
// `pretrained_classes`, head.proj), ClassifierHead (classifier, the *_gap
// models: weights without a classifier) or NormMlpClassifierHead (mlp).
ByobSpec clip_spec(const std::string& name, const std::vector<int64_t>& depths, double width_factor, int64_t img_size,
                   const std::string& head_type, int64_t pretrained_classes) {
  ByobCfg cfg;
  cfg.blocks =
      four_stages("bottle", depths, {256, 512, 1024, 2048}, {1, 2, 2, 2}, {0, 0, 0, 0}, {0.25, 0.25, 0.25, 0.25});
  cfg.stem_type = "";
  cfg.stem_chs_list = {32, 32, 64};
  cfg.stem_pool = "avg2";
  cfg.width_factor = width_factor;
  cfg.downsample = "avg";
  cfg.aa = "avg";
  cfg.head_type = head_type;
  ByobSpec spec{name, cfg, img_size, 0.9};
  spec.interpolation = "bicubic";
  spec.pretrained_num_classes = pretrained_classes;
  if (head_type == "mlp") {
    spec.cfg.head_hidden_size = 1024;
    spec.description = "ResNet-50 (ByobNet, CLIP-style avg-pool stem and anti-aliased bottlenecks, BatchNorm MLP head)";
    return spec;
  }
  spec.clip_norm = true;
  std::string text = "CLIP ResNet (ByobNet, ";
  text += std::to_string(cfg.blocks[0].d) + "-" + std::to_string(cfg.blocks[1].d) + "-" +
          std::to_string(cfg.blocks[2].d) + "-" + std::to_string(cfg.blocks[3].d);
  text += head_type == "attn_abs" ? " anti-aliased bottlenecks, attention-pool head)"
                                  : " anti-aliased bottlenecks, average-pool head)";
  spec.description = text;
  return spec;
}

std::vector<ByobSpec> byob_specs() {
  const std::vector<int64_t> da = {2, 4, 14, 1};
  const std::vector<int64_t> db = {4, 6, 16, 1};
  std::vector<ByobSpec> specs;
  specs.push_back({"gernet_l",
                   gernet_cfg({{"basic", 1, 128, 2, 0, 1.0},
                               {"basic", 2, 192, 2, 0, 1.0},
                               {"bottle", 6, 640, 2, 0, 0.25},
                               {"bottle", 5, 640, 2, 1, 3.0},
                               {"bottle", 4, 640, 1, 1, 3.0}},
                              32, 2560),
                   256});
  specs.push_back({"gernet_m", gernet_cfg({{"basic", 1, 128, 2, 0, 1.0},
                                           {"basic", 2, 192, 2, 0, 1.0},
                                           {"bottle", 6, 640, 2, 0, 0.25},
                                           {"bottle", 4, 640, 2, 1, 3.0},
                                           {"bottle", 1, 640, 1, 1, 3.0}},
                                          32, 2560)});
  specs.push_back({"gernet_s", gernet_cfg({{"basic", 1, 48, 2, 0, 1.0},
                                           {"basic", 3, 48, 2, 0, 1.0},
                                           {"bottle", 7, 384, 2, 0, 0.25},
                                           {"bottle", 2, 560, 2, 1, 3.0},
                                           {"bottle", 1, 256, 1, 1, 3.0}},
                                          13, 1920)});
  specs.push_back({"repvgg_a0", repvgg_cfg(da, {0.75, 0.75, 0.75, 2.5}, 48), 224, 0.875, true});
  specs.push_back({"repvgg_a1", repvgg_cfg(da, {1, 1, 1, 2.5}, 64), 224, 0.875, true});
  specs.push_back({"repvgg_a2", repvgg_cfg(da, {1.5, 1.5, 1.5, 2.75}, 64), 224, 0.875, true});
  specs.push_back({"repvgg_b0", repvgg_cfg(db, {1, 1, 1, 2.5}, 64), 224, 0.875, true});
  specs.push_back({"repvgg_b1", repvgg_cfg(db, {2, 2, 2, 4}, 64), 224, 0.875, true});
  specs.push_back({"repvgg_b1g4", repvgg_cfg(db, {2, 2, 2, 4}, 64, 4), 224, 0.875, true});
  specs.push_back({"repvgg_b2", repvgg_cfg(db, {2.5, 2.5, 2.5, 5}, 64), 224, 0.875, true});
  specs.push_back({"repvgg_b2g4", repvgg_cfg(db, {2.5, 2.5, 2.5, 5}, 64, 4), 224, 0.875, true});
  specs.push_back({"repvgg_b3", repvgg_cfg(db, {3, 3, 3, 5}, 64), 224, 0.875, true});
  specs.push_back({"repvgg_b3g4", repvgg_cfg(db, {3, 3, 3, 5}, 64, 4), 224, 0.875, true});
  specs.push_back({"repvgg_d2se", repvgg_cfg({8, 14, 24, 1}, {2.5, 2.5, 2.5, 5}, 64, 0, true), 320, 1.0, true});
  specs.push_back(
      {"mobilevit_xxs", mobilevit_cfg({16, 24, 48, 64, 80}, {64, 80, 96}, 320, 2.0), 256, 0.9, false, true});
  specs.push_back(
      {"mobilevit_xs", mobilevit_cfg({32, 48, 64, 80, 96}, {96, 120, 144}, 384, 4.0), 256, 0.9, false, true});
  specs.push_back(
      {"mobilevit_s", mobilevit_cfg({32, 64, 96, 128, 160}, {144, 192, 240}, 640, 4.0), 256, 0.9, false, true});
  const std::pair<const char*, double> v2[] = {
      {"mobilevitv2_050", 0.5}, {"mobilevitv2_075", 0.75}, {"mobilevitv2_100", 1.0}, {"mobilevitv2_125", 1.25},
      {"mobilevitv2_150", 1.5}, {"mobilevitv2_175", 1.75}, {"mobilevitv2_200", 2.0}};
  for (const auto& [name, multiplier] : v2)
    specs.push_back({name, mobilevitv2_cfg(multiplier), 256, 0.888, false, true});

  // MobileOne: stem and blocks MobileOneBlocks; s0 with four kxk branches, s4 with SE.
  const std::pair<const char*, std::vector<double>> mobileone[] = {{"mobileone_s0", {0.75, 1.0, 1.0, 2.0}},
                                                                   {"mobileone_s1", {1.5, 1.5, 2.0, 2.5}},
                                                                   {"mobileone_s2", {1.5, 2.0, 2.5, 4.0}},
                                                                   {"mobileone_s3", {2.0, 2.5, 3.0, 4.0}},
                                                                   {"mobileone_s4", {3.0, 3.5, 3.5, 4.0}}};
  for (const auto& [name, wf] : mobileone) {
    const bool s0 = std::string(name) == "mobileone_s0";
    const bool s4 = std::string(name) == "mobileone_s4";
    ByobSpec spec{
        name,
        mobileone_cfg(wf, s4 ? std::vector<int64_t>{0, 0, 5, 1} : std::vector<int64_t>{}, s0 ? 4 : 1, s0 ? 48 : 64),
        224, s0 ? 0.875 : 0.9};
    spec.description =
        std::string("MobileOne (ByobNet, MobileOne blocks, ") + (s0 ? "4 branches" : "1 branch") + (s4 ? ", SE)" : ")");
    specs.push_back(spec);
  }

  // RegNetZ.
  const std::vector<int64_t> s2222 = {2, 2, 2, 2};
  const std::vector<int64_t> s1222 = {1, 2, 2, 2};
  specs.push_back(regnetz_spec(
      "regnetz_b16", four_stages("bottle", {2, 6, 12, 2}, {48, 96, 192, 288}, s2222, {16, 16, 16, 16}, {3, 3, 3, 3}),
      32, "3x3", 1536, 224, 0.94));
  specs.push_back(regnetz_spec(
      "regnetz_c16", four_stages("bottle", {2, 6, 12, 2}, {48, 96, 192, 288}, s2222, {16, 16, 16, 16}, {4, 4, 4, 4}),
      32, "3x3", 1536, 256, 0.94));
  specs.push_back(regnetz_spec(
      "regnetz_d32", four_stages("bottle", {3, 6, 12, 3}, {64, 128, 256, 384}, s1222, {32, 32, 32, 32}, {4, 4, 4, 4}),
      64, "tiered", 1792, 256, 0.95));
  specs.push_back(regnetz_spec(
      "regnetz_d8", four_stages("bottle", {3, 6, 12, 3}, {64, 128, 256, 384}, s1222, {8, 8, 8, 8}, {4, 4, 4, 4}), 64,
      "tiered", 1792, 256, 0.94));
  specs.push_back(regnetz_spec(
      "regnetz_e8", four_stages("bottle", {3, 8, 16, 3}, {96, 192, 384, 512}, s1222, {8, 8, 8, 8}, {4, 4, 4, 4}), 64,
      "tiered", 2048, 256, 0.94));
  // The EvoNorm RegNetZs (timm's "experimental EvoNorm configs"): b16 / c16
  // with a 3x3 stem, d8 with a 'deep' stem (three 3x3 convs of 64); crop_pct 0.95.
  specs.push_back(
      regnetz_spec("regnetz_b16_evos",
                   four_stages("bottle", {2, 6, 12, 2}, {48, 96, 192, 288}, s2222, {16, 16, 16, 16}, {3, 3, 3, 3}), 32,
                   "3x3", 1536, 224, 0.95, "evos"));
  specs.push_back(
      regnetz_spec("regnetz_c16_evos",
                   four_stages("bottle", {2, 6, 12, 2}, {48, 96, 192, 288}, s2222, {16, 16, 16, 16}, {4, 4, 4, 4}), 32,
                   "3x3", 1536, 256, 0.95, "evos"));
  specs.push_back(regnetz_spec(
      "regnetz_d8_evos", four_stages("bottle", {3, 6, 12, 3}, {64, 128, 256, 384}, s1222, {8, 8, 8, 8}, {4, 4, 4, 4}),
      64, "deep", 1792, 256, 0.95, "evos"));

  // The ResNet-like models.
  const std::vector<double> br4 = {0.25, 0.25, 0.25, 0.25};
  ByobSpec r51 = resnet_spec(
      "resnet51q",
      four_stages("bottle", {2, 4, 6, 4}, {256, 512, 1536, 1536}, s1222, {32, 32, 32, 1}, {0.25, 0.25, 0.25, 1.0}),
      "quad2", 128, "", 2048, "");
  r51.interpolation = "bilinear";
  r51.crop_pct = 0.875;
  specs.push_back(r51);
  // resnet61q: an edge block first (its empty block_kwargs drop the model's extra_conv).
  std::vector<BlockCfg> q61 =
      four_stages("bottle", {1, 4, 6, 4}, {256, 512, 1536, 1536}, s1222, {0, 32, 32, 1}, {1.0, 0.25, 0.25, 1.0});
  q61[0].type = "edge";
  for (size_t i = 1; i < 4; ++i) q61[i].extra_conv = true;
  specs.push_back(resnet_spec("resnet61q", q61, "quad", 128, "", 2048, ""));
  const std::vector<BlockCfg> x26 =
      four_stages("bottle", {2, 2, 2, 2}, {256, 512, 1024, 2048}, s1222, {32, 32, 32, 32}, br4);
  specs.push_back(resnet_spec("resnext26ts", x26, "tiered", 64, "maxpool", 0, ""));
  specs.push_back(resnet_spec("gcresnext26ts", x26, "tiered", 64, "maxpool", 0, "gca"));
  specs.push_back(resnet_spec("seresnext26ts", x26, "tiered", 64, "maxpool", 0, "se"));
  specs.push_back(resnet_spec("eca_resnext26ts", x26, "tiered", 64, "maxpool", 0, "eca"));
  // bat_resnext26ts: BatNonLocalAttn (block size 8) in every bottleneck; maps
  // a multiple of 8 at every stage: inputs a multiple of 256 (timm's min_input_size).
  ByobSpec bat = resnet_spec("bat_resnext26ts", x26, "tiered", 64, "maxpool", 0, "bat");
  bat.cfg.attn.block_size = 8;
  bat.description = "ResNeXt (ByobNet, tiered stem + maxpool, bottlenecks with bilinear attention transform, BAT)";
  specs.push_back(bat);
  const std::vector<BlockCfg> r33 =
      four_stages("bottle", {2, 3, 3, 2}, {256, 512, 1536, 1536}, s1222, {0, 0, 0, 0}, br4);
  specs.push_back(resnet_spec("resnet32ts", r33, "tiered", 64, "", 0, ""));
  specs.push_back(resnet_spec("resnet33ts", r33, "tiered", 64, "", 1280, ""));
  specs.push_back(resnet_spec("gcresnet33ts", r33, "tiered", 64, "", 1280, "gca"));
  specs.push_back(resnet_spec("seresnet33ts", r33, "tiered", 64, "", 1280, "se"));
  specs.push_back(resnet_spec("eca_resnet33ts", r33, "tiered", 64, "", 1280, "eca"));
  specs.push_back(resnet_spec("gcresnet50t",
                              four_stages("bottle", {3, 4, 6, 3}, {256, 512, 1024, 2048}, s1222, {0, 0, 0, 0}, br4),
                              "tiered", 64, "", 0, "gca", "relu"));
  specs.push_back(resnet_spec("gcresnext50ts",
                              four_stages("bottle", {3, 4, 6, 3}, {256, 512, 1024, 2048}, s1222, {32, 32, 32, 32}, br4),
                              "tiered", 64, "maxpool", 0, "gca"));

  // test_byobnet: one block of each residual type, SE, average-pool shortcuts.
  ByobCfg test_cfg;
  test_cfg.blocks = {{"edge", 1, 32, 2, 0, 0.5},
                     {"dark", 1, 64, 2, 0, 0.5},
                     {"basic", 1, 128, 2, 32, 0.25},
                     {"bottle", 1, 256, 2, 64, 0.25}};
  test_cfg.stem_chs = 24;
  test_cfg.downsample = "avg";
  test_cfg.attn = AttnCfg{"se", 0.25, 8};
  ByobSpec test_spec{"test_byobnet", test_cfg, 160, 0.95};
  test_spec.interpolation = "bicubic";
  test_spec.description = "test ByobNet (edge, dark, basic, bottleneck blocks with SE, avg-pool shortcuts)";
  specs.push_back(test_spec);

  // The CLIP ResNets: attention-pool heads (the default tag's classifier
  // size: the CLIP embedding width), their *_gap forms, resnet50_mlp.
  struct ClipCfg {
    const char* name;
    std::vector<int64_t> depths;
    double width_factor;
    int64_t img_size;
    int64_t embed_classes;
  };
  const ClipCfg clip[] = {{"resnet50_clip", {3, 4, 6, 3}, 1.0, 224, 1024},
                          {"resnet101_clip", {3, 4, 23, 3}, 1.0, 224, 512},
                          {"resnet50x4_clip", {4, 6, 10, 6}, 1.25, 288, 640},
                          {"resnet50x16_clip", {6, 8, 18, 8}, 1.5, 384, 768},
                          {"resnet50x64_clip", {3, 15, 36, 10}, 2.0, 448, 1024}};
  for (const ClipCfg& c : clip) {
    specs.push_back(clip_spec(c.name, c.depths, c.width_factor, c.img_size, "attn_abs", c.embed_classes));
    specs.push_back(clip_spec(std::string(c.name) + "_gap", c.depths, c.width_factor, c.img_size, "classifier", 0));
  }
  specs.push_back(clip_spec("resnet50_mlp", {3, 4, 6, 3}, 1.0, 256, "mlp", 1000));
  return specs;
}

std::string describe(const ByobSpec& spec) {
  if (!spec.description.empty()) return spec.description;
  const ByobCfg& c = spec.cfg;
  if (spec.mobilevit && c.num_features == 0) {
    return "MobileViTv2 (ByobNet, inverted residuals + MobileViTv2 blocks, linear self-attention)";
  }
  if (spec.mobilevit) {
    std::string text = "MobileViT (ByobNet, inverted residuals + MobileViT blocks, ";
    text += std::to_string(c.num_features);
    text += " features)";
    return text;
  }
  std::string text = spec.repvgg ? "RepVGG (ByobNet, RepVGG blocks " : "GERNet (ByobNet, basic + bottleneck blocks ";
  for (size_t i = 0; i < c.blocks.size(); ++i) {
    if (i > 0) text += '-';
    text += std::to_string(c.blocks[i].d);
  }
  if (!c.attn.type.empty()) text += ", SE";
  text += ')';
  return text;
}

}  // namespace
}  // namespace timm::byobnet

TIMM_PLUGIN("byobnet") {
  for (const auto& spec : timm::byobnet::byob_specs()) {
    registrar.add_model(spec.name, timm::byobnet::describe(spec),
                        [spec](const timm::ModelArgs& args) -> timm::ModelPtr {
                          return std::make_shared<timm::byobnet::ByobNetImpl>(spec, args);
                        });
  }
}
