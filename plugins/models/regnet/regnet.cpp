// RegNetX and RegNetY (timm/models/regnet.py), with timm's module names so
// state_dict keys equal timm's:
// - regnetx_002 .. regnetx_320, regnetx_004_tv: plain bottleneck blocks;
// - regnety_002 .. regnety_320, regnety_008_tv, regnety_080_tv: the same with
//   timm's SEModule after the grouped 3x3 conv (se_ratio 0.25 of the block's
//   input channels);
// each from its RegNetCfg (w0, wa, wm, depth, group_size) through timm's
// generate_regnet (per-block widths quantised to 8, grouped into stages) and
// adjust_widths_groups_comp (bottleneck widths made divisible by the group
// width: quantize_float, or make_divisible for the "_tv" configs'
// group_min_ratio). Not here: regnety_040_sgn (GroupNorm + SiLU), the RegNetZ /
// RegNetV families and regnety_640 / 1280 / 2560.
//
// Supported: num_classes (0: no head fc), in_chans, drop_rate (dropout before
// the fc), drop_path_rate (per-block linear schedule), global_pool. No
// --model-kwargs (timm's output_stride, zero_init_last, ... are not taken).
#include <cmath>
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
#include <torch/nn/modules/linear.h>

#include "timm/base/error.hpp"
#include "timm/layers/classifier.hpp"
#include "timm/layers/drop_path.hpp"
#include "timm/layers/norm_act.hpp"
#include "timm/layers/squeeze_excite.hpp"
#include "timm/models/features.hpp"
#include "timm/models/grad_checkpoint.hpp"
#include "timm/models/model.hpp"
#include "timm/plugin/plugin.hpp"

namespace timm::regnet {
namespace {

namespace nn = torch::nn;

// timm 1.0.31's default pretrained tag of each model (the first tag of its
// default_cfgs); a model without one has no pretrained weights in timm.
const std::map<std::string, std::string> kDefaultTags = {
    {"regnetx_002", "pycls_in1k"},       {"regnetx_004", "pycls_in1k"},       {"regnetx_004_tv", "tv2_in1k"},
    {"regnetx_006", "pycls_in1k"},       {"regnetx_008", "tv2_in1k"},         {"regnetx_016", "tv2_in1k"},
    {"regnetx_032", "tv2_in1k"},         {"regnetx_040", "pycls_in1k"},       {"regnetx_064", "pycls_in1k"},
    {"regnetx_080", "tv2_in1k"},         {"regnetx_120", "pycls_in1k"},       {"regnetx_160", "tv2_in1k"},
    {"regnetx_320", "tv2_in1k"},         {"regnety_002", "pycls_in1k"},       {"regnety_004", "tv2_in1k"},
    {"regnety_006", "pycls_in1k"},       {"regnety_008", "pycls_in1k"},       {"regnety_008_tv", "tv2_in1k"},
    {"regnety_016", "tv2_in1k"},         {"regnety_032", "ra_in1k"},          {"regnety_040", "ra3_in1k"},
    {"regnety_064", "ra3_in1k"},         {"regnety_080", "ra3_in1k"},         {"regnety_080_tv", "tv2_in1k"},
    {"regnety_120", "sw_in12k_ft_in1k"}, {"regnety_160", "sw_in12k_ft_in1k"}, {"regnety_320", "tv2_in1k"}};

// timm's test_input_size / test_crop_pct of the models whose default cfg has them
// (validate.py evaluates at them unless --use-train-size).
const std::map<std::string, TestSize> kTestSizes = {{"regnety_032", {288, 1.0}}, {"regnety_040", {288, 1.0}},
                                                    {"regnety_064", {288, 1.0}}, {"regnety_080", {288, 1.0}},
                                                    {"regnety_120", {288, 1.0}}, {"regnety_160", {288, 1.0}}};

// timm's RegNetCfg, the fields the registered X / Y models set.
struct RegNetCfg {
  int64_t depth = 21;
  int64_t w0 = 80;
  double wa = 42.63;
  double wm = 2.66;
  int64_t group_size = 24;
  double se_ratio = 0.0;
  double group_min_ratio = 0.0;
  int64_t stem_width = 32;
};

// One stage's arguments, as timm's _get_stage_args.
struct StageArgs {
  int64_t out_chs = 0;
  int64_t depth = 0;
  int64_t group_size = 0;
  std::vector<double> drop_path_rates;
};

// timm's generate_regnet: per-block widths. Computed with float32 tensors as
// timm does, so the rounding of every width is the same.
std::vector<int64_t> generate_widths(const RegNetCfg& cfg) {
  constexpr int64_t kQuant = 8;
  const at::Tensor widths_cont = at::arange(cfg.depth, at::kFloat) * cfg.wa + static_cast<double>(cfg.w0);
  const at::Tensor width_exps = at::round(at::log(widths_cont / static_cast<double>(cfg.w0)) / std::log(cfg.wm));
  const at::Tensor widths =
      at::round((at::pow(cfg.wm, width_exps) * static_cast<double>(cfg.w0)) / static_cast<double>(kQuant)) *
      static_cast<double>(kQuant);
  const at::Tensor as_int = widths.to(at::kInt).to(at::kLong).contiguous();
  return {as_int.data_ptr<int64_t>(), as_int.data_ptr<int64_t>() + as_int.numel()};
}

// Python's round(): halves to even, as std::nearbyint in the default mode.
int64_t quantize_float(double f, int64_t q) {
  return static_cast<int64_t>(std::nearbyint(f / static_cast<double>(q)) * static_cast<double>(q));
}

// timm's _get_stage_args for output_stride 32 and bottle_ratio 1: consecutive
// blocks of equal width form a stage; widths then made compatible with the
// group width (adjust_widths_groups_comp); drop path rates linear over all blocks.
std::vector<StageArgs> stage_args(const RegNetCfg& cfg, double drop_path_rate) {
  const std::vector<int64_t> widths = generate_widths(cfg);
  std::vector<StageArgs> stages;
  for (int64_t w : widths) {
    if (stages.empty() || stages.back().out_chs != w) stages.push_back({w, 0, cfg.group_size, {}});
    ++stages.back().depth;
  }
  const std::vector<double> rates = layers::drop_path_rates(drop_path_rate, cfg.depth);
  size_t block = 0;
  for (auto& stage : stages) {
    for (int64_t i = 0; i < stage.depth; ++i) stage.drop_path_rates.push_back(rates[block++]);
    const int64_t bottleneck = stage.out_chs;  // int(w * 1.0)
    stage.group_size = std::min(stage.group_size, bottleneck);
    // timm passes group_min_ratio as make_divisible's min_value; any bottleneck width is
    // at least one group, so that floor never binds and the divisor's own floor applies.
    stage.out_chs = cfg.group_min_ratio > 0.0
                        ? layers::make_divisible(static_cast<double>(bottleneck), stage.group_size)
                        : quantize_float(static_cast<double>(bottleneck), stage.group_size);
  }
  return stages;
}

layers::ConvNormAct conv_norm_act(int64_t in, int64_t out, int64_t kernel, int64_t stride = 1, int64_t groups = 1,
                                  bool apply_act = true) {
  return layers::ConvNormAct(
      layers::ConvNormActOptions(in, out, kernel).stride(stride).groups(groups).apply_act(apply_act));
}

struct BlockArgs {
  int64_t in_chs = 0;
  int64_t out_chs = 0;
  int64_t stride = 1;
  int64_t group_size = 1;
  double se_ratio = 0.0;
  double drop_path_rate = 0.0;
};

// timm's regnet Bottleneck (bottle_ratio 1, downsample 'conv1x1', ReLU,
// BatchNorm): conv1 1x1, conv2 3x3 grouped and strided, SE (RegNetY), conv3
// 1x1 without act, the shortcut projection where the shape changes, act3
// after the sum. Registration order is timm's attribute order.
class BottleneckImpl : public nn::Module {
 public:
  explicit BottleneckImpl(const BlockArgs& a) {
    const int64_t bottleneck_chs = a.out_chs;  // int(round(out_chs * 1.0))
    const int64_t groups = bottleneck_chs / a.group_size;
    conv1 = register_module("conv1", conv_norm_act(a.in_chs, bottleneck_chs, 1));
    conv2 = register_module("conv2", conv_norm_act(bottleneck_chs, bottleneck_chs, 3, a.stride, groups));
    if (a.se_ratio > 0.0) {
      const auto se_channels = static_cast<int64_t>(std::nearbyint(static_cast<double>(a.in_chs) * a.se_ratio));
      se = register_module("se", layers::SEModule(layers::SEModuleOptions(bottleneck_chs).rd_channels(se_channels)));
    }
    conv3 = register_module("conv3", conv_norm_act(bottleneck_chs, a.out_chs, 1, 1, 1, /*apply_act=*/false));
    act3 = register_module("act3", nn::ReLU());
    if (a.in_chs != a.out_chs || a.stride != 1) {
      downsample = register_module("downsample", conv_norm_act(a.in_chs, a.out_chs, 1, a.stride, 1, false));
    }
    if (a.drop_path_rate > 0.0) drop_path = register_module("drop_path", layers::DropPath(a.drop_path_rate));
  }

  at::Tensor forward(const at::Tensor& input) {
    at::Tensor x = conv2(conv1(input));
    if (se) x = se(x);
    x = conv3(x);
    if (drop_path) x = drop_path(x);
    return act3(x + (downsample ? downsample(input) : input));
  }

  // timm's zero_init_last: each residual branch starts as zero.
  void zero_init_last() { nn::init::zeros_(conv3->bn->weight); }

  layers::ConvNormAct conv1{nullptr}, conv2{nullptr}, conv3{nullptr}, downsample{nullptr};
  layers::SEModule se{nullptr};
  nn::ReLU act3{nullptr};
  layers::DropPath drop_path{nullptr};
};
TORCH_MODULE(Bottleneck);

// One registered architecture.
struct RegNetSpec {
  std::string name;
  RegNetCfg cfg;
  PretrainedCfg pretrained;
};

class RegNetImpl : public ClassifierImpl {
 public:
  RegNetImpl(const RegNetSpec& spec, const ModelArgs& args) : cfg_(spec.pretrained), num_classes_(args.num_classes) {
    validate_model_args(spec.name, args);
    cfg_.hf_hub_id = timm_hub_id(spec.name, kDefaultTags);
    set_test_size(cfg_, spec.name, kTestSizes);
    const RegNetCfg& cfg = spec.cfg;
    stem = register_module("stem", conv_norm_act(args.in_chans, cfg.stem_width, 3, 2));
    int64_t prev_width = cfg.stem_width;
    feature_info_.push_back({prev_width, 2, "stem"});
    const auto stages = stage_args(cfg, args.drop_path_rate.value_or(0.0));
    if (stages.size() != 4) {
      throw Error(spec.name + ": expected 4 stages from generate_regnet, got " + std::to_string(stages.size()));
    }
    for (size_t s = 0; s < stages.size(); ++s) {
      nn::Sequential stage;
      for (int64_t i = 0; i < stages[s].depth; ++i) {
        BlockArgs a;
        a.in_chs = i == 0 ? prev_width : stages[s].out_chs;
        a.out_chs = stages[s].out_chs;
        a.stride = i == 0 ? 2 : 1;
        a.group_size = stages[s].group_size;
        a.se_ratio = cfg.se_ratio;
        a.drop_path_rate = stages[s].drop_path_rates[static_cast<size_t>(i)];
        // Python's RegStage names its blocks b1, b2, ...
        stage->push_back("b" + std::to_string(i + 1), Bottleneck(a));
      }
      stages_.push_back(register_module("s" + std::to_string(s + 1), stage));
      prev_width = stages[s].out_chs;
      feature_info_.push_back({prev_width, int64_t{4} << s, "s" + std::to_string(s + 1)});
    }
    // timm's final_conv is an Identity for these models (no num_features, no linear_out).
    head = register_module("head",
                           layers::ClassifierHeadModule(layers::ClassifierHeadModuleOptions(prev_width, num_classes_)
                                                            .pool_type(args.global_pool.value_or("avg"))
                                                            .drop_rate(args.drop_rate)));
    init_weights();
  }

  // timm's forward_features: stem, s1..s4 (final_conv is an Identity), (N, C, H, W).
  // With grad checkpointing each stage checkpoints each of its blocks (timm's
  // RegStage: checkpoint_seq over its children).
  at::Tensor forward_features(at::Tensor input) override {
    at::Tensor x = stem(input);
    for (size_t i = 0; i < stages_.size(); ++i) x = run_stage(i, x);
    return x;
  }

  // timm's feature levels: stem, s1..s4.
  std::vector<FeatureInfo> feature_info() const override { return feature_info_; }

  // timm's forward_intermediates over those five levels; the final features
  // are the last stage run's output (NCHW only).
  Intermediates forward_intermediates(at::Tensor input,
                                      const IntermediatesOptions& options = IntermediatesOptions()) override {
    check_output_fmt(describe_model(*this), options.output_fmt(), {"NCHW"});
    const int64_t levels = static_cast<int64_t>(feature_info_.size());
    const auto [take_indices, max_index] = feature_take_indices(levels, options.indices());
    const std::vector<bool> take = take_mask(levels, take_indices);
    Intermediates out;
    at::Tensor x = stem(input);
    if (take[0]) out.intermediates.push_back(x);
    const size_t stages_run = options.stop_early() ? static_cast<size_t>(max_index) : stages_.size();
    for (size_t i = 0; i < stages_run; ++i) {
      x = run_stage(i, x);
      if (take[i + 1]) out.intermediates.push_back(x);
    }
    if (!options.intermediates_only()) out.final = x;
    return out;
  }

  // timm's forward_head: the ClassifierHead, up to its fc with pre_logits.
  at::Tensor forward_head(at::Tensor x, bool pre_logits = false) override {
    return pre_logits ? head->forward_pre_logits(x) : head(x);
  }

  at::Tensor forward(at::Tensor x) override { return forward_head(forward_features(x)); }
  // timm sets grad_checkpointing on s1..s4 (and final_conv, an Identity here).
  void set_grad_checkpointing(bool enable) override { grad_checkpointing_ = enable; }
  int64_t num_classes() const override { return num_classes_; }
  const PretrainedCfg& pretrained_cfg() const override { return cfg_; }
  GroupMatcher group_matcher(bool coarse) const override {
    return {{"stem", {{R"(^stem)", std::nullopt}}},
            {"blocks", {{coarse ? R"(^s(\d+))" : R"(^s(\d+)\.b(\d+))", std::nullopt}}}};
  }

  layers::ConvNormAct stem{nullptr};
  layers::ClassifierHeadModule head{nullptr};

 private:
  // timm's regnet _init_weights: every conv (the SE's included) normal with
  // std sqrt(2 / fan_out), fan_out = k * k * out / groups, bias zero; the fc
  // normal std 0.01, bias zero; BN weight 1 / bias 0 (the modules' default);
  // then zero_init_last.
  void init_weights() {
    c10::NoGradGuard no_grad;
    for (auto& module : modules(/*include_self=*/false)) {
      if (auto* c = module->as<nn::Conv2d>()) {
        const auto& o = c->options;
        const int64_t fan_out = o.kernel_size()->at(0) * o.kernel_size()->at(1) * o.out_channels() / o.groups();
        c->weight.normal_(0.0, std::sqrt(2.0 / static_cast<double>(fan_out)));
        if (c->bias.defined()) c->bias.zero_();
      } else if (auto* l = module->as<nn::Linear>()) {
        l->weight.normal_(0.0, 0.01);
        if (l->bias.defined()) l->bias.zero_();
      } else if (auto* b = module->as<Bottleneck>()) {
        b->zero_init_last();
      }
    }
  }

  at::Tensor run_stage(size_t i, const at::Tensor& x) {
    return grad_checkpointing_ ? checkpoint_seq(sequence_modules(stages_[i]), x) : stages_[i]->forward(x);
  }

  PretrainedCfg cfg_;
  int64_t num_classes_;
  std::vector<nn::Sequential> stages_;
  std::vector<FeatureInfo> feature_info_;
  bool grad_checkpointing_ = false;
};

// timm's default cfg per name (its first tag): pycls_in1k (_cfgpyc: crop 0.875),
// tv2_in1k (_cfgtv2: crop 0.965), ra / ra3 / sw_in12k_ft_in1k (_cfg: crop 0.95);
// all 224 px, bicubic, ImageNet mean/std, first conv stem.conv, classifier head.fc.
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

RegNetCfg x_cfg(int64_t w0, double wa, double wm, int64_t group_size, int64_t depth, double group_min_ratio = 0.0) {
  RegNetCfg cfg;
  cfg.w0 = w0;
  cfg.wa = wa;
  cfg.wm = wm;
  cfg.group_size = group_size;
  cfg.depth = depth;
  cfg.group_min_ratio = group_min_ratio;
  return cfg;
}

RegNetCfg y_cfg(int64_t w0, double wa, double wm, int64_t group_size, int64_t depth, double group_min_ratio = 0.0) {
  RegNetCfg cfg = x_cfg(w0, wa, wm, group_size, depth, group_min_ratio);
  cfg.se_ratio = 0.25;
  return cfg;
}

std::vector<RegNetSpec> regnet_specs() {
  const PretrainedCfg pycls = default_cfg(0.875), tv2 = default_cfg(0.965), timm_trained = default_cfg(0.95);
  return {
      {"regnetx_002", x_cfg(24, 36.44, 2.49, 8, 13), pycls},
      {"regnetx_004", x_cfg(24, 24.48, 2.54, 16, 22), pycls},
      {"regnetx_004_tv", x_cfg(24, 24.48, 2.54, 16, 22, 0.9), tv2},
      {"regnetx_006", x_cfg(48, 36.97, 2.24, 24, 16), pycls},
      {"regnetx_008", x_cfg(56, 35.73, 2.28, 16, 16), tv2},
      {"regnetx_016", x_cfg(80, 34.01, 2.25, 24, 18), tv2},
      {"regnetx_032", x_cfg(88, 26.31, 2.25, 48, 25), tv2},
      {"regnetx_040", x_cfg(96, 38.65, 2.43, 40, 23), pycls},
      {"regnetx_064", x_cfg(184, 60.83, 2.07, 56, 17), pycls},
      {"regnetx_080", x_cfg(80, 49.56, 2.88, 120, 23), tv2},
      {"regnetx_120", x_cfg(168, 73.36, 2.37, 112, 19), pycls},
      {"regnetx_160", x_cfg(216, 55.59, 2.1, 128, 22), tv2},
      {"regnetx_320", x_cfg(320, 69.86, 2.0, 168, 23), tv2},
      {"regnety_002", y_cfg(24, 36.44, 2.49, 8, 13), pycls},
      {"regnety_004", y_cfg(48, 27.89, 2.09, 8, 16), tv2},
      {"regnety_006", y_cfg(48, 32.54, 2.32, 16, 15), pycls},
      {"regnety_008", y_cfg(56, 38.84, 2.4, 16, 14), pycls},
      {"regnety_008_tv", y_cfg(56, 38.84, 2.4, 16, 14, 0.9), tv2},
      {"regnety_016", y_cfg(48, 20.71, 2.65, 24, 27), tv2},
      {"regnety_032", y_cfg(80, 42.63, 2.66, 24, 21), timm_trained},
      {"regnety_040", y_cfg(96, 31.41, 2.24, 64, 22), timm_trained},
      {"regnety_064", y_cfg(112, 33.22, 2.27, 72, 25), timm_trained},
      {"regnety_080", y_cfg(192, 76.82, 2.19, 56, 17), timm_trained},
      {"regnety_080_tv", y_cfg(192, 76.82, 2.19, 56, 17, 0.9), tv2},
      {"regnety_120", y_cfg(168, 73.36, 2.37, 112, 19), timm_trained},
      {"regnety_160", y_cfg(200, 106.23, 2.48, 112, 18), timm_trained},
      {"regnety_320", y_cfg(232, 115.89, 2.53, 232, 20), tv2},
  };
}

std::string describe(const RegNetSpec& spec) {
  return std::string(spec.cfg.se_ratio > 0.0 ? "RegNetY" : "RegNetX") + " (w0 " + std::to_string(spec.cfg.w0) +
         ", depth " + std::to_string(spec.cfg.depth) + ", group width " + std::to_string(spec.cfg.group_size) + ")";
}

}  // namespace
}  // namespace timm::regnet

TIMM_PLUGIN("regnet") {
  for (const auto& spec : timm::regnet::regnet_specs()) {
    registrar.add_model(spec.name, timm::regnet::describe(spec), [spec](const timm::ModelArgs& args) -> timm::ModelPtr {
      return std::make_shared<timm::regnet::RegNetImpl>(spec, args);
    });
  }
}
