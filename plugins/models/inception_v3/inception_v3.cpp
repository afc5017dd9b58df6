// Inception-V3 (timm/models/inception_v3.py), with timm's module names so
// state_dict keys equal timm's: inception_v3.
// - stem: Conv2d_1a_3x3 (/ 2), Conv2d_2a_3x3, Conv2d_2b_3x3, Pool1 (3x3 / 2
//   max pool), Conv2d_3b_1x1, Conv2d_4a_3x3, Pool2; every conv block is timm's
//   ConvNormAct: conv (no bias, padding 0 unless given) and bn, a
//   BatchNormAct2d with eps norm_eps (1e-3) and the activation;
// - Mixed_5b..5d (InceptionA), Mixed_6a (InceptionB, / 2), Mixed_6b..6e
//   (InceptionC, 1x7 / 7x1 factorised convs), Mixed_7a (InceptionD, / 2),
//   Mixed_7b, 7c (InceptionE); each concatenates its branches;
// - head: global_pool, dropout at drop_rate, fc (a Linear).
// The smallest input is 75x75 (a 1x1 map after Mixed_7a).
//
// Supported: num_classes (0: no classifier), in_chans, drop_rate, global_pool,
// and these timm InceptionV3 keywords as --model-kwargs: norm_eps, act_layer,
// norm_layer (batchnorm2d only) and aux_logits=false (timm's default). Refused:
// aux_logits=true (timm's forward then returns a (logits, aux_logits) pair,
// which this model interface has no place for), drop_path_rate (a TypeError
// in timm), other keywords, and set_grad_checkpointing(true) (timm asserts it
// is not enabled).
#include <algorithm>
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
#include <torch/nn/module.h>
#include <torch/nn/modules/container/any.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/pooling.h>

#include "timm/base/error.hpp"
#include "timm/layers/activations.hpp"
#include "timm/layers/classifier.hpp"
#include "timm/layers/norm_act.hpp"
#include "timm/layers/weight_init.hpp"
#include "timm/models/features.hpp"
#include "timm/models/model.hpp"
#include "timm/plugin/plugin.hpp"

namespace timm::inception_v3 {
namespace {

namespace nn = torch::nn;

constexpr const char* kName = "inception_v3";
// timm 1.0.31's default pretrained tag (the first of its default_cfgs).
const std::map<std::string, std::string> kDefaultTags = {{"inception_v3", "tv_in1k"}};
// timm's IMAGENET_INCEPTION_MEAN / STD.
constexpr double kInceptionMean = 0.5;
constexpr double kInceptionStd = 0.5;
// The smallest input side: Mixed_7a's 3x3 / 2 convs need a 3x3 map.
constexpr int64_t kMinInputSize = 75;

// The --model-kwargs keys taken (timm InceptionV3's constructor arguments
// that text can carry).
const std::vector<std::string> kKnownKwargs = {"aux_logits", "norm_layer", "norm_eps", "act_layer"};

struct BlockConfig {
  double norm_eps = 1e-3;
  std::string act_layer = "relu";
};

// timm's conv_block: ConvNormAct(in, out, kernel, stride, padding) with
// padding 0 unless given, children conv (no bias) and bn (BatchNormAct2d).
// Kernels and paddings may be non-square (1x7, 7x1), which the SDK's
// ConvNormAct (square kernels only) does not take.
class InceptionConvImpl : public nn::Module {
 public:
  InceptionConvImpl(int64_t in, int64_t out, std::array<int64_t, 2> kernel, const BlockConfig& cfg, int64_t stride = 1,
                    std::array<int64_t, 2> padding = {0, 0}) {
    conv = register_module(
        "conv",
        nn::Conv2d(nn::Conv2dOptions(in, out, {kernel[0], kernel[1]})
                       .stride(stride)
                       .padding(nn::Conv2dOptions::padding_t(torch::ExpandingArray<2>({padding[0], padding[1]})))
                       .bias(false)));
    bn = register_module(
        "bn", layers::BatchNormAct2d(layers::BatchNormAct2dOptions(out).eps(cfg.norm_eps).act_layer(cfg.act_layer)));
  }

  at::Tensor forward(const at::Tensor& x) { return bn(conv(x)); }

  nn::Conv2d conv{nullptr};
  layers::BatchNormAct2d bn{nullptr};
};
TORCH_MODULE(InceptionConv);

InceptionConv conv_block(int64_t in, int64_t out, int64_t kernel, const BlockConfig& cfg, int64_t stride = 1,
                         int64_t padding = 0) {
  return InceptionConv(in, out, std::array<int64_t, 2>{kernel, kernel}, cfg, stride,
                       std::array<int64_t, 2>{padding, padding});
}
// A 1x7 (`wide`) or 7x1 conv block with its "same" padding.
InceptionConv conv_1x7(int64_t in, int64_t out, const BlockConfig& cfg, bool wide) {
  return wide ? InceptionConv(in, out, std::array<int64_t, 2>{1, 7}, cfg, 1, std::array<int64_t, 2>{0, 3})
              : InceptionConv(in, out, std::array<int64_t, 2>{7, 1}, cfg, 1, std::array<int64_t, 2>{3, 0});
}
// A 1x3 (`wide`) or 3x1 conv block with its "same" padding.
InceptionConv conv_1x3(int64_t in, int64_t out, const BlockConfig& cfg, bool wide) {
  return wide ? InceptionConv(in, out, std::array<int64_t, 2>{1, 3}, cfg, 1, std::array<int64_t, 2>{0, 1})
              : InceptionConv(in, out, std::array<int64_t, 2>{3, 1}, cfg, 1, std::array<int64_t, 2>{1, 0});
}

// F.avg_pool2d(x, 3, stride 1, padding 1) (count_include_pad) and
// F.max_pool2d(x, 3, stride 2), the branches' pools.
at::Tensor avg_pool_3x3(const at::Tensor& x) { return at::avg_pool2d(x, {3, 3}, {1, 1}, {1, 1}); }
at::Tensor max_pool_3x3_s2(const at::Tensor& x) { return at::max_pool2d(x, {3, 3}, {2, 2}); }

// timm's InceptionA: 1x1; 1x1 -> 5x5; 1x1 -> 3x3 -> 3x3; avg pool -> 1x1
// (pool_features); 224 + pool_features channels.
class InceptionAImpl : public nn::Module {
 public:
  InceptionAImpl(int64_t in, int64_t pool_features, const BlockConfig& cfg) {
    branch1x1 = register_module("branch1x1", conv_block(in, 64, 1, cfg));
    branch5x5_1 = register_module("branch5x5_1", conv_block(in, 48, 1, cfg));
    branch5x5_2 = register_module("branch5x5_2", conv_block(48, 64, 5, cfg, 1, 2));
    branch3x3dbl_1 = register_module("branch3x3dbl_1", conv_block(in, 64, 1, cfg));
    branch3x3dbl_2 = register_module("branch3x3dbl_2", conv_block(64, 96, 3, cfg, 1, 1));
    branch3x3dbl_3 = register_module("branch3x3dbl_3", conv_block(96, 96, 3, cfg, 1, 1));
    branch_pool = register_module("branch_pool", conv_block(in, pool_features, 1, cfg));
  }

  at::Tensor forward(const at::Tensor& x) {
    return at::cat({branch1x1(x), branch5x5_2(branch5x5_1(x)), branch3x3dbl_3(branch3x3dbl_2(branch3x3dbl_1(x))),
                    branch_pool(avg_pool_3x3(x))},
                   1);
  }

  InceptionConv branch1x1{nullptr}, branch5x5_1{nullptr}, branch5x5_2{nullptr}, branch3x3dbl_1{nullptr},
      branch3x3dbl_2{nullptr}, branch3x3dbl_3{nullptr}, branch_pool{nullptr};
};
TORCH_MODULE(InceptionA);

// timm's InceptionB (/ 2): 3x3 / 2 to 384; 1x1 -> 3x3 -> 3x3 / 2 to 96; max pool.
class InceptionBImpl : public nn::Module {
 public:
  InceptionBImpl(int64_t in, const BlockConfig& cfg) {
    branch3x3 = register_module("branch3x3", conv_block(in, 384, 3, cfg, 2));
    branch3x3dbl_1 = register_module("branch3x3dbl_1", conv_block(in, 64, 1, cfg));
    branch3x3dbl_2 = register_module("branch3x3dbl_2", conv_block(64, 96, 3, cfg, 1, 1));
    branch3x3dbl_3 = register_module("branch3x3dbl_3", conv_block(96, 96, 3, cfg, 2));
  }

  at::Tensor forward(const at::Tensor& x) {
    return at::cat({branch3x3(x), branch3x3dbl_3(branch3x3dbl_2(branch3x3dbl_1(x))), max_pool_3x3_s2(x)}, 1);
  }

  InceptionConv branch3x3{nullptr}, branch3x3dbl_1{nullptr}, branch3x3dbl_2{nullptr}, branch3x3dbl_3{nullptr};
};
TORCH_MODULE(InceptionB);

// timm's InceptionC: 1x1; 1x1 -> 1x7 -> 7x1; 1x1 -> 7x1 -> 1x7 -> 7x1 -> 1x7;
// avg pool -> 1x1; 4 x 192 channels.
class InceptionCImpl : public nn::Module {
 public:
  InceptionCImpl(int64_t in, int64_t c7, const BlockConfig& cfg) {
    branch1x1 = register_module("branch1x1", conv_block(in, 192, 1, cfg));
    branch7x7_1 = register_module("branch7x7_1", conv_block(in, c7, 1, cfg));
    branch7x7_2 = register_module("branch7x7_2", conv_1x7(c7, c7, cfg, true));
    branch7x7_3 = register_module("branch7x7_3", conv_1x7(c7, 192, cfg, false));
    branch7x7dbl_1 = register_module("branch7x7dbl_1", conv_block(in, c7, 1, cfg));
    branch7x7dbl_2 = register_module("branch7x7dbl_2", conv_1x7(c7, c7, cfg, false));
    branch7x7dbl_3 = register_module("branch7x7dbl_3", conv_1x7(c7, c7, cfg, true));
    branch7x7dbl_4 = register_module("branch7x7dbl_4", conv_1x7(c7, c7, cfg, false));
    branch7x7dbl_5 = register_module("branch7x7dbl_5", conv_1x7(c7, 192, cfg, true));
    branch_pool = register_module("branch_pool", conv_block(in, 192, 1, cfg));
  }

  at::Tensor forward(const at::Tensor& x) {
    const at::Tensor b7 = branch7x7_3(branch7x7_2(branch7x7_1(x)));
    const at::Tensor b7dbl = branch7x7dbl_5(branch7x7dbl_4(branch7x7dbl_3(branch7x7dbl_2(branch7x7dbl_1(x)))));
    return at::cat({branch1x1(x), b7, b7dbl, branch_pool(avg_pool_3x3(x))}, 1);
  }

  InceptionConv branch1x1{nullptr}, branch7x7_1{nullptr}, branch7x7_2{nullptr}, branch7x7_3{nullptr},
      branch7x7dbl_1{nullptr}, branch7x7dbl_2{nullptr}, branch7x7dbl_3{nullptr}, branch7x7dbl_4{nullptr},
      branch7x7dbl_5{nullptr}, branch_pool{nullptr};
};
TORCH_MODULE(InceptionC);

// timm's InceptionD (/ 2): 1x1 -> 3x3 / 2 to 320; 1x1 -> 1x7 -> 7x1 -> 3x3 / 2
// to 192; max pool.
class InceptionDImpl : public nn::Module {
 public:
  InceptionDImpl(int64_t in, const BlockConfig& cfg) {
    branch3x3_1 = register_module("branch3x3_1", conv_block(in, 192, 1, cfg));
    branch3x3_2 = register_module("branch3x3_2", conv_block(192, 320, 3, cfg, 2));
    branch7x7x3_1 = register_module("branch7x7x3_1", conv_block(in, 192, 1, cfg));
    branch7x7x3_2 = register_module("branch7x7x3_2", conv_1x7(192, 192, cfg, true));
    branch7x7x3_3 = register_module("branch7x7x3_3", conv_1x7(192, 192, cfg, false));
    branch7x7x3_4 = register_module("branch7x7x3_4", conv_block(192, 192, 3, cfg, 2));
  }

  at::Tensor forward(const at::Tensor& x) {
    const at::Tensor b7 = branch7x7x3_4(branch7x7x3_3(branch7x7x3_2(branch7x7x3_1(x))));
    return at::cat({branch3x3_2(branch3x3_1(x)), b7, max_pool_3x3_s2(x)}, 1);
  }

  InceptionConv branch3x3_1{nullptr}, branch3x3_2{nullptr}, branch7x7x3_1{nullptr}, branch7x7x3_2{nullptr},
      branch7x7x3_3{nullptr}, branch7x7x3_4{nullptr};
};
TORCH_MODULE(InceptionD);

// timm's InceptionE: 1x1 to 320; 1x1 -> (1x3 | 3x1) to 768; 1x1 -> 3x3 ->
// (1x3 | 3x1) to 768; avg pool -> 1x1 to 192; 2048 channels.
class InceptionEImpl : public nn::Module {
 public:
  InceptionEImpl(int64_t in, const BlockConfig& cfg) {
    branch1x1 = register_module("branch1x1", conv_block(in, 320, 1, cfg));
    branch3x3_1 = register_module("branch3x3_1", conv_block(in, 384, 1, cfg));
    branch3x3_2a = register_module("branch3x3_2a", conv_1x3(384, 384, cfg, true));
    branch3x3_2b = register_module("branch3x3_2b", conv_1x3(384, 384, cfg, false));
    branch3x3dbl_1 = register_module("branch3x3dbl_1", conv_block(in, 448, 1, cfg));
    branch3x3dbl_2 = register_module("branch3x3dbl_2", conv_block(448, 384, 3, cfg, 1, 1));
    branch3x3dbl_3a = register_module("branch3x3dbl_3a", conv_1x3(384, 384, cfg, true));
    branch3x3dbl_3b = register_module("branch3x3dbl_3b", conv_1x3(384, 384, cfg, false));
    branch_pool = register_module("branch_pool", conv_block(in, 192, 1, cfg));
  }

  at::Tensor forward(const at::Tensor& x) {
    const at::Tensor b3 = branch3x3_1(x);
    const at::Tensor b3dbl = branch3x3dbl_2(branch3x3dbl_1(x));
    return at::cat({branch1x1(x), at::cat({branch3x3_2a(b3), branch3x3_2b(b3)}, 1),
                    at::cat({branch3x3dbl_3a(b3dbl), branch3x3dbl_3b(b3dbl)}, 1), branch_pool(avg_pool_3x3(x))},
                   1);
  }

  InceptionConv branch1x1{nullptr}, branch3x3_1{nullptr}, branch3x3_2a{nullptr}, branch3x3_2b{nullptr},
      branch3x3dbl_1{nullptr}, branch3x3dbl_2{nullptr}, branch3x3dbl_3a{nullptr}, branch3x3dbl_3b{nullptr},
      branch_pool{nullptr};
};
TORCH_MODULE(InceptionE);

BlockConfig resolve_config(const ModelArgs& args) {
  BlockConfig cfg;
  if (model_kwarg_bool(kName, args, "aux_logits").value_or(false)) {
    throw UsageError(std::string(kName) +
                     ": aux_logits=true is not supported (timm's forward then returns a (logits, aux_logits) pair; "
                     "this model returns the logits alone); timm's default is aux_logits=false");
  }
  if (const auto it = args.kwargs.find("norm_layer"); it != args.kwargs.end() && it->second != "batchnorm2d") {
    throw UsageError(std::string(kName) + ": norm_layer=" + it->second +
                     ": only batchnorm2d (timm's default) is supported");
  }
  if (const auto eps = model_kwarg_double(kName, args, "norm_eps")) {
    if (!(*eps > 0.0 && *eps <= 1.0)) {
      throw UsageError(std::string(kName) + ": norm_eps=" + args.kwargs.at("norm_eps") +
                       ": expected a value in (0, 1]");
    }
    cfg.norm_eps = *eps;
  }
  if (const auto it = args.kwargs.find("act_layer"); it != args.kwargs.end()) {
    const auto& names = layers::activation_names();
    if (std::find(names.begin(), names.end(), it->second) == names.end()) {
      throw UsageError(std::string(kName) + ": act_layer=" + it->second + ": not a known activation name");
    }
    cfg.act_layer = it->second;
  }
  return cfg;
}

class InceptionV3Impl : public ClassifierImpl {
 public:
  explicit InceptionV3Impl(const ModelArgs& args) : num_classes_(args.num_classes), drop_rate_(args.drop_rate) {
    validate_model_args(kName, args, kKnownKwargs);
    if (args.drop_path_rate) {
      throw UsageError(std::string(kName) +
                       ": drop_path_rate is not supported (timm's InceptionV3 has no drop path and refuses it)");
    }
    const BlockConfig cfg = resolve_config(args);
    cfg_.input_size = {3, 299, 299};
    cfg_.interpolation = "bicubic";
    cfg_.crop_pct = 0.875;
    cfg_.crop_mode = "center";
    cfg_.mean = {kInceptionMean, kInceptionMean, kInceptionMean};
    cfg_.std = {kInceptionStd, kInceptionStd, kInceptionStd};
    cfg_.first_conv = "Conv2d_1a_3x3.conv";
    cfg_.classifier = "fc";
    cfg_.hf_hub_id = timm_hub_id(kName, kDefaultTags);
    // timm loads the default tv_in1k weights non-strictly: they carry AuxLogits.*.
    cfg_.pretrained_strict = false;

    add_layer("Conv2d_1a_3x3", conv_block(args.in_chans, 32, 3, cfg, 2));
    add_layer("Conv2d_2a_3x3", conv_block(32, 32, 3, cfg));
    add_layer("Conv2d_2b_3x3", conv_block(32, 64, 3, cfg, 1, 1));
    add_layer("Pool1", nn::MaxPool2d(nn::MaxPool2dOptions(3).stride(2)));
    add_layer("Conv2d_3b_1x1", conv_block(64, 80, 1, cfg));
    add_layer("Conv2d_4a_3x3", conv_block(80, 192, 3, cfg));
    add_layer("Pool2", nn::MaxPool2d(nn::MaxPool2dOptions(3).stride(2)));
    add_layer("Mixed_5b", InceptionA(192, 32, cfg));
    add_layer("Mixed_5c", InceptionA(256, 64, cfg));
    add_layer("Mixed_5d", InceptionA(288, 64, cfg));
    add_layer("Mixed_6a", InceptionB(288, cfg));
    add_layer("Mixed_6b", InceptionC(768, 128, cfg));
    add_layer("Mixed_6c", InceptionC(768, 160, cfg));
    add_layer("Mixed_6d", InceptionC(768, 160, cfg));
    add_layer("Mixed_6e", InceptionC(768, 192, cfg));
    add_layer("Mixed_7a", InceptionD(768, cfg));
    add_layer("Mixed_7b", InceptionE(1280, cfg));
    add_layer("Mixed_7c", InceptionE(2048, cfg));
    feature_info_ = {{64, 2, "Conv2d_2b_3x3"},
                     {192, 4, "Conv2d_4a_3x3"},
                     {288, 8, "Mixed_5d"},
                     {768, 16, "Mixed_6e"},
                     {2048, 32, "Mixed_7c"}};
    for (const auto& info : feature_info_) {
      const auto it = std::find(layer_names_.begin(), layer_names_.end(), info.module);
      feature_ends_.push_back(static_cast<size_t>(it - layer_names_.begin()));
    }

    auto head = layers::create_classifier(kNumFeatures, num_classes_, args.global_pool.value_or("avg"));
    global_pool = register_module("global_pool", head.global_pool);
    fc = head.fc;
    register_module("fc", fc.ptr());
    init_weights();
  }

  // timm's forward_features: the stem and Mixed_5b..7c, (N, 2048, H', W')
  // (8x8 at 299 px).
  at::Tensor forward_features(at::Tensor x) override {
    check_input_size(x);
    for (auto& layer : layers_) x = layer.forward(x);
    return x;
  }

  // timm's feature levels: Conv2d_2b_3x3 (stride 2), Conv2d_4a_3x3 (4),
  // Mixed_5d (8), Mixed_6e (16), Mixed_7c (32).
  std::vector<FeatureInfo> feature_info() const override { return feature_info_; }

  // timm's forward_intermediates: the layers in order (with stop_early up to
  // the last level taken), taking each level's module output; norm is
  // ignored (no final norm); NCHW only.
  Intermediates forward_intermediates(at::Tensor x,
                                      const IntermediatesOptions& options = IntermediatesOptions()) override {
    check_output_fmt(describe_model(*this), options.output_fmt(), {"NCHW"});
    const auto levels = static_cast<int64_t>(feature_ends_.size());
    const int64_t last_taken = feature_take_indices(levels, options.indices()).second;
    if (!options.stop_early() || last_taken == levels - 1) check_input_size(x);  // the whole network runs
    return run_feature_steps(
        x, layers_.size(), feature_ends_, [&](size_t i, at::Tensor t) { return layers_[i].forward(t); }, options);
  }

  // timm's forward_head: global_pool, head_drop, then fc unless pre_logits.
  at::Tensor forward_head(at::Tensor features_out, bool pre_logits = false) override {
    at::Tensor x = global_pool(features_out);
    if (drop_rate_ > 0.0) x = at::dropout(x, drop_rate_, is_training());
    return pre_logits ? x : fc.forward(x);
  }

  at::Tensor forward(at::Tensor x) override { return forward_head(forward_features(x)); }

  // set_grad_checkpointing: ClassifierImpl's refusal of enable, as timm's assert.

  int64_t num_classes() const override { return num_classes_; }
  const PretrainedCfg& pretrained_cfg() const override { return cfg_; }

  // timm's group_matcher is a function (the same for coarse and fine): the
  // Conv2d_1* / Conv2d_2* convs group 0, Conv2d_3* / Conv2d_4* group 1, each
  // Mixed block its own group in order, fc (unmatched) last. These rules give
  // the same groups in the same order (the oracle checks it against timm's
  // function through timm's group_with_matcher).
  GroupMatcher group_matcher(bool /*coarse*/) const override {
    GroupMatcher matcher = {{"stem", {{"^Conv2d_[12]", std::nullopt}, {"^Conv2d_[34]", std::vector<double>{1}}}}};
    std::vector<MatcherRule> blocks;
    double index = 0;
    for (const auto& name : layer_names_) {
      if (name.rfind("Mixed_", 0) == 0) blocks.push_back({"^" + name + R"(\.)", std::vector<double>{index++}});
    }
    matcher.emplace_back("blocks", std::move(blocks));
    return matcher;
  }

  layers::SelectAdaptivePool2d global_pool{nullptr};
  nn::AnyModule fc;

 private:
  static constexpr int64_t kNumFeatures = 2048;

  template <typename Holder>
  void add_layer(const std::string& name, Holder layer) {
    register_module(name, layer.ptr());
    layers_.emplace_back(layer);
    layer_names_.push_back(name);
  }

  // timm fails inside a conv below 75 px (Mixed_7a's 3x3 convs need a 3x3
  // map); say so in words.
  void check_input_size(const at::Tensor& x) const {
    if (x.dim() == 4 && (x.size(2) < kMinInputSize || x.size(3) < kMinInputSize)) {
      throw UsageError(describe_model(*this) + ": input " + std::to_string(x.size(2)) + "x" +
                       std::to_string(x.size(3)) + " is too small; Inception-V3 needs at least " +
                       std::to_string(kMinInputSize) + "x" + std::to_string(kMinInputSize));
    }
  }

  // timm's init: trunc_normal_(std 0.1, a -2, b 2) on every Conv2d and Linear
  // weight, BN weight 1 / bias 0 (the modules' default); fc's bias keeps
  // Linear's default init.
  void init_weights() {
    c10::NoGradGuard no_grad;
    for (auto& module : modules(/*include_self=*/false)) {
      if (auto* c = module->as<nn::Conv2d>()) {
        layers::trunc_normal_(c->weight, 0.0, 0.1, -2.0, 2.0);
      } else if (auto* l = module->as<nn::Linear>()) {
        layers::trunc_normal_(l->weight, 0.0, 0.1, -2.0, 2.0);
      }
    }
  }

  PretrainedCfg cfg_;
  int64_t num_classes_;
  double drop_rate_;
  std::vector<nn::AnyModule> layers_;  // timm's layer_names, in forward order
  std::vector<std::string> layer_names_;
  std::vector<size_t> feature_ends_;  // index in layers_ of each level's module
  std::vector<FeatureInfo> feature_info_;
};

}  // namespace
}  // namespace timm::inception_v3

TIMM_PLUGIN("inception_v3") {
  registrar.add_model("inception_v3",
                      "Inception-V3 (factorised 1x7 / 7x1 convs, batchnorm eps 1e-3, 299 px default input)",
                      [](const timm::ModelArgs& args) -> timm::ModelPtr {
                        return std::make_shared<timm::inception_v3::InceptionV3Impl>(args);
                      });
}
