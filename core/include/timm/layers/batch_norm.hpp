// A BatchNorm2d whose normalisation step can be swapped in place, and the
// interface that conversions (SyncBatchNorm, SplitBatchNorm) work through.
//
// Why in place: replacing a child of a C++ parent (Module::replace_module)
// changes its registry entry but not the parent's typed member (`bn1`) nor a
// Sequential's list, so the parent's forward would keep calling the old
// module. A conversion therefore keeps every module and its registered
// tensors (so state_dict keys and values are unchanged) and swaps only the
// function that normalises. Model plugins build their BatchNorms as
// timm::layers::BatchNorm2d (or another SwappableBatchNorm, such as
// BatchNormAct2d, whose activation then survives any conversion); a plain
// torch::nn::BatchNorm2d cannot be converted, and the conversions name it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/pimpl.h>

namespace timm::layers {

// Handles to one BatchNorm layer's state. The tensors are the module's
// registered ones: in-place updates (running stats, num_batches_tracked)
// change the module.
struct BatchNormState {
  at::Tensor weight, bias;                                    // undefined unless affine
  at::Tensor running_mean, running_var, num_batches_tracked;  // undefined unless track_running_stats
  double eps = 1e-5;
  std::optional<double> momentum = 0.1;  // nullopt: cumulative average, as torch's momentum=None
  bool training = true;

  bool tracks_running_stats() const { return running_mean.defined(); }
  // torch's `training or not track_running_stats`: normalise with batch statistics.
  bool uses_batch_stats() const { return training || !tracks_running_stats(); }
};

// torch's exponential_average_factor for one forward: in training with
// running stats it first adds 1 to num_batches_tracked (as torch does), and
// with momentum nullopt returns 1 / num_batches_tracked.
double next_average_factor(const BatchNormState& bn);

// torch::nn::BatchNorm2d's forward on `bn`: batch statistics and a running
// stat update (unbiased variance) in training, running stats in eval.
at::Tensor batch_norm(const BatchNormState& bn, const at::Tensor& x);

// (state, x) -> normalised x. In training it owns the whole BatchNorm step,
// running stat and num_batches_tracked updates included.
using NormalizeFn = std::function<at::Tensor(const BatchNormState&, const at::Tensor&)>;

// A module whose BatchNorm step can be replaced.
class SwappableBatchNorm {
 public:
  virtual ~SwappableBatchNorm() = default;
  virtual BatchNormState batch_norm_state() = 0;
  virtual int64_t num_features() const = 0;
  // Replaces the normalisation; nullptr restores the default (batch_norm()).
  virtual void swap_normalization(NormalizeFn fn) = 0;
  virtual bool has_swapped_normalization() const = 0;
};

// torch::nn::BatchNorm2d (same options, parameters, buffers and state_dict
// keys) that is a SwappableBatchNorm. clone() gives a plain
// torch::nn::BatchNorm2dImpl without the swapped function.
class BatchNorm2dImpl : public torch::nn::BatchNorm2dImpl, public SwappableBatchNorm {
 public:
  using torch::nn::BatchNorm2dImpl::BatchNorm2dImpl;

  at::Tensor forward(const at::Tensor& x);

  BatchNormState batch_norm_state() override;
  int64_t num_features() const override { return options.num_features(); }
  void swap_normalization(NormalizeFn fn) override { normalize_ = std::move(fn); }
  bool has_swapped_normalization() const override { return static_cast<bool>(normalize_); }

 private:
  NormalizeFn normalize_;
};
TORCH_MODULE(BatchNorm2d);

// Every SwappableBatchNorm in `module`'s tree (itself included), pre-order,
// with its qualified name ("" for `module` itself) and the module.
// timm::layers::BatchNormAct2d (norm_act.hpp), when the SDK has it, is found
// too, through an adapter (`owner` keeps it alive): its own set_normalization
// swaps only the normalisation, so drop and act survive a conversion.
struct SwappableEntry {
  std::string name;
  torch::nn::Module* module;
  SwappableBatchNorm* norm;
  std::shared_ptr<SwappableBatchNorm> owner;  // set for adapters
};
std::vector<SwappableEntry> swappable_batch_norms(torch::nn::Module& module);

// The qualified names of the BatchNorm-like modules in `module`'s tree that
// are not swappable: torch BatchNorm1d/2d/3d, and any other module with its
// own running_mean buffer (a third-party BatchNorm; torch's InstanceNorms
// excepted). A conversion must refuse them rather than leave them silently
// unconverted.
std::vector<std::string> unswappable_batch_norms(torch::nn::Module& module);

// The SwappableBatchNorms a conversion (named by `what`, e.g. "--sync-bn")
// may swap: throws timm::Error naming every one already swapped (conversions
// do not combine) and every unswappable BatchNorm, before anything changes.
std::vector<SwappableEntry> convertible_batch_norms(torch::nn::Module& module, const std::string& what);

// train.py's --bn-momentum and --bn-eps: the momentum and the eps of every
// BatchNorm in `module`'s tree (timm::layers::BatchNorm2d and
// BatchNormAct2d, torch's BatchNorm1d/2d/3d), each where set. Returns the
// number of layers. timm passes both to the model's constructor, which only
// its EfficientNet family accepts (others raise a TypeError); here every
// model with BatchNorm layers takes them, with the same result.
std::size_t set_batch_norm_args(torch::nn::Module& module, std::optional<double> momentum, std::optional<double> eps);

}  // namespace timm::layers
