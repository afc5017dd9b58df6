#include "timm/layers/batch_norm.hpp"

#include <ATen/ATen.h>
#include <torch/nn/functional/batchnorm.h>
#include <torch/nn/modules/instancenorm.h>

#include "timm/base/error.hpp"
#include "timm/layers/norm_act.hpp"

namespace timm::layers {
namespace {

// Visits `module` and its descendants, pre-order, with qualified names.
void visit(torch::nn::Module& module, const std::string& name,
           const std::function<void(const std::string&, torch::nn::Module&)>& fn) {
  fn(name, module);
  for (const auto& child : module.named_children()) {
    visit(*child.value(), name.empty() ? child.key() : name + "." + child.key(), fn);
  }
}

bool is_batch_norm_like(torch::nn::Module& module) {
  if (dynamic_cast<torch::nn::BatchNorm1dImpl*>(&module) || dynamic_cast<torch::nn::BatchNorm2dImpl*>(&module) ||
      dynamic_cast<torch::nn::BatchNorm3dImpl*>(&module)) {
    return true;
  }
  if (dynamic_cast<torch::nn::InstanceNorm1dImpl*>(&module) || dynamic_cast<torch::nn::InstanceNorm2dImpl*>(&module) ||
      dynamic_cast<torch::nn::InstanceNorm3dImpl*>(&module)) {
    return false;
  }
  return module.named_buffers(/*recurse=*/false).contains("running_mean");
}

// BatchNormAct2d through its own swap hook (it keeps drop and act after it).
class BatchNormActAdapter : public SwappableBatchNorm {
 public:
  explicit BatchNormActAdapter(BatchNormAct2dImpl& module) : module_(module) {}
  BatchNormState batch_norm_state() override { return state_of(module_); }
  int64_t num_features() const override { return module_.options.num_features(); }
  void swap_normalization(NormalizeFn fn) override {
    if (!fn) return module_.clear_normalization();
    module_.set_normalization(
        [fn = std::move(fn)](BatchNormAct2dImpl& self, const at::Tensor& x) { return fn(state_of(self), x); });
  }
  bool has_swapped_normalization() const override { return module_.has_custom_normalization(); }

 private:
  static BatchNormState state_of(BatchNormAct2dImpl& m) {
    return {.weight = m.weight,
            .bias = m.bias,
            .running_mean = m.running_mean,
            .running_var = m.running_var,
            .num_batches_tracked = m.num_batches_tracked,
            .eps = m.options.eps(),
            .momentum = m.options.momentum(),
            .training = m.is_training()};
  }
  BatchNormAct2dImpl& module_;
};

std::string quoted_list(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& name : names) out += (out.empty() ? "" : ", ") + in_quotes(name);
  return out;
}

}  // namespace

double next_average_factor(const BatchNormState& bn) {
  double factor = bn.momentum.value_or(0.0);
  if (bn.training && bn.tracks_running_stats() && bn.num_batches_tracked.defined()) {
    auto count = bn.num_batches_tracked;  // a handle: += updates the module's buffer
    count += 1;
    if (!bn.momentum) factor = 1.0 / count.item<double>();
  }
  return factor;
}

at::Tensor batch_norm(const BatchNormState& bn, const at::Tensor& x) {
  const double factor = next_average_factor(bn);
  return torch::nn::functional::detail::batch_norm(x, bn.running_mean, bn.running_var, bn.weight, bn.bias,
                                                   bn.uses_batch_stats(), factor, bn.eps);
}

at::Tensor BatchNorm2dImpl::forward(const at::Tensor& x) {
  if (!normalize_) return torch::nn::BatchNorm2dImpl::forward(x);
  _check_input_dim(x);
  return normalize_(batch_norm_state(), x);
}

BatchNormState BatchNorm2dImpl::batch_norm_state() {
  return {.weight = weight,
          .bias = bias,
          .running_mean = running_mean,
          .running_var = running_var,
          .num_batches_tracked = num_batches_tracked,
          .eps = options.eps(),
          .momentum = options.momentum(),
          .training = is_training()};
}

std::vector<SwappableEntry> swappable_batch_norms(torch::nn::Module& module) {
  std::vector<SwappableEntry> found;
  visit(module, "", [&](const std::string& name, torch::nn::Module& m) {
    if (auto* norm = dynamic_cast<SwappableBatchNorm*>(&m)) {
      found.push_back({name, &m, norm, nullptr});
      return;
    }
    if (auto* bn_act = dynamic_cast<BatchNormAct2dImpl*>(&m)) {
      auto adapter = std::make_shared<BatchNormActAdapter>(*bn_act);
      found.push_back({name, &m, adapter.get(), adapter});
    }
  });
  return found;
}

std::vector<std::string> unswappable_batch_norms(torch::nn::Module& module) {
  std::vector<std::string> found;
  visit(module, "", [&](const std::string& name, torch::nn::Module& m) {
    bool swappable = dynamic_cast<SwappableBatchNorm*>(&m) != nullptr;
    swappable = swappable || dynamic_cast<BatchNormAct2dImpl*>(&m) != nullptr;
    if (is_batch_norm_like(m) && !swappable) found.push_back(name.empty() ? "(root)" : name);
  });
  return found;
}

std::vector<SwappableEntry> convertible_batch_norms(torch::nn::Module& module, const std::string& what) {
  auto norms = swappable_batch_norms(module);
  std::vector<std::string> swapped;
  for (const auto& entry : norms) {
    if (entry.norm->has_swapped_normalization()) swapped.push_back(entry.name.empty() ? "(root)" : entry.name);
  }
  if (!swapped.empty()) {
    throw Error(what + ": the BatchNorm " + quoted_list(swapped) +
                " already normalise another way (--sync-bn and --split-bn do not combine)");
  }
  const auto fixed = unswappable_batch_norms(module);
  if (!fixed.empty()) {
    throw Error(what + ": cannot convert " + quoted_list(fixed) +
                ": a plain torch::nn::BatchNorm (or another BatchNorm that is not a "
                "timm::layers::SwappableBatchNorm) cannot be replaced inside its parent; the model plugin should "
                "build timm::layers::BatchNorm2d");
  }
  return norms;
}

namespace {

// Sets `options`' momentum and eps where given; true when `options` was set.
template <typename Options>
bool set_args(Options& options, std::optional<double> momentum, std::optional<double> eps) {
  if (momentum) options.momentum(*momentum);
  if (eps) options.eps(*eps);
  return true;
}

}  // namespace

std::size_t set_batch_norm_args(torch::nn::Module& module, std::optional<double> momentum, std::optional<double> eps) {
  std::size_t count = 0;
  visit(module, "", [&](const std::string& /*name*/, torch::nn::Module& m) {
    bool set = false;
    if (auto* bn = dynamic_cast<BatchNormAct2dImpl*>(&m)) set = set_args(bn->options, momentum, eps);
    if (auto* bn = dynamic_cast<torch::nn::BatchNorm1dImpl*>(&m)) set = set_args(bn->options, momentum, eps);
    if (auto* bn = dynamic_cast<torch::nn::BatchNorm2dImpl*>(&m)) set = set_args(bn->options, momentum, eps);
    if (auto* bn = dynamic_cast<torch::nn::BatchNorm3dImpl*>(&m)) set = set_args(bn->options, momentum, eps);
    count += set ? 1 : 0;
  });
  return count;
}

}  // namespace timm::layers
