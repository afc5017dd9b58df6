#include "byobnet_blocks.hpp"

#include <array>
#include <string>
#include <utility>
#include <vector>

#include <c10/core/GradMode.h>
#include <torch/nn/init.h>
#include <torch/nn/modules/pooling.h>

#include "timm/base/error.hpp"
#include "timm/layers/conv2d_same.hpp"
#include "timm/layers/reparam.hpp"

namespace timm::byobnet {

layers::ConvNormAct byob_cna(int64_t in, int64_t out, int64_t kernel, int64_t stride, int64_t dilation, int64_t groups,
                             bool apply_act, const std::string& act) {
  return layers::ConvNormAct(layers::ConvNormActOptions(in, out, kernel)
                                 .stride(stride)
                                 .dilation(dilation)
                                 .groups(groups)
                                 .apply_act(apply_act)
                                 .act_layer(act));
}

ConvEvoNormImpl::ConvEvoNormImpl(int64_t in, int64_t out, int64_t kernel, int64_t stride, int64_t dilation,
                                 int64_t groups, bool apply_act) {
  layers::Conv2dArgs conv_args;
  conv_args.stride = stride;
  conv_args.dilation = dilation;
  conv_args.groups = groups;
  conv = register_module("conv", layers::create_conv2d(in, out, kernel, conv_args));
  bn =
      register_module("bn", layers::EvoNorm2dS0a(layers::EvoNorm2dS0aOptions(out).group_size(16).apply_act(apply_act)));
}

at::Tensor ConvEvoNormImpl::forward(const at::Tensor& x) { return bn(conv(x)); }

at::Tensor ByobCna::operator()(const at::Tensor& x) {
  const at::Tensor y = bn_cna ? bn_cna(x) : evo_cna(x);
  if (aa_stride == 1) return y;
  // nn.AvgPool2d(stride): kernel = stride, no padding, floor mode, padding counted (there is none).
  return at::avg_pool2d(y, {aa_stride, aa_stride}, {aa_stride, aa_stride});
}

at::Tensor ByobCna::norm_weight() const { return bn_cna ? bn_cna->bn->weight : evo_cna->bn->weight; }

ByobCna& ByobCna::register_on(nn::Module& parent, const std::string& name) {
  if (bn_cna) {
    parent.register_module(name, bn_cna);
  } else {
    parent.register_module(name, evo_cna);
  }
  return *this;
}

void ByobCna::push_to(nn::Sequential& seq, const std::string& name) const {
  TORCH_INTERNAL_ASSERT(aa_stride == 1, "byobnet: a Sequential's conv with anti-aliasing");
  if (bn_cna) {
    seq->push_back(std::string(name), layers::ConvNormAct(bn_cna));
  } else {
    seq->push_back(std::string(name), ConvEvoNorm(evo_cna));
  }
}

ByobCna make_cna(const std::string& norm, int64_t in, int64_t out, int64_t kernel, int64_t stride, int64_t dilation,
                 int64_t groups, bool apply_act, const std::string& act, const std::string& aa) {
  if (!aa.empty() && aa != "avg") {
    throw UsageError("byobnet: anti-aliasing layer " + in_quotes(aa) + ": expected avg or none");
  }
  ByobCna cna;
  if (!aa.empty() && stride > 1) {
    cna.aa_stride = stride;
    stride = 1;
  }
  if (norm == "batchnorm") {
    cna.bn_cna = byob_cna(in, out, kernel, stride, dilation, groups, apply_act, act);
  } else if (norm == "evos") {
    cna.evo_cna = ConvEvoNorm(in, out, kernel, stride, dilation, groups, apply_act);
  } else {
    throw UsageError("byobnet: norm layer " + in_quotes(norm) + ": expected batchnorm or evos");
  }
  return cna;
}

BlockAttn::BlockAttn(nn::Module& parent, const std::string& name, const AttnCfg& cfg, int64_t channels) {
  if (cfg.type.empty()) return;
  if (cfg.type == "se") {
    se = parent.register_module(
        name, layers::SEModule(layers::SEModuleOptions(channels).rd_ratio(cfg.rd_ratio).rd_divisor(cfg.rd_divisor)));
  } else if (cfg.type == "eca") {
    eca = parent.register_module(name, layers::EcaModule(layers::EcaModuleOptions(channels)));
  } else if (cfg.type == "gc" || cfg.type == "gca") {
    auto options = layers::GlobalContextOptions(channels);
    if (cfg.type == "gca") options.fuse_add(true).fuse_scale(false);
    gc = parent.register_module(name, layers::GlobalContext(options));
  } else if (cfg.type == "bat") {
    bat = parent.register_module(
        name, layers::BatNonLocalAttn(layers::BatNonLocalAttnOptions(channels).block_size(cfg.block_size)));
  } else {
    throw UsageError("byobnet: attention layer " + in_quotes(cfg.type) + ": expected se, eca, gc, gca or bat");
  }
}

at::Tensor BlockAttn::forward(const at::Tensor& x) {
  if (se) return se->forward(x);
  if (eca) return eca->forward(x);
  if (gc) return gc->forward(x);
  if (bat) return bat->forward(x);
  return x;
}

void BlockAttn::reset_parameters() {
  if (!gc) return;
  c10::NoGradGuard no_grad;
  if (gc->conv_attn) nn::init::kaiming_normal_(gc->conv_attn->weight, /*a=*/0.0, torch::kFanIn, torch::kReLU);
  if (gc->mlp_add) nn::init::zeros_(gc->mlp_add->fc2->weight);
}

DownsampleAvgImpl::DownsampleAvgImpl(int64_t in_chs, int64_t out_chs, int64_t stride, int64_t dilation,
                                     const std::string& act) {
  avg_stride_ = dilation == 1 ? stride : 1;
  pool_ = stride > 1 || dilation > 1;
  pool_same_ = pool_ && avg_stride_ == 1 && dilation > 1;
  conv = register_module("conv", byob_cna(in_chs, out_chs, 1, 1, 1, 1, false, act));
}

at::Tensor DownsampleAvgImpl::forward(const at::Tensor& input) {
  at::Tensor x = input;
  if (pool_) {
    const std::array<int64_t, 2> kernel = {2, 2}, stride = {avg_stride_, avg_stride_}, no_pad = {0, 0};
    if (pool_same_) x = layers::pad_same(x, kernel, stride);
    x = at::avg_pool2d(x, kernel, stride, no_pad, /*ceil_mode=*/true, /*count_include_pad=*/false);
  }
  return conv(x);
}

MobileOneBlockImpl::MobileOneBlockImpl(const ByobBlockArgs& a) : kernel_size_(a.kernel_size) {
  groups_ = num_groups(a.group_size, a.in_chs);
  const bool use_ident = a.in_chs == a.out_chs && a.stride == 1 && a.first_dilation == a.dilation;
  if (use_ident) {
    identity =
        register_module("identity", layers::BatchNormAct2d(layers::BatchNormAct2dOptions(a.out_chs).apply_act(false)));
  }
  conv_kxk = nn::ModuleList();
  for (int64_t i = 0; i < a.num_conv_branches; ++i) {
    branches_.push_back(byob_cna(a.in_chs, a.out_chs, a.kernel_size, a.stride, 1, groups_, false, a.act));
    conv_kxk->push_back(branches_.back());
  }
  register_module("conv_kxk", conv_kxk);
  if (a.kernel_size > 1) {
    conv_scale = register_module("conv_scale", byob_cna(a.in_chs, a.out_chs, 1, a.stride, 1, groups_, false, a.act));
  }
  if (a.drop_path > 0.0 && use_ident) drop_path = register_module("drop_path", layers::DropPath(a.drop_path));
  attn = BlockAttn(*this, "attn", a.attn, a.out_chs);
  act = register_module("act", layers::create_act(a.act, /*inplace=*/true));  // timm: inplace=True
}

at::Tensor MobileOneBlockImpl::forward(const at::Tensor& x) {
  if (reparam_conv) return act(attn.forward(reparam_conv(x)));
  // timm's order: scale branch, then each kxk branch added, drop path, identity added.
  at::Tensor identity_out;
  if (identity) identity_out = identity(x);
  at::Tensor out;
  if (conv_scale) out = conv_scale(x);
  // timm's out += ...: each left side is a fresh norm output, sum or drop path output.
  for (auto& branch : branches_) out = out.defined() ? out.add_(branch(x)) : branch(x);
  if (drop_path) out = drop_path(out);
  if (identity_out.defined()) out.add_(identity_out);
  return act(attn.forward(out));
}

void MobileOneBlockImpl::init_block(bool /*zero_init_last*/) { attn.reset_parameters(); }

bool MobileOneBlockImpl::reparameterize() {
  if (reparam_conv) return false;
  // timm's _get_kernel_bias: (sum of the kxk branches) + scale + identity.
  layers::ConvWeights fused;
  for (auto& branch : branches_) fused += layers::fuse_conv_bn(*branch);
  if (conv_scale) {
    layers::ConvWeights scale = layers::fuse_conv_bn(*conv_scale);
    scale.weight = layers::pad_kernel_to(scale.weight, kernel_size_);
    fused += scale;
  }
  const auto& like = *branches_.front()->conv;
  if (identity) {
    const at::Tensor eye =
        layers::identity_kernel(like.options.in_channels(), groups_, kernel_size_, fused.weight.options());
    fused += layers::fuse_bn(eye, *identity);
  }
  reparam_conv = layers::make_reparam_conv(like, fused);
  for (const char* name : {"identity", "conv_kxk", "conv_scale", "drop_path"}) {
    if (named_children().contains(name)) unregister_module(name);
  }
  register_module("reparam_conv", reparam_conv);
  identity = nullptr;
  conv_kxk = nullptr;
  branches_.clear();
  conv_scale = nullptr;
  drop_path = nullptr;
  return true;
}

ByobStem make_byob_stem(int64_t in_chs, const std::vector<int64_t>& chs, const std::string& pool, int64_t num_act,
                        const std::string& act, const std::string& norm) {
  if (!pool.empty() && pool != "maxpool" && pool != "avg2") {
    throw UsageError("byobnet: stem pool " + in_quotes(pool) + ": expected maxpool, avg2 or none");
  }
  const auto num_rep = static_cast<int64_t>(chs.size());
  std::vector<int64_t> strides(chs.size(), 1);
  strides.front() = 2;
  if (pool.empty()) strides.back() = 2;  // stride 4 without a pool: the last conv strided too
  ByobStem stem;
  stem.seq = nn::Sequential();
  int64_t prev_chs = in_chs;
  int64_t curr_stride = 1;
  std::string prev_feat;
  for (int64_t i = 0; i < num_rep; ++i) {
    const auto idx = static_cast<size_t>(i);
    const std::string name = "conv" + std::to_string(i + 1);
    if (i > 0 && strides[idx] > 1) {
      stem.tap = i - 1;
      stem.feature_info.push_back({prev_chs, curr_stride, "stem." + prev_feat});
    }
    if (i < num_rep - num_act) {
      // timm's create_conv2d: a plain conv with get_padding, no bias.
      stem.seq->push_back(
          std::string(name),
          nn::Conv2d(nn::Conv2dOptions(prev_chs, chs[idx], 3).stride(strides[idx]).padding(1).bias(false)));
    } else {
      make_cna(norm, prev_chs, chs[idx], 3, strides[idx], 1, 1, true, act).push_to(stem.seq, name);
    }
    if (i == 0) stem.first_conv = i < num_rep - num_act ? "stem.conv1" : "stem.conv1.conv";
    prev_chs = chs[idx];
    curr_stride *= strides[idx];
    prev_feat = name;
  }
  if (!pool.empty()) {
    stem.tap = num_rep - 1;
    stem.feature_info.push_back({prev_chs, curr_stride, "stem." + prev_feat});
    if (pool == "avg2") {
      stem.seq->push_back("pool", nn::AvgPool2d(nn::AvgPool2dOptions(2)));
    } else {
      stem.seq->push_back("pool", nn::MaxPool2d(nn::MaxPool2dOptions(3).stride(2).padding(1)));
    }
    curr_stride *= 2;
    prev_feat = "pool";
  }
  stem.feature_info.push_back({prev_chs, curr_stride, "stem." + prev_feat});
  return stem;
}

std::pair<at::Tensor, at::Tensor> stem_forward_intermediates(const ByobStem& stem, at::Tensor x) {
  at::Tensor tapped;
  int64_t i = 0;
  nn::Sequential seq = stem.seq;
  for (auto& layer : *seq) {
    x = layer.forward(x);
    if (i == stem.tap) tapped = x;
    ++i;
  }
  return {x, tapped};
}

}  // namespace timm::byobnet
