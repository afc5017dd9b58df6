// Swin Transformer v1 (timm/models/swin_transformer.py) and SwinV2
// (timm/models/swin_transformer_v2.py; not swin_transformer_v2_cr.py's
// swinv2_cr_*), with timm's module names so state_dict keys equal timm's
// (the blocks: swin_blocks.hpp). v1: swin_tiny / small / base / large
// (patch 4, window 7 at 224, window 12 at 384) and the S3 searched variants
// swin_s3_tiny / small / base_224 (one window size per stage). SwinV2:
// swinv2_tiny / small / base_window8 / 16_256, swinv2_base / large_window12_192
// (in22k heads of 21841 classes), and swinv2_base / large_window12to16_192to256
// and 12to24_192to384 (fine-tuned from window 12: their relative coordinates
// are normalised by pretrained windows 12, 12, 12, 6). NHWC throughout, as
// timm: patch_embed (4x4/4 conv, then LayerNorm on the NHWC map), four stages
// (layers.N.downsample = patch merging from stage 1 on, layers.N.blocks.M
// with window attention, shifted by half a window in every odd block), the
// final norm, and a ClassifierHead over NHWC features (head.fc). Every
// LayerNorm is torch's (eps 1e-5). SwinV2 differs inside the blocks: cosine
// attention with a learnt, capped temperature, a continuous relative position
// bias from an MLP, q / v biases around a zero k bias, norms after the
// attention and the MLP inside the residual (starting at zero), and patch
// merging that reduces before its norm.
//
// Supported: num_classes (0: pooled features come out), in_chans, drop_rate
// (before head.fc), drop_path_rate (default 0.1 as timm's; the float32
// linspace over all blocks), global_pool ('avg' default, 'max', 'avgmax',
// 'catavgmax', 'fast*', or '' for per-position logits (N, H, W, classes), as
// timm), and --model-kwargs img_size=<int> (the input must be that size,
// timm's strict_img_size), window_size=<int> (every stage's, in place of the
// model's; SwinV2 keeps its pretrained windows), always_partition=<bool>;
// feature_info and forward_intermediates (one level per stage, NCHW). Not
// supported: timm's dynamic_img_size / strict_img_size=False, per-stage
// window lists (and SwinV2's pretrained_window_sizes) as kwargs,
// set_input_size.
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/container/any.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>

#include "swin_blocks.hpp"
#include "timm/base/error.hpp"
#include "timm/base/names.hpp"
#include "timm/layers/classifier.hpp"
#include "timm/layers/drop_path.hpp"
#include "timm/layers/norm.hpp"
#include "timm/layers/patch_embed.hpp"
#include "timm/layers/weight_init.hpp"
#include "timm/models/model.hpp"
#include "timm/plugin/plugin.hpp"

namespace timm::swin {
namespace {

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
    {"swinv2_base_window12_192", "ms_in22k"},
    {"swinv2_base_window12to16_192to256", "ms_in22k_ft_in1k"},
    {"swinv2_base_window12to24_192to384", "ms_in22k_ft_in1k"},
    {"swinv2_base_window16_256", "ms_in1k"},
    {"swinv2_base_window8_256", "ms_in1k"},
    {"swinv2_large_window12_192", "ms_in22k"},
    {"swinv2_large_window12to16_192to256", "ms_in22k_ft_in1k"},
    {"swinv2_large_window12to24_192to384", "ms_in22k_ft_in1k"},
    {"swinv2_small_window16_256", "ms_in1k"},
    {"swinv2_small_window8_256", "ms_in1k"},
    {"swinv2_tiny_window16_256", "ms_in1k"},
    {"swinv2_tiny_window8_256", "ms_in1k"},
};

constexpr int64_t kPatchSize = 4;

enum class SwinVersion { kV1, kV2 };

// One registered architecture.
struct SwinSpec {
  std::string name;
  int64_t embed_dim = 96;
  std::vector<int64_t> depths;
  std::vector<int64_t> num_heads;
  std::vector<int64_t> window_sizes;  // one per stage (square windows)
  int64_t img_size = 224;             // the default tag's, timm's fixed_input_size
  double crop_pct = 0.9;
  SwinVersion version = SwinVersion::kV1;
  // SwinV2's pretrained_window_sizes, one per stage (0: the stage's window);
  // empty: all 0, timm's default.
  std::vector<int64_t> pretrained_window_sizes = {};
  int64_t num_classes = 1000;  // the default tag's classifier
};

// One stage: from stage 1 on the version's patch merging from in_dim to the
// stage's dim, then its blocks, unshifted and shifted in turn.
SwinTransformerStage make_stage(SwinVersion version, int64_t in_dim, BlockArgs block,
                                const std::vector<double>& drop_path_rates) {
  nn::AnyModule downsample;
  if (in_dim != block.dim) {
    downsample = version == SwinVersion::kV2 ? nn::AnyModule(PatchMergingV2(in_dim, block.dim))
                                             : nn::AnyModule(PatchMerging(in_dim, block.dim));
  }
  nn::Sequential blocks;
  for (size_t i = 0; i < drop_path_rates.size(); ++i) {
    block.shifted = i % 2 == 1;
    block.drop_path = drop_path_rates[i];
    if (version == SwinVersion::kV2) {
      blocks->push_back(SwinTransformerV2Block(block));
    } else {
      blocks->push_back(SwinTransformerBlock(block));
    }
  }
  return SwinTransformerStage(std::move(downsample), std::move(blocks));
}

class SwinTransformerImpl : public ClassifierImpl {
 public:
  SwinTransformerImpl(const SwinSpec& spec, const ModelArgs& args)
      : version_(spec.version), num_classes_(args.num_classes) {
    validate_model_args(spec.name, args, {"img_size", "window_size", "always_partition"});
    cfg_.input_size = {3, spec.img_size, spec.img_size};
    cfg_.crop_pct = spec.crop_pct;
    cfg_.first_conv = "patch_embed.proj";
    cfg_.classifier = "head.fc";
    cfg_.hf_hub_id = timm_hub_id(spec.name, kDefaultTags);
    cfg_.num_classes = spec.num_classes;

    const int64_t img_size = model_kwarg_positive_int(spec.name, args, "img_size").value_or(spec.img_size);
    // Refused as before PatchEmbed took any img_size (timm's: the pixels past
    // the last whole patch left out).
    if (img_size % kPatchSize != 0) {
      throw UsageError(spec.name + ": img_size=" + std::to_string(img_size) +
                       ": expected a multiple of the patch size " + std::to_string(kPatchSize));
    }
    const auto window_override = model_kwarg_positive_int(spec.name, args, "window_size");
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
      const int64_t pretrained = spec.pretrained_window_sizes.empty() ? 0 : spec.pretrained_window_sizes[i];
      block.pretrained_window = {pretrained, pretrained};
      const std::vector<double> rates(dpr.begin() + first_block, dpr.begin() + first_block + spec.depths[i]);
      first_block += spec.depths[i];
      stages->push_back(make_stage(spec.version, in_dim, block, rates));
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
    check_output_fmt(describe_model(*this), options.output_fmt(), {"NCHW"});
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
  // timm's no_weight_decay by full name: v1's relative_position_bias_table
  // parameters, SwinV2's cpb_mlp and logit_scale ones.
  std::vector<std::string> no_weight_decay() const override {
    std::vector<std::string> keywords = {"relative_position_bias_table"};
    if (version_ == SwinVersion::kV2) keywords = {"cpb_mlp", "logit_scale"};
    std::vector<std::string> names;
    for (const auto& item : named_parameters()) {
      for (const auto& keyword : keywords) {
        if (item.key().find(keyword) != std::string::npos) {
          names.push_back(item.key());
          break;
        }
      }
    }
    return names;
  }
  GroupMatcher group_matcher(bool coarse) const override {
    // SwinV2's stem pattern names an absolute_pos_embed it does not have, as timm's.
    const std::string stem = version_ == SwinVersion::kV2 ? "^absolute_pos_embed|patch_embed" : "^patch_embed";
    if (coarse) return {{"stem", {{stem, std::nullopt}}}, {"blocks", {{R"(^layers\.(\d+))", std::nullopt}}}};
    // timm's patterns verbatim (the first one's unescaped '.' included).
    return {{"stem", {{stem, std::nullopt}}},
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
  // timm's init_weights (mode ''): every Linear trunc_normal(.02) with zero
  // bias (SwinV2's cpb_mlp ones included). v1's relative position bias
  // tables are trunc_normal(.02) and SwinV2's logit_scale log(10), q_bias and
  // v_bias zero as built, the patch conv keeps the Conv2d default init and the
  // LayerNorms ones / zeros (timm's needs_reset=False leaves them), except
  // SwinV2's post-norms: timm's _init_respostnorm zeroes each block's norm1
  // and norm2, so every residual branch starts silent.
  void init_weights() {
    c10::NoGradGuard no_grad;
    for (auto& module : modules(/*include_self=*/false)) {
      if (auto* linear = module->as<nn::Linear>()) {
        layers::trunc_normal_(linear->weight, 0.0, 0.02);
        if (linear->bias.defined()) linear->bias.zero_();
      } else if (auto* block = module->as<SwinTransformerV2Block>()) {
        for (auto* post_norm : {block->norm1.get(), block->norm2.get()}) {
          post_norm->weight.zero_();
          post_norm->bias.zero_();
        }
      }
    }
  }

  PretrainedCfg cfg_;
  SwinVersion version_;
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

// timm's swinv2_* of swin_transformer_v2.py, the default tags': 256 px with
// crop_pct 0.9, 192 px in22k (21841 classes) with 0.9, 384 px with 1.0.
std::vector<SwinSpec> swinv2_specs() {
  const std::vector<int64_t> d2262{2, 2, 6, 2}, d22182{2, 2, 18, 2};
  const std::vector<int64_t> h3{3, 6, 12, 24}, h4{4, 8, 16, 32}, h6{6, 12, 24, 48};
  const std::vector<int64_t> w8(4, 8), w12(4, 12), w16(4, 16), w24(4, 24);
  // Fine-tuned from the window-12 in22k weights (192 px, whose last map is 6x6).
  const std::vector<int64_t> from12{12, 12, 12, 6};
  constexpr SwinVersion v2 = SwinVersion::kV2;
  return {
      {.name = "swinv2_tiny_window16_256",
       .depths = d2262,
       .num_heads = h3,
       .window_sizes = w16,
       .img_size = 256,
       .version = v2},
      {.name = "swinv2_tiny_window8_256",
       .depths = d2262,
       .num_heads = h3,
       .window_sizes = w8,
       .img_size = 256,
       .version = v2},
      {.name = "swinv2_small_window16_256",
       .depths = d22182,
       .num_heads = h3,
       .window_sizes = w16,
       .img_size = 256,
       .version = v2},
      {.name = "swinv2_small_window8_256",
       .depths = d22182,
       .num_heads = h3,
       .window_sizes = w8,
       .img_size = 256,
       .version = v2},
      {.name = "swinv2_base_window16_256",
       .embed_dim = 128,
       .depths = d22182,
       .num_heads = h4,
       .window_sizes = w16,
       .img_size = 256,
       .version = v2},
      {.name = "swinv2_base_window8_256",
       .embed_dim = 128,
       .depths = d22182,
       .num_heads = h4,
       .window_sizes = w8,
       .img_size = 256,
       .version = v2},
      {.name = "swinv2_base_window12_192",
       .embed_dim = 128,
       .depths = d22182,
       .num_heads = h4,
       .window_sizes = w12,
       .img_size = 192,
       .version = v2,
       .num_classes = 21841},
      {.name = "swinv2_base_window12to16_192to256",
       .embed_dim = 128,
       .depths = d22182,
       .num_heads = h4,
       .window_sizes = w16,
       .img_size = 256,
       .version = v2,
       .pretrained_window_sizes = from12},
      {.name = "swinv2_base_window12to24_192to384",
       .embed_dim = 128,
       .depths = d22182,
       .num_heads = h4,
       .window_sizes = w24,
       .img_size = 384,
       .crop_pct = 1.0,
       .version = v2,
       .pretrained_window_sizes = from12},
      {.name = "swinv2_large_window12_192",
       .embed_dim = 192,
       .depths = d22182,
       .num_heads = h6,
       .window_sizes = w12,
       .img_size = 192,
       .version = v2,
       .num_classes = 21841},
      {.name = "swinv2_large_window12to16_192to256",
       .embed_dim = 192,
       .depths = d22182,
       .num_heads = h6,
       .window_sizes = w16,
       .img_size = 256,
       .version = v2,
       .pretrained_window_sizes = from12},
      {.name = "swinv2_large_window12to24_192to384",
       .embed_dim = 192,
       .depths = d22182,
       .num_heads = h6,
       .window_sizes = w24,
       .img_size = 384,
       .crop_pct = 1.0,
       .version = v2,
       .pretrained_window_sizes = from12},
  };
}

std::string describe(const SwinSpec& spec) {
  std::string windows = joined_ints(spec.window_sizes);
  if (!spec.pretrained_window_sizes.empty())
    windows += " (pretrained " + joined_ints(spec.pretrained_window_sizes) + ")";
  return std::string(spec.version == SwinVersion::kV2 ? "Swin Transformer V2" : "Swin Transformer") + " (embed_dim " +
         std::to_string(spec.embed_dim) + ", depths " + joined_ints(spec.depths) + ", heads " +
         joined_ints(spec.num_heads) + ", windows " + windows + ", " + std::to_string(spec.img_size) + "x" +
         std::to_string(spec.img_size) + ")";
}

std::vector<SwinSpec> all_specs() {
  std::vector<SwinSpec> specs = swin_specs();
  for (auto& spec : swinv2_specs()) specs.push_back(std::move(spec));
  return specs;
}

}  // namespace
}  // namespace timm::swin

TIMM_PLUGIN("swin") {
  for (const auto& spec : timm::swin::all_specs()) {
    registrar.add_model(spec.name, timm::swin::describe(spec), [spec](const timm::ModelArgs& args) -> timm::ModelPtr {
      return std::make_shared<timm::swin::SwinTransformerImpl>(spec, args);
    });
  }
}
