// Swin Transformer v1 (timm/models/swin_transformer.py), with timm's module
// names so state_dict keys equal timm's: swin_tiny / small / base / large
// (patch 4, window 7 at 224, window 12 at 384) and the S3 searched variants
// swin_s3_tiny / small / base_224 (one window size per stage). NHWC
// throughout, as timm: patch_embed (4x4/4 conv, then LayerNorm on the NHWC
// map), four stages (layers.N.downsample = PatchMerging from stage 1 on,
// layers.N.blocks.M with window attention, shifted by half a window in every
// odd block), the final norm, and a ClassifierHead over NHWC features
// (head.fc). Every LayerNorm is torch's (eps 1e-5).
//
// Supported: num_classes (0: pooled features come out), in_chans, drop_rate
// (before head.fc), drop_path_rate (default 0.1 as timm's; the float32
// linspace over all blocks), global_pool ('avg' default, 'max', 'avgmax',
// 'catavgmax', 'fast*', or '' for per-position logits (N, H, W, classes), as
// timm), and --model-kwargs img_size=<int> (the input must be that size,
// timm's strict_img_size), window_size=<int> (every stage's, in place of the
// model's), always_partition=<bool>; feature_info and forward_intermediates
// (one level per stage, NCHW). Not supported: timm's
// dynamic_img_size / strict_img_size=False, per-stage window lists as
// kwargs, set_input_size.
#include <algorithm>
#include <array>
#include <cstdint>
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

#include "timm/base/error.hpp"
#include "timm/layers/classifier.hpp"
#include "timm/layers/drop_path.hpp"
#include "timm/layers/mlp.hpp"
#include "timm/layers/norm.hpp"
#include "timm/layers/patch_embed.hpp"
#include "timm/layers/weight_init.hpp"
#include "timm/layers/window_attention.hpp"
#include "timm/models/grad_checkpoint.hpp"
#include "timm/models/model.hpp"
#include "timm/plugin/plugin.hpp"

namespace timm::swin {
namespace {

namespace nn = torch::nn;
using layers::WindowSize;

// timm 1.0.31's default pretrained tag of each model (the first tag of its default_cfgs).
const std::map<std::string, std::string> kDefaultTags = {
    {"swin_base_patch4_window12_384", "ms_in22k_ft_in1k"},
    {"swin_base_patch4_window7_224", "ms_in22k_ft_in1k"},
    {"swin_large_patch4_window12_384", "ms_in22k_ft_in1k"},
    {"swin_large_patch4_window7_224", "ms_in22k_ft_in1k"},
    {"swin_s3_base_224", "ms_in1k"},
    {"swin_s3_small_224", "ms_in1k"},
    {"swin_s3_tiny_224", "ms_in1k"},
    {"swin_small_patch4_window7_224", "ms_in22k_ft_in1k"},
    {"swin_tiny_patch4_window7_224", "ms_in1k"},
};

constexpr int64_t kPatchSize = 4;
constexpr double kNormEps = 1e-5;  // torch's nn.LayerNorm, timm's Swin norm_layer

layers::LayerNorm make_norm(int64_t dim) { return layers::LayerNorm(layers::LayerNormOptions(dim).eps(kNormEps)); }

struct BlockArgs {
  int64_t dim = 0;
  int64_t num_heads = 0;
  std::array<int64_t, 2> resolution{};  // the block's input (H, W)
  WindowSize window{};                  // the stage's window before clamping
  bool shifted = false;                 // odd blocks: shift by half a window
  bool always_partition = false;
  double mlp_ratio = 4.0;
  double drop_path = 0.0;
};

// timm's SwinTransformerBlock._calc_window_shift: unless always_partition, a
// window larger than the map shrinks to it, and a map that fits in one
// window is not shifted.
std::pair<WindowSize, WindowSize> window_and_shift(const BlockArgs& a) {
  WindowSize shift{0, 0};
  if (a.shifted) shift = {a.window[0] / 2, a.window[1] / 2};
  if (a.always_partition) return {a.window, shift};
  WindowSize window{};
  for (size_t i = 0; i < 2; ++i) {
    window[i] = a.resolution[i] <= a.window[i] ? a.resolution[i] : a.window[i];
    if (a.resolution[i] <= window[i]) shift[i] = 0;
  }
  return {window, shift};
}

// timm's SwinTransformerBlock on (B, H, W, C): x + drop_path(attn over the
// (shifted) windows of norm1(x)), then x + drop_path(mlp(norm2(x))).
class SwinTransformerBlockImpl : public nn::Module {
 public:
  explicit SwinTransformerBlockImpl(const BlockArgs& a) {
    std::tie(window_, shift_) = window_and_shift(a);
    norm1 = register_module("norm1", make_norm(a.dim));
    attn =
        register_module("attn", layers::WindowAttention(layers::WindowAttentionOptions(a.dim, a.num_heads, window_)));
    if (a.drop_path > 0.0) drop_path1 = register_module("drop_path1", layers::DropPath(a.drop_path));
    norm2 = register_module("norm2", make_norm(a.dim));
    mlp = register_module(
        "mlp", layers::Mlp(layers::MlpOptions(a.dim).hidden_features(static_cast<int64_t>(a.dim * a.mlp_ratio))));
    if (a.drop_path > 0.0) drop_path2 = register_module("drop_path2", layers::DropPath(a.drop_path));
    // timm's non-persistent attn_mask buffer: a plain member, out of the state_dict.
    attn_mask_ = layers::shifted_window_attn_mask(a.resolution[0], a.resolution[1], window_, shift_);
  }

  at::Tensor forward(const at::Tensor& input) {
    const int64_t batch = input.size(0), height = input.size(1), width = input.size(2), channels = input.size(3);
    at::Tensor x = input + residual(window_attention(norm1(input)), drop_path1);
    x = x.reshape({batch, -1, channels});
    x = x + residual(mlp(norm2(x)), drop_path2);
    return x.reshape({batch, height, width, channels});
  }

  layers::LayerNorm norm1{nullptr};
  layers::WindowAttention attn{nullptr};
  layers::DropPath drop_path1{nullptr};  // null at rate 0, timm's Identity
  layers::LayerNorm norm2{nullptr};
  layers::Mlp mlp{nullptr};
  layers::DropPath drop_path2{nullptr};

 private:
  static at::Tensor residual(const at::Tensor& y, layers::DropPath& drop_path) { return drop_path ? drop_path(y) : y; }

  // timm's _attn: cyclic shift, pad to whole windows, attention per window,
  // merge, crop, shift back.
  at::Tensor window_attention(const at::Tensor& x) {
    const int64_t height = x.size(1), width = x.size(2), channels = x.size(3);
    const bool has_shift = shift_[0] != 0 || shift_[1] != 0;
    at::Tensor shifted = has_shift ? at::roll(x, {-shift_[0], -shift_[1]}, {1, 2}) : x;
    const int64_t pad_h = (window_[0] - height % window_[0]) % window_[0];
    const int64_t pad_w = (window_[1] - width % window_[1]) % window_[1];
    shifted = at::constant_pad_nd(shifted, {0, 0, 0, pad_w, 0, pad_h}, 0.0);
    const int64_t padded_h = shifted.size(1), padded_w = shifted.size(2);
    const at::Tensor windows = layers::window_partition(shifted, window_).view({-1, window_[0] * window_[1], channels});
    at::Tensor out = attn(windows, mask_for(x)).view({-1, window_[0], window_[1], channels});
    shifted =
        layers::window_reverse(out, window_, padded_h, padded_w).slice(1, 0, height).slice(2, 0, width).contiguous();
    return has_shift ? at::roll(shifted, {shift_[0], shift_[1]}, {1, 2}) : shifted;
  }

  // The mask on x's device and dtype, converted once (the module's .to() does not see it).
  const at::Tensor& mask_for(const at::Tensor& x) {
    if (attn_mask_.defined() && (attn_mask_.device() != x.device() || attn_mask_.scalar_type() != x.scalar_type())) {
      attn_mask_ = attn_mask_.to(x.device(), x.scalar_type());
    }
    return attn_mask_;
  }

  WindowSize window_{};
  WindowSize shift_{};
  at::Tensor attn_mask_;  // undefined without a shift
};
TORCH_MODULE(SwinTransformerBlock);

// timm's PatchMerging: each 2x2 neighbourhood's channels concatenated (odd
// sizes padded by one), norm, then a bias-free Linear 4 * dim -> out_dim.
class PatchMergingImpl : public nn::Module {
 public:
  PatchMergingImpl(int64_t dim, int64_t out_dim) {
    norm = register_module("norm", make_norm(4 * dim));
    reduction = register_module("reduction", nn::Linear(nn::LinearOptions(4 * dim, out_dim).bias(false)));
  }

  at::Tensor forward(const at::Tensor& input) {
    const int64_t batch = input.size(0), channels = input.size(3);
    const at::Tensor x = at::constant_pad_nd(input, {0, 0, 0, input.size(2) % 2, 0, input.size(1) % 2}, 0.0);
    const int64_t height = x.size(1), width = x.size(2);
    const at::Tensor merged =
        x.reshape({batch, height / 2, 2, width / 2, 2, channels}).permute({0, 1, 3, 4, 2, 5}).flatten(3);
    return reduction(norm(merged));
  }

  layers::LayerNorm norm{nullptr};
  nn::Linear reduction{nullptr};
};
TORCH_MODULE(PatchMerging);

// timm's SwinTransformerStage: "downsample" (PatchMerging; absent in stage 0,
// timm's Identity) and "blocks", unshifted and shifted in turn.
class SwinTransformerStageImpl : public nn::Module {
 public:
  SwinTransformerStageImpl(int64_t in_dim, BlockArgs block, const std::vector<double>& drop_path_rates) {
    if (in_dim != block.dim) downsample = register_module("downsample", PatchMerging(in_dim, block.dim));
    blocks = register_module("blocks", nn::Sequential());
    for (size_t i = 0; i < drop_path_rates.size(); ++i) {
      block.shifted = i % 2 == 1;
      block.drop_path = drop_path_rates[i];
      blocks->push_back(SwinTransformerBlock(block));
    }
  }

  // With grad_checkpointing each block is checkpointed (timm's checkpoint_seq
  // over the stage's blocks), the downsample not.
  at::Tensor forward(const at::Tensor& input) {
    const at::Tensor x = downsample ? downsample(input) : input;
    return grad_checkpointing ? checkpoint_seq(sequence_modules(blocks), x) : blocks->forward(x);
  }

  PatchMerging downsample{nullptr};
  nn::Sequential blocks{nullptr};
  bool grad_checkpointing = false;  // timm's per-stage attribute, set by the model's set_grad_checkpointing
};
TORCH_MODULE(SwinTransformerStage);

// One registered architecture.
struct SwinSpec {
  std::string name;
  int64_t embed_dim = 96;
  std::vector<int64_t> depths;
  std::vector<int64_t> num_heads;
  std::vector<int64_t> window_sizes;  // one per stage (square windows)
  int64_t img_size = 224;             // the default tag's, timm's fixed_input_size
  double crop_pct = 0.9;
};

class SwinTransformerImpl : public ClassifierImpl {
 public:
  SwinTransformerImpl(const SwinSpec& spec, const ModelArgs& args) : name_(spec.name), num_classes_(args.num_classes) {
    validate_model_args(spec.name, args, {"img_size", "window_size", "always_partition"});
    cfg_.input_size = {3, spec.img_size, spec.img_size};
    cfg_.crop_pct = spec.crop_pct;
    cfg_.first_conv = "patch_embed.proj";
    cfg_.classifier = "head.fc";
    cfg_.hf_hub_id = timm_hub_id(spec.name, kDefaultTags);

    const int64_t img_size = positive_int_kwarg(spec.name, args, "img_size").value_or(spec.img_size);
    const auto window_override = positive_int_kwarg(spec.name, args, "window_size");
    const int64_t num_stages = static_cast<int64_t>(spec.depths.size());
    patch_embed = register_module(
        "patch_embed", layers::PatchEmbed(layers::PatchEmbedOptions(img_size, kPatchSize, args.in_chans, spec.embed_dim)
                                              .norm_layer("layernorm")
                                              .output_fmt("NHWC")));
    stages = register_module("layers", nn::Sequential());
    int64_t total = 0;
    for (int64_t d : spec.depths) total += d;
    const auto dpr = layers::drop_path_rates(args.drop_path_rate.value_or(0.1), total);
    BlockArgs block;
    block.always_partition = model_kwarg_bool(spec.name, args, "always_partition").value_or(false);
    int64_t resolution = patch_embed->grid_size();
    int64_t first_block = 0;
    int64_t in_dim = spec.embed_dim;
    for (int64_t i = 0; i < num_stages; ++i) {
      block.dim = spec.embed_dim << i;
      block.num_heads = spec.num_heads[i];
      // PatchMerging halves the map, rounding up (odd sizes are padded).
      if (i > 0) resolution = (resolution + 1) / 2;
      block.resolution = {resolution, resolution};
      const int64_t window = window_override.value_or(spec.window_sizes[i]);
      block.window = {window, window};
      const std::vector<double> rates(dpr.begin() + first_block, dpr.begin() + first_block + spec.depths[i]);
      first_block += spec.depths[i];
      stages->push_back(SwinTransformerStage(in_dim, block, rates));
      // The 4x4 patches, then each PatchMerging halves the map.
      feature_info_.push_back({block.dim, kPatchSize << i, "layers." + std::to_string(i)});
      in_dim = block.dim;
    }
    num_features_ = in_dim;
    norm = register_module("norm", make_norm(num_features_));
    head = register_module("head",
                           layers::ClassifierHeadModule(layers::ClassifierHeadModuleOptions(num_features_, num_classes_)
                                                            .pool_type(args.global_pool.value_or("avg"))
                                                            .drop_rate(args.drop_rate)
                                                            .input_fmt("NHWC")));
    init_weights();
  }

  // timm's forward_features: patch embedding, stages, final norm: (N, H, W, C).
  at::Tensor forward_features(at::Tensor input) override { return norm(stages->forward(patch_embed(input))); }

  // timm's feature levels: the four stages.
  std::vector<FeatureInfo> feature_info() const override { return feature_info_; }

  // timm's forward_intermediates over the stages, each NHWC map returned as a
  // contiguous NCHW one (NCHW only). The final norm is sized for the last
  // stage: with norm it applies to that stage's intermediate only, and the
  // final features (NHWC, as forward_features') get it only when that stage ran.
  Intermediates forward_intermediates(at::Tensor input,
                                      const IntermediatesOptions& options = IntermediatesOptions()) override {
    check_output_fmt(name_, options.output_fmt(), {"NCHW"});
    const int64_t num_stages = static_cast<int64_t>(stages->size());
    const auto [take_indices, max_index] = feature_take_indices(num_stages, options.indices());
    const std::vector<bool> take = take_mask(num_stages, take_indices);
    const int64_t last = num_stages - 1;
    Intermediates out;
    at::Tensor x = patch_embed(input);
    const int64_t stages_run = options.stop_early() ? max_index + 1 : num_stages;
    for (int64_t i = 0; i < stages_run; ++i) {
      x = stages->ptr<SwinTransformerStageImpl>(static_cast<size_t>(i))->forward(x);
      if (take[static_cast<size_t>(i)]) {
        const at::Tensor y = options.norm() && i == last ? norm(x) : x;
        out.intermediates.push_back(y.permute({0, 3, 1, 2}).contiguous());
      }
    }
    if (!options.intermediates_only()) out.final = stages_run == num_stages ? norm(x) : x;
    return out;
  }
  // timm's forward_head: the ClassifierHead (pool over H, W, dropout, fc).
  at::Tensor forward_head(at::Tensor x, bool pre_logits = false) override {
    return pre_logits ? head->forward_pre_logits(x) : head(x);
  }
  at::Tensor forward(at::Tensor x) override { return forward_head(forward_features(x)); }
  // timm: each stage's grad_checkpointing.
  void set_grad_checkpointing(bool enable) override {
    for (size_t i = 0; i < stages->size(); ++i) stages->ptr<SwinTransformerStageImpl>(i)->grad_checkpointing = enable;
  }
  int64_t num_classes() const override { return num_classes_; }
  const PretrainedCfg& pretrained_cfg() const override { return cfg_; }
  // timm's no_weight_decay: every relative_position_bias_table by its full name.
  std::vector<std::string> no_weight_decay() const override {
    std::vector<std::string> names;
    for (const auto& item : named_parameters()) {
      if (item.key().find("relative_position_bias_table") != std::string::npos) names.push_back(item.key());
    }
    return names;
  }
  GroupMatcher group_matcher(bool coarse) const override {
    if (coarse) return {{"stem", {{"^patch_embed", std::nullopt}}}, {"blocks", {{R"(^layers\.(\d+))", std::nullopt}}}};
    // timm's patterns verbatim (the first one's unescaped '.' included).
    return {{"stem", {{"^patch_embed", std::nullopt}}},
            {"blocks",
             {{R"(^layers\.(\d+).downsample)", std::vector<double>{0}},
              {R"(^layers\.(\d+)\.\w+\.(\d+))", std::nullopt},
              {R"(^norm)", std::vector<double>{99999}}}}};
  }

  layers::PatchEmbed patch_embed{nullptr};
  nn::Sequential stages{nullptr};  // timm's "layers"
  layers::LayerNorm norm{nullptr};
  layers::ClassifierHeadModule head{nullptr};

 private:
  static std::optional<int64_t> positive_int_kwarg(const std::string& model, const ModelArgs& args,
                                                   const std::string& key) {
    const auto value = model_kwarg_double(model, args, key);
    if (!value) return std::nullopt;
    // Bounded before the cast (a huge value would overflow int64).
    if (!(*value >= 1.0 && *value <= 65536.0) || *value != static_cast<double>(static_cast<int64_t>(*value))) {
      throw UsageError(model + ": " + key + "=" + in_quotes(args.kwargs.at(key)) + ": expected a positive integer");
    }
    return static_cast<int64_t>(*value);
  }

  // timm's init_weights (mode ''): every Linear trunc_normal(.02) with zero
  // bias. The relative position bias tables are trunc_normal(.02) as built,
  // the patch conv keeps the Conv2d default init and the LayerNorms ones /
  // zeros (timm's needs_reset=False leaves them).
  void init_weights() {
    c10::NoGradGuard no_grad;
    for (auto& module : modules(/*include_self=*/false)) {
      if (auto* linear = module->as<nn::Linear>()) {
        layers::trunc_normal_(linear->weight, 0.0, 0.02);
        if (linear->bias.defined()) linear->bias.zero_();
      }
    }
  }

  PretrainedCfg cfg_;
  std::string name_;
  int64_t num_classes_;
  int64_t num_features_ = 0;
  std::vector<FeatureInfo> feature_info_;
};

std::vector<SwinSpec> swin_specs() {
  const std::vector<int64_t> d2262{2, 2, 6, 2}, d22182{2, 2, 18, 2};
  const std::vector<int64_t> h3{3, 6, 12, 24}, h4{4, 8, 16, 32}, h6{6, 12, 24, 48};
  const std::vector<int64_t> w7(4, 7), w12(4, 12);
  // 224 px tags: crop_pct 0.9; 384 px: 1.0.
  return {
      {.name = "swin_tiny_patch4_window7_224", .depths = d2262, .num_heads = h3, .window_sizes = w7},
      {.name = "swin_small_patch4_window7_224", .depths = d22182, .num_heads = h3, .window_sizes = w7},
      {.name = "swin_base_patch4_window7_224", .embed_dim = 128, .depths = d22182, .num_heads = h4, .window_sizes = w7},
      {.name = "swin_base_patch4_window12_384",
       .embed_dim = 128,
       .depths = d22182,
       .num_heads = h4,
       .window_sizes = w12,
       .img_size = 384,
       .crop_pct = 1.0},
      {.name = "swin_large_patch4_window7_224",
       .embed_dim = 192,
       .depths = d22182,
       .num_heads = h6,
       .window_sizes = w7},
      {.name = "swin_large_patch4_window12_384",
       .embed_dim = 192,
       .depths = d22182,
       .num_heads = h6,
       .window_sizes = w12,
       .img_size = 384,
       .crop_pct = 1.0},
      {.name = "swin_s3_tiny_224", .depths = d2262, .num_heads = h3, .window_sizes = {7, 7, 14, 7}},
      {.name = "swin_s3_small_224", .depths = d22182, .num_heads = h3, .window_sizes = {14, 14, 14, 7}},
      {.name = "swin_s3_base_224", .depths = {2, 2, 30, 2}, .num_heads = h3, .window_sizes = {7, 7, 14, 7}},
  };
}

std::string join_ints(const std::vector<int64_t>& values) {
  std::string text;
  for (size_t i = 0; i < values.size(); ++i) {
    if (i > 0) text += '-';  // appended, not "-" + string: g++ 12 warns falsely on the latter (-Wstringop-overflow)
    text += std::to_string(values[i]);
  }
  return text;
}

std::string describe(const SwinSpec& spec) {
  return "Swin Transformer (embed_dim " + std::to_string(spec.embed_dim) + ", depths " + join_ints(spec.depths) +
         ", heads " + join_ints(spec.num_heads) + ", windows " + join_ints(spec.window_sizes) + ", " +
         std::to_string(spec.img_size) + "x" + std::to_string(spec.img_size) + ")";
}

}  // namespace
}  // namespace timm::swin

TIMM_PLUGIN("swin") {
  for (const auto& spec : timm::swin::swin_specs()) {
    registrar.add_model(spec.name, timm::swin::describe(spec), [spec](const timm::ModelArgs& args) -> timm::ModelPtr {
      return std::make_shared<timm::swin::SwinTransformerImpl>(spec, args);
    });
  }
}
