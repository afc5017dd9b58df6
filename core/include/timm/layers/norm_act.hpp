// Norm + activation layers and the conv-norm-act block, as timm's
// layers/norm_act.py (BatchNormAct2d), layers/conv_bn_act.py (ConvNormAct),
// layers/padding.py (get_padding) and layers/create_conv2d.py (symmetric
// padding only: no 'same', no mixed or conditional convs).
//
// BatchNormAct2d is a BatchNorm2d followed by drop and act in one module,
// with the BatchNorm's state at its own level, as timm's (which inherits from
// nn.BatchNorm2d): state_dict keys weight, bias, running_mean, running_var,
// num_batches_tracked. drop and act have no parameters, so they add no keys.
//
// Swapping the normalisation (SyncBatchNorm, SplitBatchNorm): replacing a
// module in a C++ parent does not update the parent's typed member pointers,
// so convert in place instead. The BN parameters and buffers are public
// tensors (weight, bias, running_mean, running_var, num_batches_tracked, the
// very tensors registered under those names) and options carries eps,
// momentum, affine and track_running_stats. set_normalization(fn) replaces
// the BatchNorm step only; forward stays act(drop(fn(*this, x))), so the
// activation and drop are kept, as timm's convert_sync_batchnorm keeps them.
// The replacement owns the whole BN step: in training it must update
// running_mean / running_var and add 1 to num_batches_tracked itself (in
// place, so the registered buffers change); batch_norm(x) is the default step
// it can fall back to (e.g. in eval mode). clear_normalization() restores it.
// for_each_batch_norm_act(module, fn) visits every BatchNormAct2d below a module.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include <ATen/ATen.h>
#include <torch/arg.h>
#include <torch/nn/cloneable.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/container/any.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/pimpl.h>

#include "timm/layers/activations.hpp"

namespace timm::layers {

// timm's get_padding(kernel_size, stride, dilation): the symmetric padding
// ((stride - 1) + dilation * (kernel_size - 1)) // 2.
int64_t get_padding(int64_t kernel_size, int64_t stride = 1, int64_t dilation = 1);

// timm's create_conv2d(in, out, k, stride, padding='', dilation, groups|depthwise, bias)
// for an int kernel: a Conv2d with get_padding's padding (or `padding` when
// given). depthwise means groups = in_channels, as timm's.
struct Conv2dArgs {
  int64_t stride = 1;
  int64_t dilation = 1;
  int64_t groups = 1;
  bool depthwise = false;
  bool bias = false;
  std::optional<int64_t> padding;  // get_padding(...) when unset (timm's padding='')
};
torch::nn::Conv2d create_conv2d(int64_t in_channels, int64_t out_channels, int64_t kernel_size,
                                const Conv2dArgs& args = {});
// create_conv2d's options, checked (UsageError for a non-positive size or
// groups that do not divide the channels), for convs built on them
// (Conv2dSame).
torch::nn::Conv2dOptions create_conv2d_options(int64_t in_channels, int64_t out_channels, int64_t kernel_size,
                                               const Conv2dArgs& args = {});

struct BatchNormAct2dOptions {
  /* implicit */ BatchNormAct2dOptions(int64_t num_features) : num_features_(num_features) {}
  TORCH_ARG(int64_t, num_features);
  TORCH_ARG(double, eps) = 1e-5;
  // nullopt: cumulative moving average (1 / num_batches_tracked), as torch's momentum=None.
  TORCH_ARG(std::optional<double>, momentum) = 0.1;
  TORCH_ARG(bool, affine) = true;
  TORCH_ARG(bool, track_running_stats) = true;
  TORCH_ARG(bool, apply_act) = true;           // false: act is identity
  TORCH_ARG(std::string, act_layer) = "relu";  // a name of activations.hpp
  // timm's inplace=True: the act writes into the normalised tensor (a fresh
  // one, which the BN backward does not need) instead of allocating another.
  TORCH_ARG(bool, inplace) = true;
  // timm's drop_layer: a factory for the module applied between norm and act
  // (e.g. DropBlock); none means identity.
  TORCH_ARG(std::function<torch::nn::AnyModule()>, drop_layer) = nullptr;
};

class BatchNormAct2dImpl : public torch::nn::Cloneable<BatchNormAct2dImpl> {
 public:
  // (self, x) -> normalised x; see the header comment for what it must do.
  using NormalizeFn = std::function<at::Tensor(BatchNormAct2dImpl&, const at::Tensor&)>;

  explicit BatchNormAct2dImpl(const BatchNormAct2dOptions& options);
  void reset() override;
  void pretty_print(std::ostream& stream) const override;

  // act(drop(normalise(x))) for NCHW x; throws UsageError for other ranks.
  at::Tensor forward(const at::Tensor& x);
  // The default normalisation: torch's BatchNorm2d forward (batch statistics
  // and a running-stat update in training, running stats in eval).
  at::Tensor batch_norm(const at::Tensor& x);
  // drop then act, what follows the normalisation.
  at::Tensor drop_act(const at::Tensor& x);

  void set_normalization(NormalizeFn fn) { normalize_ = std::move(fn); }
  void clear_normalization() { normalize_ = nullptr; }
  bool has_custom_normalization() const { return static_cast<bool>(normalize_); }

  BatchNormAct2dOptions options;
  at::Tensor weight, bias;                                    // undefined unless affine
  at::Tensor running_mean, running_var, num_batches_tracked;  // undefined unless track_running_stats
  torch::nn::AnyModule drop;                                  // "drop": Identity or drop_layer()
  Activation act{nullptr};                                    // "act": identity unless apply_act

 private:
  NormalizeFn normalize_;
};
TORCH_MODULE(BatchNormAct2d);

// Calls fn on every BatchNormAct2d in `module`'s tree (itself included), with its qualified name.
void for_each_batch_norm_act(torch::nn::Module& module,
                             const std::function<void(const std::string&, BatchNormAct2dImpl&)>& fn);

struct ConvNormActOptions {
  ConvNormActOptions(int64_t in_channels, int64_t out_channels, int64_t kernel_size = 1)
      : in_channels_(in_channels), out_channels_(out_channels), kernel_size_(kernel_size) {}
  TORCH_ARG(int64_t, in_channels);
  TORCH_ARG(int64_t, out_channels);
  TORCH_ARG(int64_t, kernel_size);
  TORCH_ARG(int64_t, stride) = 1;
  TORCH_ARG(std::optional<int64_t>, padding) = std::nullopt;  // get_padding when unset
  TORCH_ARG(int64_t, dilation) = 1;
  TORCH_ARG(int64_t, groups) = 1;
  TORCH_ARG(bool, bias) = false;
  TORCH_ARG(bool, apply_norm) = true;  // false: bn is an empty Sequential (no keys)
  TORCH_ARG(bool, apply_act) = true;
  TORCH_ARG(std::string, act_layer) = "relu";
  TORCH_ARG(double, eps) = 1e-5;
  TORCH_ARG(std::optional<double>, momentum) = 0.1;
  TORCH_ARG(std::function<torch::nn::AnyModule()>, drop_layer) = nullptr;
};

// timm's ConvNormAct (alias ConvBnAct) without anti-aliasing: "conv" then
// "bn" (a BatchNormAct2d, named bn for weight compatibility as timm's), keys
// conv.weight[, conv.bias], bn.weight, bn.bias, bn.running_mean, ...
class ConvNormActImpl : public torch::nn::Cloneable<ConvNormActImpl> {
 public:
  explicit ConvNormActImpl(const ConvNormActOptions& options);
  void reset() override;
  void pretty_print(std::ostream& stream) const override;
  at::Tensor forward(const at::Tensor& x);

  ConvNormActOptions options;
  torch::nn::Conv2d conv{nullptr};
  BatchNormAct2d bn{nullptr};              // null when !apply_norm
  torch::nn::Sequential no_norm{nullptr};  // registered as "bn" when !apply_norm (holds "drop" if any)
};
TORCH_MODULE(ConvNormAct);

}  // namespace timm::layers
