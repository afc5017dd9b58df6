// NaFlexVit (timm/models/naflexvit.py): a ViT whose embedding takes either
// images or NaFlex patch batches (variable aspect and resolution, as SigLIP-2's
// NaFlex and NaViT), with timm's module names so state_dict keys equal timm's:
// - naflexvit_base_patch16_{gap,par_gap,parfac_gap,map}, naflexvit_so150m2_
//   patch16_reg1_{gap,map}, naflexvit_{base,so400m}_patch16_siglip and the
//   C-RADIO backbones naflexvit_*_radio_v{3,4}, as timm registers them.
// The embedding (embeds) is a Linear over flat (Ph, Pw, C) patches, the
// prefix tokens (cls_token, reg_token) and a learned position embedding over
// a 16 x 16 grid (pos_embed (1, H, W, C), or with pos_embed 'factorized' the
// tables pos_embed_y / pos_embed_x), resampled to each sample's patch grid:
// bicubic (bilinear for SigLIP and RADIO) with antialias, aspect-preserving
// for the par / RADIO models (resampled to a square of the larger side, then
// cropped). The blocks are timm's ViT Block (vit_block.hpp); in NaFlex input
// the padding patches are masked out of attention (timm's additive mask),
// pooling and the attention pool's keys.
//
// Supported: num_classes (0: pooled features come out), in_chans, drop_rate
// (head dropout), drop_path_rate, global_pool 'avg', 'avgmax', 'max',
// 'token' (with a class token), 'map' (timm's AttentionPoolLatent) or ''.
// --model-kwargs: timm's NaFlexVitCfg fields embed_dim, depth, num_heads,
// patch_size, reg_tokens, mlp_ratio, init_values (0: no LayerScale),
// qkv_bias, qk_norm, class_token, pre_norm, final_norm, fc_norm,
// pool_include_prefix, dynamic_img_pad, use_key_only_attn_mask, pos_embed
// ('learned', 'factorized', 'none'), pos_embed_interp_mode ('bicubic',
// 'bilinear'), pos_embed_ar_preserving, pos_embed_antialias,
// pos_embed_align_corners, enable_patch_interpolator (patch batches of
// another patch size: the projection resampled to it, FlexiViT's
// pseudo-inverse resize, as timm's PatchEmbedInterpolator),
// patchify_channels_last (false: each patch's pixels flat as (C, Ph, Pw),
// HF / Gemma4 style, the projection's weight read so). Not here: rope,
// EVA blocks, conv patch embedding, patch dropout, grid_sample position
// embedding.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <iterator>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/container/sequential.h>

#include "naflexvit.hpp"
#include "timm/base/error.hpp"
#include "timm/base/names.hpp"
#include "timm/layers/attention_pool_latent.hpp"
#include "timm/layers/drop_path.hpp"
#include "timm/layers/linear.hpp"
#include "timm/layers/norm.hpp"
#include "timm/layers/pos_embed.hpp"
#include "timm/layers/weight_init.hpp"
#include "timm/models/grad_checkpoint.hpp"
#include "timm/models/model.hpp"
#include "vit_block.hpp"

namespace timm::naflexvit {
namespace {

namespace nn = torch::nn;
using vit::Block;
using vit::BlockArgs;
using vit::BlockImpl;

// timm 1.0.31's default pretrained tag of each naflexvit (untrained ones have none).
const std::map<std::string, std::string> kDefaultTags = {
    {"naflexvit_base_patch16_gap", "e300_s576_in1k"},        {"naflexvit_base_patch16_par_gap", "e300_s576_in1k"},
    {"naflexvit_base_patch16_parfac_gap", "e300_s576_in1k"}, {"naflexvit_base_patch16_siglip", "v2_webli"},
    {"naflexvit_so400m_patch16_siglip", "v2_webli"},         {"naflexvit_base_patch16_radio_v3", "c_radio"},
    {"naflexvit_large_patch16_radio_v3", "c_radio"},         {"naflexvit_huge_patch16_radio_v3", "c_radio"},
    {"naflexvit_giant_patch16_radio_v3", "c_radio"},         {"naflexvit_so400m_patch16_radio_v4", "c_radio"},
    {"naflexvit_huge_patch16_radio_v4", "c_radio"},
};

const std::vector<std::string> kPoolTypes = {"", "avg", "avgmax", "max", "token", "map"};

// timm's NaFlexVitCfg, the fields the registered models and the supported
// keywords set.
struct NaFlexSpec {
  std::string name;
  int64_t patch_size = 16;
  int64_t embed_dim = 768;
  int64_t depth = 12;
  int64_t num_heads = 12;
  double mlp_ratio = 4.0;
  std::optional<double> init_values;
  bool qkv_bias = true;
  bool qk_norm = false;
  bool class_token = false;
  int64_t reg_tokens = 0;
  std::string pos_embed = "learned";
  std::array<int64_t, 2> pos_embed_grid_size{16, 16};
  std::string pos_embed_interp_mode = "bicubic";
  bool pos_embed_ar_preserving = false;
  bool pos_embed_antialias = true;
  bool pos_embed_align_corners = false;
  bool dynamic_img_pad = false;
  bool pre_norm = false;
  bool final_norm = true;
  std::optional<bool> fc_norm;  // unset: on for the 'avg' pool
  std::string global_pool = "map";
  bool pool_include_prefix = false;
  bool use_key_only_attn_mask = false;
  bool enable_patch_interpolator = false;
  bool patchify_channels_last = true;
  std::string act_layer = "gelu";
  PretrainedCfg cfg;
};

const std::vector<std::string> kKwargs = {"embed_dim",
                                          "depth",
                                          "num_heads",
                                          "patch_size",
                                          "reg_tokens",
                                          "mlp_ratio",
                                          "init_values",
                                          "qkv_bias",
                                          "qk_norm",
                                          "class_token",
                                          "pre_norm",
                                          "final_norm",
                                          "fc_norm",
                                          "pool_include_prefix",
                                          "dynamic_img_pad",
                                          "use_key_only_attn_mask",
                                          "pos_embed",
                                          "pos_embed_interp_mode",
                                          "pos_embed_ar_preserving",
                                          "pos_embed_antialias",
                                          "pos_embed_align_corners",
                                          "enable_patch_interpolator",
                                          "patchify_channels_last"};

// A text keyword's value, one of `allowed`; `fallback` when absent.
std::string kwarg_choice(const std::string& model, const ModelArgs& args, const std::string& key,
                         const std::string& fallback, const std::vector<std::string>& allowed) {
  const auto it = args.kwargs.find(key);
  if (it == args.kwargs.end()) return fallback;
  if (std::find(allowed.begin(), allowed.end(), it->second) == allowed.end()) {
    throw UsageError(model + ": " + key + "=" + it->second + ": expected one of " + joined_names(allowed, true));
  }
  return it->second;
}

// The spec with the --model-kwargs (timm's cfg overlay) applied.
NaFlexSpec with_kwargs(NaFlexSpec s, const ModelArgs& args) {
  const std::string& name = s.name;
  s.embed_dim = model_kwarg_positive_int(name, args, "embed_dim").value_or(s.embed_dim);
  s.depth = model_kwarg_positive_int(name, args, "depth").value_or(s.depth);
  s.num_heads = model_kwarg_positive_int(name, args, "num_heads").value_or(s.num_heads);
  s.patch_size = model_kwarg_positive_int(name, args, "patch_size").value_or(s.patch_size);
  if (const auto reg = model_kwarg_double(name, args, "reg_tokens")) {
    if (!(*reg >= 0.0 && *reg <= 64.0) || *reg != std::floor(*reg)) {
      throw UsageError(name + ": reg_tokens=" + args.kwargs.at("reg_tokens") + ": expected an integer in [0, 64]");
    }
    s.reg_tokens = static_cast<int64_t>(*reg);
  }
  s.mlp_ratio = model_kwarg_double(name, args, "mlp_ratio").value_or(s.mlp_ratio);
  if (!(s.mlp_ratio > 0.0 && s.mlp_ratio <= 64.0)) {
    throw UsageError(name + ": mlp_ratio=" + args.kwargs.at("mlp_ratio") + ": expected a number in (0, 64]");
  }
  if (const auto init = model_kwarg_double(name, args, "init_values")) s.init_values = init;
  if (s.init_values == 0.0) s.init_values.reset();  // timm: falsy init_values means no LayerScale
  s.qkv_bias = model_kwarg_bool(name, args, "qkv_bias").value_or(s.qkv_bias);
  s.qk_norm = model_kwarg_bool(name, args, "qk_norm").value_or(s.qk_norm);
  s.class_token = model_kwarg_bool(name, args, "class_token").value_or(s.class_token);
  s.pre_norm = model_kwarg_bool(name, args, "pre_norm").value_or(s.pre_norm);
  s.final_norm = model_kwarg_bool(name, args, "final_norm").value_or(s.final_norm);
  if (const auto fc = model_kwarg_bool(name, args, "fc_norm")) s.fc_norm = fc;
  s.pool_include_prefix = model_kwarg_bool(name, args, "pool_include_prefix").value_or(s.pool_include_prefix);
  s.dynamic_img_pad = model_kwarg_bool(name, args, "dynamic_img_pad").value_or(s.dynamic_img_pad);
  s.use_key_only_attn_mask = model_kwarg_bool(name, args, "use_key_only_attn_mask").value_or(s.use_key_only_attn_mask);
  s.pos_embed = kwarg_choice(name, args, "pos_embed", s.pos_embed, {"learned", "factorized", "none", ""});
  if (s.pos_embed.empty()) s.pos_embed = "none";
  s.pos_embed_interp_mode =
      kwarg_choice(name, args, "pos_embed_interp_mode", s.pos_embed_interp_mode, {"bicubic", "bilinear"});
  s.pos_embed_ar_preserving =
      model_kwarg_bool(name, args, "pos_embed_ar_preserving").value_or(s.pos_embed_ar_preserving);
  s.pos_embed_antialias = model_kwarg_bool(name, args, "pos_embed_antialias").value_or(s.pos_embed_antialias);
  s.pos_embed_align_corners =
      model_kwarg_bool(name, args, "pos_embed_align_corners").value_or(s.pos_embed_align_corners);
  s.enable_patch_interpolator =
      model_kwarg_bool(name, args, "enable_patch_interpolator").value_or(s.enable_patch_interpolator);
  s.patchify_channels_last = model_kwarg_bool(name, args, "patchify_channels_last").value_or(s.patchify_channels_last);
  if (args.global_pool) s.global_pool = *args.global_pool;
  if (s.embed_dim % s.num_heads != 0) {
    throw UsageError(name + ": num_heads=" + std::to_string(s.num_heads) +
                     " must divide embed_dim=" + std::to_string(s.embed_dim));
  }
  if (std::find(kPoolTypes.begin(), kPoolTypes.end(), s.global_pool) == kPoolTypes.end()) {
    throw UsageError("global_pool " + in_quotes(s.global_pool) + ": " + name +
                     " supports 'avg', 'avgmax', 'max', 'token', 'map' or '' (none)");
  }
  if (s.global_pool == "token" && !s.class_token) {
    throw UsageError("global_pool 'token': " + name + " has no class token (class_token=true adds one)");
  }
  return s;
}

// torch.finfo(dtype).min: what timm's masks fill the masked scores with (a
// finite value, so a fully masked padding row still has a softmax).
double lowest_value(at::ScalarType dtype) {
  switch (dtype) {
    case at::kDouble:
      return std::numeric_limits<double>::lowest();
    case at::kBFloat16:
      return static_cast<double>(std::numeric_limits<c10::BFloat16>::lowest());
    case at::kHalf:
      return static_cast<double>(std::numeric_limits<c10::Half>::lowest());
    default:
      return std::numeric_limits<float>::lowest();
  }
}

// timm's create_attention_mask: an additive (B, 1, Q, S) mask over the
// prefix tokens (always valid) and the patches; symmetric masks a pair when
// either token is padding, else only padding keys are masked for q_len queries.
at::Tensor attention_mask(const at::Tensor& patch_valid, int64_t num_prefix_tokens, bool symmetric,
                          std::optional<int64_t> q_len, at::ScalarType dtype) {
  at::Tensor valid = patch_valid.to(at::kBool);
  const int64_t batch = valid.size(0);
  if (num_prefix_tokens > 0) valid = at::cat({valid.new_ones({batch, num_prefix_tokens}), valid}, 1);
  const int64_t kv_len = valid.size(1);
  const at::Tensor keep = symmetric
                              ? (valid.unsqueeze(-1) & valid.unsqueeze(1)).unsqueeze(1)
                              : valid.unsqueeze(1).unsqueeze(1).expand({batch, 1, q_len.value_or(kv_len), kv_len});
  return at::zeros(keep.sizes(), valid.options().dtype(dtype)).masked_fill_(keep.logical_not(), lowest_value(dtype));
}

struct EmbedArgs {
  int64_t patch_size = 16;
  int64_t in_chans = 3;
  int64_t embed_dim = 768;
  bool proj_bias = true;
  bool class_token = false;
  int64_t reg_tokens = 0;
  bool dynamic_img_pad = false;
  std::string pos_embed = "learned";
  std::array<int64_t, 2> pos_embed_grid_size{16, 16};
  std::string interp_mode = "bicubic";
  bool ar_preserving = false;
  bool antialias = true;
  bool align_corners = false;
  bool patch_interpolator = false;  // patches of other sizes: the projection resampled
  bool channels_last = true;        // each patch flat as (Ph, Pw, C); false: (C, Ph, Pw)
};

// timm's NaFlexEmbeds with a Linear projection: patches, position embedding,
// then the prefix tokens in front.
class NaFlexEmbedsImpl : public nn::Module {
 public:
  explicit NaFlexEmbedsImpl(const EmbedArgs& a) : a_(a) {
    const int64_t dim = a.embed_dim;
    // timm's order: cls_token, reg_token, proj, then the position embedding.
    if (a.class_token) cls_token = register_parameter("cls_token", at::zeros({1, 1, dim}));
    if (a.reg_tokens > 0) reg_token = register_parameter("reg_token", at::zeros({1, a.reg_tokens, dim}));
    proj = register_module("proj", layers::Linear(nn::LinearOptions(patch_dim(), dim).bias(a.proj_bias)));
    const auto [h, w] = a.pos_embed_grid_size;
    if (a.pos_embed == "learned") {
      pos_embed = register_parameter("pos_embed", at::zeros({1, h, w, dim}));
    } else if (a.pos_embed == "factorized") {
      pos_embed_y = register_parameter("pos_embed_y", at::zeros({1, h, dim}));
      pos_embed_x = register_parameter("pos_embed_x", at::zeros({1, w, dim}));
    }
    reset_parameters();
  }

  // timm's reset_parameters: the tokens normal(1e-6), the embeddings normal(.02).
  void reset_parameters() {
    c10::NoGradGuard no_grad;
    for (at::Tensor* token : {&cls_token, &reg_token}) {
      if (token->defined()) token->normal_(0.0, 1e-6);
    }
    for (at::Tensor* table : {&pos_embed, &pos_embed_y, &pos_embed_x}) {
      if (table->defined()) table->normal_(0.0, 0.02);
    }
  }

  int64_t patch_dim() const { return a_.patch_size * a_.patch_size * a_.in_chans; }
  int64_t patch_size() const { return a_.patch_size; }
  int64_t embed_dim() const { return a_.embed_dim; }

  // timm's dynamic_feat_size: the patch grid of an image (padded up with dynamic_img_pad).
  std::array<int64_t, 2> grid_of(int64_t height, int64_t width) const {
    const int64_t p = a_.patch_size;
    if (a_.dynamic_img_pad) return {(height + p - 1) / p, (width + p - 1) / p};
    return {height / p, width / p};
  }

  // Images (B, C, H, W): cut into the patch grid (timm's batch_patchify,
  // each patch flat in the model's layout), projected, the position embedding resampled to the
  // grid added, then the prefix tokens. H and W must be multiples of the
  // patch size unless dynamic_img_pad pads them with zeros.
  at::Tensor forward_image(at::Tensor x) {
    const int64_t p = a_.patch_size;
    if (x.dim() != 4 || x.size(1) != a_.in_chans) {
      throw UsageError("NaFlexVit: expected (N, " + std::to_string(a_.in_chans) + ", H, W) images, got shape " +
                       std::string(c10::str(x.sizes())));
    }
    const auto [gh, gw] = grid_of(x.size(2), x.size(3));
    if (a_.dynamic_img_pad) {
      x = at::constant_pad_nd(x, {0, gw * p - x.size(3), 0, gh * p - x.size(2)});
    } else if (x.size(2) % p != 0 || x.size(3) % p != 0 || gh == 0 || gw == 0) {
      throw UsageError("NaFlexVit: image size " + std::to_string(x.size(2)) + "x" + std::to_string(x.size(3)) +
                       ": expected multiples of the patch size " + std::to_string(p) +
                       " (dynamic_img_pad=true pads the image up to one)");
    }
    const int64_t batch = x.size(0);
    using Order = std::array<int64_t, 6>;
    const Order order = a_.channels_last ? Order{0, 2, 4, 3, 5, 1} : Order{0, 2, 4, 1, 3, 5};
    at::Tensor patches =
        x.reshape({batch, a_.in_chans, gh, p, gw, p}).permute(order).reshape({batch, gh * gw, patch_dim()});
    at::Tensor tokens = proj(patches);
    if (a_.pos_embed != "none") tokens.add_(pos_table({gh, gw}, tokens.scalar_type()));
    return with_prefix(tokens);
  }

  // NaFlex input: (B, N, P*P*C) patches, or (B, N, Ph, Pw, C) (timm's
  // variable patch size batches; (B, N, C, Ph, Pw) channels first), whose (y, x) coordinates give each
  // sample's grid (the largest coordinate plus one); each sample's first
  // H*W tokens get its grid's position embedding, the padding none.
  at::Tensor forward_patches(const at::Tensor& patches, const at::Tensor& patch_coord) {
    at::Tensor tokens = project(patches);
    if (a_.pos_embed == "none") return with_prefix(tokens);
    const at::Tensor grids = (patch_coord.amax(1) + 1).to(at::kCPU, at::kLong).contiguous();
    const auto* g = grids.data_ptr<int64_t>();
    // Samples that share a grid get its table once (timm's size_to_indices).
    std::vector<std::pair<std::array<int64_t, 2>, std::vector<int64_t>>> groups;
    for (int64_t b = 0; b < grids.size(0); ++b) {
      const std::array<int64_t, 2> grid{g[2 * b], g[2 * b + 1]};
      auto it = std::find_if(groups.begin(), groups.end(), [&](const auto& group) { return group.first == grid; });
      if (it == groups.end()) {
        groups.emplace_back(grid, std::vector<int64_t>{});
        it = std::prev(groups.end());
      }
      it->second.push_back(b);
    }
    for (const auto& [grid, rows] : groups) {
      const at::Tensor table = pos_table(grid, tokens.scalar_type());
      const int64_t len = std::min(tokens.size(1), table.size(1));
      const at::Tensor index = at::tensor(rows, at::TensorOptions(at::kLong)).to(tokens.device());
      tokens.slice(1, 0, len).index_add_(0, index,
                                         table.slice(1, 0, len).expand({static_cast<int64_t>(rows.size()), -1, -1}));
    }
    return with_prefix(tokens);
  }

  // Whether (Ph, Pw) patches can be projected: the model's own size, or any
  // with the patch interpolator.
  bool takes_patch_size(int64_t ph, int64_t pw) const {
    return (ph == a_.patch_size && pw == a_.patch_size) || (a_.patch_interpolator && ph > 0 && pw > 0);
  }
  bool patch_interpolator() const { return a_.patch_interpolator; }
  int64_t in_chans() const { return a_.in_chans; }
  bool channels_last() const { return a_.channels_last; }
  // The (Ph, Pw) and channel count of 5-D patches, per the layout.
  std::array<int64_t, 2> patch_hw(const at::Tensor& patches) const {
    return a_.channels_last ? std::array<int64_t, 2>{patches.size(2), patches.size(3)}
                            : std::array<int64_t, 2>{patches.size(3), patches.size(4)};
  }
  int64_t patch_channels(const at::Tensor& patches) const { return patches.size(a_.channels_last ? 4 : 2); }

  at::Tensor cls_token, reg_token;                 // undefined when the model has none
  at::Tensor pos_embed, pos_embed_y, pos_embed_x;  // 'learned': pos_embed; 'factorized': the two tables
  layers::Linear proj{nullptr};

 private:
  // The position embedding of a gh x gw grid, (1, gh * gw, C) in `dtype`:
  // timm's _apply_learned_pos_embed / _apply_factorized_pos_embed and their
  // NaFlex twins, which resample the same way.
  at::Tensor pos_table(std::array<int64_t, 2> grid, at::ScalarType dtype) const {
    const auto [gh, gw] = grid;
    // Aspect-preserving: resampled to a square of the larger side, then cropped.
    const int64_t side = std::max(gh, gw);
    const std::array<int64_t, 2> size = a_.ar_preserving ? std::array<int64_t, 2>{side, side} : grid;
    if (pos_embed.defined()) {
      const int64_t h = pos_embed.size(1), w = pos_embed.size(2);
      if (gh == h && gw == w) return pos_embed.reshape({1, h * w, -1}).to(dtype);
      const at::Tensor resized = layers::interpolate_grid(pos_embed.permute({0, 3, 1, 2}).to(at::kFloat), size,
                                                          a_.interp_mode, a_.align_corners, a_.antialias);
      return resized.slice(2, 0, gh).slice(3, 0, gw).flatten(2).transpose(1, 2).to(dtype);
    }
    const at::Tensor y = resize_1d(pos_embed_y, size[0], dtype).slice(1, 0, gh);
    const at::Tensor x = resize_1d(pos_embed_x, size[1], dtype).slice(1, 0, gw);
    return (y.unsqueeze(2) + x.unsqueeze(1)).flatten(1, 2);
  }

  // timm's NaFlexEmbeds projection: flat patches through proj; 5-D patches of
  // another size through proj's weight resampled to theirs
  // (PatchEmbedInterpolator.resample_linear_weight), the bias as it is.
  at::Tensor project(const at::Tensor& patches) {
    if (patches.dim() == 3) return proj(patches);
    const auto [ph, pw] = patch_hw(patches);
    const at::Tensor flat = patches.flatten(2);
    if (ph == a_.patch_size && pw == a_.patch_size) return proj(flat);
    const at::Tensor& weight = proj->weight;
    const int64_t dim = weight.size(0), p = a_.patch_size, c = a_.in_chans;
    // (D, P*P*C) as a conv weight (D, C, P, P), resampled, back to the layout's flat order.
    const at::Tensor conv =
        a_.channels_last ? weight.reshape({dim, p, p, c}).permute({0, 3, 1, 2}) : weight.reshape({dim, c, p, p});
    const at::Tensor resampled = at::matmul(conv.reshape({dim, c, p * p}).to(at::kFloat), resample_matrix(ph, pw))
                                     .reshape({dim, c, ph, pw})
                                     .to(weight.scalar_type());
    const at::Tensor flat_weight =
        a_.channels_last ? resampled.permute({0, 2, 3, 1}).reshape({dim, -1}) : resampled.reshape({dim, -1});
    return at::linear(flat, flat_weight, proj->bias);
  }

  // timm's PatchEmbedResamplerFixedOrigSize matrix for (Ph, Pw): the
  // pseudo-inverse of the resize (the interpolation mode of the position
  // embedding, antialiased) of each basis vector of the P x P patch, float32
  // (P*P, Ph*Pw); cached per size and device, outside autograd.
  at::Tensor resample_matrix(int64_t ph, int64_t pw) {
    const at::Device device = proj->weight.device();
    const std::string key = std::to_string(ph) + "x" + std::to_string(pw) + "@" + device.str();
    if (const auto it = resample_cache_.find(key); it != resample_cache_.end()) return it->second;
    const c10::NoGradGuard no_grad;
    const int64_t p = a_.patch_size, old_total = p * p;
    const at::Tensor basis =
        at::eye(old_total, at::TensorOptions().dtype(at::kFloat).device(device)).reshape({old_total, 1, p, p});
    const at::Tensor resized = layers::interpolate_grid(basis, {ph, pw}, a_.interp_mode, /*align_corners=*/false,
                                                        /*antialias=*/true);
    const at::Tensor resize = resized.squeeze(1).permute({1, 2, 0}).reshape({ph * pw, old_total});
    at::Tensor pinv = at::linalg_pinv(resize);
    resample_cache_.emplace(key, pinv);
    return pinv;
  }

  // A factorized table (1, L, C) resampled to `length` (linear, as timm's _interp1d).
  static at::Tensor resize_1d(const at::Tensor& table, int64_t length, at::ScalarType dtype) {
    if (length == table.size(1)) return table.to(dtype);
    const at::Tensor resized = at::upsample_linear1d(table.permute({0, 2, 1}).to(at::kFloat),
                                                     std::vector<int64_t>{length}, false, std::optional<double>{});
    return resized.permute({0, 2, 1}).to(dtype);
  }

  at::Tensor with_prefix(const at::Tensor& tokens) const {
    const int64_t batch = tokens.size(0);
    std::vector<at::Tensor> parts;
    if (cls_token.defined()) parts.push_back(cls_token.expand({batch, -1, -1}));
    if (reg_token.defined()) parts.push_back(reg_token.expand({batch, -1, -1}));
    if (parts.empty()) return tokens;
    parts.push_back(tokens);
    return at::cat(parts, 1);
  }

  EmbedArgs a_;
  std::map<std::string, at::Tensor> resample_cache_;  // resample_matrix's
};
TORCH_MODULE(NaFlexEmbeds);

class NaFlexVitImpl : public ClassifierImpl {
 public:
  NaFlexVitImpl(const NaFlexSpec& registered, const ModelArgs& args)
      : cfg_(registered.cfg), num_classes_(args.num_classes), drop_rate_(args.drop_rate) {
    validate_model_args(registered.name, args, kKwargs);
    const NaFlexSpec s = with_kwargs(registered, args);
    cfg_.hf_hub_id = timm_hub_id(s.name, kDefaultTags);
    global_pool_ = s.global_pool;
    num_prefix_tokens_ = (s.class_token ? 1 : 0) + s.reg_tokens;
    pool_include_prefix_ = s.pool_include_prefix;
    use_key_only_attn_mask_ = s.use_key_only_attn_mask;
    const int64_t dim = s.embed_dim;

    EmbedArgs e;
    e.patch_size = s.patch_size;
    e.in_chans = args.in_chans;
    e.embed_dim = dim;
    e.proj_bias = !s.pre_norm;  // timm: no projection bias before a pre-norm (CLIP)
    e.class_token = s.class_token;
    e.reg_tokens = s.reg_tokens;
    e.dynamic_img_pad = s.dynamic_img_pad;
    e.pos_embed = s.pos_embed;
    e.pos_embed_grid_size = s.pos_embed_grid_size;
    e.interp_mode = s.pos_embed_interp_mode;
    e.ar_preserving = s.pos_embed_ar_preserving;
    e.antialias = s.pos_embed_antialias;
    e.align_corners = s.pos_embed_align_corners;
    e.patch_interpolator = s.enable_patch_interpolator;
    e.channels_last = s.patchify_channels_last;
    embeds = register_module("embeds", NaFlexEmbeds(e));
    const auto norm_options = layers::LayerNormOptions(dim).eps(1e-6);
    if (s.pre_norm) norm_pre = register_module("norm_pre", layers::LayerNorm(norm_options));

    BlockArgs block;
    block.dim = dim;
    block.num_heads = s.num_heads;
    block.mlp_ratio = s.mlp_ratio;
    block.qkv_bias = s.qkv_bias;
    block.qk_norm = s.qk_norm;
    block.init_values = s.init_values;
    block.act_layer = s.act_layer;
    blocks = register_module("blocks", nn::Sequential());
    const auto dpr = layers::drop_path_rates(args.drop_path_rate.value_or(0.0), s.depth);
    for (int64_t i = 0; i < s.depth; ++i) {
      block.drop_path = dpr[static_cast<size_t>(i)];
      blocks->push_back(Block(block));
    }
    // timm: fc_norm defaults to on for the 'avg' pool; final_norm off leaves both out.
    const bool use_fc_norm = s.fc_norm.value_or(s.global_pool == "avg");
    if (s.final_norm && !use_fc_norm) norm = register_module("norm", layers::LayerNorm(norm_options));
    if (s.global_pool == "map") {
      attn_pool = register_module("attn_pool", layers::AttentionPoolLatent(layers::AttentionPoolLatentOptions(dim)
                                                                               .num_heads(s.num_heads)
                                                                               .mlp_ratio(s.mlp_ratio)
                                                                               .norm_layer("layernorm")
                                                                               .norm_eps(1e-6)
                                                                               .act_layer(s.act_layer)));
    }
    if (s.final_norm && use_fc_norm) fc_norm = register_module("fc_norm", layers::LayerNorm(norm_options));
    if (num_classes_ > 0) head = register_module("head", layers::Linear(dim, num_classes_));
    init_weights();
  }

  // Images (B, C, H, W) of any size the patches tile: the token sequence after
  // the blocks and the final norm, (B, prefix + H/P * W/P, dim).
  at::Tensor forward_features(at::Tensor x) override {
    return final_norm(run_blocks(embed(embeds->forward_image(x)), at::Tensor()));
  }

  at::Tensor forward_head(at::Tensor x, bool pre_logits = false) override {
    return head_of(pool(x, at::Tensor()), pre_logits);
  }

  at::Tensor forward(at::Tensor x) override { return forward_head(forward_features(x)); }

  // timm's forward(patch_dict): padding patches are masked out of the
  // blocks' attention, the pool and the attention pool's keys.
  at::Tensor forward_patches(const PatchBatch& batch) override {
    check_patch_batch(batch);
    const at::Tensor tokens = embeds->forward_patches(batch.patches, batch.patch_coord);
    // timm makes the mask in the embedding's dtype, before norm_pre.
    const at::Tensor mask =
        attention_mask(batch.patch_valid, num_prefix_tokens_, /*symmetric=*/!use_key_only_attn_mask_,
                       use_key_only_attn_mask_ ? std::optional<int64_t>(1) : std::nullopt, tokens.scalar_type());
    const at::Tensor x = final_norm(run_blocks(embed(tokens), mask));
    return head_of(pool(x, batch.patch_valid), /*pre_logits=*/false);
  }

  bool patchify_channels_last() const override { return embeds->channels_last(); }
  std::optional<std::array<int64_t, 2>> patch_size() const override {
    return std::array<int64_t, 2>{embeds->patch_size(), embeds->patch_size()};
  }

  std::vector<FeatureInfo> feature_info() const override {
    std::vector<FeatureInfo> info;
    for (size_t i = 0; i < blocks->size(); ++i) {
      info.push_back({embeds->embed_dim(), embeds->patch_size(), "blocks." + std::to_string(i)});
    }
    return info;
  }

  // timm's forward_intermediates for images: the blocks' outputs taken
  // (through the final norm with norm), without the prefix tokens, as
  // (B, dim, H/P, W/P) maps or NLC tokens.
  Intermediates forward_intermediates(at::Tensor input,
                                      const IntermediatesOptions& options = IntermediatesOptions()) override {
    check_output_fmt(describe_model(*this), options.output_fmt(), {"NCHW", "NLC"});
    const int64_t depth = static_cast<int64_t>(blocks->size());
    const auto [take_indices, max_index] = feature_take_indices(depth, options.indices());
    const std::vector<bool> take = take_mask(depth, take_indices);
    Intermediates out;
    at::Tensor x = embed(embeds->forward_image(input));
    const auto [gh, gw] = embeds->grid_of(input.size(2), input.size(3));
    const int64_t blocks_run = options.stop_early() ? max_index + 1 : depth;
    for (int64_t i = 0; i < blocks_run; ++i) {
      x = run_block(i, x, at::Tensor());
      if (!take[static_cast<size_t>(i)]) continue;
      at::Tensor y = (options.norm() ? final_norm(x) : x).slice(1, num_prefix_tokens_);
      if (options.output_fmt() == "NCHW") y = y.reshape({y.size(0), gh, gw, -1}).permute({0, 3, 1, 2}).contiguous();
      out.intermediates.push_back(y);
    }
    if (!options.intermediates_only()) out.final = final_norm(x);
    return out;
  }

  void set_grad_checkpointing(bool enable) override { grad_checkpointing_ = enable; }
  int64_t num_classes() const override { return num_classes_; }
  const PretrainedCfg& pretrained_cfg() const override { return cfg_; }
  std::vector<std::string> no_weight_decay() const override {
    return {"embeds.pos_embed", "embeds.cls_token", "embeds.reg_token"};
  }
  GroupMatcher group_matcher(bool /*coarse*/) const override {
    return {{"stem", {{R"(^embeds)", std::nullopt}}},
            {"blocks", {{R"(^blocks\.(\d+))", std::nullopt}, {R"(^norm)", std::vector<double>{99999}}}}};
  }

  NaFlexEmbeds embeds{nullptr};
  layers::LayerNorm norm_pre{nullptr};  // null without pre_norm
  nn::Sequential blocks{nullptr};
  layers::LayerNorm norm{nullptr};                 // null with fc_norm or without final_norm
  layers::AttentionPoolLatent attn_pool{nullptr};  // global_pool 'map' only
  layers::LayerNorm fc_norm{nullptr};              // null unless fc_norm (with final_norm)
  layers::Linear head{nullptr};                    // null when num_classes is 0

 private:
  void check_patch_batch(const PatchBatch& batch) const {
    const at::Tensor& p = batch.patches;
    const std::string c = std::to_string(embeds->in_chans());
    const bool shape_ok = p.defined() && ((p.dim() == 3 && p.size(2) == embeds->patch_dim()) ||
                                          (p.dim() == 5 && embeds->patch_channels(p) == embeds->in_chans()));
    const bool ok = shape_ok && batch.patch_coord.defined() &&
                    batch.patch_coord.sizes() == at::IntArrayRef{p.size(0), p.size(1), 2} &&
                    !at::isFloatingType(batch.patch_coord.scalar_type()) && batch.patch_valid.defined() &&
                    batch.patch_valid.sizes() == at::IntArrayRef{p.size(0), p.size(1)};
    if (!ok) {
      auto shape = [](const at::Tensor& t) { return t.defined() ? std::string(c10::str(t.sizes())) : "none"; };
      throw UsageError(describe_model(*this) + ": expected patches (B, N, " + std::to_string(embeds->patch_dim()) +
                       ") or " + (embeds->channels_last() ? "(B, N, Ph, Pw, " + c + ")" : "(B, N, " + c + ", Ph, Pw)") +
                       ", integer patch_coord (B, N, 2) and patch_valid (B, N), got " + shape(p) + ", " +
                       shape(batch.patch_coord) + " and " + shape(batch.patch_valid));
    }
    if (p.dim() != 5) return;
    if (const auto [ph, pw] = embeds->patch_hw(p); !embeds->takes_patch_size(ph, pw)) {
      throw UsageError(describe_model(*this) + ": patches of " + std::to_string(ph) + "x" + std::to_string(pw) +
                       ", but its patch size is " + std::to_string(embeds->patch_size()) +
                       " (--model-kwargs enable_patch_interpolator=true resamples its projection to other sizes)");
    }
  }

  // timm's norm_pre after the embedding (an Identity without pre_norm).
  at::Tensor embed(const at::Tensor& tokens) { return norm_pre ? norm_pre(tokens) : tokens; }

  at::Tensor run_block(int64_t i, const at::Tensor& x, const at::Tensor& mask) {
    auto block = blocks->ptr<BlockImpl>(static_cast<size_t>(i));
    if (!grad_checkpointing_) return block->forward(x, mask);
    return checkpoint([block, mask](const at::Tensor& input) { return block->forward(input, mask); }, x,
                      block->parameters());
  }

  at::Tensor run_blocks(at::Tensor x, const at::Tensor& mask) {
    for (int64_t i = 0; i < static_cast<int64_t>(blocks->size()); ++i) x = run_block(i, x, mask);
    return x;
  }

  at::Tensor final_norm(const at::Tensor& x) { return norm ? norm(x) : x; }

  // timm's _pool: the attention pool (padding keys masked), else
  // global_pool_naflex: with patch_valid the avg / max reductions skip the
  // padding; the prefix tokens are left out unless pool_include_prefix.
  at::Tensor pool(at::Tensor x, const at::Tensor& patch_valid) {
    if (attn_pool) {
      at::Tensor mask;
      if (patch_valid.defined()) {
        mask = attention_mask(patch_valid, pool_include_prefix_ ? num_prefix_tokens_ : 0, /*symmetric=*/false, 1,
                              x.scalar_type());
      }
      if (!pool_include_prefix_) x = x.slice(1, num_prefix_tokens_);
      return attn_pool(x, mask);
    }
    if (!patch_valid.defined() || global_pool_.empty() || global_pool_ == "token") {
      return vit::global_pool_nlc(x, global_pool_, num_prefix_tokens_, pool_include_prefix_);
    }
    at::Tensor valid = patch_valid.to(at::kBool);
    if (pool_include_prefix_) {
      valid = at::cat({valid.new_ones({x.size(0), num_prefix_tokens_}), valid}, 1);
    } else {
      x = x.slice(1, num_prefix_tokens_);
    }
    const at::Tensor weight = valid.to(x.scalar_type());
    const auto masked_avg = [&] {
      return (x * weight.unsqueeze(-1)).sum(1) / weight.sum(1, /*keepdim=*/true).clamp_min(1);
    };
    const auto masked_max = [&] {
      return x.masked_fill(valid.logical_not().unsqueeze(-1), lowest_value(x.scalar_type())).amax(1);
    };
    if (global_pool_ == "avg") return masked_avg();
    if (global_pool_ == "avgmax") return 0.5 * (masked_avg() + masked_max());
    return masked_max();
  }

  // timm's forward_head after the pool: fc_norm, head_drop, head.
  at::Tensor head_of(at::Tensor x, bool pre_logits) {
    if (fc_norm) x = fc_norm(x);
    if (drop_rate_ > 0.0) x = at::dropout(x, drop_rate_, is_training());
    return pre_logits || !head ? x : head(x);
  }

  // timm's init_weights ('' mode) with fix_init: every Linear
  // trunc_normal(.02) with zero bias, the attention pool's latent
  // (its init_weights), then each block's attn.proj and mlp.fc2 weights
  // divided by sqrt(2 * layer). The embedding's tables were drawn by
  // NaFlexEmbeds' reset_parameters; the norms stay ones / zeros and
  // LayerScale at init_values.
  void init_weights() {
    // The model has no Conv2d, so the SDK's trunc_normal init is exactly
    // timm's init_weights_vit_timm (every Linear).
    layers::trunc_normal_init_weights(*this, 0.02);
    c10::NoGradGuard no_grad;
    if (attn_pool) attn_pool->init_weights();
    for (size_t i = 0; i < blocks->size(); ++i) {
      auto block = blocks->ptr<BlockImpl>(i);
      const double scale = std::sqrt(2.0 * static_cast<double>(i + 1));
      block->attn->proj->weight.div_(scale);
      block->mlp->named_parameters()["fc2.weight"].div_(scale);
    }
  }

  PretrainedCfg cfg_;
  int64_t num_classes_;
  double drop_rate_;
  std::string global_pool_;
  int64_t num_prefix_tokens_ = 0;
  bool pool_include_prefix_ = false;
  bool use_key_only_attn_mask_ = false;
  bool grad_checkpointing_ = false;
};

// timm's _cfg: 384 px, crop_pct 1.0, bicubic, Inception mean/std (0.5).
PretrainedCfg naflex_cfg(int64_t num_classes = 1000) {
  PretrainedCfg cfg;
  cfg.input_size = {3, 384, 384};
  cfg.crop_pct = 1.0;
  cfg.interpolation = "bicubic";
  cfg.mean = {0.5, 0.5, 0.5};
  cfg.std = {0.5, 0.5, 0.5};
  cfg.first_conv = "embeds.proj";
  cfg.classifier = "head";
  cfg.num_classes = num_classes;
  return cfg;
}

NaFlexSpec base_spec(const std::string& name) {
  NaFlexSpec s;
  s.name = name;
  s.cfg = naflex_cfg();
  return s;
}

// ViT-B/16 with LayerScale 1e-5 and register tokens.
NaFlexSpec base_ls(const std::string& name, const std::string& pool, int64_t reg_tokens) {
  NaFlexSpec s = base_spec(name);
  s.init_values = 1e-5;
  s.global_pool = pool;
  s.reg_tokens = reg_tokens;
  if (pool == "avg") s.fc_norm = true;
  return s;
}

NaFlexSpec so150m2(const std::string& name, const std::string& pool) {
  NaFlexSpec s = base_ls(name, pool, 1);
  s.embed_dim = 832;
  s.depth = 21;
  s.num_heads = 13;
  s.mlp_ratio = 34.0 / 13.0;
  s.qkv_bias = false;
  return s;
}

NaFlexSpec siglip(const std::string& name, int64_t dim, int64_t depth, int64_t heads, double mlp_ratio) {
  NaFlexSpec s = base_spec(name);
  s.embed_dim = dim;
  s.depth = depth;
  s.num_heads = heads;
  s.mlp_ratio = mlp_ratio;
  s.act_layer = "gelu_tanh";
  s.pos_embed_interp_mode = "bilinear";
  s.cfg.num_classes = 0;
  return s;
}

// timm's _radio_vit_cfg: a class token read by the pool, no final norm, the
// position embedding on a 128 x 128 grid resampled bilinearly without
// antialias, aspect-preserving; _radio_cfg: 512 px, OpenAI CLIP mean/std, no
// classifier.
NaFlexSpec radio(const std::string& name, int64_t dim, int64_t depth, int64_t heads, int64_t reg_tokens,
                 std::optional<double> init_values, bool align_corners, double mlp_ratio = 4.0) {
  NaFlexSpec s = base_spec(name);
  s.embed_dim = dim;
  s.depth = depth;
  s.num_heads = heads;
  s.mlp_ratio = mlp_ratio;
  s.reg_tokens = reg_tokens;
  s.init_values = init_values;
  s.class_token = true;
  s.global_pool = "token";
  s.final_norm = false;
  s.pos_embed_grid_size = {128, 128};
  s.pos_embed_interp_mode = "bilinear";
  s.pos_embed_ar_preserving = true;
  s.pos_embed_antialias = false;
  s.pos_embed_align_corners = align_corners;
  s.cfg.input_size = {3, 512, 512};
  s.cfg.mean = {kOpenaiClipMean[0], kOpenaiClipMean[1], kOpenaiClipMean[2]};
  s.cfg.std = {kOpenaiClipStd[0], kOpenaiClipStd[1], kOpenaiClipStd[2]};
  s.cfg.num_classes = 0;
  return s;
}

// timm's registration order.
std::vector<NaFlexSpec> naflex_specs() {
  NaFlexSpec par = base_ls("naflexvit_base_patch16_par_gap", "avg", 4);
  par.pos_embed_ar_preserving = true;
  NaFlexSpec parfac = base_ls("naflexvit_base_patch16_parfac_gap", "avg", 4);
  parfac.pos_embed_ar_preserving = true;
  parfac.pos_embed = "factorized";
  return {
      base_ls("naflexvit_base_patch16_gap", "avg", 4),
      par,
      parfac,
      base_ls("naflexvit_base_patch16_map", "map", 1),
      so150m2("naflexvit_so150m2_patch16_reg1_gap", "avg"),
      so150m2("naflexvit_so150m2_patch16_reg1_map", "map"),
      siglip("naflexvit_base_patch16_siglip", 768, 12, 12, 4.0),
      siglip("naflexvit_so400m_patch16_siglip", 1152, 27, 16, 3.7362),
      radio("naflexvit_base_patch16_radio_v3", 768, 12, 12, 7, 1e-5, true),
      radio("naflexvit_large_patch16_radio_v3", 1024, 24, 16, 7, 1e-5, false),
      radio("naflexvit_huge_patch16_radio_v3", 1280, 32, 16, 7, std::nullopt, true),
      radio("naflexvit_giant_patch16_radio_v3", 1536, 40, 24, 7, std::nullopt, false),
      radio("naflexvit_so400m_patch16_radio_v4", 1152, 27, 16, 9, std::nullopt, false, 4304.0 / 1152.0),
      radio("naflexvit_huge_patch16_radio_v4", 1280, 32, 16, 9, std::nullopt, false),
  };
}

std::string describe(const NaFlexSpec& s) {
  std::string kind = s.name.find("_radio_") != std::string::npos   ? "C-RADIO NaFlexViT"
                     : s.name.find("_siglip") != std::string::npos ? "SigLIP-2 NaFlexViT"
                                                                   : "NaFlexViT";
  if (s.reg_tokens > 0) kind += " with " + std::to_string(s.reg_tokens) + " register token(s)";
  if (s.pos_embed == "factorized") kind += ", factorized position embedding";
  if (s.pos_embed_ar_preserving) kind += ", aspect-preserving position embedding";
  kind += s.global_pool == "map"   ? ", attention pool (map)"
          : s.global_pool == "avg" ? ", average pool"
                                   : ", class token";
  return kind + " (dim " + std::to_string(s.embed_dim) + ", depth " + std::to_string(s.depth) + ", heads " +
         std::to_string(s.num_heads) + ", patch " + std::to_string(s.patch_size) + ", any image size)";
}

}  // namespace

void register_naflexvit(PluginRegistrar& registrar) {
  for (const auto& spec : naflex_specs()) {
    registrar.add_model(spec.name, describe(spec), [spec](const ModelArgs& args) -> ModelPtr {
      return std::make_shared<NaFlexVitImpl>(spec, args);
    });
  }
}

}  // namespace timm::naflexvit
