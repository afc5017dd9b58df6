// GhostNet, GhostNetV2 and GhostNetV3 (timm/models/ghostnet.py), with timm's
// module names so state_dict keys equal timm's:
// - ghostnet_050 / 100 / 130: GhostBottlenecks of two GhostModules (a 1x1
//   conv for half the channels, a cheap depthwise 3x3 conv for the rest), a
//   strided depthwise conv where the block strides, timm's efficientnet
//   SqueezeExcite (hard-sigmoid gate, reduction rounded to 4) and a
//   depthwise + 1x1 conv shortcut where the shape changes;
// - ghostnetv2_100 / 130 / 160: the same, with the first GhostModule of every
//   block from the third on a GhostModuleV2 (DFC attention: a gate from a
//   pooled 1x5 / 5x1 depthwise branch);
// - ghostnetv3_050 / 100 / 130 / 160: the training-time re-parameterisable
//   form (GhostModuleV3, GhostBottleneckV3: three conv + BN branches, a 1x1
//   scale branch and a BN skip, summed), its GhostModuleV3 "shortcut" mode
//   from the third block on. reparameterize() folds it as timm's
//   reparameterize_model (GhostBottleneckV3.reparameterize, then
//   GhostModuleV3.reparameterize / switch_to_deploy on ghost1 and ghost2):
//   each GhostModuleV3's branches into primary_conv (conv + act) and
//   cheap_operation (conv + act), each strided block's depthwise branches
//   into conv_dw, with timm's keys in timm's order; GhostNet and GhostNetV2
//   have nothing to fold (0).
// A final 1x1 ConvBnAct stage, then timm's head: global pool, conv_head (1x1
// to 1280, bias), ReLU, flatten, dropout, classifier.
//
// Supported: num_classes (0: no classifier), in_chans, drop_rate (dropout
// before the classifier; timm's create_model default is 0.2, train.py passes
// --drop, 0 unless set), global_pool (pools keeping the width: not
// catavgmax, as timm asserts), --model-kwargs output_stride (32 only, as
// timm). timm's GhostNet takes no drop_path_rate: refused. timm leaves the
// init at PyTorch's defaults ("FIXME init"), as LibTorch's modules do.
#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>

#include "timm/base/error.hpp"
#include "timm/layers/activations.hpp"
#include "timm/layers/batch_norm.hpp"
#include "timm/layers/classifier.hpp"
#include "timm/layers/linear.hpp"
#include "timm/layers/norm_act.hpp"
#include "timm/layers/reparam.hpp"
#include "timm/layers/squeeze_excite.hpp"
#include "timm/models/features.hpp"
#include "timm/models/grad_checkpoint.hpp"
#include "timm/models/model.hpp"
#include "timm/plugin/plugin.hpp"

namespace timm::ghostnet {
namespace {

namespace nn = torch::nn;

// timm 1.0.31's default pretrained tag of each model (the first tag of its
// default_cfgs); the others are untrained in timm.
const std::map<std::string, std::string> kDefaultTags = {{"ghostnet_100", "in1k"},
                                                         {"ghostnetv2_100", "in1k"},
                                                         {"ghostnetv2_130", "in1k"},
                                                         {"ghostnetv2_160", "in1k"},
                                                         {"ghostnetv3_100", "in1k"}};

const std::vector<std::string> kKnownKwargs = {"output_stride"};

enum class Version { kV1, kV2, kV3 };

// A bias-free (unless `bias`) Conv2d with explicit (h, w) kernel and padding, as timm's nn.Conv2d calls.
nn::Conv2d conv2d(int64_t in, int64_t out, std::vector<int64_t> kernel, int64_t stride, std::vector<int64_t> padding,
                  int64_t groups = 1, bool bias = false) {
  return nn::Conv2d(nn::Conv2dOptions(in, out, kernel).stride(stride).padding(padding).groups(groups).bias(bias));
}

nn::Conv2d conv2d(int64_t in, int64_t out, int64_t kernel, int64_t stride, int64_t padding, int64_t groups = 1,
                  bool bias = false) {
  return conv2d(in, out, {kernel, kernel}, stride, {padding, padding}, groups, bias);
}

// timm's GhostModule / GhostModuleV2 primary_conv and cheap_operation:
// nn.Sequential(conv, BatchNorm2d, act) (act "identity" for nn.Identity).
// Here and elsewhere in this file an act is in place where timm builds it with
// inplace=True: its input is always a fresh conv, norm or sum output.
nn::Sequential conv_bn_act(nn::Conv2d conv, int64_t out, const std::string& act) {
  nn::Sequential seq;
  seq->push_back(std::move(conv));
  seq->push_back(layers::BatchNorm2d(out));
  seq->push_back(layers::create_act(act, /*inplace=*/true));
  return seq;
}

// timm's DFC attention branch (GhostModuleV2 / V3 short_conv): conv, BN,
// depthwise 1x5, BN, depthwise 5x1, BN.
nn::Sequential short_conv_seq(int64_t in, int64_t out) {
  nn::Sequential seq;
  seq->push_back(conv2d(in, out, 1, 1, 0));
  seq->push_back(layers::BatchNorm2d(out));
  seq->push_back(conv2d(out, out, {1, 5}, 1, {0, 2}, out));
  seq->push_back(layers::BatchNorm2d(out));
  seq->push_back(conv2d(out, out, {5, 1}, 1, {2, 0}, out));
  seq->push_back(layers::BatchNorm2d(out));
  return seq;
}

// `out` (N, C, H, W) times the sigmoid of the DFC branch on the 2x2-pooled
// input, upsampled (nearest) to out's size.
at::Tensor dfc_gate(nn::Sequential& short_conv, const at::Tensor& input, const at::Tensor& out) {
  const at::Tensor res = short_conv->forward(at::avg_pool2d(input, {2, 2}, {2, 2}));
  return out * at::upsample_nearest2d(at::sigmoid(res), {out.size(2), out.size(3)});
}

// A ghost block's shortcut where the shape changes: depthwise conv (strided),
// BN, 1x1 conv, BN.
nn::Sequential projection_shortcut(int64_t in, int64_t out, int64_t kernel, int64_t stride) {
  nn::Sequential seq;
  seq->push_back(conv2d(in, in, kernel, stride, (kernel - 1) / 2, in));
  seq->push_back(layers::BatchNorm2d(in));
  seq->push_back(conv2d(in, out, 1, 1, 0));
  seq->push_back(layers::BatchNorm2d(out));
  return seq;
}

// timm's _efficientnet_blocks.ConvBnAct as GhostNet builds it: conv (explicit
// padding, bias-free), bn1 (BatchNormAct2d, ReLU or no act).
class ConvBnActImpl : public nn::Module {
 public:
  ConvBnActImpl(int64_t in, int64_t out, int64_t kernel, int64_t stride, int64_t padding, int64_t groups,
                bool apply_act) {
    conv = register_module("conv", conv2d(in, out, kernel, stride, padding, groups));
    bn1 = register_module("bn1", layers::BatchNormAct2d(layers::BatchNormAct2dOptions(out).apply_act(apply_act)));
  }

  at::Tensor forward(const at::Tensor& x) { return bn1(conv(x)); }

  nn::Conv2d conv{nullptr};
  layers::BatchNormAct2d bn1{nullptr};
};
TORCH_MODULE(ConvBnAct);

// timm's _efficientnet_blocks.SqueezeExcite with GhostNet's _SE_LAYER
// settings: mean, conv_reduce (to make_divisible(chs * ratio, 4)), ReLU,
// conv_expand, hard-sigmoid gate.
class SqueezeExciteImpl : public nn::Module {
 public:
  SqueezeExciteImpl(int64_t channels, double rd_ratio) {
    const int64_t rd = layers::make_divisible(static_cast<double>(channels) * rd_ratio, 4);
    conv_reduce = register_module("conv_reduce", conv2d(channels, rd, 1, 1, 0, 1, /*bias=*/true));
    act1 = register_module("act1", layers::create_act("relu", /*inplace=*/true));
    conv_expand = register_module("conv_expand", conv2d(rd, channels, 1, 1, 0, 1, /*bias=*/true));
    gate = register_module("gate", layers::create_act("hard_sigmoid"));
  }

  at::Tensor forward(const at::Tensor& x) {
    const at::Tensor s = conv_expand(act1(conv_reduce(x.mean({2, 3}, /*keepdim=*/true))));
    return x * gate(s);
  }

  nn::Conv2d conv_reduce{nullptr}, conv_expand{nullptr};
  layers::Activation act1{nullptr}, gate{nullptr};
};
TORCH_MODULE(SqueezeExcite);

// timm's GhostModule (ratio 2, 1x1 primary conv, 3x3 cheap conv), or with
// `attn` its GhostModuleV2 (the DFC gate on the output).
class GhostModuleImpl : public nn::Module {
 public:
  GhostModuleImpl(int64_t in, int64_t out, const std::string& act, bool attn) : out_chs_(out) {
    const int64_t init_chs = (out + 1) / 2;  // ceil(out / ratio)
    const int64_t new_chs = init_chs;        // init_chs * (ratio - 1)
    primary_conv = register_module("primary_conv", conv_bn_act(conv2d(in, init_chs, 1, 1, 0), init_chs, act));
    cheap_operation =
        register_module("cheap_operation", conv_bn_act(conv2d(init_chs, new_chs, 3, 1, 1, init_chs), new_chs, act));
    if (attn) short_conv = register_module("short_conv", short_conv_seq(in, out));
  }

  at::Tensor forward(const at::Tensor& x) {
    const at::Tensor x1 = primary_conv->forward(x);
    const at::Tensor x2 = cheap_operation->forward(x1);
    const at::Tensor out = at::cat({x1, x2}, 1).slice(1, 0, out_chs_);
    return short_conv ? dfc_gate(short_conv, x, out) : out;
  }

  nn::Sequential primary_conv{nullptr}, cheap_operation{nullptr}, short_conv{nullptr};

 private:
  int64_t out_chs_;
};
TORCH_MODULE(GhostModule);

nn::ModuleList conv_branches(std::vector<ConvBnAct>& branches, int64_t in, int64_t out, int64_t kernel, int64_t stride,
                             int64_t padding, int64_t groups) {
  nn::ModuleList list;
  for (int i = 0; i < 3; ++i) {
    branches.push_back(ConvBnAct(in, out, kernel, stride, padding, groups, /*apply_act=*/false));
    list->push_back(branches.back());
  }
  return list;
}

// timm's _get_kernel_bias_* over the conv branches (summed in order), then
// `scale` (a 1x1 ConvBnAct padded to the branches' kernel, when given) and
// the identity BatchNorm `skip` (when given), each with its running statistics.
layers::ConvWeights fuse_branches(const std::vector<ConvBnAct>& branches, ConvBnAct scale = nullptr,
                                  layers::BatchNorm2d skip = nullptr) {
  layers::ConvWeights fused;
  for (ConvBnAct branch : branches) fused += layers::fuse_bn(branch->conv->weight, *branch->bn1);
  const auto& options = branches.front()->conv->options;
  const int64_t kernel = (*options.kernel_size())[0];
  if (scale) {
    layers::ConvWeights s = layers::fuse_bn(scale->conv->weight, *scale->bn1);
    s.weight = layers::pad_kernel_to(s.weight, kernel);
    fused += s;
  }
  if (skip) {
    const at::Tensor eye =
        layers::identity_kernel(options.in_channels(), options.groups(), kernel, skip->weight.options());
    fused += layers::fuse_bn(eye, *skip);
  }
  return fused;
}

// Unregisters `names` of `module` (those registered) and registers them again
// in that order, after its other children: timm's order of the children that a
// fold leaves in place.
void register_last(nn::Module& module, const std::vector<std::string>& names) {
  for (const auto& name : names) {
    const auto children = module.named_children();
    if (!children.contains(name)) continue;
    const std::shared_ptr<nn::Module> child = children[name];
    module.unregister_module(name);
    module.register_module(name, child);
  }
}

// timm's GhostModuleV3 in training form (infer_mode False): three 1x1
// ConvBnAct branches summed, act; the cheap part the sum of a 1x1 scale
// branch, a BN skip and three depthwise 3x3 branches, act. "shortcut" mode
// slices to out_chs and applies the DFC gate; "original" returns the
// concatenation as is. Folded (reparameterize()): primary_conv and
// cheap_operation, timm's deploy form.
class GhostModuleV3Impl : public nn::Module {
 public:
  GhostModuleV3Impl(int64_t in, int64_t out, const std::string& act, bool shortcut) : out_chs_(out) {
    const int64_t init_chs = (out + 1) / 2;
    const int64_t new_chs = init_chs;
    primary_rpr_conv = register_module("primary_rpr_conv", conv_branches(primary_, in, init_chs, 1, 1, 0, 1));
    primary_activation = register_module("primary_activation", layers::create_act(act, /*inplace=*/true));
    cheap_rpr_skip = register_module("cheap_rpr_skip", layers::BatchNorm2d(init_chs));
    cheap_rpr_conv =
        register_module("cheap_rpr_conv", conv_branches(cheap_, init_chs, new_chs, 3, 1, 1, /*groups=*/init_chs));
    cheap_rpr_scale = register_module("cheap_rpr_scale", ConvBnAct(init_chs, new_chs, 1, 1, 0, init_chs, false));
    cheap_activation = register_module("cheap_activation", layers::create_act(act, /*inplace=*/true));
    if (shortcut) short_conv = register_module("short_conv", short_conv_seq(in, out));
  }

  at::Tensor forward(const at::Tensor& x) {
    at::Tensor x1, x2;
    if (primary_conv) {
      x1 = primary_conv->forward(x);
      x2 = cheap_operation->forward(x1);
    } else {
      x1 = primary_[0](x);
      for (size_t i = 1; i < primary_.size(); ++i) x1 = x1 + primary_[i](x);
      x1 = primary_activation(x1);
      x2 = cheap_rpr_scale(x1) + cheap_rpr_skip(x1);
      for (auto& branch : cheap_) x2 = x2 + branch(x1);
      x2 = cheap_activation(x2);
    }
    const at::Tensor out = at::cat({x1, x2}, 1);
    if (!short_conv) return out;
    return dfc_gate(short_conv, x, out.slice(1, 0, out_chs_));
  }

  // timm's GhostModuleV3.reparameterize (switch_to_deploy): the three
  // primary branches into primary_conv = Sequential(conv, primary_activation);
  // the cheap branches, the padded 1x1 scale and the BN skip into
  // cheap_operation = Sequential(conv, cheap_activation). They take timm's
  // place, before the activations and short_conv; the branches are removed.
  // False when already folded.
  bool reparameterize() {
    if (primary_conv) return false;
    c10::NoGradGuard no_grad;
    const layers::ConvWeights primary = fuse_branches(primary_);
    const layers::ConvWeights cheap = fuse_branches(cheap_, cheap_rpr_scale, cheap_rpr_skip);
    for (const char* name : {"primary_rpr_conv", "cheap_rpr_skip", "cheap_rpr_conv", "cheap_rpr_scale"}) {
      unregister_module(name);
    }
    primary_conv = nn::Sequential(layers::make_reparam_conv(*primary_.front()->conv, primary), primary_activation);
    cheap_operation = nn::Sequential(layers::make_reparam_conv(*cheap_.front()->conv, cheap), cheap_activation);
    register_module("primary_conv", primary_conv);
    register_module("cheap_operation", cheap_operation);
    register_last(*this, {"primary_activation", "cheap_activation", "short_conv"});
    primary_rpr_conv = cheap_rpr_conv = nullptr;
    cheap_rpr_skip = nullptr;
    cheap_rpr_scale = nullptr;
    primary_.clear();
    cheap_.clear();
    return true;
  }

  nn::ModuleList primary_rpr_conv{nullptr}, cheap_rpr_conv{nullptr};
  layers::Activation primary_activation{nullptr}, cheap_activation{nullptr};
  layers::BatchNorm2d cheap_rpr_skip{nullptr};
  ConvBnAct cheap_rpr_scale{nullptr};
  nn::Sequential short_conv{nullptr};
  nn::Sequential primary_conv{nullptr}, cheap_operation{nullptr};  // once folded

 private:
  int64_t out_chs_;
  std::vector<ConvBnAct> primary_, cheap_;
};
TORCH_MODULE(GhostModuleV3);

struct BlockArgs {
  int64_t in_chs = 0;
  int64_t mid_chs = 0;
  int64_t out_chs = 0;
  int64_t kernel = 3;
  int64_t stride = 1;
  double se_ratio = 0.0;
  bool attn = false;  // v2 "attn" / v3 "shortcut" mode of ghost1
};

// timm's GhostBottleneck (GhostNet, GhostNetV2).
class GhostBottleneckImpl : public nn::Module {
 public:
  explicit GhostBottleneckImpl(const BlockArgs& a) {
    ghost1 = register_module("ghost1", GhostModule(a.in_chs, a.mid_chs, "relu", a.attn));
    if (a.stride > 1) {
      conv_dw =
          register_module("conv_dw", conv2d(a.mid_chs, a.mid_chs, a.kernel, a.stride, (a.kernel - 1) / 2, a.mid_chs));
      bn_dw = register_module("bn_dw", layers::BatchNorm2d(a.mid_chs));
    }
    if (a.se_ratio > 0.0) se = register_module("se", SqueezeExcite(a.mid_chs, a.se_ratio));
    ghost2 = register_module("ghost2", GhostModule(a.mid_chs, a.out_chs, "identity", false));
    if (a.in_chs != a.out_chs || a.stride != 1) {
      shortcut = register_module("shortcut", projection_shortcut(a.in_chs, a.out_chs, a.kernel, a.stride));
    }
  }

  at::Tensor forward(const at::Tensor& input) {
    at::Tensor x = ghost1(input);
    if (conv_dw) x = bn_dw(conv_dw(x));
    if (se) x = se(x);
    x = ghost2(x);
    return x + (shortcut ? shortcut->forward(input) : input);
  }

  GhostModule ghost1{nullptr}, ghost2{nullptr};
  nn::Conv2d conv_dw{nullptr};
  layers::BatchNorm2d bn_dw{nullptr};
  SqueezeExcite se{nullptr};
  nn::Sequential shortcut{nullptr};
};
TORCH_MODULE(GhostBottleneck);

// timm's GhostBottleneckV3 in training form: where the block strides, the
// depthwise conv is a strided 1x1 scale branch plus three depthwise
// ConvBnAct branches, summed; folded, one biased conv_dw.
class GhostBottleneckV3Impl : public nn::Module {
 public:
  explicit GhostBottleneckV3Impl(const BlockArgs& a) {
    ghost1 = register_module("ghost1", GhostModuleV3(a.in_chs, a.mid_chs, "relu", a.attn));
    if (a.stride > 1) {
      dw_rpr_conv = register_module(
          "dw_rpr_conv", conv_branches(dw_, a.mid_chs, a.mid_chs, a.kernel, a.stride, (a.kernel - 1) / 2, a.mid_chs));
      dw_rpr_scale = register_module("dw_rpr_scale", ConvBnAct(a.mid_chs, a.mid_chs, 1, 2, 0, a.mid_chs, false));
    }
    if (a.se_ratio > 0.0) se = register_module("se", SqueezeExcite(a.mid_chs, a.se_ratio));
    ghost2 = register_module("ghost2", GhostModuleV3(a.mid_chs, a.out_chs, "identity", false));
    if (a.in_chs != a.out_chs || a.stride != 1) {
      shortcut = register_module("shortcut", projection_shortcut(a.in_chs, a.out_chs, a.kernel, a.stride));
    }
  }

  at::Tensor forward(const at::Tensor& input) {
    at::Tensor x = ghost1(input);
    if (conv_dw) {
      x = conv_dw(x);
    } else if (dw_rpr_scale) {
      at::Tensor x1 = dw_rpr_scale(x);
      for (auto& branch : dw_) x1 = x1 + branch(x);
      x = x1;
    }
    if (se) x = se(x);
    x = ghost2(x);
    return x + (shortcut ? shortcut->forward(input) : input);
  }

  // timm's GhostBottleneckV3.reparameterize (switch_to_deploy): a strided
  // block's three depthwise branches and the padded 1x1 scale branch into
  // conv_dw (biased; timm's bn_dw is an Identity), which takes timm's place
  // before ghost1; the branches are removed. ghost1 and ghost2 are folded by
  // the walk, not here. False for a block without stride (timm's no-op) and
  // when already folded.
  bool reparameterize() {
    if (!dw_rpr_scale) return false;
    c10::NoGradGuard no_grad;
    const layers::ConvWeights fused = fuse_branches(dw_, dw_rpr_scale);
    unregister_module("dw_rpr_conv");
    unregister_module("dw_rpr_scale");
    conv_dw = register_module("conv_dw", layers::make_reparam_conv(*dw_.front()->conv, fused));
    register_last(*this, {"ghost1", "se", "ghost2", "shortcut"});
    dw_rpr_conv = nullptr;
    dw_rpr_scale = nullptr;
    dw_.clear();
    return true;
  }

  GhostModuleV3 ghost1{nullptr}, ghost2{nullptr};
  nn::ModuleList dw_rpr_conv{nullptr};
  ConvBnAct dw_rpr_scale{nullptr};
  nn::Conv2d conv_dw{nullptr};  // once folded
  SqueezeExcite se{nullptr};
  nn::Sequential shortcut{nullptr};

 private:
  std::vector<ConvBnAct> dw_;
};
TORCH_MODULE(GhostBottleneckV3);

// One block row of timm's cfgs: k, t (expansion channels), c, SE ratio, s.
struct BlockCfg {
  int64_t kernel;
  int64_t exp_size;
  int64_t chs;
  double se_ratio;
  int64_t stride;
};

// timm's _create_ghostnet cfgs: nine stages of one or more blocks.
const std::vector<std::vector<BlockCfg>>& ghostnet_cfgs() {
  static const std::vector<std::vector<BlockCfg>> cfgs = {
      {{3, 16, 16, 0.0, 1}},
      {{3, 48, 24, 0.0, 2}},
      {{3, 72, 24, 0.0, 1}},
      {{5, 72, 40, 0.25, 2}},
      {{5, 120, 40, 0.25, 1}},
      {{3, 240, 80, 0.0, 2}},
      {{3, 200, 80, 0.0, 1},
       {3, 184, 80, 0.0, 1},
       {3, 184, 80, 0.0, 1},
       {3, 480, 112, 0.25, 1},
       {3, 672, 112, 0.25, 1}},
      {{5, 672, 160, 0.25, 2}},
      {{5, 960, 160, 0.0, 1}, {5, 960, 160, 0.25, 1}, {5, 960, 160, 0.0, 1}, {5, 960, 160, 0.25, 1}},
  };
  return cfgs;
}

// One registered architecture.
struct GhostNetSpec {
  std::string name;
  double width = 1.0;
  Version version = Version::kV1;
};

class GhostNetImpl : public ClassifierImpl {
 public:
  GhostNetImpl(const GhostNetSpec& spec, const ModelArgs& args)
      : num_classes_(args.num_classes), drop_rate_(args.drop_rate), pool_type_(args.global_pool.value_or("avg")) {
    validate_model_args(spec.name, args, kKnownKwargs);
    if (args.drop_path_rate) {
      throw UsageError(spec.name +
                       ": drop_path_rate is not supported (timm's GhostNet has no drop path and refuses it)");
    }
    if (const auto os = model_kwarg_double(spec.name, args, "output_stride"); os && *os != 32.0) {
      throw UsageError(spec.name + ": output_stride=" + args.kwargs.at("output_stride") +
                       ": only 32 is supported (timm's GhostNet asserts output_stride == 32, no dilation)");
    }
    if (layers::adaptive_pool_feat_mult(pool_type_) != 1) {
      throw UsageError(spec.name + ": global_pool=" + pool_type_ +
                       ": pooling that changes the pooled width is not supported (timm's GhostNet asserts "
                       "feat_mult() == 1)");
    }
    cfg_.input_size = {3, 224, 224};
    cfg_.interpolation = "bicubic";
    cfg_.crop_pct = 0.875;
    cfg_.crop_mode = "center";
    cfg_.first_conv = "conv_stem";
    cfg_.classifier = "classifier";
    cfg_.hf_hub_id = timm_hub_id(spec.name, kDefaultTags);

    const double width = spec.width;
    const int64_t stem_chs = layers::make_divisible(16.0 * width, 4);
    conv_stem = register_module("conv_stem", conv2d(args.in_chans, stem_chs, 3, 2, 1));
    feature_info_.push_back({stem_chs, 2, "conv_stem"});
    stage_ends_.push_back(-1);
    bn1 = register_module("bn1", layers::BatchNorm2d(stem_chs));
    act1 = register_module("act1", layers::create_act("relu", /*inplace=*/true));

    blocks = register_module("blocks", nn::ModuleList());
    int64_t prev_chs = stem_chs, layer_idx = 0, net_stride = 2, exp_size = 0;
    const auto& cfgs = ghostnet_cfgs();
    for (size_t stage_idx = 0; stage_idx < cfgs.size(); ++stage_idx) {
      nn::Sequential stage;
      int64_t s = 1;
      for (const BlockCfg& b : cfgs[stage_idx]) {
        s = b.stride;
        exp_size = b.exp_size;
        BlockArgs a;
        a.in_chs = prev_chs;
        a.out_chs = layers::make_divisible(static_cast<double>(b.chs) * width, 4);
        a.mid_chs = layers::make_divisible(static_cast<double>(b.exp_size) * width, 4);
        a.kernel = b.kernel;
        a.stride = b.stride;
        a.se_ratio = b.se_ratio;
        a.attn = spec.version != Version::kV1 && layer_idx > 1;
        if (spec.version == Version::kV3) {
          stage->push_back(GhostBottleneckV3(a));
        } else {
          stage->push_back(GhostBottleneck(a));
        }
        prev_chs = a.out_chs;
        ++layer_idx;
      }
      if (s > 1) {
        net_stride *= 2;
        feature_info_.push_back({prev_chs, net_stride, "blocks." + std::to_string(stage_idx)});
        stage_ends_.push_back(static_cast<int64_t>(stage_idx));
      }
      blocks->push_back(stage);
      stages_.push_back(stage);
    }
    const int64_t out_chs = layers::make_divisible(static_cast<double>(exp_size) * width, 4);
    nn::Sequential final_stage;
    final_stage->push_back(ConvBnAct(prev_chs, out_chs, 1, 1, 0, 1, /*apply_act=*/true));
    blocks->push_back(final_stage);
    stages_.push_back(final_stage);

    global_pool =
        register_module("global_pool", layers::SelectAdaptivePool2d(layers::SelectAdaptivePool2dOptions(pool_type_)));
    conv_head = register_module("conv_head", conv2d(out_chs, kHeadHiddenSize, 1, 1, 0, 1, /*bias=*/true));
    act2 = register_module("act2", layers::create_act("relu", /*inplace=*/true));
    if (num_classes_ > 0) classifier = register_module("classifier", layers::Linear(kHeadHiddenSize, num_classes_));
  }

  // timm's forward_features: conv_stem, bn1, act1, every block of every
  // stage (the final ConvBnAct included), (N, C, H, W); with grad
  // checkpointing each block checkpointed (checkpoint_seq(flatten=True)).
  at::Tensor forward_features(at::Tensor input) override {
    at::Tensor x = act1(bn1(conv_stem(input)));
    if (grad_checkpointing_) return checkpoint_seq(sequence_modules(stages_), x);
    for (auto& stage : stages_) x = stage->forward(x);
    return x;
  }

  // timm's feature_info: conv_stem (stride 2), then blocks.1 / 3 / 5 / 7, the stages that stride.
  std::vector<FeatureInfo> feature_info() const override { return feature_info_; }

  // timm's forward_intermediates: level 0 is conv_stem's output (before bn1
  // and act1), level l > 0 the output of stage stage_ends_[l]; the stages
  // after the last level (the final conv included) run unless stop_early
  // stops before the last level (NCHW only).
  Intermediates forward_intermediates(at::Tensor input,
                                      const IntermediatesOptions& options = IntermediatesOptions()) override {
    check_output_fmt(describe_model(*this), options.output_fmt(), {"NCHW"});
    const auto levels = static_cast<int64_t>(stage_ends_.size());
    const auto [take_indices, max_index] = feature_take_indices(levels, options.indices());
    std::vector<bool> take(stages_.size() + 1, false);
    for (const int64_t l : take_indices) take[static_cast<size_t>(stage_ends_[static_cast<size_t>(l)] + 1)] = true;
    const int64_t max_stage = stage_ends_[static_cast<size_t>(max_index)];
    const size_t steps =
        !options.stop_early() || max_stage == stage_ends_.back() ? stages_.size() : static_cast<size_t>(max_stage + 1);
    Intermediates out;
    at::Tensor x = conv_stem(input);
    if (take[0]) out.intermediates.push_back(x);
    x = act1(bn1(x));
    for (size_t i = 0; i < steps; ++i) {
      x = grad_checkpointing_ ? checkpoint_seq(sequence_modules(stages_[i]), x) : stages_[i]->forward(x);
      if (take[i + 1]) out.intermediates.push_back(x);
    }
    if (!options.intermediates_only()) out.final = x;
    return out;
  }

  // timm's forward_head: pool, conv_head, act2, flatten (when pooling),
  // dropout; pre_logits stops there, else the classifier.
  at::Tensor forward_head(at::Tensor x, bool pre_logits = false) override {
    x = act2(conv_head(global_pool(x)));
    if (!pool_type_.empty()) x = x.flatten(1);
    if (drop_rate_ > 0.0) x = at::dropout(x, drop_rate_, is_training());
    return pre_logits || !classifier ? x : classifier(x);
  }

  at::Tensor forward(at::Tensor x) override { return forward_head(forward_features(x)); }
  void set_grad_checkpointing(bool enable) override { grad_checkpointing_ = enable; }
  // timm's reparameterize_model walk: each strided GhostBottleneckV3, then
  // its ghost1 and ghost2 (and those of the blocks without stride); nothing
  // in GhostNet and GhostNetV2.
  int64_t reparameterize() override {
    return layers::reparameterize_children(*this, [](nn::Module& module) {
      if (auto* block = module.as<GhostBottleneckV3Impl>()) return block->reparameterize();
      if (auto* ghost = module.as<GhostModuleV3Impl>()) return ghost->reparameterize();
      return false;
    });
  }
  int64_t num_classes() const override { return num_classes_; }
  const PretrainedCfg& pretrained_cfg() const override { return cfg_; }
  GroupMatcher group_matcher(bool coarse) const override {
    return {{"stem", {{R"(^conv_stem|bn1)", std::nullopt}}},
            {"blocks",
             {{coarse ? R"(^blocks\.(\d+))" : R"(^blocks\.(\d+)\.(\d+))", std::nullopt},
              {R"(conv_head)", std::vector<double>{99999}}}}};
  }

  nn::Conv2d conv_stem{nullptr}, conv_head{nullptr};
  layers::BatchNorm2d bn1{nullptr};
  layers::Activation act1{nullptr}, act2{nullptr};
  // timm's nn.Sequential of stage Sequentials; a ModuleList here (LibTorch
  // cannot nest Sequentials), the same keys, run stage by stage.
  nn::ModuleList blocks{nullptr};
  layers::SelectAdaptivePool2d global_pool{nullptr};
  layers::Linear classifier{nullptr};

 private:
  static constexpr int64_t kHeadHiddenSize = 1280;

  PretrainedCfg cfg_;
  int64_t num_classes_;
  double drop_rate_;
  std::string pool_type_;
  std::vector<nn::Sequential> stages_;
  std::vector<FeatureInfo> feature_info_;
  std::vector<int64_t> stage_ends_;
  bool grad_checkpointing_ = false;
};

std::vector<GhostNetSpec> ghostnet_specs() {
  return {
      {"ghostnet_050", 0.5, Version::kV1},   {"ghostnet_100", 1.0, Version::kV1},
      {"ghostnet_130", 1.3, Version::kV1},   {"ghostnetv2_100", 1.0, Version::kV2},
      {"ghostnetv2_130", 1.3, Version::kV2}, {"ghostnetv2_160", 1.6, Version::kV2},
      {"ghostnetv3_050", 0.5, Version::kV3}, {"ghostnetv3_100", 1.0, Version::kV3},
      {"ghostnetv3_130", 1.3, Version::kV3}, {"ghostnetv3_160", 1.6, Version::kV3},
  };
}

std::string describe(const GhostNetSpec& spec) {
  std::string text = "GhostNet";
  if (spec.version == Version::kV2) text += "V2";
  if (spec.version == Version::kV3) text += "V3 (training form)";
  text += " (width ";
  text += std::to_string(spec.width).substr(0, 3);
  text += "x)";
  return text;
}

}  // namespace
}  // namespace timm::ghostnet

TIMM_PLUGIN("ghostnet") {
  for (const auto& spec : timm::ghostnet::ghostnet_specs()) {
    registrar.add_model(spec.name, timm::ghostnet::describe(spec),
                        [spec](const timm::ModelArgs& args) -> timm::ModelPtr {
                          return std::make_shared<timm::ghostnet::GhostNetImpl>(spec, args);
                        });
  }
}
