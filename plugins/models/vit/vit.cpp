// Vision Transformer (timm/models/vision_transformer.py) and DeiT
// (timm/models/deit.py), with timm's module names so state_dict keys equal
// timm's:
// - vit_{tiny,small,base}_patch{16,32}_{224,384} and vit_base_patch8_224 as
//   timm registers them (not vit_small_patch8_224: its default tag, DINO, has
//   no classifier, num_classes 0);
// - deit_{tiny,small,base}_patch16_224, deit_base_patch16_384: the same
//   VisionTransformer with DeiT's pretrained cfg (ImageNet mean/std);
// - deit_*_distilled_*: VisionTransformerDistilled, a second prefix token
//   (dist_token) and head (head_dist); the output is the mean of both heads
//   (timm's default, distilled_training off).
//
// Supported: num_classes (0: pooled features come out), in_chans, drop_rate
// (head dropout), drop_path_rate (timm's linear per-block rule), global_pool
// 'token' (default), 'avg', 'avgmax', 'max' (these three move the final norm
// after the pool, timm's fc_norm) or '' (no pooling, tokens come out). The
// input must be the model's image size (no pos_embed resampling).
// --model-kwargs: init_values=<float> (LayerScale ls1/ls2 in every block),
// qk_norm=true (LayerNorm q_norm/k_norm in attention), as timm's kwargs.
#include <algorithm>
#include <cstdint>
#include <exception>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>

#include "timm/base/error.hpp"
#include "timm/layers/attention.hpp"
#include "timm/layers/drop_path.hpp"
#include "timm/layers/layer_scale.hpp"
#include "timm/layers/mlp.hpp"
#include "timm/layers/norm.hpp"
#include "timm/layers/patch_embed.hpp"
#include "timm/layers/weight_init.hpp"
#include "timm/models/model.hpp"
#include "timm/plugin/plugin.hpp"

namespace timm::vit {
namespace {

namespace nn = torch::nn;

// timm 1.0.31's default pretrained tag of each model (the first tag of its
// default_cfgs); a model without one has no pretrained weights in timm.
const std::map<std::string, std::string> kDefaultTags = {{"deit_base_distilled_patch16_224", "fb_in1k"},
                                                         {"deit_base_distilled_patch16_384", "fb_in1k"},
                                                         {"deit_base_patch16_224", "fb_in1k"},
                                                         {"deit_base_patch16_384", "fb_in1k"},
                                                         {"deit_small_distilled_patch16_224", "fb_in1k"},
                                                         {"deit_small_patch16_224", "fb_in1k"},
                                                         {"deit_tiny_distilled_patch16_224", "fb_in1k"},
                                                         {"deit_tiny_patch16_224", "fb_in1k"},
                                                         {"vit_base_patch8_224", "augreg2_in21k_ft_in1k"},
                                                         {"vit_base_patch16_224", "augreg2_in21k_ft_in1k"},
                                                         {"vit_base_patch16_384", "augreg_in21k_ft_in1k"},
                                                         {"vit_base_patch32_224", "augreg_in21k_ft_in1k"},
                                                         {"vit_base_patch32_384", "augreg_in21k_ft_in1k"},
                                                         {"vit_small_patch16_224", "augreg_in21k_ft_in1k"},
                                                         {"vit_small_patch16_384", "augreg_in21k_ft_in1k"},
                                                         {"vit_small_patch32_224", "augreg_in21k_ft_in1k"},
                                                         {"vit_small_patch32_384", "augreg_in21k_ft_in1k"},
                                                         {"vit_tiny_patch16_224", "augreg_in21k_ft_in1k"},
                                                         {"vit_tiny_patch16_384", "augreg_in21k_ft_in1k"}};

struct BlockArgs {
  int64_t dim = 0;
  int64_t num_heads = 0;
  double mlp_ratio = 4.0;
  bool qk_norm = false;
  std::optional<double> init_values;  // LayerScale when set
  double drop_path = 0.0;
};

// timm's pre-norm transformer Block:
// x + drop_path1(ls1(attn(norm1(x)))), then x + drop_path2(ls2(mlp(norm2(x)))).
class BlockImpl : public nn::Module {
 public:
  explicit BlockImpl(const BlockArgs& a) {
    norm1 = register_module("norm1", layers::LayerNorm(a.dim));
    attn = register_module(
        "attn",
        layers::Attention(layers::AttentionOptions(a.dim).num_heads(a.num_heads).qkv_bias(true).qk_norm(a.qk_norm)));
    if (a.init_values)
      ls1 = register_module("ls1", layers::LayerScale(layers::LayerScaleOptions(a.dim).init_values(*a.init_values)));
    if (a.drop_path > 0.0) drop_path1 = register_module("drop_path1", layers::DropPath(a.drop_path));
    norm2 = register_module("norm2", layers::LayerNorm(a.dim));
    mlp = register_module("mlp", layers::Mlp(layers::MlpOptions(a.dim).hidden_features(
                                     static_cast<int64_t>(static_cast<double>(a.dim) * a.mlp_ratio))));
    if (a.init_values)
      ls2 = register_module("ls2", layers::LayerScale(layers::LayerScaleOptions(a.dim).init_values(*a.init_values)));
    if (a.drop_path > 0.0) drop_path2 = register_module("drop_path2", layers::DropPath(a.drop_path));
  }

  at::Tensor forward(at::Tensor x) {
    x = x + residual(attn(norm1(x)), ls1, drop_path1);
    return x + residual(mlp(norm2(x)), ls2, drop_path2);
  }

  layers::LayerNorm norm1{nullptr}, norm2{nullptr};
  layers::Attention attn{nullptr};
  layers::Mlp mlp{nullptr};
  layers::LayerScale ls1{nullptr}, ls2{nullptr};
  layers::DropPath drop_path1{nullptr}, drop_path2{nullptr};

 private:
  static at::Tensor residual(at::Tensor y, layers::LayerScale& ls, layers::DropPath& drop_path) {
    if (ls) y = ls(y);
    return drop_path ? drop_path(y) : y;
  }
};
TORCH_MODULE(Block);

// One registered architecture.
struct VitSpec {
  std::string name;
  int64_t img_size;
  int64_t patch_size;
  int64_t embed_dim;
  int64_t depth;
  int64_t num_heads;
  PretrainedCfg cfg;
  bool distilled = false;  // DeiT's VisionTransformerDistilled
};

const std::vector<std::string> kPoolTypes = {"token", "avg", "avgmax", "max", ""};

class VisionTransformerImpl : public ClassifierImpl {
 public:
  VisionTransformerImpl(const VitSpec& spec, const ModelArgs& args)
      : cfg_(spec.cfg),
        num_classes_(args.num_classes),
        drop_rate_(args.drop_rate),
        global_pool_(args.global_pool.value_or("token")),
        distilled_(spec.distilled) {
    cfg_.hf_hub_id = timm_hub_id(spec.name, kDefaultTags);
    validate(spec, args);
    const int64_t dim = spec.embed_dim;
    num_prefix_tokens_ = distilled_ ? 2 : 1;
    patch_embed = register_module("patch_embed", layers::PatchEmbed(layers::PatchEmbedOptions(
                                                     spec.img_size, spec.patch_size, args.in_chans, dim)));
    // timm's parameter order: cls_token, pos_embed, then (distilled) dist_token.
    cls_token = register_parameter("cls_token", at::zeros({1, 1, dim}));
    pos_embed = register_parameter("pos_embed", at::zeros({1, patch_embed->num_patches() + num_prefix_tokens_, dim}));
    if (distilled_) dist_token = register_parameter("dist_token", at::zeros({1, 1, dim}));

    BlockArgs block;
    block.dim = dim;
    block.num_heads = spec.num_heads;
    block.qk_norm = model_kwarg_bool(spec.name, args, "qk_norm").value_or(block.qk_norm);
    block.init_values = model_kwarg_double(spec.name, args, "init_values");
    if (block.init_values == 0.0) block.init_values.reset();  // timm: falsy init_values means no LayerScale
    blocks = register_module("blocks", nn::Sequential());
    const auto dpr = layers::drop_path_rates(args.drop_path_rate.value_or(0.0), spec.depth);
    for (int64_t i = 0; i < spec.depth; ++i) {
      block.drop_path = dpr[i];
      blocks->push_back(Block(block));
    }
    // timm's fc_norm: with a reducing pool the final norm comes after it.
    const bool use_fc_norm = global_pool_ == "avg" || global_pool_ == "avgmax" || global_pool_ == "max";
    if (use_fc_norm) {
      fc_norm = register_module("fc_norm", layers::LayerNorm(dim));
    } else {
      norm = register_module("norm", layers::LayerNorm(dim));
    }
    if (num_classes_ > 0) {
      head = register_module("head", nn::Linear(dim, num_classes_));
      if (distilled_) head_dist = register_module("head_dist", nn::Linear(dim, num_classes_));
    }
    init_weights();
  }

  // timm's forward_features: patch embedding, prefix tokens + pos_embed,
  // blocks, the final norm (an Identity with fc_norm): (N, prefix + patches, dim).
  at::Tensor forward_features(at::Tensor input) override {
    at::Tensor x = patch_embed(input);
    const int64_t batch = x.size(0);
    std::vector<at::Tensor> tokens{cls_token.expand({batch, -1, -1})};
    if (distilled_) tokens.push_back(dist_token.expand({batch, -1, -1}));
    tokens.push_back(x);
    x = at::cat(tokens, 1) + pos_embed;
    x = blocks->forward(x);
    return norm ? norm(x) : x;
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
  at::Tensor cls_token, pos_embed, dist_token;
  nn::Sequential blocks{nullptr};
  layers::LayerNorm norm{nullptr};     // null with fc_norm
  layers::LayerNorm fc_norm{nullptr};  // null unless an avg/max pool
  nn::Linear head{nullptr};            // null when num_classes is 0
  nn::Linear head_dist{nullptr};

 private:
  void validate(const VitSpec& spec, const ModelArgs& args) const {
    const std::string& name = spec.name;
    validate_model_args(name, args, {"init_values", "qk_norm"});
    if (std::find(kPoolTypes.begin(), kPoolTypes.end(), global_pool_) == kPoolTypes.end()) {
      throw UsageError("global_pool " + in_quotes(global_pool_) + ": " + name +
                       " supports 'token', 'avg', 'avgmax', 'max' or '' (none)");
    }
    if (distilled_ && global_pool_ != "token") {
      throw UsageError("global_pool " + in_quotes(global_pool_) + ": " + name +
                       " reads the class and distillation tokens, only 'token' is supported");
    }
  }

  // timm's global_pool_nlc: the class token, or a reduction over the patch tokens.
  at::Tensor pool(const at::Tensor& x) const {
    if (global_pool_.empty()) return x;
    if (global_pool_ == "token") return x.select(1, 0);
    const at::Tensor patches = x.slice(1, num_prefix_tokens_);
    if (global_pool_ == "avg") return patches.mean(1);
    if (global_pool_ == "avgmax") return 0.5 * (patches.amax(1) + patches.mean(1));
    return patches.amax(1);  // "max"
  }

  at::Tensor head_dropout(const at::Tensor& x) {
    return drop_rate_ > 0.0 ? at::dropout(x, drop_rate_, is_training()) : x;
  }

  // timm's init_weights (mode ''): pos_embed trunc_normal(.02), cls_token
  // normal(1e-6), dist_token trunc_normal(.02); every Linear trunc_normal(.02)
  // with zero bias. The patch conv keeps the Conv2d default init and the
  // LayerNorms ones / zeros, as timm (needs_reset=False leaves them).
  void init_weights() {
    c10::NoGradGuard no_grad;
    layers::trunc_normal_(pos_embed, 0.0, 0.02);
    cls_token.normal_(0.0, 1e-6);
    if (distilled_) layers::trunc_normal_(dist_token, 0.0, 0.02);
    for (auto& module : modules(/*include_self=*/false)) {
      if (auto* linear = module->as<nn::Linear>()) {
        layers::trunc_normal_(linear->weight, 0.0, 0.02);
        if (linear->bias.defined()) linear->bias.zero_();
      }
    }
  }

  PretrainedCfg cfg_;
  int64_t num_classes_;
  double drop_rate_;
  std::string global_pool_;
  bool distilled_;
  int64_t num_prefix_tokens_ = 1;
};

// timm's default cfg of each name (its default tag): augreg ViTs use mean/std
// 0.5 (inception), DeiT ImageNet's; crop_pct 0.9 at 224,
// 1.0 at 384; bicubic.
PretrainedCfg vit_cfg(int64_t size, bool imagenet_norm) {
  PretrainedCfg cfg;
  cfg.input_size = {3, size, size};
  cfg.interpolation = "bicubic";
  cfg.crop_pct = size == 384 ? 1.0 : 0.9;
  cfg.crop_mode = "center";
  if (!imagenet_norm) {
    cfg.mean = {0.5, 0.5, 0.5};
    cfg.std = {0.5, 0.5, 0.5};
  }
  cfg.first_conv = "patch_embed.proj";
  cfg.classifier = "head";  // timm: ('head', 'head_dist') for the distilled DeiTs
  return cfg;
}

std::vector<VitSpec> vit_specs() {
  struct Size {
    const char* name;
    int64_t dim, heads;
  };
  const Size tiny{"tiny", 192, 3}, small{"small", 384, 6}, base{"base", 768, 12};
  auto vit = [](const Size& s, int64_t patch, int64_t img) {
    return VitSpec{"vit_" + std::string(s.name) + "_patch" + std::to_string(patch) + "_" + std::to_string(img),
                   img,
                   patch,
                   s.dim,
                   12,
                   s.heads,
                   vit_cfg(img, /*imagenet_norm=*/false)};
  };
  auto deit = [](const Size& s, int64_t img, bool distilled) {
    return VitSpec{"deit_" + std::string(s.name) + (distilled ? "_distilled" : "") + "_patch16_" + std::to_string(img),
                   img,
                   16,
                   s.dim,
                   12,
                   s.heads,
                   vit_cfg(img, true),
                   distilled};
  };
  return {
      vit(tiny, 16, 224),      vit(tiny, 16, 384),     vit(small, 32, 224),    vit(small, 32, 384),
      vit(small, 16, 224),     vit(small, 16, 384),    vit(base, 32, 224),     vit(base, 32, 384),
      vit(base, 16, 224),      vit(base, 16, 384),     vit(base, 8, 224),      deit(tiny, 224, false),
      deit(small, 224, false), deit(base, 224, false), deit(base, 384, false), deit(tiny, 224, true),
      deit(small, 224, true),  deit(base, 224, true),  deit(base, 384, true),
  };
}

std::string describe(const VitSpec& spec) {
  return std::string(spec.distilled ? "DeiT distilled" : "ViT") + " (dim " + std::to_string(spec.embed_dim) +
         ", depth " + std::to_string(spec.depth) + ", heads " + std::to_string(spec.num_heads) + ", patch " +
         std::to_string(spec.patch_size) + ", " + std::to_string(spec.img_size) + "x" + std::to_string(spec.img_size) +
         ")";
}

}  // namespace
}  // namespace timm::vit

TIMM_PLUGIN("vit") {
  for (const auto& spec : timm::vit::vit_specs()) {
    registrar.add_model(spec.name, timm::vit::describe(spec), [spec](const timm::ModelArgs& args) -> timm::ModelPtr {
      return std::make_shared<timm::vit::VisionTransformerImpl>(spec, args);
    });
  }
}
