// Activations by timm's names (layers/create_act.py): "relu", "relu6",
// "silu" / "swish", "mish", "sigmoid", "tanh", "hard_sigmoid", "hard_swish",
// "gelu" (erf), "gelu_tanh", "quick_gelu", "elu", "celu", "selu",
// "leaky_relu" (slope 0.01), "identity".
//
// Activation is one module for all of them (none has parameters, so none
// adds state_dict keys), which lets a block hold "the act layer" as a plain
// member the way timm's blocks hold act_layer(inplace=True).
//
// inplace: timm's act_layer(inplace=True), which writes the result into its
// input (relu_ and the like) instead of allocating one; the values and
// gradients are the same. Only for an input nothing else reads afterwards and
// whose producer's backward does not need it (a batch norm's output is one).
// The GELUs and identity have no in-place form, as timm's, and ignore it.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <torch/arg.h>
#include <torch/nn/cloneable.h>
#include <torch/nn/pimpl.h>

namespace timm::layers {

// The names create_act accepts, in the order above.
const std::vector<std::string>& activation_names();

// Applies the named activation; throws UsageError for an unknown name.
at::Tensor apply_act(const std::string& name, const at::Tensor& x);

struct ActivationOptions {
  /* implicit */ ActivationOptions(std::string name = "relu") : name_(std::move(name)) {}
  TORCH_ARG(std::string, name);
  TORCH_ARG(bool, inplace) = false;
};

class ActivationImpl : public torch::nn::Cloneable<ActivationImpl> {
 public:
  // Throws UsageError for an unknown name.
  explicit ActivationImpl(const ActivationOptions& options = {});
  void reset() override;
  void pretty_print(std::ostream& stream) const override;
  at::Tensor forward(const at::Tensor& x);

  ActivationOptions options;

 private:
  std::function<at::Tensor(const at::Tensor&)> fn_;  // looked up once, in reset()
};
TORCH_MODULE(Activation);

// timm's create_act_layer(name, inplace): the Activation module for `name`.
Activation create_act(const std::string& name, bool inplace = false);

}  // namespace timm::layers
