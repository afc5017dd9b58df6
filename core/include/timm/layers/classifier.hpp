// Global pooling and the classifier head, as timm's layers/adaptive_avgmax_pool.py
// and layers/classifier.py.
//
// SelectAdaptivePool2d pools NCHW features to 1x1 with pool_type '' (none),
// 'avg', 'max', 'avgmax' (0.5 * (avg + max)), 'catavgmax' (avg and max
// concatenated on channels: twice the features) or the 'fast*' variants
// (mean / amax, same values); with flatten it returns (N, C). Channels-last
// input (input_fmt "NHWC", Swin's) is pooled over dims 1 and 2 with the fast
// reductions whatever the pool type, as timm. Neither piece
// has parameters of its own; create_classifier's fc is a Linear named as timm's.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <ATen/ATen.h>
#include <torch/arg.h>
#include <torch/nn/cloneable.h>
#include <torch/nn/modules/container/any.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/pimpl.h>

#include "timm/layers/norm.hpp"

namespace timm::layers {

// 2 for 'catavgmax' (and 'fastcatavgmax'), else 1: how many times the channel
// count the pooled features have.
int64_t adaptive_pool_feat_mult(std::string_view pool_type);

struct SelectAdaptivePool2dOptions {
  /* implicit */ SelectAdaptivePool2dOptions(std::string pool_type = "avg") : pool_type_(std::move(pool_type)) {}
  TORCH_ARG(std::string, pool_type);
  TORCH_ARG(bool, flatten) = false;
  TORCH_ARG(std::string, input_fmt) = "NCHW";  // or "NHWC"
};

class SelectAdaptivePool2dImpl : public torch::nn::Cloneable<SelectAdaptivePool2dImpl> {
 public:
  // Throws UsageError for an unknown pool_type or input_fmt.
  explicit SelectAdaptivePool2dImpl(const SelectAdaptivePool2dOptions& options = {});
  void reset() override;
  void pretty_print(std::ostream& stream) const override;
  at::Tensor forward(const at::Tensor& x);

  bool is_identity() const { return options.pool_type().empty(); }
  int64_t feat_mult() const { return adaptive_pool_feat_mult(options.pool_type()); }

  SelectAdaptivePool2dOptions options;
};
TORCH_MODULE(SelectAdaptivePool2d);

// timm's create_classifier(num_features, num_classes, pool_type, input_fmt): the pooling
// (flattening unless pool_type is '') and the fc, Linear(num_features *
// feat_mult, num_classes), or Identity when num_classes <= 0. Register them as
// "global_pool" and "fc" (model.register_module("fc", head.fc.ptr())), call fc
// with head.fc.forward(x).
struct ClassifierHead {
  SelectAdaptivePool2d global_pool{nullptr};
  torch::nn::AnyModule fc;
  int64_t num_pooled_features = 0;  // fc's in_features
};
ClassifierHead create_classifier(int64_t num_features, int64_t num_classes, const std::string& pool_type = "avg",
                                 const std::string& input_fmt = "NCHW");

// timm's ClassifierHead module (the name ClassifierHead is taken by
// create_classifier's parts above): "global_pool", dropout at drop_rate,
// "fc"; keys fc.{weight,bias}. forward_pre_logits is timm's forward(x,
// pre_logits=True), the pooled features after dropout.
struct ClassifierHeadModuleOptions {
  ClassifierHeadModuleOptions(int64_t in_features, int64_t num_classes)
      : in_features_(in_features), num_classes_(num_classes) {}
  TORCH_ARG(int64_t, in_features);
  TORCH_ARG(int64_t, num_classes);  // <= 0: fc is Identity
  TORCH_ARG(std::string, pool_type) = "avg";
  TORCH_ARG(double, drop_rate) = 0.0;
  // "NHWC": channels-last features (Swin's); with pool_type '' fc applies to
  // the last dimension of the unpooled map, as timm.
  TORCH_ARG(std::string, input_fmt) = "NCHW";
};

class ClassifierHeadModuleImpl : public torch::nn::Cloneable<ClassifierHeadModuleImpl> {
 public:
  explicit ClassifierHeadModuleImpl(const ClassifierHeadModuleOptions& options);
  void reset() override;
  void pretty_print(std::ostream& stream) const override;
  at::Tensor forward(const at::Tensor& x);
  at::Tensor forward_pre_logits(const at::Tensor& x);

  ClassifierHeadModuleOptions options;
  SelectAdaptivePool2d global_pool{nullptr};
  torch::nn::AnyModule fc;  // Linear or Identity
};
TORCH_MODULE(ClassifierHeadModule);

// timm's NormMlpClassifierHead (ConvNeXt's head): global_pool -> norm
// (LayerNorm2d on the pooled (N, C, 1, 1), or the norm_layer's
// create_norm2d) -> flatten -> [pre_logits: fc ->
// act, with hidden_size] -> drop -> fc. Keys: norm.{weight,bias},
// [pre_logits.fc.*], fc.{weight,bias}. With pool_type '' nothing is pooled or
// flattened and pre_logits.fc / fc are 1x1 Conv2d, as timm's use_conv. A pool
// type that changes the width ('catavgmax') is refused, as in timm.
struct NormMlpClassifierHeadOptions {
  NormMlpClassifierHeadOptions(int64_t in_features, int64_t num_classes)
      : in_features_(in_features), num_classes_(num_classes) {}
  TORCH_ARG(int64_t, in_features);
  TORCH_ARG(int64_t, num_classes);      // <= 0: fc is Identity
  TORCH_ARG(int64_t, hidden_size) = 0;  // 0: no pre_logits
  TORCH_ARG(std::string, pool_type) = "avg";
  TORCH_ARG(double, drop_rate) = 0.0;
  TORCH_ARG(double, norm_eps) = 1e-6;
  TORCH_ARG(std::string, norm_layer) = "layernorm2d";  // a create_norm2d name (rms_norm.hpp)
  TORCH_ARG(std::string, act_layer) = "tanh";          // of pre_logits
};

class NormMlpClassifierHeadImpl : public torch::nn::Cloneable<NormMlpClassifierHeadImpl> {
 public:
  explicit NormMlpClassifierHeadImpl(const NormMlpClassifierHeadOptions& options);
  void reset() override;
  void pretty_print(std::ostream& stream) const override;
  at::Tensor forward(const at::Tensor& x);
  // timm's forward(x, pre_logits=True): everything but fc (pool, norm,
  // flatten, pre_logits, drop); forward(x) is fc.forward(forward_pre_logits(x)).
  at::Tensor forward_pre_logits(const at::Tensor& x);

  NormMlpClassifierHeadOptions options;
  SelectAdaptivePool2d global_pool{nullptr};
  torch::nn::AnyModule norm;                  // LayerNorm2d unless norm_layer says otherwise
  torch::nn::Sequential pre_logits{nullptr};  // null without hidden_size
  torch::nn::Dropout drop{nullptr};
  torch::nn::AnyModule fc;  // Linear, Conv2d 1x1 (pool_type ''), or Identity
};
TORCH_MODULE(NormMlpClassifierHead);

}  // namespace timm::layers
