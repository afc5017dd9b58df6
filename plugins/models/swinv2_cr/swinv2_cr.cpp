// Swin Transformer V2 "CR" (timm/models/swin_transformer_v2_cr.py, Christoph
// Reich's implementation; the swinv2_cr_* models), with timm's module names so
// state_dict keys equal timm's. patch_embed (4x4/4 conv, LayerNorm on the
// NHWC map, NCHW out), four stages (stages.N.downsample = patch merging from
// stage 1 on, stages.N.blocks.M), each block: cosine window attention with a
// learnt capped temperature and a log-spaced continuous position bias from a
// meta MLP, post-norms inside both residuals (norm1 / norm2 weights start at
// init_values 0), and an optional main-branch norm3 (the last block of the
// last stage, of every stage for the _ns models, every 6th block for huge /
// giant). Windows are the patch grid / 8 per stage (timm's window_ratio 8),
// clamped to each stage's map, without shift where the map fits one window.
// The non-persistent buffers (relative_coordinates_log, attn_mask) are plain
// members, out of the state_dict as timm's.
//
// Supported: num_classes, in_chans, drop_rate, drop_path_rate (stage-wise
// float32 linspace as timm), global_pool, --model-kwargs img_size=<int>
// (strict input size), window_size=<int> (every stage's), always_partition.
// Not supported: dynamic_img_size / strict_img_size=False, non-square or
// per-stage sizes as kwargs, set_input_size, window_ratio.
#include <algorithm>
#include <cmath>
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
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>

#include "timm/base/error.hpp"
#include "timm/layers/classifier.hpp"
#include "timm/layers/drop_path.hpp"
#include "timm/layers/linear.hpp"
#include "timm/layers/mlp.hpp"
#include "timm/layers/window_attention.hpp"
#include "timm/models/features.hpp"
#include "timm/models/grad_checkpoint.hpp"
#include "timm/models/model.hpp"
#include "timm/plugin/plugin.hpp"

namespace timm::swinv2_cr {
namespace {

namespace nn = torch::nn;
using layers::WindowSize;

constexpr int64_t kCrPatchSize = 4;
constexpr int64_t kCrWindowRatio = 8;
constexpr int64_t kCrMetaHiddenDim = 384;

// timm 1.0.31's models with pretrained weights and their default tag (the others' default tag is "untrained",
// without an hf_hub_id).
const std::map<std::string, std::string> kCrDefaultTags = {
    {"swinv2_cr_tiny_ns_224", "sw_in1k"},
    {"swinv2_cr_small_224", "sw_in1k"},
    {"swinv2_cr_small_ns_224", "sw_in1k"},
};

nn::LayerNorm cr_layer_norm(int64_t dim) { return nn::LayerNorm(nn::LayerNormOptions({dim})); }

// timm's WindowMultiHeadAttention (sequential_attn is unused by timm's forward).
class CrWindowAttentionImpl : public nn::Module {
 public:
  CrWindowAttentionImpl(int64_t dim, int64_t num_heads, WindowSize window, double attn_drop, double proj_drop)
      : num_heads_(num_heads), window_(window) {
    qkv = register_module("qkv", layers::Linear(nn::LinearOptions(dim, dim * 3)));
    attn_drop_ = register_module("attn_drop", nn::Dropout(attn_drop));
    proj = register_module("proj", layers::Linear(nn::LinearOptions(dim, dim)));
    proj_drop_ = register_module("proj_drop", nn::Dropout(proj_drop));
    // timm's drop=(0.125, 0.) dropout after the hidden layer is kept in training (fc2's is 0).
    meta_mlp = register_module(
        "meta_mlp",
        layers::Mlp(layers::MlpOptions(2).hidden_features(kCrMetaHiddenDim).out_features(num_heads).act_layer("relu")));
    meta_mlp->drop1 = meta_mlp->replace_module("drop1", nn::Dropout(0.125));
    logit_scale = register_parameter("logit_scale", at::full({num_heads}, std::log(10.0)));
    // timm's relative_coordinates_log: sign(d) * log1p(|d|) for every (i, j) token pair, float32.
    const at::Tensor ys = at::arange(window_[0], at::kFloat);
    const at::Tensor xs = at::arange(window_[1], at::kFloat);
    const auto grid = at::meshgrid({ys, xs}, "ij");
    const at::Tensor coords = at::stack({grid[0], grid[1]}).flatten(1);  // (2, N)
    const at::Tensor rel = (coords.unsqueeze(2) - coords.unsqueeze(1)).permute({1, 2, 0}).reshape({-1, 2});
    coords_log_ = at::sign(rel) * at::log(1.0 + rel.abs());
  }

  at::Tensor forward(const at::Tensor& x, const at::Tensor& mask) {
    const int64_t bw = x.size(0), len = x.size(1), c = x.size(2);
    const at::Tensor qkv_out = qkv(x).view({bw, len, 3, num_heads_, c / num_heads_}).permute({2, 0, 3, 1, 4});
    const auto qkv_split = qkv_out.unbind(0);
    // F.normalize(x, dim=-1): x / max(||x||, 1e-12).
    const at::Tensor qn = qkv_split[0] / qkv_split[0].norm(2, {-1}, true).clamp_min(1e-12);
    const at::Tensor kn = qkv_split[1] / qkv_split[1].norm(2, {-1}, true).clamp_min(1e-12);
    at::Tensor attn = at::matmul(qn, kn.transpose(-2, -1));
    const at::Tensor scale = logit_scale.reshape({1, num_heads_, 1, 1}).clamp_max(std::log(1.0 / 0.01)).exp();
    attn = attn * scale;
    attn = attn + position_bias();
    if (mask.defined()) {
      const int64_t num_win = mask.size(0);
      attn = attn.view({bw / num_win, num_win, num_heads_, len, len}) + mask.unsqueeze(1).unsqueeze(0);
      attn = attn.view({-1, num_heads_, len, len});
    }
    attn = attn_drop_(attn.softmax(-1));
    at::Tensor out = at::matmul(attn, qkv_split[2]).transpose(1, 2).reshape({bw, len, -1});
    return proj_drop_(proj(out));
  }

  layers::Linear qkv{nullptr};
  layers::Linear proj{nullptr};
  layers::Mlp meta_mlp{nullptr};
  at::Tensor logit_scale;

 private:
  // timm's _relative_positional_encodings: (1, heads, N, N).
  at::Tensor position_bias() {
    const at::Tensor& weight = meta_mlp->fc1.ptr<layers::LinearImpl>()->weight;
    if (coords_log_.device() != weight.device() || coords_log_.scalar_type() != weight.scalar_type()) {
      coords_log_ = coords_log_.to(weight.device(), weight.scalar_type());
    }
    const int64_t area = window_[0] * window_[1];
    return meta_mlp(coords_log_).transpose(1, 0).reshape({num_heads_, area, area}).unsqueeze(0);
  }

  int64_t num_heads_;
  WindowSize window_;
  nn::Dropout attn_drop_{nullptr};
  nn::Dropout proj_drop_{nullptr};
  at::Tensor coords_log_;
};
TORCH_MODULE(CrWindowAttention);

struct CrBlockArgs {
  int64_t dim = 0;
  int64_t num_heads = 0;
  WindowSize feat_size{};
  WindowSize window{};
  bool shifted = false;
  bool always_partition = false;
  double mlp_ratio = 4.0;
  double drop_path = 0.0;
  bool extra_norm = false;
};

// timm's SwinTransformerV2CrBlock (NHWC in and out).
class CrBlockImpl : public nn::Module {
 public:
  explicit CrBlockImpl(const CrBlockArgs& a) {
    // timm's _calc_window_shift: half-window shift on odd blocks; unless
    // always_partition, the window is clamped to the map and no shift where it fits.
    WindowSize shift{a.shifted ? a.window[0] / 2 : 0, a.shifted ? a.window[1] / 2 : 0};
    window_ = a.window;
    shift_ = shift;
    if (!a.always_partition) {
      for (size_t i = 0; i < 2; ++i) {
        if (a.feat_size[i] <= a.window[i]) {
          window_[i] = a.feat_size[i];
          shift_[i] = 0;
        }
      }
    }
    attn = register_module("attn", CrWindowAttention(a.dim, a.num_heads, window_, 0.0, 0.0));
    norm1 = register_module("norm1", cr_layer_norm(a.dim));
    drop_path1 = register_module("drop_path1", layers::DropPath(a.drop_path));
    mlp = register_module("mlp", layers::Mlp(layers::MlpOptions(a.dim).hidden_features(
                                     static_cast<int64_t>(static_cast<double>(a.dim) * a.mlp_ratio))));
    norm2 = register_module("norm2", cr_layer_norm(a.dim));
    drop_path2 = register_module("drop_path2", layers::DropPath(a.drop_path));
    if (a.extra_norm) norm3 = register_module("norm3", cr_layer_norm(a.dim));
    // timm's init_values 0: the post-norm weights start at zero.
    {
      c10::NoGradGuard no_grad;
      norm1->weight.zero_();
      norm2->weight.zero_();
    }
    if (shift_[0] != 0 || shift_[1] != 0) {
      attn_mask_ = layers::shifted_window_attn_mask(a.feat_size[0], a.feat_size[1], window_, shift_);
    }
  }

  at::Tensor forward(at::Tensor x) {
    x = x + drop_path1(norm1(shifted_window_attn(x)));
    const int64_t b = x.size(0), h = x.size(1), w = x.size(2), c = x.size(3);
    x = x.reshape({b, -1, c});
    x = x + drop_path2(norm2(mlp(x)));
    if (!norm3.is_empty()) x = norm3(x);
    return x.reshape({b, h, w, c});
  }

  CrWindowAttention attn{nullptr};
  nn::LayerNorm norm1{nullptr};
  layers::DropPath drop_path1{nullptr};
  layers::Mlp mlp{nullptr};
  nn::LayerNorm norm2{nullptr};
  layers::DropPath drop_path2{nullptr};
  nn::LayerNorm norm3{nullptr};

 private:
  at::Tensor shifted_window_attn(at::Tensor x) {
    const int64_t h = x.size(1), w = x.size(2), c = x.size(3);
    const bool do_shift = shift_[0] != 0 || shift_[1] != 0;
    if (do_shift) x = at::roll(x, {-shift_[0], -shift_[1]}, {1, 2});
    const int64_t pad_h = (window_[0] - h % window_[0]) % window_[0];
    const int64_t pad_w = (window_[1] - w % window_[1]) % window_[1];
    if (pad_h > 0 || pad_w > 0) x = at::constant_pad_nd(x, {0, 0, 0, pad_w, 0, pad_h}, 0.0);
    const int64_t hp = x.size(1), wp = x.size(2);
    const at::Tensor windows = layers::window_partition(x, window_).view({-1, window_[0] * window_[1], c});
    at::Tensor mask;
    if (attn_mask_.defined()) {
      // Follows x's device and dtype once (the module's .to() does not see a plain member).
      if (attn_mask_.device() != x.device() || attn_mask_.scalar_type() != x.scalar_type()) {
        attn_mask_ = attn_mask_.to(x.device(), x.scalar_type());
      }
      mask = attn_mask_;
    }
    const at::Tensor out = attn->forward(windows, mask).view({-1, window_[0], window_[1], c});
    x = layers::window_reverse(out, window_, hp, wp);
    x = x.slice(1, 0, h).slice(2, 0, w).contiguous();
    if (do_shift) x = at::roll(x, {shift_[0], shift_[1]}, {1, 2});
    return x;
  }

  WindowSize window_{};
  WindowSize shift_{};
  at::Tensor attn_mask_;
};
TORCH_MODULE(CrBlock);

// timm's PatchMerging (NHWC): pad to even, 2x2 neighbours (timm's order) concatenated, norm, reduce.
class CrPatchMergingImpl : public nn::Module {
 public:
  explicit CrPatchMergingImpl(int64_t dim) {
    norm = register_module("norm", cr_layer_norm(4 * dim));
    reduction = register_module("reduction", layers::Linear(nn::LinearOptions(4 * dim, 2 * dim).bias(false)));
  }
  at::Tensor forward(at::Tensor x) {
    const int64_t b = x.size(0), h = x.size(1), w = x.size(2), c = x.size(3);
    if (h % 2 != 0 || w % 2 != 0) x = at::constant_pad_nd(x, {0, 0, 0, w % 2, 0, h % 2}, 0.0);
    const int64_t hp = x.size(1), wp = x.size(2);
    x = x.reshape({b, hp / 2, 2, wp / 2, 2, c}).permute({0, 1, 3, 4, 2, 5}).flatten(3);
    return reduction(norm(x));
  }
  nn::LayerNorm norm{nullptr};
  layers::Linear reduction{nullptr};
};
TORCH_MODULE(CrPatchMerging);

// timm's PatchEmbed of this file: conv, LayerNorm over channels, NCHW out.
class CrPatchEmbedImpl : public nn::Module {
 public:
  CrPatchEmbedImpl(int64_t in_chans, int64_t embed_dim) {
    proj =
        register_module("proj", nn::Conv2d(nn::Conv2dOptions(in_chans, embed_dim, kCrPatchSize).stride(kCrPatchSize)));
    norm = register_module("norm", cr_layer_norm(embed_dim));
  }
  at::Tensor forward(const at::Tensor& x) { return norm(proj(x).permute({0, 2, 3, 1})).permute({0, 3, 1, 2}); }
  nn::Conv2d proj{nullptr};
  nn::LayerNorm norm{nullptr};
};
TORCH_MODULE(CrPatchEmbed);

// timm's SwinTransformerV2CrStage: NCHW in and out.
class CrStageImpl : public nn::Module {
 public:
  CrStageImpl(int64_t in_dim, bool downscale, std::vector<CrBlockArgs> block_args) {
    if (downscale) downsample = register_module("downsample", CrPatchMerging(in_dim));
    blocks = register_module("blocks", nn::Sequential());
    for (const auto& a : block_args) blocks->push_back(CrBlock(a));
  }
  at::Tensor forward(const at::Tensor& input) {
    at::Tensor x = input.permute({0, 2, 3, 1});
    if (!downsample.is_empty()) x = downsample(x);
    for (auto& block : *blocks) x = grad_checkpointing ? checkpoint(block, x) : block.forward(x);
    return x.permute({0, 3, 1, 2});
  }
  CrPatchMerging downsample{nullptr};
  nn::Sequential blocks{nullptr};
  bool grad_checkpointing = false;
};
TORCH_MODULE(CrStage);

struct CrSpec {
  std::string name;
  int64_t embed_dim = 96;
  std::vector<int64_t> depths;
  std::vector<int64_t> num_heads;
  int64_t img_size = 224;
  double crop_pct = 0.9;
  bool extra_norm_stage = false;
  int64_t extra_norm_period = 0;
};

class SwinV2CrImpl : public ClassifierImpl {
 public:
  SwinV2CrImpl(const CrSpec& spec, const ModelArgs& args) : num_classes_(args.num_classes) {
    validate_model_args(spec.name, args, {"img_size", "window_size", "always_partition"});
    cfg_.input_size = {3, spec.img_size, spec.img_size};
    cfg_.crop_pct = spec.crop_pct;
    cfg_.first_conv = "patch_embed.proj";
    cfg_.classifier = "head.fc";
    cfg_.hf_hub_id = timm_hub_id(spec.name, kCrDefaultTags);

    const int64_t img_size = positive_int_kwarg(spec.name, args, "img_size").value_or(spec.img_size);
    const int64_t grid = img_size / kCrPatchSize;
    if (grid < 1) {
      throw UsageError(spec.name + ": img_size=" + std::to_string(img_size) + " is smaller than the patch size " +
                       std::to_string(kCrPatchSize));
    }
    img_size_ = img_size;
    const int64_t window =
        positive_int_kwarg(spec.name, args, "window_size").value_or(std::max<int64_t>(1, grid / kCrWindowRatio));
    const bool always_partition = model_kwarg_bool(spec.name, args, "always_partition").value_or(false);

    patch_embed = register_module("patch_embed", CrPatchEmbed(args.in_chans, spec.embed_dim));
    stages = register_module("stages", nn::Sequential());
    int64_t total = 0;
    for (int64_t d : spec.depths) total += d;
    const auto dpr = layers::drop_path_rates(args.drop_path_rate.value_or(0.0), total);
    const size_t num_stages = spec.depths.size();
    int64_t in_dim = spec.embed_dim;
    int64_t feat = grid;
    int64_t first = 0;
    for (size_t i = 0; i < num_stages; ++i) {
      const bool downscale = i != 0;
      if (downscale) feat = (feat + 1) / 2;
      const int64_t dim = downscale ? in_dim * 2 : in_dim;
      const int64_t depth = spec.depths[i];
      const bool extra_stage = spec.extra_norm_stage || i + 1 == num_stages;
      std::vector<CrBlockArgs> block_args;
      for (int64_t j = 0; j < depth; ++j) {
        CrBlockArgs a;
        a.dim = dim;
        a.num_heads = spec.num_heads[i];
        a.feat_size = {feat, feat};
        a.window = {window, window};
        a.shifted = j % 2 == 1;
        a.always_partition = always_partition;
        a.drop_path = dpr[static_cast<size_t>(first + j)];
        const int64_t k = j + 1;
        a.extra_norm = (spec.extra_norm_period > 0 && k % spec.extra_norm_period == 0) || (extra_stage && k == depth);
        block_args.push_back(a);
      }
      first += depth;
      stages->push_back(CrStage(in_dim, downscale, std::move(block_args)));
      in_dim = dim;
      feature_info_.push_back({dim, kCrPatchSize * (int64_t{1} << i), "stages." + std::to_string(i)});
    }
    num_features_ = in_dim;
    head = register_module("head",
                           layers::ClassifierHeadModule(layers::ClassifierHeadModuleOptions(num_features_, num_classes_)
                                                            .pool_type(args.global_pool.value_or("avg"))
                                                            .drop_rate(args.drop_rate)));
  }

  // timm's forward_features: patch embedding and stages, (N, C, H, W). The input must be img_size (strict).
  at::Tensor forward_features(at::Tensor input) override {
    at::Tensor x = patch_embed(check_input(input));
    for (size_t i = 0; i < stages->size(); ++i) x = stages->ptr<CrStageImpl>(i)->forward(x);
    return x;
  }
  std::vector<FeatureInfo> feature_info() const override { return feature_info_; }
  // timm's forward_intermediates: each stage's NCHW output (norm has no effect, as timm's).
  Intermediates forward_intermediates(at::Tensor input,
                                      const IntermediatesOptions& options = IntermediatesOptions()) override {
    check_output_fmt(describe_model(*this), options.output_fmt(), {"NCHW"});
    return run_feature_steps(
        patch_embed(check_input(input)), stages->size(),
        [this](size_t i, at::Tensor x) { return stages->ptr<CrStageImpl>(i)->forward(x); }, options);
  }
  at::Tensor forward_head(at::Tensor x, bool pre_logits = false) override {
    return pre_logits ? head->forward_pre_logits(x) : head(x);
  }
  at::Tensor forward(at::Tensor x) override { return forward_head(forward_features(x)); }
  void set_grad_checkpointing(bool enable) override {
    for (size_t i = 0; i < stages->size(); ++i) stages->ptr<CrStageImpl>(i)->grad_checkpointing = enable;
  }
  int64_t num_classes() const override { return num_classes_; }
  const PretrainedCfg& pretrained_cfg() const override { return cfg_; }
  GroupMatcher group_matcher(bool coarse) const override {
    if (coarse) return {{"stem", {{"^patch_embed", std::nullopt}}}, {"blocks", {{R"(^stages\.(\d+))", std::nullopt}}}};
    // timm's patterns verbatim (the first one's unescaped '.' included).
    return {
        {"stem", {{"^patch_embed", std::nullopt}}},
        {"blocks",
         {{R"(^stages\.(\d+).downsample)", std::vector<double>{0}}, {R"(^stages\.(\d+)\.\w+\.(\d+))", std::nullopt}}}};
  }

  CrPatchEmbed patch_embed{nullptr};
  nn::Sequential stages{nullptr};
  layers::ClassifierHeadModule head{nullptr};

 private:
  // timm's PatchEmbed strict_img_size assertions.
  const at::Tensor& check_input(const at::Tensor& x) const {
    if (x.dim() != 4 || x.size(2) != img_size_ || x.size(3) != img_size_) {
      std::string got;
      for (int64_t i = 0; i < x.dim(); ++i) {
        if (i > 0) got += 'x';
        got += std::to_string(x.size(i));
      }
      throw UsageError(describe_model(*this) + ": input of shape " + got + " does not match the model's image size " +
                       std::to_string(img_size_) + "x" + std::to_string(img_size_) +
                       " (strict_img_size; pass --model-kwargs img_size=<size>)");
    }
    return x;
  }

  static std::optional<int64_t> positive_int_kwarg(const std::string& model, const ModelArgs& args,
                                                   const std::string& key) {
    const auto value = model_kwarg_double(model, args, key);
    if (!value) return std::nullopt;
    if (!(*value >= 1.0 && *value <= 65536.0) || *value != static_cast<double>(static_cast<int64_t>(*value))) {
      throw UsageError(model + ": " + key + "=" + in_quotes(args.kwargs.at(key)) + ": expected a positive integer");
    }
    return static_cast<int64_t>(*value);
  }

  PretrainedCfg cfg_;
  int64_t num_classes_;
  int64_t num_features_ = 0;
  int64_t img_size_ = 224;
  std::vector<FeatureInfo> feature_info_;
};

std::vector<CrSpec> cr_specs() {
  const std::vector<int64_t> d2262{2, 2, 6, 2}, d22182{2, 2, 18, 2}, d22422{2, 2, 42, 2};
  const std::vector<int64_t> h3{3, 6, 12, 24}, h4{4, 8, 16, 32}, h6{6, 12, 24, 48};
  return {
      {.name = "swinv2_cr_tiny_384", .depths = d2262, .num_heads = h3, .img_size = 384, .crop_pct = 1.0},
      {.name = "swinv2_cr_tiny_224", .depths = d2262, .num_heads = h3},
      {.name = "swinv2_cr_tiny_ns_224", .depths = d2262, .num_heads = h3, .extra_norm_stage = true},
      {.name = "swinv2_cr_small_384", .depths = d22182, .num_heads = h3, .img_size = 384, .crop_pct = 1.0},
      {.name = "swinv2_cr_small_224", .depths = d22182, .num_heads = h3},
      {.name = "swinv2_cr_small_ns_224", .depths = d22182, .num_heads = h3, .extra_norm_stage = true},
      {.name = "swinv2_cr_small_ns_256",
       .depths = d22182,
       .num_heads = h3,
       .img_size = 256,
       .crop_pct = 1.0,
       .extra_norm_stage = true},
      {.name = "swinv2_cr_base_384",
       .embed_dim = 128,
       .depths = d22182,
       .num_heads = h4,
       .img_size = 384,
       .crop_pct = 1.0},
      {.name = "swinv2_cr_base_224", .embed_dim = 128, .depths = d22182, .num_heads = h4},
      {.name = "swinv2_cr_base_ns_224", .embed_dim = 128, .depths = d22182, .num_heads = h4, .extra_norm_stage = true},
      {.name = "swinv2_cr_large_384",
       .embed_dim = 192,
       .depths = d22182,
       .num_heads = h6,
       .img_size = 384,
       .crop_pct = 1.0},
      {.name = "swinv2_cr_large_224", .embed_dim = 192, .depths = d22182, .num_heads = h6},
      {.name = "swinv2_cr_huge_384",
       .embed_dim = 352,
       .depths = d22182,
       .num_heads = {11, 22, 44, 88},
       .img_size = 384,
       .crop_pct = 1.0,
       .extra_norm_period = 6},
      {.name = "swinv2_cr_huge_224",
       .embed_dim = 352,
       .depths = d22182,
       .num_heads = {8, 16, 32, 64},
       .extra_norm_period = 6},
      {.name = "swinv2_cr_giant_384",
       .embed_dim = 512,
       .depths = d22422,
       .num_heads = {16, 32, 64, 128},
       .img_size = 384,
       .crop_pct = 1.0,
       .extra_norm_period = 6},
      {.name = "swinv2_cr_giant_224",
       .embed_dim = 512,
       .depths = d22422,
       .num_heads = {16, 32, 64, 128},
       .extra_norm_period = 6},
  };
}

std::string cr_describe(const CrSpec& spec) {
  std::string depths;
  for (size_t i = 0; i < spec.depths.size(); ++i) {
    if (i > 0) depths += '-';
    depths += std::to_string(spec.depths[i]);
  }
  std::string text = "Swin Transformer V2 CR (embed_dim ";
  text += std::to_string(spec.embed_dim);
  text += ", depths ";
  text += depths;
  text += ", ";
  text += std::to_string(spec.img_size);
  text += "x";
  text += std::to_string(spec.img_size);
  text += ")";
  return text;
}

}  // namespace
}  // namespace timm::swinv2_cr

TIMM_PLUGIN("swinv2_cr") {
  for (const auto& spec : timm::swinv2_cr::cr_specs()) {
    registrar.add_model(spec.name, timm::swinv2_cr::cr_describe(spec),
                        [spec](const timm::ModelArgs& args) -> timm::ModelPtr {
                          return std::make_shared<timm::swinv2_cr::SwinV2CrImpl>(spec, args);
                        });
  }
}
