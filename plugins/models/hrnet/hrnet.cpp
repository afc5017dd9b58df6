// High-Resolution Networks (timm/models/hrnet.py), with timm's module names so
// state_dict keys equal timm's: hrnet_w18_small, hrnet_w18_small_v2,
// hrnet_w18, hrnet_w30, hrnet_w32, hrnet_w40, hrnet_w44, hrnet_w48,
// hrnet_w64, hrnet_w18_ssld and hrnet_w48_ssld: all 11 of timm 1.0.31's
// hrnet.py, with timm's default head='classification'.
// - stem: conv1 3x3 / 2 to stem_width, bn1, ReLU, conv2 3x3 / 2 to 64, bn2,
//   ReLU;
// - layer1: timm resnet's Bottleneck blocks (conv1 1x1, conv2 3x3, conv3 1x1,
//   each with its BN, a conv 1x1 + BN downsample where the channels change);
// - transition1..3: per branch of the next stage an Identity (same width),
//   conv 3x3 + BN + ReLU (new width) or, for a new branch, a chain of
//   conv 3x3 / 2 + BN + ReLU from the previous stage's last branch;
// - stage2..4: HighResolutionModules, each with per-branch Sequentials of
//   BasicBlocks and fuse_layers summing every branch into every branch
//   (conv 1x1 + BN + nearest upsample from lower resolutions, chains of
//   conv 3x3 / 2 + BN (+ ReLU but the last) from higher ones), then ReLU;
// - head: incre_modules (one Bottleneck per branch to 128, 256, 512, 1024
//   channels), downsamp_modules (conv 3x3 / 2 + BN + ReLU, summing the
//   branches from high to low resolution), final_layer (conv 1x1 to 2048 +
//   BN + ReLU), then global_pool, dropout at drop_rate and the classifier
//   (a Linear).
//
// Supported: num_classes (0: no classifier), in_chans, drop_rate,
// global_pool, and these timm HRNet keywords as --model-kwargs: stem_width,
// head_conv_bias (false for the _ssld models), output_stride (32 only, as timm
// asserts) and head ('classification' only: timm's 'incre' and '' heads
// return a list of branch maps, which this interface's one-tensor features
// cannot carry). Refused as timm refuses them: drop_path_rate (a TypeError
// there), other keywords, and set_grad_checkpointing(true) (timm asserts it is
// not enabled). timm's stage1..4 keywords (dicts) have no text form.
#include <cmath>
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
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/upsampling.h>

#include "timm/base/error.hpp"
#include "timm/base/names.hpp"
#include "timm/layers/activations.hpp"
#include "timm/layers/batch_norm.hpp"
#include "timm/layers/classifier.hpp"
#include "timm/models/features.hpp"
#include "timm/models/model.hpp"
#include "timm/plugin/plugin.hpp"

namespace timm::hrnet {
namespace {

namespace nn = torch::nn;

// timm 1.0.31's default pretrained tag of each model (the first listed).
const std::map<std::string, std::string> kDefaultTags = {
    {"hrnet_w18_small", "gluon_in1k"}, {"hrnet_w18_small_v2", "gluon_in1k"},
    {"hrnet_w18", "ms_aug_in1k"},      {"hrnet_w30", "ms_in1k"},
    {"hrnet_w32", "ms_in1k"},          {"hrnet_w40", "ms_in1k"},
    {"hrnet_w44", "ms_in1k"},          {"hrnet_w48", "ms_in1k"},
    {"hrnet_w64", "ms_in1k"},          {"hrnet_w18_ssld", "paddle_in1k"},
    {"hrnet_w48_ssld", "paddle_in1k"}};

// timm's test_input_size / test_crop_pct of the models whose default cfg has them
// (validate.py evaluates at them unless --use-train-size).
const std::map<std::string, TestSize> kTestSizes = {{"hrnet_w18_ssld", {288, 1.0}}, {"hrnet_w48_ssld", {288, 1.0}}};

// The --model-kwargs keys taken (timm HRNet's constructor arguments and cfg
// overrides that text can carry).
const std::vector<std::string> kKnownKwargs = {"stem_width", "head_conv_bias", "output_stride", "head"};

// The head's branch widths before the Bottleneck expansion (timm's head_channels).
constexpr int64_t kHeadChannels[4] = {32, 64, 128, 256};
constexpr int64_t kNumFeatures = 2048;

enum class BlockType { kBasic, kBottleneck };

int64_t expansion(BlockType type) { return type == BlockType::kBasic ? 1 : 4; }

// timm's stageN cfg dict (fuse_method is always 'SUM').
struct StageCfg {
  int64_t num_modules = 1;
  BlockType block = BlockType::kBasic;
  std::vector<int64_t> num_blocks;
  std::vector<int64_t> num_channels;
};

// One registered architecture.
struct HrnetSpec {
  std::string name;
  std::vector<StageCfg> stages;  // stage1..4
  bool head_conv_bias = true;
  std::string interpolation = "bilinear";
  double crop_pct = 0.875;
};

nn::Conv2d conv(int64_t in, int64_t out, int64_t kernel, int64_t stride = 1, int64_t padding = 0, bool bias = false) {
  return nn::Conv2d(nn::Conv2dOptions(in, out, kernel).stride(stride).padding(padding).bias(bias));
}

// conv 1x1 (stride) + BN, timm's downsample of a block whose shape changes.
nn::Sequential make_downsample(int64_t in, int64_t out, int64_t stride) {
  return nn::Sequential(conv(in, out, 1, stride), layers::BatchNorm2d(out));
}

// timm resnet's BasicBlock as HRNet builds it (no attention, drop block or
// drop path): conv 3x3 (stride), BN, ReLU, conv 3x3, BN, + shortcut, ReLU.
class HrBasicBlockImpl : public nn::Module {
 public:
  HrBasicBlockImpl(int64_t inplanes, int64_t planes, int64_t stride, nn::Sequential downsample) {
    conv1 = register_module("conv1", conv(inplanes, planes, 3, stride, 1));
    bn1 = register_module("bn1", layers::BatchNorm2d(planes));
    conv2 = register_module("conv2", conv(planes, planes, 3, 1, 1));
    bn2 = register_module("bn2", layers::BatchNorm2d(planes));
    if (downsample) this->downsample = register_module("downsample", downsample);
  }

  at::Tensor forward(const at::Tensor& x) {
    at::Tensor out = bn1(conv1(x)).relu_();
    out = bn2(conv2(out));
    return out.add_(downsample ? downsample->forward(x) : x).relu_();  // timm's += and ReLU(inplace=True)
  }

  nn::Conv2d conv1{nullptr}, conv2{nullptr};
  layers::BatchNorm2d bn1{nullptr}, bn2{nullptr};
  nn::Sequential downsample{nullptr};
};

// timm resnet's Bottleneck as HRNet builds it (width = planes): conv 1x1,
// BN, ReLU, conv 3x3 (stride), BN, ReLU, conv 1x1 to 4 * planes, BN,
// + shortcut, ReLU.
class HrBottleneckImpl : public nn::Module {
 public:
  HrBottleneckImpl(int64_t inplanes, int64_t planes, int64_t stride, nn::Sequential downsample) {
    const int64_t outplanes = planes * expansion(BlockType::kBottleneck);
    conv1 = register_module("conv1", conv(inplanes, planes, 1));
    bn1 = register_module("bn1", layers::BatchNorm2d(planes));
    conv2 = register_module("conv2", conv(planes, planes, 3, stride, 1));
    bn2 = register_module("bn2", layers::BatchNorm2d(planes));
    conv3 = register_module("conv3", conv(planes, outplanes, 1));
    bn3 = register_module("bn3", layers::BatchNorm2d(outplanes));
    if (downsample) this->downsample = register_module("downsample", downsample);
  }

  at::Tensor forward(const at::Tensor& x) {
    at::Tensor out = bn1(conv1(x)).relu_();
    out = bn2(conv2(out)).relu_();
    out = bn3(conv3(out));
    return out.add_(downsample ? downsample->forward(x) : x).relu_();  // timm's += and ReLU(inplace=True)
  }

  nn::Conv2d conv1{nullptr}, conv2{nullptr}, conv3{nullptr};
  layers::BatchNorm2d bn1{nullptr}, bn2{nullptr}, bn3{nullptr};
  nn::Sequential downsample{nullptr};
};

void push_block(nn::Sequential& seq, BlockType type, int64_t inplanes, int64_t planes, int64_t stride,
                nn::Sequential downsample) {
  if (type == BlockType::kBasic) {
    seq->push_back(std::make_shared<HrBasicBlockImpl>(inplanes, planes, stride, std::move(downsample)));
  } else {
    seq->push_back(std::make_shared<HrBottleneckImpl>(inplanes, planes, stride, std::move(downsample)));
  }
}

// timm's _make_layer / _make_one_branch: `blocks` blocks, the first with the
// stride and a downsample where the shape changes.
nn::Sequential make_layer(BlockType type, int64_t inplanes, int64_t planes, int64_t blocks, int64_t stride = 1) {
  const int64_t outplanes = planes * expansion(type);
  nn::Sequential downsample{nullptr};
  if (stride != 1 || inplanes != outplanes) downsample = make_downsample(inplanes, outplanes, stride);
  nn::Sequential seq;
  push_block(seq, type, inplanes, planes, stride, std::move(downsample));
  for (int64_t i = 1; i < blocks; ++i) push_block(seq, type, outplanes, planes, 1, nn::Sequential{nullptr});
  return seq;
}

// timm's nn.Sequential of nn.Sequentials (children "0", "1", ...), which
// torch's C++ Sequential cannot hold (its forward is a template).
class SeqChainImpl : public nn::Module {
 public:
  void push_back(nn::Sequential seq) {
    register_module(std::to_string(items_.size()), seq);
    items_.push_back(std::move(seq));
  }

  at::Tensor forward(at::Tensor x) {
    for (auto& seq : items_) x = seq->forward(x);
    return x;
  }

 private:
  std::vector<nn::Sequential> items_;
};
TORCH_MODULE(SeqChain);

// One entry of a transition or fuse layer: timm's nn.Identity (both null), a
// Sequential, or a Sequential of Sequentials.
struct Path {
  nn::Sequential seq{nullptr};
  SeqChain chain{nullptr};

  bool is_identity() const { return !seq && !chain; }
  at::Tensor operator()(const at::Tensor& x) const {
    // Copies of the holders: a const holder gives a const module.
    if (seq) {
      nn::Sequential s = seq;
      return s->forward(x);
    }
    if (chain) {
      SeqChain c = chain;
      return c->forward(x);
    }
    return x;
  }
  std::shared_ptr<nn::Module> module() const {
    if (seq) return seq.ptr();
    if (chain) return chain.ptr();
    return nn::Identity().ptr();
  }
};

// conv 3x3 / 2 + BN (+ ReLU). As timm's, the ReLU is in place in the
// transitions and not in the fuse chains (nn.ReLU(False)).
nn::Sequential down_conv(int64_t in, int64_t out, bool act, bool inplace = false) {
  nn::Sequential seq(conv(in, out, 3, 2, 1), layers::BatchNorm2d(out));
  if (act) seq->push_back(layers::create_act("relu", inplace));
  return seq;
}

// timm's HighResolutionModule (fuse_method 'SUM', multi_scale_output: every
// branch is fused, as timm's stages build them).
class HighResolutionModuleImpl : public nn::Module {
 public:
  // `num_in_chs` is updated to the branches' output widths, as timm's.
  HighResolutionModuleImpl(const StageCfg& cfg, std::vector<int64_t>& num_in_chs)
      : num_branches_(static_cast<int64_t>(cfg.num_channels.size())) {
    branches = register_module("branches", nn::ModuleList());
    for (size_t i = 0; i < cfg.num_channels.size(); ++i) {
      branch_list_.push_back(make_layer(cfg.block, num_in_chs[i], cfg.num_channels[i], cfg.num_blocks[i]));
      branches->push_back(branch_list_.back());
      num_in_chs[i] = cfg.num_channels[i] * expansion(cfg.block);
    }
    if (num_branches_ == 1) return;  // timm's fuse_layers is an Identity
    fuse_layers = register_module("fuse_layers", nn::ModuleList());
    for (int64_t i = 0; i < num_branches_; ++i) {
      nn::ModuleList fuse_layer;
      std::vector<Path> paths;
      for (int64_t j = 0; j < num_branches_; ++j) {
        Path path;
        const int64_t in_j = num_in_chs[static_cast<size_t>(j)];
        const int64_t in_i = num_in_chs[static_cast<size_t>(i)];
        if (j > i) {
          const double scale = static_cast<double>(int64_t{1} << (j - i));
          path.seq = nn::Sequential(
              conv(in_j, in_i, 1), layers::BatchNorm2d(in_i),
              nn::Upsample(
                  nn::UpsampleOptions().scale_factor(std::vector<double>{scale, scale}).mode(torch::kNearest)));
        } else if (j < i) {
          path.chain = SeqChain();
          for (int64_t k = 0; k < i - j; ++k) {
            const bool last = k == i - j - 1;
            path.chain->push_back(down_conv(in_j, last ? in_i : in_j, !last));
          }
        }
        fuse_layer->push_back(path.module());
        paths.push_back(path);
      }
      fuse_layers->push_back(fuse_layer);
      fuse_list_.push_back(std::move(paths));
    }
  }

  std::vector<at::Tensor> forward(std::vector<at::Tensor> x) {
    if (num_branches_ == 1) return {branch_list_[0]->forward(x[0])};
    for (size_t i = 0; i < branch_list_.size(); ++i) x[i] = branch_list_[i]->forward(x[i]);
    std::vector<at::Tensor> x_fuse;
    x_fuse.reserve(fuse_list_.size());
    for (const auto& paths : fuse_list_) {
      at::Tensor y;
      for (size_t j = 0; j < paths.size(); ++j) {
        y = y.defined() ? y + paths[j](x[j]) : paths[j](x[j]);
      }
      x_fuse.push_back(at::relu(y));
    }
    return x_fuse;
  }

  nn::ModuleList branches{nullptr}, fuse_layers{nullptr};

 private:
  int64_t num_branches_;
  std::vector<nn::Sequential> branch_list_;
  std::vector<std::vector<Path>> fuse_list_;
};

class HighResolutionNetImpl : public ClassifierImpl {
 public:
  HighResolutionNetImpl(const HrnetSpec& spec, const ModelArgs& args)
      : num_classes_(args.num_classes), drop_rate_(args.drop_rate) {
    validate_model_args(spec.name, args, kKnownKwargs);
    if (args.drop_path_rate) {
      throw UsageError(spec.name + ": drop_path_rate is not supported (timm's HRNet has no drop path and refuses it)");
    }
    if (const auto os = model_kwarg_double(spec.name, args, "output_stride"); os && *os != 32.0) {
      throw UsageError(spec.name + ": output_stride=" + args.kwargs.at("output_stride") +
                       ": only 32 is supported (timm's HRNet asserts output_stride == 32)");
    }
    if (const auto it = args.kwargs.find("head"); it != args.kwargs.end() && it->second != "classification") {
      throw UsageError(spec.name + ": head=" + it->second +
                       ": only 'classification' is supported (timm's 'incre' and '' heads return a list of branch "
                       "maps as features, which this model interface cannot return)");
    }
    const int64_t stem_width = model_kwarg_positive_int(spec.name, args, "stem_width").value_or(64);
    const bool head_conv_bias = model_kwarg_bool(spec.name, args, "head_conv_bias").value_or(spec.head_conv_bias);

    cfg_.input_size = {3, 224, 224};
    cfg_.interpolation = spec.interpolation;
    cfg_.crop_pct = spec.crop_pct;
    cfg_.crop_mode = "center";
    cfg_.first_conv = "conv1";
    cfg_.classifier = "classifier";
    cfg_.hf_hub_id = timm_hub_id(spec.name, kDefaultTags);
    set_test_size(cfg_, spec.name, kTestSizes);

    conv1 = register_module("conv1", conv(args.in_chans, stem_width, 3, 2, 1));
    bn1 = register_module("bn1", layers::BatchNorm2d(stem_width));
    conv2 = register_module("conv2", conv(stem_width, 64, 3, 2, 1));
    bn2 = register_module("bn2", layers::BatchNorm2d(64));

    const StageCfg& s1 = spec.stages[0];
    layer1 = register_module("layer1", make_layer(s1.block, 64, s1.num_channels[0], s1.num_blocks[0]));
    std::vector<int64_t> pre_stage_channels = {s1.num_channels[0] * expansion(s1.block)};
    nn::ModuleList* transitions[3] = {&transition1, &transition2, &transition3};
    std::vector<std::shared_ptr<HighResolutionModuleImpl>>* stage_lists[3] = {&stage2_list_, &stage3_list_,
                                                                              &stage4_list_};
    nn::ModuleList* stage_modules[3] = {&stage2, &stage3, &stage4};
    for (size_t s = 1; s < 4; ++s) {
      const StageCfg& cfg = spec.stages[s];
      std::vector<int64_t> num_channels;
      for (const int64_t c : cfg.num_channels) num_channels.push_back(c * expansion(cfg.block));
      *transitions[s - 1] =
          register_module("transition" + std::to_string(s),
                          make_transition_layer(pre_stage_channels, num_channels, transition_lists_[s - 1]));
      *stage_modules[s - 1] = register_module("stage" + std::to_string(s + 1), nn::ModuleList());
      for (int64_t m = 0; m < cfg.num_modules; ++m) {
        auto module = std::make_shared<HighResolutionModuleImpl>(cfg, num_channels);
        (*stage_modules[s - 1])->push_back(module);
        stage_lists[s - 1]->push_back(module);
      }
      pre_stage_channels = num_channels;
    }

    // timm's _make_head: incre_modules, downsamp_modules, final_layer.
    incre_modules = register_module("incre_modules", nn::ModuleList());
    for (size_t i = 0; i < pre_stage_channels.size(); ++i) {
      incre_list_.push_back(make_layer(BlockType::kBottleneck, pre_stage_channels[i], kHeadChannels[i], 1));
      incre_modules->push_back(incre_list_.back());
    }
    const int64_t head_exp = expansion(BlockType::kBottleneck);
    downsamp_modules = register_module("downsamp_modules", nn::ModuleList());
    for (size_t i = 0; i + 1 < pre_stage_channels.size(); ++i) {
      const int64_t in = kHeadChannels[i] * head_exp;
      const int64_t out = kHeadChannels[i + 1] * head_exp;
      downsamp_list_.push_back(nn::Sequential(conv(in, out, 3, 2, 1, head_conv_bias), layers::BatchNorm2d(out),
                                              layers::create_act("relu", /*inplace=*/true)));
      downsamp_modules->push_back(downsamp_list_.back());
    }
    final_layer = register_module(
        "final_layer", nn::Sequential(conv(kHeadChannels[3] * head_exp, kNumFeatures, 1, 1, 0, head_conv_bias),
                                      layers::BatchNorm2d(kNumFeatures), layers::create_act("relu", /*inplace=*/true)));
    auto head = layers::create_classifier(kNumFeatures, num_classes_, args.global_pool.value_or("avg"));
    global_pool = register_module("global_pool", head.global_pool);
    classifier = head.fc;
    register_module("classifier", classifier.ptr());

    // timm's feature_info: the stem at stride 2 (64 channels, whatever
    // stem_width is, as timm records it), then the incre modules' outputs.
    feature_info_.push_back({64, 2, "stem"});
    for (size_t i = 0; i < 4; ++i) {
      feature_info_.push_back({kHeadChannels[i] * head_exp, int64_t{4} << i, "stage" + std::to_string(i + 1)});
    }
    init_weights();
  }

  // timm's forward_features: stem, stages, then the classification head's
  // aggregation (incre, downsamp, final_layer), (N, 2048, H/32, W/32).
  at::Tensor forward_features(at::Tensor x) override {
    const std::vector<at::Tensor> yl = stages(stem2(stem1(x)));
    at::Tensor y;
    for (size_t i = 0; i < incre_list_.size(); ++i) {
      y = i == 0 ? incre_list_[i]->forward(yl[i]) : incre_list_[i]->forward(yl[i]) + downsamp_list_[i - 1]->forward(y);
    }
    return final_layer->forward(y);
  }

  // timm's feature levels: the stem (after conv1) at stride 2, then the
  // four branches through their incre modules at strides 4 to 32.
  std::vector<FeatureInfo> feature_info() const override { return feature_info_; }

  // timm's forward_intermediates: level 0 is the stem after bn1 / ReLU
  // (stop_early at it skips the rest), levels 1..4 the final stage's branch
  // outputs through the incre modules (with stop_early only those up to the
  // last taken run); the final features are the aggregation head's output
  // when every incre module ran. Where timm returns the list of branch
  // outputs as final features instead (stop_early before level 4) they are
  // left undefined: Intermediates holds one tensor. norm is ignored (no
  // final norm); NCHW only.
  Intermediates forward_intermediates(at::Tensor x,
                                      const IntermediatesOptions& options = IntermediatesOptions()) override {
    check_output_fmt(describe_model(*this), options.output_fmt(), {"NCHW"});
    const int64_t levels = static_cast<int64_t>(feature_info_.size());
    const auto [take_indices, max_index] = feature_take_indices(levels, options.indices());
    const std::vector<bool> take = take_mask(levels, take_indices);
    Intermediates out;
    x = stem1(x);
    if (take[0]) out.intermediates.push_back(x);
    if (max_index == 0 && options.stop_early()) {
      if (!options.intermediates_only()) out.final = x;
      return out;
    }
    const std::vector<at::Tensor> yl = stages(stem2(x));
    const size_t n_incre = options.stop_early() ? static_cast<size_t>(max_index) : incre_list_.size();
    const bool aggregate = !options.intermediates_only();
    at::Tensor y;
    for (size_t i = 0; i < n_incre; ++i) {
      const at::Tensor t = incre_list_[i]->forward(yl[i]);
      if (take[i + 1]) out.intermediates.push_back(t);
      if (aggregate) y = i == 0 ? t : t + downsamp_list_[i - 1]->forward(y);
    }
    if (aggregate && n_incre == downsamp_list_.size() + 1) out.final = final_layer->forward(y);
    return out;
  }

  // timm's forward_head: global_pool, head_drop, then the classifier unless pre_logits.
  at::Tensor forward_head(at::Tensor features_out, bool pre_logits = false) override {
    at::Tensor x = global_pool(features_out);
    if (drop_rate_ > 0.0) x = at::dropout(x, drop_rate_, is_training());
    return pre_logits ? x : classifier.forward(x);
  }

  at::Tensor forward(at::Tensor x) override { return forward_head(forward_features(x)); }

  // set_grad_checkpointing: ClassifierImpl's refusal of enable, as timm's assert.

  int64_t num_classes() const override { return num_classes_; }
  const PretrainedCfg& pretrained_cfg() const override { return cfg_; }
  // timm's, the same strings (its group is named "block_types"); the
  // transitions join the previous group (suffix 99999) in the fine one.
  GroupMatcher group_matcher(bool coarse) const override {
    GroupMatcher matcher = {{"stem", {{"^conv[12]|bn[12]", std::nullopt}}}};
    if (coarse) {
      matcher.push_back({"block_types", {{R"(^(?:layer|stage|transition)(\d+))", std::nullopt}}});
    } else {
      matcher.push_back({"block_types",
                         {{R"(^layer(\d+)\.(\d+))", std::nullopt},
                          {R"(^stage(\d+)\.(\d+))", std::nullopt},
                          {R"(^transition(\d+))", std::vector<double>{99999}}}});
    }
    return matcher;
  }

  nn::Conv2d conv1{nullptr}, conv2{nullptr};
  layers::BatchNorm2d bn1{nullptr}, bn2{nullptr};
  nn::Sequential layer1{nullptr};
  nn::ModuleList transition1{nullptr}, stage2{nullptr}, transition2{nullptr}, stage3{nullptr}, transition3{nullptr},
      stage4{nullptr};
  nn::ModuleList incre_modules{nullptr}, downsamp_modules{nullptr};
  nn::Sequential final_layer{nullptr};
  layers::SelectAdaptivePool2d global_pool{nullptr};
  nn::AnyModule classifier;  // Linear, or Identity without classes

 private:
  at::Tensor stem1(const at::Tensor& x) { return bn1(conv1(x)).relu_(); }
  at::Tensor stem2(const at::Tensor& x) { return bn2(conv2(x)).relu_(); }

  // timm's stages(): layer1, then each transition (an Identity passes its
  // branch through, other paths take the previous stage's last branch, as
  // timm's) and stage.
  std::vector<at::Tensor> stages(const at::Tensor& x0) {
    const at::Tensor x = layer1->forward(x0);
    std::vector<at::Tensor> xl;
    for (const auto& t : transition_lists_[0]) xl.push_back(t(x));
    std::vector<at::Tensor> yl = run_stage(stage2_list_, std::move(xl));
    for (size_t s = 1; s < 3; ++s) {
      xl.clear();
      const auto& ts = transition_lists_[s];
      for (size_t i = 0; i < ts.size(); ++i) xl.push_back(ts[i].is_identity() ? yl[i] : ts[i](yl.back()));
      yl = run_stage(s == 1 ? stage3_list_ : stage4_list_, std::move(xl));
    }
    return yl;
  }

  static std::vector<at::Tensor> run_stage(const std::vector<std::shared_ptr<HighResolutionModuleImpl>>& stage,
                                           std::vector<at::Tensor> x) {
    for (const auto& module : stage) x = module->forward(std::move(x));
    return x;
  }

  // timm's _make_transition_layer.
  static nn::ModuleList make_transition_layer(const std::vector<int64_t>& pre, const std::vector<int64_t>& cur,
                                              std::vector<Path>& paths) {
    nn::ModuleList list;
    for (size_t i = 0; i < cur.size(); ++i) {
      Path path;
      if (i < pre.size()) {
        if (cur[i] != pre[i]) {
          path.seq = nn::Sequential(conv(pre[i], cur[i], 3, 1, 1), layers::BatchNorm2d(cur[i]),
                                    layers::create_act("relu", /*inplace=*/true));
        }
      } else {
        path.chain = SeqChain();
        for (size_t j = 0; j < i + 1 - pre.size(); ++j) {
          const int64_t in = pre.back();
          const int64_t out = j == i - pre.size() ? cur[i] : in;
          path.chain->push_back(down_conv(in, out, /*act=*/true, /*inplace=*/true));
        }
      }
      list->push_back(path.module());
      paths.push_back(path);
    }
    return list;
  }

  // timm's init_weights: every Conv2d's weight kaiming normal (fan_out,
  // relu), conv biases at torch's default; BN weight 1 / bias 0 (their
  // default); the classifier keeps Linear's default init.
  void init_weights() {
    c10::NoGradGuard no_grad;
    for (auto& module : modules(/*include_self=*/false)) {
      if (auto* c = module->as<nn::Conv2d>()) {
        nn::init::kaiming_normal_(c->weight, 0.0, torch::kFanOut, torch::kReLU);
      }
    }
  }

  PretrainedCfg cfg_;
  int64_t num_classes_;
  double drop_rate_;
  std::vector<Path> transition_lists_[3];
  std::vector<std::shared_ptr<HighResolutionModuleImpl>> stage2_list_, stage3_list_, stage4_list_;
  std::vector<nn::Sequential> incre_list_, downsamp_list_;
  std::vector<FeatureInfo> feature_info_;
};

// timm's cfg_cls for the hrnet_wN models: stage1 four Bottlenecks of 64,
// then 1, 4 and 3 modules of four BasicBlocks per branch, widths w, 2w, 4w, 8w.
std::vector<StageCfg> standard_stages(int64_t w) {
  return {
      {1, BlockType::kBottleneck, {4}, {64}},
      {1, BlockType::kBasic, {4, 4}, {w, 2 * w}},
      {4, BlockType::kBasic, {4, 4, 4}, {w, 2 * w, 4 * w}},
      {3, BlockType::kBasic, {4, 4, 4, 4}, {w, 2 * w, 4 * w, 8 * w}},
  };
}

std::vector<HrnetSpec> hrnet_specs() {
  const std::vector<StageCfg> small = {
      {1, BlockType::kBottleneck, {1}, {32}},
      {1, BlockType::kBasic, {2, 2}, {16, 32}},
      {1, BlockType::kBasic, {2, 2, 2}, {16, 32, 64}},
      {1, BlockType::kBasic, {2, 2, 2, 2}, {16, 32, 64, 128}},
  };
  const std::vector<StageCfg> small_v2 = {
      {1, BlockType::kBottleneck, {2}, {64}},
      {1, BlockType::kBasic, {2, 2}, {18, 36}},
      {3, BlockType::kBasic, {2, 2, 2}, {18, 36, 72}},
      {2, BlockType::kBasic, {2, 2, 2, 2}, {18, 36, 72, 144}},
  };
  return {
      {"hrnet_w18", standard_stages(18), true, "bilinear", 0.95},
      {"hrnet_w18_small", small, true, "bicubic", 0.875},
      {"hrnet_w18_small_v2", small_v2, true, "bicubic", 0.875},
      {"hrnet_w18_ssld", standard_stages(18), false, "bilinear", 0.95},
      {"hrnet_w30", standard_stages(30), true, "bilinear", 0.875},
      {"hrnet_w32", standard_stages(32), true, "bilinear", 0.875},
      {"hrnet_w40", standard_stages(40), true, "bilinear", 0.875},
      {"hrnet_w44", standard_stages(44), true, "bilinear", 0.875},
      {"hrnet_w48", standard_stages(48), true, "bilinear", 0.875},
      {"hrnet_w48_ssld", standard_stages(48), false, "bilinear", 0.95},
      {"hrnet_w64", standard_stages(64), true, "bilinear", 0.875},
  };
}

std::string describe(const HrnetSpec& spec) {
  std::string text = "HRNet (branch widths ";
  const auto& widths = spec.stages[3].num_channels;
  text += joined_ints(widths);
  text += ", modules per stage ";
  for (size_t i = 0; i < spec.stages.size(); ++i) {
    if (i > 0) text += '-';
    text += std::to_string(spec.stages[i].num_modules);
  }
  text += ", classification head";
  if (!spec.head_conv_bias) text += " without conv biases";
  return text + ")";
}

}  // namespace
}  // namespace timm::hrnet

TIMM_PLUGIN("hrnet") {
  for (const auto& spec : timm::hrnet::hrnet_specs()) {
    registrar.add_model(spec.name, timm::hrnet::describe(spec), [spec](const timm::ModelArgs& args) -> timm::ModelPtr {
      return std::make_shared<timm::hrnet::HighResolutionNetImpl>(spec, args);
    });
  }
}
