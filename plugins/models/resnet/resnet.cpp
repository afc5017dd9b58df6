// ResNet (timm/models/resnet.py), with timm's module names so state_dict keys
// equal timm's. The variants by timm's letters:
// - resnet18 .. resnet200, wide_resnet50_2 / 101_2 (base_width 128): the
//   plain "b" variant (7x7 stem, max-pool, stride on the 3x3 conv);
// - "c" (resnet50c/101c/152c): deep 3x3 stem, stem_width 32 (conv1 becomes
//   Sequential conv1.0..conv1.6, 32-32-64 channels); "s" (resnet50s/101s/
//   152s): the same with stem_width 64 (64-64-128, so layer1 takes 128);
// - "d" (resnet18d .. resnet200d): the "c" stem and avg-pool downsample (keys
//   downsample.1 / .2 after an AvgPool or Identity at .0); "t" (resnet10t,
//   14t, 26t, 50t): a tiered deep stem 24-32-64 and avg-pool downsample;
// - resnext50_32x4d, resnext101_32x8d: grouped 3x3 conv (cardinality, base_width);
// - seresnet*, seresnext26d_32x4d, seresnext50_32x4d: attn_layer='se',
//   timm's SEModule (timm/layers/squeeze_excite.hpp) after the last BN;
//   ecaresnet*: attn_layer='eca', timm's EcaModule (timm/layers/eca.hpp), both
//   named "se"; ecaresnetlight has the 7x7 stem with avg-pool downsample;
// - resnetrs50 .. resnetrs420: "d" with SE at rd_ratio 0.25 and the stem's
//   max-pool replaced by a stride-2 3x3 conv, BN, ReLU (keys maxpool.0/.1);
// - the other ResNeXts / SE-ResNeXts / ECA-ResNeXts (resnext50d_32x4d,
//   resnext101_*, seresnext26t_32x4d, seresnext101*, ecaresnext*t_32x4d):
//   combinations of the above; senet154: the 64-wide deep stem, 64x4d, SE,
//   the first conv at half the width (block_reduce_first 2) and 3x3 strided
//   shortcut convs (down_kernel_size 3);
// - resnetaa*, seresnetaa50d, seresnextaa*: timm's aa_layer=nn.AvgPool2d, so
//   the strided 3x3 conv runs at stride 1 followed by AvgPool2d(2) ("aa"), and
//   the stem's max-pool is an AvgPool2d(2); resnetblur*: aa_layer=BlurPool2d
//   (timm/layers/blur_pool.hpp), the stem pool a stride-1 max-pool and a
//   BlurPool2d (maxpool.0/.1, no state);
// - resnet50_gn: timm's GroupNorm (32 groups) in place of every BatchNorm;
// - ecaresnet50d_pruned / 101d_pruned: ecaresnet50d / 101d at the widths of
//   timm's _pruned files (pruned_widths.hpp), with torch's default init as
//   timm's adapt_model_from_file leaves them;
// - test_resnet: timm's tiny test model (deep stem 16, stages of 32-48-48-96
//   planes, basic-basic-bottleneck-basic blocks).
//
// Supported: num_classes (0: no fc, the pooled features come out), in_chans,
// drop_rate (dropout before fc), drop_path_rate (per-block linear schedule),
// global_pool, and the keyword drop_block_rate (--drop-block: DropBlock in
// layer3 and layer4, timm's drop_blocks).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/TensorIndexing.h>
#include <c10/core/GradMode.h>
#include <torch/nn/cloneable.h>
#include <torch/nn/functional/dropout.h>
#include <torch/nn/init.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>
#include <torch/nn/modules/pooling.h>

#include "timm/base/error.hpp"
#include "timm/layers/any_module.hpp"
#include "timm/layers/batch_norm.hpp"
#include "timm/layers/blur_pool.hpp"
#include "timm/layers/classifier.hpp"
#include "timm/layers/drop_path.hpp"
#include "timm/layers/eca.hpp"
#include "timm/layers/norm.hpp"
#include "timm/layers/squeeze_excite.hpp"
#include "timm/models/features.hpp"
#include "timm/models/grad_checkpoint.hpp"
#include "timm/models/model.hpp"
#include "timm/plugin/plugin.hpp"

#include "pruned_widths.hpp"

namespace timm::resnet {
namespace {

namespace nn = torch::nn;

// timm 1.0.31's default pretrained tag of each model (the first tag of its
// default_cfgs); a model without one has no pretrained weights in timm
// (seresnet18/34, resnet50t, resnet200, seresnet50t/101/152/200d/269d,
// ecaresnet200d, ecaresnext26t/50t_32x4d, resnetaa34d, seresnetaa50d,
// resnetblur18/50d/101d: timm's "untrained").
const std::map<std::string, std::string> kDefaultTags = {
    {"resnet18", "a1_in1k"},
    {"resnet18d", "ra2_in1k"},
    {"resnet26", "bt_in1k"},
    {"resnet34", "a1_in1k"},
    {"resnet34d", "ra2_in1k"},
    {"resnet50", "a1_in1k"},
    {"resnet50d", "ra2_in1k"},
    {"resnet101", "a1h_in1k"},
    {"resnet101d", "ra2_in1k"},
    {"resnet152", "a1h_in1k"},
    {"resnet152d", "ra2_in1k"},
    {"resnext50_32x4d", "a1h_in1k"},
    {"resnext101_32x8d", "tv_in1k"},
    {"seresnet50", "a1_in1k"},
    {"seresnext26d_32x4d", "bt_in1k"},
    {"seresnext50_32x4d", "racm_in1k"},
    {"wide_resnet50_2", "racm_in1k"},
    {"wide_resnet101_2", "tv_in1k"},
    {"resnet50c", "gluon_in1k"},
    {"resnet101c", "gluon_in1k"},
    {"resnet152c", "gluon_in1k"},
    {"resnet50s", "gluon_in1k"},
    {"resnet101s", "gluon_in1k"},
    {"resnet152s", "gluon_in1k"},
    {"resnet10t", "c3_in1k"},
    {"resnet14t", "c3_in1k"},
    {"resnet26t", "ra2_in1k"},
    {"resnet26d", "bt_in1k"},
    {"resnet200d", "ra2_in1k"},
    {"seresnet152d", "ra2_in1k"},
    {"ecaresnet26t", "ra2_in1k"},
    {"ecaresnet50d", "miil_in1k"},
    {"ecaresnet50t", "ra2_in1k"},
    {"ecaresnet101d", "miil_in1k"},
    {"ecaresnet269d", "ra2_in1k"},
    {"ecaresnetlight", "miil_in1k"},
    {"resnetrs50", "tf_in1k"},
    {"resnetrs101", "tf_in1k"},
    {"resnetrs152", "tf_in1k"},
    {"resnetrs200", "tf_in1k"},
    {"resnetrs270", "tf_in1k"},
    {"resnetrs350", "tf_in1k"},
    {"resnetrs420", "tf_in1k"},
    {"resnext50d_32x4d", "bt_in1k"},
    {"resnext101_32x4d", "fb_ssl_yfcc100m_ft_in1k"},
    {"resnext101_32x16d", "fb_wsl_ig1b_ft_in1k"},
    {"resnext101_32x32d", "fb_wsl_ig1b_ft_in1k"},
    {"resnext101_64x4d", "c1_in1k"},
    {"seresnext26t_32x4d", "bt_in1k"},
    {"seresnext101_32x4d", "gluon_in1k"},
    {"seresnext101_32x8d", "ah_in1k"},
    {"seresnext101_64x4d", "gluon_in1k"},
    {"seresnext101d_32x8d", "ah_in1k"},
    {"senet154", "gluon_in1k"},
    {"test_resnet", "r160_in1k"},
    {"resnetaa50", "a1h_in1k"},
    {"resnetaa50d", "sw_in12k_ft_in1k"},
    {"resnetaa101d", "sw_in12k_ft_in1k"},
    {"seresnextaa101d_32x8d", "sw_in12k_ft_in1k_288"},
    {"seresnextaa201d_32x8d", "sw_in12k_ft_in1k_384"},
    {"resnetblur50", "bt_in1k"},
    {"resnet50_gn", "a1h_in1k"},
    {"ecaresnet50d_pruned", "miil_in1k"},
    {"ecaresnet101d_pruned", "miil_in1k"},
};

// timm's test_input_size / test_crop_pct of the models whose default cfg has them
// (validate.py evaluates at them unless --use-train-size).
const std::map<std::string, TestSize> kTestSizes = {{"resnet18", {288, 1.0}},
                                                    {"resnet18d", {288, 0.95}},
                                                    {"resnet26", {288, 0.95}},
                                                    {"resnet34", {288, 1.0}},
                                                    {"resnet34d", {288, 0.95}},
                                                    {"resnet50", {288, 1.0}},
                                                    {"resnet50d", {288, 0.95}},
                                                    {"resnet101", {288, 1.0}},
                                                    {"resnet101d", {320, 1.0}},
                                                    {"resnet152", {288, 1.0}},
                                                    {"resnet152d", {320, 1.0}},
                                                    {"resnext50_32x4d", {288, 1.0}},
                                                    {"seresnet50", {288, 1.0}},
                                                    {"seresnext26d_32x4d", {288, 0.95}},
                                                    {"seresnext50_32x4d", {288, 0.95}},
                                                    {"wide_resnet50_2", {288, 0.95}},
                                                    {"resnet10t", {224, 0.95}},
                                                    {"resnet14t", {224, 0.95}},
                                                    {"resnet26t", {320, 1.0}},
                                                    {"resnet26d", {288, 0.95}},
                                                    {"resnet200d", {320, 1.0}},
                                                    {"seresnet152d", {320, 1.0}},
                                                    {"ecaresnet26t", {320, 0.95}},
                                                    {"ecaresnet50d", {288, 0.95}},
                                                    {"ecaresnet50t", {320, 0.95}},
                                                    {"ecaresnet101d", {288, 0.95}},
                                                    {"ecaresnet269d", {352, 1.0}},
                                                    {"ecaresnetlight", {288, 0.95}},
                                                    {"resnetrs50", {224, std::nullopt}},
                                                    {"resnetrs101", {288, std::nullopt}},
                                                    {"resnetrs152", {320, std::nullopt}},
                                                    {"resnetrs200", {320, std::nullopt}},
                                                    {"resnetrs270", {352, std::nullopt}},
                                                    {"resnetrs350", {384, std::nullopt}},
                                                    {"resnetrs420", {416, std::nullopt}},
                                                    {"resnext50d_32x4d", {288, 0.95}},
                                                    {"resnext101_64x4d", {288, 1.0}},
                                                    {"seresnext26t_32x4d", {288, 0.95}},
                                                    {"seresnext101_32x8d", {288, 1.0}},
                                                    {"seresnext101d_32x8d", {288, 1.0}},
                                                    {"resnetaa50", {288, 1.0}},
                                                    {"resnetaa50d", {288, 1.0}},
                                                    {"resnetaa101d", {288, 1.0}},
                                                    {"seresnextaa101d_32x8d", {320, 1.0}},
                                                    {"resnetblur50", {288, 0.95}},
                                                    {"resnet50_gn", {288, 0.95}},
                                                    {"ecaresnet50d_pruned", {288, 0.95}},
                                                    {"ecaresnet101d_pruned", {288, 0.95}},
                                                    {"resnet200", {288, 0.95}},
                                                    {"resnet50t", {288, 0.95}},
                                                    {"seresnet18", {288, 0.95}},
                                                    {"seresnet34", {288, 0.95}},
                                                    {"seresnet50t", {288, 0.95}},
                                                    {"seresnet101", {288, 0.95}},
                                                    {"seresnet152", {288, 0.95}},
                                                    {"seresnet200d", {288, 0.95}},
                                                    {"seresnet269d", {288, 0.95}},
                                                    {"ecaresnet200d", {288, 0.95}},
                                                    {"resnetaa34d", {288, 0.95}},
                                                    {"seresnetaa50d", {288, 0.95}},
                                                    {"resnetblur18", {288, 0.95}},
                                                    {"resnetblur50d", {288, 0.95}},
                                                    {"resnetblur101d", {288, 0.95}}};

// timm's act_layer(inplace=True): every ReLU here follows a norm, a drop
// block or the residual add, whose fresh output nothing else reads and whose
// backward does not need it, so it is overwritten rather than a new tensor
// allocated per activation. The residual add itself is in place for the same
// reason: its left side is the fresh output of a norm, an attention gate's
// multiply or drop path.
nn::ReLU inplace_relu() { return nn::ReLU(nn::ReLUOptions().inplace(true)); }

nn::Conv2d conv(int64_t in, int64_t out, int64_t kernel, int64_t stride = 1, int64_t groups = 1) {
  return nn::Conv2d(nn::Conv2dOptions(in, out, kernel).stride(stride).padding(kernel / 2).groups(groups).bias(false));
}

// timm's drop_block_2d (layers/drop.py) with its defaults (no noise, one
// mask shared by the channels, kept activations scaled by the kept fraction):
// Bernoulli(gamma) block centres grown to block_size x block_size squares by a
// stride-1 max-pool, zeroed in `x`. The mask is drawn and normalised with the
// same ops in the same order as timm's, so a seeded generator gives timm's
// mask.
at::Tensor drop_block_2d(const at::Tensor& x, double drop_prob, int64_t block_size, double gamma_scale) {
  using at::indexing::None;
  using at::indexing::Slice;
  const int64_t batch = x.size(0), height = x.size(2), width = x.size(3);
  const int64_t kh = std::min(block_size, height), kw = std::min(block_size, width);
  // The seed rate of a block centre, so that about drop_prob of the map falls
  // in a dropped block (the paper's gamma).
  const double gamma = gamma_scale * drop_prob * static_cast<double>(height) * static_cast<double>(width) /
                       static_cast<double>(kh * kw) / static_cast<double>((height - kh + 1) * (width - kw + 1));
  at::Tensor keep_mask;
  {
    c10::NoGradGuard no_grad;
    at::Tensor block_mask = at::empty({batch, 1, height, width}, x.options()).bernoulli_(gamma);
    block_mask = at::max_pool2d(block_mask, {kh, kw}, {1, 1}, {kh / 2, kw / 2});
    // An even kernel makes the pooled map one larger in that dimension.
    if (kh % 2 == 0 || kw % 2 == 0) {
      block_mask = block_mask.index({"...", Slice((kh + 1) % 2, None), Slice((kw + 1) % 2, None)});
    }
    keep_mask = at::rsub(block_mask, 1.0);
    // Python's `numel / tensor` is tensor.reciprocal() * numel.
    const at::Tensor scale =
        keep_mask.to(at::kFloat).sum().add(1e-7).reciprocal() * static_cast<double>(keep_mask.numel());
    keep_mask.mul_(scale.to(x.scalar_type()));
  }
  return x * keep_mask;
}

struct DropBlockOptions {
  DropBlockOptions(double drop_prob, int64_t block_size, double gamma_scale)
      : drop_prob_(drop_prob), block_size_(block_size), gamma_scale_(gamma_scale) {}
  TORCH_ARG(double, drop_prob);
  TORCH_ARG(int64_t, block_size);
  TORCH_ARG(double, gamma_scale);
};

// timm's DropBlock2d: drop_block_2d in training, the identity in eval mode.
// No parameters or buffers, so no state_dict keys.
class DropBlockImpl : public nn::Cloneable<DropBlockImpl> {
 public:
  explicit DropBlockImpl(const DropBlockOptions& options) : options(options) {}
  void reset() override {}
  at::Tensor forward(const at::Tensor& x) {
    if (!is_training() || options.drop_prob() == 0.0) return x;
    return drop_block_2d(x, options.drop_prob(), options.block_size(), options.gamma_scale());
  }

  DropBlockOptions options;
};
TORCH_MODULE(DropBlock);

// timm's drop_blocks(drop_prob): none in layer1 and layer2, 5x5 blocks at a
// quarter of the seed rate in layer3, 3x3 blocks in layer4.
std::optional<DropBlockOptions> stage_drop_block(size_t stage, double drop_block_rate) {
  if (drop_block_rate == 0.0) return std::nullopt;
  if (stage == 2) return DropBlockOptions(drop_block_rate, 5, 0.25);
  if (stage == 3) return DropBlockOptions(drop_block_rate, 3, 1.0);
  return std::nullopt;
}

// timm's attn_layer of the blocks: none, 'se' (SEModule) or 'eca' (EcaModule),
// either one after the block's last BN, named "se".
enum class Attn { kNone, kSe, kEca };

// timm's norm_layer: BatchNorm2d, or 'groupnorm' (timm's GroupNorm: 32
// groups, eps 1e-5, resnet50_gn) everywhere a BatchNorm would be.
enum class Norm { kBatch, kGroup };

nn::AnyModule make_norm(Norm norm, int64_t channels) {
  if (norm == Norm::kGroup) return nn::AnyModule(layers::GroupNorm(channels));
  return nn::AnyModule(layers::BatchNorm2d(channels));
}

void zero_weight(const nn::AnyModule& norm) { nn::init::zeros_(norm.ptr()->named_parameters(false)["weight"]); }

// timm's aa_layer: none, nn.AvgPool2d (the "aa" models: create_aa falls back
// to AvgPool2d(2), stride 2, no padding) or BlurPool2d (the "blur" models:
// binomial 3x3, reflect padding, stride 2). Neither holds state.
enum class Aa { kNone, kAvgPool, kBlur };

nn::AnyModule make_aa(Aa aa, int64_t channels) {
  if (aa == Aa::kBlur) return nn::AnyModule(layers::BlurPool2d(layers::BlurPool2dOptions(channels).stride(2)));
  return nn::AnyModule(nn::AvgPool2d(nn::AvgPool2dOptions(2)));
}

// What both block kinds are built from.
struct BlockArgs {
  int64_t inplanes = 0;
  int64_t planes = 0;
  int64_t stride = 1;
  double drop_path_rate = 0.0;
  int64_t cardinality = 1;  // groups of the Bottleneck's 3x3 conv
  int64_t base_width = 64;  // Bottleneck width = floor(planes * base_width / 64) * cardinality
  bool avg_down = false;    // shortcut projection through an AvgPool (the "d" variants)
  Attn attn = Attn::kNone;
  double se_rd_ratio = 1.0 / 16.0;  // the SE's reduction (0.25 in the ResNet-RS)
  std::optional<DropBlockOptions> drop_block;
  bool downsample = false;   // a shortcut projection (the stage's first block, where the shape changes)
  int64_t reduce_first = 1;  // the first conv's output is its width / reduce_first (senet154: 2)
  int64_t down_kernel = 1;   // the strided shortcut conv's kernel (senet154: 3)
  Aa aa = Aa::kNone;         // with a stride of 2, the strided conv runs at stride 1 and aa downsamples
  Norm norm = Norm::kBatch;
  const PrunedBlock* pruned = nullptr;  // the pruned models' widths and ECA kernel
};

// The shortcut projection, needed where the shape changes. timm's
// downsample_conv: "0" a 1x1 strided conv (down_kernel x down_kernel where
// strided: senet154's 3x3), "1" its norm. With avg_down, timm's
// downsample_avg: "0" AvgPool2d(2, stride, ceil_mode, no padding in the count)
// or Identity at stride 1, "1" a 1x1 conv, "2" its norm.
nn::Sequential make_downsample(int64_t inplanes, int64_t outplanes, const BlockArgs& a) {
  const int64_t stride = a.stride;
  if (!a.avg_down) {
    nn::Sequential seq(conv(inplanes, outplanes, stride == 1 ? 1 : a.down_kernel, stride));
    seq->push_back(make_norm(a.norm, outplanes));
    return seq;
  }
  nn::Sequential seq;
  if (stride == 1) {
    seq->push_back(nn::Identity());
  } else {
    seq->push_back(nn::AvgPool2d(nn::AvgPool2dOptions(2).stride(stride).ceil_mode(true).count_include_pad(false)));
  }
  seq->push_back(conv(inplanes, outplanes, 1));
  seq->push_back(make_norm(a.norm, outplanes));
  return seq;
}

// timm's create_attn(attn_layer, channels) in a block, registered as "se"
// whichever module it is.
template <typename Block>
void register_attn(Block& block, const BlockArgs& a, int64_t channels) {
  if (a.attn == Attn::kSe) {
    block.se = block.register_module("se", layers::SEModule(layers::SEModuleOptions(channels).rd_ratio(a.se_rd_ratio)));
  } else if (a.attn == Attn::kEca && a.pruned) {
    // timm's pruning keeps the ECA of the unpruned width, so its kernel.
    block.eca =
        block.register_module("se", layers::EcaModule(layers::EcaModuleOptions().kernel_size(a.pruned->eca_kernel)));
  } else if (a.attn == Attn::kEca) {
    block.eca = block.register_module("se", layers::EcaModule(channels));
  }
}

template <typename Block>
at::Tensor apply_attn(Block& block, const at::Tensor& x) {
  if (block.se) return block.se(x);
  if (block.eca) return block.eca(x);
  return x;
}

// Registration order follows timm's attribute order (conv1, bn1, ..., then
// downsample, drop_path) so state_dict lists keys in timm's order too.
class BasicBlockImpl : public nn::Module {
 public:
  static constexpr int64_t kExpansion = 1;

  explicit BasicBlockImpl(const BlockArgs& a) {
    const int64_t outplanes = a.planes * kExpansion;
    const int64_t first_planes = a.planes / a.reduce_first;
    const bool use_aa = a.aa != Aa::kNone && a.stride == 2;
    conv1 = register_module("conv1", conv(a.inplanes, first_planes, 3, use_aa ? 1 : a.stride));
    bn1 = layers::register_any(*this, "bn1", make_norm(a.norm, first_planes));
    if (a.drop_block) drop_block = register_module("drop_block", DropBlock(*a.drop_block));
    act1 = register_module("act1", inplace_relu());
    if (use_aa) {
      aa = layers::register_any(*this, "aa", make_aa(a.aa, first_planes));
    }
    conv2 = register_module("conv2", conv(first_planes, outplanes, 3));
    bn2 = layers::register_any(*this, "bn2", make_norm(a.norm, outplanes));
    register_attn(*this, a, outplanes);
    act2 = register_module("act2", inplace_relu());
    if (a.downsample) downsample = register_module("downsample", make_downsample(a.inplanes, outplanes, a));
    if (a.drop_path_rate > 0.0) drop_path = register_module("drop_path", layers::DropPath(a.drop_path_rate));
  }

  at::Tensor forward(const at::Tensor& input) {
    at::Tensor x = bn1.forward(conv1(input));
    if (drop_block) x = drop_block(x);
    x = act1(x);
    if (!aa.is_empty()) x = aa.forward(x);
    x = bn2.forward(conv2(x));
    x = apply_attn(*this, x);
    if (drop_path) x = drop_path(x);
    x.add_(downsample ? downsample->forward(input) : input);  // timm's x += shortcut
    return act2(x);
  }

  // timm's zero_init_last: each residual branch starts as zero.
  void zero_init_last() { zero_weight(bn2); }

  nn::Conv2d conv1{nullptr}, conv2{nullptr};
  nn::AnyModule bn1, bn2;  // BatchNorm2d or GroupNorm
  DropBlock drop_block{nullptr};
  nn::ReLU act1{nullptr}, act2{nullptr};
  nn::AnyModule aa;                // empty without anti-aliasing
  layers::SEModule se{nullptr};    // attn 'se', or
  layers::EcaModule eca{nullptr};  // attn 'eca', also named "se"
  nn::Sequential downsample{nullptr};
  layers::DropPath drop_path{nullptr};
};
TORCH_MODULE(BasicBlock);

class BottleneckImpl : public nn::Module {
 public:
  static constexpr int64_t kExpansion = 4;

  // width = planes for the plain ResNets (cardinality 1, base_width 64); the
  // stride sits on the 3x3 conv ("v1.5"), which has `cardinality` groups.
  explicit BottleneckImpl(const BlockArgs& a) {
    int64_t width = a.planes * a.base_width / 64 * a.cardinality;
    int64_t first_planes = width / a.reduce_first;
    int64_t outplanes = a.planes * kExpansion;
    if (a.pruned) {
      first_planes = a.pruned->conv1;
      width = a.pruned->conv2;
      outplanes = a.pruned->conv3;
    }
    const bool use_aa = a.aa != Aa::kNone && a.stride == 2;
    conv1 = register_module("conv1", conv(a.inplanes, first_planes, 1));
    bn1 = layers::register_any(*this, "bn1", make_norm(a.norm, first_planes));
    act1 = register_module("act1", inplace_relu());
    conv2 = register_module("conv2", conv(first_planes, width, 3, use_aa ? 1 : a.stride, a.cardinality));
    bn2 = layers::register_any(*this, "bn2", make_norm(a.norm, width));
    if (a.drop_block) drop_block = register_module("drop_block", DropBlock(*a.drop_block));
    act2 = register_module("act2", inplace_relu());
    if (use_aa) {
      aa = layers::register_any(*this, "aa", make_aa(a.aa, width));
    }
    conv3 = register_module("conv3", conv(width, outplanes, 1));
    bn3 = layers::register_any(*this, "bn3", make_norm(a.norm, outplanes));
    register_attn(*this, a, outplanes);
    act3 = register_module("act3", inplace_relu());
    if (a.downsample) downsample = register_module("downsample", make_downsample(a.inplanes, outplanes, a));
    if (a.drop_path_rate > 0.0) drop_path = register_module("drop_path", layers::DropPath(a.drop_path_rate));
  }

  at::Tensor forward(const at::Tensor& input) {
    at::Tensor x = act1(bn1.forward(conv1(input)));
    x = bn2.forward(conv2(x));
    if (drop_block) x = drop_block(x);
    x = act2(x);
    if (!aa.is_empty()) x = aa.forward(x);
    x = bn3.forward(conv3(x));
    x = apply_attn(*this, x);
    if (drop_path) x = drop_path(x);
    x.add_(downsample ? downsample->forward(input) : input);  // timm's x += shortcut
    return act3(x);
  }

  void zero_init_last() { zero_weight(bn3); }

  nn::Conv2d conv1{nullptr}, conv2{nullptr}, conv3{nullptr};
  nn::AnyModule bn1, bn2, bn3;  // BatchNorm2d or GroupNorm
  DropBlock drop_block{nullptr};
  nn::ReLU act1{nullptr}, act2{nullptr}, act3{nullptr};
  nn::AnyModule aa;                // empty without anti-aliasing
  layers::SEModule se{nullptr};    // attn 'se', or
  layers::EcaModule eca{nullptr};  // attn 'eca', also named "se"
  nn::Sequential downsample{nullptr};
  layers::DropPath drop_path{nullptr};
};
TORCH_MODULE(Bottleneck);

enum class BlockKind { kBasic, kBottleneck };

// timm's stem_type: '' one 7x7 conv of 64 channels; 'deep' three 3x3 convs of
// stem_width, stem_width, 2 * stem_width channels; 'deep_tiered' of
// 3 * (stem_width / 4), stem_width, 2 * stem_width.
enum class StemType { kPlain, kDeep, kDeepTiered };

// The stem and shortcut of a variant, named by timm's letters.
struct Variant {
  StemType stem = StemType::kPlain;
  int64_t stem_width = 64;  // the deep stems' width (the 7x7 stem has 64 channels whatever it is)
  bool avg_down = false;    // shortcut projection through an AvgPool
};
const Variant kB{};                                  // 7x7 stem
const Variant kC{StemType::kDeep, 32, false};        // deep stem 32, 32, 64
const Variant kD{StemType::kDeep, 32, true};         // deep stem 32, 32, 64, avg-down
const Variant kS{StemType::kDeep, 64, false};        // deep stem 64, 64, 128
const Variant kT{StemType::kDeepTiered, 32, true};   // tiered deep stem 24, 32, 64, avg-down
const Variant kE{StemType::kDeep, 64, true};         // deep stem 64, 64, 128, avg-down
const Variant kAvgDown{StemType::kPlain, 64, true};  // 7x7 stem, avg-down (ecaresnetlight)

// One registered architecture.
struct ResNetSpec {
  std::string name;
  BlockKind block;
  std::vector<int64_t> layers;  // blocks per stage
  PretrainedCfg cfg;
  int64_t cardinality = 1;
  int64_t base_width = 64;
  Variant variant = kB;
  Attn attn = Attn::kNone;
  double se_rd_ratio = 1.0 / 16.0;
  bool replace_stem_pool = false;  // the stem's max-pool becomes a strided 3x3 conv, BN, ReLU (ResNet-RS)
  std::vector<int64_t> channels = {64, 128, 256, 512};  // timm's channels: each stage's planes
  std::vector<BlockKind> stage_blocks = {};             // a block kind per stage (test_resnet); empty: `block`
  int64_t reduce_first = 1;                             // timm's block_reduce_first
  int64_t down_kernel = 1;                              // timm's down_kernel_size
  Aa aa = Aa::kNone;                                    // timm's aa_layer
  Norm norm = Norm::kBatch;                             // timm's norm_layer
  const PrunedWidths* pruned = nullptr;                 // timm's pruned=True: widths from its _pruned file

  BlockKind block_of(size_t stage) const { return stage_blocks.empty() ? block : stage_blocks.at(stage); }
};

class ResNetImpl : public ClassifierImpl {
 public:
  ResNetImpl(const ResNetSpec& spec, const ModelArgs& args)
      : cfg_(spec.cfg), num_classes_(args.num_classes), drop_rate_(args.drop_rate) {
    validate_model_args(spec.name, args, {"drop_block_rate"});
    const double drop_block_rate = model_kwarg_double(spec.name, args, "drop_block_rate").value_or(0.0);
    if (!(drop_block_rate >= 0.0 && drop_block_rate <= 1.0)) {
      throw UsageError(spec.name + ": drop_block_rate must be in [0, 1], got " + args.kwargs.at("drop_block_rate"));
    }
    cfg_.hf_hub_id = timm_hub_id(spec.name, kDefaultTags);
    set_test_size(cfg_, spec.name, kTestSizes);
    const Variant& v = spec.variant;
    int64_t inplanes = v.stem == StemType::kPlain ? 64 : 2 * v.stem_width;
    if (v.stem == StemType::kPlain) {
      conv1 = register_module(
          "conv1", nn::Conv2d(nn::Conv2dOptions(args.in_chans, inplanes, 7).stride(2).padding(3).bias(false)));
    } else {
      int64_t c0 = v.stem == StemType::kDeepTiered ? 3 * (v.stem_width / 4) : v.stem_width;
      int64_t c1 = v.stem_width;
      if (spec.pruned) {
        std::tie(c0, c1, inplanes) = std::tuple(spec.pruned->stem[0], spec.pruned->stem[1], spec.pruned->stem[2]);
      }
      conv1_deep = nn::Sequential(conv(args.in_chans, c0, 3, 2));
      conv1_deep->push_back(make_norm(spec.norm, c0));
      conv1_deep->push_back(inplace_relu());
      conv1_deep->push_back(conv(c0, c1, 3));
      conv1_deep->push_back(make_norm(spec.norm, c1));
      conv1_deep->push_back(inplace_relu());
      conv1_deep->push_back(conv(c1, inplanes, 3));
      register_module("conv1", conv1_deep);
    }
    feature_info_.push_back({inplanes, 2, "act1"});
    bn1 = layers::register_any(*this, "bn1", make_norm(spec.norm, inplanes));
    act1 = register_module("act1", inplace_relu());
    // timm's stem pool (still named "maxpool"): the ResNet-RS's conv (stride 1
    // and the aa layer after it with anti-aliasing), AvgPool2d(2) for
    // aa_layer=AvgPool2d, a stride-1 max-pool and a BlurPool2d for the blur
    // models, else the 3x3 stride-2 max-pool.
    if (spec.replace_stem_pool) {
      nn::Sequential seq(conv(inplanes, inplanes, 3, spec.aa == Aa::kNone ? 2 : 1));
      if (spec.aa != Aa::kNone) seq->push_back(make_aa(spec.aa, inplanes));
      seq->push_back(make_norm(spec.norm, inplanes));
      seq->push_back(inplace_relu());
      maxpool_seq = seq;
    } else if (spec.aa == Aa::kAvgPool) {
      maxpool = make_aa(spec.aa, inplanes);
    } else if (spec.aa == Aa::kBlur) {
      nn::Sequential seq(nn::MaxPool2d(nn::MaxPool2dOptions(3).stride(1).padding(1)));
      seq->push_back(make_aa(spec.aa, inplanes));
      maxpool_seq = seq;
    } else {
      maxpool = nn::AnyModule(nn::MaxPool2d(nn::MaxPool2dOptions(3).stride(2).padding(1)));
    }
    register_module("maxpool", maxpool_seq ? maxpool_seq.ptr() : maxpool.ptr());
    const int64_t num_features = make_stages(spec, inplanes, args.drop_path_rate.value_or(0.0), drop_block_rate);
    auto head = layers::create_classifier(num_features, num_classes_, args.global_pool.value_or("avg"));
    global_pool = register_module("global_pool", head.global_pool);
    fc = head.fc;
    register_module("fc", fc.ptr());
    // timm's pruned models are rebuilt by adapt_model_from_file from fresh
    // torch layers: torch's default init, no zero_init_last.
    if (!spec.pruned) init_weights();
  }

  // timm's forward_features: stem, max-pool (or its conv), layer1..layer4,
  // (N, C, H, W); with grad checkpointing each block of layer1..layer4 is
  // checkpointed (timm's checkpoint_seq over the flattened layers).
  at::Tensor forward_features(at::Tensor input) override {
    at::Tensor x = stem_pool(stem(input));
    if (grad_checkpointing_) return checkpoint_seq(sequence_modules(stages_), x);
    for (auto& stage : stages_) x = stage->forward(x);
    return x;
  }

  // timm's feature levels: act1 (the stem before its pool), layer1..layer4.
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
    x = stem_pool(x);
    const size_t stages_run = options.stop_early() ? static_cast<size_t>(max_index) : stages_.size();
    for (size_t i = 0; i < stages_run; ++i) {
      x = grad_checkpointing_ ? checkpoint_seq(sequence_modules(stages_[i]), x) : stages_[i]->forward(x);
      if (take[i + 1]) out.intermediates.push_back(x);
    }
    if (!options.intermediates_only()) out.final = x;
    return out;
  }

  // timm's forward_head: global_pool, dropout, then fc unless pre_logits.
  at::Tensor forward_head(at::Tensor features, bool pre_logits = false) override {
    at::Tensor x = global_pool(features);
    if (drop_rate_ > 0.0) {
      x = nn::functional::dropout(x, nn::functional::DropoutFuncOptions().p(drop_rate_).training(is_training()));
    }
    return pre_logits ? x : fc.forward(x);
  }

  at::Tensor forward(at::Tensor x) override { return forward_head(forward_features(x)); }
  void set_grad_checkpointing(bool enable) override { grad_checkpointing_ = enable; }
  int64_t num_classes() const override { return num_classes_; }
  const PretrainedCfg& pretrained_cfg() const override { return cfg_; }
  GroupMatcher group_matcher(bool coarse) const override {
    return {{"stem", {{R"(^conv1|bn1|maxpool)", std::nullopt}}},
            {"blocks", {{coarse ? R"(^layer(\d+))" : R"(^layer(\d+)\.(\d+))", std::nullopt}}}};
  }

  nn::Conv2d conv1{nullptr};           // the 7x7 stem, or
  nn::Sequential conv1_deep{nullptr};  // the deep stem, also named "conv1"
  nn::AnyModule bn1;                   // BatchNorm2d or GroupNorm
  nn::ReLU act1{nullptr};
  nn::AnyModule maxpool;                // the stem pool: the max-pool or AvgPool2d(2), or
  nn::Sequential maxpool_seq{nullptr};  // replace_stem_pool's conv, BN, ReLU or the blur pool, also named "maxpool"
  layers::SelectAdaptivePool2d global_pool{nullptr};
  nn::AnyModule fc;

 private:
  at::Tensor stem(const at::Tensor& input) {
    return act1(bn1.forward(conv1 ? conv1(input) : conv1_deep->forward(input)));
  }
  at::Tensor stem_pool(const at::Tensor& x) { return maxpool_seq ? maxpool_seq->forward(x) : maxpool.forward(x); }

  // layer1..layer4; returns the channels of the last stage. Block k of K over
  // the whole net gets drop path rate * k / (K - 1), timm's make_blocks rule.
  // The shortcut projections sit where timm's unpruned model has them (the
  // pruned widths keep that structure).
  int64_t make_stages(const ResNetSpec& spec, int64_t inplanes, double drop_path_rate, double drop_block_rate) {
    int64_t total_blocks = 0;
    for (int64_t n : spec.layers) total_blocks += n;
    int64_t block_index = 0;
    int64_t unpruned_inplanes = inplanes;
    for (size_t stage = 0; stage < spec.layers.size(); ++stage) {
      const BlockKind kind = spec.block_of(stage);
      const int64_t expansion = kind == BlockKind::kBasic ? BasicBlockImpl::kExpansion : BottleneckImpl::kExpansion;
      nn::Sequential blocks;
      for (int64_t i = 0; i < spec.layers[stage]; ++i, ++block_index) {
        BlockArgs a;
        a.inplanes = inplanes;
        a.planes = spec.channels.at(stage);
        a.stride = (stage > 0 && i == 0) ? 2 : 1;
        a.downsample = i == 0 && (a.stride != 1 || unpruned_inplanes != a.planes * expansion);
        a.reduce_first = spec.reduce_first;
        a.down_kernel = spec.down_kernel;
        a.aa = spec.aa;
        a.norm = spec.norm;
        if (spec.pruned) a.pruned = &spec.pruned->stages.at(stage).at(static_cast<size_t>(i));
        a.cardinality = spec.cardinality;
        a.base_width = spec.base_width;
        a.avg_down = spec.variant.avg_down;
        a.attn = spec.attn;
        a.se_rd_ratio = spec.se_rd_ratio;
        a.drop_block = stage_drop_block(stage, drop_block_rate);
        a.drop_path_rate =
            total_blocks > 1 ? drop_path_rate * static_cast<double>(block_index) / static_cast<double>(total_blocks - 1)
                             : 0.0;
        if (kind == BlockKind::kBasic) {
          blocks->push_back(BasicBlock(a));
        } else {
          blocks->push_back(Bottleneck(a));
        }
        unpruned_inplanes = a.planes * expansion;
        inplanes = a.pruned ? a.pruned->conv3 : unpruned_inplanes;
      }
      stages_.push_back(register_module("layer" + std::to_string(stage + 1), blocks));
      feature_info_.push_back({inplanes, int64_t{4} << stage, "layer" + std::to_string(stage + 1)});
    }
    return inplanes;
  }

  // timm's ResNet.init_weights: kaiming-normal (fan_out, relu) convs, the SE
  // 1x1 convs included (their biases keep the Conv2d default), not the ECA's
  // Conv1d, which keeps its default init; BN
  // weight 1 / bias 0 and the Linear's default init are what the torch
  // modules already start with; then the last BN of each block zeroed.
  void init_weights() {
    for (auto& module : modules(/*include_self=*/false)) {
      if (auto* c = module->as<nn::Conv2d>()) {
        nn::init::kaiming_normal_(c->weight, /*a=*/0.0, torch::kFanOut, torch::kReLU);
      } else if (auto* b = module->as<BasicBlock>()) {
        b->zero_init_last();
      } else if (auto* b = module->as<Bottleneck>()) {
        b->zero_init_last();
      }
    }
  }

  PretrainedCfg cfg_;
  int64_t num_classes_;
  double drop_rate_;
  std::vector<nn::Sequential> stages_;
  std::vector<FeatureInfo> feature_info_;
  bool grad_checkpointing_ = false;
};

ResNetSpec group_norm(ResNetSpec spec) {
  spec.norm = Norm::kGroup;
  return spec;
}

ResNetSpec pruned(ResNetSpec spec, const PrunedWidths& widths) {
  spec.pruned = &widths;
  return spec;
}

// timm's default cfg for each name (its first tag): ImageNet mean/std, crop
// mode center, classifier "fc"; the stem conv is "conv1.0" for a deep stem.
PretrainedCfg default_cfg(double crop_pct, int64_t size = 224, const std::string& interpolation = "bicubic",
                          const std::string& first_conv = "conv1") {
  PretrainedCfg cfg;
  cfg.input_size = {3, size, size};
  cfg.interpolation = interpolation;
  cfg.crop_pct = crop_pct;
  cfg.crop_mode = "center";
  cfg.first_conv = first_conv;
  cfg.classifier = "fc";
  return cfg;
}

ResNetSpec with(ResNetSpec spec, int64_t cardinality, int64_t base_width, const Variant& variant, Attn attn) {
  spec.cardinality = cardinality;
  spec.base_width = base_width;
  spec.variant = variant;
  spec.attn = attn;
  return spec;
}

// The ResNet-RS: 'd' stem and shortcut, the max-pool replaced by a conv, SE at
// rd_ratio 0.25.
ResNetSpec resnetrs(ResNetSpec spec) {
  spec = with(std::move(spec), 1, 64, kD, Attn::kSe);
  spec.se_rd_ratio = 0.25;
  spec.replace_stem_pool = true;
  return spec;
}

// Anti-aliased (aa_layer AvgPool2d) or blur-pool (BlurPool2d) models.
ResNetSpec with_aa(ResNetSpec spec, Aa aa) {
  spec.aa = aa;
  return spec;
}

// senet154: the 64-wide deep stem, ResNeXt 64x4d with SE, the first conv of
// each block at half the width, 3x3 strided shortcut convs.
ResNetSpec senet(ResNetSpec spec) {
  spec = with(std::move(spec), 64, 4, kS, Attn::kSe);
  spec.reduce_first = 2;
  spec.down_kernel = 3;
  return spec;
}

// test_resnet: a deep stem 16-16-32 with avg-down, stages of 32, 48, 48, 96
// planes with basic, basic, bottleneck, basic blocks; mean / std 0.5.
ResNetSpec test_resnet(PretrainedCfg cfg) {
  cfg.mean = {0.5, 0.5, 0.5};
  cfg.std = {0.5, 0.5, 0.5};
  ResNetSpec spec = with({"test_resnet", BlockKind::kBasic, {1, 1, 1, 1}, std::move(cfg)}, 1, 64,
                         Variant{StemType::kDeep, 16, true}, Attn::kNone);
  spec.channels = {32, 48, 48, 96};
  spec.stage_blocks = {BlockKind::kBasic, BlockKind::kBasic, BlockKind::kBottleneck, BlockKind::kBasic};
  return spec;
}

std::vector<ResNetSpec> resnet_specs() {
  const auto basic = BlockKind::kBasic;
  const auto bottleneck = BlockKind::kBottleneck;
  const std::vector<int64_t> l10{1, 1, 1, 1}, l18{2, 2, 2, 2}, l34{3, 4, 6, 3}, l101{3, 4, 23, 3}, l152{3, 8, 36, 3},
      l200{3, 24, 36, 3}, l269{3, 30, 48, 8};
  const std::string deep = "conv1.0";
  const Attn none = Attn::kNone, se = Attn::kSe, eca = Attn::kEca;
  const Aa aa = Aa::kAvgPool, blur = Aa::kBlur;
  // Default tags: kDefaultTags above; the cfgs are those of each model's default tag.
  return {
      {"resnet18", basic, l18, default_cfg(0.95)},
      {"resnet26", bottleneck, l18, default_cfg(0.875)},
      {"resnet34", basic, l34, default_cfg(0.95)},
      {"resnet50", bottleneck, l34, default_cfg(0.95)},
      {"resnet101", bottleneck, l101, default_cfg(0.95)},
      {"resnet152", bottleneck, l152, default_cfg(0.95)},
      {"resnet200", bottleneck, l200, default_cfg(0.875)},
      with({"resnet10t", basic, l10, default_cfg(0.875, 176, "bicubic", deep)}, 1, 64, kT, none),
      with({"resnet14t", bottleneck, l10, default_cfg(0.875, 176, "bicubic", deep)}, 1, 64, kT, none),
      with({"resnet18d", basic, l18, default_cfg(0.875, 224, "bicubic", deep)}, 1, 64, kD, none),
      with({"resnet26d", bottleneck, l18, default_cfg(0.875, 224, "bicubic", deep)}, 1, 64, kD, none),
      with({"resnet26t", bottleneck, l18, default_cfg(0.94, 256, "bicubic", deep)}, 1, 64, kT, none),
      with({"resnet34d", basic, l34, default_cfg(0.875, 224, "bicubic", deep)}, 1, 64, kD, none),
      with({"resnet50c", bottleneck, l34, default_cfg(0.875, 224, "bicubic", deep)}, 1, 64, kC, none),
      with({"resnet50d", bottleneck, l34, default_cfg(0.875, 224, "bicubic", deep)}, 1, 64, kD, none),
      with({"resnet50s", bottleneck, l34, default_cfg(0.875, 224, "bicubic", deep)}, 1, 64, kS, none),
      with({"resnet50t", bottleneck, l34, default_cfg(0.875, 224, "bicubic", deep)}, 1, 64, kT, none),
      with({"resnet101c", bottleneck, l101, default_cfg(0.875, 224, "bicubic", deep)}, 1, 64, kC, none),
      with({"resnet101d", bottleneck, l101, default_cfg(0.95, 256, "bicubic", deep)}, 1, 64, kD, none),
      with({"resnet101s", bottleneck, l101, default_cfg(0.875, 224, "bicubic", deep)}, 1, 64, kS, none),
      with({"resnet152c", bottleneck, l152, default_cfg(0.875, 224, "bicubic", deep)}, 1, 64, kC, none),
      with({"resnet152d", bottleneck, l152, default_cfg(0.95, 256, "bicubic", deep)}, 1, 64, kD, none),
      with({"resnet152s", bottleneck, l152, default_cfg(0.875, 224, "bicubic", deep)}, 1, 64, kS, none),
      with({"resnet200d", bottleneck, l200, default_cfg(0.95, 256, "bicubic", deep)}, 1, 64, kD, none),
      with({"wide_resnet50_2", bottleneck, l34, default_cfg(0.875)}, 1, 128, kB, none),
      with({"wide_resnet101_2", bottleneck, l101, default_cfg(0.875, 224, "bilinear")}, 1, 128, kB, none),
      with({"resnext50_32x4d", bottleneck, l34, default_cfg(0.95)}, 32, 4, kB, none),
      with({"resnext101_32x8d", bottleneck, l101, default_cfg(0.875, 224, "bilinear")}, 32, 8, kB, none),
      with({"seresnet18", basic, l18, default_cfg(0.875)}, 1, 64, kB, se),
      with({"seresnet34", basic, l34, default_cfg(0.875)}, 1, 64, kB, se),
      with({"seresnet50", bottleneck, l34, default_cfg(0.95)}, 1, 64, kB, se),
      with({"seresnet50t", bottleneck, l34, default_cfg(0.875, 224, "bicubic", deep)}, 1, 64, kT, se),
      with({"seresnet101", bottleneck, l101, default_cfg(0.875)}, 1, 64, kB, se),
      with({"seresnet152", bottleneck, l152, default_cfg(0.875)}, 1, 64, kB, se),
      with({"seresnet152d", bottleneck, l152, default_cfg(0.95, 256, "bicubic", deep)}, 1, 64, kD, se),
      with({"seresnet200d", bottleneck, l200, default_cfg(0.875, 256, "bicubic", deep)}, 1, 64, kD, se),
      with({"seresnet269d", bottleneck, l269, default_cfg(0.875, 256, "bicubic", deep)}, 1, 64, kD, se),
      with({"seresnext26d_32x4d", bottleneck, l18, default_cfg(0.875, 224, "bicubic", deep)}, 32, 4, kD, se),
      with({"seresnext50_32x4d", bottleneck, l34, default_cfg(0.875)}, 32, 4, kB, se),
      // ecaresnetlight: timm passes stem_width=32, which the 7x7 stem ignores.
      with({"ecaresnetlight", bottleneck, {1, 1, 11, 3}, default_cfg(0.875)}, 1, 64, kAvgDown, eca),
      with({"ecaresnet26t", bottleneck, l18, default_cfg(0.875, 256, "bicubic", deep)}, 1, 64, kT, eca),
      with({"ecaresnet50d", bottleneck, l34, default_cfg(0.875, 224, "bicubic", deep)}, 1, 64, kD, eca),
      with({"ecaresnet50t", bottleneck, l34, default_cfg(0.875, 256, "bicubic", deep)}, 1, 64, kT, eca),
      with({"ecaresnet101d", bottleneck, l101, default_cfg(0.875, 224, "bicubic", deep)}, 1, 64, kD, eca),
      with({"ecaresnet200d", bottleneck, l200, default_cfg(0.95, 256, "bicubic", deep)}, 1, 64, kD, eca),
      with({"ecaresnet269d", bottleneck, l269, default_cfg(0.95, 320, "bicubic", deep)}, 1, 64, kD, eca),
      resnetrs({"resnetrs50", bottleneck, l34, default_cfg(0.91, 160, "bicubic", deep)}),
      resnetrs({"resnetrs101", bottleneck, l101, default_cfg(0.94, 192, "bicubic", deep)}),
      resnetrs({"resnetrs152", bottleneck, l152, default_cfg(1.0, 256, "bicubic", deep)}),
      resnetrs({"resnetrs200", bottleneck, l200, default_cfg(1.0, 256, "bicubic", deep)}),
      resnetrs({"resnetrs270", bottleneck, {4, 29, 53, 4}, default_cfg(1.0, 256, "bicubic", deep)}),
      resnetrs({"resnetrs350", bottleneck, {4, 36, 72, 4}, default_cfg(1.0, 288, "bicubic", deep)}),
      resnetrs({"resnetrs420", bottleneck, {4, 44, 87, 4}, default_cfg(1.0, 320, "bicubic", deep)}),
      with({"resnext50d_32x4d", bottleneck, l34, default_cfg(0.875, 224, "bicubic", deep)}, 32, 4, kD, none),
      with({"resnext101_32x4d", bottleneck, l101, default_cfg(0.875, 224, "bilinear")}, 32, 4, kB, none),
      with({"resnext101_32x16d", bottleneck, l101, default_cfg(0.875, 224, "bilinear")}, 32, 16, kB, none),
      with({"resnext101_32x32d", bottleneck, l101, default_cfg(0.875, 224, "bilinear")}, 32, 32, kB, none),
      with({"resnext101_64x4d", bottleneck, l101, default_cfg(0.95)}, 64, 4, kB, none),
      with({"seresnext26t_32x4d", bottleneck, l18, default_cfg(0.875, 224, "bicubic", deep)}, 32, 4, kT, se),
      with({"seresnext101_32x4d", bottleneck, l101, default_cfg(0.875)}, 32, 4, kB, se),
      with({"seresnext101_32x8d", bottleneck, l101, default_cfg(0.95)}, 32, 8, kB, se),
      with({"seresnext101_64x4d", bottleneck, l101, default_cfg(0.875)}, 64, 4, kB, se),
      with({"seresnext101d_32x8d", bottleneck, l101, default_cfg(0.95, 224, "bicubic", deep)}, 32, 8, kD, se),
      senet({"senet154", bottleneck, l152, default_cfg(0.875, 224, "bicubic", deep)}),
      with({"ecaresnext26t_32x4d", bottleneck, l18, default_cfg(0.875, 224, "bicubic", deep)}, 32, 4, kT, eca),
      with({"ecaresnext50t_32x4d", bottleneck, l34, default_cfg(0.875, 224, "bicubic", deep)}, 32, 4, kT, eca),
      test_resnet(default_cfg(0.95, 160, "bilinear", deep)),
      with_aa(with({"resnetaa34d", basic, l34, default_cfg(0.875, 224, "bicubic", deep)}, 1, 64, kD, none), aa),
      with_aa({"resnetaa50", bottleneck, l34, default_cfg(0.95)}, aa),
      with_aa(with({"resnetaa50d", bottleneck, l34, default_cfg(0.95, 224, "bicubic", deep)}, 1, 64, kD, none), aa),
      with_aa(with({"resnetaa101d", bottleneck, l101, default_cfg(0.95, 224, "bicubic", deep)}, 1, 64, kD, none), aa),
      with_aa(with({"seresnetaa50d", bottleneck, l34, default_cfg(0.875, 224, "bicubic", deep)}, 1, 64, kD, se), aa),
      with_aa(with({"seresnextaa101d_32x8d", bottleneck, l101, default_cfg(0.95, 288, "bicubic", deep)}, 32, 8, kD, se),
              aa),
      with_aa(with({"seresnextaa201d_32x8d", bottleneck, {3, 24, 36, 4}, default_cfg(1.0, 384, "bicubic", deep)}, 32, 8,
                   kE, se),
              aa),
      with_aa({"resnetblur18", basic, l18, default_cfg(0.875)}, blur),
      with_aa({"resnetblur50", bottleneck, l34, default_cfg(0.875)}, blur),
      with_aa(with({"resnetblur50d", bottleneck, l34, default_cfg(0.875, 224, "bicubic", deep)}, 1, 64, kD, none),
              blur),
      with_aa(with({"resnetblur101d", bottleneck, l101, default_cfg(0.875, 224, "bicubic", deep)}, 1, 64, kD, none),
              blur),
      group_norm({"resnet50_gn", bottleneck, l34, default_cfg(0.94)}),
      pruned(with({"ecaresnet50d_pruned", bottleneck, l34, default_cfg(0.875, 224, "bicubic", deep)}, 1, 64, kD, eca),
             kEcaresnet50dPruned),
      pruned(with({"ecaresnet101d_pruned", bottleneck, l101, default_cfg(0.875, 224, "bicubic", deep)}, 1, 64, kD, eca),
             kEcaresnet101dPruned),
  };
}

std::string describe(const ResNetSpec& spec) {
  std::string text = spec.pruned ? "pruned " : "";
  text += spec.attn == Attn::kSe ? "SE-" : spec.attn == Attn::kEca ? "ECA-" : "";
  if (spec.cardinality > 1) {
    text += "ResNeXt " + std::to_string(spec.cardinality) + "x" + std::to_string(spec.base_width) + "d";
  } else {
    text += spec.base_width != 64 ? "Wide ResNet (base width " + std::to_string(spec.base_width) + ")" : "ResNet";
  }
  text += " (";
  const Variant& v = spec.variant;
  if (v.stem == StemType::kDeep) {
    text += "deep stem " + std::to_string(v.stem_width) + ", ";
  } else if (v.stem == StemType::kDeepTiered) {
    text += "tiered deep stem " + std::to_string(3 * (v.stem_width / 4)) + "-" + std::to_string(v.stem_width) + ", ";
  }
  if (spec.replace_stem_pool) text += "conv stem pool, ";
  if (v.avg_down) text += "avg-down, ";
  if (spec.aa == Aa::kAvgPool) text += "anti-aliased (avg-pool), ";
  if (spec.aa == Aa::kBlur) text += "blur-pool, ";
  if (spec.norm == Norm::kGroup) text += "GroupNorm, ";
  if (spec.reduce_first != 1) text += "first conv at 1/" + std::to_string(spec.reduce_first) + " width, ";
  if (spec.down_kernel != 1) {
    text += std::to_string(spec.down_kernel) + "x" + std::to_string(spec.down_kernel) + " shortcut conv, ";
  }
  if (!spec.stage_blocks.empty()) {
    text += "mixed blocks";
  } else {
    text += spec.block == BlockKind::kBasic ? "BasicBlock" : "Bottleneck";
  }
  text += ", layers ";
  for (size_t i = 0; i < spec.layers.size(); ++i) {
    if (i > 0) text += '-';
    text += std::to_string(spec.layers[i]);
  }
  text += ')';
  return text;
}

}  // namespace
}  // namespace timm::resnet

TIMM_PLUGIN("resnet") {
  for (const auto& spec : timm::resnet::resnet_specs()) {
    registrar.add_model(spec.name, timm::resnet::describe(spec), [spec](const timm::ModelArgs& args) -> timm::ModelPtr {
      return std::make_shared<timm::resnet::ResNetImpl>(spec, args);
    });
  }
}
