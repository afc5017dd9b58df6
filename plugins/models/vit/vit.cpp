// Vision Transformer (timm/models/vision_transformer.py) and DeiT
// (timm/models/deit.py), with timm's module names so state_dict keys equal
// timm's:
// - vit_{tiny,small,base,large,huge}_patch{8,14,16,32}_{224,384} as timm
//   registers them (a default tag without a classifier, e.g. DINO's or
//   orig_in21k's, is a pretrained cfg with num_classes 0, as timm);
// - the class-token-free average-pool ViTs: vit_*_gap_* (fc_norm off: the
//   final norm before the pool) and the register-token ViTs vit_*_reg{1,4}_gap_*
//   (reg_token, and for most no_embed_class: pos_embed covers the patches only);
// - deit_{tiny,small,base}_patch16_224, deit_base_patch16_384: the same
//   VisionTransformer with DeiT's pretrained cfg (ImageNet mean/std);
// - deit_*_distilled_*: VisionTransformerDistilled, a second prefix token
//   (dist_token) and head (head_dist); the output is the mean of both heads
//   (timm's default, distilled_training off);
// - deit3_*: LayerScale (init 1e-6) and no_embed_class.
// - vit_giant_patch14_224 / vit_gigantic_patch14_224 (ViT-g/14, ViT-G/14,
//   about 1.0B / 1.8B parameters, untrained in timm) and
//   vit_giant_patch16_gap_224 (no class token, average pool, fc_norm off,
//   qkv bias, no LayerScale; timm's I-JEPA in22k_ijepa cfg: ImageNet
//   mean/std, no classifier; its weights are a URL, not on the Hub);
// - eva_large_patch14_{196,336} (EVA-L, MIM-pretrained towards EVA-CLIP,
//   ~304M parameters): a plain ViT-L/14 with a class token, average pool and
//   fc_norm; OpenAI CLIP mean/std, crop_pct 1.0 (squash at 336), as timm
//   registers them in vision_transformer.py (not its Eva).
// - vit_huge_patch14_gap_224 / vit_huge_patch16_gap_448 (I-JEPA ViT-H: no
//   class token, average pool, fc_norm off; in1k_ijepa cfg, a URL);
// - the CLIP image towers vit_*_clip_* and vit_*_clip_quickgelu_* (timm's
//   pre_norm: norm_pre after pos_embed and a patch conv without bias;
//   LayerNorm eps 1e-5 in every norm; QuickGELU MLPs for the quickgelu
//   names, whose hf_hub_id is the plain name's, as timm);
// - DINOv2 vit_{small,base,large,giant}_patch14_[reg4_]dinov2 (LayerScale
//   1e-5, 518 px; reg4: four register tokens beside the class token,
//   no_embed_class; giant: SwiGLUPacked MLP, timm's GluMlp with SiLU);
// - the SigLIP image towers vit_{base,large,so400m,giantopt}_patch*_siglip_*
//   (no class token; global_pool 'map': timm's AttentionPoolLatent head,
//   attn_pool, the SDK's layers::AttentionPoolLatent) and
//   vit_*_siglip_gap_* (average pool, fc_norm off); GELU (tanh) MLPs where
//   timm sets it; vit_so400m_patch14_siglip[_gap]_384 take 384 px images and
//   read the 378 px that the 27 x 27 patches cover, as timm's conv.
// Not here: blocks or attention of other kinds (rope, diff attention,
// parallel blocks), the 'prr' pool, TIPS / RADIO / NaFlex / EVA-02 variants
// (timm's eva.py: the eva plugin).
//
// Supported: num_classes (0: pooled features come out), in_chans, drop_rate
// (head dropout), drop_path_rate (timm's linear per-block rule), global_pool
// 'token' (the default with a class token), 'avg', 'avgmax', 'max' (these
// three move the final norm after the pool, timm's fc_norm, unless the model
// sets fc_norm off), '' (no pooling, tokens come out) or 'map' (the attention
// pool, for the models built with it only: timm cannot add one to another
// model; a 'map' model given another pool is built without attn_pool, as
// timm's constructor).
// --model-kwargs: init_values=<float> (LayerScale ls1/ls2 in every block; 0
// removes it), qk_norm=true (LayerNorm q_norm/k_norm in attention, the
// model's eps), img_size / embed_dim / depth / num_heads=<int> (timm's
// keywords: a smaller model of the same kind),
// dynamic_img_size=true (any input size a multiple of the patch size:
// pos_embed resampled per forward, bicubic with antialias, as timm's
// _pos_embed), dynamic_img_pad=true (inputs padded with zeros up to a
// multiple of the patch size), as timm's kwargs. Without dynamic_img_size the
// input must be the model's image size.
// Feature extraction as timm's: feature_info and forward_intermediates, one
// level per block (NCHW maps over the input's patch grid, or NLC tokens).
#include <algorithm>
#include <array>
#include <cstdint>
#include <exception>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>

#include "naflexvit.hpp"
#include "timm/base/error.hpp"
#include "timm/layers/attention.hpp"
#include "timm/layers/attention_pool_latent.hpp"
#include "timm/layers/drop_path.hpp"
#include "timm/layers/layer_scale.hpp"
#include "timm/layers/linear.hpp"
#include "timm/layers/mlp.hpp"
#include "timm/layers/norm.hpp"
#include "timm/layers/patch_embed.hpp"
#include "timm/layers/pos_embed.hpp"
#include "timm/layers/weight_init.hpp"
#include "timm/models/grad_checkpoint.hpp"
#include "timm/models/model.hpp"
#include "timm/plugin/plugin.hpp"
#include "vit_block.hpp"

namespace timm::vit {
namespace {

namespace nn = torch::nn;

// timm 1.0.31's default pretrained tag of each model (the first tag of its
// default_cfgs); a model without one has no pretrained weights in timm.
const std::map<std::string, std::string> kDefaultTags = {
    {"deit3_base_patch16_224", "fb_in1k"},
    {"deit3_base_patch16_384", "fb_in1k"},
    {"deit3_huge_patch14_224", "fb_in1k"},
    {"deit3_large_patch16_224", "fb_in1k"},
    {"deit3_large_patch16_384", "fb_in1k"},
    {"deit3_medium_patch16_224", "fb_in1k"},
    {"deit3_small_patch16_224", "fb_in1k"},
    {"deit3_small_patch16_384", "fb_in1k"},
    {"deit_base_distilled_patch16_224", "fb_in1k"},
    {"deit_base_distilled_patch16_384", "fb_in1k"},
    {"deit_base_patch16_224", "fb_in1k"},
    {"deit_base_patch16_384", "fb_in1k"},
    {"deit_small_distilled_patch16_224", "fb_in1k"},
    {"deit_small_patch16_224", "fb_in1k"},
    {"deit_tiny_distilled_patch16_224", "fb_in1k"},
    {"deit_tiny_patch16_224", "fb_in1k"},
    {"eva_large_patch14_196", "in22k_ft_in22k_in1k"},
    {"eva_large_patch14_336", "in22k_ft_in22k_in1k"},
    {"vit_base_patch14_dinov2", "lvd142m"},
    {"vit_base_patch14_reg4_dinov2", "lvd142m"},
    {"vit_base_patch16_224", "augreg2_in21k_ft_in1k"},
    {"vit_base_patch16_384", "augreg_in21k_ft_in1k"},
    {"vit_base_patch16_clip_224", "laion2b_ft_in12k_in1k"},
    {"vit_base_patch16_clip_384", "laion2b_ft_in12k_in1k"},
    {"vit_base_patch16_clip_quickgelu_224", "metaclip_2pt5b"},
    {"vit_base_patch16_plus_clip_240", "laion400m_e32"},
    {"vit_base_patch16_siglip_224", "v2_webli"},
    {"vit_base_patch16_siglip_256", "v2_webli"},
    {"vit_base_patch16_siglip_384", "v2_webli"},
    {"vit_base_patch16_siglip_512", "v2_webli"},
    {"vit_base_patch16_siglip_gap_224", "v2_webli"},
    {"vit_base_patch16_siglip_gap_256", "v2_webli"},
    {"vit_base_patch16_siglip_gap_384", "v2_webli"},
    {"vit_base_patch16_siglip_gap_512", "v2_webli"},
    {"vit_base_patch32_224", "augreg_in21k_ft_in1k"},
    {"vit_base_patch32_384", "augreg_in21k_ft_in1k"},
    {"vit_base_patch32_clip_224", "laion2b_ft_in12k_in1k"},
    {"vit_base_patch32_clip_256", "datacompxl"},
    {"vit_base_patch32_clip_384", "laion2b_ft_in12k_in1k"},
    {"vit_base_patch32_clip_448", "laion2b_ft_in12k_in1k"},
    {"vit_base_patch32_clip_quickgelu_224", "laion400m_e32"},
    {"vit_base_patch32_siglip_256", "v2_webli"},
    {"vit_base_patch32_siglip_gap_256", "v2_webli"},
    {"vit_base_patch8_224", "augreg2_in21k_ft_in1k"},
    {"vit_betwixt_patch16_reg1_gap_256", "sbb_in1k"},
    {"vit_betwixt_patch16_reg4_gap_256", "sbb2_e200_in12k_ft_in1k"},
    {"vit_betwixt_patch16_reg4_gap_384", "sbb2_e200_in12k_ft_in1k"},
    {"vit_betwixt_patch32_clip_224", "tinyclip_laion400m"},
    {"vit_giant_patch14_clip_224", "laion2b"},
    {"vit_giant_patch14_dinov2", "lvd142m"},
    {"vit_giant_patch14_reg4_dinov2", "lvd142m"},
    {"vit_giantopt_patch16_siglip_256", "v2_webli"},
    {"vit_giantopt_patch16_siglip_384", "v2_webli"},
    {"vit_giantopt_patch16_siglip_gap_256", "v2_webli"},
    {"vit_giantopt_patch16_siglip_gap_384", "v2_webli"},
    {"vit_gigantic_patch14_clip_224", "laion2b"},
    {"vit_gigantic_patch14_clip_378", "metaclip2_worldwide"},
    {"vit_gigantic_patch14_clip_quickgelu_224", "metaclip_2pt5b"},
    {"vit_huge_patch14_224", "orig_in21k"},
    {"vit_huge_patch14_clip_224", "laion2b_ft_in12k_in1k"},
    {"vit_huge_patch14_clip_336", "laion2b_ft_in12k_in1k"},
    {"vit_huge_patch14_clip_378", "dfn5b"},
    {"vit_huge_patch14_clip_quickgelu_224", "dfn5b"},
    {"vit_huge_patch14_clip_quickgelu_378", "dfn5b"},
    {"vit_large_patch14_clip_224", "laion2b_ft_in12k_in1k"},
    {"vit_large_patch14_clip_336", "laion2b_ft_in12k_in1k"},
    {"vit_large_patch14_clip_quickgelu_224", "dfn2b"},
    {"vit_large_patch14_clip_quickgelu_336", "openai"},
    {"vit_large_patch14_dinov2", "lvd142m"},
    {"vit_large_patch14_reg4_dinov2", "lvd142m"},
    {"vit_large_patch16_224", "augreg_in21k_ft_in1k"},
    {"vit_large_patch16_384", "augreg_in21k_ft_in1k"},
    {"vit_large_patch16_siglip_256", "v2_webli"},
    {"vit_large_patch16_siglip_384", "v2_webli"},
    {"vit_large_patch16_siglip_512", "v2_webli"},
    {"vit_large_patch16_siglip_gap_256", "v2_webli"},
    {"vit_large_patch16_siglip_gap_384", "v2_webli"},
    {"vit_large_patch16_siglip_gap_512", "v2_webli"},
    {"vit_large_patch32_224", "orig_in21k"},
    {"vit_large_patch32_384", "orig_in21k_ft_in1k"},
    {"vit_little_patch16_reg1_gap_256", "sbb_in12k_ft_in1k"},
    {"vit_little_patch16_reg4_gap_256", "sbb_in1k"},
    {"vit_medium_patch16_clip_224", "tinyclip_yfcc15m"},
    {"vit_medium_patch16_gap_240", "sw_in12k"},
    {"vit_medium_patch16_gap_256", "sw_in12k_ft_in1k"},
    {"vit_medium_patch16_gap_384", "sw_in12k_ft_in1k"},
    {"vit_medium_patch16_reg1_gap_256", "sbb_in1k"},
    {"vit_medium_patch16_reg4_gap_256", "sbb_in12k_ft_in1k"},
    {"vit_medium_patch32_clip_224", "tinyclip_laion400m"},
    {"vit_mediumd_patch16_reg4_gap_256", "sbb2_e200_in12k_ft_in1k"},
    {"vit_mediumd_patch16_reg4_gap_384", "sbb2_e200_in12k_ft_in1k"},
    {"vit_small_patch14_dinov2", "lvd142m"},
    {"vit_small_patch14_reg4_dinov2", "lvd142m"},
    {"vit_small_patch16_224", "augreg_in21k_ft_in1k"},
    {"vit_small_patch16_384", "augreg_in21k_ft_in1k"},
    {"vit_small_patch32_224", "augreg_in21k_ft_in1k"},
    {"vit_small_patch32_384", "augreg_in21k_ft_in1k"},
    {"vit_small_patch8_224", "dino"},
    {"vit_so150m2_patch16_reg1_gap_256", "sbb_e200_in12k_ft_in1k"},
    {"vit_so150m2_patch16_reg1_gap_384", "sbb_e200_in12k_ft_in1k"},
    {"vit_so150m2_patch16_reg1_gap_448", "sbb_e200_in12k_ft_in1k"},
    {"vit_so150m_patch16_reg4_gap_256", "sbb_e250_in12k_ft_in1k"},
    {"vit_so150m_patch16_reg4_gap_384", "sbb_e250_in12k_ft_in1k"},
    {"vit_so400m_patch14_siglip_224", "v2_webli"},
    {"vit_so400m_patch14_siglip_378", "v2_webli"},
    {"vit_so400m_patch14_siglip_384", "webli"},
    {"vit_so400m_patch14_siglip_gap_224", "v2_webli"},
    {"vit_so400m_patch14_siglip_gap_378", "v2_webli"},
    {"vit_so400m_patch14_siglip_gap_384", "webli"},
    {"vit_so400m_patch14_siglip_gap_448", "pali_mix"},
    {"vit_so400m_patch14_siglip_gap_896", "pali_pt"},
    {"vit_so400m_patch16_siglip_256", "v2_webli"},
    {"vit_so400m_patch16_siglip_384", "v2_webli"},
    {"vit_so400m_patch16_siglip_512", "v2_webli"},
    {"vit_so400m_patch16_siglip_gap_256", "v2_webli"},
    {"vit_so400m_patch16_siglip_gap_384", "v2_webli"},
    {"vit_so400m_patch16_siglip_gap_512", "v2_webli"},
    {"vit_tiny_patch16_224", "augreg_in21k_ft_in1k"},
    {"vit_tiny_patch16_384", "augreg_in21k_ft_in1k"},
    {"vit_wee_patch16_reg1_gap_256", "sbb_in1k"},
    {"vit_xsmall_patch16_clip_224", "tinyclip_yfcc15m"}};

// The hf_hub_id of a name's default tag: a quickgelu CLIP tower's weights are
// those of the name without "_quickgelu" (timm's
// 'timm/vit_base_patch16_clip_224.metaclip_2pt5b' for
// vit_base_patch16_clip_quickgelu_224); "" without a tag.
std::string hub_id(const std::string& name) {
  std::string hub_name = name;
  const std::string quickgelu = "_quickgelu";
  if (const auto pos = hub_name.find(quickgelu); pos != std::string::npos) hub_name.erase(pos, quickgelu.size());
  const auto it = kDefaultTags.find(name);
  return it == kDefaultTags.end() ? "" : "timm/" + hub_name + "." + it->second;
}

// One registered architecture: timm's VisionTransformer arguments for the name.
struct VitSpec {
  std::string name;
  int64_t img_size = 224;
  int64_t patch_size = 16;
  int64_t embed_dim = 768;
  int64_t depth = 12;
  int64_t num_heads = 12;
  double mlp_ratio = 4.0;
  PretrainedCfg cfg;
  bool distilled = false;  // DeiT's VisionTransformerDistilled
  bool qkv_bias = true;
  std::optional<double> init_values;  // LayerScale
  bool class_token = true;
  int64_t reg_tokens = 0;
  bool no_embed_class = false;  // pos_embed covers the patch tokens only
  std::string global_pool = "token";
  std::optional<bool> fc_norm;  // unset: on for the avg / max pools
  bool pre_norm = false;        // CLIP: norm_pre after pos_embed, and a patch conv without bias
  double norm_eps = 1e-6;       // every LayerNorm (timm's norm_layer)
  std::string act_layer = "gelu";
  bool swiglu_packed = false;  // DINOv2-g's SwiGLUPacked MLP
};

const std::vector<std::string> kPoolTypes = {"token", "avg", "avgmax", "max", "", "map"};

bool is_reducing_pool(const std::string& pool) { return pool == "avg" || pool == "avgmax" || pool == "max"; }

class VisionTransformerImpl : public ClassifierImpl {
 public:
  VisionTransformerImpl(const VitSpec& spec, const ModelArgs& args)
      : cfg_(spec.cfg),
        num_classes_(args.num_classes),
        drop_rate_(args.drop_rate),
        global_pool_(args.global_pool.value_or(spec.global_pool)),
        distilled_(spec.distilled),
        no_embed_class_(spec.no_embed_class) {
    cfg_.hf_hub_id = hub_id(spec.name);
    validate(spec, args);
    // timm: keyword arguments override the model's own (dict(model_args, **kwargs)).
    const int64_t img_size = model_kwarg_positive_int(spec.name, args, "img_size").value_or(spec.img_size);
    const int64_t dim = model_kwarg_positive_int(spec.name, args, "embed_dim").value_or(spec.embed_dim);
    const int64_t depth = model_kwarg_positive_int(spec.name, args, "depth").value_or(spec.depth);
    const int64_t num_heads = model_kwarg_positive_int(spec.name, args, "num_heads").value_or(spec.num_heads);
    const bool dynamic_img_pad = model_kwarg_bool(spec.name, args, "dynamic_img_pad").value_or(false);
    // PatchEmbed's rule, checked here too to name the model.
    if (img_size < spec.patch_size || (dynamic_img_pad && img_size % spec.patch_size != 0)) {
      throw UsageError(spec.name + ": img_size=" + std::to_string(img_size) + ": expected " +
                       (dynamic_img_pad ? "a multiple of" : "at least") + " the patch size " +
                       std::to_string(spec.patch_size));
    }
    if (dim % num_heads != 0) {
      throw UsageError(spec.name + ": num_heads=" + std::to_string(num_heads) +
                       " must divide embed_dim=" + std::to_string(dim));
    }
    num_prefix_tokens_ = (spec.class_token ? 1 : 0) + spec.reg_tokens + (distilled_ ? 1 : 0);
    dynamic_img_size_ = model_kwarg_bool(spec.name, args, "dynamic_img_size").value_or(false);
    auto embed = layers::PatchEmbedOptions(img_size, spec.patch_size, args.in_chans, dim)
                     .bias(!spec.pre_norm)  // timm: no patch bias before a pre-norm (CLIP)
                     .dynamic_img_pad(dynamic_img_pad);
    // timm: the tokens stay a grid (NHWC) until pos_embed is resampled to it.
    if (dynamic_img_size_) embed.strict_img_size(false).output_fmt("NHWC");
    patch_embed = register_module("patch_embed", layers::PatchEmbed(embed));
    // timm's parameter order: cls_token, reg_token, pos_embed, then (distilled) dist_token.
    if (spec.class_token) cls_token = register_parameter("cls_token", at::zeros({1, 1, dim}));
    if (spec.reg_tokens > 0) reg_token = register_parameter("reg_token", at::zeros({1, spec.reg_tokens, dim}));
    const int64_t embed_len = patch_embed->num_patches() + (no_embed_class_ ? 0 : num_prefix_tokens_);
    pos_embed = register_parameter("pos_embed", at::zeros({1, embed_len, dim}));
    if (distilled_) dist_token = register_parameter("dist_token", at::zeros({1, 1, dim}));
    const auto norm_options = layers::LayerNormOptions(dim).eps(spec.norm_eps);
    if (spec.pre_norm) norm_pre = register_module("norm_pre", layers::LayerNorm(norm_options));

    BlockArgs block;
    block.dim = dim;
    block.num_heads = num_heads;
    block.mlp_ratio = spec.mlp_ratio;
    block.qkv_bias = spec.qkv_bias;
    block.qk_norm = model_kwarg_bool(spec.name, args, "qk_norm").value_or(block.qk_norm);
    block.norm_eps = spec.norm_eps;
    block.act_layer = spec.act_layer;
    block.swiglu_packed = spec.swiglu_packed;
    // The keyword overrides the model's own (timm: dict(model_args, **kwargs)).
    block.init_values = model_kwarg_double(spec.name, args, "init_values");
    if (!block.init_values) block.init_values = spec.init_values;
    if (block.init_values == 0.0) block.init_values.reset();  // timm: falsy init_values means no LayerScale
    blocks = register_module("blocks", nn::Sequential());
    const auto dpr = layers::drop_path_rates(args.drop_path_rate.value_or(0.0), depth);
    for (int64_t i = 0; i < depth; ++i) {
      block.drop_path = dpr[i];
      blocks->push_back(Block(block));
    }
    // timm's fc_norm: with a reducing pool the final norm comes after it,
    // unless the model turns that off. timm's order: norm, attn_pool, fc_norm, head.
    const bool use_fc_norm = spec.fc_norm.value_or(is_reducing_pool(global_pool_));
    if (!use_fc_norm) norm = register_module("norm", layers::LayerNorm(norm_options));
    // 'map': timm's AttentionPoolLatent over the patch tokens, with the
    // model's heads, mlp_ratio, norm (eps) and MLP activation.
    if (global_pool_ == "map") {
      attn_pool = register_module("attn_pool", layers::AttentionPoolLatent(layers::AttentionPoolLatentOptions(dim)
                                                                               .num_heads(num_heads)
                                                                               .mlp_ratio(spec.mlp_ratio)
                                                                               .norm_layer("layernorm")
                                                                               .norm_eps(spec.norm_eps)
                                                                               .act_layer(spec.act_layer)));
    }
    if (use_fc_norm) fc_norm = register_module("fc_norm", layers::LayerNorm(norm_options));
    if (num_classes_ > 0) {
      head = register_module("head", layers::Linear(dim, num_classes_));
      if (distilled_) head_dist = register_module("head_dist", layers::Linear(dim, num_classes_));
    }
    init_weights();
  }

  // timm's forward_features: patch embedding, prefix tokens + pos_embed,
  // blocks, the final norm (an Identity with fc_norm): (N, prefix + patches, dim).
  // With grad checkpointing each block is checkpointed (timm's checkpoint_seq).
  at::Tensor forward_features(at::Tensor input) override {
    at::Tensor x = embed(input);
    x = grad_checkpointing_ ? checkpoint_seq(sequence_modules(blocks), x) : blocks->forward(x);
    return final_norm(x);
  }

  // timm's feature levels: every block, at the patch size's stride.
  std::vector<FeatureInfo> feature_info() const override {
    std::vector<FeatureInfo> info;
    for (size_t i = 0; i < blocks->size(); ++i) {
      info.push_back(
          {patch_embed->options.embed_dim(), patch_embed->options.patch_size(), "blocks." + std::to_string(i)});
    }
    return info;
  }

  // timm's forward_intermediates: the outputs of the blocks taken (with norm
  // through the final norm, which fc_norm models lack, as timm's Identity),
  // without the prefix tokens; the final features are the final norm of the
  // last block run. Each block is checkpointed with grad checkpointing, as
  // in forward_features.
  Intermediates forward_intermediates(at::Tensor input,
                                      const IntermediatesOptions& options = IntermediatesOptions()) override {
    check_output_fmt(describe_model(*this), options.output_fmt(), {"NCHW", "NLC"});
    const int64_t depth = static_cast<int64_t>(blocks->size());
    const auto [take_indices, max_index] = feature_take_indices(depth, options.indices());
    const std::vector<bool> take = take_mask(depth, take_indices);
    Intermediates out;
    at::Tensor x = embed(input);  // checks the input's size before the grid is read from it
    // The patch grid of this input (of its padded size with dynamic_img_pad).
    const auto grid = patch_embed->dynamic_feat_size(input.size(2), input.size(3));
    std::vector<nn::AnyModule> block_modules = sequence_modules(blocks);
    const int64_t blocks_run = options.stop_early() ? max_index + 1 : depth;
    for (int64_t i = 0; i < blocks_run; ++i) {
      nn::AnyModule& block = block_modules[static_cast<size_t>(i)];
      x = grad_checkpointing_ ? checkpoint(block, x) : block.forward(x);
      if (take[static_cast<size_t>(i)]) {
        out.intermediates.push_back(patch_tokens(options.norm() ? final_norm(x) : x, grid, options.output_fmt()));
      }
    }
    if (!options.intermediates_only()) out.final = final_norm(x);
    return out;
  }

  // timm's forward_head: pool, fc_norm, head_drop, then head unless pre_logits.
  // Distilled (VisionTransformerDistilled.forward_head): each head reads its
  // own token after head_drop; pre_logits gives the mean of the two tokens,
  // else the mean of both heads' logits. timm returns the pair of logits only
  // in training with distilled_training, which it sets through
  // set_distilled_training(), not a model argument: off here, as timm's default.
  at::Tensor forward_head(at::Tensor x, bool pre_logits = false) override {
    if (distilled_) {
      const at::Tensor cls = head_dropout(x.select(1, 0));
      const at::Tensor dist = head_dropout(x.select(1, 1));
      if (pre_logits || !head) return (cls + dist) / 2;
      return (head(cls) + head_dist(dist)) / 2;
    }
    at::Tensor y = pool(x);
    if (fc_norm) y = fc_norm(y);
    y = head_dropout(y);
    return pre_logits || !head ? y : head(y);
  }

  at::Tensor forward(at::Tensor x) override { return forward_head(forward_features(x)); }
  // timm also passes it to a patch_embed that has set_grad_checkpointing
  // (hybrid embeddings); PatchEmbed has none.
  void set_grad_checkpointing(bool enable) override { grad_checkpointing_ = enable; }

  bool has_distillation_head() const override { return distilled_ && head; }
  // timm's forward_head under set_distilled_training(True) in training: the
  // two heads' logits, the class token's dropout drawn first.
  std::pair<at::Tensor, at::Tensor> forward_distilled(at::Tensor input) override {
    if (!has_distillation_head()) return ClassifierImpl::forward_distilled(input);
    const at::Tensor x = forward_features(input);
    at::Tensor cls = head(head_dropout(x.select(1, 0)));
    at::Tensor dist = head_dist(head_dropout(x.select(1, 1)));
    return {std::move(cls), std::move(dist)};
  }

  int64_t num_classes() const override { return num_classes_; }
  const PretrainedCfg& pretrained_cfg() const override { return cfg_; }
  std::vector<std::string> no_weight_decay() const override {
    return {"pos_embed", "cls_token", "reg_token", "dist_token"};
  }
  GroupMatcher group_matcher(bool /*coarse*/) const override {
    const std::string stem = distilled_ ? R"(^cls_token|pos_embed|patch_embed|dist_token)"
                                        : R"(^cls_token|reg_token|pos_embed|patch_embed|norm_pre)";
    return {{"stem", {{stem, std::nullopt}}},
            {"blocks", {{R"(^blocks\.(\d+))", std::nullopt}, {R"(^norm)", std::vector<double>{99999}}}}};
  }

  layers::PatchEmbed patch_embed{nullptr};
  layers::LayerNorm norm_pre{nullptr};                     // null without pre_norm
  at::Tensor cls_token, reg_token, pos_embed, dist_token;  // undefined when the model has none
  nn::Sequential blocks{nullptr};
  layers::LayerNorm norm{nullptr};                 // null with fc_norm
  layers::AttentionPoolLatent attn_pool{nullptr};  // global_pool 'map' only
  layers::LayerNorm fc_norm{nullptr};              // null unless an avg/max pool
  layers::Linear head{nullptr};                    // null when num_classes is 0
  layers::Linear head_dist{nullptr};

 private:
  void validate(const VitSpec& spec, const ModelArgs& args) const {
    const std::string& name = spec.name;
    validate_model_args(name, args,
                        {"init_values", "qk_norm", "dynamic_img_size", "dynamic_img_pad", "img_size", "embed_dim",
                         "depth", "num_heads"});
    if (std::find(kPoolTypes.begin(), kPoolTypes.end(), global_pool_) == kPoolTypes.end()) {
      throw UsageError("global_pool " + in_quotes(global_pool_) + ": " + name +
                       " supports 'token', 'avg', 'avgmax', 'max', '' (none)" +
                       (spec.global_pool == "map" ? " or 'map'" : ""));
    }
    // timm's reset_classifier cannot add an attention pool to a model built
    // without one: 'map' only for the models timm registers with it.
    if (global_pool_ == "map" && spec.global_pool != "map") {
      throw UsageError("global_pool 'map': " + name +
                       " has no attention pool (attn_pool); use 'token', 'avg', 'avgmax', 'max' or '' (none)");
    }
    if (distilled_ && global_pool_ != "token") {
      throw UsageError("global_pool " + in_quotes(global_pool_) + ": " + name +
                       " reads the class and distillation tokens, only 'token' is supported");
    }
    if (!spec.class_token && global_pool_ == "token") {
      throw UsageError("global_pool 'token': " + name + " has no class token; use 'avg', 'avgmax', 'max' or '' (none)");
    }
  }

  // timm's patch_embed, _pos_embed, then norm_pre (an Identity without
  // pre_norm; patch_drop is one here): the token sequence the blocks take.
  at::Tensor embed(const at::Tensor& input) {
    at::Tensor x = add_pos_embed(patch_embed(input));
    return norm_pre ? norm_pre(x) : x;
  }

  // timm's self.norm, an Identity with fc_norm.
  at::Tensor final_norm(const at::Tensor& x) { return norm ? norm(x) : x; }

  // An intermediate as timm returns it: the prefix tokens dropped, then for
  // "NCHW" the (N, dim, H, W) map over the patch grid.
  at::Tensor patch_tokens(const at::Tensor& x, const std::array<int64_t, 2>& grid,
                          const std::string& output_fmt) const {
    const at::Tensor patches = x.slice(1, num_prefix_tokens_);
    if (output_fmt == "NLC") return patches;
    return patches.reshape({x.size(0), grid[0], grid[1], -1}).permute({0, 3, 1, 2}).contiguous();
  }

  // timm's _pos_embed: the prefix tokens (class, register, distillation) and
  // the position embedding, added before the concatenation with
  // no_embed_class (pos_embed covers the patches only), after it otherwise.
  // With dynamic_img_size the (N, H, W, C) grid gets pos_embed resampled from
  // the model's grid to H x W.
  at::Tensor add_pos_embed(at::Tensor x) {
    at::Tensor pos = pos_embed;
    if (dynamic_img_size_) {
      const int64_t grid = patch_embed->grid_size();
      pos = layers::resample_abs_pos_embed(pos_embed, {x.size(1), x.size(2)}, std::array<int64_t, 2>{grid, grid},
                                           no_embed_class_ ? 0 : num_prefix_tokens_);
      x = x.reshape({x.size(0), -1, x.size(3)});
    }
    const int64_t batch = x.size(0);
    std::vector<at::Tensor> tokens;
    for (const at::Tensor* token : {&cls_token, &reg_token, &dist_token}) {
      if (token->defined()) tokens.push_back(token->expand({batch, -1, -1}));
    }
    if (no_embed_class_) {
      x = x + pos;
      if (tokens.empty()) return x;
      tokens.push_back(x);
      return at::cat(tokens, 1);
    }
    tokens.push_back(x);
    return at::cat(tokens, 1) + pos;
  }

  // timm's pool: the attention pool over the patch tokens ('map'), else
  // global_pool_nlc: the class token, or a reduction over the patch tokens.
  at::Tensor pool(const at::Tensor& x) {
    if (attn_pool) return attn_pool(x.slice(1, num_prefix_tokens_));
    return global_pool_nlc(x, global_pool_, num_prefix_tokens_);
  }

  at::Tensor head_dropout(const at::Tensor& x) {
    return drop_rate_ > 0.0 ? at::dropout(x, drop_rate_, is_training()) : x;
  }

  // timm's init_weights (mode ''): pos_embed trunc_normal(.02), cls_token and
  // reg_token normal(1e-6), dist_token trunc_normal(.02); every Linear
  // trunc_normal(.02) with zero bias, then (timm's GluMlp.init_weights,
  // called after its children) the second half of a GluMlp's fc1 normal(1e-6)
  // with bias one. The patch conv keeps the Conv2d default init, the
  // LayerNorms ones / zeros and LayerScale init_values, as timm
  // (needs_reset=False leaves them).
  void init_weights() {
    c10::NoGradGuard no_grad;
    layers::trunc_normal_(pos_embed, 0.0, 0.02);
    if (cls_token.defined()) cls_token.normal_(0.0, 1e-6);
    if (reg_token.defined()) reg_token.normal_(0.0, 1e-6);
    if (distilled_) layers::trunc_normal_(dist_token, 0.0, 0.02);
    for (auto& module : modules(/*include_self=*/false)) {
      if (auto* linear = module->as<nn::Linear>()) {
        layers::trunc_normal_(linear->weight, 0.0, 0.02);
        if (linear->bias.defined()) linear->bias.zero_();
      }
    }
    for (auto& module : modules(/*include_self=*/false)) {
      if (auto* glu = module->as<layers::GluMlp>()) {
        const int64_t half = glu->fc1->weight.size(0) / 2;
        if (glu->fc1->bias.defined()) glu->fc1->bias.slice(0, half).fill_(1.0);
        glu->fc1->weight.slice(0, half).normal_(0.0, 1e-6);
      }
    }
    // timm's AttentionPoolLatent.init_weights, called after its children's
    // Linears: latent trunc_normal_tf_(std dim^-0.5).
    if (attn_pool) attn_pool->init_weights();
  }

  PretrainedCfg cfg_;
  int64_t num_classes_;
  double drop_rate_;
  std::string global_pool_;
  bool distilled_;
  bool no_embed_class_;
  bool dynamic_img_size_ = false;
  int64_t num_prefix_tokens_ = 1;
  bool grad_checkpointing_ = false;
};

// timm's default cfg of each name (its default tag): augreg ViTs use mean/std
// 0.5 (inception), DeiT ImageNet's; crop_pct 0.9 at 224, 1.0 at 384 unless
// given; bicubic. `num_classes` is the default tag's classifier size (0 for
// weights without one, e.g. orig_in21k, DINO), which is also timm's default
// num_classes for the model.
PretrainedCfg vit_cfg(int64_t size, bool imagenet_norm, std::optional<double> crop_pct = std::nullopt,
                      int64_t num_classes = 1000) {
  PretrainedCfg cfg;
  cfg.input_size = {3, size, size};
  cfg.interpolation = "bicubic";
  cfg.crop_pct = crop_pct.value_or(size == 384 ? 1.0 : 0.9);
  cfg.crop_mode = "center";
  if (!imagenet_norm) {
    cfg.mean = {0.5, 0.5, 0.5};
    cfg.std = {0.5, 0.5, 0.5};
  }
  cfg.first_conv = "patch_embed.proj";
  cfg.classifier = "head";  // timm: ('head', 'head_dist') for the distilled DeiTs
  cfg.num_classes = num_classes;
  return cfg;
}

// A model width: timm's embed_dim, depth, num_heads, mlp_ratio per size name.
struct Width {
  const char* name;
  int64_t dim, depth, heads;
  double mlp_ratio = 4.0;
};

const Width kTiny{"tiny", 192, 12, 3}, kSmall{"small", 384, 12, 6}, kMedium{"medium", 512, 12, 8},
    kBase{"base", 768, 12, 12}, kLarge{"large", 1024, 24, 16}, kHuge{"huge", 1280, 32, 16},
    kBetwixt{"betwixt", 640, 12, 10}, kMediumD{"mediumd", 512, 20, 8}, kWee{"wee", 256, 14, 4, 5.0},
    kLittle{"little", 320, 14, 5, 5.6}, kSo150m{"so150m", 896, 18, 14, 2.572},
    kSo150m2{"so150m2", 832, 21, 13, 34.0 / 13.0}, kGiant{"giant", 1408, 40, 16, 48.0 / 11.0},
    kGigantic{"gigantic", 1664, 48, 16, 64.0 / 13.0}, kXSmall{"xsmall", 256, 10, 4}, kBasePlus{"base", 896, 12, 14},
    kGiantDinov2{"giant", 1536, 40, 24, 2.66667 * 2}, kSo400m{"so400m", 1152, 27, 16, 3.7362},
    kGiantOpt{"giantopt", 1536, 40, 16};

VitSpec make_spec(std::string name, const Width& w, int64_t patch, int64_t img, PretrainedCfg cfg) {
  VitSpec spec;
  spec.name = std::move(name);
  spec.img_size = img;
  spec.patch_size = patch;
  spec.embed_dim = w.dim;
  spec.depth = w.depth;
  spec.num_heads = w.heads;
  spec.mlp_ratio = w.mlp_ratio;
  spec.cfg = std::move(cfg);
  return spec;
}

// vit_<width>_patch<p>_<img>: class token, token pool, mean/std 0.5.
VitSpec plain_vit(const Width& w, int64_t patch, int64_t img, int64_t num_classes = 1000) {
  return make_spec("vit_" + std::string(w.name) + "_patch" + std::to_string(patch) + "_" + std::to_string(img), w,
                   patch, img, vit_cfg(img, /*imagenet_norm=*/false, std::nullopt, num_classes));
}

// vit_<width>_patch16_gap_<img>: no class token, average pool with the final
// norm before it (fc_norm off), no qkv bias, LayerScale 1e-6.
VitSpec gap_vit(const Width& w, int64_t img, PretrainedCfg cfg) {
  VitSpec spec =
      make_spec("vit_" + std::string(w.name) + "_patch16_gap_" + std::to_string(img), w, 16, img, std::move(cfg));
  spec.class_token = false;
  spec.global_pool = "avg";
  spec.fc_norm = false;
  spec.qkv_bias = false;
  spec.init_values = 1e-6;
  return spec;
}

// vit_<width>_patch16_reg<n>_gap_<img>: register tokens instead of a class
// token, average pool; these (but the so150m ones) add pos_embed to the
// patches only and use LayerScale 1e-5 (not the base). crop_pct 0.95, 1.0 at 384.
VitSpec reg_vit(const Width& w, int64_t reg_tokens, int64_t img) {
  VitSpec spec = make_spec(
      "vit_" + std::string(w.name) + "_patch16_reg" + std::to_string(reg_tokens) + "_gap_" + std::to_string(img), w, 16,
      img, vit_cfg(img, false, img == 384 ? 1.0 : 0.95));
  spec.class_token = false;
  spec.reg_tokens = reg_tokens;
  spec.global_pool = "avg";
  spec.no_embed_class = true;
  spec.init_values = 1e-5;
  return spec;
}

// deit3_<width>_patch<p>_<img>: LayerScale 1e-6, no_embed_class, ImageNet mean/std.
VitSpec deit3(const Width& w, int64_t patch, int64_t img) {
  VitSpec spec =
      make_spec("deit3_" + std::string(w.name) + "_patch" + std::to_string(patch) + "_" + std::to_string(img), w, patch,
                img, vit_cfg(img, /*imagenet_norm=*/true));
  spec.no_embed_class = true;
  spec.init_values = 1e-6;
  return spec;
}

VitSpec deit(const Width& w, int64_t img, bool distilled) {
  VitSpec spec =
      make_spec("deit_" + std::string(w.name) + (distilled ? "_distilled" : "") + "_patch16_" + std::to_string(img), w,
                16, img, vit_cfg(img, /*imagenet_norm=*/true));
  spec.distilled = distilled;
  return spec;
}

// eva_large_patch14_<img>: ViT-L/14 with average pool (fc_norm after it),
// OpenAI CLIP mean/std, crop_pct 1.0 (squash at 336).
VitSpec eva_large(int64_t img) {
  PretrainedCfg cfg = vit_cfg(img, /*imagenet_norm=*/false, 1.0);
  cfg.mean = {kOpenaiClipMean[0], kOpenaiClipMean[1], kOpenaiClipMean[2]};
  cfg.std = {kOpenaiClipStd[0], kOpenaiClipStd[1], kOpenaiClipStd[2]};
  if (img == 336) cfg.crop_mode = "squash";
  VitSpec spec = make_spec("eva_large_patch14_" + std::to_string(img), kLarge, 14, img, std::move(cfg));
  spec.global_pool = "avg";
  return spec;
}

// The CLIP image towers (vit_*_clip_*): norm_pre after pos_embed (the patch
// conv without bias), LayerNorm eps 1e-5 everywhere, class token pool; the
// _quickgelu names use QuickGELU in the MLP. cfg: the default tag's
// classifier size (the CLIP embedding width for the image-text tags), OpenAI
// CLIP mean/std unless `inception_norm`.
struct ClipArgs {
  std::string name;
  Width width;
  int64_t patch;
  int64_t img;
  int64_t num_classes;
  double crop_pct;
  bool squash = false;
  bool inception_norm = false;  // mean/std 0.5 (the laion2b in12k-in1k ViT-L/14s)
};

VitSpec clip_vit(const ClipArgs& c) {
  PretrainedCfg cfg = vit_cfg(c.img, /*imagenet_norm=*/false, c.crop_pct, c.num_classes);
  if (!c.inception_norm) {
    cfg.mean = {kOpenaiClipMean[0], kOpenaiClipMean[1], kOpenaiClipMean[2]};
    cfg.std = {kOpenaiClipStd[0], kOpenaiClipStd[1], kOpenaiClipStd[2]};
  }
  if (c.squash) cfg.crop_mode = "squash";
  VitSpec spec = make_spec(c.name, c.width, c.patch, c.img, std::move(cfg));
  spec.pre_norm = true;
  spec.norm_eps = 1e-5;
  if (c.name.find("_quickgelu") != std::string::npos) spec.act_layer = "quick_gelu";
  return spec;
}

std::vector<ClipArgs> clip_args() {
  return {
      {"vit_xsmall_patch16_clip_224", kXSmall, 16, 224, 512, 0.9},
      {"vit_medium_patch32_clip_224", kMedium, 32, 224, 512, 0.9},
      {"vit_medium_patch16_clip_224", kMedium, 16, 224, 512, 0.9},
      {"vit_betwixt_patch32_clip_224", kBetwixt, 32, 224, 512, 0.9},
      {"vit_base_patch32_clip_224", kBase, 32, 224, 1000, 0.9},
      {"vit_base_patch32_clip_256", kBase, 32, 256, 512, 1.0},
      {"vit_base_patch32_clip_384", kBase, 32, 384, 1000, 1.0},
      {"vit_base_patch32_clip_448", kBase, 32, 448, 1000, 1.0},
      {"vit_base_patch16_clip_224", kBase, 16, 224, 1000, 0.95},
      {"vit_base_patch16_clip_384", kBase, 16, 384, 1000, 1.0, /*squash=*/true},
      {"vit_base_patch16_plus_clip_240", kBasePlus, 16, 240, 640, 1.0},
      {"vit_large_patch14_clip_224", kLarge, 14, 224, 1000, 1.0, false, /*inception_norm=*/true},
      {"vit_large_patch14_clip_336", kLarge, 14, 336, 1000, 1.0, true, /*inception_norm=*/true},
      {"vit_huge_patch14_clip_224", kHuge, 14, 224, 1000, 1.0},
      {"vit_huge_patch14_clip_336", kHuge, 14, 336, 1000, 1.0, true},
      {"vit_huge_patch14_clip_378", kHuge, 14, 378, 1024, 1.0},
      {"vit_giant_patch14_clip_224", kGiant, 14, 224, 1024, 1.0},
      {"vit_gigantic_patch14_clip_224", kGigantic, 14, 224, 1280, 1.0},
      {"vit_gigantic_patch14_clip_378", kGigantic, 14, 378, 1280, 1.0, true},
      {"vit_base_patch32_clip_quickgelu_224", kBase, 32, 224, 512, 0.9},
      {"vit_base_patch16_clip_quickgelu_224", kBase, 16, 224, 512, 1.0},
      {"vit_large_patch14_clip_quickgelu_224", kLarge, 14, 224, 768, 1.0},
      {"vit_large_patch14_clip_quickgelu_336", kLarge, 14, 336, 768, 1.0},
      {"vit_huge_patch14_clip_quickgelu_224", kHuge, 14, 224, 1024, 1.0},
      {"vit_huge_patch14_clip_quickgelu_378", kHuge, 14, 378, 1024, 1.0},
      {"vit_gigantic_patch14_clip_quickgelu_224", kGigantic, 14, 224, 1280, 1.0},
  };
}

// vit_<width>_patch14_[reg4_]dinov2: DINOv2 (LVD-142M, no classifier,
// ImageNet mean/std, 518 px, crop_pct 1.0): LayerScale 1e-5; reg4 adds four
// register tokens beside the class token, pos_embed over the patches only;
// the giant uses SwiGLUPacked (GluMlp, SiLU gate first, fc1 width
// int(1536 * 5.33334) = 8192).
VitSpec dinov2(const Width& w, bool reg4) {
  VitSpec spec = make_spec("vit_" + std::string(w.name) + "_patch14_" + (reg4 ? "reg4_" : "") + "dinov2", w, 14, 518,
                           vit_cfg(518, /*imagenet_norm=*/true, 1.0, 0));
  spec.init_values = 1e-5;
  if (reg4) {
    spec.reg_tokens = 4;
    spec.no_embed_class = true;
  }
  spec.swiglu_packed = w.dim == kGiantDinov2.dim;
  return spec;
}

// vit_<width>_patch<p>_siglip_[gap_]<img>: the SigLIP image towers, no
// class token: global_pool 'map' (timm's AttentionPoolLatent, attn_pool,
// after the final norm) or, for the _gap_ names, an average pool with the
// final norm before it (fc_norm off). GELU (tanh) in the MLPs where timm sets
// act_layer 'gelu_tanh'. Default tags without a classifier, mean/std 0.5,
// crop_pct 0.9 unless given.
struct SiglipArgs {
  Width width;
  int64_t patch;
  int64_t img;
  bool gelu_tanh = false;
  double crop_pct = 0.9;
};

VitSpec siglip_vit(const SiglipArgs& a, bool gap) {
  VitSpec spec = make_spec("vit_" + std::string(a.width.name) + "_patch" + std::to_string(a.patch) + "_siglip_" +
                               (gap ? "gap_" : "") + std::to_string(a.img),
                           a.width, a.patch, a.img, vit_cfg(a.img, /*imagenet_norm=*/false, a.crop_pct, 0));
  spec.class_token = false;
  spec.global_pool = gap ? "avg" : "map";
  if (gap) spec.fc_norm = false;
  if (a.gelu_tanh) spec.act_layer = "gelu_tanh";
  return spec;
}

// timm's registration order: the 'map' names, then the _gap_ names (these
// add vit_so400m_patch14_siglip_gap_448 / _896 and differ in some default
// tags' crop_pct).
void add_siglip_specs(std::vector<VitSpec>& specs) {
  const std::vector<SiglipArgs> map_args = {
      {kBase, 32, 256, true},   {kBase, 16, 224},         {kBase, 16, 256},           {kBase, 16, 384},
      {kBase, 16, 512},         {kLarge, 16, 256},        {kLarge, 16, 384},          {kLarge, 16, 512, true},
      {kSo400m, 14, 224},       {kSo400m, 14, 378},       {kSo400m, 14, 384},         {kSo400m, 16, 256, true},
      {kSo400m, 16, 384, true}, {kSo400m, 16, 512, true}, {kGiantOpt, 16, 256, true}, {kGiantOpt, 16, 384, true},
  };
  for (const auto& a : map_args) specs.push_back(siglip_vit(a, /*gap=*/false));
  const std::vector<SiglipArgs> gap_args = {
      {kBase, 32, 256, true},
      {kBase, 16, 224},
      {kBase, 16, 256},
      {kBase, 16, 384},
      {kBase, 16, 512},
      {kLarge, 16, 256},
      {kLarge, 16, 384},
      {kLarge, 16, 512, true},
      {kSo400m, 14, 224},
      {kSo400m, 14, 378},
      {kSo400m, 14, 384, false, 1.0},
      {kSo400m, 14, 448, false, 1.0},
      {kSo400m, 14, 896, false, 1.0},
      {kSo400m, 16, 256, true},
      {kSo400m, 16, 384, true},
      {kSo400m, 16, 512, true},
      {kGiantOpt, 16, 256, true},
      {kGiantOpt, 16, 384, true},
  };
  for (const auto& a : gap_args) specs.push_back(siglip_vit(a, /*gap=*/true));
}

std::vector<VitSpec> vit_specs() {
  std::vector<VitSpec> specs = {
      plain_vit(kTiny, 16, 224),  plain_vit(kTiny, 16, 384),     plain_vit(kSmall, 32, 224),
      plain_vit(kSmall, 32, 384), plain_vit(kSmall, 16, 224),    plain_vit(kSmall, 16, 384),
      plain_vit(kBase, 32, 224),  plain_vit(kBase, 32, 384),     plain_vit(kBase, 16, 224),
      plain_vit(kBase, 16, 384),  plain_vit(kBase, 8, 224),      plain_vit(kLarge, 32, 224, 0),
      plain_vit(kLarge, 32, 384), plain_vit(kLarge, 16, 224),    plain_vit(kLarge, 16, 384),
      plain_vit(kLarge, 14, 224), plain_vit(kHuge, 14, 224, 0),  deit(kTiny, 224, false),
      deit(kSmall, 224, false),   deit(kBase, 224, false),       deit(kBase, 384, false),
      deit(kTiny, 224, true),     deit(kSmall, 224, true),       deit(kBase, 224, true),
      deit(kBase, 384, true),     deit3(kSmall, 16, 224),        deit3(kSmall, 16, 384),
      deit3(kMedium, 16, 224),    deit3(kBase, 16, 224),         deit3(kBase, 16, 384),
      deit3(kLarge, 16, 224),     deit3(kLarge, 16, 384),        deit3(kHuge, 14, 224),
      plain_vit(kGiant, 14, 224), plain_vit(kGigantic, 14, 224),
  };
  // vit_small_patch8_224: DINO weights, ImageNet mean/std, no classifier.
  VitSpec dino = plain_vit(kSmall, 8, 224, 0);
  dino.cfg.mean = PretrainedCfg{}.mean;
  dino.cfg.std = PretrainedCfg{}.std;
  specs.push_back(dino);

  specs.push_back(gap_vit(kMedium, 240, vit_cfg(240, false, 0.95, 11821)));
  specs.push_back(gap_vit(kMedium, 256, vit_cfg(256, false, 0.95)));
  PretrainedCfg squash384 = vit_cfg(384, false, 0.95);
  squash384.crop_mode = "squash";
  specs.push_back(gap_vit(kMedium, 384, squash384));
  specs.push_back(gap_vit(kBetwixt, 256, vit_cfg(256, false, 0.95)));
  // vit_base_patch16_gap_224: 16 heads, qkv bias, no LayerScale.
  VitSpec base_gap = gap_vit({"base", 768, 12, 16}, 224, vit_cfg(224, false));
  base_gap.qkv_bias = true;
  base_gap.init_values.reset();
  specs.push_back(base_gap);
  // vit_giant_patch16_gap_224: qkv bias, no LayerScale; timm's in22k_ijepa
  // cfg (ImageNet mean/std, no classifier; a URL, no hf_hub_id).
  VitSpec giant_gap = gap_vit(kGiant, 224, vit_cfg(224, /*imagenet_norm=*/true, std::nullopt, 0));
  giant_gap.qkv_bias = true;
  giant_gap.init_values.reset();
  specs.push_back(giant_gap);

  for (const auto& [width, reg, img] : std::vector<std::tuple<Width, int64_t, int64_t>>{{kWee, 1, 256},
                                                                                        {kLittle, 1, 256},
                                                                                        {kLittle, 4, 256},
                                                                                        {kMedium, 1, 256},
                                                                                        {kMedium, 4, 256},
                                                                                        {kMediumD, 4, 256},
                                                                                        {kMediumD, 4, 384},
                                                                                        {kBetwixt, 1, 256},
                                                                                        {kBetwixt, 4, 256},
                                                                                        {kBetwixt, 4, 384}}) {
    specs.push_back(reg_vit(width, reg, img));
  }
  // vit_base_patch16_reg4_gap_256: no LayerScale, crop_pct 0.9.
  VitSpec base_reg = reg_vit(kBase, 4, 256);
  base_reg.init_values.reset();
  base_reg.cfg.crop_pct = 0.9;
  specs.push_back(base_reg);
  // SO150M: pos_embed over the register tokens too; v1 without LayerScale and
  // with the final norm before the pool, v2 without qkv bias.
  for (int64_t img : {256, 384}) {
    VitSpec so = reg_vit(kSo150m, 4, img);
    so.no_embed_class = false;
    so.init_values.reset();
    so.fc_norm = false;
    specs.push_back(so);
  }
  for (int64_t img : {256, 384, 448}) {
    VitSpec so = reg_vit(kSo150m2, 1, img);
    so.no_embed_class = false;
    so.qkv_bias = false;
    so.cfg.crop_pct = 1.0;
    if (img == 448) so.cfg.crop_mode = "squash";
    specs.push_back(so);
  }
  for (int64_t img : {196, 336}) specs.push_back(eva_large(img));
  // vit_huge_patch14_gap_224 / vit_huge_patch16_gap_448: I-JEPA's ViT-H, no
  // class token, average pool with the final norm before it, qkv bias, no
  // LayerScale; timm's in1k_ijepa cfg (ImageNet mean/std, no classifier; a
  // URL, no hf_hub_id).
  for (const auto& [patch, img] : std::vector<std::pair<int64_t, int64_t>>{{14, 224}, {16, 448}}) {
    VitSpec spec = make_spec("vit_huge_patch" + std::to_string(patch) + "_gap_" + std::to_string(img), kHuge, patch,
                             img, vit_cfg(img, /*imagenet_norm=*/true, img == 448 ? 1.0 : 0.9, 0));
    spec.class_token = false;
    spec.global_pool = "avg";
    spec.fc_norm = false;
    specs.push_back(spec);
  }
  for (const auto& clip : clip_args()) specs.push_back(clip_vit(clip));
  for (const Width& w : {kSmall, kBase, kLarge, kGiantDinov2}) {
    for (bool reg4 : {false, true}) specs.push_back(dinov2(w, reg4));
  }
  add_siglip_specs(specs);
  return specs;
}

std::string describe(const VitSpec& spec) {
  std::string kind = spec.distilled                                   ? "DeiT distilled"
                     : spec.name.rfind("deit3_", 0) == 0              ? "DeiT-III"
                     : spec.name.rfind("eva_large_", 0) == 0          ? "EVA-L ViT"
                     : spec.pre_norm                                  ? "CLIP image tower ViT"
                     : spec.name.find("_dinov2") != std::string::npos ? "DINOv2 ViT"
                     : spec.name.find("_siglip") != std::string::npos ? "SigLIP image tower ViT"
                                                                      : "ViT";
  if (spec.act_layer == "quick_gelu") kind += " with QuickGELU";
  if (spec.swiglu_packed) kind += " with SwiGLU MLP";
  if (spec.act_layer == "gelu_tanh") kind += " with GELU (tanh)";
  if (spec.reg_tokens > 0) kind += " with " + std::to_string(spec.reg_tokens) + " register token(s)";
  if (spec.global_pool == "map") kind += ", attention pool (map)";
  if (spec.name.find("_siglip_gap_") != std::string::npos) kind += ", average pool";
  return kind + " (dim " + std::to_string(spec.embed_dim) + ", depth " + std::to_string(spec.depth) + ", heads " +
         std::to_string(spec.num_heads) + ", patch " + std::to_string(spec.patch_size) + ", " +
         std::to_string(spec.img_size) + "x" + std::to_string(spec.img_size) + ")";
}

}  // namespace
}  // namespace timm::vit

TIMM_PLUGIN("vit") {
  for (const auto& spec : timm::vit::vit_specs()) {
    registrar.add_model(spec.name, timm::vit::describe(spec), [spec](const timm::ModelArgs& args) -> timm::ModelPtr {
      return std::make_shared<timm::vit::VisionTransformerImpl>(spec, args);
    });
  }
  timm::naflexvit::register_naflexvit(registrar);
}
