#include "maxxvit_blocks.hpp"

#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include <c10/core/GradMode.h>
#include <torch/nn/init.h>
#include <torch/nn/modules/batchnorm.h>

#include "timm/base/error.hpp"
#include "timm/layers/batch_norm.hpp"
#include "timm/layers/conv2d_same.hpp"
#include "timm/layers/linear.hpp"
#include "timm/layers/norm.hpp"
#include "timm/layers/norm_act.hpp"
#include "timm/models/grad_checkpoint.hpp"

namespace timm::maxxvit {

namespace {

// timm's window_partition / window_reverse are the SDK's (NHWC); the grid
// partition strides the windows over the map.
at::Tensor grid_partition(const at::Tensor& x, WindowSize grid) {
  const int64_t b = x.size(0), h = x.size(1), w = x.size(2), c = x.size(3);
  return x.view({b, grid[0], h / grid[0], grid[1], w / grid[1], c})
      .permute({0, 2, 4, 1, 3, 5})
      .contiguous()
      .view({-1, grid[0], grid[1], c});
}

at::Tensor grid_reverse(const at::Tensor& windows, WindowSize grid, int64_t h, int64_t w) {
  const int64_t c = windows.size(-1);
  return windows.view({-1, h / grid[0], w / grid[1], grid[0], grid[1], c})
      .permute({0, 3, 1, 4, 2, 5})
      .contiguous()
      .view({-1, h, w, c});
}

at::Tensor partition(const at::Tensor& x, bool block, WindowSize size) {
  return block ? layers::window_partition(x, size) : grid_partition(x, size);
}

at::Tensor unpartition(const at::Tensor& windows, bool block, WindowSize size, int64_t h, int64_t w) {
  return block ? layers::window_reverse(windows, size, h, w) : grid_reverse(windows, size, h, w);
}

at::Tensor sdpa(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& bias, double drop) {
  std::optional<at::Tensor> mask;
  if (bias.defined()) mask = bias;
  return at::scaled_dot_product_attention(q, k, v, mask, drop);
}

// timm's create_conv2d arguments (symmetric padding unless the padding string says otherwise).
layers::Conv2dArgs conv_args(int64_t stride, int64_t groups = 1, bool bias = false, bool depthwise = false) {
  layers::Conv2dArgs args;
  args.stride = stride;
  args.groups = groups;
  args.bias = bias;
  args.depthwise = depthwise;
  return args;
}

// TransformerBlock2d's strided norm1: timm's Sequential(norm, down).
class NormDownImpl : public nn::Module {
 public:
  NormDownImpl(nn::AnyModule norm_, Downsample2d down_) : norm(std::move(norm_)) {
    register_module("norm", norm.ptr());
    down = register_module("down", std::move(down_));
  }
  at::Tensor forward(const at::Tensor& x) { return down(norm.forward(x)); }
  nn::AnyModule norm;
  Downsample2d down{nullptr};
};
TORCH_MODULE(NormDown);

template <class Module>
at::Tensor maybe(Module& module, const at::Tensor& x) {
  return module.is_empty() ? x : module(x);
}

}  // namespace

void ConvCfg::finalize() {
  const bool mbconv = block_type == "mbconv";
  if (!mbconv && block_type != "convnext") throw Error("maxxvit: unknown conv block type " + in_quotes(block_type));
  if (norm_layer.empty()) norm_layer = mbconv ? "batchnorm2d" : "layernorm2d";
  if (norm_layer_cl.empty() && !mbconv) norm_layer_cl = "layernorm";
  if (!norm_eps) norm_eps = mbconv ? 1e-5 : 1e-6;
  if (downsample_pool_type.empty()) downsample_pool_type = pool_type;
}

// timm's _init_conv: efficientnet-like normal(0, sqrt(2 / fan_out)) ('vit_eff' and any other
// scheme of the cfgs but 'normal'), or normal(0, .02); biases zero.
void init_conv_weights(nn::Module& module, const std::string& scheme) {
  if (scheme.empty()) return;
  c10::NoGradGuard no_grad;
  for (const auto& m : module.modules(/*include_self=*/true)) {
    auto* conv = m->as<nn::Conv2dImpl>();
    if (conv == nullptr) continue;
    if (scheme == "normal") {
      conv->weight.normal_(0.0, 0.02);
    } else {
      const auto& k = conv->options.kernel_size();
      const int64_t fan_out = k->at(0) * k->at(1) * conv->options.out_channels() / conv->options.groups();
      conv->weight.normal_(0.0, std::sqrt(2.0 / static_cast<double>(fan_out)));
    }
    if (conv->bias.defined()) conv->bias.zero_();
  }
}

// timm's _init_transformer over a block (names relative to it, as named_apply's): 'vit_eff'
// xavier_uniform weights, zero biases but normal(1e-6) in the MLPs; 'normal' normal(0, .02), zero biases.
void init_transformer_weights(nn::Module& module, const std::string& scheme) {
  if (scheme.empty()) return;
  c10::NoGradGuard no_grad;
  for (const auto& item : module.named_modules("", /*include_self=*/false)) {
    at::Tensor weight, bias;
    if (auto* conv = item.value()->as<nn::Conv2dImpl>()) {
      weight = conv->weight;
      bias = conv->bias;
    } else if (auto* linear = item.value()->as<nn::LinearImpl>()) {
      weight = linear->weight;
      bias = linear->bias;
    } else {
      continue;
    }
    if (scheme == "normal") {
      weight.normal_(0.0, 0.02);
      if (bias.defined()) bias.zero_();
      continue;
    }
    torch::nn::init::xavier_uniform_(weight);
    if (!bias.defined()) continue;
    if (item.key().find("mlp") != std::string::npos) {
      bias.normal_(0.0, 1e-6);
    } else {
      bias.zero_();
    }
  }
}

int64_t pool_out_size(const std::string& pool_type, const std::string& padding, int64_t size) {
  if (padding != "same" && (pool_type == "avg2" || pool_type == "max2")) return size / 2;
  return (size + 1) / 2;
}

// ---- norms ----

LayerNormAct2dImpl::LayerNormAct2dImpl(int64_t channels, double eps, const std::string& act_layer, bool apply_act)
    : channels_(channels), eps_(eps) {
  weight = register_parameter("weight", at::ones({channels}));
  bias = register_parameter("bias", at::zeros({channels}));
  act = register_module("act", layers::create_act(apply_act ? act_layer : "identity"));
}

at::Tensor LayerNormAct2dImpl::forward(const at::Tensor& x) {
  const at::Tensor y =
      layers::layer_norm(x.permute({0, 2, 3, 1}), {channels_}, weight, bias, eps_, fast_norm_).permute({0, 3, 1, 2});
  return act(y);
}

nn::AnyModule create_norm_act(const std::string& norm_layer, int64_t channels, double eps, const std::string& act_layer,
                              bool apply_act) {
  if (norm_layer == "batchnorm2d") {
    return nn::AnyModule(layers::BatchNormAct2d(
        layers::BatchNormAct2dOptions(channels).eps(eps).act_layer(act_layer).apply_act(apply_act)));
  }
  if (norm_layer == "layernorm2d") return nn::AnyModule(LayerNormAct2d(channels, eps, act_layer, apply_act));
  throw Error("maxxvit: unsupported norm-act layer " + in_quotes(norm_layer));
}

nn::AnyModule create_norm(const std::string& norm_layer, int64_t channels, double eps) {
  if (norm_layer == "layernorm2d")
    return nn::AnyModule(layers::LayerNorm2d(layers::LayerNormOptions(channels).eps(eps)));
  if (norm_layer == "layernorm") return nn::AnyModule(layers::LayerNorm(layers::LayerNormOptions(channels).eps(eps)));
  if (norm_layer == "batchnorm2d") return nn::AnyModule(layers::BatchNorm2d(nn::BatchNorm2dOptions(channels).eps(eps)));
  throw Error("maxxvit: unsupported norm layer " + in_quotes(norm_layer));
}

// ---- Downsample2d ----

Downsample2dImpl::Downsample2dImpl(int64_t dim, int64_t dim_out, const std::string& pool_type,
                                   const std::string& padding, bool bias)
    : pool_type_(pool_type), padding_(padding) {
  if (pool_type != "max" && pool_type != "max2" && pool_type != "avg" && pool_type != "avg2") {
    throw Error("maxxvit: unknown downsample pool type " + in_quotes(pool_type));
  }
  if (dim != dim_out) expand = register_module("expand", nn::Conv2d(nn::Conv2dOptions(dim, dim_out, 1).bias(bias)));
}

at::Tensor Downsample2dImpl::forward(const at::Tensor& x) {
  const bool max = pool_type_ == "max" || pool_type_ == "max2";
  const int64_t k = (pool_type_ == "max" || pool_type_ == "avg") ? 3 : 2;
  at::Tensor y;
  if (padding_ == "same") {
    // timm's MaxPool2dSame / AvgPool2dSame: pad to 'SAME' (-inf for max), pool without padding.
    const at::Tensor padded =
        layers::pad_same(x, {k, k}, {2, 2}, {1, 1}, max ? -std::numeric_limits<double>::infinity() : 0.0);
    y = max ? at::max_pool2d(padded, {k, k}, {2, 2})
            : at::avg_pool2d(padded, {k, k}, {2, 2}, {0, 0}, false, /*count_include_pad=*/pool_type_ == "avg2");
  } else {
    const int64_t pad = k == 3 ? 1 : 0;
    y = max ? at::max_pool2d(x, {k, k}, {2, 2}, {pad, pad})
            : at::avg_pool2d(x, {k, k}, {2, 2}, {pad, pad}, false, /*count_include_pad=*/pool_type_ == "avg2");
  }
  return maybe(expand, y);
}

// ---- Stem ----

StemImpl::StemImpl(int64_t in_chs, std::vector<int64_t> out_chs, bool bias, const ConvCfg& cfg) {
  if (out_chs.size() == 1) out_chs.push_back(out_chs[0]);
  conv1 = layers::create_conv2d_pad(in_chs, out_chs[0], 3, conv_args(2, 1, bias), cfg.padding);
  register_module("conv1", conv1.ptr());
  norm1 = create_norm_act(cfg.norm_layer, out_chs[0], *cfg.norm_eps, cfg.act_layer);
  register_module("norm1", norm1.ptr());
  conv2 = layers::create_conv2d_pad(out_chs[0], out_chs[1], 3, conv_args(1, 1, bias), cfg.padding);
  register_module("conv2", conv2.ptr());
}

at::Tensor StemImpl::forward(const at::Tensor& x) { return conv2.forward(norm1.forward(conv1.forward(x))); }

// ---- MbConvBlock ----

MbConvBlockImpl::MbConvBlockImpl(int64_t in_chs, int64_t out_chs, int64_t stride, const ConvCfg& cfg,
                                 double drop_path_rate) {
  const double eps = *cfg.norm_eps;
  const int64_t mid_chs =
      layers::make_divisible(static_cast<double>(cfg.expand_output ? out_chs : in_chs) * cfg.expand_ratio);
  const int64_t groups = cfg.group_size > 0 ? mid_chs / cfg.group_size : 1;
  if (stride == 2) {
    shortcut = register_module("shortcut", Downsample2d(in_chs, out_chs, cfg.pool_type, cfg.padding, cfg.output_bias));
  }
  int64_t stride_pool = 1, stride_1 = 1, stride_2 = 1;
  if (cfg.stride_mode == "pool") {
    stride_pool = stride;
  } else if (cfg.stride_mode == "1x1") {
    stride_1 = stride;
  } else if (cfg.stride_mode == "dw") {
    stride_2 = stride;
  } else {
    throw Error("maxxvit: unknown stride_mode " + in_quotes(cfg.stride_mode));
  }
  pre_norm = create_norm_act(cfg.norm_layer, in_chs, eps, cfg.act_layer, cfg.pre_norm_act);
  register_module("pre_norm", pre_norm.ptr());
  if (stride_pool > 1) {
    down = register_module("down", Downsample2d(in_chs, in_chs, cfg.downsample_pool_type, cfg.padding, true));
  }
  conv1_1x1 = layers::create_conv2d_pad(in_chs, mid_chs, 1, conv_args(stride_1), "");
  register_module("conv1_1x1", conv1_1x1.ptr());
  norm1 = create_norm_act(cfg.norm_layer, mid_chs, eps, cfg.act_layer);
  register_module("norm1", norm1.ptr());
  conv2_kxk = layers::create_conv2d_pad(mid_chs, mid_chs, cfg.kernel_size, conv_args(stride_2, groups), cfg.padding);
  register_module("conv2_kxk", conv2_kxk.ptr());
  if (cfg.attn_layer != "se") throw Error("maxxvit: unsupported attn_layer " + in_quotes(cfg.attn_layer));
  const auto rd = static_cast<int64_t>(cfg.attn_ratio * static_cast<double>(cfg.expand_output ? out_chs : mid_chs));
  const auto se_options = layers::SEModuleOptions(mid_chs).rd_channels(rd).act_layer(cfg.attn_act_layer);
  if (cfg.attn_early) se_early = register_module("se_early", layers::SEModule(se_options));
  norm2 = create_norm_act(cfg.norm_layer, mid_chs, eps, cfg.act_layer);
  register_module("norm2", norm2.ptr());
  if (!cfg.attn_early) se = register_module("se", layers::SEModule(se_options));
  conv3_1x1 = layers::create_conv2d_pad(mid_chs, out_chs, 1, conv_args(1, 1, cfg.output_bias), "");
  register_module("conv3_1x1", conv3_1x1.ptr());
  drop_path = register_module("drop_path", layers::DropPath(drop_path_rate));
}

at::Tensor MbConvBlockImpl::forward(const at::Tensor& input) {
  const at::Tensor sc = maybe(shortcut, input);
  at::Tensor x = maybe(down, pre_norm.forward(input));
  x = norm1.forward(conv1_1x1.forward(x));
  x = maybe(se_early, conv2_kxk.forward(x));
  x = maybe(se, norm2.forward(x));
  x = conv3_1x1.forward(x);
  return drop_path(x) + sc;
}

// ---- ConvNeXtBlock ----

ConvNeXtBlockImpl::ConvNeXtBlockImpl(int64_t in_chs, int64_t out_chs, int64_t stride, const ConvCfg& cfg,
                                     double drop_path_rate) {
  constexpr int64_t kKernelSize = 7;  // timm's ConvNeXtBlock default, which MaxxVit keeps
  if (stride == 2) {
    shortcut_down = register_module("shortcut", Downsample2d(in_chs, out_chs, "avg2", "", true));
  } else if (in_chs != out_chs) {
    shortcut_conv =
        register_module("shortcut", nn::Conv2d(nn::Conv2dOptions(in_chs, out_chs, 1).bias(cfg.output_bias)));
  }
  int64_t stride_pool = 1, stride_dw = 1;
  if (cfg.stride_mode == "pool") {
    stride_pool = stride;
  } else if (cfg.stride_mode == "dw") {
    stride_dw = stride;
  } else {
    throw Error("maxxvit: ConvNeXt blocks take stride_mode 'pool' or 'dw', not " + in_quotes(cfg.stride_mode));
  }
  if (stride_pool == 2)
    down = register_module("down", Downsample2d(in_chs, in_chs, cfg.downsample_pool_type, "", true));
  conv_dw = register_module(
      "conv_dw", layers::create_conv2d(in_chs, out_chs, kKernelSize, conv_args(stride_dw, 1, cfg.output_bias, true)));
  norm = create_norm(cfg.norm_layer, out_chs, *cfg.norm_eps);
  register_module("norm", norm.ptr());
  mlp = register_module(
      "mlp", layers::ConvMlp(layers::ConvMlpOptions(out_chs)
                                 .hidden_features(static_cast<int64_t>(cfg.expand_ratio * static_cast<double>(out_chs)))
                                 .act_layer(cfg.act_layer)
                                 .bias(cfg.output_bias)));
  if (cfg.init_values && *cfg.init_values != 0.0) {
    ls = register_module("ls", layers::LayerScale2d(layers::LayerScaleOptions(out_chs).init_values(*cfg.init_values)));
  }
  drop_path = register_module("drop_path", layers::DropPath(drop_path_rate));
}

at::Tensor ConvNeXtBlockImpl::forward(const at::Tensor& input) {
  at::Tensor sc = input;
  if (!shortcut_down.is_empty()) sc = shortcut_down(input);
  if (!shortcut_conv.is_empty()) sc = shortcut_conv(input);
  at::Tensor x = conv_dw(maybe(down, input));
  x = maybe(ls, mlp(norm.forward(x)));
  return drop_path(x) + sc;
}

// ---- relative position and attention ----

void RelPos::create(nn::Module& parent, const TransformerCfg& cfg, WindowSize size, int64_t num_heads) {
  window = size;
  if (cfg.rel_pos_type == "mlp") {
    mlp = parent.register_module(
        "rel_pos", layers::RelPosMlp(layers::RelPosMlpOptions(size, num_heads).hidden_dim(cfg.rel_pos_dim)));
  } else if (cfg.rel_pos_type == "bias") {
    bias = parent.register_module("rel_pos", layers::RelPosBias(layers::RelPosBiasOptions(size, num_heads)));
  } else if (cfg.rel_pos_type == "bias_tf") {
    tf = parent.register_module("rel_pos", layers::RelPosBiasTf(layers::RelPosBiasOptions(size, num_heads)));
  } else if (!cfg.rel_pos_type.empty()) {
    throw Error("maxxvit: unknown rel_pos_type " + in_quotes(cfg.rel_pos_type));
  }
}

at::Tensor RelPos::get_bias() {
  if (!mlp.is_empty()) return mlp->get_bias();
  if (!bias.is_empty()) return bias->get_bias();
  if (!tf.is_empty()) return tf->get_bias();
  return {};
}

AttentionClImpl::AttentionClImpl(int64_t dim, int64_t dim_out, const TransformerCfg& cfg, WindowSize window)
    : head_first_(cfg.head_first), attn_drop_(0.0) {
  // timm's expand_first (True for every caller here) with dim_out > dim.
  const int64_t dim_attn = dim_out > dim ? dim_out : dim;
  if (dim_attn % cfg.dim_head != 0) throw Error("maxxvit: attn dim should be divisible by head_dim");
  dim_head_ = cfg.dim_head;
  num_heads_ = dim_attn / cfg.dim_head;
  qkv = register_module("qkv", layers::Linear(nn::LinearOptions(dim, dim_attn * 3).bias(cfg.attn_bias)));
  rel_pos.create(*this, cfg, window, num_heads_);
  proj = register_module("proj", layers::Linear(nn::LinearOptions(dim_attn, dim_out).bias(cfg.attn_bias)));
  proj_drop_ = register_module("proj_drop", nn::Dropout(0.0));
}

at::Tensor AttentionClImpl::forward(const at::Tensor& x) {
  const int64_t b = x.size(0);
  std::vector<int64_t> restore(x.sizes().begin(), x.sizes().end() - 1);
  restore.push_back(-1);
  const at::Tensor qkv_out = qkv(x);
  std::vector<at::Tensor> heads;
  if (head_first_) {
    heads = qkv_out.view({b, -1, num_heads_, dim_head_ * 3}).transpose(1, 2).chunk(3, 3);
  } else {
    heads = qkv_out.reshape({b, -1, 3, num_heads_, dim_head_}).transpose(1, 3).unbind(2);
  }
  const at::Tensor bias = rel_pos.get_bias();
  const at::Tensor out = sdpa(heads[0], heads[1], heads[2], bias, is_training() ? attn_drop_ : 0.0);
  return proj_drop_(proj(out.transpose(1, 2).reshape(restore)));
}

Attention2dImpl::Attention2dImpl(int64_t dim, int64_t dim_out, const TransformerCfg& cfg, WindowSize feat_size)
    : attn_drop_(0.0) {
  const int64_t dim_attn = cfg.expand_first ? dim_out : dim;
  dim_head_ = cfg.dim_head;
  num_heads_ = dim_attn / cfg.dim_head;
  qkv = register_module("qkv", nn::Conv2d(nn::Conv2dOptions(dim, dim_attn * 3, 1).bias(cfg.attn_bias)));
  rel_pos.create(*this, cfg, feat_size, num_heads_);
  proj = register_module("proj", nn::Conv2d(nn::Conv2dOptions(dim_attn, dim_out, 1).bias(cfg.attn_bias)));
  proj_drop_ = register_module("proj_drop", nn::Dropout(0.0));
}

at::Tensor Attention2dImpl::forward(const at::Tensor& x) {
  const int64_t b = x.size(0), h = x.size(2), w = x.size(3);
  // timm's head_first layout (TransformerBlock2d does not pass cfg.head_first).
  const auto heads = qkv(x).view({b, num_heads_, dim_head_ * 3, -1}).chunk(3, 2);
  const at::Tensor bias = rel_pos.get_bias();
  const at::Tensor out = sdpa(heads[0].transpose(-1, -2).contiguous(), heads[1].transpose(-1, -2).contiguous(),
                              heads[2].transpose(-1, -2).contiguous(), bias, is_training() ? attn_drop_ : 0.0);
  return proj_drop_(proj(out.transpose(-1, -2).reshape({b, -1, h, w})));
}

// ---- TransformerBlock2d ----

TransformerBlock2dImpl::TransformerBlock2dImpl(int64_t dim, int64_t dim_out, int64_t stride, const TransformerCfg& cfg,
                                               WindowSize feat_size, double drop_path_rate) {
  if (stride == 2) {
    shortcut = register_module("shortcut", Downsample2d(dim, dim_out, cfg.pool_type, "", cfg.shortcut_bias));
    norm1 = nn::AnyModule(
        NormDown(create_norm(cfg.norm_layer, dim, cfg.norm_eps), Downsample2d(dim, dim, cfg.pool_type, "", true)));
  } else {
    if (dim != dim_out) throw Error("maxxvit: a stride-1 transformer block keeps its width");
    norm1 = create_norm(cfg.norm_layer, dim, cfg.norm_eps);
  }
  register_module("norm1", norm1.ptr());
  attn = register_module("attn", Attention2d(dim, dim_out, cfg, feat_size));
  if (cfg.init_values) {
    ls1 =
        register_module("ls1", layers::LayerScale2d(layers::LayerScaleOptions(dim_out).init_values(*cfg.init_values)));
  }
  drop_path1 = register_module("drop_path1", layers::DropPath(drop_path_rate));
  norm2 = create_norm(cfg.norm_layer, dim_out, cfg.norm_eps);
  register_module("norm2", norm2.ptr());
  mlp = register_module(
      "mlp", layers::ConvMlp(layers::ConvMlpOptions(dim_out)
                                 .hidden_features(static_cast<int64_t>(static_cast<double>(dim_out) * cfg.expand_ratio))
                                 .act_layer(cfg.act_layer)));
  if (cfg.init_values) {
    ls2 =
        register_module("ls2", layers::LayerScale2d(layers::LayerScaleOptions(dim_out).init_values(*cfg.init_values)));
  }
  drop_path2 = register_module("drop_path2", layers::DropPath(drop_path_rate));
}

at::Tensor TransformerBlock2dImpl::forward(const at::Tensor& input) {
  const at::Tensor sc = maybe(shortcut, input);
  at::Tensor x = sc + drop_path1(maybe(ls1, attn(norm1.forward(input))));
  return x + drop_path2(maybe(ls2, mlp(norm2.forward(x))));
}

// ---- partition attention ----

namespace {

layers::Mlp make_mlp(int64_t dim, int64_t out, const TransformerCfg& cfg) {
  return layers::Mlp(layers::MlpOptions(dim)
                         .hidden_features(static_cast<int64_t>(static_cast<double>(dim) * cfg.expand_ratio))
                         .out_features(out)
                         .act_layer(cfg.act_layer));
}

layers::LayerScale make_ls(int64_t dim, const TransformerCfg& cfg) {
  return layers::LayerScale(layers::LayerScaleOptions(dim).init_values(*cfg.init_values));
}

}  // namespace

PartitionAttentionClImpl::PartitionAttentionClImpl(int64_t dim, bool block, const TransformerCfg& cfg,
                                                   double drop_path_rate)
    : block_(block), partition_(cfg.window) {
  norm1 = create_norm(cfg.norm_layer_cl, dim, cfg.norm_eps);
  register_module("norm1", norm1.ptr());
  attn = register_module("attn", AttentionCl(dim, dim, cfg, partition_));
  if (cfg.init_values) ls1 = register_module("ls1", make_ls(dim, cfg));
  drop_path1 = register_module("drop_path1", layers::DropPath(drop_path_rate));
  norm2 = create_norm(cfg.norm_layer_cl, dim, cfg.norm_eps);
  register_module("norm2", norm2.ptr());
  mlp = register_module("mlp", make_mlp(dim, dim, cfg));
  if (cfg.init_values) ls2 = register_module("ls2", make_ls(dim, cfg));
  drop_path2 = register_module("drop_path2", layers::DropPath(drop_path_rate));
}

at::Tensor PartitionAttentionClImpl::forward(const at::Tensor& input) {
  const int64_t h = input.size(1), w = input.size(2);
  const at::Tensor windows = attn(partition(norm1.forward(input), block_, partition_));
  at::Tensor x = input + drop_path1(maybe(ls1, unpartition(windows, block_, partition_, h, w)));
  return x + drop_path2(maybe(ls2, mlp(norm2.forward(x))));
}

ParallelPartitionAttentionImpl::ParallelPartitionAttentionImpl(int64_t dim, const TransformerCfg& cfg,
                                                               double drop_path_rate)
    : partition_(cfg.window) {
  if (dim % 2 != 0) throw Error("maxxvit: parallel partition attention needs an even width");
  norm1 = create_norm(cfg.norm_layer_cl, dim, cfg.norm_eps);
  register_module("norm1", norm1.ptr());
  attn_block = register_module("attn_block", AttentionCl(dim, dim / 2, cfg, partition_));
  attn_grid = register_module("attn_grid", AttentionCl(dim, dim / 2, cfg, partition_));
  if (cfg.init_values) ls1 = register_module("ls1", make_ls(dim, cfg));
  drop_path1 = register_module("drop_path1", layers::DropPath(drop_path_rate));
  norm2 = create_norm(cfg.norm_layer_cl, dim, cfg.norm_eps);
  register_module("norm2", norm2.ptr());
  mlp = register_module("mlp", make_mlp(dim, dim, cfg));
  if (cfg.init_values) ls2 = register_module("ls2", make_ls(dim, cfg));
  drop_path2 = register_module("drop_path2", layers::DropPath(drop_path_rate));
}

at::Tensor ParallelPartitionAttentionImpl::forward(const at::Tensor& input) {
  const int64_t h = input.size(1), w = input.size(2);
  const at::Tensor y = norm1.forward(input);
  const at::Tensor x_window = unpartition(attn_block(partition(y, true, partition_)), true, partition_, h, w);
  const at::Tensor x_grid = unpartition(attn_grid(partition(y, false, partition_)), false, partition_, h, w);
  at::Tensor x = input + drop_path1(maybe(ls1, at::cat({x_window, x_grid}, -1)));
  return x + drop_path2(maybe(ls2, mlp(norm2.forward(x))));
}

// ---- MaxViT blocks ----

namespace {

nn::AnyModule conv_block(int64_t in_chs, int64_t out_chs, int64_t stride, const ConvCfg& cfg, double drop_path) {
  if (cfg.block_type == "convnext") return nn::AnyModule(ConvNeXtBlock(in_chs, out_chs, stride, cfg, drop_path));
  return nn::AnyModule(MbConvBlock(in_chs, out_chs, stride, cfg, drop_path));
}

}  // namespace

MaxxVitBlockImpl::MaxxVitBlockImpl(int64_t dim, int64_t dim_out, int64_t stride, const ConvCfg& conv_cfg,
                                   const TransformerCfg& transformer_cfg, double drop_path) {
  conv = conv_block(dim, dim_out, stride, conv_cfg, drop_path);
  register_module("conv", conv.ptr());
  if (!transformer_cfg.no_block_attn) {
    attn_block = register_module("attn_block", PartitionAttentionCl(dim_out, true, transformer_cfg, drop_path));
  }
  attn_grid = register_module("attn_grid", PartitionAttentionCl(dim_out, false, transformer_cfg, drop_path));
}

at::Tensor MaxxVitBlockImpl::forward(const at::Tensor& input) {
  at::Tensor x = conv.forward(input).permute({0, 2, 3, 1});  // channels-last
  x = attn_grid(maybe(attn_block, x));
  return x.permute({0, 3, 1, 2});
}

ParallelMaxxVitBlockImpl::ParallelMaxxVitBlockImpl(int64_t dim, int64_t dim_out, int64_t stride,
                                                   const ConvCfg& conv_cfg, const TransformerCfg& transformer_cfg,
                                                   double drop_path) {
  // timm's num_conv 2: the strided block, then one at dim_out.
  conv = register_module("conv", nn::Sequential());
  conv->push_back(conv_block(dim, dim_out, stride, conv_cfg, drop_path));
  conv->push_back(conv_block(dim_out, dim_out, 1, conv_cfg, drop_path));
  attn = register_module("attn", ParallelPartitionAttention(dim_out, transformer_cfg, drop_path));
}

at::Tensor ParallelMaxxVitBlockImpl::forward(const at::Tensor& input) {
  return attn(conv->forward(input).permute({0, 2, 3, 1})).permute({0, 3, 1, 2});
}

// ---- stage ----

MaxxVitStageImpl::MaxxVitStageImpl(const StageArgs& a, const ConvCfg& conv_cfg, const TransformerCfg& transformer_cfg) {
  blocks = register_module("blocks", nn::Sequential());
  int64_t in_chs = a.in_chs;
  for (size_t i = 0; i < a.block_types.size(); ++i) {
    const std::string& t = a.block_types[i];
    const int64_t stride = i == 0 ? 2 : 1;
    const double dp = a.drop_path[i];
    // Each block gets its timm init_weights (a ConvNeXt 'C' block has none: torch's default init).
    if (t == "C") {
      nn::AnyModule block = conv_block(in_chs, a.out_chs, stride, conv_cfg, dp);
      if (conv_cfg.block_type == "mbconv") init_conv_weights(*block.ptr(), a.weight_init);
      blocks->push_back(block);
    } else if (t == "T") {
      TransformerBlock2d block(in_chs, a.out_chs, stride, transformer_cfg, a.feat_size, dp);
      init_transformer_weights(*block, a.weight_init);
      blocks->push_back(block);
    } else if (t == "M") {
      MaxxVitBlock block(in_chs, a.out_chs, stride, conv_cfg, transformer_cfg, dp);
      if (!block->attn_block.is_empty()) init_transformer_weights(*block->attn_block, a.weight_init);
      init_transformer_weights(*block->attn_grid, a.weight_init);
      init_conv_weights(*block->conv.ptr(), a.weight_init);
      blocks->push_back(block);
    } else if (t == "PM") {
      ParallelMaxxVitBlock block(in_chs, a.out_chs, stride, conv_cfg, transformer_cfg, dp);
      init_transformer_weights(*block->attn, a.weight_init);
      init_conv_weights(*block->conv, a.weight_init);
      blocks->push_back(block);
    } else {
      throw Error("maxxvit: unknown block type " + in_quotes(t));
    }
    in_chs = a.out_chs;
  }
}

at::Tensor MaxxVitStageImpl::forward(const at::Tensor& x) {
  return grad_checkpointing ? checkpoint_seq(sequence_modules(blocks), x) : blocks->forward(x);
}

}  // namespace timm::maxxvit
