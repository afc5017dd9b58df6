// LeViT (timm/models/levit.py), with timm's module names so state_dict keys
// equal timm's: levit_128s .. levit_512d (nn.Linear mode: tokens (B, N, C),
// LinearNorm = Linear + BatchNorm1d) and levit_conv_* (nn.Conv2d mode: NCHW,
// ConvNorm = 1x1 Conv2d + BatchNorm2d). Stem (stem.convN = ConvNorm 3x3/2 with
// the activation between, four for s16, three for s8), three stages
// (stages.N.downsample = attention downsample + Mlp from stage 1 on,
// stages.N.blocks.M = attention with learned relative-position biases + Mlp)
// and a NormLinear head (bn, dropout, linear); the models timm builds as
// LevitDistilled (levit_128s .. levit_384, levit_384_s8 and their conv
// variants) add head_dist and average the two heads' logits.
//
// Supported: num_classes (0: pooled features), in_chans, drop_rate (in the
// NormLinear heads), drop_path_rate (one rate for every block, as timm),
// global_pool ('avg' default or ''), img_size (kwarg: LeViT's attention bias
// tables fix the input size at construction), feature_info and
// forward_intermediates (one level per stage, NCHW). attention_bias_idxs is a
// non-persistent buffer in timm: not in the state_dict here either.
#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>

#include "timm/base/error.hpp"
#include "timm/base/names.hpp"
#include "timm/layers/activations.hpp"
#include "timm/layers/drop_path.hpp"
#include "timm/layers/linear.hpp"
#include "timm/layers/weight_init.hpp"
#include "timm/models/features.hpp"
#include "timm/models/grad_checkpoint.hpp"
#include "timm/models/model.hpp"
#include "timm/plugin/plugin.hpp"

namespace timm::levit {
namespace {

namespace nn = torch::nn;

// timm 1.0.31's default pretrained tag of each model (the first tag of its default_cfgs).
const std::map<std::string, std::string> kLevitDefaultTags = {
    {"levit_128s", "fb_dist_in1k"},     {"levit_128", "fb_dist_in1k"},      {"levit_192", "fb_dist_in1k"},
    {"levit_256", "fb_dist_in1k"},      {"levit_384", "fb_dist_in1k"},      {"levit_conv_128s", "fb_dist_in1k"},
    {"levit_conv_128", "fb_dist_in1k"}, {"levit_conv_192", "fb_dist_in1k"}, {"levit_conv_256", "fb_dist_in1k"},
    {"levit_conv_384", "fb_dist_in1k"},
};

// timm's ConvNorm (1x1 or kxk Conv2d without bias, BatchNorm2d) or
// LinearNorm (Linear without bias, BatchNorm1d over the flattened tokens):
// "linear" and "bn", bn.weight set to bn_weight_init.
class LevitNormImpl : public nn::Module {
 public:
  LevitNormImpl(int64_t in, int64_t out, bool use_conv, double bn_weight_init, int64_t kernel = 1, int64_t stride = 1,
                int64_t padding = 0) {
    if (use_conv) {
      conv = register_module(
          "linear", nn::Conv2d(nn::Conv2dOptions(in, out, kernel).stride(stride).padding(padding).bias(false)));
      bn2d = register_module("bn", nn::BatchNorm2d(out));
      c10::NoGradGuard no_grad;
      bn2d->weight.fill_(bn_weight_init);
    } else {
      linear = register_module("linear", layers::Linear(nn::LinearOptions(in, out).bias(false)));
      bn1d = register_module("bn", nn::BatchNorm1d(out));
      c10::NoGradGuard no_grad;
      bn1d->weight.fill_(bn_weight_init);
    }
  }
  at::Tensor forward(const at::Tensor& x) {
    if (conv) return bn2d(conv(x));
    const at::Tensor y = linear(x);
    return bn1d(y.flatten(0, 1)).reshape_as(y);
  }
  nn::Conv2d conv{nullptr};        // or
  layers::Linear linear{nullptr};  // both named "linear"
  nn::BatchNorm2d bn2d{nullptr};   // or
  nn::BatchNorm1d bn1d{nullptr};   // both named "bn"
};
TORCH_MODULE(LevitNorm);

// timm's NormLinear head: bn (BatchNorm1d), drop, linear (trunc_normal(.02), zero bias).
class NormLinearImpl : public nn::Module {
 public:
  NormLinearImpl(int64_t in, int64_t out, double drop) : drop_(drop) {
    bn = register_module("bn", nn::BatchNorm1d(in));
    linear = register_module("linear", layers::Linear(in, out));
    c10::NoGradGuard no_grad;
    layers::trunc_normal_(linear->weight, 0.0, 0.02);
    linear->bias.zero_();
  }
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor y = bn(x);
    if (drop_ > 0.0) y = at::dropout(y, drop_, is_training());
    return linear(y);
  }
  nn::BatchNorm1d bn{nullptr};
  layers::Linear linear{nullptr};

 private:
  double drop_;
};
TORCH_MODULE(NormLinear);

// timm's Stem16 (conv1..conv4) / Stem8 (conv1..conv3): ConvNorm 3x3/2 with
// the activation (no parameters) between them.
class LevitStemImpl : public nn::Module {
 public:
  LevitStemImpl(int64_t in_chs, int64_t out_chs, bool s8, std::string act) : act_(std::move(act)) {
    const std::vector<int64_t> widths = s8 ? std::vector<int64_t>{out_chs / 4, out_chs / 2, out_chs}
                                           : std::vector<int64_t>{out_chs / 8, out_chs / 4, out_chs / 2, out_chs};
    int64_t in = in_chs;
    for (size_t i = 0; i < widths.size(); ++i) {
      convs.push_back(register_module("conv" + std::to_string(i + 1), LevitNorm(in, widths[i], true, 1.0, 3, 2, 1)));
      in = widths[i];
    }
  }
  at::Tensor forward(const at::Tensor& input) {
    at::Tensor x = input;
    for (size_t i = 0; i < convs.size(); ++i) {
      if (i > 0) x = layers::apply_act(act_, x);
      x = convs[i](x);
    }
    return x;
  }
  int64_t stride() const { return int64_t{1} << convs.size(); }
  std::vector<LevitNorm> convs;

 private:
  std::string act_;
};
TORCH_MODULE(LevitStem);

// A Sequential of (act, ln) as timm's proj / (down, ln) as its q: only "ln" has parameters.
class LnHolderImpl : public nn::Module {
 public:
  explicit LnHolderImpl(LevitNorm norm) { ln = register_module("ln", std::move(norm)); }
  LevitNorm ln{nullptr};
};
TORCH_MODULE(LnHolder);

// timm's attention bias index table: |q_pos - k_pos| per axis, row * res_w + col,
// queries on the stride grid of the keys' resolution.
at::Tensor attention_bias_idxs(int64_t res_h, int64_t res_w, int64_t stride) {
  const auto opts = at::TensorOptions().dtype(at::kLong);
  const auto k_grid = at::meshgrid({at::arange(res_h, opts), at::arange(res_w, opts)}, "ij");
  const auto q_grid = at::meshgrid({at::arange(0, res_h, stride, opts), at::arange(0, res_w, stride, opts)}, "ij");
  const at::Tensor k_pos = at::stack({k_grid[0].flatten(), k_grid[1].flatten()});
  const at::Tensor q_pos = at::stack({q_grid[0].flatten(), q_grid[1].flatten()});
  const at::Tensor rel = (q_pos.unsqueeze(2) - k_pos.unsqueeze(1)).abs();
  return rel[0] * res_w + rel[1];
}

// timm's Attention (stride 1) and AttentionDownsample (stride 2): learned
// attention_biases (heads, N_k) gathered through the bias index table. timm
// caches the gathered biases per device in eval; the numerics are the same.
class LevitAttentionImpl : public nn::Module {
 public:
  LevitAttentionImpl(int64_t in_dim, int64_t out_dim, int64_t key_dim, int64_t num_heads, double attn_ratio,
                     int64_t res_h, int64_t res_w, int64_t stride, bool use_conv, std::string act)
      : key_dim_(key_dim),
        num_heads_(num_heads),
        val_dim_(static_cast<int64_t>(attn_ratio * static_cast<double>(key_dim))),
        stride_(stride),
        res_h_(res_h),
        res_w_(res_w),
        scale_(1.0 / std::sqrt(static_cast<double>(key_dim))),
        use_conv_(use_conv),
        act_(std::move(act)) {
    const int64_t key_attn = key_dim * num_heads, val_attn = val_dim_ * num_heads;
    if (stride == 1) {
      qkv = register_module("qkv", LevitNorm(in_dim, val_attn + 2 * key_attn, use_conv, 1.0));
      proj = register_module("proj", LnHolder(LevitNorm(val_attn, out_dim, use_conv, 0.0)));
    } else {
      kv = register_module("kv", LevitNorm(in_dim, val_attn + key_attn, use_conv, 1.0));
      q = register_module("q", LnHolder(LevitNorm(in_dim, key_attn, use_conv, 1.0)));
      proj = register_module("proj", LnHolder(LevitNorm(val_attn, out_dim, use_conv, 1.0)));
    }
    attention_biases = register_parameter("attention_biases", at::zeros({num_heads, res_h * res_w}));
    bias_idxs_ = attention_bias_idxs(res_h, res_w, stride);
  }

  at::Tensor forward(const at::Tensor& x) {
    const at::Tensor bias = attention_biases.index_select(1, bias_idxs_.to(attention_biases.device()).flatten())
                                .view({num_heads_, bias_idxs_.size(0), bias_idxs_.size(1)});
    const int64_t batch = x.size(0);
    at::Tensor out;
    if (use_conv_) {
      const int64_t h = x.size(2), w = x.size(3);
      at::Tensor qh, kh, vh;
      int64_t hh = h, ww = w;
      if (stride_ == 1) {
        const auto parts =
            qkv(x).view({batch, num_heads_, -1, h * w}).split_with_sizes({key_dim_, key_dim_, val_dim_}, 2);
        qh = parts[0];
        kh = parts[1];
        vh = parts[2];
      } else {
        hh = (h - 1) / stride_ + 1;
        ww = (w - 1) / stride_ + 1;
        const auto parts = kv(x).view({batch, num_heads_, -1, h * w}).split_with_sizes({key_dim_, val_dim_}, 2);
        kh = parts[0];
        vh = parts[1];
        const at::Tensor down = x.slice(2, 0, h, stride_).slice(3, 0, w, stride_);
        qh = q->ln(down).view({batch, num_heads_, key_dim_, -1});
      }
      at::Tensor attn = at::matmul(qh.transpose(-2, -1), kh) * scale_ + bias;
      attn = attn.softmax(-1);
      out = at::matmul(vh, attn.transpose(-2, -1)).reshape({batch, -1, hh, ww});
    } else {
      const int64_t n = x.size(1);
      at::Tensor qh, kh, vh;
      if (stride_ == 1) {
        const auto parts = qkv(x).view({batch, n, num_heads_, -1}).split_with_sizes({key_dim_, key_dim_, val_dim_}, 3);
        qh = parts[0].permute({0, 2, 1, 3});
        kh = parts[1].permute({0, 2, 3, 1});
        vh = parts[2].permute({0, 2, 1, 3});
      } else {
        const auto parts = kv(x).view({batch, n, num_heads_, -1}).split_with_sizes({key_dim_, val_dim_}, 3);
        kh = parts[0].permute({0, 2, 3, 1});
        vh = parts[1].permute({0, 2, 1, 3});
        // timm's Downsample (subsample): the token grid strided.
        const at::Tensor down = x.view({batch, res_h_, res_w_, -1})
                                    .slice(1, 0, res_h_, stride_)
                                    .slice(2, 0, res_w_, stride_)
                                    .reshape({batch, -1, x.size(2)});
        qh = q->ln(down).view({batch, -1, num_heads_, key_dim_}).permute({0, 2, 1, 3});
      }
      at::Tensor attn = at::matmul(qh, kh) * scale_ + bias;
      attn = attn.softmax(-1);
      out = at::matmul(attn, vh).transpose(1, 2).reshape({batch, -1, val_dim_ * num_heads_});
    }
    return proj->ln(layers::apply_act(act_, out));
  }

  LevitNorm qkv{nullptr}, kv{nullptr};  // qkv with stride 1, kv with stride 2
  LnHolder q{nullptr}, proj{nullptr};
  at::Tensor attention_biases;

 private:
  int64_t key_dim_, num_heads_, val_dim_, stride_, res_h_, res_w_;
  double scale_;
  bool use_conv_;
  std::string act_;
  at::Tensor bias_idxs_;  // timm's non-persistent attention_bias_idxs (CPU, moved per call)
};
TORCH_MODULE(LevitAttention);

// timm's LevitMlp: ln1, act, drop (0 as built), ln2 (bn weight 0).
class LevitMlpImpl : public nn::Module {
 public:
  LevitMlpImpl(int64_t dim, int64_t hidden, bool use_conv, std::string act) : act_(std::move(act)) {
    ln1 = register_module("ln1", LevitNorm(dim, hidden, use_conv, 1.0));
    ln2 = register_module("ln2", LevitNorm(hidden, dim, use_conv, 0.0));
  }
  at::Tensor forward(const at::Tensor& x) { return ln2(layers::apply_act(act_, ln1(x))); }
  LevitNorm ln1{nullptr}, ln2{nullptr};

 private:
  std::string act_;
};
TORCH_MODULE(LevitMlp);

at::Tensor maybe_drop_path(layers::DropPath drop_path, const at::Tensor& x) {
  return drop_path ? drop_path->forward(x) : x;
}

// timm's LevitBlock (attn, drop_path1, mlp, drop_path2) or, with in != out,
// LevitDownsample (attn_downsample, then mlp with drop_path).
class LevitBlockImpl : public nn::Module {
 public:
  LevitBlockImpl(bool downsample, int64_t in_dim, int64_t out_dim, int64_t key_dim, int64_t num_heads,
                 double attn_ratio, double mlp_ratio, int64_t res_h, int64_t res_w, bool use_conv,
                 const std::string& act, double drop_path_rate)
      : downsample_(downsample) {
    const int64_t hidden = static_cast<int64_t>(static_cast<double>(out_dim) * mlp_ratio);
    if (downsample) {
      attn = register_module("attn_downsample", LevitAttention(in_dim, out_dim, key_dim, num_heads, attn_ratio, res_h,
                                                               res_w, 2, use_conv, act));
      mlp = register_module("mlp", LevitMlp(out_dim, hidden, use_conv, act));
      if (drop_path_rate > 0.0) drop_path2 = register_module("drop_path", layers::DropPath(drop_path_rate));
    } else {
      attn = register_module(
          "attn", LevitAttention(in_dim, out_dim, key_dim, num_heads, attn_ratio, res_h, res_w, 1, use_conv, act));
      if (drop_path_rate > 0.0) drop_path1 = register_module("drop_path1", layers::DropPath(drop_path_rate));
      mlp = register_module("mlp", LevitMlp(out_dim, hidden, use_conv, act));
      if (drop_path_rate > 0.0) drop_path2 = register_module("drop_path2", layers::DropPath(drop_path_rate));
    }
  }
  at::Tensor forward(const at::Tensor& input) {
    at::Tensor x = downsample_ ? attn(input) : input + maybe_drop_path(drop_path1, attn(input));
    return x + maybe_drop_path(drop_path2, mlp(x));
  }
  LevitAttention attn{nullptr};
  LevitMlp mlp{nullptr};
  layers::DropPath drop_path1{nullptr}, drop_path2{nullptr};  // drop_path2 is "drop_path" in a downsample

 private:
  bool downsample_;
};
TORCH_MODULE(LevitBlock);

// timm's LevitStage: downsample (from stage 1 on, num_heads in_dim / key_dim,
// attn_ratio 4, mlp_ratio 2), then blocks at the (downsampled) resolution.
class LevitStageImpl : public nn::Module {
 public:
  LevitStageImpl(int64_t in_dim, int64_t out_dim, int64_t key_dim, int64_t depth, int64_t num_heads, double attn_ratio,
                 double mlp_ratio, int64_t res_h, int64_t res_w, bool downsample_first, bool use_conv,
                 const std::string& act, double drop_path_rate) {
    if (downsample_first) {
      downsample = register_module("downsample", LevitBlock(true, in_dim, out_dim, key_dim, in_dim / key_dim, 4.0, 2.0,
                                                            res_h, res_w, use_conv, act, drop_path_rate));
      res_h = (res_h - 1) / 2 + 1;
      res_w = (res_w - 1) / 2 + 1;
    }
    blocks = register_module("blocks", nn::Sequential());
    for (int64_t i = 0; i < depth; ++i) {
      blocks->push_back(LevitBlock(false, out_dim, out_dim, key_dim, num_heads, attn_ratio, mlp_ratio, res_h, res_w,
                                   use_conv, act, drop_path_rate));
    }
  }
  at::Tensor forward(const at::Tensor& input) {
    const at::Tensor x = downsample ? downsample(input) : input;
    return blocks->forward(x);
  }
  LevitBlock downsample{nullptr};
  nn::Sequential blocks{nullptr};
};
TORCH_MODULE(LevitStage);

// One registered architecture (timm's model_cfgs entry and create_levit's flags).
struct LevitSpec {
  std::string name;
  std::vector<int64_t> embed_dim;
  int64_t key_dim = 16;
  std::vector<int64_t> num_heads;
  std::vector<int64_t> depth;
  std::string act = "hard_swish";
  bool stem_s8 = false;
  bool use_conv = false;
  bool distilled = true;
};

class LevitImpl : public ClassifierImpl {
 public:
  LevitImpl(const LevitSpec& spec, const ModelArgs& args)
      : num_classes_(args.num_classes), use_conv_(spec.use_conv), distilled_(spec.distilled) {
    validate_model_args(spec.name, args, {"img_size"});
    global_pool_ = args.global_pool.value_or("avg");
    if (global_pool_ != "avg" && !global_pool_.empty()) {
      throw UsageError("model " + in_quotes(spec.name) + ": global_pool " + in_quotes(global_pool_) +
                       " is not supported; timm's LeViT takes only 'avg' or '' (none)");
    }
    if (global_pool_.empty() && num_classes_ > 0) {
      throw UsageError("model " + in_quotes(spec.name) +
                       ": global_pool '' needs --num-classes 0 (its NormLinear head cannot take unpooled features)");
    }
    const double img = model_kwarg_double(spec.name, args, "img_size").value_or(224.0);
    img_size_ = static_cast<int64_t>(img);
    if (static_cast<double>(img_size_) != img || img_size_ < 1 || img_size_ > 8192) {
      throw UsageError("model " + in_quotes(spec.name) + ": img_size must be a whole number of pixels in [1, 8192]");
    }
    const double drop_path_rate = args.drop_path_rate.value_or(0.0);
    cfg_.crop_pct = 0.9;
    cfg_.first_conv = "stem.conv1.linear";
    cfg_.classifier = "head.linear";  // timm: ('head.linear', 'head_dist.linear') for the distilled weights
    cfg_.hf_hub_id = timm_hub_id(spec.name, kLevitDefaultTags);

    stem = register_module("stem", LevitStem(args.in_chans, spec.embed_dim[0], spec.stem_s8, spec.act));
    int64_t stride = stem->stride();
    int64_t res = img_size_ / stride;
    if (res < 1) {
      throw UsageError("model " + in_quotes(spec.name) + ": img_size " + std::to_string(img_size_) +
                       " is smaller than the stem's stride " + std::to_string(stride));
    }
    stages = register_module("stages", nn::Sequential());
    int64_t in_dim = spec.embed_dim[0];
    for (size_t i = 0; i < spec.embed_dim.size(); ++i) {
      const bool down = i > 0;
      stages->push_back(LevitStage(in_dim, spec.embed_dim[i], spec.key_dim, spec.depth[i], spec.num_heads[i], 2.0, 2.0,
                                   res, res, down, use_conv_, spec.act, drop_path_rate));
      if (down) {
        stride *= 2;
        res = (res - 1) / 2 + 1;
      }
      feature_info_.push_back({spec.embed_dim[i], stride, "stages." + std::to_string(i)});
      in_dim = spec.embed_dim[i];
    }
    const int64_t num_features = spec.embed_dim.back();
    if (num_classes_ > 0) {
      head = register_module("head", NormLinear(num_features, num_classes_, args.drop_rate));
      if (distilled_) head_dist = register_module("head_dist", NormLinear(num_features, num_classes_, args.drop_rate));
    }
  }

  // timm's forward_features: stem, (linear mode) flatten to tokens, stages.
  at::Tensor forward_features(at::Tensor input) override {
    at::Tensor x = embed(input);
    return grad_checkpointing_ ? checkpoint_seq(sequence_modules(stages), x) : stages->forward(x);
  }

  std::vector<FeatureInfo> feature_info() const override { return feature_info_; }

  // timm's forward_intermediates over the stages (NCHW only); tokens reshaped to the stage's grid.
  Intermediates forward_intermediates(at::Tensor input,
                                      const IntermediatesOptions& options = IntermediatesOptions()) override {
    check_output_fmt(describe_model(*this), options.output_fmt(), {"NCHW"});
    const int64_t num_stages = static_cast<int64_t>(stages->size());
    const auto [take_indices, max_index] = feature_take_indices(num_stages, options.indices());
    const std::vector<bool> take = take_mask(num_stages, take_indices);
    Intermediates out;
    at::Tensor x = stem(input);
    const int64_t batch = x.size(0);
    int64_t h = x.size(2), w = x.size(3);
    if (!use_conv_) x = x.flatten(2).transpose(1, 2);
    auto modules = sequence_modules(stages);
    const int64_t stages_run = options.stop_early() ? max_index + 1 : num_stages;
    for (int64_t i = 0; i < stages_run; ++i) {
      auto& stage = modules[static_cast<size_t>(i)];
      x = grad_checkpointing_ ? checkpoint(stage, x) : stage.forward(x);
      if (take[static_cast<size_t>(i)]) {
        out.intermediates.push_back(use_conv_ ? x : x.reshape({batch, h, w, -1}).permute({0, 3, 1, 2}));
      }
      h = (h + 1) / 2;
      w = (w + 1) / 2;
    }
    if (!options.intermediates_only()) out.final = x;
    return out;
  }

  // timm's forward_head: average pool (tokens or NCHW), then the head(s);
  // distilled: the mean of both heads' logits (timm outside distilled training).
  at::Tensor forward_head(at::Tensor x, bool pre_logits = false) override {
    if (global_pool_ == "avg") x = use_conv_ ? x.mean({-2, -1}) : x.mean(1);
    if (pre_logits || !head) return x;
    if (head_dist) return (head(x) + head_dist(x)) / 2;
    return head(x);
  }
  at::Tensor forward(at::Tensor x) override { return forward_head(forward_features(x)); }

  bool has_distillation_head() const override { return distilled_ && head; }
  // timm's LevitDistilled.forward_head with distilled_training in training: both heads' logits.
  std::pair<at::Tensor, at::Tensor> forward_distilled(at::Tensor input) override {
    if (!has_distillation_head()) return ClassifierImpl::forward_distilled(input);
    at::Tensor x = forward_features(input);
    if (global_pool_ == "avg") x = use_conv_ ? x.mean({-2, -1}) : x.mean(1);
    at::Tensor cls = head(x);
    at::Tensor dist = head_dist(x);
    return {std::move(cls), std::move(dist)};
  }

  void set_grad_checkpointing(bool enable) override { grad_checkpointing_ = enable; }
  int64_t num_classes() const override { return num_classes_; }
  const PretrainedCfg& pretrained_cfg() const override { return cfg_; }
  // timm: every state_dict key holding attention_biases.
  std::vector<std::string> no_weight_decay() const override {
    std::vector<std::string> names;
    for (const auto& item : named_parameters()) {
      if (item.key().find("attention_biases") != std::string::npos) names.push_back(item.key());
    }
    return names;
  }
  GroupMatcher group_matcher(bool coarse) const override {
    if (coarse) return {{"stem", {{R"(^stem)", std::nullopt}}}, {"blocks", {{R"(^stages\.(\d+))", std::nullopt}}}};
    return {{"stem", {{R"(^stem)", std::nullopt}}},
            {"blocks",
             {{R"(^stages\.(\d+)\.downsample)", std::vector<double>{0}},
              {R"(^stages\.(\d+)\.blocks\.(\d+))", std::nullopt}}}};
  }

  LevitStem stem{nullptr};
  nn::Sequential stages{nullptr};
  NormLinear head{nullptr};       // null when num_classes is 0
  NormLinear head_dist{nullptr};  // distilled models only

 private:
  at::Tensor embed(const at::Tensor& input) {
    at::Tensor x = stem(input);
    return use_conv_ ? x : x.flatten(2).transpose(1, 2);
  }

  PretrainedCfg cfg_;
  int64_t num_classes_;
  bool use_conv_;
  bool distilled_;
  std::string global_pool_;
  int64_t img_size_ = 224;
  bool grad_checkpointing_ = false;
  std::vector<FeatureInfo> feature_info_;
};

std::vector<LevitSpec> levit_specs() {
  // timm's model_cfgs.
  const std::vector<LevitSpec> base = {
      {.name = "128s", .embed_dim = {128, 256, 384}, .key_dim = 16, .num_heads = {4, 6, 8}, .depth = {2, 3, 4}},
      {.name = "128", .embed_dim = {128, 256, 384}, .key_dim = 16, .num_heads = {4, 8, 12}, .depth = {4, 4, 4}},
      {.name = "192", .embed_dim = {192, 288, 384}, .key_dim = 32, .num_heads = {3, 5, 6}, .depth = {4, 4, 4}},
      {.name = "256", .embed_dim = {256, 384, 512}, .key_dim = 32, .num_heads = {4, 6, 8}, .depth = {4, 4, 4}},
      {.name = "384", .embed_dim = {384, 512, 768}, .key_dim = 32, .num_heads = {6, 9, 12}, .depth = {4, 4, 4}},
      {.name = "384_s8",
       .embed_dim = {384, 512, 768},
       .key_dim = 32,
       .num_heads = {6, 9, 12},
       .depth = {4, 4, 4},
       .act = "silu",
       .stem_s8 = true},
      {.name = "512_s8",
       .embed_dim = {512, 640, 896},
       .key_dim = 64,
       .num_heads = {8, 10, 14},
       .depth = {4, 4, 4},
       .act = "silu",
       .stem_s8 = true,
       .distilled = false},
      {.name = "512",
       .embed_dim = {512, 768, 1024},
       .key_dim = 64,
       .num_heads = {8, 12, 16},
       .depth = {4, 4, 4},
       .act = "silu",
       .distilled = false},
      {.name = "256d",
       .embed_dim = {256, 384, 512},
       .key_dim = 32,
       .num_heads = {4, 6, 8},
       .depth = {4, 8, 6},
       .act = "silu",
       .distilled = false},
      {.name = "512d",
       .embed_dim = {512, 640, 768},
       .key_dim = 64,
       .num_heads = {8, 10, 12},
       .depth = {4, 8, 6},
       .act = "silu",
       .distilled = false},
  };
  std::vector<LevitSpec> specs;
  for (const bool conv : {false, true}) {
    for (const auto& b : base) {
      LevitSpec s = b;
      s.name = conv ? "levit_conv_" : "levit_";
      s.name += b.name;
      s.use_conv = conv;
      specs.push_back(s);
    }
  }
  return specs;
}

std::string describe(const LevitSpec& spec) {
  std::string text = spec.use_conv ? "LeViT conv" : "LeViT";
  text += " (dims ";
  text += joined_ints(spec.embed_dim);
  text += ", depths ";
  text += joined_ints(spec.depth);
  if (spec.distilled) text += ", distilled head";
  return text + ")";
}

}  // namespace
}  // namespace timm::levit

TIMM_PLUGIN("levit") {
  for (const auto& spec : timm::levit::levit_specs()) {
    registrar.add_model(spec.name, timm::levit::describe(spec), [spec](const timm::ModelArgs& args) -> timm::ModelPtr {
      return std::make_shared<timm::levit::LevitImpl>(spec, args);
    });
  }
}
