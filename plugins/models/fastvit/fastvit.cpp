// FastViT (timm/models/fastvit.py) in its training (un-reparameterised)
// form, with timm's module names so state_dict keys equal timm's: the
// RepMixer models fastvit_t8, t12, s12 and the attention models fastvit_sa12,
// sa24, sa36, ma36 (RepMixer stages 0-2, a RepConditionalPosEnc and
// AttentionBlocks in stage 3). Stem (stem.0-2, MobileOneBlocks), four stages
// (stages.N.downsample = PatchEmbed from stage 1 on, stages.3.pos_emb for the
// attention models, stages.N.blocks.M), final_conv (a MobileOneBlock with SE
// to twice the last width) and head (timm's ClassifierHead: global_pool,
// drop, fc).
//
// reparameterize() folds it as timm's reparameterize_model (validate.py
// --reparam): each MobileOneBlock's branches (conv_kxk, conv_scale, identity
// BatchNorm) into one biased reparam_conv, each ReparamLargeKernelConv's
// large_conv + small_conv, each RepMixer's norm, mixer and layer_scale (its
// own MobileOneBlocks folded first, the RepMixer counted once) and each
// RepConditionalPosEnc's pos_enc + identity, with timm's keys in timm's order
// (reparam_conv after a block's remaining children); ConvMlp's conv + bn is
// not folded, as timm's. Building the model in inference_mode is not
// supported.
//
// Supported: num_classes, in_chans, drop_rate (before head.fc),
// drop_path_rate (timm's linear rule over all blocks), global_pool, feature
// extraction (one level per stage, NCHW), grad checkpointing. Not here:
// fork_feat, the MobileCLIP image towers fastvit_mci0 .. mci4, and
// --model-kwargs.
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>

#include "timm/base/error.hpp"
#include "timm/layers/activations.hpp"
#include "timm/layers/batch_norm.hpp"
#include "timm/layers/classifier.hpp"
#include "timm/layers/drop_path.hpp"
#include "timm/layers/linear.hpp"
#include "timm/layers/norm_act.hpp"
#include "timm/layers/reparam.hpp"
#include "timm/layers/squeeze_excite.hpp"
#include "timm/layers/weight_init.hpp"
#include "timm/models/features.hpp"
#include "timm/models/grad_checkpoint.hpp"
#include "timm/models/model.hpp"
#include "timm/plugin/plugin.hpp"

namespace timm::fastvit {
namespace {

namespace nn = torch::nn;

// timm 1.0.31's default pretrained tag of each model (the first tag of its default_cfgs).
const std::map<std::string, std::string> kFastVitDefaultTags = {
    {"fastvit_t8", "apple_in1k"},   {"fastvit_t12", "apple_in1k"},  {"fastvit_s12", "apple_in1k"},
    {"fastvit_sa12", "apple_in1k"}, {"fastvit_sa24", "apple_in1k"}, {"fastvit_sa36", "apple_in1k"},
    {"fastvit_ma36", "apple_in1k"},
};

layers::ConvNormAct conv_bn(int64_t in, int64_t out, int64_t kernel, int64_t stride, int64_t groups) {
  return layers::ConvNormAct(
      layers::ConvNormActOptions(in, out, kernel).stride(stride).groups(groups).apply_act(false));
}

struct MobileOneArgs {
  int64_t in_chs = 0;
  int64_t out_chs = 0;
  int64_t kernel_size = 1;
  int64_t stride = 1;
  bool depthwise = false;  // timm's group_size 1; else group_size 0 (one group)
  bool use_se = false;
  bool use_act = true;
  bool use_scale_branch = true;
  int64_t num_conv_branches = 1;
};

// timm's MobileOneBlock (train-time branches): se, identity (BatchNorm2d when
// in == out and stride 1), conv_kxk.N (conv + bn), conv_scale (1x1 conv + bn,
// kernel > 1 only), act (GELU or Identity); reparam_conv once folded.
class MobileOneBlockImpl : public nn::Module {
 public:
  explicit MobileOneBlockImpl(const MobileOneArgs& a)
      : args_(a), groups_(a.depthwise ? a.in_chs : 1), use_act_(a.use_act) {
    const int64_t groups = groups_;
    if (a.use_se) se = register_module("se", layers::SEModule(layers::SEModuleOptions(a.out_chs).rd_divisor(1)));
    if (a.out_chs == a.in_chs && a.stride == 1) {
      identity = register_module("identity", layers::BatchNorm2d(nn::BatchNorm2dOptions(a.in_chs)));
    }
    if (a.num_conv_branches > 0) {
      conv_kxk = register_module("conv_kxk", nn::ModuleList());
      for (int64_t i = 0; i < a.num_conv_branches; ++i) {
        conv_kxk->push_back(conv_bn(a.in_chs, a.out_chs, a.kernel_size, a.stride, groups));
      }
    }
    if (a.kernel_size > 1 && a.use_scale_branch) {
      conv_scale = register_module("conv_scale", conv_bn(a.in_chs, a.out_chs, 1, a.stride, groups));
    }
  }

  at::Tensor forward(const at::Tensor& x) {
    at::Tensor out;
    if (reparam_conv) {
      out = reparam_conv(x);
      if (se) out = se(out);
      return use_act_ ? at::gelu(out) : out;
    }
    if (conv_scale) out = conv_scale(x);
    if (identity) out = out.defined() ? out + identity(x) : identity(x);
    if (conv_kxk) {
      for (const auto& branch : *conv_kxk) {
        const at::Tensor y = branch->as<layers::ConvNormActImpl>()->forward(x);
        out = out.defined() ? out + y : y;
      }
    }
    if (se) out = se(out);
    return use_act_ ? at::gelu(out) : out;
  }

  // timm's MobileOneBlock.reparameterize: the conv_kxk branches, conv_scale
  // (padded to kxk) and the identity BatchNorm, each with its running
  // statistics, summed in timm's order into reparam_conv (timm's
  // create_conv2d, biased), registered after se; the branches are removed.
  // False when already folded.
  bool reparameterize() {
    if (reparam_conv) return false;
    c10::NoGradGuard no_grad;
    layers::ConvWeights fused;
    if (conv_kxk) {
      for (const auto& branch : *conv_kxk) fused += layers::fuse_conv_bn(*branch->as<layers::ConvNormActImpl>());
    }
    if (conv_scale) {
      layers::ConvWeights scale = layers::fuse_conv_bn(*conv_scale);
      scale.weight = layers::pad_kernel_to(scale.weight, args_.kernel_size);
      fused += scale;
    }
    if (identity) {
      const at::Tensor eye =
          layers::identity_kernel(args_.in_chs, groups_, args_.kernel_size, identity->weight.options());
      fused += layers::fuse_bn(eye, *identity);
    }
    for (const char* name : {"identity", "conv_kxk", "conv_scale"}) {
      if (named_children().contains(name)) unregister_module(name);
    }
    layers::Conv2dArgs conv;
    conv.stride = args_.stride;
    conv.groups = groups_;
    reparam_conv = register_module(
        "reparam_conv",
        layers::make_reparam_conv(layers::create_conv2d_options(args_.in_chs, args_.out_chs, args_.kernel_size, conv),
                                  fused));
    identity = nullptr;
    conv_kxk = nullptr;
    conv_scale = nullptr;
    return true;
  }

  layers::SEModule se{nullptr};
  layers::BatchNorm2d identity{nullptr};
  nn::ModuleList conv_kxk{nullptr};
  layers::ConvNormAct conv_scale{nullptr};
  nn::Conv2d reparam_conv{nullptr};

 private:
  MobileOneArgs args_;
  int64_t groups_;
  bool use_act_;
};
TORCH_MODULE(MobileOneBlock);

// timm's ReparamLargeKernelConv as PatchEmbed builds it: depthwise large_conv
// (kernel 7) plus small_conv (kernel 3), both conv + bn; no SE, no act.
class ReparamLargeKernelConvImpl : public nn::Module {
 public:
  ReparamLargeKernelConvImpl(int64_t in, int64_t out, int64_t kernel, int64_t stride) : kernel_(kernel) {
    large_conv = register_module("large_conv", conv_bn(in, out, kernel, stride, in));
    small_conv = register_module("small_conv", conv_bn(in, out, 3, stride, in));
  }
  at::Tensor forward(const at::Tensor& x) { return reparam_conv ? reparam_conv(x) : large_conv(x) + small_conv(x); }

  // timm's ReparamLargeKernelConv.reparameterize: large_conv plus small_conv
  // (padded to the large kernel), running statistics, into reparam_conv with
  // large_conv's geometry. False when already folded.
  bool reparameterize() {
    if (reparam_conv) return false;
    c10::NoGradGuard no_grad;
    layers::ConvWeights fused = layers::fuse_conv_bn(*large_conv);
    layers::ConvWeights small = layers::fuse_conv_bn(*small_conv);
    small.weight = layers::pad_kernel_to(small.weight, kernel_);
    fused += small;
    unregister_module("large_conv");
    unregister_module("small_conv");
    reparam_conv = register_module("reparam_conv", layers::make_reparam_conv(*large_conv->conv, fused));
    large_conv = small_conv = nullptr;
    return true;
  }

  layers::ConvNormAct large_conv{nullptr}, small_conv{nullptr};
  nn::Conv2d reparam_conv{nullptr};

 private:
  int64_t kernel_;
};
TORCH_MODULE(ReparamLargeKernelConv);

// timm's LayerScale2d: x * gamma, gamma of shape (dim, 1, 1).
class LayerScale2dImpl : public nn::Module {
 public:
  LayerScale2dImpl(int64_t dim, double init_value) {
    gamma = register_parameter("gamma", at::full({dim, 1, 1}, init_value));
  }
  at::Tensor forward(const at::Tensor& x) { return x * gamma; }
  at::Tensor gamma;
};
TORCH_MODULE(LayerScale2d);

// timm's RepMixer: x + layer_scale(mixer(x) - norm(x)); norm is a
// MobileOneBlock with the identity BatchNorm only, mixer one with identity,
// a depthwise kxk and a 1x1 scale branch, neither with an act.
class RepMixerImpl : public nn::Module {
 public:
  RepMixerImpl(int64_t dim, int64_t kernel, double layer_scale_init) : dim_(dim), kernel_(kernel) {
    MobileOneArgs a{.in_chs = dim, .out_chs = dim, .kernel_size = kernel, .depthwise = true, .use_act = false};
    MobileOneArgs n = a;
    n.use_scale_branch = false;
    n.num_conv_branches = 0;
    norm = register_module("norm", MobileOneBlock(n));
    mixer = register_module("mixer", MobileOneBlock(a));
    layer_scale = register_module("layer_scale", LayerScale2d(dim, layer_scale_init));
  }
  at::Tensor forward(const at::Tensor& x) {
    return reparam_conv ? reparam_conv(x) : x + layer_scale(mixer(x) - norm(x));
  }

  // timm's RepMixer.reparameterize: mixer and norm folded (their own
  // reparameterize), then x + gamma * (mixer(x) - norm(x)) as one depthwise
  // conv: weight identity + gamma * (w_mixer - w_norm), bias gamma * (b_mixer
  // - b_norm); norm, mixer and layer_scale are removed. False when already
  // folded.
  bool reparameterize() {
    if (reparam_conv) return false;
    c10::NoGradGuard no_grad;
    mixer->reparameterize();
    norm->reparameterize();
    const at::Tensor& gamma = layer_scale->gamma;
    const at::Tensor& w_mixer = mixer->reparam_conv->weight;
    const at::Tensor eye = layers::identity_kernel(dim_, dim_, kernel_, w_mixer.options());
    layers::ConvWeights fused;
    fused.weight = eye + gamma.unsqueeze(-1) * (w_mixer - norm->reparam_conv->weight);
    fused.bias = gamma.squeeze() * (mixer->reparam_conv->bias - norm->reparam_conv->bias);
    unregister_module("norm");
    unregister_module("mixer");
    unregister_module("layer_scale");
    layers::Conv2dArgs conv;
    conv.groups = dim_;
    reparam_conv = register_module(
        "reparam_conv", layers::make_reparam_conv(layers::create_conv2d_options(dim_, dim_, kernel_, conv), fused));
    norm = mixer = nullptr;
    layer_scale = nullptr;
    return true;
  }

  MobileOneBlock norm{nullptr}, mixer{nullptr};
  LayerScale2d layer_scale{nullptr};
  nn::Conv2d reparam_conv{nullptr};

 private:
  int64_t dim_, kernel_;
};
TORCH_MODULE(RepMixer);

// timm's ConvMlp: conv (depthwise 7x7 conv + bn), fc1, GELU, drop, fc2, drop.
class ConvMlpImpl : public nn::Module {
 public:
  ConvMlpImpl(int64_t in, int64_t hidden) {
    conv = register_module("conv", conv_bn(in, in, 7, 1, in));
    fc1 = register_module("fc1", nn::Conv2d(nn::Conv2dOptions(in, hidden, 1)));
    fc2 = register_module("fc2", nn::Conv2d(nn::Conv2dOptions(hidden, in, 1)));
    // timm's ConvMlp._init_weights: every Conv2d inside trunc_normal(.02), zero bias.
    c10::NoGradGuard no_grad;
    for (nn::Conv2d* c : {&conv->conv, &fc1, &fc2}) {
      layers::trunc_normal_((*c)->weight, 0.0, 0.02);
      if ((*c)->bias.defined()) (*c)->bias.zero_();
    }
  }
  at::Tensor forward(const at::Tensor& x) { return fc2(at::gelu(fc1(conv(x)))); }
  layers::ConvNormAct conv{nullptr};
  nn::Conv2d fc1{nullptr}, fc2{nullptr};
};
TORCH_MODULE(ConvMlp);

// timm's RepConditionalPosEnc (7x7): pos_enc(x) + x, pos_enc a depthwise conv with bias.
class RepConditionalPosEncImpl : public nn::Module {
 public:
  explicit RepConditionalPosEncImpl(int64_t dim) : dim_(dim) {
    pos_enc = register_module("pos_enc", nn::Conv2d(nn::Conv2dOptions(dim, dim, kKernel).padding(3).groups(dim)));
  }
  at::Tensor forward(const at::Tensor& x) { return reparam_conv ? reparam_conv(x) : pos_enc(x) + x; }

  // timm's RepConditionalPosEnc.reparameterize: the skip folded into pos_enc
  // (weight + identity kernel, its bias as is) as reparam_conv. False when
  // already folded.
  bool reparameterize() {
    if (reparam_conv) return false;
    c10::NoGradGuard no_grad;
    const at::Tensor eye = layers::identity_kernel(dim_, dim_, kKernel, pos_enc->weight.options());
    const layers::ConvWeights fused{eye + pos_enc->weight, pos_enc->bias};
    unregister_module("pos_enc");
    reparam_conv = register_module("reparam_conv", layers::make_reparam_conv(*pos_enc, fused));
    pos_enc = nullptr;
    return true;
  }

  nn::Conv2d pos_enc{nullptr};
  nn::Conv2d reparam_conv{nullptr};

 private:
  static constexpr int64_t kKernel = 7;
  int64_t dim_;
};
TORCH_MODULE(RepConditionalPosEnc);

// timm's fastvit Attention (head_dim 32, qkv without bias, proj with bias) on
// NCHW maps, through scaled_dot_product_attention as timm's fused path.
class FastVitAttentionImpl : public nn::Module {
 public:
  explicit FastVitAttentionImpl(int64_t dim) : num_heads_(dim / kHeadDim) {
    qkv = register_module("qkv", layers::Linear(nn::LinearOptions(dim, 3 * dim).bias(false)));
    proj = register_module("proj", layers::Linear(dim, dim));
  }
  at::Tensor forward(const at::Tensor& input) {
    const int64_t batch = input.size(0), channels = input.size(1), height = input.size(2), width = input.size(3);
    const int64_t tokens = height * width;
    const at::Tensor x = input.flatten(2).transpose(-2, -1);
    const auto heads = qkv(x).reshape({batch, tokens, 3, num_heads_, kHeadDim}).permute({2, 0, 3, 1, 4});
    at::Tensor out = at::scaled_dot_product_attention(heads[0], heads[1], heads[2]);
    out = proj(out.transpose(1, 2).reshape({batch, tokens, channels}));
    return out.transpose(-2, -1).reshape({batch, channels, height, width});
  }
  layers::Linear qkv{nullptr}, proj{nullptr};

 private:
  static constexpr int64_t kHeadDim = 32;
  int64_t num_heads_;
};
TORCH_MODULE(FastVitAttention);

// timm's RepMixerBlock: x = token_mixer(x); x + drop_path(layer_scale(mlp(x))).
class RepMixerBlockImpl : public nn::Module {
 public:
  RepMixerBlockImpl(int64_t dim, int64_t hidden, double drop_path_rate) {
    token_mixer = register_module("token_mixer", RepMixer(dim, 3, 1e-5));
    mlp = register_module("mlp", ConvMlp(dim, hidden));
    layer_scale = register_module("layer_scale", LayerScale2d(dim, 1e-5));
    if (drop_path_rate > 0.0) drop_path = register_module("drop_path", layers::DropPath(drop_path_rate));
  }
  at::Tensor forward(const at::Tensor& input) {
    const at::Tensor x = token_mixer(input);
    at::Tensor y = layer_scale(mlp(x));
    if (drop_path) y = drop_path(y);
    return x + y;
  }
  RepMixer token_mixer{nullptr};
  ConvMlp mlp{nullptr};
  LayerScale2d layer_scale{nullptr};
  layers::DropPath drop_path{nullptr};
};
TORCH_MODULE(RepMixerBlock);

// timm's AttentionBlock: norm (BatchNorm2d), token_mixer, layer_scale_1,
// drop_path1, mlp, layer_scale_2, drop_path2.
class AttentionBlockImpl : public nn::Module {
 public:
  AttentionBlockImpl(int64_t dim, int64_t hidden, double drop_path_rate) {
    norm = register_module("norm", layers::BatchNorm2d(nn::BatchNorm2dOptions(dim)));
    token_mixer = register_module("token_mixer", FastVitAttention(dim));
    layer_scale_1 = register_module("layer_scale_1", LayerScale2d(dim, 1e-5));
    if (drop_path_rate > 0.0) drop_path1 = register_module("drop_path1", layers::DropPath(drop_path_rate));
    mlp = register_module("mlp", ConvMlp(dim, hidden));
    layer_scale_2 = register_module("layer_scale_2", LayerScale2d(dim, 1e-5));
    if (drop_path_rate > 0.0) drop_path2 = register_module("drop_path2", layers::DropPath(drop_path_rate));
  }
  at::Tensor forward(const at::Tensor& input) {
    at::Tensor y = layer_scale_1(token_mixer(norm(input)));
    if (drop_path1) y = drop_path1(y);
    const at::Tensor x = input + y;
    y = layer_scale_2(mlp(x));
    if (drop_path2) y = drop_path2(y);
    return x + y;
  }
  layers::BatchNorm2d norm{nullptr};
  FastVitAttention token_mixer{nullptr};
  LayerScale2d layer_scale_1{nullptr}, layer_scale_2{nullptr};
  layers::DropPath drop_path1{nullptr}, drop_path2{nullptr};
  ConvMlp mlp{nullptr};
};
TORCH_MODULE(AttentionBlock);

// timm's PatchEmbed: proj.0 (ReparamLargeKernelConv 7x7/2), proj.1 (a 1x1 MobileOneBlock).
class PatchEmbedImpl : public nn::Module {
 public:
  PatchEmbedImpl(int64_t in, int64_t out) {
    proj = register_module("proj", nn::Sequential());
    proj->push_back(ReparamLargeKernelConv(in, out, 7, 2));
    proj->push_back(MobileOneBlock(MobileOneArgs{.in_chs = out, .out_chs = out}));
  }
  at::Tensor forward(const at::Tensor& x) { return proj->forward(x); }
  nn::Sequential proj{nullptr};
};
TORCH_MODULE(PatchEmbed);

// timm's FastVitStage: downsample (PatchEmbed: proj.0 ReparamLargeKernelConv
// 7x7/2, proj.1 a 1x1 MobileOneBlock; absent in stage 0), pos_emb (attention
// stages), blocks.
class FastVitStageImpl : public nn::Module {
 public:
  FastVitStageImpl(int64_t dim, int64_t dim_out, bool attention, int64_t hidden,
                   const std::vector<double>& drop_path_rates) {
    if (dim != dim_out) downsample = register_module("downsample", PatchEmbed(dim, dim_out));
    if (attention) pos_emb = register_module("pos_emb", RepConditionalPosEnc(dim_out));
    blocks = register_module("blocks", nn::Sequential());
    for (double rate : drop_path_rates) {
      if (attention) {
        blocks->push_back(AttentionBlock(dim_out, hidden, rate));
      } else {
        blocks->push_back(RepMixerBlock(dim_out, hidden, rate));
      }
    }
  }

  // With grad_checkpointing each block is checkpointed (timm's checkpoint_seq over the blocks).
  at::Tensor forward(const at::Tensor& input) {
    at::Tensor x = downsample ? downsample(input) : input;
    if (pos_emb) x = pos_emb(x);
    return grad_checkpointing ? checkpoint_seq(sequence_modules(blocks), x) : blocks->forward(x);
  }

  PatchEmbed downsample{nullptr};
  RepConditionalPosEnc pos_emb{nullptr};
  nn::Sequential blocks{nullptr};
  bool grad_checkpointing = false;
};
TORCH_MODULE(FastVitStage);

// One registered architecture.
struct FastVitSpec {
  std::string name;
  std::vector<int64_t> depths;
  std::vector<int64_t> dims;
  int64_t mlp_ratio = 4;
  bool attention = false;  // stage 3: RepConditionalPosEnc + AttentionBlocks
  double crop_pct = 0.9;
};

class FastVitImpl : public ClassifierImpl {
 public:
  FastVitImpl(const FastVitSpec& spec, const ModelArgs& args) : num_classes_(args.num_classes) {
    validate_model_args(spec.name, args);
    const std::string pool = args.global_pool.value_or("avg");
    cfg_.input_size = {3, 256, 256};
    cfg_.crop_pct = spec.crop_pct;
    cfg_.first_conv = "stem.0.conv_kxk.0.conv";  // timm lists it with stem.0.conv_scale.conv
    cfg_.classifier = "head.fc";
    cfg_.hf_hub_id = timm_hub_id(spec.name, kFastVitDefaultTags);

    stem = register_module("stem", nn::Sequential());
    const int64_t d0 = spec.dims[0];
    stem->push_back(
        MobileOneBlock(MobileOneArgs{.in_chs = args.in_chans, .out_chs = d0, .kernel_size = 3, .stride = 2}));
    stem->push_back(
        MobileOneBlock(MobileOneArgs{.in_chs = d0, .out_chs = d0, .kernel_size = 3, .stride = 2, .depthwise = true}));
    stem->push_back(MobileOneBlock(MobileOneArgs{.in_chs = d0, .out_chs = d0}));

    stages = register_module("stages", nn::Sequential());
    int64_t total = 0;
    for (int64_t d : spec.depths) total += d;
    const auto dpr = layers::drop_path_rates(args.drop_path_rate.value_or(0.0), total);
    int64_t first_block = 0, prev_dim = d0, reduction = 4;
    for (size_t i = 0; i < spec.depths.size(); ++i) {
      const std::vector<double> rates(dpr.begin() + first_block, dpr.begin() + first_block + spec.depths[i]);
      first_block += spec.depths[i];
      const bool attention = spec.attention && i == spec.depths.size() - 1;
      if (prev_dim != spec.dims[i]) reduction *= 2;
      stages->push_back(FastVitStage(prev_dim, spec.dims[i], attention, spec.dims[i] * spec.mlp_ratio, rates));
      prev_dim = spec.dims[i];
      feature_info_.push_back({prev_dim, reduction, "stages." + std::to_string(i)});
    }
    num_features_ = 2 * prev_dim;
    final_conv = register_module(
        "final_conv",
        MobileOneBlock(MobileOneArgs{
            .in_chs = prev_dim, .out_chs = num_features_, .kernel_size = 3, .depthwise = true, .use_se = true}));
    head = register_module("head",
                           layers::ClassifierHeadModule(layers::ClassifierHeadModuleOptions(num_features_, num_classes_)
                                                            .pool_type(pool)
                                                            .drop_rate(args.drop_rate)));
    init_weights();
  }

  // timm's forward_features: stem, stages, final_conv.
  at::Tensor forward_features(at::Tensor input) override { return final_conv(stages->forward(stem->forward(input))); }

  std::vector<FeatureInfo> feature_info() const override { return feature_info_; }

  // timm's forward_intermediates over the stages (NCHW only); final_conv runs
  // only when the last stage did.
  Intermediates forward_intermediates(at::Tensor input,
                                      const IntermediatesOptions& options = IntermediatesOptions()) override {
    check_output_fmt(describe_model(*this), options.output_fmt(), {"NCHW"});
    size_t stages_run = 0;
    Intermediates out = run_feature_steps(
        stem->forward(input), stages->size(),
        [&](size_t i, at::Tensor x) {
          stages_run = i + 1;
          return stages->ptr<FastVitStageImpl>(i)->forward(x);
        },
        options);
    if (out.final.defined() && stages_run == stages->size()) out.final = final_conv(out.final);
    return out;
  }
  // timm's forward_head: ClassifierHead (pool, drop, fc); pre_logits stops before fc.
  at::Tensor forward_head(at::Tensor x, bool pre_logits = false) override {
    return pre_logits ? head->forward_pre_logits(x) : head(x);
  }
  at::Tensor forward(at::Tensor x) override { return forward_head(forward_features(x)); }
  // timm: each stage's grad_checkpointing.
  void set_grad_checkpointing(bool enable) override {
    for (size_t i = 0; i < stages->size(); ++i) stages->ptr<FastVitStageImpl>(i)->grad_checkpointing = enable;
  }
  // timm's reparameterize_model walk: MobileOneBlock (stem, PatchEmbed's
  // proj.1, final_conv), ReparamLargeKernelConv (proj.0), RepMixer (its
  // norm and mixer inside it) and RepConditionalPosEnc, each folded once.
  int64_t reparameterize() override { return layers::reparameterize_children(*this, fold_module); }
  // timm's group_matcher (its patterns verbatim).
  GroupMatcher group_matcher(bool coarse) const override {
    if (coarse) return {{"stem", {{R"(^stem)", std::nullopt}}}, {"blocks", {{R"(^stages\.(\d+))", std::nullopt}}}};
    return {{"stem", {{R"(^stem)", std::nullopt}}},
            {"blocks",
             {{R"(^stages\.(\d+).downsample)", std::vector<double>{0}},
              {R"(^stages\.(\d+).pos_emb)", std::vector<double>{0}},
              {R"(^stages\.(\d+)\.\w+\.(\d+))", std::nullopt}}}};
  }
  int64_t num_classes() const override { return num_classes_; }
  const PretrainedCfg& pretrained_cfg() const override { return cfg_; }

  nn::Sequential stem{nullptr};
  nn::Sequential stages{nullptr};
  MobileOneBlock final_conv{nullptr};
  layers::ClassifierHeadModule head{nullptr};

 private:
  // timm's FastVit._init_weights: every Linear trunc_normal(.02) with zero
  // bias; convs keep torch's default init except ConvMlp's (done there).
  void init_weights() {
    c10::NoGradGuard no_grad;
    for (auto& module : modules(/*include_self=*/false)) {
      if (auto* linear = module->as<nn::Linear>()) {
        layers::trunc_normal_(linear->weight, 0.0, 0.02);
        if (linear->bias.defined()) linear->bias.zero_();
      }
    }
  }

  // One module of timm's walk: folded where it has timm's reparameterize.
  static bool fold_module(nn::Module& module) {
    if (auto* block = module.as<MobileOneBlockImpl>()) return block->reparameterize();
    if (auto* conv = module.as<ReparamLargeKernelConvImpl>()) return conv->reparameterize();
    if (auto* mixer = module.as<RepMixerImpl>()) return mixer->reparameterize();
    if (auto* pos_enc = module.as<RepConditionalPosEncImpl>()) return pos_enc->reparameterize();
    return false;
  }

  PretrainedCfg cfg_;
  int64_t num_classes_;
  int64_t num_features_ = 0;
  std::vector<FeatureInfo> feature_info_;
};

std::vector<FastVitSpec> fastvit_specs() {
  const std::vector<int64_t> s12{2, 2, 6, 2}, small{64, 128, 256, 512};
  return {
      {.name = "fastvit_t8", .depths = {2, 2, 4, 2}, .dims = {48, 96, 192, 384}, .mlp_ratio = 3},
      {.name = "fastvit_t12", .depths = s12, .dims = small, .mlp_ratio = 3},
      {.name = "fastvit_s12", .depths = s12, .dims = small},
      {.name = "fastvit_sa12", .depths = s12, .dims = small, .attention = true},
      {.name = "fastvit_sa24", .depths = {4, 4, 12, 4}, .dims = small, .attention = true},
      {.name = "fastvit_sa36", .depths = {6, 6, 18, 6}, .dims = small, .attention = true},
      {.name = "fastvit_ma36",
       .depths = {6, 6, 18, 6},
       .dims = {76, 152, 304, 608},
       .attention = true,
       .crop_pct = 0.95},
  };
}

std::string describe(const FastVitSpec& spec) {
  std::string text = spec.attention ? "FastViT (RepMixer + attention" : "FastViT (RepMixer";
  text += ", depths ";
  for (size_t i = 0; i < spec.depths.size(); ++i) {
    if (i > 0) text += '-';
    text += std::to_string(spec.depths[i]);
  }
  text += ", dims ";
  for (size_t i = 0; i < spec.dims.size(); ++i) {
    if (i > 0) text += '-';
    text += std::to_string(spec.dims[i]);
  }
  return text + ")";
}

}  // namespace
}  // namespace timm::fastvit

TIMM_PLUGIN("fastvit") {
  for (const auto& spec : timm::fastvit::fastvit_specs()) {
    registrar.add_model(spec.name, timm::fastvit::describe(spec),
                        [spec](const timm::ModelArgs& args) -> timm::ModelPtr {
                          return std::make_shared<timm::fastvit::FastVitImpl>(spec, args);
                        });
  }
}
