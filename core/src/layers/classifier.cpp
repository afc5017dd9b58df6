#include "timm/layers/classifier.hpp"

#include <array>
#include <ostream>

#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>

#include "timm/base/error.hpp"
#include "timm/base/names.hpp"
#include "timm/layers/activations.hpp"
#include "timm/layers/linear.hpp"
#include "timm/layers/rms_norm.hpp"

namespace timm::layers {
namespace {

constexpr std::array<std::string_view, 10> kPoolTypes = {"",     "avg",     "max",     "avgmax",     "catavgmax",
                                                         "fast", "fastavg", "fastmax", "fastavgmax", "fastcatavgmax"};

void check_pool_type(const std::string& pool_type) {
  for (auto known : kPoolTypes) {
    if (pool_type == known) return;
  }
  throw UsageError("global_pool " + in_quotes(pool_type) + ": unknown pool type (expected one of " +
                   joined_names(kPoolTypes, /*quoted=*/true) + ")");
}

// Pooled to (N, C, 1, 1), or (N, 1, 1, C) channels last. The 'fast' variants
// reduce with mean/amax, the others call the adaptive pooling ops, exactly as
// timm does; timm pools channels-last input with the fast ones only.
at::Tensor pool_keepdim(const at::Tensor& x, std::string_view pool_type, bool channels_last) {
  const bool fast = channels_last || pool_type.starts_with("fast");
  static constexpr std::array<int64_t, 2> kNchw = {2, 3}, kNhwc = {1, 2};
  const at::IntArrayRef spatial = channels_last ? at::IntArrayRef(kNhwc) : at::IntArrayRef(kNchw);
  auto avg = [&] { return fast ? x.mean(spatial, true) : at::adaptive_avg_pool2d(x, {1, 1}); };
  auto max = [&] { return fast ? x.amax(spatial, true) : std::get<0>(at::adaptive_max_pool2d(x, {1, 1})); };
  if (pool_type.ends_with("catavgmax")) return at::cat({avg(), max()}, channels_last ? 3 : 1);
  if (pool_type.ends_with("avgmax")) return fast ? 0.5 * avg() + 0.5 * max() : 0.5 * (avg() + max());
  if (pool_type.ends_with("max")) return max();
  return avg();  // "avg", "fast", "fastavg"
}

}  // namespace

int64_t adaptive_pool_feat_mult(std::string_view pool_type) { return pool_type.ends_with("catavgmax") ? 2 : 1; }

SelectAdaptivePool2dImpl::SelectAdaptivePool2dImpl(const SelectAdaptivePool2dOptions& options_) : options(options_) {
  reset();
}

void SelectAdaptivePool2dImpl::reset() {
  check_pool_type(options.pool_type());
  if (options.input_fmt() != "NCHW" && options.input_fmt() != "NHWC") {
    throw UsageError("global pool: input_fmt " + in_quotes(options.input_fmt()) + ": expected 'NCHW' or 'NHWC'");
  }
}

void SelectAdaptivePool2dImpl::pretty_print(std::ostream& stream) const {
  stream << "timm::layers::SelectAdaptivePool2d(pool_type=" << options.pool_type()
         << ", flatten=" << (options.flatten() ? "true" : "false") << ")";
}

at::Tensor SelectAdaptivePool2dImpl::forward(const at::Tensor& x) {
  at::Tensor y = is_identity() ? x : pool_keepdim(x, options.pool_type(), options.input_fmt() == "NHWC");
  return options.flatten() ? y.flatten(1) : y;
}

ClassifierHead create_classifier(int64_t num_features, int64_t num_classes, const std::string& pool_type,
                                 const std::string& input_fmt) {
  ClassifierHead head;
  // No pooling means no flattening either: the features pass through unpooled.
  const bool flatten = !pool_type.empty();
  head.global_pool = SelectAdaptivePool2d(SelectAdaptivePool2dOptions(pool_type).flatten(flatten).input_fmt(input_fmt));
  head.num_pooled_features = num_features * head.global_pool->feat_mult();
  if (num_classes > 0) {
    head.fc = torch::nn::AnyModule(layers::Linear(head.num_pooled_features, num_classes));
  } else {
    head.fc = torch::nn::AnyModule(torch::nn::Identity());
  }
  return head;
}

ClassifierHeadModuleImpl::ClassifierHeadModuleImpl(const ClassifierHeadModuleOptions& options_) : options(options_) {
  if (options.drop_rate() < 0.0 || options.drop_rate() > 1.0) {
    throw UsageError("ClassifierHead: drop_rate must be in [0, 1], got " + std::to_string(options.drop_rate()));
  }
  reset();
}

void ClassifierHeadModuleImpl::reset() {
  auto head = create_classifier(options.in_features(), options.num_classes(), options.pool_type(), options.input_fmt());
  global_pool = register_module("global_pool", head.global_pool);
  fc = head.fc;
  register_module("fc", fc.ptr());
}

void ClassifierHeadModuleImpl::pretty_print(std::ostream& stream) const {
  stream << "timm::layers::ClassifierHead(in_features=" << options.in_features()
         << ", num_classes=" << options.num_classes() << ", pool_type=" << options.pool_type() << ")";
}

// No flatten step: the pool flattens, or there is no pool.
at::Tensor ClassifierHeadModuleImpl::forward_pre_logits(const at::Tensor& x) {
  at::Tensor y = global_pool(x);
  // timm's nn.Dropout(0) draws nothing; neither does skipping it.
  if (options.drop_rate() > 0.0) y = at::dropout(y, options.drop_rate(), is_training());
  return y;
}

at::Tensor ClassifierHeadModuleImpl::forward(const at::Tensor& x) { return fc.forward(forward_pre_logits(x)); }

NormMlpClassifierHeadImpl::NormMlpClassifierHeadImpl(const NormMlpClassifierHeadOptions& options_) : options(options_) {
  if (options.in_features() < 1) {
    throw UsageError("NormMlpClassifierHead: in_features must be >= 1, got " + std::to_string(options.in_features()));
  }
  if (options.drop_rate() < 0.0 || options.drop_rate() > 1.0) {
    throw UsageError("NormMlpClassifierHead: drop_rate must be in [0, 1], got " + std::to_string(options.drop_rate()));
  }
  reset();
}

void NormMlpClassifierHeadImpl::reset() {
  namespace nn = torch::nn;
  const bool use_conv = options.pool_type().empty();
  auto linear = [use_conv](int64_t in, int64_t out) {
    return use_conv ? nn::AnyModule(nn::Conv2d(nn::Conv2dOptions(in, out, 1))) : nn::AnyModule(layers::Linear(in, out));
  };
  global_pool = register_module("global_pool", SelectAdaptivePool2d(options.pool_type()));
  if (global_pool->feat_mult() != 1) {
    throw UsageError("global_pool " + in_quotes(options.pool_type()) +
                     ": a pool type that changes the pooled width is not supported by this model's head");
  }
  norm = create_norm2d(options.norm_layer(), options.in_features(), options.norm_eps());
  register_module("norm", norm.ptr());
  int64_t num_features = options.in_features();
  if (options.hidden_size() > 0) {
    nn::Sequential seq;
    auto fc = linear(num_features, options.hidden_size());
    seq->push_back("fc", fc);
    seq->push_back("act", create_act(options.act_layer()));
    pre_logits = register_module("pre_logits", seq);
    num_features = options.hidden_size();
  }
  drop = register_module("drop", nn::Dropout(options.drop_rate()));
  fc = options.num_classes() > 0 ? linear(num_features, options.num_classes()) : nn::AnyModule(nn::Identity());
  register_module("fc", fc.ptr());
}

void NormMlpClassifierHeadImpl::pretty_print(std::ostream& stream) const {
  stream << "timm::layers::NormMlpClassifierHead(in_features=" << options.in_features()
         << ", num_classes=" << options.num_classes() << ", pool_type=" << options.pool_type() << ")";
}

at::Tensor NormMlpClassifierHeadImpl::forward_pre_logits(const at::Tensor& x) {
  at::Tensor y = norm.forward(global_pool(x));
  if (!global_pool->is_identity()) y = y.flatten(1);
  if (pre_logits) y = pre_logits->forward(y);
  return drop(y);
}

at::Tensor NormMlpClassifierHeadImpl::forward(const at::Tensor& x) { return fc.forward(forward_pre_logits(x)); }

}  // namespace timm::layers
