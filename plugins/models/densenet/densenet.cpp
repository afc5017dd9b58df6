// DenseNet (timm/models/densenet.py), with timm's module names so state_dict
// keys equal timm's: densenet121, densenet161, densenet169, densenet201,
// densenet264d and densenetblur121d.
// - features: one Sequential as timm's, the stem (conv0 7x7 / 2, norm0, pool0
//   3x3 / 2 max pool; or for the "d" models the deep stem conv0 3x3 / 2,
//   norm0, conv1, norm1, conv2, norm2, pool0), then denseblock1..4 with
//   transition1..3 between them, then norm5;
// - DenseLayer: norm1 (BatchNormAct2d), conv1 1x1 to bn_size * growth_rate,
//   norm2, conv2 3x3 to growth_rate, dropout at proj_drop_rate; each layer
//   takes the concatenation of the block's input and every earlier layer's
//   output, and the block returns the concatenation of all of them;
// - DenseTransition: norm, conv 1x1 halving the channels, pool (2x2 average
//   pool, or BlurPool2d where timm's aa_layer is set and aa_stem_only false);
// - densenetblur121d: the deep stem and a pool0 of 3x3 / 1 max pool then
//   BlurPool2d / 2 (timm's aa_layer=BlurPool2d, aa_stem_only=True);
// - head: global_pool, dropout at drop_rate, classifier (a Linear).
//
// Supported: num_classes (0: no classifier), in_chans, drop_rate (dropout
// before the classifier), global_pool, and these timm DenseNet keywords as
// --model-kwargs: growth_rate, bn_size, stem_type ('', 'deep', 'deep_tiered',
// 'deep_tiered_narrow'), act_layer, proj_drop_rate (dropout after each dense
// layer), memory_efficient (grad checkpointing from the start) and
// aa_stem_only (densenetblur121d: false puts BlurPool2d in the transitions
// too). Refused as timm's DenseNet refuses them: drop_path_rate (its
// constructor takes none: a TypeError in timm) and other keywords.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <torch/nn/init.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/pooling.h>

#include "timm/base/error.hpp"
#include "timm/base/names.hpp"
#include "timm/layers/activations.hpp"
#include "timm/layers/blur_pool.hpp"
#include "timm/layers/classifier.hpp"
#include "timm/layers/norm_act.hpp"
#include "timm/models/features.hpp"
#include "timm/models/grad_checkpoint.hpp"
#include "timm/models/model.hpp"
#include "timm/plugin/plugin.hpp"

namespace timm::densenet {
namespace {

namespace nn = torch::nn;

// timm 1.0.31's default pretrained tag of each model (the first tag of its
// default_cfgs); densenet264d has only "untrained" (no weights, no hub id).
const std::map<std::string, std::string> kDefaultTags = {{"densenet121", "ra_in1k"},
                                                         {"densenetblur121d", "ra_in1k"},
                                                         {"densenet169", "tv_in1k"},
                                                         {"densenet201", "tv_in1k"},
                                                         {"densenet161", "tv_in1k"}};

// timm's test_input_size / test_crop_pct of the models whose default cfg has them
// (validate.py evaluates at them unless --use-train-size).
const std::map<std::string, TestSize> kTestSizes = {{"densenet121", {288, 0.95}}, {"densenetblur121d", {288, 0.95}}};

// The --model-kwargs keys taken (timm DenseNet's constructor arguments that
// text can carry; block_config, norm_layer and aa_layer cannot).
const std::vector<std::string> kKnownKwargs = {"growth_rate",    "bn_size",          "stem_type",   "act_layer",
                                               "proj_drop_rate", "memory_efficient", "aa_stem_only"};

const std::vector<std::string> kStemTypes = {"", "deep", "deep_tiered", "deep_tiered_narrow"};

// One registered architecture.
struct DenseNetSpec {
  std::string name;
  int64_t growth_rate = 32;
  std::vector<int64_t> block_config;
  std::string stem_type;  // "" or "deep"
  bool blur = false;      // timm's aa_layer=BlurPool2d
};

// A spec with the model's keywords applied: timm's DenseNet arguments.
struct DenseNetConfig {
  std::string model;  // the registered name, for messages
  int64_t growth_rate = 32;
  std::vector<int64_t> block_config;
  int64_t bn_size = 4;
  std::string stem_type;
  std::string act_layer = "relu";
  bool blur = false;
  bool aa_stem_only = true;
  double proj_drop_rate = 0.0;
  bool memory_efficient = false;
};

DenseNetConfig resolve_config(const DenseNetSpec& spec, const ModelArgs& args) {
  const std::string& model = spec.name;
  DenseNetConfig cfg;
  cfg.model = model;
  cfg.growth_rate = model_kwarg_positive_int(model, args, "growth_rate").value_or(spec.growth_rate);
  cfg.block_config = spec.block_config;
  cfg.bn_size = model_kwarg_positive_int(model, args, "bn_size").value_or(4);
  cfg.stem_type = spec.stem_type;
  if (const auto it = args.kwargs.find("stem_type"); it != args.kwargs.end()) {
    if (std::find(kStemTypes.begin(), kStemTypes.end(), it->second) == kStemTypes.end()) {
      throw UsageError(model + ": stem_type=" + it->second +
                       ": expected '' (7x7 stem), deep, deep_tiered or deep_tiered_narrow");
    }
    cfg.stem_type = it->second;
  }
  if (const auto it = args.kwargs.find("act_layer"); it != args.kwargs.end()) {
    const auto& names = layers::activation_names();
    if (std::find(names.begin(), names.end(), it->second) == names.end()) {
      throw UsageError(model + ": act_layer=" + it->second + ": not a known activation name");
    }
    cfg.act_layer = it->second;
  }
  cfg.blur = spec.blur;
  cfg.aa_stem_only = model_kwarg_bool(model, args, "aa_stem_only").value_or(true);
  const double proj_drop_rate = model_kwarg_double(model, args, "proj_drop_rate").value_or(0.0);
  if (!(proj_drop_rate >= 0.0 && proj_drop_rate <= 1.0)) {
    throw UsageError(model + ": proj_drop_rate=" + args.kwargs.at("proj_drop_rate") + ": expected a rate in [0, 1]");
  }
  cfg.proj_drop_rate = proj_drop_rate;
  cfg.memory_efficient = model_kwarg_bool(model, args, "memory_efficient").value_or(false);
  return cfg;
}

// timm's norm_layer: get_norm_act_layer('batchnorm2d', act_layer), a
// BatchNormAct2d (eps 1e-5, momentum 0.1) with the activation.
layers::BatchNormAct2d norm_act(int64_t channels, const std::string& act_layer) {
  return layers::BatchNormAct2d(layers::BatchNormAct2dOptions(channels).act_layer(act_layer));
}

nn::Conv2d conv(int64_t in, int64_t out, int64_t kernel, int64_t stride = 1) {
  return nn::Conv2d(nn::Conv2dOptions(in, out, kernel).stride(stride).padding(kernel / 2).bias(false));
}

// timm's DenseLayer: the bottleneck (concat, norm1, conv1) then norm2, conv2
// and dropout. With grad checkpointing the bottleneck is checkpointed, as
// timm's call_checkpoint_bottleneck, when an input needs a gradient.
class DenseLayerImpl : public nn::Module {
 public:
  DenseLayerImpl(int64_t num_input_features, const DenseNetConfig& cfg)
      : drop_rate_(cfg.proj_drop_rate), grad_checkpointing_(cfg.memory_efficient) {
    const int64_t bottleneck = cfg.bn_size * cfg.growth_rate;
    norm1 = register_module("norm1", norm_act(num_input_features, cfg.act_layer));
    conv1 = register_module("conv1", conv(num_input_features, bottleneck, 1));
    norm2 = register_module("norm2", norm_act(bottleneck, cfg.act_layer));
    conv2 = register_module("conv2", conv(bottleneck, cfg.growth_rate, 3));
  }

  // The new features (N, growth_rate, H, W) from the block's features so far.
  at::Tensor forward(const std::vector<at::Tensor>& prev_features) {
    const at::Tensor concated = at::cat(prev_features, 1);
    const bool any_requires_grad =
        std::any_of(prev_features.begin(), prev_features.end(), [](const at::Tensor& t) { return t.requires_grad(); });
    at::Tensor x;
    if (grad_checkpointing_ && any_requires_grad) {
      std::vector<at::Tensor> params = norm1->parameters();
      for (const auto& p : conv1->parameters()) params.push_back(p);
      // timm checkpoints the concatenation too; here it is the checkpoint's
      // input, kept, and norm1 / conv1 run again in the backward pass.
      x = checkpoint([this](const at::Tensor& in) { return bottleneck_fn(in); }, concated, params);
    } else {
      x = bottleneck_fn(concated);
    }
    x = conv2(norm2(x));
    if (drop_rate_ > 0.0) x = at::dropout(x, drop_rate_, is_training());
    return x;
  }

  void set_grad_checkpointing(bool enable) { grad_checkpointing_ = enable; }

  layers::BatchNormAct2d norm1{nullptr}, norm2{nullptr};
  nn::Conv2d conv1{nullptr}, conv2{nullptr};

 private:
  at::Tensor bottleneck_fn(const at::Tensor& x) { return conv1(norm1(x)); }

  double drop_rate_;
  bool grad_checkpointing_;
};
TORCH_MODULE(DenseLayer);

// timm's DenseBlock: denselayer1..N, each fed the concatenation of all
// features before it; returns the concatenation of the input and every
// layer's output, num_input_features + N * growth_rate channels.
class DenseBlockImpl : public nn::Module {
 public:
  DenseBlockImpl(int64_t num_layers, int64_t num_input_features, const DenseNetConfig& cfg) {
    for (int64_t i = 0; i < num_layers; ++i) {
      layers_.push_back(register_module("denselayer" + std::to_string(i + 1),
                                        DenseLayer(num_input_features + i * cfg.growth_rate, cfg)));
    }
  }

  at::Tensor forward(const at::Tensor& init_features) {
    std::vector<at::Tensor> features{init_features};
    features.reserve(layers_.size() + 1);
    for (auto& layer : layers_) features.push_back(layer->forward(features));
    return at::cat(features, 1);
  }

  const std::vector<DenseLayer>& layers() const { return layers_; }

 private:
  std::vector<DenseLayer> layers_;
};
TORCH_MODULE(DenseBlock);

// timm's DenseTransition: norm, conv 1x1, pool (AvgPool2d 2x2 / 2, or
// BlurPool2d / 2 with timm's aa_layer).
class DenseTransitionImpl : public nn::Module {
 public:
  DenseTransitionImpl(int64_t num_input_features, int64_t num_output_features, const std::string& act_layer,
                      bool blur) {
    norm = register_module("norm", norm_act(num_input_features, act_layer));
    this->conv = register_module("conv", densenet::conv(num_input_features, num_output_features, 1));
    if (blur) {
      blur_pool = register_module("pool", layers::BlurPool2d(layers::BlurPool2dOptions(num_output_features).stride(2)));
    } else {
      avg_pool = register_module("pool", nn::AvgPool2d(nn::AvgPool2dOptions(2).stride(2)));
    }
  }

  at::Tensor forward(const at::Tensor& input) {
    const at::Tensor x = conv(norm(input));
    return blur_pool ? blur_pool(x) : avg_pool(x);
  }

  layers::BatchNormAct2d norm{nullptr};
  nn::Conv2d conv{nullptr};
  nn::AvgPool2d avg_pool{nullptr};
  layers::BlurPool2d blur_pool{nullptr};
};
TORCH_MODULE(DenseTransition);

// densenetblur121d's pool0, timm's nn.Sequential(MaxPool2d(3, 1, 1),
// BlurPool2d(channels, stride 2)), children "0" and "1" as there (neither has state).
class BlurStemPoolImpl : public nn::Module {
 public:
  explicit BlurStemPoolImpl(int64_t channels) {
    max_pool = register_module("0", nn::MaxPool2d(nn::MaxPool2dOptions(3).stride(1).padding(1)));
    blur_pool = register_module("1", layers::BlurPool2d(layers::BlurPool2dOptions(channels).stride(2)));
  }

  at::Tensor forward(const at::Tensor& x) { return blur_pool(max_pool(x)); }

  nn::MaxPool2d max_pool{nullptr};
  layers::BlurPool2d blur_pool{nullptr};
};
TORCH_MODULE(BlurStemPool);

class DenseNetImpl : public ClassifierImpl {
 public:
  DenseNetImpl(const DenseNetSpec& spec, const ModelArgs& args)
      : num_classes_(args.num_classes), drop_rate_(args.drop_rate) {
    validate_model_args(spec.name, args, kKnownKwargs);
    if (args.drop_path_rate) {
      throw UsageError(spec.name +
                       ": drop_path_rate is not supported (timm's DenseNet has no drop path and refuses it; "
                       "proj_drop_rate is its dropout after each dense layer)");
    }
    const DenseNetConfig cfg = resolve_config(spec, args);
    cfg_.input_size = {3, 224, 224};
    cfg_.interpolation = "bicubic";
    cfg_.crop_pct = 0.875;
    cfg_.crop_mode = "center";
    cfg_.first_conv = "features.conv0";
    cfg_.classifier = "classifier";
    cfg_.hf_hub_id = timm_hub_id(spec.name, kDefaultTags);
    set_test_size(cfg_, spec.name, kTestSizes);
    num_features_ = build_features(cfg, args.in_chans);
    auto head = layers::create_classifier(num_features_, num_classes_, args.global_pool.value_or("avg"));
    global_pool = register_module("global_pool", head.global_pool);
    classifier = head.fc;
    register_module("classifier", classifier.ptr());
    init_weights();
  }

  // timm's forward_features: the features Sequential, (N, C, H/32, W/32)
  // after norm5 (and its ReLU).
  at::Tensor forward_features(at::Tensor x) override { return features->forward(x); }

  // timm's feature levels: the stem before its pool (norm0, or norm2 for a
  // deep stem) at stride 2, denseblock1..3 (before their transitions) at 4,
  // 8, 16, and norm5 at 32.
  std::vector<FeatureInfo> feature_info() const override { return feature_info_; }

  // timm's forward_intermediates: the features' modules in order, taking the
  // output of each level's module (feature_ends_); with stop_early only up to
  // the last level taken, whose output is then the final features. norm is
  // ignored (the last level is norm5's output); NCHW only.
  Intermediates forward_intermediates(at::Tensor x,
                                      const IntermediatesOptions& options = IntermediatesOptions()) override {
    check_output_fmt(describe_model(*this), options.output_fmt(), {"NCHW"});
    const auto layers = features->begin();
    return run_feature_steps(
        x, features->size(), feature_ends_, [&](size_t i, at::Tensor t) { return layers[i].forward(t); }, options);
  }

  // timm's forward_head: global_pool, head_drop, then the classifier unless pre_logits.
  at::Tensor forward_head(at::Tensor features_out, bool pre_logits = false) override {
    at::Tensor x = global_pool(features_out);
    if (drop_rate_ > 0.0) x = at::dropout(x, drop_rate_, is_training());
    return pre_logits ? x : classifier.forward(x);
  }

  at::Tensor forward(at::Tensor x) override { return forward_head(forward_features(x)); }

  // timm's set_grad_checkpointing: every DenseLayer checkpoints its bottleneck.
  void set_grad_checkpointing(bool enable) override {
    for (auto& layer : dense_layers_) layer->set_grad_checkpointing(enable);
  }

  int64_t num_classes() const override { return num_classes_; }
  const PretrainedCfg& pretrained_cfg() const override { return cfg_; }
  // timm's, the same strings; the transitions join the previous group
  // (MATCH_PREV_GROUP, suffix 99999) in the fine one.
  GroupMatcher group_matcher(bool coarse) const override {
    GroupMatcher matcher = {
        {"stem", {{R"(^features\.conv[012]|features\.norm[012]|features\.pool[012])", std::nullopt}}}};
    if (coarse) {
      matcher.push_back({"blocks", {{R"(^features\.(?:denseblock|transition)(\d+))", std::nullopt}}});
    } else {
      matcher.push_back({"blocks",
                         {{R"(^features\.denseblock(\d+)\.denselayer(\d+))", std::nullopt},
                          {R"(^features\.transition(\d+))", std::vector<double>{99999}}}});
    }
    return matcher;
  }

  nn::Sequential features{nullptr};
  layers::SelectAdaptivePool2d global_pool{nullptr};
  nn::AnyModule classifier;

 private:
  // timm's DenseNet.__init__: the stem, the blocks and transitions, norm5,
  // recording feature_info and each level's index in features. Returns the
  // final channels (timm's num_features).
  int64_t build_features(const DenseNetConfig& cfg, int64_t in_chans) {
    nn::Sequential seq;
    const bool deep_stem = cfg.stem_type.find("deep") != std::string::npos;
    const int64_t num_init_features = cfg.growth_rate * 2;
    if (deep_stem) {
      int64_t stem_chs_1 = cfg.growth_rate, stem_chs_2 = cfg.growth_rate;
      if (cfg.stem_type.find("tiered") != std::string::npos) {
        stem_chs_1 = 3 * (cfg.growth_rate / 4);
        stem_chs_2 = cfg.stem_type.find("narrow") != std::string::npos ? num_init_features : 6 * (cfg.growth_rate / 4);
      }
      if (stem_chs_1 < 1 || stem_chs_2 < 1) {
        throw UsageError(cfg.model + ": stem_type " + cfg.stem_type + " needs growth_rate >= 4, got " +
                         std::to_string(cfg.growth_rate));
      }
      seq->push_back("conv0", conv(in_chans, stem_chs_1, 3, 2));
      seq->push_back("norm0", norm_act(stem_chs_1, cfg.act_layer));
      seq->push_back("conv1", conv(stem_chs_1, stem_chs_2, 3));
      seq->push_back("norm1", norm_act(stem_chs_2, cfg.act_layer));
      seq->push_back("conv2", conv(stem_chs_2, num_init_features, 3));
      seq->push_back("norm2", norm_act(num_init_features, cfg.act_layer));
    } else {
      seq->push_back("conv0", conv(in_chans, num_init_features, 7, 2));
      seq->push_back("norm0", norm_act(num_init_features, cfg.act_layer));
    }
    add_level(seq, num_init_features, 2);
    if (cfg.blur) {
      seq->push_back("pool0", BlurStemPool(num_init_features));
    } else {
      seq->push_back("pool0", nn::MaxPool2d(nn::MaxPool2dOptions(3).stride(2).padding(1)));
    }
    int64_t stride = 4;
    int64_t num_features = num_init_features;
    const size_t blocks = cfg.block_config.size();
    for (size_t i = 0; i < blocks; ++i) {
      const std::string index = std::to_string(i + 1);
      DenseBlock block(cfg.block_config[i], num_features, cfg);
      for (const auto& layer : block->layers()) dense_layers_.push_back(layer);
      seq->push_back("denseblock" + index, block);
      num_features += cfg.block_config[i] * cfg.growth_rate;
      if (i + 1 != blocks) {
        add_level(seq, num_features, stride);
        stride *= 2;
        seq->push_back("transition" + index,
                       DenseTransition(num_features, num_features / 2, cfg.act_layer, cfg.blur && !cfg.aa_stem_only));
        num_features /= 2;
      }
    }
    seq->push_back("norm5", norm_act(num_features, cfg.act_layer));
    add_level(seq, num_features, stride);
    features = register_module("features", seq);
    return num_features;
  }

  // A feature level at the last module added to `seq`.
  void add_level(const nn::Sequential& seq, int64_t channels, int64_t reduction) {
    const size_t last = seq->size() - 1;
    feature_ends_.push_back(last);
    feature_info_.push_back({channels, reduction, "features." + seq->named_children()[last].key()});
  }

  // timm's "official init from torch repo": kaiming_normal_ with its defaults
  // (fan_in, gain sqrt(2)) on every conv, BN weight 1 / bias 0 (the modules'
  // default), the classifier's bias zero (its weight keeps Linear's default init).
  void init_weights() {
    c10::NoGradGuard no_grad;
    for (auto& module : modules(/*include_self=*/false)) {
      if (auto* c = module->as<nn::Conv2d>()) {
        nn::init::kaiming_normal_(c->weight);
      } else if (auto* l = module->as<nn::Linear>()) {
        if (l->bias.defined()) l->bias.zero_();
      }
    }
  }

  PretrainedCfg cfg_;
  int64_t num_classes_;
  double drop_rate_;
  int64_t num_features_ = 0;
  std::vector<DenseLayer> dense_layers_;
  std::vector<size_t> feature_ends_;  // index in features of each level's module
  std::vector<FeatureInfo> feature_info_;
};

std::vector<DenseNetSpec> densenet_specs() {
  return {
      {"densenet121", 32, {6, 12, 24, 16}, "", false}, {"densenetblur121d", 32, {6, 12, 24, 16}, "deep", true},
      {"densenet169", 32, {6, 12, 32, 32}, "", false}, {"densenet201", 32, {6, 12, 48, 32}, "", false},
      {"densenet161", 48, {6, 12, 36, 24}, "", false}, {"densenet264d", 48, {6, 12, 64, 48}, "deep", false},
  };
}

std::string describe(const DenseNetSpec& spec) {
  std::string text = "DenseNet-BC (growth rate " + std::to_string(spec.growth_rate) + ", dense layers ";
  text += joined_ints(spec.block_config);
  if (!spec.stem_type.empty()) text += ", deep 3x3 stem";
  if (spec.blur) text += ", BlurPool stem";
  return text + ")";
}

}  // namespace
}  // namespace timm::densenet

TIMM_PLUGIN("densenet") {
  for (const auto& spec : timm::densenet::densenet_specs()) {
    registrar.add_model(spec.name, timm::densenet::describe(spec),
                        [spec](const timm::ModelArgs& args) -> timm::ModelPtr {
                          return std::make_shared<timm::densenet::DenseNetImpl>(spec, args);
                        });
  }
}
