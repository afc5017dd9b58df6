#include "timm/layers/activations.hpp"

#include <ostream>

#include "timm/base/error.hpp"
#include "timm/base/names.hpp"

namespace timm::layers {
namespace {

using ActFn = std::function<at::Tensor(const at::Tensor&)>;

struct ActEntry {
  std::string name;
  ActFn out_of_place;
  // timm's act_layer(inplace=True): writes into its input; empty where timm's
  // layer ignores inplace (the GELUs, identity), which then run out_of_place.
  // Its lambdas take the tensor by value because at::relu_ and the like want
  // a Tensor&: the copy shares the TensorImpl, so the write lands in x.
  ActFn in_place;
};

const std::vector<ActEntry>& activation_table() {
  static const std::vector<ActEntry> table = {
      {"relu", [](const at::Tensor& x) { return at::relu(x); }, [](at::Tensor x) { return at::relu_(x); }},
      {"relu6", [](const at::Tensor& x) { return at::hardtanh(x, 0.0, 6.0); },
       [](at::Tensor x) { return at::hardtanh_(x, 0.0, 6.0); }},
      {"silu", [](const at::Tensor& x) { return at::silu(x); }, [](at::Tensor x) { return at::silu_(x); }},
      {"swish", [](const at::Tensor& x) { return at::silu(x); }, [](at::Tensor x) { return at::silu_(x); }},
      {"mish", [](const at::Tensor& x) { return at::mish(x); }, [](at::Tensor x) { return at::mish_(x); }},
      {"sigmoid", [](const at::Tensor& x) { return at::sigmoid(x); }, [](at::Tensor x) { return at::sigmoid_(x); }},
      {"tanh", [](const at::Tensor& x) { return at::tanh(x); }, [](at::Tensor x) { return at::tanh_(x); }},
      {"hard_sigmoid", [](const at::Tensor& x) { return at::hardsigmoid(x); },
       [](at::Tensor x) { return at::hardsigmoid_(x); }},
      {"hard_swish", [](const at::Tensor& x) { return at::hardswish(x); },
       [](at::Tensor x) { return at::hardswish_(x); }},
      {"gelu", [](const at::Tensor& x) { return at::gelu(x); }, nullptr},
      {"gelu_tanh", [](const at::Tensor& x) { return at::gelu(x, "tanh"); }, nullptr},
      {"quick_gelu", [](const at::Tensor& x) { return x * at::sigmoid(1.702 * x); }, nullptr},
      {"elu", [](const at::Tensor& x) { return at::elu(x); }, [](at::Tensor x) { return at::elu_(x); }},
      {"celu", [](const at::Tensor& x) { return at::celu(x); }, [](at::Tensor x) { return at::celu_(x); }},
      {"selu", [](const at::Tensor& x) { return at::selu(x); }, [](at::Tensor x) { return at::selu_(x); }},
      {"leaky_relu", [](const at::Tensor& x) { return at::leaky_relu(x, 0.01); },
       [](at::Tensor x) { return at::leaky_relu_(x, 0.01); }},
      {"identity", [](const at::Tensor& x) { return x; }, nullptr},
  };
  return table;
}

const ActEntry& find_act(const std::string& name) {
  for (const auto& entry : activation_table()) {
    if (entry.name == name) return entry;
  }
  throw UsageError("activation " + in_quotes(name) + ": unknown (expected one of " + joined_names(activation_names()) +
                   ")");
}

}  // namespace

const std::vector<std::string>& activation_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const auto& entry : activation_table()) out.push_back(entry.name);
    return out;
  }();
  return names;
}

at::Tensor apply_act(const std::string& name, const at::Tensor& x) { return find_act(name).out_of_place(x); }

ActivationImpl::ActivationImpl(const ActivationOptions& options_) : options(options_) { reset(); }

void ActivationImpl::reset() {
  const ActEntry& entry = find_act(options.name());
  fn_ = options.inplace() && entry.in_place ? entry.in_place : entry.out_of_place;
}

void ActivationImpl::pretty_print(std::ostream& stream) const {
  stream << "timm::layers::Activation(" << options.name() << (options.inplace() ? ", inplace" : "") << ")";
}

at::Tensor ActivationImpl::forward(const at::Tensor& x) { return fn_(x); }

Activation create_act(const std::string& name, bool inplace) {
  return Activation(ActivationOptions(name).inplace(inplace));
}

}  // namespace timm::layers
