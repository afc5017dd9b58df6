// EVA and EVA-02 (timm/models/eva.py, class Eva), with timm's module names so
// state_dict keys equal timm's:
// - eva_giant_patch14_{224,336,560} (EVA-g, ~1.0B parameters): abs pos_embed,
//   fused qkv with q_bias / v_bias (no k bias), GELU Mlp, average pool with
//   fc_norm; eva_giant_patch14_clip_224: the same with the class token pool;
// - eva02_{tiny,small}_patch14_{224,336}: abs pos_embed plus RoPE (timm's
//   RotaryEmbeddingCat over the patch grid, scaled to the 16x16 pretraining
//   grid, the prefix tokens not rotated), fused qkv, SwiGLU packed in one fc1
//   (timm's GluMlp); eva02_{base,large}_patch14_{224,448}: separate q / k / v
//   projections and SwiGLU with a LayerNorm before fc2 (scale_mlp);
// - eva02_base_patch16_clip_224, eva02_large_patch14_clip_{224,336}: also a
//   LayerNorm inside attention before proj (scale_attn_inner), token pool;
// - eva02_enormous_patch14_clip_224 (~4.4B): post-norm blocks, token pool;
// - vit_{medium,mediumd,betwixt,base}_patch16_rope_reg{1,4}_gap_256 (timm's
//   SBB ViTs with RoPE): register tokens instead of a class token, no abs
//   pos_embed, LayerScale (gamma_1 / gamma_2, 1e-5), average pool.
// timm's eva_large_patch14_{196,336} are VisionTransformers
// (vision_transformer.py), not Eva: not here.
//
// Supported: num_classes (0: pooled features come out), in_chans, drop_rate
// (head dropout), drop_path_rate (timm's linear per-block rule), global_pool
// 'avg' (fc_norm after the pool, no final norm), 'token', 'avgmax', 'max' (the
// final norm before the pool, as timm: only 'avg' turns fc_norm on) or ''.
// --model-kwargs, as timm's Eva arguments: img_size=<int> (a multiple of the
// patch size; pos_embed and the RoPE grid follow it, the RoPE reference grid
// stays the model's), dynamic_img_size=true (any input size a multiple of the
// patch: pos_embed resampled and the RoPE table built per forward),
// dynamic_img_pad=true (inputs padded up to a multiple of the patch),
// init_values=<float> (LayerScale in pre-norm blocks; 0 removes it; post-norm
// blocks ignore it, as timm's), qk_norm=true (pre-norm blocks only, as timm
// asserts), and embed_dim / depth / num_heads=<int> (smaller widths of an
// architecture, as timm's keyword arguments override the model's; the tests
// use them). Not supported: attention pooling ('map'), patch / pos dropout,
// attention and projection dropout, other RoPE types (mixed, DINOv3, MRoPE),
// the Perception Encoder / DINOv3 / RoPE-ViT names of eva.py.
// Feature extraction as timm's: feature_info and forward_intermediates, one
// level per block (NCHW maps over the input's patch grid, or NLC tokens).
#include <algorithm>
#include <array>
#include <cmath>
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
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/linear.h>

#include "timm/base/error.hpp"
#include "timm/layers/drop_path.hpp"
#include "timm/layers/linear.hpp"
#include "timm/layers/mlp.hpp"
#include "timm/layers/norm.hpp"
#include "timm/layers/patch_embed.hpp"
#include "timm/layers/pos_embed.hpp"
#include "timm/layers/rope.hpp"
#include "timm/layers/weight_init.hpp"
#include "timm/models/grad_checkpoint.hpp"
#include "timm/models/model.hpp"
#include "timm/plugin/plugin.hpp"

namespace timm::eva {
namespace {

namespace nn = torch::nn;

// timm 1.0.31's default pretrained tag of each model (the first tag of its
// default_cfgs); eva02_enormous_patch14_clip_224's is laion2b.
const std::map<std::string, std::string> kDefaultTags = {{"eva02_base_patch14_224", "mim_in22k"},
                                                         {"eva02_base_patch14_448", "mim_in22k_ft_in22k_in1k"},
                                                         {"eva02_base_patch16_clip_224", "merged2b"},
                                                         {"eva02_enormous_patch14_clip_224", "laion2b"},
                                                         {"eva02_large_patch14_224", "mim_in22k"},
                                                         {"eva02_large_patch14_448", "mim_in22k_ft_in22k_in1k"},
                                                         {"eva02_large_patch14_clip_224", "merged2b"},
                                                         {"eva02_large_patch14_clip_336", "merged2b"},
                                                         {"eva02_small_patch14_224", "mim_in22k"},
                                                         {"eva02_small_patch14_336", "mim_in22k_ft_in1k"},
                                                         {"eva02_tiny_patch14_224", "mim_in22k"},
                                                         {"eva02_tiny_patch14_336", "mim_in22k_ft_in1k"},
                                                         {"eva_giant_patch14_224", "clip_ft_in1k"},
                                                         {"eva_giant_patch14_336", "clip_ft_in1k"},
                                                         {"eva_giant_patch14_560", "m30m_ft_in22k_in1k"},
                                                         {"eva_giant_patch14_clip_224", "laion400m"},
                                                         {"vit_base_patch16_rope_reg1_gap_256", "sbb_in1k"},
                                                         {"vit_betwixt_patch16_rope_reg4_gap_256", "sbb_in1k"},
                                                         {"vit_medium_patch16_rope_reg1_gap_256", "sbb_in1k"},
                                                         {"vit_mediumd_patch16_rope_reg1_gap_256", "sbb_in1k"}};

struct AttentionArgs {
  int64_t dim = 0;
  int64_t num_heads = 0;
  bool qkv_bias = true;
  bool qkv_fused = true;
  int64_t num_prefix_tokens = 1;
  bool qk_norm = false;
  bool scale_norm = false;
};

// timm's EvaAttention: fused qkv (no bias of its own; q_bias and v_bias
// parameters with a zero k bias between them) or separate q_proj / k_proj
// (no bias) / v_proj; optional q_norm / k_norm per head; RoPE on the patch
// tokens of q and k (the prefix tokens pass unrotated); scaled dot-product
// attention; optional LayerNorm "norm" before proj (scale_norm).
class EvaAttentionImpl : public nn::Module {
 public:
  explicit EvaAttentionImpl(const AttentionArgs& a)
      : num_heads_(a.num_heads), head_dim_(a.dim / a.num_heads), num_prefix_tokens_(a.num_prefix_tokens) {
    const int64_t attn_dim = head_dim_ * num_heads_;
    if (a.qkv_fused) {
      qkv = register_module("qkv", layers::Linear(nn::LinearOptions(a.dim, 3 * attn_dim).bias(false)));
      if (a.qkv_bias) {
        q_bias = register_parameter("q_bias", at::zeros({attn_dim}));
        v_bias = register_parameter("v_bias", at::zeros({attn_dim}));
      }
    } else {
      q_proj = register_module("q_proj", layers::Linear(nn::LinearOptions(a.dim, attn_dim).bias(a.qkv_bias)));
      k_proj = register_module("k_proj", layers::Linear(nn::LinearOptions(a.dim, attn_dim).bias(false)));
      v_proj = register_module("v_proj", layers::Linear(nn::LinearOptions(a.dim, attn_dim).bias(a.qkv_bias)));
    }
    if (a.qk_norm) {
      q_norm = register_module("q_norm", layers::LayerNorm(head_dim_));
      k_norm = register_module("k_norm", layers::LayerNorm(head_dim_));
    }
    if (a.scale_norm) norm = register_module("norm", layers::LayerNorm(attn_dim));
    proj = register_module("proj", layers::Linear(attn_dim, a.dim));
  }

  // x (B, N, dim); rope undefined or (N - prefix, 2 * head_dim) [sin | cos].
  at::Tensor forward(const at::Tensor& x, const at::Tensor& rope) {
    const int64_t batch = x.size(0);
    const int64_t tokens = x.size(1);
    at::Tensor q, k, v;
    if (qkv) {
      // timm: F.linear with the bias cat(q_bias, zeros, v_bias) (qkv_bias_separate off).
      const at::Tensor out =
          q_bias.defined() ? at::linear(x, qkv->weight, at::cat({q_bias, at::zeros_like(q_bias), v_bias})) : qkv(x);
      const auto heads = out.reshape({batch, tokens, 3, num_heads_, -1}).permute({2, 0, 3, 1, 4}).unbind(0);
      q = heads[0];
      k = heads[1];
      v = heads[2];
    } else {
      q = split_heads(q_proj(x));
      k = split_heads(k_proj(x));
      v = split_heads(v_proj(x));
    }
    if (q_norm) {
      q = q_norm(q);
      k = k_norm(k);
    }
    if (rope.defined()) {
      q = rotate_patches(q, rope).to(v.scalar_type());
      k = rotate_patches(k, rope).to(v.scalar_type());
    }
    at::Tensor out = at::scaled_dot_product_attention(q, k, v);
    out = out.transpose(1, 2).reshape({batch, tokens, -1});
    if (norm) out = norm(out);
    return proj(out);
  }

  layers::Linear qkv{nullptr}, q_proj{nullptr}, k_proj{nullptr}, v_proj{nullptr};
  at::Tensor q_bias, v_bias;  // fused qkv with qkv_bias only
  layers::LayerNorm q_norm{nullptr}, k_norm{nullptr}, norm{nullptr};
  layers::Linear proj{nullptr};

 private:
  at::Tensor split_heads(const at::Tensor& x) const {
    return x.reshape({x.size(0), x.size(1), num_heads_, -1}).transpose(1, 2);
  }

  at::Tensor rotate_patches(const at::Tensor& t, const at::Tensor& rope) const {
    return at::cat(
        {t.slice(2, 0, num_prefix_tokens_), layers::apply_rot_embed_cat(t.slice(2, num_prefix_tokens_), rope)}, 2);
  }

  int64_t num_heads_;
  int64_t head_dim_;
  int64_t num_prefix_tokens_;
};
TORCH_MODULE(EvaAttention);

struct BlockArgs {
  AttentionArgs attn;
  double mlp_ratio = 4.0;
  bool swiglu_mlp = false;
  bool scale_mlp = false;
  bool post_norm = false;
  std::optional<double> init_values;  // pre-norm only
  double drop_path = 0.0;
};

// timm's EvaBlock (pre-norm: x + drop_path(gamma_1 * attn(norm1(x))), then
// the MLP the same way with norm2 / gamma_2) and EvaBlockPostNorm (x +
// drop_path(norm1(attn(x))), then x + drop_path(norm2(mlp(x)))). The MLP is
// timm's choice: GELU Mlp; SwiGLU packed in GluMlp; SwiGLU with a norm.
class EvaBlockImpl : public nn::Module {
 public:
  explicit EvaBlockImpl(const BlockArgs& a) : post_norm_(a.post_norm) {
    const int64_t dim = a.attn.dim;
    // timm's attribute order, which the state_dict follows: the post-norm
    // block creates attn before norm1 and mlp before norm2.
    if (!post_norm_) norm1 = register_module("norm1", layers::LayerNorm(dim));
    attn = register_module("attn", EvaAttention(a.attn));
    if (post_norm_) norm1 = register_module("norm1", layers::LayerNorm(dim));
    if (a.init_values && !post_norm_) gamma_1 = register_parameter("gamma_1", at::full({dim}, *a.init_values));
    if (a.drop_path > 0.0) drop_path1 = register_module("drop_path1", layers::DropPath(a.drop_path));
    if (!post_norm_) norm2 = register_module("norm2", layers::LayerNorm(dim));
    const auto hidden = static_cast<int64_t>(static_cast<double>(dim) * a.mlp_ratio);
    if (a.swiglu_mlp && a.scale_mlp) {
      mlp = nn::AnyModule(layers::SwiGLU(layers::SwiGLUOptions(dim).hidden_features(hidden).norm_layer("layernorm")));
    } else if (a.swiglu_mlp) {
      mlp = nn::AnyModule(
          layers::GluMlp(layers::GluMlpOptions(dim).hidden_features(hidden * 2).act_layer("silu").gate_last(false)));
    } else {
      mlp = nn::AnyModule(layers::Mlp(layers::MlpOptions(dim).hidden_features(hidden)));
    }
    register_module("mlp", mlp.ptr());
    if (post_norm_) norm2 = register_module("norm2", layers::LayerNorm(dim));
    if (a.init_values && !post_norm_) gamma_2 = register_parameter("gamma_2", at::full({dim}, *a.init_values));
    if (a.drop_path > 0.0) drop_path2 = register_module("drop_path2", layers::DropPath(a.drop_path));
  }

  at::Tensor forward(const at::Tensor& input, const at::Tensor& rope) {
    at::Tensor x = input;
    if (post_norm_) {
      x = x + drop(norm1(attn(x, rope)), drop_path1);
      return x + drop(norm2(mlp.forward(x)), drop_path2);
    }
    at::Tensor y = attn(norm1(x), rope);
    if (gamma_1.defined()) y = gamma_1 * y;
    x = x + drop(y, drop_path1);
    y = mlp.forward(norm2(x));
    if (gamma_2.defined()) y = gamma_2 * y;
    return x + drop(y, drop_path2);
  }

  layers::LayerNorm norm1{nullptr}, norm2{nullptr};
  EvaAttention attn{nullptr};
  nn::AnyModule mlp;            // Mlp, GluMlp or SwiGLU
  at::Tensor gamma_1, gamma_2;  // LayerScale, undefined without init_values
  layers::DropPath drop_path1{nullptr}, drop_path2{nullptr};

 private:
  static at::Tensor drop(const at::Tensor& y, layers::DropPath& drop_path) { return drop_path ? drop_path(y) : y; }

  bool post_norm_;
};
TORCH_MODULE(EvaBlock);

// One registered architecture: timm's Eva arguments for the name.
struct EvaSpec {
  std::string name;
  int64_t img_size = 224;
  int64_t patch_size = 14;
  int64_t embed_dim = 768;
  int64_t depth = 12;
  int64_t num_heads = 12;
  double mlp_ratio = 4.0;
  bool qkv_bias = true;
  bool qkv_fused = true;
  bool swiglu_mlp = false;
  bool scale_mlp = false;
  bool scale_attn_inner = false;
  bool use_abs_pos_emb = true;
  bool use_rot_pos_emb = false;
  std::optional<layers::GridShape> ref_feat_shape;
  bool use_post_norm = false;
  bool class_token = true;
  int64_t num_reg_tokens = 0;
  std::optional<double> init_values;
  std::string global_pool = "avg";
  PretrainedCfg cfg;
};

const std::vector<std::string> kPoolTypes = {"avg", "token", "avgmax", "max", ""};

class EvaImpl : public ClassifierImpl {
 public:
  EvaImpl(const EvaSpec& spec, const ModelArgs& args)
      : cfg_(spec.cfg),
        num_classes_(args.num_classes),
        drop_rate_(args.drop_rate),
        global_pool_(args.global_pool.value_or(spec.global_pool)) {
    cfg_.hf_hub_id = timm_hub_id(spec.name, kDefaultTags);
    const std::string& name = spec.name;
    validate_model_args(name, args,
                        {"img_size", "dynamic_img_size", "dynamic_img_pad", "init_values", "qk_norm", "embed_dim",
                         "depth", "num_heads"});
    if (std::find(kPoolTypes.begin(), kPoolTypes.end(), global_pool_) == kPoolTypes.end()) {
      throw UsageError("global_pool " + in_quotes(global_pool_) + ": " + name +
                       " supports 'avg', 'token', 'avgmax', 'max' or '' (none)");
    }
    if (!spec.class_token && global_pool_ == "token") {
      throw UsageError("global_pool 'token': " + name + " has no class token; use 'avg', 'avgmax', 'max' or '' (none)");
    }
    // timm: keyword arguments override the model's own (dict(model_args, **kwargs)).
    const int64_t img_size = model_kwarg_positive_int(name, args, "img_size").value_or(spec.img_size);
    const int64_t dim = model_kwarg_positive_int(name, args, "embed_dim").value_or(spec.embed_dim);
    const int64_t depth = model_kwarg_positive_int(name, args, "depth").value_or(spec.depth);
    const int64_t num_heads = model_kwarg_positive_int(name, args, "num_heads").value_or(spec.num_heads);
    if (img_size % spec.patch_size != 0) {
      throw UsageError(name + ": img_size=" + std::to_string(img_size) + ": expected a multiple of the patch size " +
                       std::to_string(spec.patch_size));
    }
    if (dim % num_heads != 0) {
      throw UsageError(name + ": num_heads=" + std::to_string(num_heads) +
                       " must divide embed_dim=" + std::to_string(dim));
    }
    if (spec.use_rot_pos_emb && (dim / num_heads) % 4 != 0) {
      throw UsageError(name + ": the head width embed_dim / num_heads = " + std::to_string(dim / num_heads) +
                       " must be a multiple of 4 for the rotary embedding");
    }
    const bool qk_norm = model_kwarg_bool(name, args, "qk_norm").value_or(false);
    if (qk_norm && spec.use_post_norm) {
      throw UsageError(name + ": qk_norm is not supported with post-norm blocks (as timm's Eva)");
    }
    std::optional<double> init_values = model_kwarg_double(name, args, "init_values");
    if (!init_values) init_values = spec.init_values;
    if (init_values == 0.0) init_values.reset();  // timm: falsy init_values means no LayerScale
    dynamic_img_size_ = model_kwarg_bool(name, args, "dynamic_img_size").value_or(false);
    num_prefix_tokens_ = (spec.class_token ? 1 : 0) + spec.num_reg_tokens;

    auto embed = layers::PatchEmbedOptions(img_size, spec.patch_size, args.in_chans, dim)
                     .dynamic_img_pad(model_kwarg_bool(name, args, "dynamic_img_pad").value_or(false));
    // timm: the tokens stay a grid (NHWC) until pos_embed is resampled to it.
    if (dynamic_img_size_) embed.strict_img_size(false).output_fmt("NHWC");
    patch_embed = register_module("patch_embed", layers::PatchEmbed(embed));
    // timm's parameter order: cls_token, reg_token, pos_embed (no_embed_class off: prefix entries included).
    if (spec.class_token) cls_token = register_parameter("cls_token", at::zeros({1, 1, dim}));
    if (spec.num_reg_tokens > 0) {
      reg_token = register_parameter("reg_token", at::zeros({1, spec.num_reg_tokens, dim}));
    }
    if (spec.use_abs_pos_emb) {
      pos_embed = register_parameter("pos_embed", at::zeros({1, patch_embed->num_patches() + num_prefix_tokens_, dim}));
    }
    if (spec.use_rot_pos_emb) {
      auto rope_options =
          layers::RotaryEmbeddingCatOptions(dim / num_heads).in_pixels(false).ref_feat_shape(spec.ref_feat_shape);
      if (!dynamic_img_size_) {
        rope_options.feat_shape(layers::GridShape{patch_embed->grid_size(), patch_embed->grid_size()});
      }
      rope = register_module("rope", layers::RotaryEmbeddingCat(rope_options));
    }

    BlockArgs block;
    block.attn = {dim, num_heads, spec.qkv_bias, spec.qkv_fused, num_prefix_tokens_, qk_norm, spec.scale_attn_inner};
    block.mlp_ratio = spec.mlp_ratio;
    block.swiglu_mlp = spec.swiglu_mlp;
    block.scale_mlp = spec.scale_mlp;
    block.post_norm = spec.use_post_norm;
    block.init_values = init_values;
    blocks = register_module("blocks", nn::ModuleList());
    const auto dpr = layers::drop_path_rates(args.drop_path_rate.value_or(0.0), depth);
    for (int64_t i = 0; i < depth; ++i) {
      block.drop_path = dpr[static_cast<size_t>(i)];
      block_list_.push_back(EvaBlock(block));
      blocks->push_back(block_list_.back());
    }
    // timm's norm placement: fc_norm after the pool with 'avg' only, else
    // the final norm on the tokens.
    if (global_pool_ == "avg") {
      fc_norm = register_module("fc_norm", layers::LayerNorm(dim));
    } else {
      norm = register_module("norm", layers::LayerNorm(dim));
    }
    if (num_classes_ > 0) head = register_module("head", layers::Linear(dim, num_classes_));
    init_weights();
  }

  // timm's forward_features: patch embedding, prefix tokens and pos_embed,
  // the blocks (each given the RoPE table), the final norm (an Identity with
  // fc_norm): (N, prefix + patches, dim). With grad checkpointing each block
  // is checkpointed, as timm's.
  at::Tensor forward_features(at::Tensor input) override {
    auto [x, rope_embed] = embed(input);
    for (auto& block : block_list_) x = run_block(block, x, rope_embed);
    return final_norm(x);
  }

  // timm's feature levels: every block, at the patch size's stride.
  std::vector<FeatureInfo> feature_info() const override {
    std::vector<FeatureInfo> info;
    for (size_t i = 0; i < block_list_.size(); ++i) {
      info.push_back(
          {patch_embed->options.embed_dim(), patch_embed->options.patch_size(), "blocks." + std::to_string(i)});
    }
    return info;
  }

  // timm's forward_intermediates: the outputs of the blocks taken (with norm
  // through the final norm, an Identity with fc_norm), without the prefix
  // tokens, as NCHW maps over the input's patch grid or NLC tokens; the final
  // features are the final norm of the last block run.
  Intermediates forward_intermediates(at::Tensor input,
                                      const IntermediatesOptions& options = IntermediatesOptions()) override {
    check_output_fmt(describe_model(*this), options.output_fmt(), {"NCHW", "NLC"});
    const auto depth = static_cast<int64_t>(block_list_.size());
    const auto [take_indices, max_index] = feature_take_indices(depth, options.indices());
    const std::vector<bool> take = take_mask(depth, take_indices);
    Intermediates out;
    auto [x, rope_embed] = embed(input);  // checks the input's size before the grid is read from it
    const auto grid = patch_embed->dynamic_feat_size(input.size(2), input.size(3));
    const int64_t blocks_run = options.stop_early() ? max_index + 1 : depth;
    for (int64_t i = 0; i < blocks_run; ++i) {
      x = run_block(block_list_[static_cast<size_t>(i)], x, rope_embed);
      if (take[static_cast<size_t>(i)]) {
        out.intermediates.push_back(patch_tokens(options.norm() ? final_norm(x) : x, grid, options.output_fmt()));
      }
    }
    if (!options.intermediates_only()) out.final = final_norm(x);
    return out;
  }

  // timm's forward_head: pool, fc_norm, head_drop, then head unless pre_logits.
  at::Tensor forward_head(at::Tensor x, bool pre_logits = false) override {
    at::Tensor y = pool(x);
    if (fc_norm) y = fc_norm(y);
    if (drop_rate_ > 0.0) y = at::dropout(y, drop_rate_, is_training());
    return pre_logits || !head ? y : head(y);
  }

  at::Tensor forward(at::Tensor x) override { return forward_head(forward_features(x)); }
  void set_grad_checkpointing(bool enable) override { grad_checkpointing_ = enable; }
  int64_t num_classes() const override { return num_classes_; }
  const PretrainedCfg& pretrained_cfg() const override { return cfg_; }
  std::vector<std::string> no_weight_decay() const override { return {"pos_embed", "cls_token", "reg_token"}; }
  GroupMatcher group_matcher(bool /*coarse*/) const override {
    return {{"stem", {{R"(^cls_token|reg_token|pos_embed|patch_embed|norm_pre)", std::nullopt}}},
            {"blocks", {{R"(^blocks\.(\d+))", std::nullopt}, {R"(^norm)", std::vector<double>{99999}}}}};
  }

  layers::PatchEmbed patch_embed{nullptr};
  at::Tensor cls_token, reg_token, pos_embed;  // undefined when the model has none
  layers::RotaryEmbeddingCat rope{nullptr};    // null without RoPE
  nn::ModuleList blocks{nullptr};
  layers::LayerNorm norm{nullptr};     // null with fc_norm
  layers::LayerNorm fc_norm{nullptr};  // 'avg' pool only
  layers::Linear head{nullptr};        // null when num_classes is 0

 private:
  // One block, checkpointed with grad checkpointing (the function, which the
  // backward pass reruns, holds the block and the table by value).
  at::Tensor run_block(EvaBlock& block, const at::Tensor& x, const at::Tensor& rope_embed) {
    if (!grad_checkpointing_) return block->forward(x, rope_embed);
    return checkpoint([impl = block.ptr(), rope_embed](const at::Tensor& t) { return impl->forward(t, rope_embed); }, x,
                      block->parameters());
  }

  // timm's patch_embed then _pos_embed (pos_drop, patch_drop and norm_pre
  // are Identities here): the token sequence and the RoPE table for its
  // patch grid (undefined without RoPE). With dynamic_img_size the (N, H, W,
  // C) grid gets pos_embed resampled (bicubic, antialiased, as timm) from the
  // model's grid and a float32 RoPE table built for H x W; otherwise the
  // cached table in the parameters' dtype (timm's buffer after model.to()).
  std::pair<at::Tensor, at::Tensor> embed(const at::Tensor& input) {
    at::Tensor x = patch_embed(input);
    at::Tensor pos = pos_embed;
    at::Tensor rope_embed;
    if (dynamic_img_size_) {
      const int64_t grid = patch_embed->grid_size();
      if (pos.defined()) {
        pos = layers::resample_abs_pos_embed(pos_embed, {x.size(1), x.size(2)}, std::array<int64_t, 2>{grid, grid},
                                             num_prefix_tokens_);
      }
      if (rope) rope_embed = rope->build_embed({x.size(1), x.size(2)}, x.device());
      x = x.reshape({x.size(0), -1, x.size(3)});
    } else if (rope) {
      rope_embed = rope->get_embed(patch_embed->proj->weight.options());
    }
    std::vector<at::Tensor> tokens;
    for (const at::Tensor* token : {&cls_token, &reg_token}) {
      if (token->defined()) tokens.push_back(token->expand({x.size(0), -1, -1}));
    }
    if (!tokens.empty()) {
      tokens.push_back(x);
      x = at::cat(tokens, 1);
    }
    if (pos.defined()) x = x + pos;
    return {x, rope_embed};
  }

  // timm's self.norm, an Identity with fc_norm.
  at::Tensor final_norm(const at::Tensor& x) { return norm ? norm(x) : x; }

  // An intermediate as timm returns it: the prefix tokens dropped, then for
  // "NCHW" the (N, dim, H, W) map over the patch grid.
  at::Tensor patch_tokens(const at::Tensor& x, const std::array<int64_t, 2>& grid,
                          const std::string& output_fmt) const {
    const at::Tensor patches = x.slice(1, num_prefix_tokens_);
    if (output_fmt == "NLC") return patches;
    return patches.reshape({x.size(0), grid[0], grid[1], -1}).permute({0, 3, 1, 2}).contiguous();
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

  // timm's Eva.init_weights (needs_reset False): every Linear
  // trunc_normal(.02) with zero bias; pos_embed, cls_token and reg_token
  // trunc_normal(.02); fix_init_weight: each block i's attn.proj and mlp.fc2
  // weights divided by sqrt(2 (i + 1)); the head's weight and bias times
  // head_init_scale (0.001). The patch conv keeps the Conv2d default init,
  // the LayerNorms ones / zeros, q_bias / v_bias zeros and LayerScale
  // init_values, as timm.
  void init_weights() {
    c10::NoGradGuard no_grad;
    for (auto& module : modules(/*include_self=*/false)) {
      if (auto* linear = module->as<nn::Linear>()) {
        layers::trunc_normal_(linear->weight, 0.0, 0.02);
        if (linear->bias.defined()) linear->bias.zero_();
      }
    }
    for (at::Tensor* token : {&pos_embed, &cls_token, &reg_token}) {
      if (token->defined()) layers::trunc_normal_(*token, 0.0, 0.02);
    }
    for (size_t i = 0; i < block_list_.size(); ++i) {
      const double scale = std::sqrt(2.0 * static_cast<double>(i + 1));
      auto params = block_list_[i]->named_parameters();
      params["attn.proj.weight"].div_(scale);
      params["mlp.fc2.weight"].div_(scale);
    }
    if (head) {
      constexpr double kHeadInitScale = 0.001;
      head->weight.mul_(kHeadInitScale);
      head->bias.mul_(kHeadInitScale);
    }
  }

  PretrainedCfg cfg_;
  int64_t num_classes_;
  double drop_rate_;
  std::string global_pool_;
  bool dynamic_img_size_ = false;
  int64_t num_prefix_tokens_ = 1;
  bool grad_checkpointing_ = false;
  std::vector<EvaBlock> block_list_;  // the blocks' typed handles (forward takes the RoPE table)
};

// timm's _cfg for Eva: bicubic, CLIP mean/std unless given, crop_pct 0.9 unless given.
enum class Norm { kClip, kImagenet, kInception };

PretrainedCfg eva_cfg(int64_t img, double crop_pct, const std::string& crop_mode, int64_t num_classes,
                      Norm norm = Norm::kClip) {
  PretrainedCfg cfg;
  cfg.input_size = {3, img, img};
  cfg.interpolation = "bicubic";
  cfg.crop_pct = crop_pct;
  cfg.crop_mode = crop_mode;
  if (norm == Norm::kClip) {
    cfg.mean = {kOpenaiClipMean[0], kOpenaiClipMean[1], kOpenaiClipMean[2]};
    cfg.std = {kOpenaiClipStd[0], kOpenaiClipStd[1], kOpenaiClipStd[2]};
  } else if (norm == Norm::kInception) {
    cfg.mean = {0.5, 0.5, 0.5};
    cfg.std = {0.5, 0.5, 0.5};
  }
  cfg.first_conv = "patch_embed.proj";
  cfg.classifier = "head";
  cfg.num_classes = num_classes;
  return cfg;
}

// EVA-02's 4 * 2 / 3 MLP ratio, as timm computes it.
constexpr double kEva02MlpRatio = 4.0 * 2 / 3;

// eva02_<size>_patch14_<img>: RoPE scaled to the 16x16 pretraining grid,
// SwiGLU; tiny / small fused qkv and the packed SwiGLU, base / large separate
// q / k / v and the normed SwiGLU.
EvaSpec eva02(const std::string& size, int64_t dim, int64_t depth, int64_t heads, int64_t img, PretrainedCfg cfg) {
  EvaSpec spec;
  spec.name = "eva02_" + size + "_patch14_" + std::to_string(img);
  spec.img_size = img;
  spec.patch_size = 14;
  spec.embed_dim = dim;
  spec.depth = depth;
  spec.num_heads = heads;
  spec.mlp_ratio = kEva02MlpRatio;
  spec.swiglu_mlp = true;
  spec.use_rot_pos_emb = true;
  spec.ref_feat_shape = layers::GridShape{16, 16};
  if (size == "base" || size == "large") {
    spec.qkv_fused = false;
    spec.scale_mlp = true;
  }
  spec.cfg = std::move(cfg);
  return spec;
}

// EVA-CLIP image towers of EVA-02: attention's inner norm too, token pool.
EvaSpec eva02_clip(const std::string& size, int64_t dim, int64_t depth, int64_t heads, int64_t patch, int64_t img,
                   PretrainedCfg cfg) {
  EvaSpec spec = eva02(size, dim, depth, heads, img, std::move(cfg));
  spec.name = "eva02_" + size + "_patch" + std::to_string(patch) + "_clip_" + std::to_string(img);
  spec.patch_size = patch;
  spec.scale_attn_inner = true;
  spec.global_pool = "token";
  return spec;
}

// EVA-g: abs pos_embed only, GELU Mlp; img_size from the default cfg (timm's fixed_input_size).
EvaSpec eva_giant(const std::string& name, PretrainedCfg cfg) {
  EvaSpec spec;
  spec.name = name;
  spec.img_size = cfg.input_size[2];
  spec.patch_size = 14;
  spec.embed_dim = 1408;
  spec.depth = 40;
  spec.num_heads = 16;
  spec.mlp_ratio = 6144.0 / 1408;
  spec.cfg = std::move(cfg);
  return spec;
}

// timm's SBB ViTs with RoPE: register tokens, no class token, no abs
// pos_embed, LayerScale 1e-5, 256 px, patch 16.
EvaSpec rope_vit(const std::string& name, int64_t dim, int64_t depth, int64_t heads, int64_t reg_tokens, bool qkv_bias,
                 Norm norm) {
  EvaSpec spec;
  spec.name = name;
  spec.img_size = 256;
  spec.patch_size = 16;
  spec.embed_dim = dim;
  spec.depth = depth;
  spec.num_heads = heads;
  spec.qkv_bias = qkv_bias;
  spec.init_values = 1e-5;
  spec.class_token = false;
  spec.num_reg_tokens = reg_tokens;
  spec.use_abs_pos_emb = false;
  spec.use_rot_pos_emb = true;
  spec.ref_feat_shape = layers::GridShape{16, 16};
  spec.cfg = eva_cfg(256, 0.95, "center", 1000, norm);
  return spec;
}

std::vector<EvaSpec> eva_specs() {
  std::vector<EvaSpec> specs = {
      eva_giant("eva_giant_patch14_224", eva_cfg(224, 0.9, "center", 1000)),
      eva_giant("eva_giant_patch14_336", eva_cfg(336, 1.0, "squash", 1000)),
      eva_giant("eva_giant_patch14_560", eva_cfg(560, 1.0, "squash", 1000, Norm::kImagenet)),
      eva02("tiny", 192, 12, 3, 224, eva_cfg(224, 0.9, "center", 0)),
      eva02("small", 384, 12, 6, 224, eva_cfg(224, 0.9, "center", 0)),
      eva02("base", 768, 12, 12, 224, eva_cfg(224, 0.9, "center", 0)),
      eva02("large", 1024, 24, 16, 224, eva_cfg(224, 0.9, "center", 0)),
      eva02("tiny", 192, 12, 3, 336, eva_cfg(336, 1.0, "center", 1000)),
      eva02("small", 384, 12, 6, 336, eva_cfg(336, 1.0, "center", 1000)),
      eva02("base", 768, 12, 12, 448, eva_cfg(448, 1.0, "squash", 1000)),
      eva02("large", 1024, 24, 16, 448, eva_cfg(448, 1.0, "squash", 1000)),
  };
  EvaSpec giant_clip = eva_giant("eva_giant_patch14_clip_224", eva_cfg(224, 0.9, "center", 1024));
  giant_clip.global_pool = "token";
  specs.push_back(giant_clip);
  specs.push_back(eva02_clip("base", 768, 12, 12, 16, 224, eva_cfg(224, 0.9, "center", 512)));
  specs.push_back(eva02_clip("large", 1024, 24, 16, 14, 224, eva_cfg(224, 0.9, "center", 768)));
  specs.push_back(eva02_clip("large", 1024, 24, 16, 14, 336, eva_cfg(336, 1.0, "center", 768)));
  // EVA-02-CLIP-E: post-norm blocks, GELU Mlp, no RoPE.
  EvaSpec enormous;
  enormous.name = "eva02_enormous_patch14_clip_224";
  enormous.patch_size = 14;
  enormous.embed_dim = 1792;
  enormous.depth = 64;
  enormous.num_heads = 16;
  enormous.mlp_ratio = 15360.0 / 1792;
  enormous.use_post_norm = true;
  enormous.global_pool = "token";
  enormous.cfg = eva_cfg(224, 0.9, "center", 1024);
  specs.push_back(enormous);
  specs.push_back(rope_vit("vit_medium_patch16_rope_reg1_gap_256", 512, 12, 8, 1, true, Norm::kInception));
  specs.push_back(rope_vit("vit_mediumd_patch16_rope_reg1_gap_256", 512, 20, 8, 1, false, Norm::kInception));
  specs.push_back(rope_vit("vit_betwixt_patch16_rope_reg4_gap_256", 640, 12, 10, 4, true, Norm::kClip));
  specs.push_back(rope_vit("vit_base_patch16_rope_reg1_gap_256", 768, 12, 12, 1, true, Norm::kInception));
  return specs;
}

std::string describe(const EvaSpec& spec) {
  std::string kind = spec.name.rfind("vit_", 0) == 0     ? "ViT (RoPE, registers)"
                     : spec.name.rfind("eva02_", 0) == 0 ? "EVA-02"
                                                         : "EVA";
  std::string parts;
  if (spec.use_rot_pos_emb) parts += ", RoPE";
  if (spec.swiglu_mlp) parts += ", SwiGLU";
  if (spec.use_post_norm) parts += ", post-norm";
  return kind + " (dim " + std::to_string(spec.embed_dim) + ", depth " + std::to_string(spec.depth) + ", heads " +
         std::to_string(spec.num_heads) + ", patch " + std::to_string(spec.patch_size) + ", " +
         std::to_string(spec.img_size) + "x" + std::to_string(spec.img_size) + parts + ")";
}

}  // namespace
}  // namespace timm::eva

TIMM_PLUGIN("eva") {
  for (const auto& spec : timm::eva::eva_specs()) {
    registrar.add_model(spec.name, timm::eva::describe(spec), [spec](const timm::ModelArgs& args) -> timm::ModelPtr {
      return std::make_shared<timm::eva::EvaImpl>(spec, args);
    });
  }
}
