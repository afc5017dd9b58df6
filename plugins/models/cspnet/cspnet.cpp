// Cross Stage Partial networks (timm/models/cspnet.py), with timm's module
// names so state_dict keys equal timm's: cspresnet50, cspresnet50d,
// cspresnet50w, cspresnext50, cspdarknet53, darknet17, darknet21,
// sedarknet21, darknet53, darknetaa53 and the cs3* models (cs3darknet_s / m /
// l / x, cs3darknet_focus_s / m / l / x, cs3sedarknet_l / x / xdw,
// cs3edgenet_x, cs3se_edgenet_x): all 23 of timm 1.0.31's cspnet.py.
// - stem: ConvNormAct conv1..N (the first at stride 2 unless the stem stride
//   is 1, the last at stride 2 too for a stride-4 stem without pool), then
//   for a stride-4 stem "pool" (3x3 / 2 max pool); the cs3darknet_focus
//   models' one 6x6 / 2 conv with padding 2;
// - stages: CrossStage ('csp': conv_down, conv_exp split in two, blocks on
//   the second half, conv_transition_b, concat, conv_transition),
//   CrossStage3 ('cs3': conv_down, conv_exp split, blocks on the first half,
//   concat, conv_transition) or DarkStage ('dark': conv_down then blocks);
//   conv_down is a 3x3 ConvNormAct at the stage stride, or with avg_down
//   (darknetaa53) a 2x2 average pool then a 1x1 ConvNormAct (children "0",
//   "1" as timm's Sequential);
// - blocks: BottleneckBlock (conv1 1x1, conv2 3x3 grouped, attn2, conv3 1x1
//   without act, residual add then act3), DarkBlock (conv1 1x1, attn, conv2
//   3x3, residual add) or EdgeBlock (conv1 3x3 grouped, attn, conv2 1x1,
//   residual add); attn is timm's SEModule ('se') with the model's act;
// - head: timm's ClassifierHead (global_pool, dropout at drop_rate, fc).
//
// Supported: num_classes (0: no fc), in_chans, drop_rate, drop_path_rate
// (per-block linear schedule), global_pool, and the timm keywords
// output_stride (8, 16 or 32: later stages dilated), zero_init_last and
// act_layer as --model-kwargs. Refused as timm refuses them: other
// keywords, an output_stride outside (8, 16, 32), and --grad-checkpointing
// (timm's CspNet asserts it is not enabled).
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
#include "timm/layers/activations.hpp"
#include "timm/layers/classifier.hpp"
#include "timm/layers/drop_path.hpp"
#include "timm/layers/norm_act.hpp"
#include "timm/layers/squeeze_excite.hpp"
#include "timm/models/features.hpp"
#include "timm/models/model.hpp"
#include "timm/plugin/plugin.hpp"

namespace timm::cspnet {
namespace {

namespace nn = torch::nn;

// timm 1.0.31's default pretrained tag of each model (the first tag of its
// default_cfgs); the others have only "untrained" (no weights, no hub id).
const std::map<std::string, std::string> kDefaultTags = {
    {"cspresnet50", "ra_in1k"},
    {"cspresnext50", "ra_in1k"},
    {"cspdarknet53", "ra_in1k"},
    {"darknet53", "c2ns_in1k"},
    {"darknetaa53", "c2ns_in1k"},
    {"cs3darknet_m", "c2ns_in1k"},
    {"cs3darknet_l", "c2ns_in1k"},
    {"cs3darknet_x", "c2ns_in1k"},
    {"cs3darknet_focus_s", "ra4_e3600_r256_in1k"},
    {"cs3darknet_focus_m", "c2ns_in1k"},
    {"cs3darknet_focus_l", "c2ns_in1k"},
    {"cs3sedarknet_l", "c2ns_in1k"},
    {"cs3sedarknet_x", "c2ns_in1k"},
    {"cs3edgenet_x", "c2_in1k"},
    {"cs3se_edgenet_x", "c2ns_in1k"},
};

// timm's test_input_size / test_crop_pct of the models whose default cfg has them
// (validate.py evaluates at them unless --use-train-size).
const std::map<std::string, TestSize> kTestSizes = {
    {"darknet53", {288, 1.0}},           {"darknetaa53", {288, 1.0}},         {"cs3darknet_m", {288, 0.95}},
    {"cs3darknet_l", {288, 0.95}},       {"cs3darknet_x", {288, 1.0}},        {"cs3darknet_focus_s", {320, 1.0}},
    {"cs3darknet_focus_m", {288, 0.95}}, {"cs3darknet_focus_l", {288, 0.95}}, {"cs3sedarknet_l", {288, 0.95}},
    {"cs3sedarknet_x", {288, 1.0}},      {"cs3edgenet_x", {288, 1.0}},        {"cs3se_edgenet_x", {320, 1.0}}};

// The --model-kwargs keys taken: timm CspNet's constructor arguments and
// CspModelCfg fields that text can carry.
const std::vector<std::string> kKnownKwargs = {"output_stride", "zero_init_last", "act_layer"};

// Python's round() (halves to even), as timm's int(round(...)) channel counts.
int64_t py_round(double v) { return static_cast<int64_t>(std::nearbyint(v)); }

// timm's CspStemCfg.
struct StemCfg {
  std::vector<int64_t> out_chs;
  int64_t stride = 2;
  int64_t kernel_size = 3;
  std::optional<int64_t> padding;  // get_padding when unset (timm's '')
  bool pool = false;               // timm's pool='max'
};

// One stage of timm's CspStagesCfg, after _pad_arg.
struct StageCfg {
  int64_t depth = 1;
  int64_t out_chs = 64;
  int64_t stride = 2;
  int64_t groups = 1;
  double block_ratio = 1.0;
  double bottle_ratio = 1.0;
  bool avg_down = false;
  std::string attn_layer;  // "" or "se"
  std::optional<double> attn_rd_ratio;
  std::string stage_type = "csp";     // csp, cs3, dark
  std::string block_type = "bottle";  // bottle, dark, edge
  double expand_ratio = 1.0;
  bool cross_linear = false;
  bool down_growth = false;
};

// timm's CspStagesCfg as written in model_cfgs: a per-stage field given as
// fewer values than stages is padded with its last value (_pad_arg).
struct StagesArgs {
  std::vector<int64_t> depth;
  std::vector<int64_t> out_chs;
  std::vector<int64_t> stride = {2};
  std::vector<int64_t> groups = {1};
  std::vector<double> block_ratio = {1.0};
  std::vector<double> bottle_ratio = {1.0};
  bool avg_down = false;
  std::string attn_layer;
  std::optional<double> attn_rd_ratio;
  std::string stage_type = "csp";
  std::string block_type = "bottle";
  std::vector<double> expand_ratio = {1.0};
  bool cross_linear = false;
  bool down_growth = false;
};

template <typename T>
T padded(const std::vector<T>& v, size_t i) {
  return v[std::min(i, v.size() - 1)];
}

std::vector<StageCfg> make_stages(const StagesArgs& a) {
  std::vector<StageCfg> stages;
  for (size_t i = 0; i < a.depth.size(); ++i) {
    StageCfg s;
    s.depth = a.depth[i];
    s.out_chs = a.out_chs[i];
    s.stride = padded(a.stride, i);
    s.groups = padded(a.groups, i);
    s.block_ratio = padded(a.block_ratio, i);
    s.bottle_ratio = padded(a.bottle_ratio, i);
    s.avg_down = a.avg_down;
    s.attn_layer = a.attn_layer;
    s.attn_rd_ratio = a.attn_rd_ratio;
    s.stage_type = a.stage_type;
    s.block_type = a.block_type;
    s.expand_ratio = padded(a.expand_ratio, i);
    s.cross_linear = a.cross_linear;
    s.down_growth = a.down_growth;
    stages.push_back(s);
  }
  return stages;
}

// timm's CspModelCfg (norm_layer batchnorm, aa_layer None in every model).
struct CspCfg {
  StemCfg stem;
  std::vector<StageCfg> stages;
  std::string act_layer = "leaky_relu";
};

// One registered model: its architecture and its default pretrained cfg's
// differences from timm's cspnet _cfg.
struct CspSpec {
  std::string name;
  CspCfg cfg;
  std::string interpolation = "bilinear";
  double crop_pct = 0.887;
  bool half_mean_std = false;  // mean = std = (0.5, 0.5, 0.5)
};

// The conv-norm-act unit of every CSP module: timm's ConvNormAct with
// BatchNormAct2d (eps 1e-5) and the model's activation.
layers::ConvNormAct conv_norm_act(int64_t in, int64_t out, int64_t kernel, const std::string& act, int64_t stride = 1,
                                  int64_t dilation = 1, int64_t groups = 1, bool apply_act = true,
                                  std::optional<int64_t> padding = std::nullopt) {
  return layers::ConvNormAct(layers::ConvNormActOptions(in, out, kernel)
                                 .stride(stride)
                                 .dilation(dilation)
                                 .groups(groups)
                                 .apply_act(apply_act)
                                 .act_layer(act)
                                 .padding(padding));
}

// A block's arguments, as the stages pass them.
struct BlockArgs {
  std::string type;  // bottle, dark, edge
  int64_t in_chs = 0;
  int64_t out_chs = 0;
  int64_t dilation = 1;
  double bottle_ratio = 1.0;
  int64_t groups = 1;
  std::string act_layer;
  std::string attn_layer;
  std::optional<double> attn_rd_ratio;
  double drop_path = 0.0;
};

// timm's BottleneckBlock, DarkBlock and EdgeBlock in one module, each with
// timm's children in timm's order (so the keys and their order are timm's).
class CspBlockImpl : public nn::Module {
 public:
  explicit CspBlockImpl(const BlockArgs& a) : bottle_(a.type == "bottle") {
    const int64_t mid_chs = py_round(static_cast<double>(a.out_chs) * a.bottle_ratio);
    auto attn = [&](int64_t channels) {
      layers::SEModuleOptions options(channels);
      options.act_layer(a.act_layer);
      if (a.attn_rd_ratio) options.rd_ratio(*a.attn_rd_ratio);
      return layers::SEModule(options);
    };
    if (a.type == "bottle") {
      conv1 = register_module("conv1", conv_norm_act(a.in_chs, mid_chs, 1, a.act_layer));
      conv2 = register_module("conv2", conv_norm_act(mid_chs, mid_chs, 3, a.act_layer, 1, a.dilation, a.groups));
      // timm's attn_last is never set by the stages: the attention follows conv2.
      if (!a.attn_layer.empty()) this->attn = register_module("attn2", attn(mid_chs));
      conv3 = register_module("conv3", conv_norm_act(mid_chs, a.out_chs, 1, a.act_layer, 1, 1, 1, false));
    } else if (a.type == "dark") {
      conv1 = register_module("conv1", conv_norm_act(a.in_chs, mid_chs, 1, a.act_layer));
      if (!a.attn_layer.empty()) this->attn = register_module("attn", attn(mid_chs));
      conv2 = register_module("conv2", conv_norm_act(mid_chs, a.out_chs, 3, a.act_layer, 1, a.dilation, a.groups));
    } else {
      conv1 = register_module("conv1", conv_norm_act(a.in_chs, mid_chs, 3, a.act_layer, 1, a.dilation, a.groups));
      if (!a.attn_layer.empty()) this->attn = register_module("attn", attn(mid_chs));
      conv2 = register_module("conv2", conv_norm_act(mid_chs, a.out_chs, 1, a.act_layer));
    }
    if (a.drop_path > 0.0) drop_path = register_module("drop_path", layers::DropPath(a.drop_path));
    if (bottle_) act3 = register_module("act3", layers::create_act(a.act_layer));
  }

  at::Tensor forward(const at::Tensor& shortcut) {
    at::Tensor x = conv1(shortcut);
    if (bottle_) {
      x = conv2(x);
      if (attn) x = attn(x);
      x = conv3(x);
    } else {
      if (attn) x = attn(x);
      x = conv2(x);
    }
    if (drop_path) x = drop_path(x);
    x = x + shortcut;
    return bottle_ ? act3(x) : x;
  }

  // timm's zero_init_last: the last conv's BN weight (conv3 in the
  // bottleneck, conv2 otherwise) to zero.
  void zero_init_last() {
    auto& last = bottle_ ? conv3 : conv2;
    nn::init::zeros_(last->bn->weight);
  }

  layers::ConvNormAct conv1{nullptr}, conv2{nullptr}, conv3{nullptr};
  layers::SEModule attn{nullptr};
  layers::DropPath drop_path{nullptr};
  layers::Activation act3{nullptr};

 private:
  bool bottle_;
};
TORCH_MODULE(CspBlock);

// A stage's arguments, as timm's create_csp_stages passes them.
struct StageArgs {
  StageCfg cfg;
  int64_t in_chs = 0;
  int64_t stride = 1;  // after output_stride
  int64_t dilation = 1;
  int64_t first_dilation = 1;
  std::string act_layer;
  std::vector<double> block_dpr;
};

// timm's CrossStage ('csp'), CrossStage3 ('cs3') and DarkStage ('dark').
class CspStageImpl : public nn::Module {
 public:
  explicit CspStageImpl(const StageArgs& a) : type_(a.cfg.stage_type) {
    const StageCfg& c = a.cfg;
    const std::string& act = a.act_layer;
    const bool dark = type_ == "dark";
    const int64_t down_chs = dark || c.down_growth ? c.out_chs : a.in_chs;
    int64_t prev_chs = a.in_chs;
    if (dark || a.stride != 1 || a.first_dilation != a.dilation) {
      if (c.avg_down) {
        nn::Sequential seq;
        if (a.stride == 2) {
          seq->push_back("0", nn::AvgPool2d(nn::AvgPool2dOptions(2).stride(2)));
        } else {
          seq->push_back("0", nn::Identity());
        }
        seq->push_back("1", conv_norm_act(a.in_chs, c.out_chs, 1, act, 1, 1, c.groups));
        conv_down_pool = register_module("conv_down", seq);
      } else {
        conv_down = register_module("conv_down",
                                    conv_norm_act(a.in_chs, down_chs, 3, act, a.stride, a.first_dilation, c.groups));
      }
      prev_chs = down_chs;
    }
    if (!dark) {
      expand_chs_ = py_round(static_cast<double>(c.out_chs) * c.expand_ratio);
      conv_exp = register_module("conv_exp", conv_norm_act(prev_chs, expand_chs_, 1, act, 1, 1, 1, !c.cross_linear));
      prev_chs = expand_chs_ / 2;
    }
    const int64_t block_out_chs = py_round(static_cast<double>(c.out_chs) * c.block_ratio);
    blocks = nn::Sequential();
    for (int64_t i = 0; i < c.depth; ++i) {
      BlockArgs b;
      b.type = c.block_type;
      b.in_chs = prev_chs;
      b.out_chs = block_out_chs;
      b.dilation = a.dilation;
      b.bottle_ratio = c.bottle_ratio;
      b.groups = c.groups;
      b.act_layer = act;
      b.attn_layer = c.attn_layer;
      b.attn_rd_ratio = c.attn_rd_ratio;
      b.drop_path = a.block_dpr.empty() ? 0.0 : a.block_dpr[static_cast<size_t>(i)];
      CspBlock block(b);
      block_list_.push_back(block);
      blocks->push_back(std::to_string(i), block);
      prev_chs = block_out_chs;
    }
    register_module("blocks", blocks);
    if (type_ == "csp") {
      conv_transition_b = register_module("conv_transition_b", conv_norm_act(prev_chs, expand_chs_ / 2, 1, act));
    }
    if (!dark) conv_transition = register_module("conv_transition", conv_norm_act(expand_chs_, c.out_chs, 1, act));
  }

  at::Tensor forward(const at::Tensor& input) {
    at::Tensor x = input;
    if (conv_down) x = conv_down(x);
    if (conv_down_pool) x = conv_down_pool->forward(x);
    if (type_ == "dark") return blocks->forward(x);
    x = conv_exp(x);
    const std::vector<at::Tensor> parts = x.split(expand_chs_ / 2, 1);
    if (type_ == "csp") {
      const at::Tensor xb = conv_transition_b(blocks->forward(parts[1])).contiguous();
      return conv_transition(at::cat({parts[0], xb}, 1));
    }
    const at::Tensor x1 = blocks->forward(parts[0]);
    return conv_transition(at::cat({x1, parts[1]}, 1));
  }

  const std::vector<CspBlock>& block_list() const { return block_list_; }

  layers::ConvNormAct conv_down{nullptr};
  nn::Sequential conv_down_pool{nullptr};  // avg_down: "0" pool, "1" 1x1 ConvNormAct
  layers::ConvNormAct conv_exp{nullptr};
  nn::Sequential blocks{nullptr};
  layers::ConvNormAct conv_transition_b{nullptr};
  layers::ConvNormAct conv_transition{nullptr};

 private:
  std::string type_;
  int64_t expand_chs_ = 0;
  std::vector<CspBlock> block_list_;
};
TORCH_MODULE(CspStage);

class CspNetImpl : public ClassifierImpl {
 public:
  CspNetImpl(const CspSpec& spec, const ModelArgs& args) : num_classes_(args.num_classes) {
    const std::string& name = spec.name;
    validate_model_args(name, args, kKnownKwargs);
    CspCfg cfg = spec.cfg;
    if (const auto it = args.kwargs.find("act_layer"); it != args.kwargs.end()) {
      const auto& names = layers::activation_names();
      if (std::find(names.begin(), names.end(), it->second) == names.end()) {
        throw UsageError(name + ": act_layer=" + it->second + ": not a known activation name");
      }
      cfg.act_layer = it->second;
    }
    int64_t output_stride = 32;
    if (const std::optional<double> os = model_kwarg_double(name, args, "output_stride")) {
      if (*os != 8.0 && *os != 16.0 && *os != 32.0) {
        throw UsageError(name + ": output_stride=" + args.kwargs.at("output_stride") + ": expected 8, 16 or 32");
      }
      output_stride = static_cast<int64_t>(*os);
    }
    const bool zero_init_last = model_kwarg_bool(name, args, "zero_init_last").value_or(true);

    cfg_.input_size = {3, 256, 256};
    cfg_.interpolation = spec.interpolation;
    cfg_.crop_pct = spec.crop_pct;
    cfg_.crop_mode = "center";
    if (spec.half_mean_std) {
      cfg_.mean = {0.5, 0.5, 0.5};
      cfg_.std = {0.5, 0.5, 0.5};
    }
    cfg_.first_conv = "stem.conv1.conv";
    cfg_.classifier = "head.fc";
    cfg_.hf_hub_id = timm_hub_id(name, kDefaultTags);
    set_test_size(cfg_, name, kTestSizes);

    const std::vector<FeatureInfo> stem_feats = build_stem(cfg, args.in_chans);
    feature_info_.assign(stem_feats.begin(), stem_feats.end() - 1);
    build_stages(cfg, args.drop_path_rate.value_or(0.0), output_stride, stem_feats.back());
    // The stem children that are feature taps, in order.
    const auto stem_children = stem->named_children();
    for (const auto& f : feature_info_) {
      if (f.module.rfind("stem.", 0) != 0) continue;
      const std::string child = f.module.substr(5);
      for (size_t i = 0; i < stem_children.size(); ++i) {
        if (stem_children[i].key() == child) stem_feat_ends_.push_back(i);
      }
    }
    num_features_ = feature_info_.back().num_chs;
    head = register_module("head",
                           layers::ClassifierHeadModule(layers::ClassifierHeadModuleOptions(num_features_, num_classes_)
                                                            .pool_type(args.global_pool.value_or("avg"))
                                                            .drop_rate(args.drop_rate)));
    init_weights(zero_init_last);
  }

  // timm's forward_features: stem then stages.
  at::Tensor forward_features(at::Tensor x) override {
    x = stem->forward(x);
    return stages->forward(x);
  }

  // timm's feature_info: the stem taps (the output of the stem conv before a
  // stride-2 step or the stem pool, where a stride-2 stage follows it), then
  // each stage.
  std::vector<FeatureInfo> feature_info() const override { return feature_info_; }

  // timm's forward_intermediates: the stem's modules in order, taking the
  // stem levels; then the stages (all, or with stop_early up to the last level
  // taken). norm is ignored (no final norm); NCHW only.
  Intermediates forward_intermediates(at::Tensor x,
                                      const IntermediatesOptions& options = IntermediatesOptions()) override {
    check_output_fmt(describe_model(*this), options.output_fmt(), {"NCHW"});
    const auto num_stem_feat = static_cast<int64_t>(stem_feat_ends_.size());
    const auto num_stages = static_cast<int64_t>(stage_list_.size());
    const auto [take_indices, max_index] = feature_take_indices(num_stem_feat + num_stages, options.indices());
    const std::vector<bool> take = take_mask(num_stem_feat + num_stages, take_indices);
    Intermediates out;
    size_t feat_idx = 0;
    size_t i = 0;
    for (auto& module : *stem) {
      x = module.forward(x);
      if (std::find(stem_feat_ends_.begin(), stem_feat_ends_.end(), i) != stem_feat_ends_.end()) {
        if (take[feat_idx]) out.intermediates.push_back(x);
        ++feat_idx;
      }
      ++i;
    }
    const int64_t stages_run =
        options.stop_early() ? std::min(num_stages, std::max<int64_t>(0, max_index - num_stem_feat + 1)) : num_stages;
    for (int64_t s = 0; s < stages_run; ++s) {
      x = stage_list_[static_cast<size_t>(s)]->forward(x);
      if (take[feat_idx]) out.intermediates.push_back(x);
      ++feat_idx;
    }
    if (!options.intermediates_only()) out.final = x;
    return out;
  }

  // timm's forward_head: the ClassifierHead, up to its fc with pre_logits.
  at::Tensor forward_head(at::Tensor x, bool pre_logits = false) override {
    return pre_logits ? head->forward_pre_logits(x) : head(x);
  }

  at::Tensor forward(at::Tensor x) override { return forward_head(forward_features(x)); }

  // set_grad_checkpointing: ClassifierImpl's refusal, as timm's assert.
  int64_t num_classes() const override { return num_classes_; }
  const PretrainedCfg& pretrained_cfg() const override { return cfg_; }
  // timm's, the same strings; the transition convs join their stage's last
  // block (MATCH_PREV_GROUP, suffix 99999), the rest of a stage is (stage, 0).
  GroupMatcher group_matcher(bool coarse) const override {
    GroupMatcher matcher = {{"stem", {{"^stem", std::nullopt}}}};
    if (coarse) {
      matcher.push_back({"blocks", {{R"(^stages\.(\d+))", std::nullopt}}});
    } else {
      matcher.push_back({"blocks",
                         {{R"(^stages\.(\d+)\.blocks\.(\d+))", std::nullopt},
                          {R"(^stages\.(\d+)\..*transition)", std::vector<double>{99999}},
                          {R"(^stages\.(\d+))", std::vector<double>{0}}}});
    }
    return matcher;
  }

  nn::Sequential stem{nullptr};
  nn::Sequential stages{nullptr};
  layers::ClassifierHeadModule head{nullptr};

 private:
  // timm's create_csp_stem: returns its feature list, the last entry the
  // stem's output.
  std::vector<FeatureInfo> build_stem(const CspCfg& cfg, int64_t in_chans) {
    const StemCfg& s = cfg.stem;
    nn::Sequential seq;
    std::vector<FeatureInfo> feats;
    std::optional<FeatureInfo> prev_feat;
    int64_t prev_chs = in_chans;
    const size_t last_idx = s.out_chs.size() - 1;
    int64_t stem_stride = 1;
    for (size_t i = 0; i < s.out_chs.size(); ++i) {
      const std::string conv_name = "conv" + std::to_string(i + 1);
      const int64_t conv_stride = (i == 0 && s.stride > 1) || (i == last_idx && s.stride > 2 && !s.pool) ? 2 : 1;
      if (conv_stride > 1 && prev_feat) feats.push_back(*prev_feat);
      seq->push_back(std::string(conv_name), conv_norm_act(prev_chs, s.out_chs[i], s.kernel_size, cfg.act_layer,
                                                           conv_stride, 1, 1, true, i == 0 ? s.padding : std::nullopt));
      stem_stride *= conv_stride;
      prev_chs = s.out_chs[i];
      prev_feat = FeatureInfo{prev_chs, stem_stride, "stem." + conv_name};
    }
    if (s.pool) {
      if (prev_feat) feats.push_back(*prev_feat);
      seq->push_back("pool", nn::MaxPool2d(nn::MaxPool2dOptions(3).stride(2).padding(1)));
      stem_stride *= 2;
      prev_feat = FeatureInfo{prev_chs, stem_stride, "stem.pool"};
    }
    feats.push_back(*prev_feat);
    stem = register_module("stem", seq);
    return feats;
  }

  // timm's create_csp_stages: output_stride dilates the stages past it;
  // feature levels are added before each strided stage and at the end.
  void build_stages(const CspCfg& cfg, double drop_path_rate, int64_t output_stride, const FeatureInfo& stem_feat) {
    int64_t total_depth = 0;
    for (const auto& s : cfg.stages) total_depth += s.depth;
    const std::vector<double> rates =
        drop_path_rate > 0.0 ? layers::drop_path_rates(drop_path_rate, total_depth) : std::vector<double>{};
    int64_t dilation = 1;
    int64_t net_stride = stem_feat.reduction;
    int64_t prev_chs = stem_feat.num_chs;
    FeatureInfo prev_feat = stem_feat;
    size_t block = 0;
    stages = nn::Sequential();
    for (size_t stage_idx = 0; stage_idx < cfg.stages.size(); ++stage_idx) {
      StageArgs a;
      a.cfg = cfg.stages[stage_idx];
      a.in_chs = prev_chs;
      a.act_layer = cfg.act_layer;
      int64_t stride = a.cfg.stride;
      if (stride != 1) feature_info_.push_back(prev_feat);
      if (net_stride >= output_stride && stride > 1) {
        dilation *= stride;
        stride = 1;
      }
      net_stride *= stride;
      a.stride = stride;
      a.dilation = dilation;
      a.first_dilation = dilation == 1 || dilation == 2 ? 1 : 2;
      if (!rates.empty()) {
        for (int64_t i = 0; i < a.cfg.depth; ++i) a.block_dpr.push_back(rates[block++]);
      }
      CspStage stage(a);
      stage_list_.push_back(stage);
      stages->push_back(stage);
      prev_chs = a.cfg.out_chs;
      prev_feat = FeatureInfo{prev_chs, net_stride, "stages." + std::to_string(stage_idx)};
    }
    feature_info_.push_back(prev_feat);
    register_module("stages", stages);
  }

  // timm's _init_weights: convs kaiming_normal (fan_out, relu), bias zero;
  // the fc normal std 0.01, bias zero; BN 1 / 0; then with zero_init_last
  // each block's last BN weight zero.
  void init_weights(bool zero_init_last) {
    c10::NoGradGuard no_grad;
    for (auto& module : modules(/*include_self=*/false)) {
      if (auto* c = module->as<nn::Conv2d>()) {
        nn::init::kaiming_normal_(c->weight, /*a=*/0.0, torch::kFanOut, torch::kReLU);
        if (c->bias.defined()) c->bias.zero_();
      } else if (auto* l = module->as<nn::Linear>()) {
        l->weight.normal_(0.0, 0.01);
        if (l->bias.defined()) l->bias.zero_();
      }
    }
    if (!zero_init_last) return;
    for (const auto& stage : stage_list_) {
      for (CspBlock b : stage->block_list()) b->zero_init_last();
    }
  }

  PretrainedCfg cfg_;
  int64_t num_classes_;
  int64_t num_features_ = 0;
  std::vector<size_t> stem_feat_ends_;
  std::vector<CspStage> stage_list_;
  std::vector<FeatureInfo> feature_info_;
};

// timm's _cs3_cfg.
CspCfg cs3_cfg(double width_multiplier = 1.0, double depth_multiplier = 1.0, bool focus = false,
               const std::string& attn_layer = "", std::optional<double> attn_rd_ratio = std::nullopt,
               double bottle_ratio = 1.0, const std::string& block_type = "dark") {
  auto width = [&](int64_t c) { return layers::make_divisible(static_cast<double>(c) * width_multiplier); };
  CspCfg cfg;
  if (focus) {
    cfg.stem = StemCfg{{width(64)}, 2, 6, 2, false};
  } else {
    cfg.stem = StemCfg{{width(32), width(64)}, 2, 3, std::nullopt, false};
  }
  StagesArgs s;
  for (const int64_t c : {128, 256, 512, 1024}) s.out_chs.push_back(width(c));
  for (const int64_t d : {3, 6, 9, 3})
    s.depth.push_back(static_cast<int64_t>(static_cast<double>(d) * depth_multiplier));
  s.bottle_ratio = {bottle_ratio};
  s.block_ratio = {0.5};
  s.attn_layer = attn_layer;
  s.attn_rd_ratio = attn_rd_ratio;
  s.stage_type = "cs3";
  s.block_type = block_type;
  cfg.stages = make_stages(s);
  cfg.act_layer = "silu";
  return cfg;
}

// The DarkNet / CSPDarkNet stem and widths: one 3x3 conv at stride 1, five stages.
CspCfg darknet_cfg(std::vector<int64_t> depth, const std::string& stage_type, double expand_first, double bottle_first,
                   double block_rest, bool avg_down = false, const std::string& attn_layer = "") {
  CspCfg cfg;
  cfg.stem = StemCfg{{32}, 1, 3, std::nullopt, false};
  StagesArgs s;
  s.depth = std::move(depth);
  s.out_chs = {64, 128, 256, 512, 1024};
  if (stage_type == "csp") {
    // cspdarknet53: expand 2 / bottle 0.5 / block 1 in the first stage, then 1 / 1 / 0.5.
    s.expand_ratio = {expand_first, 1.0};
    s.bottle_ratio = {bottle_first, 1.0};
    s.block_ratio = {1.0, block_rest};
    s.down_growth = true;
  } else {
    s.bottle_ratio = {bottle_first};
    s.block_ratio = {1.0};
  }
  s.avg_down = avg_down;
  s.attn_layer = attn_layer;
  s.stage_type = stage_type;
  s.block_type = "dark";
  cfg.stages = make_stages(s);
  return cfg;
}

// The CSPResNet(X)t stages: stride 1 then 2, cross_linear.
CspCfg cspresnet_cfg(StemCfg stem, std::vector<int64_t> out_chs, int64_t groups, double expand_ratio,
                     double bottle_ratio, double block_ratio) {
  CspCfg cfg;
  cfg.stem = std::move(stem);
  StagesArgs s;
  s.depth = {3, 3, 5, 2};
  s.out_chs = std::move(out_chs);
  s.stride = {1, 2};
  s.groups = {groups};
  s.expand_ratio = {expand_ratio};
  s.bottle_ratio = {bottle_ratio};
  s.block_ratio = {block_ratio};
  s.cross_linear = true;
  cfg.stages = make_stages(s);
  return cfg;
}

std::vector<CspSpec> cspnet_specs() {
  const StemCfg stem7{{64}, 4, 7, std::nullopt, true};
  const StemCfg stem_deep{{32, 32, 64}, 4, 3, std::nullopt, true};
  std::vector<CspSpec> specs;
  specs.push_back({"cspresnet50", cspresnet_cfg(stem7, {128, 256, 512, 1024}, 1, 2.0, 0.5, 1.0)});
  specs.push_back({"cspresnet50d", cspresnet_cfg(stem_deep, {128, 256, 512, 1024}, 1, 2.0, 0.5, 1.0)});
  specs.push_back({"cspresnet50w", cspresnet_cfg(stem_deep, {256, 512, 1024, 2048}, 1, 1.0, 0.25, 0.5)});
  specs.push_back({"cspresnext50", cspresnet_cfg(stem7, {256, 512, 1024, 2048}, 32, 1.0, 1.0, 0.5)});
  specs.push_back({"cspdarknet53", darknet_cfg({1, 2, 8, 8, 4}, "csp", 2.0, 0.5, 0.5)});
  specs.push_back({"darknet17", darknet_cfg({1, 1, 1, 1, 1}, "dark", 1.0, 0.5, 1.0)});
  specs.push_back({"darknet21", darknet_cfg({1, 1, 1, 2, 2}, "dark", 1.0, 0.5, 1.0)});
  specs.push_back({"sedarknet21", darknet_cfg({1, 1, 1, 2, 2}, "dark", 1.0, 0.5, 1.0, false, "se")});
  specs.push_back({"darknet53", darknet_cfg({1, 2, 8, 8, 4}, "dark", 1.0, 0.5, 1.0), "bicubic"});
  specs.push_back({"darknetaa53", darknet_cfg({1, 2, 8, 8, 4}, "dark", 1.0, 0.5, 1.0, true)});

  specs.push_back({"cs3darknet_s", cs3_cfg(0.5, 0.5), "bicubic"});
  specs.push_back({"cs3darknet_m", cs3_cfg(0.75, 0.67), "bicubic"});
  specs.push_back({"cs3darknet_l", cs3_cfg(), "bicubic"});
  specs.push_back({"cs3darknet_x", cs3_cfg(1.25, 1.33), "bicubic", 0.95});
  specs.push_back({"cs3darknet_focus_s", cs3_cfg(0.5, 0.5, true), "bicubic", 0.887, true});
  specs.push_back({"cs3darknet_focus_m", cs3_cfg(0.75, 0.67, true), "bicubic"});
  specs.push_back({"cs3darknet_focus_l", cs3_cfg(1.0, 1.0, true), "bicubic"});
  specs.push_back({"cs3darknet_focus_x", cs3_cfg(1.25, 1.33, true), "bicubic"});
  specs.push_back({"cs3sedarknet_l", cs3_cfg(1.0, 1.0, false, "se", 0.25), "bicubic"});
  specs.push_back({"cs3sedarknet_x", cs3_cfg(1.25, 1.33, false, "se"), "bicubic"});

  // cs3sedarknet_xdw: CrossStage / bottleneck stages (the CspStagesCfg
  // defaults), depthwise 3x3 convs in the last two stages, SE, SiLU.
  CspCfg xdw;
  xdw.stem = StemCfg{{32, 64}, 2, 3, std::nullopt, false};
  StagesArgs s;
  s.depth = {3, 6, 12, 4};
  s.out_chs = {256, 512, 1024, 2048};
  s.groups = {1, 1, 256, 512};
  s.bottle_ratio = {0.5};
  s.block_ratio = {0.5};
  s.attn_layer = "se";
  xdw.stages = make_stages(s);
  xdw.act_layer = "silu";
  specs.push_back({"cs3sedarknet_xdw", xdw, "bicubic"});

  specs.push_back({"cs3edgenet_x", cs3_cfg(1.25, 1.33, false, "", std::nullopt, 1.5, "edge"), "bicubic"});
  specs.push_back({"cs3se_edgenet_x", cs3_cfg(1.25, 1.33, false, "se", 0.25, 1.5, "edge"), "bicubic", 0.95});
  return specs;
}

std::string describe(const CspSpec& spec) {
  const CspCfg& c = spec.cfg;
  const StageCfg& first = c.stages.front();
  const std::string stage = first.stage_type == "csp"   ? "CrossStage"
                            : first.stage_type == "cs3" ? "CrossStage3"
                                                        : "DarkStage";
  const std::string block = first.block_type == "bottle" ? "bottleneck" : first.block_type == "dark" ? "dark" : "edge";
  std::string text = "CSPNet (" + stage + " stages, " + block + " blocks ";
  for (size_t i = 0; i < c.stages.size(); ++i) {
    if (i > 0) text += '-';
    text += std::to_string(c.stages[i].depth);
  }
  text += ", " + c.act_layer;
  if (!first.attn_layer.empty()) text += ", SE";
  return text + ")";
}

}  // namespace
}  // namespace timm::cspnet

TIMM_PLUGIN("cspnet") {
  for (const auto& spec : timm::cspnet::cspnet_specs()) {
    registrar.add_model(spec.name, timm::cspnet::describe(spec), [spec](const timm::ModelArgs& args) -> timm::ModelPtr {
      return std::make_shared<timm::cspnet::CspNetImpl>(spec, args);
    });
  }
}
