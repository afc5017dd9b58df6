#include "timm/models/grad_checkpoint.hpp"

#include <algorithm>
#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include <ATen/Context.h>
#include <ATen/autocast_mode.h>
#include <ATen/core/Generator.h>
#include <ATen/core/grad_mode.h>
#include <ATen/core/ivalue.h>
#include <c10/core/GradMode.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/custom_function.h>

#include "timm/base/error.hpp"
#include "timm/train/amp.hpp"

namespace timm {

namespace {

// torch.autocast's state for one device type, as torch's checkpoint records
// it in the forward pass for the rerun.
struct AutocastState {
  c10::DeviceType device_type;
  bool enabled;
  c10::ScalarType dtype;
};

AutocastState autocast_state(c10::DeviceType device_type) {
  return {device_type, at::autocast::is_autocast_enabled(device_type), at::autocast::get_autocast_dtype(device_type)};
}

// What the backward pass needs besides the saved tensors. A capsule is the
// one way an AutogradContext keeps a C++ object that is not an IValue.
struct CheckpointState : torch::CustomClassHolder {
  TensorFn fn;
  // The default generators the function may draw from (the CPU's, and the
  // input's device's) and their states before the forward pass.
  std::vector<at::Generator> generators;
  std::vector<at::Tensor> rng_states;
  std::vector<AutocastState> autocast;  // the input's device type and the CPU, where autocast exists
};

std::vector<at::Generator> default_generators(const at::Device& device) {
  std::vector<at::Generator> generators{at::globalContext().defaultGenerator(at::Device(at::kCPU))};
  if (!device.is_cpu()) generators.push_back(at::globalContext().defaultGenerator(device));
  return generators;
}

// Generator states are read and written under the generator's lock, as
// torch.get_rng_state / set_rng_state do.
std::vector<at::Tensor> get_rng_states(std::vector<at::Generator>& generators) {
  std::vector<at::Tensor> states;
  for (at::Generator& generator : generators) {
    std::lock_guard<std::mutex> lock(generator.mutex());
    states.push_back(generator.get_state());
  }
  return states;
}

void set_rng_states(std::vector<at::Generator>& generators, const std::vector<at::Tensor>& states) {
  for (size_t i = 0; i < generators.size(); ++i) {
    std::lock_guard<std::mutex> lock(generators[i].mutex());
    generators[i].set_state(states[i]);
  }
}

// The rerun: fn on `input` with the forward pass's generator and autocast
// states; the generators come back to their states before it, as under
// torch.random.fork_rng, so the rest of the run draws what it would have.
at::Tensor rerun(CheckpointState& state, const at::Tensor& input) {
  const std::vector<at::Tensor> current = get_rng_states(state.generators);
  set_rng_states(state.generators, state.rng_states);
  at::Tensor output;
  {
    const at::AutoGradMode grad_mode(true);
    std::vector<std::unique_ptr<AutocastGuard>> autocast;
    for (const AutocastState& a : state.autocast) {
      autocast.push_back(std::make_unique<AutocastGuard>(a.device_type, a.dtype, a.enabled));
    }
    output = state.fn(input);
  }
  set_rng_states(state.generators, current);
  return output;
}

// Autocast caches its casts of float32 leaves (weights) until the outermost
// autocast region ends. A cast made here without grad mode has no graph: a
// later use of the weight in the same region (a rerun inside it, or the
// weight used again outside the block) would take it and lose the weight's
// gradient. So the forward pass caches none.
class NoAutocastCache {
 public:
  NoAutocastCache() : previous_(at::autocast::is_autocast_cache_enabled()) {
    at::autocast::set_autocast_cache_enabled(false);
  }
  ~NoAutocastCache() { at::autocast::set_autocast_cache_enabled(previous_); }
  NoAutocastCache(const NoAutocastCache&) = delete;
  NoAutocastCache& operator=(const NoAutocastCache&) = delete;

 private:
  bool previous_;
};

// The autograd node: inputs x, then the parameters (each a graph input, so
// their gradients reach AccumulateGrad and the DDP hooks there, and x need
// not require grad), then the state (no gradient).
struct CheckpointFunction : torch::autograd::Function<CheckpointFunction> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x, at::TensorList parameters,
                            const c10::intrusive_ptr<CheckpointState>& state) {
    torch::autograd::variable_list saved{x};
    saved.insert(saved.end(), parameters.begin(), parameters.end());
    ctx->save_for_backward(std::move(saved));
    ctx->saved_data["state"] = c10::IValue::make_capsule(state);
    const NoAutocastCache no_cache;
    return state->fn(x);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs) {
    // A double backward (create_graph) runs this with grad mode on.
    const bool create_graph = c10::GradMode::is_enabled();
    const c10::intrusive_ptr<torch::CustomClassHolder> holder = ctx->saved_data.at("state").toCapsule();
    auto& state = static_cast<CheckpointState&>(*holder);
    const torch::autograd::variable_list saved = ctx->get_saved_variables();
    // x, the parameters, and the state's slot: undefined where no gradient.
    torch::autograd::variable_list grads(saved.size() + 1);

    const at::Tensor input = saved[0].detach().requires_grad_(ctx->needs_input_grad(0));
    const at::Tensor output = rerun(state, input);
    torch::autograd::variable_list wrt;
    std::vector<size_t> slots;
    for (size_t i = 0; i < saved.size(); ++i) {
      if (!ctx->needs_input_grad(i)) continue;
      wrt.push_back(i == 0 ? input : saved[i]);
      slots.push_back(i);
    }
    if (wrt.empty() || !output.requires_grad()) return grads;
    const torch::autograd::variable_list found =
        torch::autograd::grad({output}, wrt, {grad_outputs[0]}, create_graph, create_graph, /*allow_unused=*/true);
    for (size_t k = 0; k < slots.size(); ++k) grads[slots[k]] = found[k];
    return grads;
  }
};

}  // namespace

at::Tensor checkpoint(const TensorFn& fn, const at::Tensor& x, const std::vector<at::Tensor>& parameters) {
  // Without grad mode nothing would be kept for a backward pass anyway.
  if (!c10::GradMode::is_enabled()) return fn(x);
  auto state = c10::make_intrusive<CheckpointState>();
  state->fn = fn;
  state->generators = default_generators(x.device());
  state->rng_states = get_rng_states(state->generators);
  std::vector<c10::DeviceType> device_types{x.device().type()};
  if (!x.device().is_cpu()) device_types.push_back(c10::DeviceType::CPU);
  for (const c10::DeviceType type : device_types) {
    if (at::autocast::is_autocast_available(type)) state->autocast.push_back(autocast_state(type));
  }
  return CheckpointFunction::apply(x, at::TensorList(parameters), state);
}

at::Tensor checkpoint(const torch::nn::AnyModule& module, const at::Tensor& x) {
  torch::nn::AnyModule run = module;  // shares the module; forward() is not const
  return checkpoint([run](const at::Tensor& input) mutable { return run.forward(input); }, x,
                    module.ptr()->parameters());
}

at::Tensor checkpoint_seq(const std::vector<torch::nn::AnyModule>& functions, const at::Tensor& x, int64_t every,
                          bool skip_last) {
  if (every < 1) throw Error("checkpoint_seq: every must be >= 1, got " + std::to_string(every));
  const size_t count = functions.size();
  const size_t checkpointed = skip_last && count > 0 ? count - 1 : count;
  const auto step = static_cast<size_t>(every);
  at::Tensor y = x;
  for (size_t start = 0; start < checkpointed; start += step) {
    const size_t end = std::min(start + step, checkpointed);
    std::vector<torch::nn::AnyModule> chunk(functions.begin() + static_cast<std::ptrdiff_t>(start),
                                            functions.begin() + static_cast<std::ptrdiff_t>(end));
    std::vector<at::Tensor> parameters;
    for (const auto& module : chunk) {
      for (const auto& p : module.ptr()->parameters()) parameters.push_back(p);
    }
    y = checkpoint(
        [chunk](const at::Tensor& input) mutable {
          at::Tensor out = input;
          for (auto& module : chunk) out = module.forward(out);
          return out;
        },
        y, parameters);
  }
  // timm runs what skip_last left out plainly.
  for (size_t i = checkpointed; i < count; ++i) y = torch::nn::AnyModule(functions[i]).forward(y);
  return y;
}

std::vector<torch::nn::AnyModule> sequence_modules(const torch::nn::Sequential& sequential) {
  return std::vector<torch::nn::AnyModule>(sequential->begin(), sequential->end());
}

std::vector<torch::nn::AnyModule> sequence_modules(const std::vector<torch::nn::Sequential>& sequentials) {
  std::vector<torch::nn::AnyModule> modules;
  for (const auto& sequential : sequentials) modules.insert(modules.end(), sequential->begin(), sequential->end());
  return modules;
}

}  // namespace timm
