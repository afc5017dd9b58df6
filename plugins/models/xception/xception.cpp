// Xception models, with timm's module names so state_dict keys equal timm's:
// the Aligned Xceptions of timm/models/xception_aligned.py (xception41,
// xception65, xception71, and the pre-activation xception41p, xception65p)
// and the original Xception of timm/models/xception.py (legacy_xception).
//
// Aligned Xception (XceptionAligned):
// - stem: "0" ConvNormAct 3x3 / 2 to 32, "1" ConvNormAct 3x3 to 64 (the
//   pre-activation models: a plain 3x3 conv);
// - blocks: XceptionModule (an optional 1x1 ConvNormAct shortcut without act;
//   stack act1, conv1, act2, conv2, act3, conv3 of SeparableConv2d (conv_dw
//   3x3 depthwise, bn_dw, conv_pw 1x1, bn_pw, ReLU after each BN only when
//   the block does not start with ReLU), the last at the block stride; drop
//   path, residual add unless no_skip) or PreXceptionModule (an optional 1x1
//   conv shortcut, norm a BatchNormAct2d applied first, stack conv1..3 of
//   PreSeparableConv2d (norm, a BatchNormAct2d, except in conv1; conv_dw,
//   conv_pw), residual add of the normed input through the shortcut);
// - act: ReLU after the blocks for the pre-activation models;
// - head: timm's ClassifierHead (global_pool, dropout at drop_rate, fc).
// BatchNorm eps 1e-3 but in xception41p (1e-5). No init of its own: torch's
// default init of every layer, as timm's.
//
// legacy_xception (Xception): conv1 3x3 / 2 and conv2 3x3 without padding,
// each with BN and ReLU; block1..12 (skip 1x1 conv + skipbn where the shape
// changes; rep a Sequential of ReLU, SeparableConv2d (conv1 depthwise 3x3,
// pointwise 1x1), BatchNorm2d per repetition, then a 3x3 / stride max pool
// for strided blocks); conv3, bn3, act3, conv4, bn4, act4; global_pool,
// dropout, fc. timm's init: convs kaiming_normal (fan_out, relu), BN 1 / 0,
// fc torch's default.
//
// Supported: num_classes (0: no fc), in_chans, drop_rate, global_pool; for
// the aligned models drop_path_rate (per-block linear schedule) and the timm
// keyword output_stride (8, 16 or 32: later blocks dilated) as
// --model-kwargs, and set_grad_checkpointing (each block checkpointed, as
// timm's). Refused as timm refuses them: other keywords, an output_stride
// outside (8, 16, 32), and for legacy_xception drop_path_rate (a TypeError
// in timm), any keyword, and grad checkpointing (timm asserts it is not
// enabled).
#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <torch/nn/init.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/container/any.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/pooling.h>

#include "timm/base/error.hpp"
#include "timm/layers/activations.hpp"
#include "timm/layers/batch_norm.hpp"
#include "timm/layers/classifier.hpp"
#include "timm/layers/drop_path.hpp"
#include "timm/layers/norm_act.hpp"
#include "timm/models/features.hpp"
#include "timm/models/grad_checkpoint.hpp"
#include "timm/models/model.hpp"
#include "timm/plugin/plugin.hpp"

namespace timm::xception {
namespace {

namespace nn = torch::nn;

// timm 1.0.31's default pretrained tag of each aligned model (the first tag
// of its default_cfgs); legacy_xception's weights are a URL, not on the hub.
const std::map<std::string, std::string> kDefaultTags = {
    {"xception41", "tf_in1k"},   {"xception65", "ra3_in1k"},  {"xception71", "tf_in1k"},
    {"xception41p", "ra3_in1k"}, {"xception65p", "ra3_in1k"},
};

// The --model-kwargs keys the aligned models take.
const std::vector<std::string> kAlignedKwargs = {"output_stride"};

// One entry of timm's block_cfg.
struct AlignedBlockCfg {
  int64_t in_chs = 0;
  std::array<int64_t, 3> out_chs{};
  int64_t stride = 1;
  bool no_skip = false;
  bool start_with_relu = true;
};

// One registered aligned model.
struct AlignedSpec {
  std::string name;
  std::vector<AlignedBlockCfg> blocks;
  bool preact = false;
  double eps = 1e-3;
  double crop_pct = 0.903;
};

// create_conv2d's arguments of a depthwise conv (groups = channels).
layers::Conv2dArgs depthwise_args(int64_t stride, int64_t dilation) {
  layers::Conv2dArgs a;
  a.stride = stride;
  a.dilation = dilation;
  a.depthwise = true;
  return a;
}

layers::Conv2dArgs strided_args(int64_t stride) {
  layers::Conv2dArgs a;
  a.stride = stride;
  return a;
}

layers::BatchNorm2d batch_norm(int64_t channels, double eps) {
  return layers::BatchNorm2d(nn::BatchNormOptions(channels).eps(eps).momentum(0.1));
}

// timm's xception_aligned SeparableConv2d: conv_dw (3x3 depthwise), bn_dw,
// act_dw, conv_pw (1x1), bn_pw, act_pw; the acts ReLU or identity.
class AlignedSeparableConv2dImpl : public nn::Module {
 public:
  AlignedSeparableConv2dImpl(int64_t in_chs, int64_t out_chs, int64_t stride, int64_t dilation, bool act, double eps)
      : act_(act) {
    conv_dw = register_module("conv_dw", layers::create_conv2d(in_chs, in_chs, 3, depthwise_args(stride, dilation)));
    bn_dw = register_module("bn_dw", batch_norm(in_chs, eps));
    conv_pw = register_module("conv_pw", layers::create_conv2d(in_chs, out_chs, 1));
    bn_pw = register_module("bn_pw", batch_norm(out_chs, eps));
  }

  at::Tensor forward(const at::Tensor& input) {
    at::Tensor x = bn_dw(conv_dw(input));
    if (act_) x.relu_();  // in place, as timm's act_dw / act_pw: fresh norm outputs
    x = bn_pw(conv_pw(x));
    return act_ ? x.relu_() : x;
  }

  nn::Conv2d conv_dw{nullptr}, conv_pw{nullptr};
  layers::BatchNorm2d bn_dw{nullptr}, bn_pw{nullptr};

 private:
  bool act_;
};
TORCH_MODULE(AlignedSeparableConv2d);

// timm's PreSeparableConv2d: norm (BatchNormAct2d with ReLU, identity
// without first_act), conv_dw (3x3 depthwise), conv_pw (1x1).
class PreSeparableConv2dImpl : public nn::Module {
 public:
  PreSeparableConv2dImpl(int64_t in_chs, int64_t out_chs, int64_t stride, int64_t dilation, bool first_act,
                         double eps) {
    if (first_act)
      norm = register_module("norm", layers::BatchNormAct2d(layers::BatchNormAct2dOptions(in_chs).eps(eps)));
    conv_dw = register_module("conv_dw", layers::create_conv2d(in_chs, in_chs, 3, depthwise_args(stride, dilation)));
    conv_pw = register_module("conv_pw", layers::create_conv2d(in_chs, out_chs, 1));
  }

  at::Tensor forward(const at::Tensor& input) {
    const at::Tensor x = norm ? norm(input) : input;
    return conv_pw(conv_dw(x));
  }

  layers::BatchNormAct2d norm{nullptr};
  nn::Conv2d conv_dw{nullptr}, conv_pw{nullptr};
};
TORCH_MODULE(PreSeparableConv2d);

// timm's XceptionModule (preact false) and PreXceptionModule (preact true),
// each with timm's children in timm's order.
class XceptionModuleImpl : public nn::Module {
 public:
  XceptionModuleImpl(const AlignedBlockCfg& b, int64_t stride, int64_t dilation, bool preact, double eps,
                     double drop_path_rate)
      : preact_(preact), no_skip_(b.no_skip) {
    const int64_t out = b.out_chs[2];
    const bool needs_shortcut = !b.no_skip && (out != b.in_chs || stride != 1);
    if (needs_shortcut && !preact) {
      shortcut = register_module(
          "shortcut",
          layers::ConvNormAct(layers::ConvNormActOptions(b.in_chs, out, 1).stride(stride).apply_act(false).eps(eps)));
    } else if (needs_shortcut) {
      shortcut_conv = register_module("shortcut", layers::create_conv2d(b.in_chs, out, 1, strided_args(stride)));
    }
    if (preact)
      norm = register_module("norm", layers::BatchNormAct2d(layers::BatchNormAct2dOptions(b.in_chs).eps(eps)));
    stack = nn::Sequential();
    int64_t in_chs = b.in_chs;
    for (size_t i = 0; i < 3; ++i) {
      const std::string n = std::to_string(i + 1);
      const int64_t conv_stride = i == 2 ? stride : 1;
      if (preact) {
        stack_list_.emplace_back(PreSeparableConv2d(in_chs, b.out_chs[i], conv_stride, dilation, i > 0, eps));
      } else {
        if (b.start_with_relu) {
          // timm's act_layer(inplace=i > 0): the first act reads the block input, the skip.
          stack_list_.emplace_back(layers::create_act("relu", /*inplace=*/i > 0));
          stack->push_back("act" + n, stack_list_.back());
        }
        stack_list_.emplace_back(
            AlignedSeparableConv2d(in_chs, b.out_chs[i], conv_stride, dilation, !b.start_with_relu, eps));
      }
      stack->push_back("conv" + n, stack_list_.back());
      in_chs = b.out_chs[i];
    }
    register_module("stack", stack);
    if (drop_path_rate > 0.0) drop_path = register_module("drop_path", layers::DropPath(drop_path_rate));
  }

  at::Tensor forward(const at::Tensor& input) {
    const at::Tensor x = preact_ ? norm(input) : input;
    return residual(stack->forward(x), x);
  }

  // timm's forward_with_tap: the block's output and the input to its last
  // (strided) separable conv, the feature tap.
  std::pair<at::Tensor, at::Tensor> forward_with_tap(const at::Tensor& input) {
    const at::Tensor x = preact_ ? norm(input) : input;
    at::Tensor tap = x;
    for (size_t i = 0; i + 1 < stack_list_.size(); ++i) tap = stack_list_[i].forward(tap);
    return {residual(stack_list_.back().forward(tap), x), tap};
  }

  layers::ConvNormAct shortcut{nullptr};  // XceptionModule's
  nn::Conv2d shortcut_conv{nullptr};      // PreXceptionModule's, registered as "shortcut"
  layers::BatchNormAct2d norm{nullptr};   // PreXceptionModule's
  nn::Sequential stack{nullptr};
  layers::DropPath drop_path{nullptr};

 private:
  at::Tensor residual(at::Tensor x, const at::Tensor& skip) {
    if (no_skip_) return x;
    at::Tensor s = skip;
    if (shortcut) s = shortcut(skip);
    if (shortcut_conv) s = shortcut_conv(skip);
    if (drop_path) x = drop_path(x);
    return x + s;
  }

  bool preact_;
  bool no_skip_;
  std::vector<nn::AnyModule> stack_list_;
};
TORCH_MODULE(XceptionModule);

// checkpoint() of a block's forward_with_tap: the output and the tap,
// flattened and concatenated into the one tensor checkpoint() returns, then
// split again, so the rerun rebuilds both (timm's checkpoint(blk.forward_with_tap, x)).
std::pair<at::Tensor, at::Tensor> checkpointed_tap(const std::shared_ptr<XceptionModuleImpl>& block,
                                                   const at::Tensor& x) {
  auto shapes = std::make_shared<std::pair<std::vector<int64_t>, std::vector<int64_t>>>();
  auto fn = [block, shapes](const at::Tensor& in) {
    auto [out, tap] = block->forward_with_tap(in);
    shapes->first = out.sizes().vec();
    shapes->second = tap.sizes().vec();
    return at::cat({out.reshape({-1}), tap.reshape({-1})});
  };
  const at::Tensor both = checkpoint(fn, x, block->parameters());
  int64_t out_numel = 1;
  for (const int64_t s : shapes->first) out_numel *= s;
  return {both.narrow(0, 0, out_numel).view(shapes->first),
          both.narrow(0, out_numel, both.numel() - out_numel).view(shapes->second)};
}

class XceptionAlignedImpl : public ClassifierImpl {
 public:
  XceptionAlignedImpl(const AlignedSpec& spec, const ModelArgs& args)
      : num_classes_(args.num_classes), preact_(spec.preact) {
    const std::string& name = spec.name;
    validate_model_args(name, args, kAlignedKwargs);
    int64_t output_stride = 32;
    if (const std::optional<double> os = model_kwarg_double(name, args, "output_stride")) {
      if (*os != 8.0 && *os != 16.0 && *os != 32.0) {
        throw UsageError(name + ": output_stride=" + args.kwargs.at("output_stride") +
                         ": expected 8, 16 or 32 (timm asserts output_stride in (8, 16, 32))");
      }
      output_stride = static_cast<int64_t>(*os);
    }
    cfg_.input_size = {3, 299, 299};
    cfg_.interpolation = "bicubic";
    cfg_.crop_pct = spec.crop_pct;
    cfg_.crop_mode = "center";
    cfg_.mean = {0.5, 0.5, 0.5};
    cfg_.std = {0.5, 0.5, 0.5};
    cfg_.first_conv = "stem.0.conv";
    cfg_.classifier = "head.fc";
    cfg_.hf_hub_id = timm_hub_id(name, kDefaultTags);

    const double eps = spec.eps;
    stem = nn::Sequential();
    stem->push_back("0", layers::ConvNormAct(layers::ConvNormActOptions(args.in_chans, 32, 3).stride(2).eps(eps)));
    if (preact_) {
      stem->push_back("1", layers::create_conv2d(32, 64, 3));
    } else {
      stem->push_back("1", layers::ConvNormAct(layers::ConvNormActOptions(32, 64, 3).eps(eps)));
    }
    register_module("stem", stem);

    const double drop_path_rate = args.drop_path_rate.value_or(0.0);
    const auto num_blocks = static_cast<int64_t>(spec.blocks.size());
    int64_t curr_dilation = 1;
    int64_t curr_stride = 2;
    blocks = nn::Sequential();
    for (int64_t i = 0; i < num_blocks; ++i) {
      const AlignedBlockCfg& b = spec.blocks[static_cast<size_t>(i)];
      // timm's drop_path_rate * net_block_idx / (net_num_blocks - 1), in that order.
      const double block_dpr = drop_path_rate * static_cast<double>(i) / static_cast<double>(num_blocks - 1);
      const int64_t dilation = curr_dilation;
      int64_t stride = b.stride;
      if (stride > 1) {
        std::string module = "blocks." + std::to_string(i);
        module += preact_ ? ".stack.conv2" : ".stack.act3";
        feature_info_.push_back({b.out_chs[1], curr_stride, module});
        feature_ends_.push_back(i);
        const int64_t next_stride = curr_stride * stride;
        if (next_stride > output_stride) {
          curr_dilation *= stride;
          stride = 1;
        } else {
          curr_stride = next_stride;
        }
      }
      XceptionModule block(b, stride, dilation, preact_, eps, block_dpr);
      block_list_.push_back(block);
      blocks->push_back(block);
    }
    register_module("blocks", blocks);
    num_features_ = spec.blocks.back().out_chs[2];
    feature_info_.push_back({num_features_, curr_stride, "blocks." + std::to_string(num_blocks - 1)});
    feature_ends_.push_back(num_blocks - 1);

    head = register_module("head",
                           layers::ClassifierHeadModule(layers::ClassifierHeadModuleOptions(num_features_, num_classes_)
                                                            .pool_type(args.global_pool.value_or("avg"))
                                                            .drop_rate(args.drop_rate)));
  }

  // timm's forward_features: stem, blocks (each checkpointed with grad
  // checkpointing), then the pre-activation models' final ReLU.
  at::Tensor forward_features(at::Tensor x) override {
    x = stem->forward(x);
    x = grad_checkpointing_ ? checkpoint_seq(sequence_modules(blocks), x) : blocks->forward(x);
    return preact_ ? at::relu(x) : x;
  }

  // timm's feature_info: in each strided block the input to its last
  // separable conv (stack.act3, or stack.conv2's output in the
  // pre-activation models) at the stride before the block, then the last
  // block's output.
  std::vector<FeatureInfo> feature_info() const override { return feature_info_; }

  // timm's forward_intermediates: the stem, then the blocks (all, or with
  // stop_early up to the block of the last level taken); the taps inside
  // strided blocks come from forward_with_tap, the last level is the last
  // block's output (before the final ReLU, which applies to the final
  // features only when every block ran). Each block checkpointed with grad
  // checkpointing. norm is ignored (no final norm); NCHW only.
  Intermediates forward_intermediates(at::Tensor x,
                                      const IntermediatesOptions& options = IntermediatesOptions()) override {
    check_output_fmt(describe_model(*this), options.output_fmt(), {"NCHW"});
    const auto num_feats = static_cast<int64_t>(feature_ends_.size());
    const auto [take_indices, max_index] = feature_take_indices(num_feats, options.indices());
    const std::vector<bool> take = take_mask(num_feats, take_indices);
    const int64_t last_idx = num_feats - 1;
    const auto num_blocks = static_cast<int64_t>(block_list_.size());
    const int64_t run_blocks = options.stop_early() ? feature_ends_[static_cast<size_t>(max_index)] + 1 : num_blocks;
    Intermediates out;
    x = stem->forward(x);
    int64_t feat_idx = 0;
    for (int64_t i = 0; i < run_blocks; ++i) {
      XceptionModule block = block_list_[static_cast<size_t>(i)];
      if (feat_idx < last_idx && i == feature_ends_[static_cast<size_t>(feat_idx)]) {
        auto [y, tap] = grad_checkpointing_ ? checkpointed_tap(block.ptr(), x) : block->forward_with_tap(x);
        x = y;
        if (take[static_cast<size_t>(feat_idx)]) out.intermediates.push_back(tap);
        ++feat_idx;
      } else {
        x = grad_checkpointing_ ? checkpoint(nn::AnyModule(block), x) : block->forward(x);
        if (i == feature_ends_.back() && take[static_cast<size_t>(last_idx)]) out.intermediates.push_back(x);
      }
    }
    if (options.intermediates_only()) return out;
    if (run_blocks == num_blocks && preact_) x = at::relu(x);
    out.final = x;
    return out;
  }

  // timm's forward_head: the ClassifierHead, up to its fc with pre_logits.
  at::Tensor forward_head(at::Tensor x, bool pre_logits = false) override {
    return pre_logits ? head->forward_pre_logits(x) : head(x);
  }

  at::Tensor forward(at::Tensor x) override { return forward_head(forward_features(x)); }

  void set_grad_checkpointing(bool enable) override { grad_checkpointing_ = enable; }

  int64_t num_classes() const override { return num_classes_; }
  const PretrainedCfg& pretrained_cfg() const override { return cfg_; }
  // timm's, the same strings, coarse or not.
  GroupMatcher group_matcher(bool) const override {
    return {{"stem", {{"^stem", std::nullopt}}}, {"blocks", {{R"(^blocks\.(\d+))", std::nullopt}}}};
  }

  nn::Sequential stem{nullptr};
  nn::Sequential blocks{nullptr};
  layers::ClassifierHeadModule head{nullptr};

 private:
  PretrainedCfg cfg_;
  int64_t num_classes_;
  bool preact_;
  bool grad_checkpointing_ = false;
  int64_t num_features_ = 0;
  std::vector<XceptionModule> block_list_;
  std::vector<int64_t> feature_ends_;  // the block of each feature level
  std::vector<FeatureInfo> feature_info_;
};

// ---- legacy_xception (timm/models/xception.py) ----

// xception.py's SeparableConv2d: conv1 (depthwise), pointwise (1x1).
class LegacySeparableConv2dImpl : public nn::Module {
 public:
  LegacySeparableConv2dImpl(int64_t in_channels, int64_t out_channels) {
    conv1 = register_module(
        "conv1", nn::Conv2d(nn::Conv2dOptions(in_channels, in_channels, 3).padding(1).groups(in_channels).bias(false)));
    pointwise = register_module("pointwise", nn::Conv2d(nn::Conv2dOptions(in_channels, out_channels, 1).bias(false)));
  }

  at::Tensor forward(const at::Tensor& x) { return pointwise(conv1(x)); }

  nn::Conv2d conv1{nullptr}, pointwise{nullptr};
};
TORCH_MODULE(LegacySeparableConv2d);

// xception.py's Block: skip + skipbn where the shape changes; rep as timm
// builds it (ReLU, SeparableConv2d, BatchNorm2d per repetition, the first
// ReLU dropped without start_with_relu, a max pool for a strided block).
class LegacyBlockImpl : public nn::Module {
 public:
  LegacyBlockImpl(int64_t in_channels, int64_t out_channels, int64_t reps, int64_t strides, bool start_with_relu = true,
                  bool grow_first = true) {
    if (out_channels != in_channels || strides != 1) {
      skip = register_module("skip",
                             nn::Conv2d(nn::Conv2dOptions(in_channels, out_channels, 1).stride(strides).bias(false)));
      skipbn = register_module("skipbn", layers::BatchNorm2d(out_channels));
    }
    std::vector<nn::AnyModule> rep_list;
    for (int64_t i = 0; i < reps; ++i) {
      int64_t inc = in_channels;
      int64_t outc = out_channels;
      if (grow_first) {
        inc = i == 0 ? in_channels : out_channels;
      } else {
        outc = i < reps - 1 ? in_channels : out_channels;
      }
      // timm's rep[0] = ReLU(inplace=False), it reads the block input (the
      // skip); the later ones ReLU(inplace=True) on fresh norm outputs.
      rep_list.emplace_back(layers::create_act("relu", /*inplace=*/i > 0));
      rep_list.emplace_back(LegacySeparableConv2d(inc, outc));
      rep_list.emplace_back(layers::BatchNorm2d(outc));
    }
    if (!start_with_relu) rep_list.erase(rep_list.begin());
    if (strides != 1) rep_list.emplace_back(nn::MaxPool2d(nn::MaxPool2dOptions(3).stride(strides).padding(1)));
    rep = nn::Sequential();
    for (auto& m : rep_list) rep->push_back(std::to_string(rep->size()), m);
    register_module("rep", rep);
  }

  at::Tensor forward(const at::Tensor& input) {
    at::Tensor x = rep->forward(input);
    return x.add_(skip ? skipbn(skip(input)) : input);  // timm's x += skip
  }

  nn::Conv2d skip{nullptr};
  layers::BatchNorm2d skipbn{nullptr};
  nn::Sequential rep{nullptr};
};
TORCH_MODULE(LegacyBlock);

class LegacyXceptionImpl : public ClassifierImpl {
 public:
  static constexpr int64_t kNumFeatures = 2048;
  static constexpr int64_t kNumBlocks = 12;

  LegacyXceptionImpl(const std::string& name, const ModelArgs& args)
      : num_classes_(args.num_classes), drop_rate_(args.drop_rate) {
    validate_model_args(name, args);
    if (args.drop_path_rate) {
      throw UsageError(name + ": drop_path_rate is not supported (timm's Xception has no drop path and refuses it)");
    }
    cfg_.input_size = {3, 299, 299};
    cfg_.interpolation = "bicubic";
    cfg_.crop_pct = 0.8975;
    cfg_.crop_mode = "center";
    cfg_.mean = {0.5, 0.5, 0.5};
    cfg_.std = {0.5, 0.5, 0.5};
    cfg_.first_conv = "conv1";
    cfg_.classifier = "fc";

    conv1 = register_module("conv1", nn::Conv2d(nn::Conv2dOptions(args.in_chans, 32, 3).stride(2).bias(false)));
    bn1 = register_module("bn1", layers::BatchNorm2d(32));
    conv2 = register_module("conv2", nn::Conv2d(nn::Conv2dOptions(32, 64, 3).bias(false)));
    bn2 = register_module("bn2", layers::BatchNorm2d(64));
    add_block(64, 128, 2, 2, false);
    add_block(128, 256, 2, 2);
    add_block(256, 728, 2, 2);
    for (int i = 0; i < 8; ++i) add_block(728, 728, 3, 1);
    add_block(728, 1024, 2, 2, true, false);
    conv3 = register_module("conv3", LegacySeparableConv2d(1024, 1536));
    bn3 = register_module("bn3", layers::BatchNorm2d(1536));
    conv4 = register_module("conv4", LegacySeparableConv2d(1536, kNumFeatures));
    bn4 = register_module("bn4", layers::BatchNorm2d(kNumFeatures));

    auto head = layers::create_classifier(kNumFeatures, num_classes_, args.global_pool.value_or("avg"));
    global_pool = register_module("global_pool", head.global_pool);
    fc = head.fc;
    register_module("fc", fc.ptr());
    init_weights();
  }

  at::Tensor forward_features(at::Tensor x) override {
    x = forward_stem(x);
    for (auto& block : block_list_) x = block(x);
    return forward_exit(x);
  }

  // timm's feature_info: act2 (the stem), the ReLU that starts block2, block3
  // and block12 (block1's, block2's and block11's outputs, activated), act4.
  std::vector<FeatureInfo> feature_info() const override {
    return {{64, 2, "act2"},
            {128, 4, "block2.rep.0"},
            {256, 8, "block3.rep.0"},
            {728, 16, "block12.rep.0"},
            {kNumFeatures, 32, "act4"}};
  }

  // timm's forward_intermediates: the stem output, the ReLU of block1's,
  // block2's and block11's outputs, and the exit flow's (act4) output; with
  // stop_early the blocks up to the last level taken, whose final features
  // are then that block's output, activated. norm is ignored; NCHW only.
  Intermediates forward_intermediates(at::Tensor x,
                                      const IntermediatesOptions& options = IntermediatesOptions()) override {
    check_output_fmt(describe_model(*this), options.output_fmt(), {"NCHW"});
    static const std::vector<int64_t> feature_ends = {0, 1, 2, 11, 12};
    const auto num_feats = static_cast<int64_t>(feature_ends.size());
    const auto [take_indices, max_index] = feature_take_indices(num_feats, options.indices());
    const std::vector<bool> take = take_mask(num_feats, take_indices);
    const int64_t last_idx = num_feats - 1;
    Intermediates out;
    x = forward_stem(x);
    if (take[0]) out.intermediates.push_back(x);
    const int64_t num_blocks = options.stop_early() ? feature_ends[static_cast<size_t>(max_index)] : kNumBlocks;
    int64_t feat_idx = 1;
    for (int64_t i = 1; i <= num_blocks; ++i) {
      x = block_list_[static_cast<size_t>(i - 1)](x);
      if (feat_idx < last_idx && i == feature_ends[static_cast<size_t>(feat_idx)]) {
        if (take[static_cast<size_t>(feat_idx)]) out.intermediates.push_back(at::relu(x));
        ++feat_idx;
      }
    }
    if (options.intermediates_only() && max_index < last_idx) return out;
    if (num_blocks == kNumBlocks) {
      x = forward_exit(x);
      if (take[static_cast<size_t>(last_idx)]) out.intermediates.push_back(x);
    } else if (num_blocks > 0) {
      x = at::relu(x);
    }
    if (!options.intermediates_only()) out.final = x;
    return out;
  }

  // timm's forward_head: global_pool, dropout, then fc unless pre_logits.
  at::Tensor forward_head(at::Tensor features_out, bool pre_logits = false) override {
    at::Tensor x = global_pool(features_out);
    if (drop_rate_ > 0.0) x = at::dropout(x, drop_rate_, is_training());
    return pre_logits ? x : fc.forward(x);
  }

  at::Tensor forward(at::Tensor x) override { return forward_head(forward_features(x)); }

  // set_grad_checkpointing: ClassifierImpl's refusal of enable, as timm's assert.

  int64_t num_classes() const override { return num_classes_; }
  const PretrainedCfg& pretrained_cfg() const override { return cfg_; }
  // timm's, the same strings, coarse or not.
  GroupMatcher group_matcher(bool) const override {
    return {{"stem", {{"^conv[12]|bn[12]", std::nullopt}}},
            {"blocks", {{R"(^block(\d+))", std::nullopt}, {"^conv[34]|bn[34]", std::vector<double>{99}}}}};
  }

  nn::Conv2d conv1{nullptr}, conv2{nullptr};
  layers::BatchNorm2d bn1{nullptr}, bn2{nullptr}, bn3{nullptr}, bn4{nullptr};
  LegacySeparableConv2d conv3{nullptr}, conv4{nullptr};
  layers::SelectAdaptivePool2d global_pool{nullptr};
  nn::AnyModule fc;  // Linear, or Identity without a classifier

 private:
  void add_block(int64_t in, int64_t out, int64_t reps, int64_t strides, bool start_with_relu = true,
                 bool grow_first = true) {
    LegacyBlock block(in, out, reps, strides, start_with_relu, grow_first);
    register_module("block" + std::to_string(block_list_.size() + 1), block);
    block_list_.push_back(block);
  }

  at::Tensor forward_stem(const at::Tensor& x) {
    const at::Tensor y = bn1(conv1(x)).relu_();
    return bn2(conv2(y)).relu_();
  }

  at::Tensor forward_exit(const at::Tensor& x) {
    const at::Tensor y = bn3(conv3(x)).relu_();
    return bn4(conv4(y)).relu_();
  }

  // timm's init: every conv kaiming_normal (fan_out, relu), BN 1 / 0 (the
  // modules' default); fc keeps torch's default.
  void init_weights() {
    c10::NoGradGuard no_grad;
    for (auto& module : modules(/*include_self=*/false)) {
      if (auto* c = module->as<nn::Conv2d>()) {
        nn::init::kaiming_normal_(c->weight, /*a=*/0.0, torch::kFanOut, torch::kReLU);
      }
    }
  }

  PretrainedCfg cfg_;
  int64_t num_classes_;
  double drop_rate_;
  std::vector<LegacyBlock> block_list_;
};

// timm's block_cfg of xception41 / 65 / 71 and the pre-activation models:
// the entry flow, `middle` blocks of 728, the exit flow.
std::vector<AlignedBlockCfg> aligned_blocks(const std::vector<AlignedBlockCfg>& entry, int64_t middle, bool preact) {
  std::vector<AlignedBlockCfg> blocks = entry;
  for (int64_t i = 0; i < middle; ++i) blocks.push_back({728, {728, 728, 728}, 1});
  blocks.push_back({728, {728, 1024, 1024}, 2});
  // The last block: no skip, and (not in the pre-activation models) separable convs with their own ReLUs.
  blocks.push_back({1024, {1536, 1536, 2048}, 1, true, preact});
  return blocks;
}

std::vector<AlignedSpec> aligned_specs() {
  const std::vector<AlignedBlockCfg> entry = {
      {64, {128, 128, 128}, 2}, {128, {256, 256, 256}, 2}, {256, {728, 728, 728}, 2}};
  const std::vector<AlignedBlockCfg> entry71 = {{64, {128, 128, 128}, 2},
                                                {128, {256, 256, 256}, 1},
                                                {256, {256, 256, 256}, 2},
                                                {256, {728, 728, 728}, 1},
                                                {728, {728, 728, 728}, 2}};
  return {
      {"xception41", aligned_blocks(entry, 8, false), false, 1e-3, 0.903},
      {"xception65", aligned_blocks(entry, 16, false), false, 1e-3, 0.94},
      {"xception71", aligned_blocks(entry71, 16, false), false, 1e-3, 0.903},
      {"xception41p", aligned_blocks(entry, 8, true), true, 1e-5, 0.94},
      {"xception65p", aligned_blocks(entry, 16, true), true, 1e-3, 0.94},
  };
}

std::string describe(const AlignedSpec& spec) {
  std::string text = "Aligned Xception (";
  text += std::to_string(spec.blocks.size());
  text += spec.preact ? " pre-activation Xception blocks)" : " Xception blocks)";
  return text;
}

}  // namespace
}  // namespace timm::xception

TIMM_PLUGIN("xception") {
  for (const auto& spec : timm::xception::aligned_specs()) {
    registrar.add_model(spec.name, timm::xception::describe(spec),
                        [spec](const timm::ModelArgs& args) -> timm::ModelPtr {
                          return std::make_shared<timm::xception::XceptionAlignedImpl>(spec, args);
                        });
  }
  registrar.add_model("legacy_xception", "Xception (the original, ported from Keras)",
                      [](const timm::ModelArgs& args) -> timm::ModelPtr {
                        return std::make_shared<timm::xception::LegacyXceptionImpl>("legacy_xception", args);
                      });
}
