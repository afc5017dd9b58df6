#include "timm/layers/activations.hpp"

#include <ostream>

#include "timm/base/error.hpp"

namespace timm::layers {
namespace {

using ActFn = std::function<at::Tensor(const at::Tensor&)>;

// Out-of-place everywhere: timm's inplace=True is a memory optimisation with
// the same values, and out-of-place keeps autograd simple.
const std::vector<std::pair<std::string, ActFn>>& activation_table() {
  static const std::vector<std::pair<std::string, ActFn>> table = {
      {"relu", [](const at::Tensor& x) { return at::relu(x); }},
      {"relu6", [](const at::Tensor& x) { return at::hardtanh(x, 0.0, 6.0); }},
      {"silu", [](const at::Tensor& x) { return at::silu(x); }},
      {"swish", [](const at::Tensor& x) { return at::silu(x); }},
      {"mish", [](const at::Tensor& x) { return at::mish(x); }},
      {"sigmoid", [](const at::Tensor& x) { return at::sigmoid(x); }},
      {"tanh", [](const at::Tensor& x) { return at::tanh(x); }},
      {"hard_sigmoid", [](const at::Tensor& x) { return at::hardsigmoid(x); }},
      {"hard_swish", [](const at::Tensor& x) { return at::hardswish(x); }},
      {"gelu", [](const at::Tensor& x) { return at::gelu(x); }},
      {"gelu_tanh", [](const at::Tensor& x) { return at::gelu(x, "tanh"); }},
      {"quick_gelu", [](const at::Tensor& x) { return x * at::sigmoid(1.702 * x); }},
      {"elu", [](const at::Tensor& x) { return at::elu(x); }},
      {"celu", [](const at::Tensor& x) { return at::celu(x); }},
      {"selu", [](const at::Tensor& x) { return at::selu(x); }},
      {"leaky_relu", [](const at::Tensor& x) { return at::leaky_relu(x, 0.01); }},
      {"identity", [](const at::Tensor& x) { return x; }},
  };
  return table;
}

const ActFn& find_act(const std::string& name) {
  for (const auto& [known, fn] : activation_table()) {
    if (known == name) return fn;
  }
  std::string expected;
  for (const auto& known : activation_names()) expected += (expected.empty() ? "" : ", ") + known;
  throw UsageError("activation " + in_quotes(name) + ": unknown (expected one of " + expected + ")");
}

}  // namespace

const std::vector<std::string>& activation_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const auto& entry : activation_table()) out.push_back(entry.first);
    return out;
  }();
  return names;
}

at::Tensor apply_act(const std::string& name, const at::Tensor& x) { return find_act(name)(x); }

ActivationImpl::ActivationImpl(const ActivationOptions& options_) : options(options_) { reset(); }

void ActivationImpl::reset() { fn_ = find_act(options.name()); }

void ActivationImpl::pretty_print(std::ostream& stream) const {
  stream << "timm::layers::Activation(" << options.name() << ")";
}

at::Tensor ActivationImpl::forward(const at::Tensor& x) { return fn_(x); }

Activation create_act(const std::string& name) { return Activation(ActivationOptions(name)); }

}  // namespace timm::layers
