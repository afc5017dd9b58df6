// Normalization-Free Networks (timm/models/nfnet.py), with timm's module
// names so state_dict keys equal timm's, each model built from its NfCfg as
// timm's NormFreeNet:
// - dm_nfnet_f0 .. f6: NFNet-F with DeepMind's numerics (gamma in the
//   activations, TF 'SAME' padding, skipinit gains);
// - nfnet_f0 .. f7, nfnet_l0, eca_nfnet_l0 .. l3, test_nfnet: NFNet-F / L
//   (deep_quad stem, grouped bottlenecks with an extra 3x3 conv, SE or ECA
//   after conv3, final 1x1 conv);
// - nf_regnet_b0 .. b5: NF-RegNet-B (3x3 stem, expansion from the input
//   width, SE between conv2 and conv3, final 1x1 conv);
// - nf_resnet26 / 50 / 101, nf_seresnet*, nf_ecaresnet*: pre-activation
//   NF-ResNets (7x7 stem + max pool, no / SE / ECA attention).
// Every conv is a ScaledStdConv2d (timm/layers/std_conv.hpp; the 'SAME'
// variant for dm_nfnet_*), with the activation's gamma folded in unless
// gamma_in_act; each block (NormFreeBlock) is out = act1(x) * beta, a shortcut
// (DownsampleAvg: avg pool + 1x1 conv where the shape changes), conv1 ->
// conv2 [-> conv2b] [-> attn] -> conv3 [-> attn_last] scaled by attn_gain
// after attention, drop path, [* skipinit_gain], then out * alpha + shortcut.
//
// Supported: num_classes (0: no head fc), in_chans, drop_rate (dropout before
// the fc), drop_path_rate (per-block linear schedule), global_pool, and
// --model-kwargs output_stride (timm's dilated stages). Refused: other
// --model-kwargs (timm overlays any NfCfg field; not here).
#include <array>
#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <numeric>
#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include <ATen/ATen.h>
#include <torch/nn/cloneable.h>
#include <torch/nn/init.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/container/any.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/pooling.h>

#include "timm/base/error.hpp"
#include "timm/layers/activations.hpp"
#include "timm/layers/classifier.hpp"
#include "timm/layers/conv2d_same.hpp"
#include "timm/layers/drop_path.hpp"
#include "timm/layers/eca.hpp"
#include "timm/layers/squeeze_excite.hpp"
#include "timm/layers/std_conv.hpp"
#include "timm/models/features.hpp"
#include "timm/models/grad_checkpoint.hpp"
#include "timm/models/model.hpp"
#include "timm/plugin/plugin.hpp"

namespace timm::nfnet {
namespace {

namespace nn = torch::nn;

// timm 1.0.31's default pretrained tag of each model; a model without one has
// no pretrained weights in timm.
const std::map<std::string, std::string> kDefaultTags = {
    {"dm_nfnet_f0", "dm_in1k"},   {"dm_nfnet_f1", "dm_in1k"},   {"dm_nfnet_f2", "dm_in1k"},
    {"dm_nfnet_f3", "dm_in1k"},   {"dm_nfnet_f4", "dm_in1k"},   {"dm_nfnet_f5", "dm_in1k"},
    {"dm_nfnet_f6", "dm_in1k"},   {"nfnet_l0", "ra2_in1k"},     {"eca_nfnet_l0", "ra2_in1k"},
    {"eca_nfnet_l1", "ra2_in1k"}, {"eca_nfnet_l2", "ra3_in1k"}, {"nf_regnet_b1", "ra2_in1k"},
    {"nf_resnet50", "ra2_in1k"},  {"test_nfnet", "r160_in1k"}};

// timm's test_input_size / test_crop_pct of the models whose default cfg has them
// (validate.py evaluates at them unless --use-train-size).
const std::map<std::string, TestSize> kTestSizes = {
    {"nfnet_f0", {256, std::nullopt}},     {"nfnet_f1", {320, std::nullopt}},
    {"nfnet_f2", {352, std::nullopt}},     {"nfnet_f3", {416, std::nullopt}},
    {"nfnet_f4", {512, std::nullopt}},     {"nfnet_f5", {544, std::nullopt}},
    {"nfnet_f6", {576, std::nullopt}},     {"nfnet_f7", {608, std::nullopt}},
    {"dm_nfnet_f0", {256, std::nullopt}},  {"dm_nfnet_f1", {320, std::nullopt}},
    {"dm_nfnet_f2", {352, std::nullopt}},  {"dm_nfnet_f3", {416, std::nullopt}},
    {"dm_nfnet_f4", {512, std::nullopt}},  {"dm_nfnet_f5", {544, std::nullopt}},
    {"dm_nfnet_f6", {576, std::nullopt}},  {"nfnet_l0", {288, 1.0}},
    {"eca_nfnet_l0", {288, 1.0}},          {"eca_nfnet_l1", {320, 1.0}},
    {"eca_nfnet_l2", {384, 1.0}},          {"nf_regnet_b1", {288, std::nullopt}},
    {"nf_resnet50", {288, std::nullopt}},  {"eca_nfnet_l3", {448, 1.0}},
    {"nf_regnet_b0", {256, std::nullopt}}, {"nf_regnet_b2", {272, std::nullopt}},
    {"nf_regnet_b3", {320, std::nullopt}}, {"nf_regnet_b4", {384, std::nullopt}},
    {"nf_regnet_b5", {456, std::nullopt}}};

// timm's _nonlin_gamma (DeepMind's constants): the gain that restores unit
// variance after each activation.
const std::map<std::string, double> kNonlinGamma = {
    {"identity", 1.0},
    {"celu", 1.270926833152771},
    {"elu", 1.2716004848480225},
    {"gelu", 1.7015043497085571},
    {"leaky_relu", 1.70590341091156},
    {"relu", 1.7139588594436646},
    {"relu6", 1.7131484746932983},
    {"selu", 1.0008515119552612},
    {"sigmoid", 4.803835391998291},
    {"silu", 1.7881293296813965},
    {"tanh", 1.5939117670059204},
};

// timm's NfCfg. attn_layer "" (none), "se" or "eca"; the SE's rd_ratio /
// rd_divisor are its attn_kwargs.
struct NfCfg {
  std::array<int64_t, 4> depths{};
  std::array<int64_t, 4> channels{};
  double alpha = 0.2;
  std::string stem_type = "3x3";
  std::optional<int64_t> stem_chs;
  std::optional<int64_t> group_size;
  std::string attn_layer;
  double attn_rd_ratio = 1.0 / 16.0;
  int64_t attn_rd_divisor = 8;
  double attn_gain = 2.0;
  double width_factor = 1.0;
  double bottle_ratio = 0.5;
  int64_t num_features = 0;  // final_conv's width, none when 0
  int64_t ch_div = 8;
  bool reg = false;         // RegNet style: expand from in_chs, attention between conv2 and conv3
  bool extra_conv = false;  // conv2b
  bool gamma_in_act = false;
  bool same_padding = false;
  double std_conv_eps = 1e-5;
  bool skipinit = false;
  bool zero_init_fc = false;
  std::string act_layer = "silu";
};

// What every conv of a model shares: ScaledStdConv2d or its 'SAME' variant,
// with the activation's gamma (unless gamma_in_act) and eps.
struct ConvSpec {
  bool same = false;
  double gamma = 1.0;
  double eps = 1e-5;

  layers::ScaledStdConv2d make(int64_t in, int64_t out, int64_t kernel, int64_t stride = 1, int64_t dilation = 1,
                               int64_t groups = 1, double gain_init = 1.0) const {
    return layers::create_scaled_std_conv2d(layers::ScaledStdConv2dOptions(in, out, kernel)
                                                .stride(stride)
                                                .dilation(dilation)
                                                .groups(groups)
                                                .gamma(gamma)
                                                .eps(eps)
                                                .gain_init(gain_init),
                                            same);
  }
};

// timm's activation of an NFNet: get_act_layer(act_layer), or with
// gamma_in_act GammaAct (the activation, then times gamma in place). No
// parameters. `inplace` as timm's act_layer(inplace=...): the block's act2 /
// act2b and the stem's first acts overwrite a conv's fresh output.
struct NfActOptions {
  NfActOptions(std::string name, std::optional<double> gamma) : name_(std::move(name)), gamma_(gamma) {}
  TORCH_ARG(std::string, name);
  TORCH_ARG(std::optional<double>, gamma);
  TORCH_ARG(bool, inplace) = false;
};

class NfActImpl : public nn::Cloneable<NfActImpl> {
 public:
  explicit NfActImpl(const NfActOptions& o) : options(o) { reset(); }
  void reset() override { act_ = layers::create_act(options.name(), options.inplace()); }
  void pretty_print(std::ostream& stream) const override {
    stream << "timm::nfnet::" << (options.gamma() ? "GammaAct(" : "Act(") << options.name();
    if (options.gamma()) stream << ", gamma=" << *options.gamma();
    stream << ")";
  }
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor y = act_->forward(x);
    // timm's act_fn(x).mul_(gamma): y is the activation's own output, or x
    // when in place, which timm overwrites too.
    return options.gamma() ? y.mul_(*options.gamma()) : y;
  }

  NfActOptions options;

 private:
  layers::Activation act_{nullptr};  // not registered: no state
};
TORCH_MODULE(NfAct);

struct ActSpec {
  std::string name;
  std::optional<double> gamma;
  NfAct make(bool inplace = false) const { return NfAct(NfActOptions(name, gamma).inplace(inplace)); }
};

// timm's DownsampleAvg: an average pool (2x2, ceil mode, padding not counted;
// timm's AvgPool2dSame with stride 1 in dilated stages; none without stride
// or dilation), then a 1x1 conv. Only the conv has state (downsample.conv.*).
class DownsampleAvgImpl : public nn::Module {
 public:
  DownsampleAvgImpl(int64_t in_chs, int64_t out_chs, int64_t stride, int64_t dilation, const ConvSpec& conv_spec) {
    avg_stride_ = dilation == 1 ? stride : 1;
    pool_ = stride > 1 || dilation > 1;
    pool_same_ = pool_ && avg_stride_ == 1 && dilation > 1;
    conv = register_module("conv", conv_spec.make(in_chs, out_chs, 1));
  }

  at::Tensor forward(const at::Tensor& input) {
    at::Tensor x = input;
    if (pool_) {
      const std::array<int64_t, 2> kernel = {2, 2}, stride = {avg_stride_, avg_stride_}, no_pad = {0, 0};
      if (pool_same_) x = layers::pad_same(x, kernel, stride);
      x = at::avg_pool2d(x, kernel, stride, no_pad, /*ceil_mode=*/true, /*count_include_pad=*/false);
    }
    return conv(x);
  }

  layers::ScaledStdConv2d conv{nullptr};

 private:
  int64_t avg_stride_ = 1;
  bool pool_ = false;
  bool pool_same_ = false;
};
TORCH_MODULE(DownsampleAvg);

struct BlockArgs {
  int64_t in_chs = 0;
  int64_t out_chs = 0;
  int64_t stride = 1;
  int64_t dilation = 1;
  int64_t first_dilation = 1;
  double alpha = 1.0;
  double beta = 1.0;
  double bottle_ratio = 0.25;
  double drop_path_rate = 0.0;
};

// timm's NormFreeBlock (pre-activation). Registration order is timm's
// attribute order, so state_dict keys come out in timm's order.
class NormFreeBlockImpl : public nn::Module {
 public:
  NormFreeBlockImpl(const BlockArgs& a, const NfCfg& cfg, const ConvSpec& conv_spec, const ActSpec& act_spec)
      : alpha_(a.alpha), beta_(a.beta), attn_gain_(cfg.attn_gain) {
    const double mid = static_cast<double>(cfg.reg ? a.in_chs : a.out_chs) * a.bottle_ratio;
    int64_t mid_chs = layers::make_divisible(mid, cfg.ch_div);
    const int64_t group_size = cfg.group_size.value_or(0);
    const int64_t groups = group_size > 0 ? mid_chs / group_size : 1;
    if (groups < 1) {
      throw UsageError("NormFreeBlock: bottleneck width " + std::to_string(mid_chs) + " is below the group size " +
                       std::to_string(group_size));
    }
    if (group_size > 0 && group_size % cfg.ch_div == 0) mid_chs = group_size * groups;

    if (a.in_chs != a.out_chs || a.stride != 1 || a.dilation != a.first_dilation) {
      downsample = register_module("downsample", DownsampleAvg(a.in_chs, a.out_chs, a.stride, a.dilation, conv_spec));
    }
    act1 = register_module("act1", act_spec.make());
    conv1 = register_module("conv1", conv_spec.make(a.in_chs, mid_chs, 1));
    act2 = register_module("act2", act_spec.make(/*inplace=*/true));
    conv2 = register_module("conv2", conv_spec.make(mid_chs, mid_chs, 3, a.stride, a.first_dilation, groups));
    if (cfg.extra_conv) {
      act2b = register_module("act2b", act_spec.make(/*inplace=*/true));
      conv2b = register_module("conv2b", conv_spec.make(mid_chs, mid_chs, 3, 1, a.dilation, groups));
    }
    if (cfg.reg && !cfg.attn_layer.empty()) attn = make_attn("attn", cfg, mid_chs);
    act3 = register_module("act3", act_spec.make());
    conv3 = register_module("conv3", conv_spec.make(mid_chs, a.out_chs, 1, 1, 1, 1, cfg.skipinit ? 1.0 : 0.0));
    if (!cfg.reg && !cfg.attn_layer.empty()) attn_last = make_attn("attn_last", cfg, a.out_chs);
    if (a.drop_path_rate > 0.0) drop_path = register_module("drop_path", layers::DropPath(a.drop_path_rate));
    if (cfg.skipinit) skipinit_gain = register_parameter("skipinit_gain", at::zeros({}));
  }

  at::Tensor forward(const at::Tensor& x) {
    at::Tensor out = act1(x) * beta_;
    const at::Tensor shortcut = downsample ? downsample(out) : x;
    out = conv1(out);
    out = conv2(act2(out));
    if (conv2b) out = conv2b(act2b(out));
    if (!attn.is_empty()) out = attn_gain_ * attn.forward(out);
    out = conv3(act3(out));
    if (!attn_last.is_empty()) out = attn_gain_ * attn_last.forward(out);
    if (drop_path) out = drop_path(out);
    if (skipinit_gain.defined()) out = out * skipinit_gain;
    return out * alpha_ + shortcut;
  }

  DownsampleAvg downsample{nullptr};
  NfAct act1{nullptr}, act2{nullptr}, act2b{nullptr}, act3{nullptr};
  layers::ScaledStdConv2d conv1{nullptr}, conv2{nullptr}, conv2b{nullptr}, conv3{nullptr};
  nn::AnyModule attn, attn_last;  // SEModule or EcaModule
  layers::DropPath drop_path{nullptr};
  at::Tensor skipinit_gain;

 private:
  // timm's get_attn(attn_layer)(channels, **attn_kwargs).
  nn::AnyModule make_attn(const std::string& name, const NfCfg& cfg, int64_t channels) {
    if (cfg.attn_layer == "se") {
      return nn::AnyModule(register_module(
          name, layers::SEModule(
                    layers::SEModuleOptions(channels).rd_ratio(cfg.attn_rd_ratio).rd_divisor(cfg.attn_rd_divisor))));
    }
    return nn::AnyModule(register_module(name, layers::EcaModule(channels)));
  }

  double alpha_, beta_, attn_gain_;
};
TORCH_MODULE(NormFreeBlock);

// One registered architecture.
struct NfSpec {
  std::string name;
  NfCfg cfg;
  PretrainedCfg pretrained;
};

class NormFreeNetImpl : public ClassifierImpl {
 public:
  NormFreeNetImpl(const NfSpec& spec, const ModelArgs& args) : cfg_(spec.pretrained), num_classes_(args.num_classes) {
    validate_model_args(spec.name, args, {"output_stride"});
    const int64_t output_stride = parse_output_stride(spec.name, args);
    cfg_.hf_hub_id = timm_hub_id(spec.name, kDefaultTags);
    set_test_size(cfg_, spec.name, kTestSizes);
    const NfCfg& cfg = spec.cfg;
    const double gamma = kNonlinGamma.at(cfg.act_layer);
    const ConvSpec conv_spec{cfg.same_padding, cfg.gamma_in_act ? 1.0 : gamma, cfg.std_conv_eps};
    const ActSpec act_spec{cfg.act_layer, cfg.gamma_in_act ? std::optional<double>(gamma) : std::nullopt};

    const int64_t stem_chs = layers::make_divisible(
        static_cast<double>(cfg.stem_chs.value_or(cfg.channels[0])) * cfg.width_factor, cfg.ch_div);
    const int64_t stem_stride = build_stem(args.in_chans, stem_chs, cfg.stem_type, conv_spec, act_spec);

    const int64_t total_depth = std::accumulate(cfg.depths.begin(), cfg.depths.end(), int64_t{0});
    const std::vector<double> rates = layers::drop_path_rates(args.drop_path_rate.value_or(0.0), total_depth);
    size_t block_index = 0;
    int64_t prev_chs = stem_chs;
    int64_t net_stride = stem_stride;
    int64_t dilation = 1;
    double expected_var = 1.0;
    stages = register_module("stages", nn::ModuleList());
    for (size_t stage_idx = 0; stage_idx < cfg.depths.size(); ++stage_idx) {
      int64_t stride = stage_idx == 0 && stem_stride > 2 ? 1 : 2;
      if (net_stride >= output_stride && stride > 1) {
        dilation *= stride;
        stride = 1;
      }
      net_stride *= stride;
      int64_t first_dilation = dilation == 1 || dilation == 2 ? 1 : 2;
      nn::Sequential stage;
      const int64_t out_chs =
          layers::make_divisible(static_cast<double>(cfg.channels[stage_idx]) * cfg.width_factor, cfg.ch_div);
      for (int64_t block_idx = 0; block_idx < cfg.depths[stage_idx]; ++block_idx) {
        const bool first_block = block_idx == 0 && stage_idx == 0;
        BlockArgs a;
        a.in_chs = prev_chs;
        a.out_chs = out_chs;
        a.alpha = cfg.alpha;
        a.beta = 1.0 / std::pow(expected_var, 0.5);
        a.stride = block_idx == 0 ? stride : 1;
        a.dilation = dilation;
        a.first_dilation = first_dilation;
        a.bottle_ratio = cfg.reg && first_block ? 1.0 : cfg.bottle_ratio;
        a.drop_path_rate = rates[block_index++];
        stage->push_back(NormFreeBlock(a, cfg, conv_spec, act_spec));
        // The expected variance resets after the first block of each stage, then grows by alpha^2.
        if (block_idx == 0) expected_var = 1.0;
        expected_var += std::pow(cfg.alpha, 2.0);
        first_dilation = dilation;
        prev_chs = out_chs;
      }
      feature_info_.push_back({prev_chs, net_stride, "stages." + std::to_string(stage_idx)});
      stages->push_back(stage);
      stage_list_.push_back(stage);
    }

    num_features_ = prev_chs;
    if (cfg.num_features > 0) {
      // The NF-RegNet / NFNet EfficientNet-like final 1x1 conv.
      num_features_ = layers::make_divisible(cfg.width_factor * static_cast<double>(cfg.num_features), cfg.ch_div);
      final_conv = register_module("final_conv", conv_spec.make(prev_chs, num_features_, 1));
      feature_info_.back() = {num_features_, net_stride, "final_conv"};
    }
    final_act = register_module("final_act", act_spec.make());
    head = register_module("head",
                           layers::ClassifierHeadModule(layers::ClassifierHeadModuleOptions(num_features_, num_classes_)
                                                            .pool_type(args.global_pool.value_or("avg"))
                                                            .drop_rate(args.drop_rate)));
    init_weights(cfg.zero_init_fc);
  }

  // timm's forward_features: stem, stages, final_conv, final_act. With grad
  // checkpointing each stage is checkpointed as one (timm's checkpoint_seq
  // over the stages).
  at::Tensor forward_features(at::Tensor input) override {
    at::Tensor x = stem->forward(input);
    for (size_t i = 0; i < stage_list_.size(); ++i) x = run_stage(i, x);
    if (final_conv) x = final_conv(x);
    return final_act(x);
  }

  // timm's feature levels: the stem tap (stem.conv, or stem.conv2 / stem.conv3
  // for deep stems, before the last stem conv), then each stage, the last
  // replaced by final_conv where there is one.
  std::vector<FeatureInfo> feature_info() const override { return feature_info_; }

  // timm's forward_intermediates: the stem's modules in order, tapping the
  // stem level; then the stages (all, or up to the last level taken with
  // stop_early), final_conv after the last stage (its level is taken before
  // final_act). The final features get final_act only when every stage ran.
  // norm is ignored (no final norm); NCHW only.
  Intermediates forward_intermediates(at::Tensor input,
                                      const IntermediatesOptions& options = IntermediatesOptions()) override {
    check_output_fmt(describe_model(*this), options.output_fmt(), {"NCHW"});
    const auto last_idx = static_cast<int64_t>(stage_list_.size());
    const auto [take_indices, max_index] = feature_take_indices(last_idx + 1, options.indices());
    const std::vector<bool> take = take_mask(last_idx + 1, take_indices);
    Intermediates out;
    at::Tensor x = input;
    size_t i = 0;
    for (auto& module : *stem) {
      x = module.forward(x);
      if (i == stem_feat_idx_ && take[0]) out.intermediates.push_back(x);
      ++i;
    }
    const int64_t stages_run = options.stop_early() ? max_index : last_idx;
    for (int64_t feat_idx = 1; feat_idx <= stages_run; ++feat_idx) {
      x = run_stage(static_cast<size_t>(feat_idx - 1), x);
      if (feat_idx == last_idx && final_conv) x = final_conv(x);
      if (take[static_cast<size_t>(feat_idx)]) out.intermediates.push_back(x);
    }
    if (options.intermediates_only()) return out;
    out.final = stages_run == last_idx ? final_act(x) : x;
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
  GroupMatcher group_matcher(bool coarse) const override {
    return {{"stem", {{"^stem", std::nullopt}}},
            {"blocks",
             {{coarse ? R"(^stages\.(\d+))" : R"(^stages\.(\d+)\.(\d+))", std::nullopt},
              {"^final_conv", std::vector<double>{99999}}}}};
  }

  nn::Sequential stem{nullptr};
  nn::ModuleList stages{nullptr};
  layers::ScaledStdConv2d final_conv{nullptr};  // null: timm's Identity
  NfAct final_act{nullptr};
  layers::ClassifierHeadModule head{nullptr};

 private:
  // timm's output_stride (8, 16 or 32 in practice; timm's loop takes any).
  static int64_t parse_output_stride(const std::string& name, const ModelArgs& args) {
    const std::optional<double> value = model_kwarg_double(name, args, "output_stride");
    if (!value) return 32;
    if (!(*value >= 1.0 && *value <= 1024.0) || std::floor(*value) != *value) {
      throw UsageError(name + ": output_stride must be a positive integer (8, 16 or 32), got " +
                       args.kwargs.at("output_stride"));
    }
    return static_cast<int64_t>(*value);
  }

  // timm's create_stem; records the stem's feature level and the index of its
  // tapped module. Returns the stem's stride.
  int64_t build_stem(int64_t in_chs, int64_t out_chs, const std::string& stem_type, const ConvSpec& conv_spec,
                     const ActSpec& act_spec) {
    nn::Sequential seq;
    int64_t stem_stride = 2;
    FeatureInfo feature{out_chs, 2, "stem.conv"};
    std::string tap = "conv";
    if (stem_type == "deep_quad") {
      // NFNet-F's 4-conv stem: out/8, out/4, out/2 (the tap, stride 2), out (stride 4).
      const std::array<int64_t, 4> chs = {out_chs / 8, out_chs / 4, out_chs / 2, out_chs};
      const std::array<int64_t, 4> strides = {2, 1, 1, 2};
      for (size_t i = 0; i < chs.size(); ++i) {
        seq->push_back("conv" + std::to_string(i + 1), conv_spec.make(in_chs, chs[i], 3, strides[i]));
        // timm's inplace=i < last_idx - 1: act4 reads the tapped conv3's output.
        if (i + 1 != chs.size())
          seq->push_back("act" + std::to_string(i + 2), act_spec.make(/*inplace=*/i + 2 < chs.size()));
        in_chs = chs[i];
      }
      stem_stride = 4;
      feature = {out_chs / 2, 2, "stem.conv3"};
      tap = "conv3";
    } else if (stem_type == "3x3") {
      seq->push_back("conv", conv_spec.make(in_chs, out_chs, 3, 2));
    } else if (stem_type == "7x7_pool") {
      seq->push_back("conv", conv_spec.make(in_chs, out_chs, 7, 2));
      seq->push_back("pool", nn::MaxPool2d(nn::MaxPool2dOptions(3).stride(2).padding(1)));
      stem_stride = 4;
    } else {
      TORCH_INTERNAL_ASSERT(false, "nfnet: stem type ", stem_type, " is not used by a registered model");
    }
    size_t index = 0;
    for (const auto& item : seq->named_children()) {
      if (item.key() == tap) stem_feat_idx_ = index;
      ++index;
    }
    stem = register_module("stem", seq);
    feature_info_.push_back(feature);
    return stem_stride;
  }

  // timm's NormFreeNet init: every conv (ScaledStdConv2d, the SE's fc1 / fc2)
  // kaiming_normal fan_in linear (std 1 / sqrt(fan_in)), bias zero, gain
  // left at gain_init; the head fc normal std 0.01 (zeros with
  // zero_init_fc), bias zero; ECA's Conv1d keeps torch's default.
  void init_weights(bool zero_init_fc) {
    c10::NoGradGuard no_grad;
    for (auto& module : modules(/*include_self=*/false)) {
      if (auto* l = module->as<nn::Linear>()) {
        if (zero_init_fc) {
          l->weight.zero_();
        } else {
          l->weight.normal_(0.0, 0.01);
        }
        if (l->bias.defined()) l->bias.zero_();
      } else if (auto* c = module->as<nn::Conv2d>()) {
        nn::init::kaiming_normal_(c->weight, 0.0, torch::kFanIn, torch::kLinear);
        if (c->bias.defined()) c->bias.zero_();
      }
    }
  }

  at::Tensor run_stage(size_t i, const at::Tensor& x) {
    const std::shared_ptr<nn::SequentialImpl> stage = stage_list_[i].ptr();
    if (!grad_checkpointing_) return stage->forward(x);
    return checkpoint([stage](const at::Tensor& t) { return stage->forward(t); }, x, stage->parameters());
  }

  PretrainedCfg cfg_;
  int64_t num_classes_;
  int64_t num_features_ = 0;
  size_t stem_feat_idx_ = 0;
  std::vector<nn::Sequential> stage_list_;
  std::vector<FeatureInfo> feature_info_;
  bool grad_checkpointing_ = false;
};

// timm's _nfres_cfg: pre-activation ResNet, 7x7 stem + max pool, ReLU.
NfCfg nfres_cfg(std::array<int64_t, 4> depths, const std::string& attn_layer = "", double rd_ratio = 1.0 / 16.0) {
  NfCfg c;
  c.depths = depths;
  c.channels = {256, 512, 1024, 2048};
  c.stem_type = "7x7_pool";
  c.stem_chs = 64;
  c.bottle_ratio = 0.25;
  c.act_layer = "relu";
  c.attn_layer = attn_layer;
  c.attn_rd_ratio = rd_ratio;
  return c;
}

// timm's _nfreg_cfg: NF-RegNet-B, SiLU, SE (rd_ratio 0.5) mid-block.
NfCfg nfreg_cfg(std::array<int64_t, 4> depths, std::array<int64_t, 4> channels = {48, 104, 208, 440}) {
  NfCfg c;
  c.depths = depths;
  c.channels = channels;
  c.stem_type = "3x3";
  c.group_size = 8;
  c.width_factor = 0.75;
  c.bottle_ratio = 2.25;
  c.num_features = 1280 * channels[3] / 440;
  c.reg = true;
  c.attn_layer = "se";
  c.attn_rd_ratio = 0.5;
  return c;
}

// timm's _nfnet_cfg: NFNet-F / L, deep_quad stem, extra conv, SE (or ECA).
NfCfg nfnet_cfg(std::array<int64_t, 4> depths, std::array<int64_t, 4> channels = {256, 512, 1536, 1536},
                int64_t group_size = 128, double bottle_ratio = 0.5, double feat_mult = 2.0,
                const std::string& act_layer = "gelu", const std::string& attn_layer = "se", double rd_ratio = 0.5) {
  NfCfg c;
  c.depths = depths;
  c.channels = channels;
  c.stem_type = "deep_quad";
  c.stem_chs = 128;
  c.group_size = group_size;
  c.bottle_ratio = bottle_ratio;
  c.extra_conv = true;
  c.num_features = static_cast<int64_t>(static_cast<double>(channels[3]) * feat_mult);
  c.act_layer = act_layer;
  c.attn_layer = attn_layer;
  c.attn_rd_ratio = rd_ratio;
  return c;
}

// timm's _dm_nfnet_cfg: DeepMind-compatible NFNet-F (gamma in the
// activations, 'SAME' padding, skipinit).
NfCfg dm_nfnet_cfg(std::array<int64_t, 4> depths) {
  NfCfg c = nfnet_cfg(depths);
  c.gamma_in_act = true;
  c.same_padding = true;
  c.skipinit = true;
  return c;
}

// NFNet-L / ECA-NFNet-L: SiLU, group size 64, bottleneck 0.25.
NfCfg nfnet_l_cfg(std::array<int64_t, 4> depths, double feat_mult, const std::string& attn_layer) {
  NfCfg c = nfnet_cfg(depths, {256, 512, 1536, 1536}, 64, 0.25, feat_mult, "silu", attn_layer, 0.25);
  return c;
}

// timm's _dcfg: 224 px, crop 0.9, bicubic, ImageNet mean / std, stem.conv1, head.fc.
PretrainedCfg dcfg(int64_t size = 224, double crop_pct = 0.9, const std::string& first_conv = "stem.conv1",
                   const std::string& crop_mode = "center") {
  PretrainedCfg p;
  p.input_size = {3, size, size};
  p.interpolation = "bicubic";
  p.crop_pct = crop_pct;
  p.crop_mode = crop_mode;
  p.first_conv = first_conv;
  p.classifier = "head.fc";
  return p;
}

std::vector<NfSpec> nfnet_specs() {
  std::vector<NfSpec> specs;
  // dm_nfnet_f0 .. f6 and nfnet_f0 .. f7: depths (1, 2, 6, 3) * (k + 1).
  const std::array<int64_t, 8> dm_sizes = {192, 224, 256, 320, 384, 416, 448, 0};
  const std::array<double, 7> dm_crops = {0.9, 0.91, 0.92, 0.94, 0.951, 0.954, 0.956};
  const std::array<int64_t, 8> f_sizes = {192, 224, 256, 320, 384, 416, 448, 480};
  auto f_depths = [](int64_t k) { return std::array<int64_t, 4>{k + 1, 2 * (k + 1), 6 * (k + 1), 3 * (k + 1)}; };
  for (size_t k = 0; k < 7; ++k) {
    specs.push_back({"dm_nfnet_f" + std::to_string(k), dm_nfnet_cfg(f_depths(static_cast<int64_t>(k))),
                     dcfg(dm_sizes[k], dm_crops[k], "stem.conv1", "squash")});
  }
  for (size_t k = 0; k < 8; ++k) {
    specs.push_back({"nfnet_f" + std::to_string(k), nfnet_cfg(f_depths(static_cast<int64_t>(k))), dcfg(f_sizes[k])});
  }
  specs.push_back({"nfnet_l0", nfnet_l_cfg({1, 2, 6, 3}, 1.5, "se"), dcfg(224)});
  specs.push_back({"eca_nfnet_l0", nfnet_l_cfg({1, 2, 6, 3}, 1.5, "eca"), dcfg(224)});
  specs.push_back({"eca_nfnet_l1", nfnet_l_cfg({2, 4, 12, 6}, 2.0, "eca"), dcfg(256)});
  specs.push_back({"eca_nfnet_l2", nfnet_l_cfg({3, 6, 18, 9}, 2.0, "eca"), dcfg(320)});
  specs.push_back({"eca_nfnet_l3", nfnet_l_cfg({4, 8, 24, 12}, 2.0, "eca"), dcfg(352)});
  specs.push_back({"nf_regnet_b0", nfreg_cfg({1, 3, 6, 6}), dcfg(192, 0.9, "stem.conv")});
  specs.push_back({"nf_regnet_b1", nfreg_cfg({2, 4, 7, 7}), dcfg(256, 0.9, "stem.conv")});
  specs.push_back({"nf_regnet_b2", nfreg_cfg({2, 4, 8, 8}, {56, 112, 232, 488}), dcfg(240, 0.9, "stem.conv")});
  specs.push_back({"nf_regnet_b3", nfreg_cfg({2, 5, 9, 9}, {56, 128, 248, 528}), dcfg(288, 0.9, "stem.conv")});
  specs.push_back({"nf_regnet_b4", nfreg_cfg({2, 6, 11, 11}, {64, 144, 288, 616}), dcfg(320, 0.9, "stem.conv")});
  specs.push_back({"nf_regnet_b5", nfreg_cfg({3, 7, 14, 14}, {80, 168, 336, 704}), dcfg(384, 0.9, "stem.conv")});
  const std::array<std::pair<const char*, std::array<int64_t, 4>>, 3> res_depths = {
      {{"26", {2, 2, 2, 2}}, {"50", {3, 4, 6, 3}}, {"101", {3, 4, 23, 3}}}};
  for (const auto& [suffix, depths] : res_depths) {
    const std::string d = suffix;
    specs.push_back(
        {"nf_resnet" + d, nfres_cfg(depths), d == "50" ? dcfg(256, 0.94, "stem.conv") : dcfg(224, 0.9, "stem.conv")});
  }
  for (const auto& [suffix, depths] : res_depths) {
    specs.push_back(
        {std::string("nf_seresnet") + suffix, nfres_cfg(depths, "se", 1.0 / 16.0), dcfg(224, 0.9, "stem.conv")});
  }
  for (const auto& [suffix, depths] : res_depths) {
    specs.push_back({std::string("nf_ecaresnet") + suffix, nfres_cfg(depths, "eca"), dcfg(224, 0.9, "stem.conv")});
  }
  // test_nfnet: a tiny NFNet (one block per stage, SiLU, SE rd_ratio 0.25), mean / std 0.5.
  NfSpec test{"test_nfnet", nfnet_cfg({1, 1, 1, 1}, {32, 64, 96, 128}, 8, 0.25, 1.5, "silu", "se", 0.25),
              dcfg(160, 0.95)};
  test.pretrained.mean = {0.5, 0.5, 0.5};
  test.pretrained.std = {0.5, 0.5, 0.5};
  specs.push_back(test);
  return specs;
}

std::string describe(const NfSpec& spec) {
  const NfCfg& c = spec.cfg;
  std::string family = c.stem_type == "deep_quad" ? (c.gamma_in_act ? "NFNet (DeepMind numerics)" : "NFNet")
                       : c.reg                    ? "NF-RegNet"
                                                  : "NF-ResNet";
  std::string depths;
  for (const int64_t d : c.depths) depths += (depths.empty() ? "" : ", ") + std::to_string(d);
  std::string attn = c.attn_layer.empty() ? "" : ", " + std::string(c.attn_layer == "se" ? "SE" : "ECA");
  return family + " (depths " + depths + ", " + c.act_layer + attn + ")";
}

}  // namespace
}  // namespace timm::nfnet

TIMM_PLUGIN("nfnet") {
  for (const auto& spec : timm::nfnet::nfnet_specs()) {
    registrar.add_model(spec.name, timm::nfnet::describe(spec), [spec](const timm::ModelArgs& args) -> timm::ModelPtr {
      return std::make_shared<timm::nfnet::NormFreeNetImpl>(spec, args);
    });
  }
}
