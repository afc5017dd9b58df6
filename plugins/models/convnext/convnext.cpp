// ConvNeXt (timm/models/convnext.py), with timm's module names so state_dict
// keys equal timm's: convnext_atto, femto, pico, nano (conv_mlp: LayerNorm2d
// and a 1x1-conv Mlp on NCHW) and convnext_tiny, small, base (channels-last
// LayerNorm and a Linear Mlp). Patch stem (stem.0 conv 4x4/4, stem.1 norm),
// four stages (stages.N.downsample = norm + 2x2/2 conv from stage 1 on,
// stages.N.blocks.M), layer scale "gamma" (1e-6), NormMlpClassifierHead
// (head.norm, head.fc).
//
// Supported: num_classes (0: pooled, normed features come out), in_chans,
// drop_rate (before head.fc), drop_path_rate (timm's linear per-block rule
// over all blocks), global_pool ('avg' default, 'max', 'avgmax', 'fast*', or
// '' with a 1x1-conv head as timm). No --model-kwargs.
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>

#include "timm/base/error.hpp"
#include "timm/layers/classifier.hpp"
#include "timm/layers/drop_path.hpp"
#include "timm/layers/mlp.hpp"
#include "timm/layers/norm.hpp"
#include "timm/layers/weight_init.hpp"
#include "timm/models/model.hpp"
#include "timm/plugin/plugin.hpp"

namespace timm::convnext {
namespace {

namespace nn = torch::nn;

// timm 1.0.31's default pretrained tag of each model (the first tag of its
// default_cfgs); a model without one has no pretrained weights in timm.
const std::map<std::string, std::string> kDefaultTags = {
    {"convnext_atto", "d2_in1k"},       {"convnext_base", "fb_in22k_ft_in1k"}, {"convnext_femto", "d1_in1k"},
    {"convnext_nano", "in12k_ft_in1k"}, {"convnext_pico", "d1_in1k"},          {"convnext_small", "in12k_ft_in1k"},
    {"convnext_tiny", "in12k_ft_in1k"}};

struct BlockArgs {
  int64_t dim = 0;
  bool conv_mlp = false;
  double ls_init_value = 1e-6;
  double drop_path = 0.0;
};

// timm's ConvNeXtBlock (stride 1, in == out): depthwise 7x7 conv -> norm ->
// Mlp (ratio 4, GELU) -> gamma -> drop_path, plus the identity shortcut.
class ConvNeXtBlockImpl : public nn::Module {
 public:
  explicit ConvNeXtBlockImpl(const BlockArgs& a) : conv_mlp_(a.conv_mlp) {
    conv_dw = register_module("conv_dw", nn::Conv2d(nn::Conv2dOptions(a.dim, a.dim, 7).padding(3).groups(a.dim)));
    if (conv_mlp_) {
      norm2d = register_module("norm", layers::LayerNorm2d(a.dim));
    } else {
      norm = register_module("norm", layers::LayerNorm(a.dim));
    }
    mlp = register_module("mlp", layers::Mlp(layers::MlpOptions(a.dim).hidden_features(4 * a.dim).use_conv(conv_mlp_)));
    gamma = register_parameter("gamma", at::full({a.dim}, a.ls_init_value));
    if (a.drop_path > 0.0) drop_path = register_module("drop_path", layers::DropPath(a.drop_path));
  }

  at::Tensor forward(const at::Tensor& input) {
    at::Tensor x = conv_dw(input);
    if (conv_mlp_) {
      x = mlp(norm2d(x));
    } else {
      x = mlp(norm(x.permute({0, 2, 3, 1}))).permute({0, 3, 1, 2});
    }
    x = x.mul(gamma.reshape({1, -1, 1, 1}));
    if (drop_path) x = drop_path(x);
    return x + input;
  }

  nn::Conv2d conv_dw{nullptr};
  layers::LayerNorm norm{nullptr};      // channels-last, or
  layers::LayerNorm2d norm2d{nullptr};  // NCHW with conv_mlp; both named "norm"
  layers::Mlp mlp{nullptr};
  at::Tensor gamma;
  layers::DropPath drop_path{nullptr};

 private:
  bool conv_mlp_;
};
TORCH_MODULE(ConvNeXtBlock);

// timm's ConvNeXtStage: "downsample" (norm of the previous width, then a 2x2
// stride-2 conv; absent in stage 0, timm's Identity) and "blocks".
class ConvNeXtStageImpl : public nn::Module {
 public:
  ConvNeXtStageImpl(int64_t in_chs, int64_t out_chs, bool conv_mlp, const std::vector<double>& drop_path_rates) {
    if (in_chs != out_chs) {
      downsample = register_module(
          "downsample",
          nn::Sequential(layers::LayerNorm2d(in_chs), nn::Conv2d(nn::Conv2dOptions(in_chs, out_chs, 2).stride(2))));
    }
    blocks = register_module("blocks", nn::Sequential());
    for (double rate : drop_path_rates) {
      BlockArgs block;
      block.dim = out_chs;
      block.conv_mlp = conv_mlp;
      block.drop_path = rate;
      blocks->push_back(ConvNeXtBlock(block));
    }
  }

  at::Tensor forward(const at::Tensor& x) { return blocks->forward(downsample ? downsample->forward(x) : x); }

  nn::Sequential downsample{nullptr};
  nn::Sequential blocks{nullptr};
};
TORCH_MODULE(ConvNeXtStage);

// One registered architecture.
struct ConvNeXtSpec {
  std::string name;
  std::vector<int64_t> depths;
  std::vector<int64_t> dims;
  bool conv_mlp;
  double crop_pct;
};

class ConvNeXtImpl : public ClassifierImpl {
 public:
  ConvNeXtImpl(const ConvNeXtSpec& spec, const ModelArgs& args) : num_classes_(args.num_classes) {
    validate_model_args(spec.name, args);
    cfg_.crop_pct = spec.crop_pct;
    cfg_.first_conv = "stem.0";
    cfg_.classifier = "head.fc";
    cfg_.hf_hub_id = timm_hub_id(spec.name, kDefaultTags);
    stem =
        register_module("stem", nn::Sequential(nn::Conv2d(nn::Conv2dOptions(args.in_chans, spec.dims[0], 4).stride(4)),
                                               layers::LayerNorm2d(spec.dims[0])));
    stages = register_module("stages", nn::Sequential());
    int64_t total = 0;
    for (int64_t d : spec.depths) total += d;
    const auto dpr = layers::drop_path_rates(args.drop_path_rate.value_or(0.0), total);
    int64_t first_block = 0;
    for (size_t i = 0; i < spec.depths.size(); ++i) {
      const std::vector<double> rates(dpr.begin() + first_block, dpr.begin() + first_block + spec.depths[i]);
      first_block += spec.depths[i];
      stages->push_back(ConvNeXtStage(spec.dims[i == 0 ? 0 : i - 1], spec.dims[i], spec.conv_mlp, rates));
    }
    head = register_module(
        "head", layers::NormMlpClassifierHead(layers::NormMlpClassifierHeadOptions(spec.dims.back(), num_classes_)
                                                  .pool_type(args.global_pool.value_or("avg"))
                                                  .drop_rate(args.drop_rate)));
    init_weights();
  }

  // timm's forward_features: stem, stages (norm_pre is an Identity here), (N, C, H, W).
  at::Tensor forward_features(at::Tensor input) override { return stages->forward(stem->forward(input)); }
  // timm's forward_head: the NormMlpClassifierHead, up to its fc with pre_logits.
  at::Tensor forward_head(at::Tensor x, bool pre_logits = false) override {
    return pre_logits ? head->forward_pre_logits(x) : head(x);
  }
  at::Tensor forward(at::Tensor x) override { return forward_head(forward_features(x)); }
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
  layers::NormMlpClassifierHead head{nullptr};

 private:
  // timm's _init_weights: every Conv2d and Linear trunc_normal(.02) with zero
  // bias (head_init_scale 1); norms ones / zeros, gamma 1e-6 as built.
  void init_weights() {
    c10::NoGradGuard no_grad;
    for (auto& module : modules(/*include_self=*/false)) {
      at::Tensor weight, bias;
      if (auto* conv = module->as<nn::Conv2d>()) {
        weight = conv->weight;
        bias = conv->bias;
      } else if (auto* linear = module->as<nn::Linear>()) {
        weight = linear->weight;
        bias = linear->bias;
      } else {
        continue;
      }
      layers::trunc_normal_(weight, 0.0, 0.02);
      if (bias.defined()) bias.zero_();
    }
  }

  PretrainedCfg cfg_;
  int64_t num_classes_;
};

std::vector<ConvNeXtSpec> convnext_specs() {
  const std::vector<int64_t> d2262{2, 2, 6, 2}, d2282{2, 2, 8, 2}, d3393{3, 3, 9, 3}, d33273{3, 3, 27, 3};
  // crop_pct of each default tag: d2/d1_in1k 0.875, in12k_ft_in1k 0.95, fb_in22k_ft_in1k 0.875.
  return {
      {"convnext_atto", d2262, {40, 80, 160, 320}, true, 0.875},
      {"convnext_femto", d2262, {48, 96, 192, 384}, true, 0.875},
      {"convnext_pico", d2262, {64, 128, 256, 512}, true, 0.875},
      {"convnext_nano", d2282, {80, 160, 320, 640}, true, 0.95},
      {"convnext_tiny", d3393, {96, 192, 384, 768}, false, 0.95},
      {"convnext_small", d33273, {96, 192, 384, 768}, false, 0.95},
      {"convnext_base", d33273, {128, 256, 512, 1024}, false, 0.875},
  };
}

std::string describe(const ConvNeXtSpec& spec) {
  std::string text = "ConvNeXt (depths ";
  for (size_t i = 0; i < spec.depths.size(); ++i) {
    if (i > 0) text += '-';
    text += std::to_string(spec.depths[i]);
  }
  text += ", dims ";
  for (size_t i = 0; i < spec.dims.size(); ++i) {
    if (i > 0) text += '-';
    text += std::to_string(spec.dims[i]);
  }
  return text + (spec.conv_mlp ? ", conv mlp)" : ")");
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
