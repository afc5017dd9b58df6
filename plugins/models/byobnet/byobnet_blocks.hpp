// The pieces of the byobnet plugin that byobnet.cpp builds its models from,
// beyond its ByobBlock (RepVGG / basic / bottleneck / dark / edge / MobileViT
// blocks): the block arguments of timm's create_byob_stages, the blocks'
// attention layer (timm's get_attn 'se' / 'eca' / 'gc' / 'gca'), the
// conv-norm-act of the model's norm layer (BatchNorm, or EvoNorm-S0a for the
// *_evos RegNetZs: ByobCna), the 'avg' shortcut (DownsampleAvg), the common
// base of the blocks, MobileOne's MobileOneBlock (with its reparameterize())
// and timm's multi-conv Stem ('quad', 'quad2', 'tiered', 'deep'). Module
// names are timm's, so state_dict keys equal timm's. Internal to this plugin.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/pimpl.h>

#include "timm/layers/activations.hpp"
#include "timm/layers/drop_path.hpp"
#include "timm/layers/eca.hpp"
#include "timm/layers/evo_norm.hpp"
#include "timm/layers/global_context.hpp"
#include "timm/layers/non_local_attn.hpp"
#include "timm/layers/norm_act.hpp"
#include "timm/layers/squeeze_excite.hpp"
#include "timm/models/features.hpp"

namespace timm::byobnet {

namespace nn = torch::nn;

// timm's attn_layer with its attn_kwargs: "" (none), "se" (SEModule
// rd_ratio / rd_divisor), "eca" (EcaModule), "gc" (GlobalContext), "gca"
// (GlobalContext, fuse_add instead of fuse_scale) or "bat" (BatNonLocalAttn
// with block_size; its own rd_ratio 0.25 / rd_divisor 8, as bat_resnext26ts's
// attn_kwargs set only block_size).
struct AttnCfg {
  std::string type;
  double rd_ratio = 1.0 / 16.0;
  int64_t rd_divisor = 8;
  int64_t block_size = 7;
};

// The arguments timm's create_byob_stages passes a block (and the
// block_kwargs these models set).
struct ByobBlockArgs {
  std::string type;
  int64_t in_chs = 0;
  int64_t out_chs = 0;
  int64_t stride = 1;
  int64_t first_dilation = 1;
  int64_t dilation = 1;
  int64_t group_size = 0;
  double bottle_ratio = 1.0;
  double drop_path = 0.0;
  AttnCfg attn;
  std::string act = "relu";
  std::string norm = "batchnorm";  // or "evos" (see ByobCna)
  std::string downsample = "conv1x1";
  // timm's aa_layer of the stage convs: "" or "avg" (a strided conv runs at
  // stride 1, then an average pool of kernel and stride `stride` after its
  // norm and act: ByobCna's aa_stride).
  std::string aa;
  int64_t kernel_size = 3;
  bool bottle_in = false;
  bool linear_out = false;
  bool extra_conv = false;
  int64_t num_conv_branches = 1;  // MobileOneBlock's
  int64_t transformer_dim = 0;
  int64_t transformer_depth = 0;
  int64_t patch_size = 0;
};

// timm's num_groups: group_size 0 is a plain conv, else channels / group_size.
inline int64_t num_groups(int64_t group_size, int64_t channels) { return group_size == 0 ? 1 : channels / group_size; }

// timm's ConvNormAct as the layer functions build it (BatchNorm, `act`).
layers::ConvNormAct byob_cna(int64_t in, int64_t out, int64_t kernel, int64_t stride = 1, int64_t dilation = 1,
                             int64_t groups = 1, bool apply_act = true, const std::string& act = "relu");

// timm's ConvNormAct with norm_layer partial(EvoNorm2dS0a, group_size=16), as
// the *_evos RegNetZs build it: "conv" (no bias) then "bn", an EvoNorm2dS0a
// whose own activation (x * sigmoid(x * v)) replaces the model's act
// (timm's EvoNorm takes no act_layer); without apply_act it has no v.
class ConvEvoNormImpl : public nn::Module {
 public:
  ConvEvoNormImpl(int64_t in, int64_t out, int64_t kernel, int64_t stride, int64_t dilation, int64_t groups,
                  bool apply_act);
  at::Tensor forward(const at::Tensor& x);

  nn::Conv2d conv{nullptr};
  layers::EvoNorm2dS0a bn{nullptr};
};
TORCH_MODULE(ConvEvoNorm);

// timm's layers.conv_norm_act for the model's norm_layer (ByoModelCfg's
// norm_layer): "batchnorm", the SDK's ConvNormAct (BatchNormAct2d with `act`),
// or "evos", a ConvEvoNorm (EvoNorm2dS0a, group size 16; `act` unused). One
// of the two is set; neither is registered until register_on / push_to.
// aa_stride > 1: timm's aa_layer 'avg' (ConvNormAct's "aa", an
// nn.AvgPool2d(stride) without parameters) after the norm and act, the conv
// itself at stride 1.
struct ByobCna {
  layers::ConvNormAct bn_cna{nullptr};
  ConvEvoNorm evo_cna{nullptr};
  int64_t aa_stride = 1;

  explicit operator bool() const { return bn_cna || evo_cna; }
  at::Tensor operator()(const at::Tensor& x);
  // The norm's weight ("bn.weight"), which zero_init_last zeroes.
  at::Tensor norm_weight() const;
  // Registers the module on `parent` under `name`; returns *this.
  ByobCna& register_on(nn::Module& parent, const std::string& name);
  // Appends the module to `seq` under `name`.
  void push_to(nn::Sequential& seq, const std::string& name) const;
};

// A ByobCna of `norm` ("batchnorm" or "evos"); UsageError for another norm.
// With aa "avg" and stride > 1 the conv runs at stride 1 and an average pool
// strides after it (timm's ConvNormAct with aa_layer); aa "" or stride 1: none.
ByobCna make_cna(const std::string& norm, int64_t in, int64_t out, int64_t kernel, int64_t stride = 1,
                 int64_t dilation = 1, int64_t groups = 1, bool apply_act = true, const std::string& act = "relu",
                 const std::string& aa = "");

// A block's attention layer (timm's layers.attn(channels)), registered on
// its parent block under timm's name; empty where the block has none.
class BlockAttn {
 public:
  BlockAttn() = default;
  BlockAttn(nn::Module& parent, const std::string& name, const AttnCfg& cfg, int64_t channels);

  explicit operator bool() const { return se || eca || gc || bat; }
  at::Tensor forward(const at::Tensor& x);
  // timm's attn.reset_parameters() that the blocks' init_weights call:
  // GlobalContext's conv_attn kaiming-normal (fan_in) and mlp_add.fc2 zero;
  // SE, ECA and BAT have none.
  void reset_parameters();

  layers::SEModule se{nullptr};
  layers::EcaModule eca{nullptr};
  layers::GlobalContext gc{nullptr};
  layers::BatNonLocalAttn bat{nullptr};
};

// timm's DownsampleAvg (downsample 'avg'): a 2x2 average pool (ceil mode,
// padding not counted; timm's AvgPool2dSame at stride 1 in dilated stages;
// none without stride or dilation), then a 1x1 ConvNormAct without act
// ("conv").
class DownsampleAvgImpl : public nn::Module {
 public:
  DownsampleAvgImpl(int64_t in_chs, int64_t out_chs, int64_t stride, int64_t dilation, const std::string& act);
  at::Tensor forward(const at::Tensor& x);

  layers::ConvNormAct conv{nullptr};

 private:
  int64_t avg_stride_ = 1;
  bool pool_ = false;
  bool pool_same_ = false;
};
TORCH_MODULE(DownsampleAvg);

// What every block of a stage does: forward, timm's init_weights after the
// model-wide init, and reparameterize() (false where there is nothing to fold).
class ByobBlockBaseImpl : public nn::Module {
 public:
  virtual at::Tensor forward(const at::Tensor& x) = 0;
  virtual void init_block(bool zero_init_last) = 0;
  virtual bool reparameterize() { return false; }
};
using ByobBlockPtr = std::shared_ptr<ByobBlockBaseImpl>;

// timm's MobileOneBlock: an identity BatchNorm where the shape allows,
// num_conv_branches kxk ConvNormActs without act ("conv_kxk.<i>"), a 1x1
// scale branch for k > 1, summed (drop path before the identity is added),
// then attn and act. The convs take no dilation, as timm's.
class MobileOneBlockImpl : public ByobBlockBaseImpl {
 public:
  explicit MobileOneBlockImpl(const ByobBlockArgs& a);
  at::Tensor forward(const at::Tensor& x) override;
  // timm's MobileOneBlock has no init_weights: only attn's reset_parameters
  // (none for SE) would be left.
  void init_block(bool zero_init_last) override;
  // timm's reparameterize: every branch and the identity BatchNorm folded
  // into one biased conv, reparam_conv, registered last as timm's.
  bool reparameterize() override;

  layers::BatchNormAct2d identity{nullptr};
  nn::ModuleList conv_kxk{nullptr};
  layers::ConvNormAct conv_scale{nullptr};
  layers::DropPath drop_path{nullptr};
  BlockAttn attn;
  layers::Activation act{nullptr};
  nn::Conv2d reparam_conv{nullptr};

 private:
  std::vector<layers::ConvNormAct> branches_;
  int64_t groups_ = 1;
  int64_t kernel_size_ = 3;
};
TORCH_MODULE(MobileOneBlock);

// timm's Stem (stride 4): 3x3 convs conv1..convN, ConvNormActs of `norm`
// (ByobCna: "batchnorm" or "evos"), the first N - num_act plain convs without
// bias; the first at stride 2, the last at stride 2 too without a pool, else
// followed by `pool` ("maxpool": 3x3 / 2; "avg2": a 2x2 / 2 average pool, the
// CLIP ResNets').
// `feature_info` is timm's (modules "stem.<conv>"), its last entry the stem's
// output; `tap` the layer index whose output forward_intermediates takes (-1:
// the output). Throws UsageError for an unknown pool.
struct ByobStem {
  nn::Sequential seq{nullptr};
  std::vector<FeatureInfo> feature_info;
  int64_t tap = -1;
  std::string first_conv;
};
ByobStem make_byob_stem(int64_t in_chs, const std::vector<int64_t>& chs, const std::string& pool, int64_t num_act,
                        const std::string& act, const std::string& norm = "batchnorm");

// timm's Stem.forward_intermediates: the output, and the tapped layer's output
// (undefined without a tap).
std::pair<at::Tensor, at::Tensor> stem_forward_intermediates(const ByobStem& stem, at::Tensor x);

}  // namespace timm::byobnet
