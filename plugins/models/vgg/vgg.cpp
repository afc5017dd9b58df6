// VGG (timm/models/vgg.py), with timm's module names so state_dict keys equal
// timm's: vgg11, vgg13, vgg16, vgg19 (timm's cfgs "A", "B", "D", "E") and the
// same with a BatchNorm after every conv (vgg11_bn .. vgg19_bn).
// - features: one flat Sequential of 3x3 convs (padding 1), [BatchNorm2d],
//   ReLU and 2x2 max pools, numbered as timm's (features.0.weight,
//   features.1.running_mean, ...);
// - pre_logits: VGG's own ConvMlp, the torchvision classifier's two Linear
//   layers as convs (fc1 7x7 512 -> 4096, fc2 1x1 4096 -> 4096, each with a
//   ReLU, dropout between); maps smaller than 7x7 are first average-pooled
//   up to 7x7 (adaptive pool), as timm does;
// - head: timm's ClassifierHead (pool, dropout, fc).
//
// Supported: num_classes (0: no head fc), in_chans, drop_rate (dropout in
// pre_logits and before the fc), global_pool. Refused as timm's VGG refuses
// them: drop_path_rate (its constructor takes none: a TypeError in timm),
// --grad-checkpointing (timm asserts), and every --model-kwargs key
// (timm's mlp_ratio / output_stride / act_layer ... are not taken).
#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <torch/nn/init.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/pooling.h>

#include "timm/base/error.hpp"
#include "timm/layers/activations.hpp"
#include "timm/layers/batch_norm.hpp"
#include "timm/layers/classifier.hpp"
#include "timm/models/features.hpp"
#include "timm/models/model.hpp"
#include "timm/plugin/plugin.hpp"

namespace timm::vgg {
namespace {

namespace nn = torch::nn;

// timm 1.0.31's default pretrained tag of each model (every VGG has the
// torchvision weights, tv_in1k).
const std::map<std::string, std::string> kDefaultTags = {
    {"vgg11", "tv_in1k"}, {"vgg11_bn", "tv_in1k"}, {"vgg13", "tv_in1k"}, {"vgg13_bn", "tv_in1k"},
    {"vgg16", "tv_in1k"}, {"vgg16_bn", "tv_in1k"}, {"vgg19", "tv_in1k"}, {"vgg19_bn", "tv_in1k"}};

// timm's cfgs: conv widths in order, kPool for a max pool ('M').
constexpr int64_t kPool = 0;
const std::map<std::string, std::vector<int64_t>> kCfgs = {
    {"vgg11", {64, kPool, 128, kPool, 256, 256, kPool, 512, 512, kPool, 512, 512, kPool}},
    {"vgg13", {64, 64, kPool, 128, 128, kPool, 256, 256, kPool, 512, 512, kPool, 512, 512, kPool}},
    {"vgg16", {64, 64, kPool, 128, 128, kPool, 256, 256, 256, kPool, 512, 512, 512, kPool, 512, 512, 512, kPool}},
    {"vgg19",
     {64, 64, kPool, 128, 128, kPool, 256, 256, 256, 256, kPool, 512, 512, 512, 512, kPool, 512, 512, 512, 512, kPool}},
};

// timm's head_hidden_size: ConvMlp's width (mlp_ratio 1).
constexpr int64_t kHeadHiddenSize = 4096;

struct ConvMlpOptions {
  ConvMlpOptions(int64_t in_features, int64_t out_features) : in_features_(in_features), out_features_(out_features) {}
  TORCH_ARG(int64_t, in_features);
  TORCH_ARG(int64_t, out_features);
  TORCH_ARG(int64_t, kernel_size) = 7;
  TORCH_ARG(double, drop_rate) = 0.0;
};

// timm vgg.py's ConvMlp, not the SDK's layers::ConvMlp (1x1 convs, no pooling,
// a norm slot): fc1 is a kernel_size conv without padding, so a map smaller
// than that is first average-pooled up to kernel_size on its short sides
// (timm's "keep the input size >= 7x7"); then act1, drop, fc2 (1x1), act2.
class ConvMlpImpl : public nn::Module {
 public:
  explicit ConvMlpImpl(const ConvMlpOptions& o) : options(o) {
    fc1 = register_module("fc1",
                          nn::Conv2d(nn::Conv2dOptions(o.in_features(), o.out_features(), o.kernel_size()).bias(true)));
    act1 = register_module("act1", layers::create_act("relu", /*inplace=*/true));
    drop = register_module("drop", nn::Dropout(o.drop_rate()));
    fc2 = register_module("fc2", nn::Conv2d(nn::Conv2dOptions(o.out_features(), o.out_features(), 1).bias(true)));
    act2 = register_module("act2", layers::create_act("relu", /*inplace=*/true));
  }

  at::Tensor forward(at::Tensor x) {
    const int64_t k = options.kernel_size();
    if (x.size(-2) < k || x.size(-1) < k) {
      x = at::adaptive_avg_pool2d(x, {std::max(k, x.size(-2)), std::max(k, x.size(-1))});
    }
    return act2(fc2(drop(act1(fc1(x)))));
  }

  ConvMlpOptions options;
  nn::Conv2d fc1{nullptr}, fc2{nullptr};
  layers::Activation act1{nullptr}, act2{nullptr};
  nn::Dropout drop{nullptr};
};
TORCH_MODULE(ConvMlp);

// One registered architecture.
struct VggSpec {
  std::string name;
  std::string cfg;  // a key of kCfgs
  bool batch_norm = false;
};

class VggImpl : public ClassifierImpl {
 public:
  VggImpl(const VggSpec& spec, const ModelArgs& args) : num_classes_(args.num_classes) {
    validate_model_args(spec.name, args);
    if (args.drop_path_rate) {
      throw UsageError(spec.name + ": drop_path_rate is not supported (timm's VGG has no drop path and refuses it)");
    }
    cfg_.input_size = {3, 224, 224};
    cfg_.interpolation = "bilinear";
    cfg_.crop_pct = 0.875;
    cfg_.crop_mode = "center";
    cfg_.first_conv = "features.0";
    cfg_.classifier = "head.fc";
    cfg_.hf_hub_id = timm_hub_id(spec.name, kDefaultTags);
    const int64_t num_features = build_features(kCfgs.at(spec.cfg), spec.batch_norm, args.in_chans);
    pre_logits =
        register_module("pre_logits", ConvMlp(ConvMlpOptions(num_features, kHeadHiddenSize).drop_rate(args.drop_rate)));
    head = register_module(
        "head", layers::ClassifierHeadModule(layers::ClassifierHeadModuleOptions(kHeadHiddenSize, num_classes_)
                                                 .pool_type(args.global_pool.value_or("avg"))
                                                 .drop_rate(args.drop_rate)));
    init_weights();
  }

  // timm's forward_features: the features Sequential alone, (N, 512, H/32, W/32).
  at::Tensor forward_features(at::Tensor x) override { return features->forward(x); }

  // timm's feature levels: the input of each max pool (the ReLU before it) at
  // strides 1 .. 16, then the last max pool's output at 32.
  std::vector<FeatureInfo> feature_info() const override { return feature_info_; }

  // timm's forward_intermediates: the features' layers in order, taking the
  // output of each level's layer (feature_ends_); with stop_early only up to
  // the last level taken, whose output is then the final features. norm is
  // ignored (no final norm); NCHW only.
  Intermediates forward_intermediates(at::Tensor x,
                                      const IntermediatesOptions& options = IntermediatesOptions()) override {
    check_output_fmt(describe_model(*this), options.output_fmt(), {"NCHW"});
    const auto layers = features->begin();
    return run_feature_steps(
        x, features->size(), feature_ends_, [&](size_t i, at::Tensor t) { return layers[i].forward(t); }, options);
  }

  // timm's forward_head: pre_logits (the ConvMlp) first, then the
  // ClassifierHead, up to its fc with pre_logits.
  at::Tensor forward_head(at::Tensor x, bool pre_logits_only = false) override {
    x = pre_logits(x);
    return pre_logits_only ? head->forward_pre_logits(x) : head(x);
  }

  at::Tensor forward(at::Tensor x) override { return forward_head(forward_features(x)); }
  int64_t num_classes() const override { return num_classes_; }
  const PretrainedCfg& pretrained_cfg() const override { return cfg_; }
  // timm's, the same coarse and fine (BN layers land in groups of their own, as there).
  GroupMatcher group_matcher(bool coarse) const override {
    (void)coarse;
    return {{"stem", {{R"(^features\.0)", std::nullopt}}}, {"blocks", {{R"(^features\.(\d+))", std::nullopt}}}};
  }
  // set_grad_checkpointing: ClassifierImpl's refusal, as timm's assert.

  nn::Sequential features{nullptr};
  ConvMlp pre_logits{nullptr};
  layers::ClassifierHeadModule head{nullptr};

 private:
  // timm's VGG.__init__ loop over the cfg; each level is recorded at the layer
  // before a max pool (and at the last layer), as timm's feature_info and
  // feature_ends. Returns the features' channels.
  int64_t build_features(const std::vector<int64_t>& widths, bool batch_norm, int64_t in_chans) {
    nn::Sequential seq;
    int64_t prev_chs = in_chans;
    int64_t stride = 1;
    auto add_level = [&] {
      const size_t last = seq->size() - 1;
      feature_ends_.push_back(last);
      feature_info_.push_back({prev_chs, stride, "features." + std::to_string(last)});
    };
    for (const int64_t v : widths) {
      if (v == kPool) {
        add_level();
        seq->push_back(nn::MaxPool2d(nn::MaxPool2dOptions(2).stride(2)));
        stride *= 2;
        continue;
      }
      seq->push_back(nn::Conv2d(nn::Conv2dOptions(prev_chs, v, 3).padding(1)));
      if (batch_norm) seq->push_back(layers::BatchNorm2d(v));
      seq->push_back(layers::create_act("relu", /*inplace=*/true));
      prev_chs = v;
    }
    add_level();
    features = register_module("features", seq);
    return prev_chs;
  }

  // timm's _initialize_weights: every conv (fc1 / fc2 included)
  // kaiming_normal fan_out for ReLU, bias zero; the head's Linear normal std
  // 0.01, bias zero; BatchNorm weight 1 / bias 0 (the modules' default).
  void init_weights() {
    c10::NoGradGuard no_grad;
    for (auto& module : modules(/*include_self=*/false)) {
      if (auto* c = module->as<nn::Conv2d>()) {
        nn::init::kaiming_normal_(c->weight, 0.0, torch::kFanOut, torch::kReLU);
        if (c->bias.defined()) c->bias.zero_();
      } else if (auto* l = module->as<nn::Linear>()) {
        l->weight.normal_(0.0, 0.01);
        if (l->bias.defined()) l->bias.zero_();
      }
    }
  }

  PretrainedCfg cfg_;
  int64_t num_classes_;
  std::vector<size_t> feature_ends_;  // index in features of each level's layer
  std::vector<FeatureInfo> feature_info_;
};

std::vector<VggSpec> vgg_specs() {
  std::vector<VggSpec> specs;
  for (const char* cfg : {"vgg11", "vgg13", "vgg16", "vgg19"}) {
    specs.push_back({cfg, cfg, false});
    specs.push_back({std::string(cfg) + "_bn", cfg, true});
  }
  return specs;
}

std::string describe(const VggSpec& spec) {
  const auto& widths = kCfgs.at(spec.cfg);
  const auto convs = std::count_if(widths.begin(), widths.end(), [](int64_t v) { return v != kPool; });
  return "VGG " + std::to_string(convs + 3) + "-layer (" + std::to_string(convs) + " convs, conv MLP head" +
         (spec.batch_norm ? ", BatchNorm)" : ")");
}

}  // namespace
}  // namespace timm::vgg

TIMM_PLUGIN("vgg") {
  for (const auto& spec : timm::vgg::vgg_specs()) {
    registrar.add_model(spec.name, timm::vgg::describe(spec), [spec](const timm::ModelArgs& args) -> timm::ModelPtr {
      return std::make_shared<timm::vgg::VggImpl>(spec, args);
    });
  }
}
