// ConvNeXt and ConvNeXt-V2 (timm/models/convnext.py), with timm's module
// names so state_dict keys equal timm's: convnext_atto, femto, pico, nano
// (conv_mlp: LayerNorm2d and a 1x1-conv Mlp on NCHW), their _ols variants
// (overlapping 3x3 conv stem), convnext_tiny_hnf (conv_mlp, head norm first),
// convnext_tiny .. xxlarge (channels-last LayerNorm and a Linear Mlp;
// xxlarge with eps 1e-5, large_mlp with a pre-logits layer in the head) and
// convnextv2_atto .. huge (GlobalResponseNormMlp, no layer scale). Patch stem
// (stem.0 conv 4x4/4, stem.1 norm), four stages (stages.N.downsample = norm +
// 2x2/2 conv from stage 1 on, stages.N.blocks.M), layer scale "gamma"
// (1e-6), NormMlpClassifierHead (head.norm, head.fc) or, head norm first,
// norm_pre and a ClassifierHead (head.fc).
//
// Supported: num_classes (0: pooled, normed features come out), in_chans,
// drop_rate (before head.fc), drop_path_rate (timm's linear per-block rule
// over all blocks), global_pool ('avg' default, 'max', 'avgmax', 'fast*', or
// '' with a 1x1-conv head as timm), feature_info and forward_intermediates
// (one level per stage, NCHW). No --model-kwargs. Also timm's norm-layer
// variants (conv_mlp, every norm of the model swapped): convnext_atto_rms
// (RmsNorm2d) and convnext_zepto_rms / _ols (SimpleNorm2d, as timm's
// norm_layer='simplenorm' despite the name; _ols: conv, GELU, conv stem).
#include <cstdint>
#include <iterator>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/container/any.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>

#include "timm/base/error.hpp"
#include "timm/base/names.hpp"
#include "timm/layers/classifier.hpp"
#include "timm/layers/drop_path.hpp"
#include "timm/layers/mlp.hpp"
#include "timm/layers/norm.hpp"
#include "timm/layers/rms_norm.hpp"
#include "timm/layers/squeeze_excite.hpp"
#include "timm/layers/weight_init.hpp"
#include "timm/models/grad_checkpoint.hpp"
#include "timm/models/model.hpp"
#include "timm/plugin/plugin.hpp"

namespace timm::convnext {
namespace {

namespace nn = torch::nn;

// timm 1.0.31's default pretrained tag of each model (the first tag of its
// default_cfgs); a model without one has no pretrained weights in timm.
const std::map<std::string, std::string> kDefaultTags = {
    {"convnext_atto", "d2_in1k"},
    {"convnext_atto_ols", "a2_in1k"},
    {"convnext_base", "fb_in22k_ft_in1k"},
    {"convnext_femto", "d1_in1k"},
    {"convnext_femto_ols", "d1_in1k"},
    {"convnext_large", "fb_in22k_ft_in1k"},
    {"convnext_large_mlp", "clip_laion2b_soup_ft_in12k_in1k_320"},
    {"convnext_nano", "in12k_ft_in1k"},
    {"convnext_nano_ols", "d1h_in1k"},
    {"convnext_pico", "d1_in1k"},
    {"convnext_pico_ols", "d1_in1k"},
    {"convnext_small", "in12k_ft_in1k"},
    {"convnext_tiny", "in12k_ft_in1k"},
    {"convnext_tiny_hnf", "a2h_in1k"},
    {"convnext_xlarge", "fb_in22k_ft_in1k"},
    {"convnext_xxlarge", "clip_laion2b_soup_ft_in1k"},
    {"convnext_zepto_rms", "ra4_e3600_r224_in1k"},
    {"convnext_zepto_rms_ols", "ra4_e3600_r224_in1k"},
    {"convnextv2_atto", "fcmae_ft_in1k"},
    {"convnextv2_base", "fcmae_ft_in22k_in1k"},
    {"convnextv2_femto", "fcmae_ft_in1k"},
    {"convnextv2_huge", "fcmae_ft_in22k_in1k_384"},
    {"convnextv2_large", "fcmae_ft_in22k_in1k"},
    {"convnextv2_nano", "fcmae_ft_in22k_in1k"},
    {"convnextv2_pico", "fcmae_ft_in1k"},
    {"convnextv2_tiny", "fcmae_ft_in22k_in1k"},
    // convnextv2_small, convnext_atto_rms: timm's only tag is "untrained".
};

// timm's test_input_size / test_crop_pct of the models whose default cfg has them
// (validate.py evaluates at them unless --use-train-size).
const std::map<std::string, TestSize> kTestSizes = {
    {"convnext_atto", {288, 0.95}},    {"convnext_atto_ols", {288, 0.95}},  {"convnext_base", {288, 1.0}},
    {"convnext_femto", {288, 0.95}},   {"convnext_femto_ols", {288, 0.95}}, {"convnext_large", {288, 1.0}},
    {"convnext_nano", {288, 1.0}},     {"convnext_nano_ols", {288, 1.0}},   {"convnext_pico", {288, 0.95}},
    {"convnext_pico_ols", {288, 1.0}}, {"convnext_small", {288, 1.0}},      {"convnext_tiny", {288, 1.0}},
    {"convnext_tiny_hnf", {288, 1.0}}, {"convnext_xlarge", {288, 1.0}},     {"convnextv2_atto", {288, 0.95}},
    {"convnextv2_base", {288, 1.0}},   {"convnextv2_femto", {288, 0.95}},   {"convnextv2_large", {288, 1.0}},
    {"convnextv2_nano", {288, 1.0}},   {"convnextv2_pico", {288, 0.95}},    {"convnextv2_tiny", {288, 1.0}},
    {"convnext_atto_rms", {256, 0.95}}};

struct BlockArgs {
  int64_t dim = 0;
  bool conv_mlp = false;
  std::string norm_layer = "layernorm";  // other than LayerNorm only with conv_mlp, as timm
  bool use_grn = false;
  std::optional<double> ls_init_value = 1e-6;  // none: no "gamma" (ConvNeXt-V2)
  double norm_eps = 1e-6;
  double drop_path = 0.0;
};

// timm's ConvNeXtBlock (stride 1, in == out): depthwise 7x7 conv -> norm ->
// Mlp (ratio 4, GELU; with GRN for V2) -> gamma -> drop_path, plus the
// identity shortcut.
class ConvNeXtBlockImpl : public nn::Module {
 public:
  explicit ConvNeXtBlockImpl(const BlockArgs& a) : conv_mlp_(a.conv_mlp) {
    conv_dw = register_module("conv_dw", nn::Conv2d(nn::Conv2dOptions(a.dim, a.dim, 7).padding(3).groups(a.dim)));
    const auto norm_options = layers::LayerNormOptions(a.dim).eps(a.norm_eps);
    if (conv_mlp_) {
      norm2d = layers::create_norm2d(a.norm_layer, a.dim, a.norm_eps);
      register_module("norm", norm2d.ptr());
    } else {
      norm = register_module("norm", layers::LayerNorm(norm_options));
    }
    const auto mlp_options = layers::MlpOptions(a.dim).hidden_features(4 * a.dim).use_conv(conv_mlp_);
    if (a.use_grn) {
      grn_mlp = register_module("mlp", layers::GlobalResponseNormMlp(mlp_options));
    } else {
      mlp = register_module("mlp", layers::Mlp(mlp_options));
    }
    if (a.ls_init_value) gamma = register_parameter("gamma", at::full({a.dim}, *a.ls_init_value));
    if (a.drop_path > 0.0) drop_path = register_module("drop_path", layers::DropPath(a.drop_path));
  }

  at::Tensor forward(const at::Tensor& input) {
    at::Tensor x = conv_dw(input);
    if (conv_mlp_) {
      x = run_mlp(norm2d.forward(x));
    } else {
      x = run_mlp(norm(x.permute({0, 2, 3, 1}))).permute({0, 3, 1, 2});
    }
    if (gamma.defined()) x = x.mul(gamma.reshape({1, -1, 1, 1}));
    if (drop_path) x = drop_path(x);
    return x + input;
  }

  nn::Conv2d conv_dw{nullptr};
  layers::LayerNorm norm{nullptr};                 // channels-last, or
  nn::AnyModule norm2d;                            // NCHW with conv_mlp; both named "norm"
  layers::Mlp mlp{nullptr};                        // or, with GRN,
  layers::GlobalResponseNormMlp grn_mlp{nullptr};  // both named "mlp"
  at::Tensor gamma;                                // undefined without layer scale
  layers::DropPath drop_path{nullptr};

 private:
  at::Tensor run_mlp(const at::Tensor& x) { return grn_mlp ? grn_mlp(x) : mlp(x); }

  bool conv_mlp_;
};
TORCH_MODULE(ConvNeXtBlock);

// timm's ConvNeXtStage: "downsample" (norm of the previous width, then a 2x2
// stride-2 conv; absent in stage 0, timm's Identity) and "blocks".
class ConvNeXtStageImpl : public nn::Module {
 public:
  ConvNeXtStageImpl(int64_t in_chs, const BlockArgs& block, const std::vector<double>& drop_path_rates) {
    const int64_t out_chs = block.dim;
    if (in_chs != out_chs) {
      downsample = register_module("downsample", nn::Sequential());
      downsample->push_back(layers::create_norm2d(block.norm_layer, in_chs, block.norm_eps));
      downsample->push_back(nn::Conv2d(nn::Conv2dOptions(in_chs, out_chs, 2).stride(2)));
    }
    blocks = register_module("blocks", nn::Sequential());
    for (double rate : drop_path_rates) {
      BlockArgs args = block;
      args.drop_path = rate;
      blocks->push_back(ConvNeXtBlock(args));
    }
  }

  // With grad_checkpointing each block is checkpointed (timm's checkpoint_seq
  // over the stage's blocks), the downsample not.
  at::Tensor forward(const at::Tensor& input) {
    const at::Tensor x = downsample ? downsample->forward(input) : input;
    return grad_checkpointing ? checkpoint_seq(sequence_modules(blocks), x) : blocks->forward(x);
  }

  nn::Sequential downsample{nullptr};
  nn::Sequential blocks{nullptr};
  bool grad_checkpointing = false;  // timm's per-stage attribute, set by the model's set_grad_checkpointing
};
TORCH_MODULE(ConvNeXtStage);

// One registered architecture.
struct ConvNeXtSpec {
  std::string name;
  std::vector<int64_t> depths;
  std::vector<int64_t> dims;
  bool conv_mlp = false;
  bool use_grn = false;                  // ConvNeXt-V2: GRN in the Mlp and no layer scale
  std::string stem_type = "patch";       // or timm's "overlap", "overlap_tiered", "overlap_act"
  std::string norm_layer = "layernorm";  // or "rmsnorm2d", "simplenorm" (conv_mlp only)
  bool head_norm_first = false;          // norm_pre + ClassifierHead instead of NormMlpClassifierHead
  int64_t head_hidden_size = 0;          // NormMlpClassifierHead's pre_logits width, 0: none
  double norm_eps = 1e-6;                // every norm's
  // The default tag's data config.
  double crop_pct = 0.875;
  std::string crop_mode = "center";
  int64_t img_size = 224;
  bool clip_mean_std = false;  // OPENAI_CLIP_MEAN / STD, else ImageNet's
  bool half_mean_std = false;  // mean = std = 0.5 (IMAGENET_INCEPTION_*)
};

// timm's stems: a 4x4 stride-4 patch conv, or two overlapping 3x3 stride-2
// convs ("tiered": the first to half the width, made divisible by 8; "act":
// a GELU between them); then the norm.
nn::Sequential make_stem(const ConvNeXtSpec& spec, int64_t in_chans) {
  const int64_t out = spec.dims[0];
  nn::Sequential stem;
  if (spec.stem_type == "patch") {
    stem->push_back(nn::Conv2d(nn::Conv2dOptions(in_chans, out, 4).stride(4)));
  } else {
    const int64_t mid = spec.stem_type == "overlap_tiered" ? layers::make_divisible(static_cast<double>(out / 2)) : out;
    stem->push_back(nn::Conv2d(nn::Conv2dOptions(in_chans, mid, 3).stride(2).padding(1)));
    if (spec.stem_type == "overlap_act") stem->push_back(nn::GELU());
    stem->push_back(nn::Conv2d(nn::Conv2dOptions(mid, out, 3).stride(2).padding(1)));
  }
  stem->push_back(layers::create_norm2d(spec.norm_layer, out, spec.norm_eps));
  return stem;
}

class ConvNeXtImpl : public ClassifierImpl {
 public:
  ConvNeXtImpl(const ConvNeXtSpec& spec, const ModelArgs& args) : num_classes_(args.num_classes) {
    validate_model_args(spec.name, args);
    cfg_.input_size = {3, spec.img_size, spec.img_size};
    cfg_.crop_pct = spec.crop_pct;
    cfg_.crop_mode = spec.crop_mode;
    if (spec.clip_mean_std) {
      cfg_.mean.assign(std::begin(kOpenaiClipMean), std::end(kOpenaiClipMean));
      cfg_.std.assign(std::begin(kOpenaiClipStd), std::end(kOpenaiClipStd));
    }
    if (spec.half_mean_std) {
      cfg_.mean = {0.5, 0.5, 0.5};
      cfg_.std = {0.5, 0.5, 0.5};
    }
    cfg_.first_conv = "stem.0";
    cfg_.classifier = "head.fc";
    cfg_.hf_hub_id = timm_hub_id(spec.name, kDefaultTags);
    set_test_size(cfg_, spec.name, kTestSizes);
    stem = register_module("stem", make_stem(spec, args.in_chans));
    stages = register_module("stages", nn::Sequential());
    int64_t total = 0;
    for (int64_t d : spec.depths) total += d;
    const auto dpr = layers::drop_path_rates(args.drop_path_rate.value_or(0.0), total);
    BlockArgs block;
    block.conv_mlp = spec.conv_mlp;
    block.norm_layer = spec.norm_layer;
    block.use_grn = spec.use_grn;
    if (spec.use_grn) block.ls_init_value.reset();
    block.norm_eps = spec.norm_eps;
    int64_t first_block = 0;
    for (size_t i = 0; i < spec.depths.size(); ++i) {
      const std::vector<double> rates(dpr.begin() + first_block, dpr.begin() + first_block + spec.depths[i]);
      first_block += spec.depths[i];
      block.dim = spec.dims[i];
      stages->push_back(ConvNeXtStage(spec.dims[i == 0 ? 0 : i - 1], block, rates));
      // Every stem has stride 4 and stages 1..3 halve the map.
      feature_info_.push_back({spec.dims[i], int64_t{4} << i, "stages." + std::to_string(i)});
    }
    make_head(spec, args);
    init_weights();
  }

  // timm's forward_features: stem, stages, norm_pre (an Identity unless head norm first), (N, C, H, W).
  at::Tensor forward_features(at::Tensor input) override { return final_norm(stages->forward(stem->forward(input))); }

  // timm's feature levels: the four stages.
  std::vector<FeatureInfo> feature_info() const override { return feature_info_; }

  // timm's forward_intermediates over the stages (NCHW only). norm_pre is
  // sized for the last stage: with norm it applies to that stage's
  // intermediate only, and the final features get it only when that stage ran.
  Intermediates forward_intermediates(at::Tensor input,
                                      const IntermediatesOptions& options = IntermediatesOptions()) override {
    check_output_fmt(describe_model(*this), options.output_fmt(), {"NCHW"});
    const int64_t num_stages = static_cast<int64_t>(stages->size());
    const auto [take_indices, max_index] = feature_take_indices(num_stages, options.indices());
    const std::vector<bool> take = take_mask(num_stages, take_indices);
    const int64_t last = num_stages - 1;
    Intermediates out;
    at::Tensor x = stem->forward(input);
    const int64_t stages_run = options.stop_early() ? max_index + 1 : num_stages;
    for (int64_t i = 0; i < stages_run; ++i) {
      x = stages->ptr<ConvNeXtStageImpl>(static_cast<size_t>(i))->forward(x);
      if (take[static_cast<size_t>(i)]) out.intermediates.push_back(options.norm() && i == last ? final_norm(x) : x);
    }
    if (!options.intermediates_only()) out.final = stages_run == num_stages ? final_norm(x) : x;
    return out;
  }
  // timm's forward_head: the head, up to its fc with pre_logits.
  at::Tensor forward_head(at::Tensor x, bool pre_logits = false) override {
    if (hnf_head) return pre_logits ? hnf_head->forward_pre_logits(x) : hnf_head(x);
    return pre_logits ? head->forward_pre_logits(x) : head(x);
  }
  at::Tensor forward(at::Tensor x) override { return forward_head(forward_features(x)); }
  // timm: each stage's grad_checkpointing.
  void set_grad_checkpointing(bool enable) override {
    for (size_t i = 0; i < stages->size(); ++i) stages->ptr<ConvNeXtStageImpl>(i)->grad_checkpointing = enable;
  }
  int64_t num_classes() const override { return num_classes_; }
  const PretrainedCfg& pretrained_cfg() const override { return cfg_; }
  GroupMatcher group_matcher(bool coarse) const override {
    if (coarse) return {{"stem", {{"^stem", std::nullopt}}}, {"blocks", {{R"(^stages\.(\d+))", std::nullopt}}}};
    return {{"stem", {{"^stem", std::nullopt}}},
            {"blocks",
             {{R"(^stages\.(\d+)\.downsample)", std::vector<double>{0}},
              {R"(^stages\.(\d+)\.blocks\.(\d+))", std::nullopt},
              {R"(^norm_pre)", std::vector<double>{99999}}}}};
  }

  nn::Sequential stem{nullptr};
  nn::Sequential stages{nullptr};
  layers::LayerNorm2d norm_pre{nullptr};           // head norm first only
  layers::NormMlpClassifierHead head{nullptr};     // or, head norm first,
  layers::ClassifierHeadModule hnf_head{nullptr};  // both named "head"

 private:
  // timm's head: by default NormMlpClassifierHead (pool, norm, [pre_logits
  // fc + GELU], fc); with head_norm_first the norm moves before the pool
  // (norm_pre) and a plain ClassifierHead follows.
  void make_head(const ConvNeXtSpec& spec, const ModelArgs& args) {
    const int64_t num_features = spec.dims.back();
    const std::string pool = args.global_pool.value_or("avg");
    if (spec.head_norm_first) {
      // timm builds it, then its Linear fc fails on the unpooled NCHW features.
      if (pool.empty() && num_classes_ > 0) {
        throw UsageError("model " + in_quotes(spec.name) +
                         ": global_pool '' needs --num-classes 0 (its head's Linear fc cannot take unpooled features)");
      }
      norm_pre =
          register_module("norm_pre", layers::LayerNorm2d(layers::LayerNormOptions(num_features).eps(spec.norm_eps)));
      hnf_head = register_module(
          "head", layers::ClassifierHeadModule(layers::ClassifierHeadModuleOptions(num_features, num_classes_)
                                                   .pool_type(pool)
                                                   .drop_rate(args.drop_rate)));
      return;
    }
    head = register_module(
        "head", layers::NormMlpClassifierHead(layers::NormMlpClassifierHeadOptions(num_features, num_classes_)
                                                  .hidden_size(spec.head_hidden_size)
                                                  .pool_type(pool)
                                                  .drop_rate(args.drop_rate)
                                                  .norm_eps(spec.norm_eps)
                                                  .norm_layer(spec.norm_layer)
                                                  .act_layer("gelu")));
  }

  // timm's _init_weights: every Conv2d and Linear trunc_normal(.02) with zero
  // bias (head_init_scale 1); norms ones / zeros, gamma 1e-6 as built.
  void init_weights() { layers::trunc_normal_init_weights(*this, 0.02); }

  // norm_pre, an Identity unless head norm first (the default head norms after its pool).
  at::Tensor final_norm(const at::Tensor& x) { return norm_pre ? norm_pre(x) : x; }

  PretrainedCfg cfg_;
  int64_t num_classes_;
  std::vector<FeatureInfo> feature_info_;
};

std::vector<ConvNeXtSpec> convnext_specs() {
  const std::vector<int64_t> d2262{2, 2, 6, 2}, d2282{2, 2, 8, 2}, d3393{3, 3, 9, 3}, d33273{3, 3, 27, 3};
  const std::vector<int64_t> atto{40, 80, 160, 320}, femto{48, 96, 192, 384}, pico{64, 128, 256, 512},
      nano{80, 160, 320, 640}, tiny{96, 192, 384, 768}, base{128, 256, 512, 1024}, large{192, 384, 768, 1536};
  // crop_pct, image size and mean/std of each default tag (kDefaultTags): d2/d1/a2_in1k and
  // fb_in22k_ft_in1k 0.875, in12k_ft_in1k / d1h / a2h 0.95 (pico_ols' d1_in1k too), the CLIP
  // fine-tunes 1.0 at 320 (large_mlp) or 256 (xxlarge), every V2 tag 0.875 but huge's (1.0 at 384).
  return {
      {.name = "convnext_atto", .depths = d2262, .dims = atto, .conv_mlp = true},
      {.name = "convnext_atto_ols", .depths = d2262, .dims = atto, .conv_mlp = true, .stem_type = "overlap_tiered"},
      {.name = "convnext_atto_rms", .depths = d2262, .dims = atto, .conv_mlp = true, .norm_layer = "rmsnorm2d"},
      {.name = "convnext_zepto_rms",
       .depths = {2, 2, 4, 2},
       .dims = {32, 64, 128, 256},
       .conv_mlp = true,
       .norm_layer = "simplenorm",
       .half_mean_std = true},
      {.name = "convnext_zepto_rms_ols",
       .depths = {2, 2, 4, 2},
       .dims = {32, 64, 128, 256},
       .conv_mlp = true,
       .stem_type = "overlap_act",
       .norm_layer = "simplenorm",
       .crop_pct = 0.9,
       .half_mean_std = true},
      {.name = "convnext_femto", .depths = d2262, .dims = femto, .conv_mlp = true},
      {.name = "convnext_femto_ols", .depths = d2262, .dims = femto, .conv_mlp = true, .stem_type = "overlap_tiered"},
      {.name = "convnext_pico", .depths = d2262, .dims = pico, .conv_mlp = true},
      {.name = "convnext_pico_ols",
       .depths = d2262,
       .dims = pico,
       .conv_mlp = true,
       .stem_type = "overlap_tiered",
       .crop_pct = 0.95},
      {.name = "convnext_nano", .depths = d2282, .dims = nano, .conv_mlp = true, .crop_pct = 0.95},
      {.name = "convnext_nano_ols",
       .depths = d2282,
       .dims = nano,
       .conv_mlp = true,
       .stem_type = "overlap",
       .crop_pct = 0.95},
      {.name = "convnext_tiny_hnf",
       .depths = d3393,
       .dims = tiny,
       .conv_mlp = true,
       .head_norm_first = true,
       .crop_pct = 0.95},
      {.name = "convnext_tiny", .depths = d3393, .dims = tiny, .crop_pct = 0.95},
      {.name = "convnext_small", .depths = d33273, .dims = tiny, .crop_pct = 0.95},
      {.name = "convnext_base", .depths = d33273, .dims = base},
      {.name = "convnext_large", .depths = d33273, .dims = large},
      {.name = "convnext_large_mlp",
       .depths = d33273,
       .dims = large,
       .head_hidden_size = 1536,
       .crop_pct = 1.0,
       .img_size = 320,
       .clip_mean_std = true},
      {.name = "convnext_xlarge", .depths = d33273, .dims = {256, 512, 1024, 2048}},
      {.name = "convnext_xxlarge",
       .depths = {3, 4, 30, 3},
       .dims = {384, 768, 1536, 3072},
       .norm_eps = 1e-5,
       .crop_pct = 1.0,
       .img_size = 256,
       .clip_mean_std = true},
      {.name = "convnextv2_atto", .depths = d2262, .dims = atto, .conv_mlp = true, .use_grn = true},
      {.name = "convnextv2_femto", .depths = d2262, .dims = femto, .conv_mlp = true, .use_grn = true},
      {.name = "convnextv2_pico", .depths = d2262, .dims = pico, .conv_mlp = true, .use_grn = true},
      {.name = "convnextv2_nano", .depths = d2282, .dims = nano, .conv_mlp = true, .use_grn = true},
      {.name = "convnextv2_tiny", .depths = d3393, .dims = tiny, .use_grn = true},
      {.name = "convnextv2_small", .depths = d33273, .dims = tiny, .use_grn = true},
      {.name = "convnextv2_base", .depths = d33273, .dims = base, .use_grn = true},
      {.name = "convnextv2_large", .depths = d33273, .dims = large, .use_grn = true},
      {.name = "convnextv2_huge",
       .depths = d33273,
       .dims = {352, 704, 1408, 2816},
       .use_grn = true,
       .crop_pct = 1.0,
       .crop_mode = "squash",
       .img_size = 384},
  };
}

std::string describe(const ConvNeXtSpec& spec) {
  std::string text = spec.use_grn ? "ConvNeXt-V2 (depths " : "ConvNeXt (depths ";
  text += joined_ints(spec.depths);
  text += ", dims ";
  text += joined_ints(spec.dims);
  if (spec.conv_mlp) text += ", conv mlp";
  if (spec.use_grn) text += ", GRN";
  if (spec.stem_type != "patch") text += ", " + spec.stem_type + " stem";
  if (spec.norm_layer != "layernorm") text += ", " + spec.norm_layer;
  if (spec.head_norm_first) text += ", head norm first";
  if (spec.head_hidden_size > 0) text += ", head mlp";
  return text + ")";
}

}  // namespace
}  // namespace timm::convnext

TIMM_PLUGIN("convnext") {
  for (const auto& spec : timm::convnext::convnext_specs()) {
    registrar.add_model(spec.name, timm::convnext::describe(spec),
                        [spec](const timm::ModelArgs& args) -> timm::ModelPtr {
                          return std::make_shared<timm::convnext::ConvNeXtImpl>(spec, args);
                        });
  }
}
