// ReXNet (timm/models/rexnet.py), with timm's module names so state_dict keys
// equal timm's: rexnet_100 .. rexnet_300 and the rounded-channel rexnetr_100 ..
// rexnetr_300 (channels made divisible by 8, by 16 for rexnetr_300). A stem
// ConvNormAct, `features`: 16 LinearBottleneck blocks (expansion conv, 3x3
// depthwise conv + BN, SE with a BatchNorm from block 3 on, ReLU6, 1x1
// projection, a partial residual over the block's input channels) and the
// final 1x1 ConvNormAct to 1280 * width_mult channels, then timm's
// ClassifierHead.
//
// Supported: num_classes (0: no head fc), in_chans, drop_rate (dropout before
// the fc; timm's create_model default is 0.2, train.py passes --drop, 0 unless
// set), drop_path_rate (timm's linear rule over the 16 blocks), global_pool,
// and --model-kwargs output_stride (32, 16 or 8: dilated depthwise convs, as
// timm's).
#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <torch/nn/init.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>

#include "timm/base/error.hpp"
#include "timm/layers/activations.hpp"
#include "timm/layers/classifier.hpp"
#include "timm/layers/drop_path.hpp"
#include "timm/layers/norm_act.hpp"
#include "timm/layers/squeeze_excite.hpp"
#include "timm/layers/weight_init.hpp"
#include "timm/models/features.hpp"
#include "timm/models/grad_checkpoint.hpp"
#include "timm/models/model.hpp"
#include "timm/plugin/plugin.hpp"

namespace timm::rexnet {
namespace {

namespace nn = torch::nn;

// timm 1.0.31's default pretrained tag of each model (the first tag of its
// default_cfgs); rexnetr_100 / 130 / 150 are untrained in timm.
const std::map<std::string, std::string> kDefaultTags = {
    {"rexnet_100", "nav_in1k"},         {"rexnet_130", "nav_in1k"}, {"rexnet_150", "nav_in1k"},
    {"rexnet_200", "nav_in1k"},         {"rexnet_300", "nav_in1k"}, {"rexnetr_200", "sw_in12k_ft_in1k"},
    {"rexnetr_300", "sw_in12k_ft_in1k"}};

// timm's test_input_size / test_crop_pct of the models whose default cfg has them
// (validate.py evaluates at them unless --use-train-size).
const std::map<std::string, TestSize> kTestSizes = {{"rexnetr_200", {288, 1.0}}, {"rexnetr_300", {288, 1.0}}};

const std::vector<std::string> kKnownKwargs = {"output_stride"};

// Python's round(): halves to even, as std::nearbyint in the default mode.
int64_t py_round(double v) { return static_cast<int64_t>(std::nearbyint(v)); }

// One block of timm's _block_cfg.
struct BlockCfg {
  int64_t out_chs = 0;
  int64_t exp_ratio = 1;
  int64_t stride = 1;
  double se_ratio = 0.0;
};

// timm's _block_cfg (depth_mult 1, initial_chs 16, final_chs 180): output
// channels grow linearly over the blocks, in double as Python's floats.
std::vector<BlockCfg> block_cfg(double width_mult, double se_ratio, int64_t ch_div) {
  const std::vector<int64_t> layers = {1, 2, 2, 3, 3, 5};
  const std::vector<int64_t> strides = {1, 2, 2, 2, 1, 2};
  std::vector<BlockCfg> cfg;
  for (size_t s = 0; s < layers.size(); ++s) {
    for (int64_t i = 0; i < layers[s]; ++i) {
      BlockCfg b;
      b.stride = i == 0 ? strides[s] : 1;
      b.exp_ratio = s == 0 ? 1 : 6;
      b.se_ratio = s < 2 ? 0.0 : se_ratio;
      cfg.push_back(b);
    }
  }
  const auto blocks = static_cast<int64_t>(cfg.size());
  constexpr double kInitialChs = 16.0, kFinalChs = 180.0;
  double base_chs = width_mult < 1.0 ? kInitialChs / width_mult : kInitialChs;
  for (auto& b : cfg) {
    b.out_chs = layers::make_divisible(static_cast<double>(py_round(base_chs * width_mult)), ch_div);
    base_chs += kFinalChs / (static_cast<double>(blocks) * 1.0);
  }
  return cfg;
}

struct BottleneckArgs {
  int64_t in_chs = 0;
  int64_t out_chs = 0;
  int64_t stride = 1;
  int64_t dilation = 1;
  int64_t next_dilation = 1;
  int64_t exp_ratio = 1;
  double se_ratio = 0.0;
  int64_t ch_div = 1;
  double drop_path_rate = 0.0;
};

// timm's LinearBottleneck (act 'swish', dw act 'relu6'): conv_exp (when
// expanding), conv_dw (no act), se (SEModule with a BatchNorm), act_dw,
// conv_pwl (no act); where the stride is 1, the dilation unchanged and the
// channels do not shrink, the input is added to the first in_chs output
// channels (after drop_path).
class LinearBottleneckImpl : public nn::Module {
 public:
  explicit LinearBottleneckImpl(const BottleneckArgs& a)
      : use_shortcut_(a.stride == 1 && a.dilation == a.next_dilation && a.in_chs <= a.out_chs), in_chs_(a.in_chs) {
    int64_t dw_chs = a.in_chs;
    if (a.exp_ratio != 1) {
      dw_chs = layers::make_divisible(static_cast<double>(a.in_chs * a.exp_ratio), a.ch_div);
      conv_exp = register_module(
          "conv_exp", layers::ConvNormAct(layers::ConvNormActOptions(a.in_chs, dw_chs, 1).act_layer("swish")));
    }
    conv_dw = register_module("conv_dw", layers::ConvNormAct(layers::ConvNormActOptions(dw_chs, dw_chs, 3)
                                                                 .stride(a.stride)
                                                                 .dilation(a.dilation)
                                                                 .groups(dw_chs)
                                                                 .apply_act(false)));
    if (a.se_ratio > 0.0) {
      // int(dw_chs * se_ratio): truncation.
      const auto rd = static_cast<int64_t>(static_cast<double>(dw_chs) * a.se_ratio);
      se = register_module("se",
                           layers::SEModule(layers::SEModuleOptions(dw_chs)
                                                .rd_channels(layers::make_divisible(static_cast<double>(rd), a.ch_div))
                                                .use_norm(true)));
    }
    act_dw = register_module("act_dw", layers::create_act("relu6"));
    conv_pwl = register_module("conv_pwl",
                               layers::ConvNormAct(layers::ConvNormActOptions(dw_chs, a.out_chs, 1).apply_act(false)));
    if (a.drop_path_rate > 0.0) drop_path = register_module("drop_path", layers::DropPath(a.drop_path_rate));
  }

  at::Tensor forward(const at::Tensor& input) {
    at::Tensor x = conv_exp ? conv_exp(input) : input;
    x = conv_dw(x);
    if (se) x = se(x);
    x = conv_pwl(act_dw(x));
    if (use_shortcut_) {
      if (drop_path) x = drop_path(x);
      x = at::cat({x.slice(1, 0, in_chs_) + input, x.slice(1, in_chs_)}, 1);
    }
    return x;
  }

  layers::ConvNormAct conv_exp{nullptr}, conv_dw{nullptr}, conv_pwl{nullptr};
  layers::SEModule se{nullptr};
  layers::Activation act_dw{nullptr};
  layers::DropPath drop_path{nullptr};

 private:
  bool use_shortcut_;
  int64_t in_chs_;
};
TORCH_MODULE(LinearBottleneck);

// One registered architecture.
struct RexNetSpec {
  std::string name;
  double width_mult = 1.0;
  int64_t ch_div = 1;
  PretrainedCfg pretrained;
};

class RexNetImpl : public ClassifierImpl {
 public:
  RexNetImpl(const RexNetSpec& spec, const ModelArgs& args) : cfg_(spec.pretrained), num_classes_(args.num_classes) {
    validate_model_args(spec.name, args, kKnownKwargs);
    cfg_.hf_hub_id = timm_hub_id(spec.name, kDefaultTags);
    set_test_size(cfg_, spec.name, kTestSizes);
    int64_t output_stride = 32;
    if (const auto os = model_kwarg_double(spec.name, args, "output_stride"); os) {
      if (*os != 32.0 && *os != 16.0 && *os != 8.0) {
        throw UsageError(spec.name + ": output_stride=" + args.kwargs.at("output_stride") +
                         ": expected 32, 16 or 8 (timm's ReXNet asserts output_stride in (32, 16, 8))");
      }
      output_stride = static_cast<int64_t>(*os);
    }
    const double width_mult = spec.width_mult;
    const int64_t ch_div = spec.ch_div;
    const double stem_base_chs = width_mult < 1.0 ? 32.0 / width_mult : 32.0;
    const int64_t stem_chs = layers::make_divisible(static_cast<double>(py_round(stem_base_chs * width_mult)), ch_div);
    stem = register_module(
        "stem",
        layers::ConvNormAct(layers::ConvNormActOptions(args.in_chans, stem_chs, 3).stride(2).act_layer("swish")));

    // timm's _build_blocks.
    const std::vector<BlockCfg> cfg = block_cfg(width_mult, 1.0 / 12.0, ch_div);
    const double drop_path_rate = args.drop_path_rate.value_or(0.0);
    const auto num_blocks = static_cast<int64_t>(cfg.size());
    int64_t prev_chs = stem_chs, curr_stride = 2, dilation = 1;
    features = register_module("features", nn::Sequential());
    for (int64_t i = 0; i < num_blocks; ++i) {
      const BlockCfg& b = cfg[static_cast<size_t>(i)];
      int64_t stride = b.stride;
      int64_t next_dilation = dilation;
      if (stride > 1) {
        // Block 0 never strides, so the module is always a block's.
        feature_info_.push_back({prev_chs, curr_stride, "features." + std::to_string(i - 1)});
        stage_ends_.push_back(static_cast<size_t>(i - 1));
        if (curr_stride >= output_stride) {
          next_dilation = dilation * stride;
          stride = 1;
        }
      }
      BottleneckArgs a;
      a.in_chs = prev_chs;
      a.out_chs = b.out_chs;
      a.stride = stride;
      a.dilation = dilation;
      a.next_dilation = next_dilation;
      a.exp_ratio = b.exp_ratio;
      a.se_ratio = b.se_ratio;
      a.ch_div = ch_div;
      a.drop_path_rate = drop_path_rate * static_cast<double>(i) / static_cast<double>(num_blocks - 1);
      features->push_back(LinearBottleneck(a));
      curr_stride *= stride;
      dilation = next_dilation;
      prev_chs = b.out_chs;
    }
    const int64_t pen_chs = layers::make_divisible(1280.0 * width_mult, ch_div);
    feature_info_.push_back({prev_chs, curr_stride, "features." + std::to_string(num_blocks - 1)});
    stage_ends_.push_back(static_cast<size_t>(num_blocks - 1));
    features->push_back(layers::ConvNormAct(layers::ConvNormActOptions(prev_chs, pen_chs, 1).act_layer("swish")));
    head =
        register_module("head", layers::ClassifierHeadModule(layers::ClassifierHeadModuleOptions(pen_chs, num_classes_)
                                                                 .pool_type(args.global_pool.value_or("avg"))
                                                                 .drop_rate(args.drop_rate)));
    layers::efficientnet_init_weights(*this);
  }

  // timm's forward_features: stem, then every module of `features` (the
  // final conv included), (N, C, H, W); with grad checkpointing each one
  // checkpointed (checkpoint_seq).
  at::Tensor forward_features(at::Tensor input) override {
    at::Tensor x = stem(input);
    return grad_checkpointing_ ? checkpoint_seq(sequence_modules(features), x) : features->forward(x);
  }

  // timm's feature_info: the block before each stride 2 and the last block
  // (before the final conv), e.g. features.0/2/4/10/15.
  std::vector<FeatureInfo> feature_info() const override { return feature_info_; }

  // timm's forward_intermediates: level l is the output of block
  // stage_ends_[l]; the final conv runs unless stop_early stops before the
  // last level (NCHW only).
  Intermediates forward_intermediates(at::Tensor input,
                                      const IntermediatesOptions& options = IntermediatesOptions()) override {
    check_output_fmt(describe_model(*this), options.output_fmt(), {"NCHW"});
    const auto levels = static_cast<int64_t>(stage_ends_.size());
    const auto [take_indices, max_index] = feature_take_indices(levels, options.indices());
    std::vector<bool> take(features->size(), false);
    for (const int64_t l : take_indices) take[stage_ends_[static_cast<size_t>(l)]] = true;
    const size_t max_step = stage_ends_[static_cast<size_t>(max_index)];
    const size_t steps = !options.stop_early() || max_step == stage_ends_.back() ? features->size() : max_step + 1;
    Intermediates out;
    std::vector<nn::AnyModule> modules = sequence_modules(features);
    at::Tensor x = stem(input);
    for (size_t i = 0; i < steps; ++i) {
      x = grad_checkpointing_ ? checkpoint(modules[i], x) : modules[i].forward(x);
      if (take[i]) out.intermediates.push_back(x);
    }
    if (!options.intermediates_only()) out.final = x;
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
  // timm's group_matcher, the same coarse and fine.
  GroupMatcher group_matcher(bool /*coarse*/) const override {
    return {{"stem", {{R"(^stem)", std::nullopt}}}, {"blocks", {{R"(^features\.(\d+))", std::nullopt}}}};
  }

  layers::ConvNormAct stem{nullptr};
  nn::Sequential features{nullptr};
  layers::ClassifierHeadModule head{nullptr};

 private:
  PretrainedCfg cfg_;
  int64_t num_classes_;
  std::vector<FeatureInfo> feature_info_;
  std::vector<size_t> stage_ends_;
  bool grad_checkpointing_ = false;
};

// timm's _cfg: 224 px, crop 0.875, bicubic, ImageNet mean / std, first conv
// stem.conv, classifier head.fc; the sw_in12k_ft_in1k tags crop 0.95.
PretrainedCfg default_cfg(double crop_pct) {
  PretrainedCfg cfg;
  cfg.input_size = {3, 224, 224};
  cfg.interpolation = "bicubic";
  cfg.crop_pct = crop_pct;
  cfg.crop_mode = "center";
  cfg.first_conv = "stem.conv";
  cfg.classifier = "head.fc";
  return cfg;
}

std::vector<RexNetSpec> rexnet_specs() {
  const PretrainedCfg base = default_cfg(0.875), sw = default_cfg(0.95);
  return {
      {"rexnet_100", 1.0, 1, base},  {"rexnet_130", 1.3, 1, base},  {"rexnet_150", 1.5, 1, base},
      {"rexnet_200", 2.0, 1, base},  {"rexnet_300", 3.0, 1, base},  {"rexnetr_100", 1.0, 8, base},
      {"rexnetr_130", 1.3, 8, base}, {"rexnetr_150", 1.5, 8, base}, {"rexnetr_200", 2.0, 8, sw},
      {"rexnetr_300", 3.0, 16, sw},
  };
}

std::string describe(const RexNetSpec& spec) {
  std::string text = "ReXNet (width ";
  text += std::to_string(spec.width_mult).substr(0, 3);
  text += "x, channels divisible by ";
  text += std::to_string(spec.ch_div);
  text += ")";
  return text;
}

}  // namespace
}  // namespace timm::rexnet

TIMM_PLUGIN("rexnet") {
  for (const auto& spec : timm::rexnet::rexnet_specs()) {
    registrar.add_model(spec.name, timm::rexnet::describe(spec), [spec](const timm::ModelArgs& args) -> timm::ModelPtr {
      return std::make_shared<timm::rexnet::RexNetImpl>(spec, args);
    });
  }
}
