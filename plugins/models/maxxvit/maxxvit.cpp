// MaxViT, CoAtNet and MaxxViT (timm/models/maxxvit.py's MaxxVit), with
// timm's module names so state_dict keys equal timm's: stem (conv1, norm1,
// conv2), four stages (stages.N.blocks.M) of 'C' conv blocks (MbConvBlock,
// or ConvNeXtBlock for the convnext cfgs), 'T' transformer blocks
// (TransformerBlock2d, NCHW attention over the whole map with a relative
// position bias of the stage's size), 'M' MaxViT blocks (conv block, window
// attention, grid attention, channels-last) or 'PM' parallel MaxViT blocks,
// then norm + head (ClassifierHead) or, with head_hidden_size, the
// NormMlpClassifierHead alone. Relative positions: RelPosBias ('bias'),
// RelPosMlp ('mlp', the rmlp names) or RelPosBiasTf ('bias_tf', the _tf
// ports, which also use TF 'same' padding and tanh-GELU). The window and
// grid size is img_size // 32, fixed at construction as timm's.
//
// Supported: num_classes, in_chans, drop_rate (head), drop_path_rate
// (timm's linear rule over all blocks), global_pool, --model-kwargs
// img_size=<int> (timm's img_size: the partition size and the CoAtNet
// attention sizes follow it), feature extraction (stem + one level per
// stage, NCHW), grad checkpointing (each block). Not supported: timm's other
// cfg overlay kwargs (transformer_*, conv_*, embed_dim, ...), non-square
// img_size, set_input_size, use_nchw_attn (no cfg sets it).
#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <ATen/ATen.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/container/any.h>
#include <torch/nn/modules/container/sequential.h>

#include "maxxvit_blocks.hpp"
#include "timm/base/error.hpp"
#include "timm/base/names.hpp"
#include "timm/layers/classifier.hpp"
#include "timm/layers/drop_path.hpp"
#include "timm/models/features.hpp"
#include "timm/models/model.hpp"
#include "timm/plugin/plugin.hpp"

namespace timm::maxxvit {
namespace {

using BlockTypes = std::vector<std::vector<std::string>>;

// timm's MaxxVitCfg.
struct MaxxVitCfg {
  std::vector<int64_t> embed_dim{96, 192, 384, 768};
  std::vector<int64_t> depths{2, 3, 5, 2};
  BlockTypes block_type{{"C"}, {"C"}, {"T"}, {"T"}};  // per stage, extended to its depth as timm's extend_tuple
  std::vector<int64_t> stem_width{64};                // one or two widths
  bool stem_bias = false;
  ConvCfg conv{};
  TransformerCfg transformer{};
  int64_t head_hidden_size = 0;
  std::string weight_init = "vit_eff";
};

struct BlockCfgs {
  ConvCfg conv;
  TransformerCfg transformer;
};

MaxxVitCfg with_blocks(MaxxVitCfg cfg, BlockCfgs blocks) {
  cfg.conv = std::move(blocks.conv);
  cfg.conv.finalize();
  cfg.transformer = std::move(blocks.transformer);
  return cfg;
}

// timm's _rw_coat_cfg.
struct RwCoat {
  std::string stride_mode = "pool";
  std::string pool_type = "avg2";
  bool conv_output_bias = false;
  bool conv_attn_early = false;
  std::string conv_attn_act_layer = "relu";
  std::string conv_norm_layer{};
  bool transformer_shortcut_bias = true;
  std::string transformer_norm_layer = "layernorm2d";
  std::optional<double> init_values = std::nullopt;
  std::string rel_pos_type = "bias";
  int64_t rel_pos_dim = 512;
};

BlockCfgs rw_coat_cfg(const RwCoat& a) {
  BlockCfgs b;
  b.conv.stride_mode = a.stride_mode;
  b.conv.pool_type = a.pool_type;
  b.conv.pre_norm_act = true;
  b.conv.expand_output = false;
  b.conv.output_bias = a.conv_output_bias;
  b.conv.attn_early = a.conv_attn_early;
  b.conv.attn_act_layer = a.conv_attn_act_layer;
  b.conv.act_layer = "silu";
  b.conv.norm_layer = a.conv_norm_layer;
  b.transformer.expand_first = false;
  b.transformer.shortcut_bias = a.transformer_shortcut_bias;
  b.transformer.pool_type = a.pool_type;
  b.transformer.init_values = a.init_values;
  b.transformer.norm_layer = a.transformer_norm_layer;
  b.transformer.rel_pos_type = a.rel_pos_type;
  b.transformer.rel_pos_dim = a.rel_pos_dim;
  return b;
}

// timm's _rw_max_cfg.
struct RwMax {
  std::string stride_mode = "dw";
  bool conv_output_bias = false;
  double conv_attn_ratio = 1.0 / 16.0;
  std::optional<double> init_values = std::nullopt;
  std::string rel_pos_type = "bias";
  int64_t rel_pos_dim = 512;
};

BlockCfgs rw_max_cfg(const RwMax& a) {
  BlockCfgs b;
  b.conv.stride_mode = a.stride_mode;
  b.conv.expand_output = false;
  b.conv.output_bias = a.conv_output_bias;
  b.conv.attn_ratio = a.conv_attn_ratio;
  b.conv.act_layer = "silu";
  b.transformer.expand_first = false;
  b.transformer.init_values = a.init_values;
  b.transformer.rel_pos_type = a.rel_pos_type;
  b.transformer.rel_pos_dim = a.rel_pos_dim;
  return b;
}

// timm's _next_cfg (ConvNeXt conv blocks).
struct Next {
  bool no_block_attn = false;
  std::optional<double> conv_init_values = 1e-6;
  std::optional<double> transformer_init_values = 1e-6;
  std::string rel_pos_type = "mlp";
};

BlockCfgs next_cfg(const Next& a) {
  BlockCfgs b;
  b.conv.block_type = "convnext";
  b.conv.expand_output = false;
  b.conv.init_values = a.conv_init_values;
  b.conv.norm_layer = "layernorm2d";
  b.conv.norm_layer_cl = "layernorm";
  b.transformer.expand_first = false;
  b.transformer.no_block_attn = a.no_block_attn;
  b.transformer.init_values = a.transformer_init_values;
  b.transformer.rel_pos_type = a.rel_pos_type;
  return b;
}

// timm's _tf_cfg (the TensorFlow MaxViT ports).
BlockCfgs tf_cfg() {
  BlockCfgs b;
  b.conv.norm_eps = 1e-3;
  b.conv.act_layer = "gelu_tanh";
  b.conv.padding = "same";
  b.transformer.norm_eps = 1e-5;
  b.transformer.act_layer = "gelu_tanh";
  b.transformer.head_first = false;
  b.transformer.rel_pos_type = "bias_tf";
  return b;
}

// timm 1.0.31's model_cfgs.
std::map<std::string, MaxxVitCfg> model_cfgs() {
  const BlockTypes m4{{"M"}, {"M"}, {"M"}, {"M"}};
  const std::vector<int64_t> w64{64, 128, 256, 512}, w96{96, 192, 384, 768}, w128{128, 256, 512, 1024},
      w192{192, 384, 768, 1536};
  const std::vector<int64_t> d2352{2, 3, 5, 2}, d3463{3, 4, 6, 3}, d2372{2, 3, 7, 2}, d26142{2, 6, 14, 2},
      d2252{2, 2, 5, 2}, d1231{1, 2, 3, 1};
  const std::vector<int64_t> s3264{32, 64};
  std::map<std::string, MaxxVitCfg> c;
  // timm specific CoAtNet configs
  c["coatnet_pico_rw"] = with_blocks({.embed_dim = w64, .depths = d2352, .stem_width = s3264},
                                     rw_max_cfg({.conv_output_bias = true, .conv_attn_ratio = 0.25}));
  c["coatnet_nano_rw"] =
      with_blocks({.embed_dim = w64, .depths = d3463, .stem_width = s3264},
                  rw_max_cfg({.stride_mode = "pool", .conv_output_bias = true, .conv_attn_ratio = 0.25}));
  c["coatnet_0_rw"] = with_blocks({.embed_dim = w96, .depths = d2372, .stem_width = s3264},
                                  rw_coat_cfg({.conv_attn_early = true, .transformer_shortcut_bias = false}));
  c["coatnet_1_rw"] =
      with_blocks({.embed_dim = w96, .depths = d26142, .stem_width = s3264},
                  rw_coat_cfg({.stride_mode = "dw", .conv_attn_early = true, .transformer_shortcut_bias = false}));
  c["coatnet_2_rw"] = with_blocks({.embed_dim = w128, .depths = d26142, .stem_width = {64, 128}},
                                  rw_coat_cfg({.stride_mode = "dw", .conv_attn_act_layer = "silu"}));
  c["coatnet_3_rw"] =
      with_blocks({.embed_dim = w192, .depths = d26142, .stem_width = {96, 192}},
                  rw_coat_cfg({.stride_mode = "dw", .conv_attn_act_layer = "silu", .init_values = 1e-6}));
  // Experimental CoAtNet configs (different norm layers, MLP rel-pos)
  c["coatnet_bn_0_rw"] = with_blocks({.embed_dim = w96, .depths = d2372, .stem_width = s3264},
                                     rw_coat_cfg({.stride_mode = "dw",
                                                  .conv_attn_early = true,
                                                  .transformer_shortcut_bias = false,
                                                  .transformer_norm_layer = "batchnorm2d"}));
  c["coatnet_rmlp_nano_rw"] = with_blocks(
      {.embed_dim = w64, .depths = d3463, .stem_width = s3264},
      rw_max_cfg({.conv_output_bias = true, .conv_attn_ratio = 0.25, .rel_pos_type = "mlp", .rel_pos_dim = 384}));
  c["coatnet_rmlp_0_rw"] = with_blocks({.embed_dim = w96, .depths = d2372, .stem_width = s3264},
                                       rw_coat_cfg({.stride_mode = "dw", .rel_pos_type = "mlp"}));
  c["coatnet_rmlp_1_rw"] = with_blocks({.embed_dim = w96, .depths = d26142, .stem_width = s3264},
                                       rw_coat_cfg({.pool_type = "max",
                                                    .conv_attn_early = true,
                                                    .transformer_shortcut_bias = false,
                                                    .rel_pos_type = "mlp",
                                                    .rel_pos_dim = 384}));
  c["coatnet_rmlp_1_rw2"] = with_blocks({.embed_dim = w96, .depths = d26142, .stem_width = s3264},
                                        rw_coat_cfg({.stride_mode = "dw", .rel_pos_type = "mlp", .rel_pos_dim = 512}));
  c["coatnet_rmlp_2_rw"] = with_blocks(
      {.embed_dim = w128, .depths = d26142, .stem_width = {64, 128}},
      rw_coat_cfg({.stride_mode = "dw", .conv_attn_act_layer = "silu", .init_values = 1e-6, .rel_pos_type = "mlp"}));
  c["coatnet_rmlp_3_rw"] = with_blocks(
      {.embed_dim = w192, .depths = d26142, .stem_width = {96, 192}},
      rw_coat_cfg({.stride_mode = "dw", .conv_attn_act_layer = "silu", .init_values = 1e-6, .rel_pos_type = "mlp"}));
  c["coatnet_nano_cc"] = with_blocks(
      {.embed_dim = w64, .depths = d3463, .block_type = {{"C"}, {"C"}, {"C", "T"}, {"C", "T"}}, .stem_width = s3264},
      rw_coat_cfg({}));
  c["coatnext_nano_rw"] = with_blocks(
      {.embed_dim = w64, .depths = d3463, .stem_width = s3264, .weight_init = "normal"},
      next_cfg({.conv_init_values = 1e-5, .transformer_init_values = std::nullopt, .rel_pos_type = "bias"}));
  // CoAtNet paper configs
  c["coatnet_0"] = with_blocks({.embed_dim = w96, .depths = d2352, .stem_width = {64}, .head_hidden_size = 768}, {});
  c["coatnet_1"] = with_blocks({.embed_dim = w96, .depths = d26142, .stem_width = {64}, .head_hidden_size = 768}, {});
  c["coatnet_2"] =
      with_blocks({.embed_dim = w128, .depths = d26142, .stem_width = {128}, .head_hidden_size = 1024}, {});
  c["coatnet_3"] =
      with_blocks({.embed_dim = w192, .depths = d26142, .stem_width = {192}, .head_hidden_size = 1536}, {});
  c["coatnet_4"] =
      with_blocks({.embed_dim = w192, .depths = {2, 12, 28, 2}, .stem_width = {192}, .head_hidden_size = 1536}, {});
  c["coatnet_5"] = with_blocks(
      {.embed_dim = {256, 512, 1280, 2048}, .depths = {2, 12, 28, 2}, .stem_width = {192}, .head_hidden_size = 2048},
      {});
  // Experimental MaxVit configs
  c["maxvit_pico_rw"] = with_blocks(
      {.embed_dim = {32, 64, 128, 256}, .depths = d2252, .block_type = m4, .stem_width = {24, 32}}, rw_max_cfg({}));
  c["maxvit_nano_rw"] =
      with_blocks({.embed_dim = w64, .depths = d1231, .block_type = m4, .stem_width = s3264}, rw_max_cfg({}));
  c["maxvit_tiny_rw"] =
      with_blocks({.embed_dim = w64, .depths = d2252, .block_type = m4, .stem_width = s3264}, rw_max_cfg({}));
  c["maxvit_tiny_pm"] = with_blocks(
      {.embed_dim = w64, .depths = d2252, .block_type = {{"PM"}, {"PM"}, {"PM"}, {"PM"}}, .stem_width = s3264},
      rw_max_cfg({}));
  c["maxvit_rmlp_pico_rw"] =
      with_blocks({.embed_dim = {32, 64, 128, 256}, .depths = d2252, .block_type = m4, .stem_width = {24, 32}},
                  rw_max_cfg({.rel_pos_type = "mlp"}));
  c["maxvit_rmlp_nano_rw"] = with_blocks({.embed_dim = w64, .depths = d1231, .block_type = m4, .stem_width = s3264},
                                         rw_max_cfg({.rel_pos_type = "mlp"}));
  c["maxvit_rmlp_tiny_rw"] = with_blocks({.embed_dim = w64, .depths = d2252, .block_type = m4, .stem_width = s3264},
                                         rw_max_cfg({.rel_pos_type = "mlp"}));
  c["maxvit_rmlp_small_rw"] = with_blocks({.embed_dim = w96, .depths = d2252, .block_type = m4, .stem_width = s3264},
                                          rw_max_cfg({.init_values = 1e-6, .rel_pos_type = "mlp"}));
  c["maxvit_rmlp_base_rw"] =
      with_blocks({.embed_dim = w96, .depths = d26142, .block_type = m4, .stem_width = s3264, .head_hidden_size = 768},
                  rw_max_cfg({.rel_pos_type = "mlp"}));
  // MaxxViT configs (ConvNeXt conv blocks)
  c["maxxvit_rmlp_nano_rw"] =
      with_blocks({.embed_dim = w64, .depths = d1231, .block_type = m4, .stem_width = s3264, .weight_init = "normal"},
                  next_cfg({}));
  c["maxxvit_rmlp_tiny_rw"] =
      with_blocks({.embed_dim = w64, .depths = d2252, .block_type = m4, .stem_width = s3264}, next_cfg({}));
  c["maxxvit_rmlp_small_rw"] =
      with_blocks({.embed_dim = w96, .depths = d2252, .block_type = m4, .stem_width = {48, 96}}, next_cfg({}));
  c["maxxvitv2_nano_rw"] = with_blocks(
      {.embed_dim = w96, .depths = d1231, .block_type = m4, .stem_width = {48, 96}, .weight_init = "normal"},
      next_cfg({.no_block_attn = true, .rel_pos_type = "bias"}));
  c["maxxvitv2_rmlp_base_rw"] =
      with_blocks({.embed_dim = w128, .depths = {2, 6, 12, 2}, .block_type = m4, .stem_width = {64, 128}},
                  next_cfg({.no_block_attn = true}));
  c["maxxvitv2_rmlp_large_rw"] = with_blocks({.embed_dim = {160, 320, 640, 1280},
                                              .depths = {2, 6, 16, 2},
                                              .block_type = m4,
                                              .stem_width = {80, 160},
                                              .head_hidden_size = 1280},
                                             next_cfg({.no_block_attn = true}));
  // MaxViT paper configs (TensorFlow ports)
  auto tf = [&](std::vector<int64_t> dims, std::vector<int64_t> depths, int64_t stem, int64_t hidden) {
    return with_blocks({.embed_dim = std::move(dims),
                        .depths = std::move(depths),
                        .block_type = m4,
                        .stem_width = {stem},
                        .stem_bias = true,
                        .head_hidden_size = hidden},
                       tf_cfg());
  };
  c["maxvit_tiny_tf"] = tf(w64, d2252, 64, 512);
  c["maxvit_small_tf"] = tf(w96, d2252, 64, 768);
  c["maxvit_base_tf"] = tf(w96, d26142, 64, 768);
  c["maxvit_large_tf"] = tf(w128, d26142, 128, 1024);
  c["maxvit_xlarge_tf"] = tf(w192, d26142, 192, 1536);
  // tiny test models
  c["test_maxvit"] =
      with_blocks({.embed_dim = {32, 64, 96, 128}, .depths = {1, 1, 1, 1}, .block_type = m4, .stem_width = {16, 32}},
                  rw_max_cfg({}));
  c["test_coatnet"] =
      with_blocks({.embed_dim = {32, 64, 96, 128}, .depths = {1, 1, 2, 1}, .stem_width = {16, 32}},
                  rw_max_cfg({.stride_mode = "pool", .conv_output_bias = true, .conv_attn_ratio = 0.25}));
  return c;
}

// One registered name: its cfg, default image size and timm's default pretrained cfg.
struct MaxxVitSpec {
  std::string name{};
  std::string cfg{};
  int64_t img_size = 224;
  std::string tag{};  // timm's default pretrained tag; "untrained": no hf_hub_id
  double crop_pct = 0.95;
  bool imagenet_mean = false;  // else timm's (0.5, 0.5, 0.5)
  int64_t num_classes = 1000;  // of the default tag's weights
};

std::vector<MaxxVitSpec> maxxvit_specs() {
  const std::string u = "untrained", in1k = "in1k", sw1k = "sw_in1k", sw12k_1k = "sw_in12k_ft_in1k";
  auto s = [](std::string name, std::string cfg, int64_t img, std::string tag) {
    return MaxxVitSpec{.name = std::move(name), .cfg = std::move(cfg), .img_size = img, .tag = std::move(tag)};
  };
  std::vector<MaxxVitSpec> specs = {
      // MaxViT
      s("maxvit_pico_rw_256", "maxvit_pico_rw", 256, u),
      s("maxvit_nano_rw_256", "maxvit_nano_rw", 256, sw1k),
      s("maxvit_tiny_rw_224", "maxvit_tiny_rw", 224, sw1k),
      s("maxvit_tiny_rw_256", "maxvit_tiny_rw", 256, u),
      s("maxvit_rmlp_pico_rw_256", "maxvit_rmlp_pico_rw", 256, sw1k),
      s("maxvit_rmlp_nano_rw_256", "maxvit_rmlp_nano_rw", 256, sw1k),
      s("maxvit_rmlp_tiny_rw_256", "maxvit_rmlp_tiny_rw", 256, sw1k),
      s("maxvit_rmlp_small_rw_224", "maxvit_rmlp_small_rw", 224, sw1k),
      s("maxvit_rmlp_small_rw_256", "maxvit_rmlp_small_rw", 256, u),
      s("maxvit_rmlp_base_rw_224", "maxvit_rmlp_base_rw", 224, sw12k_1k),
      s("maxvit_rmlp_base_rw_384", "maxvit_rmlp_base_rw", 384, sw12k_1k),
      s("maxvit_tiny_pm_256", "maxvit_tiny_pm", 256, u),
      s("maxvit_tiny_tf_224", "maxvit_tiny_tf", 224, in1k),
      s("maxvit_tiny_tf_384", "maxvit_tiny_tf", 384, in1k),
      s("maxvit_tiny_tf_512", "maxvit_tiny_tf", 512, in1k),
      s("maxvit_small_tf_224", "maxvit_small_tf", 224, in1k),
      s("maxvit_small_tf_384", "maxvit_small_tf", 384, in1k),
      s("maxvit_small_tf_512", "maxvit_small_tf", 512, in1k),
      s("maxvit_base_tf_224", "maxvit_base_tf", 224, in1k),
      s("maxvit_base_tf_384", "maxvit_base_tf", 384, in1k),
      s("maxvit_base_tf_512", "maxvit_base_tf", 512, in1k),
      s("maxvit_large_tf_224", "maxvit_large_tf", 224, in1k),
      s("maxvit_large_tf_384", "maxvit_large_tf", 384, in1k),
      s("maxvit_large_tf_512", "maxvit_large_tf", 512, in1k),
      s("maxvit_xlarge_tf_224", "maxvit_xlarge_tf", 224, "in21k"),
      s("maxvit_xlarge_tf_384", "maxvit_xlarge_tf", 384, "in21k_ft_in1k"),
      s("maxvit_xlarge_tf_512", "maxvit_xlarge_tf", 512, "in21k_ft_in1k"),
      s("test_maxvit", "test_maxvit", 160, u),
      // CoAtNet
      s("coatnet_pico_rw_224", "coatnet_pico_rw", 224, u),
      s("coatnet_nano_rw_224", "coatnet_nano_rw", 224, sw1k),
      s("coatnet_0_rw_224", "coatnet_0_rw", 224, sw1k),
      s("coatnet_1_rw_224", "coatnet_1_rw", 224, sw1k),
      s("coatnet_2_rw_224", "coatnet_2_rw", 224, sw12k_1k),
      s("coatnet_3_rw_224", "coatnet_3_rw", 224, "sw_in12k"),
      s("coatnet_bn_0_rw_224", "coatnet_bn_0_rw", 224, sw1k),
      s("coatnet_rmlp_nano_rw_224", "coatnet_rmlp_nano_rw", 224, sw1k),
      s("coatnet_rmlp_0_rw_224", "coatnet_rmlp_0_rw", 224, u),
      s("coatnet_rmlp_1_rw_224", "coatnet_rmlp_1_rw", 224, sw1k),
      s("coatnet_rmlp_1_rw2_224", "coatnet_rmlp_1_rw2", 224, sw12k_1k),
      s("coatnet_rmlp_2_rw_224", "coatnet_rmlp_2_rw", 224, sw12k_1k),
      s("coatnet_rmlp_2_rw_384", "coatnet_rmlp_2_rw", 384, sw12k_1k),
      s("coatnet_rmlp_3_rw_224", "coatnet_rmlp_3_rw", 224, u),
      s("coatnet_nano_cc_224", "coatnet_nano_cc", 224, u),
      s("coatnet_0_224", "coatnet_0", 224, u),
      s("coatnet_1_224", "coatnet_1", 224, u),
      s("coatnet_2_224", "coatnet_2", 224, u),
      s("coatnet_3_224", "coatnet_3", 224, u),
      s("coatnet_4_224", "coatnet_4", 224, u),
      s("coatnet_5_224", "coatnet_5", 224, u),
      s("test_coatnet", "test_coatnet", 160, u),
      // MaxxViT, MaxxViT-V2, CoAtNeXt
      s("maxxvit_rmlp_nano_rw_256", "maxxvit_rmlp_nano_rw", 256, sw1k),
      s("maxxvit_rmlp_tiny_rw_256", "maxxvit_rmlp_tiny_rw", 256, u),
      s("maxxvit_rmlp_small_rw_256", "maxxvit_rmlp_small_rw", 256, sw1k),
      s("maxxvitv2_nano_rw_256", "maxxvitv2_nano_rw", 256, sw1k),
      s("maxxvitv2_rmlp_base_rw_224", "maxxvitv2_rmlp_base_rw", 224, sw12k_1k),
      s("maxxvitv2_rmlp_base_rw_384", "maxxvitv2_rmlp_base_rw", 384, sw12k_1k),
      s("maxxvitv2_rmlp_large_rw_224", "maxxvitv2_rmlp_large_rw", 224, u),
      s("coatnext_nano_rw_224", "coatnext_nano_rw", 224, sw1k),
  };
  for (auto& spec : specs) {
    if (spec.img_size >= 384) spec.crop_pct = 1.0;  // timm's 384 / 512 tags: crop_pct 1, squash
    if (spec.name == "maxvit_rmlp_small_rw_224" || spec.name == "coatnet_nano_rw_224" ||
        spec.name == "coatnet_rmlp_nano_rw_224" || spec.name == "coatnext_nano_rw_224") {
      spec.crop_pct = 0.9;
    }
    if (spec.tag == "in1k" && spec.img_size == 224) spec.imagenet_mean = true;
    if (spec.name == "coatnet_bn_0_rw_224") spec.imagenet_mean = true;
    if (spec.tag == "sw_in12k") spec.num_classes = 11821;
    if (spec.tag == "in21k") spec.num_classes = 21843;
  }
  return specs;
}

// timm's extend_tuple(types, depth): the last type repeats, extra ones are cut.
std::vector<std::string> extend_types(const std::vector<std::string>& types, int64_t depth) {
  std::vector<std::string> out;
  for (int64_t i = 0; i < depth; ++i) out.push_back(types[std::min<size_t>(static_cast<size_t>(i), types.size() - 1)]);
  return out;
}

class MaxxVitImpl : public ClassifierImpl {
 public:
  MaxxVitImpl(const MaxxVitSpec& spec, const MaxxVitCfg& model_cfg, const ModelArgs& args)
      : cfg_model_(model_cfg), num_classes_(args.num_classes), in_chans_(args.in_chans) {
    validate_model_args(spec.name, args, {"img_size"});
    cfg_.input_size = {3, spec.img_size, spec.img_size};
    cfg_.crop_pct = spec.crop_pct;
    if (spec.img_size >= 384) cfg_.crop_mode = "squash";
    if (!spec.imagenet_mean) {
      cfg_.mean = {0.5, 0.5, 0.5};
      cfg_.std = {0.5, 0.5, 0.5};
    }
    cfg_.first_conv = "stem.conv1";
    cfg_.classifier = "head.fc";
    if (spec.tag != "untrained") cfg_.hf_hub_id = "timm/" + spec.name + "." + spec.tag;
    cfg_.num_classes = spec.num_classes;

    const int64_t img_size = model_kwarg_positive_int(spec.name, args, "img_size").value_or(spec.img_size);
    const MaxxVitCfg& cfg = cfg_model_;
    TransformerCfg transformer = cfg.transformer;
    // timm's cfg_window_size: window and grid img_size // partition_ratio.
    transformer.window = {img_size / transformer.partition_ratio, img_size / transformer.partition_ratio};
    bool partitioned = false;
    for (const auto& types : cfg.block_type) {
      for (const auto& t : types) partitioned = partitioned || t == "M" || t == "PM";
    }
    if (img_size < 2 || (partitioned && transformer.window[0] < 1)) {
      throw UsageError(spec.name + ": img_size=" + std::to_string(img_size) + " is too small: expected at least " +
                       (partitioned
                            ? std::to_string(transformer.partition_ratio) + " (the window and grid are img_size // " +
                                  std::to_string(transformer.partition_ratio) + ")"
                            : std::string("2")));
    }
    window_ = transformer.window;
    transformer_ = transformer;

    stem = register_module("stem", Stem(args.in_chans, cfg.stem_width, cfg.stem_bias, cfg.conv));
    init_conv_weights(*stem, cfg.weight_init);
    const int64_t stem_out = cfg.stem_width.back();
    feature_info_.push_back({stem_out, 2, "stem"});

    int64_t total = 0;
    for (int64_t d : cfg.depths) total += d;
    const auto dpr = layers::drop_path_rates(args.drop_path_rate.value_or(0.0), total);
    stages = register_module("stages", nn::Sequential());
    int64_t in_chs = stem_out, feat = img_size / 2, first = 0, reduction = 2;
    for (size_t i = 0; i < cfg.embed_dim.size(); ++i) {
      feat = (feat - 1) / 2 + 1;
      reduction *= 2;
      StageArgs a;
      a.in_chs = in_chs;
      a.out_chs = cfg.embed_dim[i];
      a.block_types = extend_types(cfg.block_type[i], cfg.depths[i]);
      a.feat_size = {feat, feat};
      a.drop_path.assign(dpr.begin() + first, dpr.begin() + first + cfg.depths[i]);
      a.weight_init = cfg.weight_init;
      first += cfg.depths[i];
      stage_types_.push_back(a.block_types);
      stage_feat_.push_back(a.feat_size);
      stages->push_back(MaxxVitStage(a, cfg.conv, transformer));
      in_chs = a.out_chs;
      feature_info_.push_back({in_chs, reduction, "stages." + std::to_string(i)});
    }
    num_features_ = in_chs;
    const std::string pool = args.global_pool.value_or("avg");
    if (cfg.head_hidden_size > 0) {
      norm_mlp_head = register_module(
          "head", layers::NormMlpClassifierHead(layers::NormMlpClassifierHeadOptions(num_features_, num_classes_)
                                                    .hidden_size(cfg.head_hidden_size)
                                                    .pool_type(pool)
                                                    .drop_rate(args.drop_rate)
                                                    .norm_layer(cfg.transformer.norm_layer)
                                                    .norm_eps(cfg.transformer.norm_eps)));
    } else {
      norm = create_norm(cfg.transformer.norm_layer, num_features_, cfg.transformer.norm_eps);
      register_module("norm", norm.ptr());
      head = register_module(
          "head", layers::ClassifierHeadModule(layers::ClassifierHeadModuleOptions(num_features_, num_classes_)
                                                   .pool_type(pool)
                                                   .drop_rate(args.drop_rate)));
    }
  }

  // timm's forward_features: stem, stages, norm (Identity with a NormMlp head).
  at::Tensor forward_features(at::Tensor input) override {
    check_input(input);
    return apply_norm(stages->forward(stem(input)));
  }
  std::vector<FeatureInfo> feature_info() const override { return feature_info_; }
  // timm's forward_intermediates: level 0 the stem, level i the output of stage i - 1; the final
  // norm applies to the last stage's (norm=True) and to the final features when the last stage ran.
  Intermediates forward_intermediates(at::Tensor input,
                                      const IntermediatesOptions& options = IntermediatesOptions()) override {
    check_output_fmt(describe_model(*this), options.output_fmt(), {"NCHW"});
    const int64_t num_stages = static_cast<int64_t>(stages->size());
    const auto [take_indices, max_index] = feature_take_indices(num_stages + 1, options.indices());
    const std::vector<bool> take = take_mask(num_stages + 1, take_indices);
    check_input(input);
    Intermediates out;
    at::Tensor x = stem(input);
    if (take[0]) out.intermediates.push_back(x);
    const int64_t stages_run = options.stop_early() ? max_index : num_stages;
    int64_t feat_idx = 0;
    for (int64_t i = 0; i < stages_run; ++i) {
      x = stages->ptr<MaxxVitStageImpl>(static_cast<size_t>(i))->forward(x);
      feat_idx = i + 1;
      if (take[static_cast<size_t>(feat_idx)]) {
        out.intermediates.push_back(options.norm() && feat_idx == num_stages ? apply_norm(x) : x);
      }
    }
    if (options.intermediates_only()) return out;
    out.final = feat_idx == num_stages ? apply_norm(x) : x;
    return out;
  }
  at::Tensor forward_head(at::Tensor x, bool pre_logits = false) override {
    if (!norm_mlp_head.is_empty()) return pre_logits ? norm_mlp_head->forward_pre_logits(x) : norm_mlp_head(x);
    return pre_logits ? head->forward_pre_logits(x) : head(x);
  }
  at::Tensor forward(at::Tensor x) override { return forward_head(forward_features(x)); }
  // timm: each stage's grad_checkpointing (checkpoint_seq over its blocks).
  void set_grad_checkpointing(bool enable) override {
    for (size_t i = 0; i < stages->size(); ++i) stages->ptr<MaxxVitStageImpl>(i)->grad_checkpointing = enable;
  }
  int64_t num_classes() const override { return num_classes_; }
  const PretrainedCfg& pretrained_cfg() const override { return cfg_; }
  // timm's no_weight_decay: every parameter of a relative position table or MLP.
  std::vector<std::string> no_weight_decay() const override {
    std::vector<std::string> out;
    for (const auto& item : named_parameters()) {
      const std::string& key = item.key();
      if (key.find("relative_position_bias_table") != std::string::npos ||
          key.find("rel_pos.mlp") != std::string::npos) {
        out.push_back(key);
      }
    }
    return out;
  }
  // timm's group_matcher (the same for coarse).
  GroupMatcher group_matcher(bool /*coarse*/) const override {
    return {{"stem", {{"^stem", std::nullopt}}},
            {"blocks", {{R"(^stages\.(\d+))", std::nullopt}, {"^norm", std::vector<double>{99999}}}}};
  }

  Stem stem{nullptr};
  nn::Sequential stages{nullptr};
  nn::AnyModule norm;  // empty with a NormMlp head (timm's Identity)
  layers::ClassifierHeadModule head{nullptr};
  layers::NormMlpClassifierHead norm_mlp_head{nullptr};  // "head" when head_hidden_size

 private:
  at::Tensor apply_norm(const at::Tensor& x) { return norm.is_empty() ? x : norm.forward(x); }

  // What timm's layers would refuse (window partition asserts, mismatched
  // residual shapes, a relative position bias of another size), checked
  // before running, as UsageErrors naming the model: the sizes each stage
  // produces from the input's, through timm's stride-2 convs (rounding up)
  // and 2x2 pools (rounding down).
  void check_input(const at::Tensor& x) const {
    const std::string model = describe_model(*this);
    if (x.dim() != 4 || x.size(1) != in_chans_) {
      throw UsageError(model + ": expected an input of shape (N, " + std::to_string(in_chans_) + ", H, W), got " +
                       shape_text(x.sizes()));
    }
    const std::string got = "input " + std::to_string(x.size(2)) + "x" + std::to_string(x.size(3));
    int64_t hw[2] = {conv_out_size(x.size(2)), conv_out_size(x.size(3))};
    const ConvCfg& conv = cfg_model_.conv;
    for (size_t s = 0; s < stage_types_.size(); ++s) {
      const auto& types = stage_types_[s];
      for (int64_t& size : hw) {
        int64_t main = 0, shortcut = 0;
        if (types[0] == "T") {
          main = shortcut = pool_out_size(transformer_.pool_type, "", size);
        } else if (conv.block_type == "convnext") {
          main = conv.stride_mode == "pool" ? pool_out_size(conv.downsample_pool_type, "", size) : conv_out_size(size);
          shortcut = pool_out_size("avg2", "", size);
        } else {
          main = conv.stride_mode == "pool" ? pool_out_size(conv.downsample_pool_type, conv.padding, size)
                                            : conv_out_size(size);
          shortcut = pool_out_size(conv.pool_type, conv.padding, size);
        }
        if (main < 1 || main != shortcut) {
          throw UsageError(model + ": " + got + " does not fit: stage " + std::to_string(s) + " halves a map side of " +
                           std::to_string(size) + (main < 1 ? " to nothing" : " unevenly") +
                           "; use an input whose sides are multiples of 32");
        }
        size = main;
      }
      for (const auto& t : types) {
        if (t == "T" && (hw[0] != stage_feat_[s][0] || hw[1] != stage_feat_[s][1])) {
          throw UsageError(model + ": " + got + " gives a " + std::to_string(hw[0]) + "x" + std::to_string(hw[1]) +
                           " map in stage " + std::to_string(s) + ", whose attention covers " +
                           std::to_string(stage_feat_[s][0]) + "x" + std::to_string(stage_feat_[s][1]) +
                           " (the model's img_size; pass --model-kwargs img_size=<input size>)");
        }
        if ((t == "M" || t == "PM") && (hw[0] % window_[0] != 0 || hw[1] % window_[1] != 0)) {
          throw UsageError(model + ": " + got + " gives a " + std::to_string(hw[0]) + "x" + std::to_string(hw[1]) +
                           " map in stage " + std::to_string(s) + ", not divisible by the " +
                           std::to_string(window_[0]) + "x" + std::to_string(window_[1]) +
                           " window / grid (img_size // 32; pass --model-kwargs img_size=<size>)");
        }
      }
    }
  }

  static std::string shape_text(at::IntArrayRef sizes) {
    std::string text = "(";
    for (size_t i = 0; i < sizes.size(); ++i) {
      if (i > 0) text += ", ";
      text += std::to_string(sizes[i]);
    }
    return text + ")";
  }

  MaxxVitCfg cfg_model_;
  TransformerCfg transformer_;
  PretrainedCfg cfg_;
  int64_t num_classes_;
  int64_t in_chans_;
  int64_t num_features_ = 0;
  WindowSize window_{0, 0};
  std::vector<std::vector<std::string>> stage_types_;
  std::vector<WindowSize> stage_feat_;
  std::vector<FeatureInfo> feature_info_;
};

std::string describe(const MaxxVitSpec& spec, const MaxxVitCfg& cfg) {
  std::string kind = "CoAtNet";
  const std::string& first = cfg.block_type[0][0];
  if (first == "M" || first == "PM") kind = cfg.conv.block_type == "convnext" ? "MaxxViT" : "MaxViT";
  if (first == "C" && cfg.conv.block_type == "convnext") kind = "CoAtNeXt";
  std::string text = kind + " (embed_dim " + joined_ints(cfg.embed_dim) + ", depths " + joined_ints(cfg.depths);
  text += ", ";
  text += std::to_string(spec.img_size);
  text += " px)";
  return text;
}

}  // namespace
}  // namespace timm::maxxvit

TIMM_PLUGIN("maxxvit") {
  const auto cfgs = timm::maxxvit::model_cfgs();
  for (const auto& spec : timm::maxxvit::maxxvit_specs()) {
    const timm::maxxvit::MaxxVitCfg& cfg = cfgs.at(spec.cfg);
    registrar.add_model(spec.name, timm::maxxvit::describe(spec, cfg),
                        [spec, cfg](const timm::ModelArgs& args) -> timm::ModelPtr {
                          return std::make_shared<timm::maxxvit::MaxxVitImpl>(spec, cfg, args);
                        });
  }
}
