// The blocks of the maxxvit plugin (maxxvit.cpp builds the models from them),
// as timm/models/maxxvit.py: the block configurations (MaxxVitConvCfg,
// MaxxVitTransformerCfg), Stem, Downsample2d, MbConvBlock, ConvNeXtBlock,
// the channels-last and NCHW attentions with their relative position
// encodings (timm/layers/pos_embed_rel.hpp), TransformerBlock2d (CoAtNet's
// 'T'), PartitionAttentionCl (window / grid attention + MLP), MaxxVitBlock
// ('M': conv block, window attention, grid attention),
// ParallelPartitionAttention / ParallelMaxxVitBlock ('PM') and the stage.
// Module names are timm's, so state_dict keys equal timm's. Internal to this
// plugin.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/container/any.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/pimpl.h>

#include "timm/layers/activations.hpp"
#include "timm/layers/drop_path.hpp"
#include "timm/layers/fast_norm.hpp"
#include "timm/layers/layer_scale.hpp"
#include "timm/layers/linear.hpp"
#include "timm/layers/mlp.hpp"
#include "timm/layers/pos_embed_rel.hpp"
#include "timm/layers/squeeze_excite.hpp"
#include "timm/layers/window_attention.hpp"

namespace timm::maxxvit {

namespace nn = torch::nn;
using layers::WindowSize;

// timm's MaxxVitConvCfg, after __post_init__ (finalize()).
struct ConvCfg {
  std::string block_type = "mbconv";  // or "convnext"
  double expand_ratio = 4.0;
  bool expand_output = true;
  int64_t kernel_size = 3;
  int64_t group_size = 1;
  bool pre_norm_act = false;
  bool output_bias = true;
  std::string stride_mode = "dw";  // "pool", "1x1", "dw"
  std::string pool_type = "avg2";
  std::string downsample_pool_type = "avg2";
  std::string padding;  // "" or "same"
  bool attn_early = false;
  std::string attn_layer = "se";
  std::string attn_act_layer = "silu";
  double attn_ratio = 0.25;
  std::optional<double> init_values = 1e-6;  // ConvNeXt blocks' layer scale
  std::string act_layer = "gelu";
  std::string norm_layer;
  std::string norm_layer_cl;
  std::optional<double> norm_eps;

  // timm's __post_init__: the block type's default norms and eps.
  void finalize();
};

// timm's MaxxVitTransformerCfg; the partition (window and grid) size is
// img_size // partition_ratio (no cfg sets window_size).
struct TransformerCfg {
  int64_t dim_head = 32;
  bool head_first = true;
  double expand_ratio = 4.0;
  bool expand_first = true;
  bool shortcut_bias = true;
  bool attn_bias = true;
  std::string pool_type = "avg2";
  std::string rel_pos_type = "bias";  // "bias", "mlp", "bias_tf" or "" (none)
  int64_t rel_pos_dim = 512;
  int64_t partition_ratio = 32;
  WindowSize window{0, 0};  // set by the model from img_size
  bool no_block_attn = false;
  std::optional<double> init_values;
  std::string act_layer = "gelu";
  std::string norm_layer = "layernorm2d";
  std::string norm_layer_cl = "layernorm";
  double norm_eps = 1e-6;
};

// timm's weight_init schemes the cfgs use: "vit_eff" (efficientnet-like
// convs, xavier transformers) and "normal" (std .02).
void init_conv_weights(nn::Module& module, const std::string& scheme);
void init_transformer_weights(nn::Module& module, const std::string& scheme);

// The output size of one spatial dimension of `size` through a stride-2
// downsampling pool (Downsample2d's) or conv: the pools avg2 / max2 without
// 'same' padding floor, everything else rounds up.
int64_t pool_out_size(const std::string& pool_type, const std::string& padding, int64_t size);
inline int64_t conv_out_size(int64_t size) { return (size + 1) / 2; }

// timm's LayerNormAct2d (the convnext cfgs' stem norm): LayerNorm over the
// channels of NCHW, then act. Keys weight, bias. Follows timm's fast norm.
class LayerNormAct2dImpl : public nn::Module, public layers::FastNormLayer {
 public:
  LayerNormAct2dImpl(int64_t channels, double eps, const std::string& act_layer, bool apply_act);
  at::Tensor forward(const at::Tensor& x);
  bool fast_norm() const override { return fast_norm_; }
  at::Tensor weight, bias;
  layers::Activation act{nullptr};

 private:
  int64_t channels_;
  double eps_;
  bool fast_norm_ = layers::is_fast_norm();
};
TORCH_MODULE(LayerNormAct2d);

// timm's get_norm_act_layer(norm_layer, act_layer)(channels, eps, apply_act):
// BatchNormAct2d ("batchnorm2d") or LayerNormAct2d ("layernorm2d").
nn::AnyModule create_norm_act(const std::string& norm_layer, int64_t channels, double eps, const std::string& act_layer,
                              bool apply_act = true);
// timm's get_norm_layer(norm_layer)(channels, eps): LayerNorm2d, BatchNorm2d (NCHW) or LayerNorm (channels-last).
nn::AnyModule create_norm(const std::string& norm_layer, int64_t channels, double eps);

// timm's Downsample2d: a stride-2 pool ("max" 3x3, "max2" 2x2, "avg" 3x3
// without the padding counted, "avg2" 2x2; TF 'same' padding when padding is
// "same"), then "expand" (1x1 conv) when dim != dim_out.
class Downsample2dImpl : public nn::Module {
 public:
  Downsample2dImpl(int64_t dim, int64_t dim_out, const std::string& pool_type, const std::string& padding, bool bias);
  at::Tensor forward(const at::Tensor& x);
  nn::Conv2d expand{nullptr};

 private:
  std::string pool_type_;
  std::string padding_;
};
TORCH_MODULE(Downsample2d);

// timm's Stem: conv1 (3x3 s2), norm1 (norm + act), conv2 (3x3).
class StemImpl : public nn::Module {
 public:
  StemImpl(int64_t in_chs, std::vector<int64_t> out_chs, bool bias, const ConvCfg& cfg);
  at::Tensor forward(const at::Tensor& x);
  nn::AnyModule conv1, norm1, conv2;
};
TORCH_MODULE(Stem);

// timm's MbConvBlock: pre-norm inverted bottleneck, shortcut Downsample2d
// at stride 2, stride by pool / 1x1 / depthwise conv, SE before or after norm2.
class MbConvBlockImpl : public nn::Module {
 public:
  MbConvBlockImpl(int64_t in_chs, int64_t out_chs, int64_t stride, const ConvCfg& cfg, double drop_path);
  at::Tensor forward(const at::Tensor& x);
  Downsample2d shortcut{nullptr};
  nn::AnyModule pre_norm;
  Downsample2d down{nullptr};
  nn::AnyModule conv1_1x1, norm1, conv2_kxk;
  layers::SEModule se_early{nullptr};
  nn::AnyModule norm2;
  layers::SEModule se{nullptr};
  nn::AnyModule conv3_1x1;
  layers::DropPath drop_path{nullptr};
};
TORCH_MODULE(MbConvBlock);

// timm's ConvNeXtBlock (conv_mlp, kernel 7): shortcut (Downsample2d at
// stride 2, 1x1 conv for a width change), depthwise conv, norm, ConvMlp,
// layer scale.
class ConvNeXtBlockImpl : public nn::Module {
 public:
  ConvNeXtBlockImpl(int64_t in_chs, int64_t out_chs, int64_t stride, const ConvCfg& cfg, double drop_path);
  at::Tensor forward(const at::Tensor& x);
  Downsample2d shortcut_down{nullptr};  // "shortcut" at stride 2
  nn::Conv2d shortcut_conv{nullptr};    // "shortcut" for a width change
  Downsample2d down{nullptr};
  nn::Conv2d conv_dw{nullptr};
  nn::AnyModule norm;
  layers::ConvMlp mlp{nullptr};
  layers::LayerScale2d ls{nullptr};
  layers::DropPath drop_path{nullptr};
};
TORCH_MODULE(ConvNeXtBlock);

// An attention's "rel_pos" child, whichever of timm's three it is (none when
// rel_pos_type is "").
struct RelPos {
  layers::RelPosBias bias{nullptr};
  layers::RelPosMlp mlp{nullptr};
  layers::RelPosBiasTf tf{nullptr};
  // Registers the cfg's type as "rel_pos" of `parent`.
  void create(nn::Module& parent, const TransformerCfg& cfg, WindowSize window, int64_t num_heads);
  // The additive bias, undefined without one.
  at::Tensor get_bias();
  WindowSize window{0, 0};
};

// timm's AttentionCl: channels-last (B, ..., C) multi-head attention,
// scaled_dot_product_attention with the relative position bias as mask.
class AttentionClImpl : public nn::Module {
 public:
  AttentionClImpl(int64_t dim, int64_t dim_out, const TransformerCfg& cfg, WindowSize window);
  at::Tensor forward(const at::Tensor& x);
  layers::Linear qkv{nullptr};
  RelPos rel_pos;
  layers::Linear proj{nullptr};

 private:
  int64_t num_heads_, dim_head_;
  bool head_first_;
  double attn_drop_;
  nn::Dropout proj_drop_{nullptr};
};
TORCH_MODULE(AttentionCl);

// timm's Attention2d: NCHW multi-head attention over all positions (1x1 conv qkv and proj).
class Attention2dImpl : public nn::Module {
 public:
  Attention2dImpl(int64_t dim, int64_t dim_out, const TransformerCfg& cfg, WindowSize feat_size);
  at::Tensor forward(const at::Tensor& x);
  nn::Conv2d qkv{nullptr};
  RelPos rel_pos;
  nn::Conv2d proj{nullptr};

 private:
  int64_t num_heads_, dim_head_;
  double attn_drop_;
  nn::Dropout proj_drop_{nullptr};
};
TORCH_MODULE(Attention2d);

// timm's TransformerBlock2d (CoAtNet 'T'): NCHW pre-norm attention over the
// whole map (norm1 = norm + Downsample2d at stride 2) and ConvMlp. The
// relative position encoding covers `feat_size`, the stage's output size.
class TransformerBlock2dImpl : public nn::Module {
 public:
  TransformerBlock2dImpl(int64_t dim, int64_t dim_out, int64_t stride, const TransformerCfg& cfg, WindowSize feat_size,
                         double drop_path);
  at::Tensor forward(const at::Tensor& x);
  Downsample2d shortcut{nullptr};
  nn::AnyModule norm1;
  Attention2d attn{nullptr};
  layers::LayerScale2d ls1{nullptr};
  layers::DropPath drop_path1{nullptr};
  nn::AnyModule norm2;
  layers::ConvMlp mlp{nullptr};
  layers::LayerScale2d ls2{nullptr};
  layers::DropPath drop_path2{nullptr};
};
TORCH_MODULE(TransformerBlock2d);

// timm's PartitionAttentionCl (NHWC): window ("block") or grid partition,
// attention, MLP.
class PartitionAttentionClImpl : public nn::Module {
 public:
  PartitionAttentionClImpl(int64_t dim, bool block, const TransformerCfg& cfg, double drop_path);
  at::Tensor forward(const at::Tensor& x);
  nn::AnyModule norm1;
  AttentionCl attn{nullptr};
  layers::LayerScale ls1{nullptr};
  layers::DropPath drop_path1{nullptr};
  nn::AnyModule norm2;
  layers::Mlp mlp{nullptr};
  layers::LayerScale ls2{nullptr};
  layers::DropPath drop_path2{nullptr};

 private:
  bool block_;
  WindowSize partition_;
};
TORCH_MODULE(PartitionAttentionCl);

// timm's ParallelPartitionAttention (NHWC): window and grid attention side by
// side (each to dim / 2, concatenated), one MLP.
class ParallelPartitionAttentionImpl : public nn::Module {
 public:
  ParallelPartitionAttentionImpl(int64_t dim, const TransformerCfg& cfg, double drop_path);
  at::Tensor forward(const at::Tensor& x);
  nn::AnyModule norm1;
  AttentionCl attn_block{nullptr};
  AttentionCl attn_grid{nullptr};
  layers::LayerScale ls1{nullptr};
  layers::DropPath drop_path1{nullptr};
  nn::AnyModule norm2;
  layers::Mlp mlp{nullptr};
  layers::LayerScale ls2{nullptr};
  layers::DropPath drop_path2{nullptr};

 private:
  WindowSize partition_;
};
TORCH_MODULE(ParallelPartitionAttention);

// timm's MaxxVitBlock ('M'): conv block (MbConv or ConvNeXt), then window
// attention (unless no_block_attn) and grid attention, channels-last.
class MaxxVitBlockImpl : public nn::Module {
 public:
  MaxxVitBlockImpl(int64_t dim, int64_t dim_out, int64_t stride, const ConvCfg& conv_cfg,
                   const TransformerCfg& transformer_cfg, double drop_path);
  at::Tensor forward(const at::Tensor& x);
  nn::AnyModule conv;
  PartitionAttentionCl attn_block{nullptr};
  PartitionAttentionCl attn_grid{nullptr};
};
TORCH_MODULE(MaxxVitBlock);

// timm's ParallelMaxxVitBlock ('PM'): two conv blocks ("conv.0", "conv.1"), then ParallelPartitionAttention.
class ParallelMaxxVitBlockImpl : public nn::Module {
 public:
  ParallelMaxxVitBlockImpl(int64_t dim, int64_t dim_out, int64_t stride, const ConvCfg& conv_cfg,
                           const TransformerCfg& transformer_cfg, double drop_path);
  at::Tensor forward(const at::Tensor& x);
  nn::Sequential conv{nullptr};
  ParallelPartitionAttention attn{nullptr};
};
TORCH_MODULE(ParallelMaxxVitBlock);

// One stage: its blocks' types ('C', 'T', 'M', 'PM'), the first block strided by 2.
struct StageArgs {
  int64_t in_chs = 0;
  int64_t out_chs = 0;
  std::vector<std::string> block_types;  // one per block
  WindowSize feat_size{0, 0};            // the stage's output size (the 'T' blocks' rel-pos)
  std::vector<double> drop_path;         // per block
  std::string weight_init;               // timm's cfg.weight_init, applied per block as its init_weights
};

// timm's MaxxVitStage: "blocks", checkpointed one by one with grad_checkpointing.
class MaxxVitStageImpl : public nn::Module {
 public:
  MaxxVitStageImpl(const StageArgs& args, const ConvCfg& conv_cfg, const TransformerCfg& transformer_cfg);
  at::Tensor forward(const at::Tensor& x);
  nn::Sequential blocks{nullptr};
  bool grad_checkpointing = false;
};
TORCH_MODULE(MaxxVitStage);

}  // namespace timm::maxxvit
