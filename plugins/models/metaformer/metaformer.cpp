// MetaFormer (timm/models/metaformer.py), with timm's module names so
// state_dict keys equal timm's: PoolFormer v1 (poolformer_s12 .. m48:
// GroupNorm1 with bias, GELU Mlp with bias, layer scale, no stem /
// downsample norm, Linear head), PoolFormer v2 (poolformerv2_s12 .. m48:
// bias-free GroupNorm1, StarReLU Mlp, res scale in stages 2-3), ConvFormer
// (convformer_s18 .. b36: SepConv token mixer, bias-free LayerNorm2d, MlpHead)
// and CAFormer (caformer_s18 .. b36: SepConv in stages 0-1, self-attention on
// tokens with bias-free LayerNorm in stages 2-3). Stem (stem.conv 7x7/4,
// stem.norm), four stages (stages.N.downsample = norm + 3x3/2 conv from
// stage 1 on, stages.N.blocks.M) and a head of pool, norm (LayerNorm2d),
// flatten, dropout and fc (a Linear, or timm's MlpHead fc1 / SquaredReLU /
// norm / fc2).
//
// Supported: num_classes (0: pooled, normed features come out), in_chans,
// drop_rate (before head.fc), drop_path_rate (timm's linear per-block rule
// over all blocks), global_pool ('avg' default, 'max', 'avgmax', 'fast*',
// or '' with num_classes 0; 'catavgmax' refused as timm), feature_info and
// forward_intermediates (one level per stage, NCHW). No --model-kwargs (timm
// passes its extra keywords to the token mixers). timm's MetaFormer has no
// group_matcher: none here either.
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/linear.h>

#include "timm/base/error.hpp"
#include "timm/base/names.hpp"
#include "timm/layers/classifier.hpp"
#include "timm/layers/drop_path.hpp"
#include "timm/layers/fast_norm.hpp"
#include "timm/layers/linear.hpp"
#include "timm/layers/weight_init.hpp"
#include "timm/models/features.hpp"
#include "timm/models/grad_checkpoint.hpp"
#include "timm/models/model.hpp"
#include "timm/plugin/plugin.hpp"

namespace timm::metaformer {
namespace {

namespace nn = torch::nn;

// timm 1.0.31's default pretrained tag of each model (the first tag of its default_cfgs).
const std::map<std::string, std::string> kDefaultTags = {
    {"poolformer_s12", "sail_in1k"},   {"poolformer_s24", "sail_in1k"},   {"poolformer_s36", "sail_in1k"},
    {"poolformer_m36", "sail_in1k"},   {"poolformer_m48", "sail_in1k"},   {"poolformerv2_s12", "sail_in1k"},
    {"poolformerv2_s24", "sail_in1k"}, {"poolformerv2_s36", "sail_in1k"}, {"poolformerv2_m36", "sail_in1k"},
    {"poolformerv2_m48", "sail_in1k"}, {"convformer_s18", "sail_in1k"},   {"convformer_s36", "sail_in1k"},
    {"convformer_m36", "sail_in1k"},   {"convformer_b36", "sail_in1k"},   {"caformer_s18", "sail_in1k"},
    {"caformer_s36", "sail_in1k"},     {"caformer_m36", "sail_in1k"},     {"caformer_b36", "sail_in1k"},
};

enum class NormKind { kGroup1, kLayerNorm2d, kLayerNorm };
enum class Mixer { kPooling, kSepConv, kAttention };

// timm's GroupNorm1 / LayerNorm2d / LayerNorm and their NoBias variants
// (weight only, eps 1e-6): one module with "weight" and, with bias, "bias".
// All follow timm's fast norm but LayerNormNoBias, a torch.nn.LayerNorm.
class MetaNormImpl : public nn::Module, public layers::FastNormLayer {
 public:
  MetaNormImpl(NormKind kind, int64_t dim, bool bias, double eps)
      : kind_(kind), eps_(eps), fast_norm_(layers::is_fast_norm() && (kind != NormKind::kLayerNorm || bias)) {
    weight = register_parameter("weight", at::ones({dim}));
    if (bias) this->bias = register_parameter("bias", at::zeros({dim}));
  }
  at::Tensor forward(const at::Tensor& x) {
    const int64_t dim = weight.size(0);
    switch (kind_) {
      case NormKind::kGroup1:
        return layers::group_norm(x, 1, weight, bias, eps_, fast_norm_);
      case NormKind::kLayerNorm2d:
        return layers::layer_norm(x.permute({0, 2, 3, 1}), {dim}, weight, bias, eps_, fast_norm_).permute({0, 3, 1, 2});
      case NormKind::kLayerNorm:
        break;
    }
    return layers::layer_norm(x, {dim}, weight, bias, eps_, fast_norm_);
  }
  bool fast_norm() const override { return fast_norm_; }
  at::Tensor weight;
  at::Tensor bias;  // undefined without bias

 private:
  NormKind kind_;
  double eps_;
  bool fast_norm_;
};
TORCH_MODULE(MetaNorm);

// timm's StarReLU: scale * relu(x)^2 + bias, both learnable scalars (shape 1).
class StarReLUImpl : public nn::Module {
 public:
  StarReLUImpl() {
    scale = register_parameter("scale", at::ones({1}));
    bias = register_parameter("bias", at::zeros({1}));
  }
  at::Tensor forward(const at::Tensor& x) { return at::relu(x).square().mul(scale).add(bias); }
  at::Tensor scale;
  at::Tensor bias;
};
TORCH_MODULE(StarReLU);

// timm's Scale (layer scale / res scale): x * scale, per channel on NCHW or on the last dim.
class ScaleImpl : public nn::Module {
 public:
  ScaleImpl(int64_t dim, double init_value, bool use_nchw) : use_nchw_(use_nchw) {
    scale = register_parameter("scale", at::full({dim}, init_value));
  }
  at::Tensor forward(const at::Tensor& x) { return x * (use_nchw_ ? scale.reshape({-1, 1, 1}) : scale); }
  at::Tensor scale;

 private:
  bool use_nchw_;
};
TORCH_MODULE(Scale);

// timm's Mlp (ratio 4, drop 0 as the models build it): fc1, act (StarReLU
// with its parameters, or GELU), fc2; 1x1 convs on NCHW, Linear on tokens.
class MetaMlpImpl : public nn::Module {
 public:
  MetaMlpImpl(int64_t dim, bool star_relu, bool bias, bool use_conv, double drop) : drop_(drop) {
    const int64_t hidden = 4 * dim;
    if (use_conv) {
      fc1_conv = register_module("fc1", nn::Conv2d(nn::Conv2dOptions(dim, hidden, 1).bias(bias)));
    } else {
      fc1_linear = register_module("fc1", layers::Linear(nn::LinearOptions(dim, hidden).bias(bias)));
    }
    if (star_relu) act = register_module("act", StarReLU());
    if (use_conv) {
      fc2_conv = register_module("fc2", nn::Conv2d(nn::Conv2dOptions(hidden, dim, 1).bias(bias)));
    } else {
      fc2_linear = register_module("fc2", layers::Linear(nn::LinearOptions(hidden, dim).bias(bias)));
    }
  }
  at::Tensor forward(const at::Tensor& input) {
    at::Tensor x = fc1_conv ? fc1_conv(input) : fc1_linear(input);
    x = act ? act(x) : at::gelu(x);
    if (drop_ > 0.0) x = at::dropout(x, drop_, is_training());
    x = fc2_conv ? fc2_conv(x) : fc2_linear(x);
    return drop_ > 0.0 ? at::dropout(x, drop_, is_training()) : x;
  }
  nn::Conv2d fc1_conv{nullptr}, fc2_conv{nullptr};          // NCHW, or
  layers::Linear fc1_linear{nullptr}, fc2_linear{nullptr};  // tokens; named "fc1" / "fc2"
  StarReLU act{nullptr};                                    // undefined: GELU

 private:
  double drop_;
};
TORCH_MODULE(MetaMlp);

// timm's SepConv (expansion 2, 7x7 depthwise, no bias): pwconv1, act1
// (StarReLU), dwconv, act2 (Identity), pwconv2.
class SepConvImpl : public nn::Module {
 public:
  explicit SepConvImpl(int64_t dim) {
    const int64_t mid = 2 * dim;
    pwconv1 = register_module("pwconv1", nn::Conv2d(nn::Conv2dOptions(dim, mid, 1).bias(false)));
    act1 = register_module("act1", StarReLU());
    dwconv = register_module("dwconv", nn::Conv2d(nn::Conv2dOptions(mid, mid, 7).padding(3).groups(mid).bias(false)));
    pwconv2 = register_module("pwconv2", nn::Conv2d(nn::Conv2dOptions(mid, dim, 1).bias(false)));
  }
  at::Tensor forward(const at::Tensor& x) { return pwconv2(dwconv(act1(pwconv1(x)))); }
  nn::Conv2d pwconv1{nullptr}, dwconv{nullptr}, pwconv2{nullptr};
  StarReLU act1{nullptr};
};
TORCH_MODULE(SepConv);

// timm's metaformer Attention (head_dim 32, no qkv / proj bias) on (B, N, C)
// tokens, through scaled_dot_product_attention as timm's fused path.
class MetaAttentionImpl : public nn::Module {
 public:
  MetaAttentionImpl(int64_t dim, double proj_drop) : proj_drop_(proj_drop) {
    num_heads_ = dim / kHeadDim;
    if (num_heads_ == 0) num_heads_ = 1;
    const int64_t attention_dim = num_heads_ * kHeadDim;
    qkv = register_module("qkv", layers::Linear(nn::LinearOptions(dim, 3 * attention_dim).bias(false)));
    proj = register_module("proj", layers::Linear(nn::LinearOptions(attention_dim, dim).bias(false)));
  }
  at::Tensor forward(const at::Tensor& x) {
    const int64_t batch = x.size(0), tokens = x.size(1);
    const auto qkv_heads = qkv(x).reshape({batch, tokens, 3, num_heads_, kHeadDim}).permute({2, 0, 3, 1, 4});
    at::Tensor out = at::scaled_dot_product_attention(qkv_heads[0], qkv_heads[1], qkv_heads[2]);
    out = out.transpose(1, 2).reshape({batch, tokens, num_heads_ * kHeadDim});
    out = proj(out);
    return proj_drop_ > 0.0 ? at::dropout(out, proj_drop_, is_training()) : out;
  }
  layers::Linear qkv{nullptr}, proj{nullptr};

 private:
  static constexpr int64_t kHeadDim = 32;
  int64_t num_heads_;
  double proj_drop_;
};
TORCH_MODULE(MetaAttention);

struct BlockArgs {
  int64_t dim = 0;
  Mixer mixer = Mixer::kPooling;
  NormKind norm = NormKind::kLayerNorm2d;
  bool norm_bias = false;
  double norm_eps = 1e-6;
  bool star_relu = true;  // else GELU
  bool mlp_bias = false;
  std::optional<double> layer_scale = std::nullopt;
  std::optional<double> res_scale;
  double drop_path = 0.0;
};

// timm's MetaFormerBlock: x = res_scale1(x) + layer_scale1(drop_path1(token_mixer(norm1(x)))),
// then the same with norm2 / mlp.
class MetaFormerBlockImpl : public nn::Module {
 public:
  explicit MetaFormerBlockImpl(const BlockArgs& a) {
    const bool use_nchw = a.mixer != Mixer::kAttention;  // attention blocks run on tokens
    norm1 = register_module("norm1", MetaNorm(a.norm, a.dim, a.norm_bias, a.norm_eps));
    if (a.mixer == Mixer::kSepConv) sep_conv = register_module("token_mixer", SepConv(a.dim));
    if (a.mixer == Mixer::kAttention) attention = register_module("token_mixer", MetaAttention(a.dim, 0.0));
    if (a.drop_path > 0.0) drop_path1 = register_module("drop_path1", layers::DropPath(a.drop_path));
    if (a.layer_scale) layer_scale1 = register_module("layer_scale1", Scale(a.dim, *a.layer_scale, use_nchw));
    if (a.res_scale) res_scale1 = register_module("res_scale1", Scale(a.dim, *a.res_scale, use_nchw));
    norm2 = register_module("norm2", MetaNorm(a.norm, a.dim, a.norm_bias, a.norm_eps));
    mlp = register_module("mlp", MetaMlp(a.dim, a.star_relu, a.mlp_bias, use_nchw, 0.0));
    if (a.drop_path > 0.0) drop_path2 = register_module("drop_path2", layers::DropPath(a.drop_path));
    if (a.layer_scale) layer_scale2 = register_module("layer_scale2", Scale(a.dim, *a.layer_scale, use_nchw));
    if (a.res_scale) res_scale2 = register_module("res_scale2", Scale(a.dim, *a.res_scale, use_nchw));
  }

  at::Tensor forward(const at::Tensor& input) {
    at::Tensor y = token_mixer(norm1(input));
    if (drop_path1) y = drop_path1(y);
    if (layer_scale1) y = layer_scale1(y);
    at::Tensor x = (res_scale1 ? res_scale1(input) : input) + y;
    y = mlp(norm2(x));
    if (drop_path2) y = drop_path2(y);
    if (layer_scale2) y = layer_scale2(y);
    return (res_scale2 ? res_scale2(x) : x) + y;
  }

  MetaNorm norm1{nullptr}, norm2{nullptr};
  SepConv sep_conv{nullptr};         // or
  MetaAttention attention{nullptr};  // both named "token_mixer"; neither: Pooling
  layers::DropPath drop_path1{nullptr}, drop_path2{nullptr};
  Scale layer_scale1{nullptr}, layer_scale2{nullptr}, res_scale1{nullptr}, res_scale2{nullptr};
  MetaMlp mlp{nullptr};

 private:
  at::Tensor token_mixer(const at::Tensor& x) {
    if (sep_conv) return sep_conv(x);
    if (attention) return attention(x);
    // timm's Pooling: avg_pool2d(3, 1, 1, count_include_pad=False) - x.
    return at::avg_pool2d(x, {3, 3}, {1, 1}, {1, 1}, /*ceil_mode=*/false, /*count_include_pad=*/false) - x;
  }
};
TORCH_MODULE(MetaFormerBlock);

// timm's Downsampling: norm (absent for PoolFormer v1), then a conv with bias.
class DownsamplingImpl : public nn::Module {
 public:
  DownsamplingImpl(int64_t in, int64_t out, int64_t kernel, int64_t stride, int64_t padding,
                   const std::optional<NormKind>& norm_kind, bool norm_first) {
    if (norm_first && norm_kind) norm = register_module("norm", MetaNorm(*norm_kind, in, false, 1e-6));
    conv = register_module("conv", nn::Conv2d(nn::Conv2dOptions(in, out, kernel).stride(stride).padding(padding)));
    if (!norm_first && norm_kind) norm = register_module("norm", MetaNorm(*norm_kind, out, false, 1e-6));
    norm_first_ = norm_first;
  }
  at::Tensor forward(const at::Tensor& input) {
    if (norm_first_) return conv(norm ? norm(input) : input);
    const at::Tensor x = conv(input);
    return norm ? norm(x) : x;
  }
  nn::Conv2d conv{nullptr};
  MetaNorm norm{nullptr};

 private:
  bool norm_first_ = true;
};
TORCH_MODULE(Downsampling);

// timm's MetaFormerStage: "downsample" (absent in stage 0) and "blocks"; the
// attention stages run their blocks on (B, H*W, C) tokens.
class MetaFormerStageImpl : public nn::Module {
 public:
  MetaFormerStageImpl(int64_t in_chs, const BlockArgs& block, const std::optional<NormKind>& downsample_norm,
                      const std::vector<double>& drop_path_rates)
      : use_nchw_(block.mixer != Mixer::kAttention) {
    if (in_chs != block.dim) {
      downsample = register_module("downsample", Downsampling(in_chs, block.dim, 3, 2, 1, downsample_norm, true));
    }
    blocks = register_module("blocks", nn::Sequential());
    for (double rate : drop_path_rates) {
      BlockArgs args = block;
      args.drop_path = rate;
      blocks->push_back(MetaFormerBlock(args));
    }
  }

  // With grad_checkpointing each block is checkpointed (timm's checkpoint_seq over the blocks).
  at::Tensor forward(const at::Tensor& input) {
    at::Tensor x = downsample ? downsample(input) : input;
    const int64_t batch = x.size(0), channels = x.size(1), height = x.size(2), width = x.size(3);
    if (!use_nchw_) x = x.reshape({batch, channels, -1}).transpose(1, 2);
    x = grad_checkpointing ? checkpoint_seq(sequence_modules(blocks), x) : blocks->forward(x);
    if (!use_nchw_) x = x.transpose(1, 2).reshape({batch, channels, height, width});
    return x;
  }

  Downsampling downsample{nullptr};
  nn::Sequential blocks{nullptr};
  bool grad_checkpointing = false;

 private:
  bool use_nchw_;
};
TORCH_MODULE(MetaFormerStage);

// timm's MlpHead: fc1, SquaredReLU, norm (LayerNorm, eps 1e-6, with bias),
// head_drop (0: timm builds it without the model's drop_rate), fc2.
class MlpHeadImpl : public nn::Module {
 public:
  MlpHeadImpl(int64_t dim, int64_t num_classes) {
    const int64_t hidden = 4 * dim;
    fc1 = register_module("fc1", layers::Linear(dim, hidden));
    norm = register_module("norm", MetaNorm(NormKind::kLayerNorm, hidden, true, 1e-6));
    fc2 = register_module("fc2", layers::Linear(hidden, num_classes));
  }
  at::Tensor forward(const at::Tensor& x) { return fc2(norm(at::relu(fc1(x)).square())); }
  layers::Linear fc1{nullptr}, fc2{nullptr};
  MetaNorm norm{nullptr};
};
TORCH_MODULE(MlpHead);

// timm's head Sequential: global_pool, norm (LayerNorm2d with bias), flatten, drop, fc.
class MetaHeadImpl : public nn::Module {
 public:
  MetaHeadImpl(int64_t num_features, int64_t num_classes, const std::string& pool, double drop_rate, bool use_mlp_head)
      : flatten_(!pool.empty()), drop_rate_(drop_rate) {
    global_pool =
        register_module("global_pool", layers::SelectAdaptivePool2d(layers::SelectAdaptivePool2dOptions(pool)));
    norm = register_module("norm", MetaNorm(NormKind::kLayerNorm2d, num_features, true, 1e-6));
    if (num_classes > 0) {
      if (use_mlp_head) {
        mlp_fc = register_module("fc", MlpHead(num_features, num_classes));
      } else {
        fc = register_module("fc", layers::Linear(num_features, num_classes));
      }
    }
  }
  at::Tensor forward(const at::Tensor& input, bool pre_logits = false) {
    at::Tensor x = norm(global_pool(input));
    if (flatten_) x = x.flatten(1);
    if (drop_rate_ > 0.0) x = at::dropout(x, drop_rate_, is_training());
    if (pre_logits) return x;
    if (mlp_fc) return mlp_fc(x);
    return fc ? fc(x) : x;
  }
  layers::SelectAdaptivePool2d global_pool{nullptr};
  MetaNorm norm{nullptr};
  layers::Linear fc{nullptr};  // or
  MlpHead mlp_fc{nullptr};     // both named "fc"; neither: Identity

 private:
  bool flatten_;
  double drop_rate_;
};
TORCH_MODULE(MetaHead);

// One registered architecture.
struct MetaFormerSpec {
  std::string name;
  std::string family;  // for the description
  std::vector<int64_t> depths;
  std::vector<int64_t> dims;
  std::vector<Mixer> mixers;  // per stage
  std::vector<NormKind> norms = {};
  bool norm_bias = false;  // PoolFormer v1's GroupNorm1 (eps 1e-5)
  double norm_eps = 1e-6;
  std::optional<NormKind> downsample_norm = NormKind::kLayerNorm2d;  // stem and downsampling; none in v1
  bool star_relu = true;
  bool mlp_bias = false;
  std::optional<double> layer_scale = std::nullopt;
  std::vector<std::optional<double>> res_scales = {std::nullopt, std::nullopt, 1.0, 1.0};
  bool use_mlp_head = true;
  double crop_pct = 1.0;
};

class MetaFormerImpl : public ClassifierImpl {
 public:
  MetaFormerImpl(const MetaFormerSpec& spec, const ModelArgs& args) : num_classes_(args.num_classes) {
    validate_model_args(spec.name, args);
    const std::string pool = args.global_pool.value_or("avg");
    // timm asserts on a pool that changes the width; its Linear / MlpHead fails on unpooled features.
    if (layers::adaptive_pool_feat_mult(pool) != 1) {
      throw UsageError("model " + in_quotes(spec.name) + ": global_pool " + in_quotes(pool) +
                       " changes the pooled width, which timm's MetaFormer does not support");
    }
    if (pool.empty() && num_classes_ > 0) {
      throw UsageError("model " + in_quotes(spec.name) +
                       ": global_pool '' needs --num-classes 0 (its head's fc cannot take unpooled features)");
    }
    cfg_.crop_pct = spec.crop_pct;
    cfg_.first_conv = "stem.conv";
    cfg_.classifier = spec.use_mlp_head ? "head.fc.fc2" : "head.fc";
    cfg_.hf_hub_id = timm_hub_id(spec.name, kDefaultTags);
    stem = register_module("stem", Downsampling(args.in_chans, spec.dims[0], 7, 4, 2, spec.downsample_norm, false));
    stages = register_module("stages", nn::Sequential());
    int64_t total = 0;
    for (int64_t d : spec.depths) total += d;
    const auto dpr = layers::drop_path_rates(args.drop_path_rate.value_or(0.0), total);
    int64_t first_block = 0;
    for (size_t i = 0; i < spec.depths.size(); ++i) {
      const std::vector<double> rates(dpr.begin() + first_block, dpr.begin() + first_block + spec.depths[i]);
      first_block += spec.depths[i];
      BlockArgs block;
      block.dim = spec.dims[i];
      block.mixer = spec.mixers[i];
      block.norm = spec.norms[i];
      block.norm_bias = spec.norm_bias;
      block.norm_eps = spec.norm_eps;
      block.star_relu = spec.star_relu;
      block.mlp_bias = spec.mlp_bias;
      block.layer_scale = spec.layer_scale;
      block.res_scale = spec.res_scales[i];
      stages->push_back(MetaFormerStage(spec.dims[i == 0 ? 0 : i - 1], block, spec.downsample_norm, rates));
      feature_info_.push_back({spec.dims[i], int64_t{4} << i, "stages." + std::to_string(i)});
    }
    head = register_module("head", MetaHead(spec.dims.back(), num_classes_, pool, args.drop_rate, spec.use_mlp_head));
    init_weights();
  }

  // timm's forward_features: stem and stages, (N, C, H, W).
  at::Tensor forward_features(at::Tensor input) override { return stages->forward(stem(input)); }

  std::vector<FeatureInfo> feature_info() const override { return feature_info_; }

  // timm's forward_intermediates over the stages (NCHW only); norm has nothing to apply to.
  Intermediates forward_intermediates(at::Tensor input,
                                      const IntermediatesOptions& options = IntermediatesOptions()) override {
    check_output_fmt(describe_model(*this), options.output_fmt(), {"NCHW"});
    return run_feature_steps(
        stem(input), stages->size(),
        [this](size_t i, at::Tensor x) { return stages->ptr<MetaFormerStageImpl>(i)->forward(x); }, options);
  }
  // timm's forward_head: pool, norm, flatten, dropout, then fc unless pre_logits.
  at::Tensor forward_head(at::Tensor x, bool pre_logits = false) override { return head(x, pre_logits); }
  at::Tensor forward(at::Tensor x) override { return forward_head(forward_features(x)); }
  // timm: each stage's grad_checkpointing.
  void set_grad_checkpointing(bool enable) override {
    for (size_t i = 0; i < stages->size(); ++i) stages->ptr<MetaFormerStageImpl>(i)->grad_checkpointing = enable;
  }
  int64_t num_classes() const override { return num_classes_; }
  const PretrainedCfg& pretrained_cfg() const override { return cfg_; }

  Downsampling stem{nullptr};
  nn::Sequential stages{nullptr};
  MetaHead head{nullptr};

 private:
  // timm's _init_weights: every Conv2d and Linear trunc_normal(.02) with zero
  // bias; norms ones / zeros, scales and StarReLU as built.
  void init_weights() { layers::trunc_normal_init_weights(*this, 0.02); }

  PretrainedCfg cfg_;
  int64_t num_classes_;
  std::vector<FeatureInfo> feature_info_;
};

std::vector<MetaFormerSpec> metaformer_specs() {
  const std::vector<int64_t> s12{2, 2, 6, 2}, s24{4, 4, 12, 4}, s36{6, 6, 18, 6}, m48{8, 8, 24, 8}, c18{3, 3, 9, 3},
      c36{3, 12, 18, 3};
  const std::vector<int64_t> small{64, 128, 320, 512}, medium{96, 192, 384, 768};
  const std::vector<Mixer> pool4(4, Mixer::kPooling), sep4(4, Mixer::kSepConv),
      ca{Mixer::kSepConv, Mixer::kSepConv, Mixer::kAttention, Mixer::kAttention};
  const std::vector<NormKind> gn4(4, NormKind::kGroup1), ln2d4(4, NormKind::kLayerNorm2d),
      ca_norms{NormKind::kLayerNorm2d, NormKind::kLayerNorm2d, NormKind::kLayerNorm, NormKind::kLayerNorm};
  std::vector<MetaFormerSpec> specs;
  // PoolFormer v1: GroupNorm1 (eps 1e-5, bias), GELU Mlp with bias, layer scale, no res scale.
  const std::vector<std::tuple<std::string, std::vector<int64_t>, std::vector<int64_t>, double, double>> v1 = {
      {"poolformer_s12", s12, small, 1e-5, 0.9},   {"poolformer_s24", s24, small, 1e-5, 0.9},
      {"poolformer_s36", s36, small, 1e-6, 0.9},   {"poolformer_m36", s36, medium, 1e-6, 0.95},
      {"poolformer_m48", m48, medium, 1e-6, 0.95},
  };
  for (const auto& [name, depths, dims, ls, crop] : v1) {
    MetaFormerSpec s{.name = name, .family = "PoolFormer", .depths = depths, .dims = dims, .mixers = pool4};
    s.norms = gn4;
    s.norm_bias = true;
    s.norm_eps = 1e-5;
    s.downsample_norm.reset();
    s.star_relu = false;
    s.mlp_bias = true;
    s.layer_scale = ls;
    s.res_scales.assign(4, std::nullopt);
    s.use_mlp_head = false;
    s.crop_pct = crop;
    specs.push_back(s);
  }
  const std::vector<std::tuple<std::string, std::vector<int64_t>, std::vector<int64_t>>> v2 = {
      {"poolformerv2_s12", s12, small},
      {"poolformerv2_s24", s24, small},
      {"poolformerv2_s36", s36, small},
      {"poolformerv2_m36", s36, medium},
      {"poolformerv2_m48", m48, medium}};
  for (const auto& [name, depths, dims] : v2) {
    MetaFormerSpec s{.name = name, .family = "PoolFormerV2", .depths = depths, .dims = dims, .mixers = pool4};
    s.norms = gn4;
    s.use_mlp_head = false;
    specs.push_back(s);
  }
  const std::vector<std::tuple<std::string, std::vector<int64_t>, std::vector<int64_t>>> conv = {
      {"s18", c18, small}, {"s36", c36, small}, {"m36", c36, {96, 192, 384, 576}}, {"b36", c36, {128, 256, 512, 768}}};
  for (const auto& [size, depths, dims] : conv) {
    MetaFormerSpec s{
        .name = "convformer_" + size, .family = "ConvFormer", .depths = depths, .dims = dims, .mixers = sep4};
    s.norms = ln2d4;
    specs.push_back(s);
  }
  for (const auto& [size, depths, dims] : conv) {
    MetaFormerSpec s{.name = "caformer_" + size, .family = "CAFormer", .depths = depths, .dims = dims, .mixers = ca};
    s.norms = ca_norms;
    specs.push_back(s);
  }
  return specs;
}

std::string describe(const MetaFormerSpec& spec) {
  std::string text = spec.family;
  text += " (depths ";
  text += joined_ints(spec.depths);
  text += ", dims ";
  text += joined_ints(spec.dims);
  if (spec.use_mlp_head) text += ", mlp head";
  return text + ")";
}

}  // namespace
}  // namespace timm::metaformer

TIMM_PLUGIN("metaformer") {
  for (const auto& spec : timm::metaformer::metaformer_specs()) {
    registrar.add_model(spec.name, timm::metaformer::describe(spec),
                        [spec](const timm::ModelArgs& args) -> timm::ModelPtr {
                          return std::make_shared<timm::metaformer::MetaFormerImpl>(spec, args);
                        });
  }
}
