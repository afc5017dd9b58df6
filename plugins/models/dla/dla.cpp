// Deep Layer Aggregation (timm/models/dla.py), with timm's module names so
// state_dict keys equal timm's: dla34, dla46_c, dla46x_c, dla60, dla60x,
// dla60x_c, dla60_res2net, dla60_res2next, dla102, dla102x, dla102x2, dla169.
// - base_layer: conv 7x7 / 1, BN, ReLU; level0 and level1: Sequentials of
//   conv 3x3 (the first of level1 / 2), BN, ReLU;
// - level2..5: DlaTree, a recursive aggregation tree. A tree of depth 1 has
//   two blocks (tree1 with the stride, tree2), an optional project (conv 1x1
//   + BN, where the channels change) for tree1's shortcut and a root (conv
//   1x1 over the concatenation of tree2's and tree1's outputs and the
//   children handed down, BN, the root shortcut where set, ReLU); a deeper
//   tree has two subtrees, tree2 getting tree1's output as a child;
//   level_root trees (level3..5) hand their max-pooled input down too;
// - blocks: DlaBasic (dla34), DlaBottleneck (grouped where cardinality > 1)
//   or DlaBottle2neck (Res2Net / Res2NeXt, scale 4);
// - head: global_pool (unflattened), dropout at drop_rate, fc a 1x1 Conv2d
//   (timm's use_conv), flatten unless global_pool is ''.
//
// Supported: num_classes (0: no classifier), in_chans, drop_rate, global_pool,
// and these timm DLA keywords as --model-kwargs: cardinality, base_width,
// shortcut_root and output_stride (32 only, as timm asserts). Refused as timm
// refuses them: drop_path_rate (a TypeError there), other keywords, and
// set_grad_checkpointing(true) (timm asserts it is not enabled).
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
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/pooling.h>

#include "timm/base/error.hpp"
#include "timm/base/names.hpp"
#include "timm/layers/activations.hpp"
#include "timm/layers/batch_norm.hpp"
#include "timm/layers/classifier.hpp"
#include "timm/models/features.hpp"
#include "timm/models/model.hpp"
#include "timm/plugin/plugin.hpp"

namespace timm::dla {
namespace {

namespace nn = torch::nn;

// timm 1.0.31's default pretrained tag of each model: "in1k" for all.
const std::map<std::string, std::string> kDefaultTags = {
    {"dla34", "in1k"},    {"dla46_c", "in1k"}, {"dla46x_c", "in1k"},      {"dla60x_c", "in1k"},
    {"dla60", "in1k"},    {"dla60x", "in1k"},  {"dla102", "in1k"},        {"dla102x", "in1k"},
    {"dla102x2", "in1k"}, {"dla169", "in1k"},  {"dla60_res2net", "in1k"}, {"dla60_res2next", "in1k"}};

// The --model-kwargs keys taken (timm DLA's constructor arguments that text
// can carry; levels, channels and block cannot).
const std::vector<std::string> kKnownKwargs = {"cardinality", "base_width", "shortcut_root", "output_stride"};

enum class BlockType { kBasic, kBottleneck, kBottle2neck };

// One registered architecture.
struct DlaSpec {
  std::string name;
  std::vector<int64_t> levels;
  std::vector<int64_t> channels;
  BlockType block = BlockType::kBottleneck;
  int64_t cardinality = 1;
  int64_t base_width = 64;
  bool shortcut_root = false;
};

// What every block and tree of one model shares.
struct BlockArgs {
  std::string model;  // for messages
  BlockType block = BlockType::kBottleneck;
  int64_t cardinality = 1;
  double base_width = 64;
  bool root_shortcut = false;
};

// Throughout this file, as timm's nn.ReLU(inplace=True) and `out += shortcut`,
// every ReLU and residual add writes into a fresh norm output or sum that
// nothing else reads and whose backward does not need it, instead of allocating
// a new tensor.

nn::Conv2d conv(int64_t in, int64_t out, int64_t kernel, int64_t stride = 1, int64_t padding = 0, int64_t groups = 1) {
  return nn::Conv2d(nn::Conv2dOptions(in, out, kernel).stride(stride).padding(padding).groups(groups).bias(false));
}

// timm's mid_planes of DlaBottleneck / DlaBottle2neck:
// int(floor(outplanes * (base_width / 64)) * cardinality) // 2, checked to be
// a positive multiple of cardinality (the grouped convs' groups).
int64_t bottleneck_width(const BlockArgs& a, int64_t outplanes) {
  const double scaled = std::floor(static_cast<double>(outplanes) * (a.base_width / 64.0));
  const int64_t mid = static_cast<int64_t>(scaled) * a.cardinality / 2;
  if (mid < 1 || mid % a.cardinality != 0) {
    throw UsageError(a.model + ": cardinality " + std::to_string(a.cardinality) + " and base_width " +
                     std::to_string(a.base_width) + " give a bottleneck width of " + std::to_string(mid) + " for " +
                     std::to_string(outplanes) + " channels; expected a positive multiple of cardinality");
  }
  return mid;
}

// A tree node: a block, or a DlaTree. timm's forward(x, shortcut, children):
// a block adds `shortcut` (x when undefined) and ignores children; a tree
// appends to `children` and hands it down.
class DlaNode : public nn::Module {
 public:
  virtual at::Tensor forward(const at::Tensor& x, const at::Tensor& shortcut, std::vector<at::Tensor>* children) = 0;
};

// timm's DlaBasic: conv 3x3 (stride), BN, ReLU, conv 3x3, BN, + shortcut, ReLU.
class DlaBasicImpl : public DlaNode {
 public:
  DlaBasicImpl(int64_t inplanes, int64_t planes, int64_t stride) {
    conv1 = register_module("conv1", conv(inplanes, planes, 3, stride, 1));
    bn1 = register_module("bn1", layers::BatchNorm2d(planes));
    conv2 = register_module("conv2", conv(planes, planes, 3, 1, 1));
    bn2 = register_module("bn2", layers::BatchNorm2d(planes));
  }

  at::Tensor forward(const at::Tensor& x, const at::Tensor& shortcut, std::vector<at::Tensor>*) override {
    at::Tensor out = bn1(conv1(x)).relu_();
    out = bn2(conv2(out));
    return out.add_(shortcut.defined() ? shortcut : x).relu_();
  }

  nn::Conv2d conv1{nullptr}, conv2{nullptr};
  layers::BatchNorm2d bn1{nullptr}, bn2{nullptr};
};

// timm's DlaBottleneck: conv 1x1, BN, ReLU, conv 3x3 (stride, groups
// cardinality), BN, ReLU, conv 1x1, BN, + shortcut, ReLU.
class DlaBottleneckImpl : public DlaNode {
 public:
  DlaBottleneckImpl(int64_t inplanes, int64_t outplanes, int64_t stride, const BlockArgs& a) {
    const int64_t mid = bottleneck_width(a, outplanes);
    conv1 = register_module("conv1", conv(inplanes, mid, 1));
    bn1 = register_module("bn1", layers::BatchNorm2d(mid));
    conv2 = register_module("conv2", conv(mid, mid, 3, stride, 1, a.cardinality));
    bn2 = register_module("bn2", layers::BatchNorm2d(mid));
    conv3 = register_module("conv3", conv(mid, outplanes, 1));
    bn3 = register_module("bn3", layers::BatchNorm2d(outplanes));
  }

  at::Tensor forward(const at::Tensor& x, const at::Tensor& shortcut, std::vector<at::Tensor>*) override {
    at::Tensor out = bn1(conv1(x)).relu_();
    out = bn2(conv2(out)).relu_();
    out = bn3(conv3(out));
    return out.add_(shortcut.defined() ? shortcut : x).relu_();
  }

  nn::Conv2d conv1{nullptr}, conv2{nullptr}, conv3{nullptr};
  layers::BatchNorm2d bn1{nullptr}, bn2{nullptr}, bn3{nullptr};
};

// timm's DlaBottle2neck (scale 4): conv 1x1 to 4 * width, BN, ReLU; split
// into 4 widths, the first 3 each through conv 3x3 (stride, groups
// cardinality), BN, ReLU, each after the first adding the previous output
// unless the block strides; the 4th passed on (3x3 / stride average pool
// where it strides); concatenated, conv 1x1, BN, + shortcut, ReLU.
class DlaBottle2neckImpl : public DlaNode {
 public:
  static constexpr int64_t kScale = 4;

  DlaBottle2neckImpl(int64_t inplanes, int64_t outplanes, int64_t stride, const BlockArgs& a)
      : is_first_(stride > 1), width_(bottleneck_width(a, outplanes)) {
    conv1 = register_module("conv1", conv(inplanes, width_ * kScale, 1));
    bn1 = register_module("bn1", layers::BatchNorm2d(width_ * kScale));
    convs = register_module("convs", nn::ModuleList());
    bns = register_module("bns", nn::ModuleList());
    for (int64_t i = 0; i < kScale - 1; ++i) {
      conv_list_.push_back(conv(width_, width_, 3, stride, 1, a.cardinality));
      bn_list_.push_back(layers::BatchNorm2d(width_));
      convs->push_back(conv_list_.back());
      bns->push_back(bn_list_.back());
    }
    if (is_first_) {
      pool = register_module("pool",
                             nn::AvgPool2d(nn::AvgPool2dOptions(3).stride(stride).padding(1).count_include_pad(true)));
    }
    conv3 = register_module("conv3", conv(width_ * kScale, outplanes, 1));
    bn3 = register_module("bn3", layers::BatchNorm2d(outplanes));
  }

  at::Tensor forward(const at::Tensor& x, const at::Tensor& shortcut, std::vector<at::Tensor>*) override {
    const at::Tensor out = bn1(conv1(x)).relu_();
    const std::vector<at::Tensor> spx = at::split(out, width_, 1);
    std::vector<at::Tensor> spo;
    spo.reserve(kScale);
    at::Tensor sp;
    for (size_t i = 0; i < conv_list_.size(); ++i) {
      sp = (i == 0 || is_first_) ? spx[i] : sp + spx[i];
      sp = bn_list_[i](conv_list_[i](sp)).relu_();
      spo.push_back(sp);
    }
    spo.push_back(pool ? pool(spx.back()) : spx.back());
    at::Tensor y = bn3(conv3(at::cat(spo, 1)));
    return y.add_(shortcut.defined() ? shortcut : x).relu_();
  }

  nn::Conv2d conv1{nullptr}, conv3{nullptr};
  layers::BatchNorm2d bn1{nullptr}, bn3{nullptr};
  nn::ModuleList convs{nullptr}, bns{nullptr};
  nn::AvgPool2d pool{nullptr};

 private:
  bool is_first_;
  int64_t width_;
  std::vector<nn::Conv2d> conv_list_;  // convs' and bns' modules, typed
  std::vector<layers::BatchNorm2d> bn_list_;
};

std::shared_ptr<DlaNode> make_block(const BlockArgs& a, int64_t in, int64_t out, int64_t stride) {
  switch (a.block) {
    case BlockType::kBasic:
      return std::make_shared<DlaBasicImpl>(in, out, stride);
    case BlockType::kBottleneck:
      return std::make_shared<DlaBottleneckImpl>(in, out, stride, a);
    case BlockType::kBottle2neck:
      break;
  }
  return std::make_shared<DlaBottle2neckImpl>(in, out, stride, a);
}

// timm's DlaRoot: conv 1x1 over the concatenated children, BN, + the first
// child when shortcut, ReLU.
class DlaRootImpl : public nn::Module {
 public:
  DlaRootImpl(int64_t in_channels, int64_t out_channels, bool shortcut) : shortcut_(shortcut) {
    this->conv = register_module("conv", dla::conv(in_channels, out_channels, 1));
    bn = register_module("bn", layers::BatchNorm2d(out_channels));
  }

  at::Tensor forward(const std::vector<at::Tensor>& x_children) {
    at::Tensor x = bn(conv(at::cat(x_children, 1)));
    if (shortcut_) x.add_(x_children[0]);
    return x.relu_();
  }

  nn::Conv2d conv{nullptr};
  layers::BatchNorm2d bn{nullptr};

 private:
  bool shortcut_;
};
TORCH_MODULE(DlaRoot);

// timm's DlaTree: registered in timm's order (downsample and project have no
// state unless project is the conv + BN of a depth-1 tree whose channels
// change; then it precedes tree1).
class DlaTreeImpl : public DlaNode {
 public:
  DlaTreeImpl(int64_t levels, const BlockArgs& a, int64_t in_channels, int64_t out_channels, int64_t stride,
              bool level_root, int64_t root_dim)
      : level_root_(level_root) {
    if (root_dim == 0) root_dim = 2 * out_channels;
    if (level_root) root_dim += in_channels;
    if (stride > 1)
      downsample = register_module("downsample", nn::MaxPool2d(nn::MaxPool2dOptions(stride).stride(stride)));
    if (levels == 1) {
      if (in_channels != out_channels) {
        project = register_module(
            "project", nn::Sequential(conv(in_channels, out_channels, 1), layers::BatchNorm2d(out_channels)));
      }
      tree1 = register_module("tree1", make_block(a, in_channels, out_channels, stride));
      tree2 = register_module("tree2", make_block(a, out_channels, out_channels, 1));
      root = register_module("root", DlaRoot(root_dim, out_channels, a.root_shortcut));
    } else {
      tree1 = register_module(
          "tree1", std::make_shared<DlaTreeImpl>(levels - 1, a, in_channels, out_channels, stride, false, 0));
      tree2 = register_module("tree2", std::make_shared<DlaTreeImpl>(levels - 1, a, out_channels, out_channels, 1,
                                                                     false, root_dim + out_channels));
    }
  }

  at::Tensor forward(const at::Tensor& x) { return forward(x, at::Tensor(), nullptr); }

  at::Tensor forward(const at::Tensor& x, const at::Tensor&, std::vector<at::Tensor>* children) override {
    // timm's children=None: a fresh list (tree1 of a deeper tree gets none).
    std::vector<at::Tensor> own_children;
    if (children == nullptr) children = &own_children;
    const at::Tensor bottom = downsample ? downsample(x) : x;
    const at::Tensor shortcut = project ? project->forward(bottom) : bottom;
    if (level_root_) children->push_back(bottom);
    const at::Tensor x1 = tree1->forward(x, shortcut, nullptr);
    if (root) {
      std::vector<at::Tensor> root_in{tree2->forward(x1, at::Tensor(), nullptr), x1};
      root_in.insert(root_in.end(), children->begin(), children->end());
      return root(root_in);
    }
    children->push_back(x1);
    return tree2->forward(x1, at::Tensor(), children);
  }

  nn::MaxPool2d downsample{nullptr};
  nn::Sequential project{nullptr};
  std::shared_ptr<DlaNode> tree1, tree2;
  DlaRoot root{nullptr};

 private:
  bool level_root_;
};

class DlaImpl : public ClassifierImpl {
 public:
  DlaImpl(const DlaSpec& spec, const ModelArgs& args) : num_classes_(args.num_classes), drop_rate_(args.drop_rate) {
    validate_model_args(spec.name, args, kKnownKwargs);
    if (args.drop_path_rate) {
      throw UsageError(spec.name + ": drop_path_rate is not supported (timm's DLA has no drop path and refuses it)");
    }
    if (const auto os = model_kwarg_double(spec.name, args, "output_stride"); os && *os != 32.0) {
      throw UsageError(spec.name + ": output_stride=" + args.kwargs.at("output_stride") +
                       ": only 32 is supported (timm's DLA asserts output_stride == 32)");
    }
    BlockArgs a;
    a.model = spec.name;
    a.block = spec.block;
    a.cardinality = model_kwarg_positive_int(spec.name, args, "cardinality").value_or(spec.cardinality);
    a.base_width = static_cast<double>(spec.base_width);
    if (const auto bw = model_kwarg_double(spec.name, args, "base_width")) {
      // timm takes any number (a float scales the width as well).
      if (!(*bw > 0.0 && *bw <= 65536.0)) {
        throw UsageError(spec.name + ": base_width=" + args.kwargs.at("base_width") +
                         ": expected a number in (0, 65536]");
      }
      a.base_width = *bw;
    }
    a.root_shortcut = model_kwarg_bool(spec.name, args, "shortcut_root").value_or(spec.shortcut_root);
    cfg_.input_size = {3, 224, 224};
    cfg_.interpolation = "bilinear";
    cfg_.crop_pct = 0.875;
    cfg_.crop_mode = "center";
    cfg_.first_conv = "base_layer.0";
    cfg_.classifier = "fc";
    cfg_.hf_hub_id = timm_hub_id(spec.name, kDefaultTags);

    const auto& ch = spec.channels;
    const auto& lv = spec.levels;
    base_layer =
        register_module("base_layer", nn::Sequential(conv(args.in_chans, ch[0], 7, 1, 3), layers::BatchNorm2d(ch[0]),
                                                     layers::create_act("relu", /*inplace=*/true)));
    level0 = register_module("level0", make_conv_level(ch[0], ch[0], lv[0], 1));
    level1 = register_module("level1", make_conv_level(ch[0], ch[1], lv[1], 2));
    level2 = register_module("level2", std::make_shared<DlaTreeImpl>(lv[2], a, ch[1], ch[2], 2, false, 0));
    level3 = register_module("level3", std::make_shared<DlaTreeImpl>(lv[3], a, ch[2], ch[3], 2, true, 0));
    level4 = register_module("level4", std::make_shared<DlaTreeImpl>(lv[4], a, ch[3], ch[4], 2, true, 0));
    level5 = register_module("level5", std::make_shared<DlaTreeImpl>(lv[5], a, ch[4], ch[5], 2, true, 0));
    for (size_t i = 0; i < 6; ++i) {
      feature_info_.push_back({ch[i], int64_t{1} << i, "level" + std::to_string(i)});
    }

    num_features_ = ch[5];
    const std::string pool_type = args.global_pool.value_or("avg");
    global_pool = register_module("global_pool", layers::SelectAdaptivePool2d(pool_type));
    flatten_ = !pool_type.empty();
    if (num_classes_ > 0) {
      fc = register_module(
          "fc", nn::Conv2d(nn::Conv2dOptions(num_features_ * global_pool->feat_mult(), num_classes_, 1).bias(true)));
    }
    init_weights();
  }

  // timm's forward_features: base_layer, level0..5, (N, C, H/32, W/32).
  at::Tensor forward_features(at::Tensor x) override {
    x = base_layer->forward(x);
    x = level0->forward(x);
    x = level1->forward(x);
    x = level2->forward(x);
    x = level3->forward(x);
    x = level4->forward(x);
    return level5->forward(x);
  }

  // timm's feature levels: level0..5 at strides 1 to 32.
  std::vector<FeatureInfo> feature_info() const override { return feature_info_; }

  // timm's forward_intermediates: base_layer then level0..5 (with stop_early
  // up to the last level taken), taking each level's output; norm is ignored
  // (no final norm); NCHW only.
  Intermediates forward_intermediates(at::Tensor x,
                                      const IntermediatesOptions& options = IntermediatesOptions()) override {
    check_output_fmt(describe_model(*this), options.output_fmt(), {"NCHW"});
    // Step 0 is base_layer; step i + 1 runs level i, level i's output.
    auto step = [&](size_t i, at::Tensor t) {
      return i == 0 ? base_layer->forward(t) : forward_level(static_cast<int64_t>(i) - 1, t);
    };
    return run_feature_steps(x, 7, {1, 2, 3, 4, 5, 6}, step, options);
  }

  // timm's forward_head: global_pool (unflattened), head_drop, fc (a 1x1
  // conv) unless pre_logits, then flatten unless global_pool is ''.
  at::Tensor forward_head(at::Tensor features_out, bool pre_logits = false) override {
    at::Tensor x = global_pool(features_out);
    if (drop_rate_ > 0.0) x = at::dropout(x, drop_rate_, is_training());
    if (!pre_logits && fc) x = fc(x);
    return flatten_ ? x.flatten(1) : x;
  }

  at::Tensor forward(at::Tensor x) override { return forward_head(forward_features(x)); }

  // set_grad_checkpointing: ClassifierImpl's refusal of enable, as timm's assert.

  int64_t num_classes() const override { return num_classes_; }
  const PretrainedCfg& pretrained_cfg() const override { return cfg_; }
  // timm's, the same strings.
  GroupMatcher group_matcher(bool coarse) const override {
    GroupMatcher matcher = {{"stem", {{"^base_layer", std::nullopt}}}};
    if (coarse) {
      matcher.push_back({"blocks", {{R"(^level(\d+))", std::nullopt}}});
    } else {
      matcher.push_back({"blocks",
                         {{R"(^level(\d+)\.tree(\d+))", std::nullopt},
                          {R"(^level(\d+)\.root)", std::vector<double>{2}},
                          {R"(^level(\d+))", std::vector<double>{1}}}});
    }
    return matcher;
  }

  nn::Sequential base_layer{nullptr}, level0{nullptr}, level1{nullptr};
  std::shared_ptr<DlaTreeImpl> level2, level3, level4, level5;
  layers::SelectAdaptivePool2d global_pool{nullptr};
  nn::Conv2d fc{nullptr};  // null without a classifier (timm's Identity)

 private:
  at::Tensor forward_level(int64_t i, const at::Tensor& x) {
    switch (i) {
      case 0:
        return level0->forward(x);
      case 1:
        return level1->forward(x);
      case 2:
        return level2->forward(x);
      case 3:
        return level3->forward(x);
      case 4:
        return level4->forward(x);
      default:
        return level5->forward(x);
    }
  }

  // timm's _make_conv_level: `convs` times conv 3x3 (stride on the first), BN, ReLU.
  static nn::Sequential make_conv_level(int64_t inplanes, int64_t planes, int64_t convs, int64_t stride) {
    nn::Sequential seq;
    for (int64_t i = 0; i < convs; ++i) {
      seq->push_back(conv(inplanes, planes, 3, i == 0 ? stride : 1, 1));
      seq->push_back(layers::BatchNorm2d(planes));
      seq->push_back(layers::create_act("relu", /*inplace=*/true));
      inplanes = planes;
    }
    return seq;
  }

  // timm's init: every Conv2d (fc too) weight ~ N(0, sqrt(2 / (kh * kw *
  // out_channels))), BN weight 1 / bias 0 (the modules' default); fc's bias
  // keeps Conv2d's default init.
  void init_weights() {
    c10::NoGradGuard no_grad;
    for (auto& module : modules(/*include_self=*/false)) {
      if (auto* c = module->as<nn::Conv2d>()) {
        const auto& k = c->options.kernel_size();
        const double n = static_cast<double>((*k)[0] * (*k)[1] * c->options.out_channels());
        c->weight.normal_(0.0, std::sqrt(2.0 / n));
      }
    }
  }

  PretrainedCfg cfg_;
  int64_t num_classes_;
  double drop_rate_;
  int64_t num_features_ = 0;
  bool flatten_ = true;
  std::vector<FeatureInfo> feature_info_;
};

std::vector<DlaSpec> dla_specs() {
  const std::vector<int64_t> small = {16, 32, 64, 64, 128, 256};
  const std::vector<int64_t> wide = {16, 32, 128, 256, 512, 1024};
  return {
      {"dla34", {1, 1, 1, 2, 2, 1}, {16, 32, 64, 128, 256, 512}, BlockType::kBasic, 1, 64, false},
      {"dla46_c", {1, 1, 1, 2, 2, 1}, small, BlockType::kBottleneck, 1, 64, false},
      {"dla46x_c", {1, 1, 1, 2, 2, 1}, small, BlockType::kBottleneck, 32, 4, false},
      {"dla60", {1, 1, 1, 2, 3, 1}, wide, BlockType::kBottleneck, 1, 64, false},
      {"dla60_res2net", {1, 1, 1, 2, 3, 1}, wide, BlockType::kBottle2neck, 1, 28, false},
      {"dla60_res2next", {1, 1, 1, 2, 3, 1}, wide, BlockType::kBottle2neck, 8, 4, false},
      {"dla60x", {1, 1, 1, 2, 3, 1}, wide, BlockType::kBottleneck, 32, 4, false},
      {"dla60x_c", {1, 1, 1, 2, 3, 1}, small, BlockType::kBottleneck, 32, 4, false},
      {"dla102", {1, 1, 1, 3, 4, 1}, wide, BlockType::kBottleneck, 1, 64, true},
      {"dla102x", {1, 1, 1, 3, 4, 1}, wide, BlockType::kBottleneck, 32, 4, true},
      {"dla102x2", {1, 1, 1, 3, 4, 1}, wide, BlockType::kBottleneck, 64, 4, true},
      {"dla169", {1, 1, 2, 3, 5, 1}, wide, BlockType::kBottleneck, 1, 64, true},
  };
}

std::string describe(const DlaSpec& spec) {
  std::string text = "Deep Layer Aggregation (";
  switch (spec.block) {
    case BlockType::kBasic:
      text += "basic blocks";
      break;
    case BlockType::kBottleneck:
      text += "bottleneck blocks";
      break;
    case BlockType::kBottle2neck:
      text += "Res2Net blocks";
      break;
  }
  if (spec.cardinality > 1) text += ", cardinality " + std::to_string(spec.cardinality);
  text += ", tree levels ";
  text += joined_ints(spec.levels);
  if (spec.shortcut_root) text += ", root shortcuts";
  return text + ")";
}

}  // namespace
}  // namespace timm::dla

TIMM_PLUGIN("dla") {
  for (const auto& spec : timm::dla::dla_specs()) {
    registrar.add_model(spec.name, timm::dla::describe(spec), [spec](const timm::ModelArgs& args) -> timm::ModelPtr {
      return std::make_shared<timm::dla::DlaImpl>(spec, args);
    });
  }
}
