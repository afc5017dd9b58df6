#include "timm/optim/foreach_optimizer.hpp"

#include <cmath>

#include <algorithm>
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include <torch/csrc/autograd/variable.h>
#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>

#include "timm/base/error.hpp"
#include "timm/base/python_repr.hpp"

namespace timm {

// ---- ForeachOptimizer -------------------------------------------------------

ForeachOptimizer::ForeachOptimizer(std::vector<ParamGroup> groups, double lr, std::string description)
    : description_(std::move(description)) {
  groups_.reserve(groups.size());
  for (ParamGroup& spec : groups) {
    Group group;
    group.lr = lr;
    group.states.resize(spec.params.size());
    group.spec = std::move(spec);
    groups_.push_back(std::move(group));
  }
}

void ForeachOptimizer::step() {
  at::NoGradGuard no_grad;
  for (std::size_t g = 0; g < groups_.size(); ++g) {
    Group& group = groups_[g];
    GroupStep step;
    step.index = g;
    step.lr = group.lr;
    step.weight_decay = group.spec.weight_decay;
    for (std::size_t j = 0; j < group.spec.params.size(); ++j) {
      const at::Tensor& param = group.spec.params[j];
      if (!param.grad().defined()) continue;
      step.params.push_back(param);
      step.grads.push_back(param.grad());
      step.states.push_back(&group.states[j]);
    }
    // torch runs the functional step with empty lists; nothing happens.
    if (step.params.empty()) continue;
    if (!updates_parameters_independently()) {
      step_group(step);
      continue;
    }
    for (GroupStep& chunk : chunks(step, chunk_numel_)) step_group(chunk);
  }
}

void ForeachOptimizer::set_chunk_numel(int64_t numel) {
  TORCH_CHECK(numel >= 1, "chunk_numel must be at least 1, got ", numel);
  chunk_numel_ = numel;
}

void ForeachOptimizer::zero_grad() {
  for (Group& group : groups_) {
    for (at::Tensor& param : group.spec.params) {
      if (param.grad().defined()) param.mutable_grad() = at::Tensor();
    }
  }
}

double ForeachOptimizer::lr(std::size_t group) const {
  TORCH_CHECK(group < groups_.size(), "param group ", group, " out of range");
  return groups_[group].lr;
}

void ForeachOptimizer::set_lr(std::size_t group, double lr) {
  TORCH_CHECK(group < groups_.size(), "param group ", group, " out of range");
  groups_[group].lr = lr;
}

double ForeachOptimizer::lr_scale(std::size_t group) const {
  TORCH_CHECK(group < groups_.size(), "param group ", group, " out of range");
  return groups_[group].spec.lr_scale;
}

double ForeachOptimizer::weight_decay(std::size_t group) const {
  TORCH_CHECK(group < groups_.size(), "param group ", group, " out of range");
  return groups_[group].spec.weight_decay;
}

const ParamGroup& ForeachOptimizer::param_group(std::size_t group) const {
  TORCH_CHECK(group < groups_.size(), "param group ", group, " out of range");
  return groups_[group].spec;
}

const ForeachOptimizer::State& ForeachOptimizer::state(std::size_t group, std::size_t j) const {
  TORCH_CHECK(group < groups_.size() && j < groups_[group].states.size(), "no parameter ", j, " in group ", group);
  return groups_[group].states[j];
}

ForeachOptimizer::State& ForeachOptimizer::mutable_state(std::size_t group, std::size_t j) {
  TORCH_CHECK(group < groups_.size() && j < groups_[group].states.size(), "no parameter ", j, " in group ", group);
  return groups_[group].states[j];
}

const ForeachOptimizer::State& ForeachOptimizer::group_state(std::size_t group) const {
  TORCH_CHECK(group < groups_.size(), "param group ", group, " out of range");
  return groups_[group].state;
}

ForeachOptimizer::State& ForeachOptimizer::mutable_group_state(std::size_t group) {
  TORCH_CHECK(group < groups_.size(), "param group ", group, " out of range");
  return groups_[group].state;
}

ForeachOptimizer::GroupStep ForeachOptimizer::GroupStep::subset(const std::vector<std::size_t>& indices) const {
  GroupStep out;
  out.index = index;
  out.lr = lr;
  out.weight_decay = weight_decay;
  for (std::size_t i : indices) {
    out.params.push_back(params.at(i));
    out.grads.push_back(grads.at(i));
    out.states.push_back(states.at(i));
  }
  return out;
}

std::vector<ForeachOptimizer::GroupStep> ForeachOptimizer::chunks(const GroupStep& group, int64_t max_numel) {
  std::vector<GroupStep> out;
  std::vector<std::size_t> run;
  int64_t total = 0;
  for (std::size_t i = 0; i < group.params.size(); ++i) {
    const int64_t numel = group.params[i].numel();
    if (!run.empty() && total + numel > max_numel) {
      out.push_back(group.subset(run));
      run.clear();
      total = 0;
    }
    run.push_back(i);
    total += numel;
  }
  if (!run.empty()) out.push_back(group.subset(run));
  return out;
}

std::vector<at::Tensor> ForeachOptimizer::state_list(const GroupStep& group, const std::string& key) {
  std::vector<at::Tensor> out;
  out.reserve(group.states.size());
  for (const State* state : group.states) out.push_back(state->at(key));
  return out;
}

void ForeachOptimizer::init_zero_states(const GroupStep& group, const std::vector<std::string>& keys) {
  for (std::size_t i = 0; i < group.params.size(); ++i) {
    State& state = *group.states[i];
    if (!state.empty()) continue;
    for (const std::string& key : keys) state[key] = at::zeros_like(group.params[i], at::MemoryFormat::Preserve);
  }
}

std::vector<double> ForeachOptimizer::increment_steps(const GroupStep& group, at::ScalarType dtype) {
  std::vector<double> steps;
  steps.reserve(group.states.size());
  for (State* state : group.states) {
    auto it = state->find("step");
    if (it == state->end()) it = state->emplace("step", at::zeros({}, at::TensorOptions().dtype(dtype))).first;
    it->second.add_(1);
    steps.push_back(it->second.item<double>());
  }
  return steps;
}

namespace {

constexpr const char* kLrKey = "lr";
constexpr const char* kLayoutKey = "group_sizes";

std::string state_key(std::size_t group, std::size_t j) {
  return "state_" + std::to_string(group) + "_" + std::to_string(j);
}

std::string group_state_key(std::size_t group) { return "group_state_" + std::to_string(group); }

void write_state(torch::serialize::OutputArchive& archive, const std::string& key,
                 const ForeachOptimizer::State& state) {
  if (state.empty()) return;
  torch::serialize::OutputArchive entry;
  for (const auto& [name, value] : state) entry.write(name, value.detach().cpu());
  archive.write(key, entry);
}

// A state tensor is shaped as its parameter, or as the parameter reduced over
// one of two or more dims, dropped (Adafactor's factored rows and columns) or
// kept as 1 (AdafactorBigVision's); not a scalar, which stays on the host.
bool fits(at::IntArrayRef value, at::IntArrayRef param) {
  if (value == param) return true;
  if (value.size() == param.size() && param.size() >= 2) {
    std::size_t kept_dims = 0;
    for (std::size_t d = 0; d < param.size(); ++d) kept_dims += value[d] == param[d] ? 1 : 0;
    const bool one_reduced = kept_dims + 1 == param.size();
    if (one_reduced) {
      for (std::size_t d = 0; d < param.size(); ++d) {
        if (value[d] != param[d]) return value[d] == 1;
      }
    }
    return false;
  }
  if (value.empty() || value.size() + 1 != param.size()) return false;
  for (std::size_t d = 0; d < param.size(); ++d) {
    std::vector<int64_t> reduced(param.begin(), param.end());
    reduced.erase(reduced.begin() + static_cast<std::ptrdiff_t>(d));
    if (value == at::IntArrayRef(reduced)) return true;
  }
  return false;
}

}  // namespace

void ForeachOptimizer::save(torch::serialize::OutputArchive& archive) const {
  std::vector<double> lrs;
  std::vector<int64_t> sizes;
  for (const Group& group : groups_) {
    lrs.push_back(group.lr);
    sizes.push_back(static_cast<int64_t>(group.spec.params.size()));
  }
  archive.write(kLrKey, at::tensor(lrs, at::kDouble));
  archive.write(kLayoutKey, at::tensor(sizes, at::kLong));
  for (std::size_t g = 0; g < groups_.size(); ++g) {
    write_state(archive, group_state_key(g), groups_[g].state);
    for (std::size_t j = 0; j < groups_[g].states.size(); ++j) {
      write_state(archive, state_key(g, j), groups_[g].states[j]);
    }
  }
  save_initial_lrs(archive);
}

namespace {

// An archive's groups, read before they replace the optimizer's.
struct SavedGroup {
  double lr = 0.0;
  ForeachOptimizer::State state;                // group_state()
  std::vector<ForeachOptimizer::State> states;  // one per parameter
};

[[noreturn]] void throw_other_layout() {
  throw Error(
      "cannot load optimizer state: its param groups have other sizes than this optimizer's (does it come "
      "from the same optimizer, model and --layer-decay?)");
}

ForeachOptimizer::State read_state_entry(torch::serialize::InputArchive& entry) {
  ForeachOptimizer::State state;
  for (const std::string& key : entry.keys()) entry.read(key, state[key]);
  return state;
}

// What save() wrote.
std::vector<SavedGroup> read_saved_groups(torch::serialize::InputArchive& archive, const std::vector<int64_t>& sizes) {
  at::Tensor lrs;
  at::Tensor layout;
  if (!archive.try_read(kLrKey, lrs) || !archive.try_read(kLayoutKey, layout)) {
    throw Error("cannot load optimizer state: it was not saved by this kind of optimizer (no '" +
                std::string(kLayoutKey) + "')");
  }
  const at::Tensor have = layout.to(at::kLong).contiguous();
  if (std::vector<int64_t>(have.data_ptr<int64_t>(), have.data_ptr<int64_t>() + have.numel()) != sizes) {
    throw_other_layout();
  }
  const at::Tensor lr_values = lrs.to(at::kDouble).contiguous();
  std::vector<SavedGroup> groups(sizes.size());
  for (std::size_t g = 0; g < groups.size(); ++g) {
    groups[g].lr = lr_values.data_ptr<double>()[g];
    torch::serialize::InputArchive group_entry;
    if (archive.try_read(group_state_key(g), group_entry)) groups[g].state = read_state_entry(group_entry);
    groups[g].states.resize(static_cast<std::size_t>(sizes[g]));
    for (std::size_t j = 0; j < groups[g].states.size(); ++j) {
      torch::serialize::InputArchive entry;
      if (archive.try_read(state_key(g, j), entry)) groups[g].states[j] = read_state_entry(entry);
    }
  }
  return groups;
}

int64_t read_count(torch::serialize::InputArchive& archive, const std::string& key) {
  at::Tensor count;
  archive.read(key, count);
  return count.item<int64_t>();
}

// What torch::optim::serialize writes (torch::optim::Adam, SGD, ... saved
// through TorchOptimizer; "adamw" and the "sgd" names wrapped torch's
// classes until 2026-12-05): "state/<TensorImpl address>" per parameter,
// "param_groups/param_groups/<i>" with the addresses ("params/<j>") and
// options ("lr", ...). Its tensors keep torch's names (exp_avg,
// momentum_buffer, ...); its int64 step counts become the float32 0-dim
// tensors torch's Python optimizers keep.
std::vector<SavedGroup> read_torch_optim_groups(torch::serialize::InputArchive& archive,
                                                const std::vector<int64_t>& sizes) {
  torch::serialize::InputArchive param_states;
  torch::serialize::InputArchive param_groups;
  archive.read("state", param_states);
  archive.read("param_groups", param_groups);
  if (read_count(param_groups, "param_groups/size") != static_cast<int64_t>(sizes.size())) throw_other_layout();
  std::vector<SavedGroup> groups(sizes.size());
  for (std::size_t g = 0; g < groups.size(); ++g) {
    torch::serialize::InputArchive group;
    param_groups.read("param_groups/" + std::to_string(g), group);
    if (read_count(group, "params/size") != sizes[g]) throw_other_layout();
    torch::serialize::InputArchive options;
    group.read("options", options);
    c10::IValue lr;
    options.read("lr", lr);
    groups[g].lr = lr.toDouble();
    groups[g].states.resize(static_cast<std::size_t>(sizes[g]));
    for (std::size_t j = 0; j < groups[g].states.size(); ++j) {
      c10::IValue address;
      group.read("params/" + std::to_string(j), address);
      torch::serialize::InputArchive entry;
      if (!param_states.try_read(address.toStringRef(), entry)) continue;
      for (const std::string& key : entry.keys()) {
        c10::IValue value;
        entry.read(key, value);
        if (value.isTensor()) {
          groups[g].states[j][key] = value.toTensor();
        } else if (value.isInt() || value.isDouble()) {
          groups[g].states[j][key] = at::scalar_tensor(value.toScalar(), at::kFloat);
        } else {
          throw Error("cannot load optimizer state: '" + key + "' of parameter " + std::to_string(j) + " of group " +
                      std::to_string(g) + " is a " + value.tagKind() + ", not a tensor or a number");
        }
      }
    }
  }
  return groups;
}

}  // namespace

void ForeachOptimizer::load(torch::serialize::InputArchive& archive) {
  std::vector<int64_t> sizes;
  for (const Group& group : groups_) sizes.push_back(static_cast<int64_t>(group.spec.params.size()));
  c10::IValue torch_version;
  std::vector<SavedGroup> saved;
  try {
    saved = archive.try_read("pytorch_version", torch_version) ? read_torch_optim_groups(archive, sizes)
                                                               : read_saved_groups(archive, sizes);
  } catch (const c10::Error& e) {
    throw Error("cannot load optimizer state: " + std::string(e.what_without_backtrace()));
  }
  std::vector<Group> loaded = groups_;
  for (std::size_t g = 0; g < loaded.size(); ++g) {
    loaded[g].lr = saved[g].lr;
    loaded[g].state = std::move(saved[g].state);
    for (std::size_t j = 0; j < loaded[g].states.size(); ++j) {
      const at::Tensor& param = loaded[g].spec.params[j];
      State& state = loaded[g].states[j];
      state = std::move(saved[g].states[j]);
      for (auto& [key, value] : state) {
        // Tensors shaped as the parameter (or factored from it) go to its
        // device; scalars (step counts) of larger parameters stay on the
        // host, as torch keeps them.
        if (fits(value.sizes(), param.sizes())) {
          value = value.to(param.device());
        } else if (value.dim() != 0) {
          throw Error("cannot load optimizer state: '" + key + "' of parameter " + std::to_string(j) + " of group " +
                      std::to_string(g) + " has another shape than the parameter");
        }
      }
    }
  }
  groups_ = std::move(loaded);
  load_initial_lrs(archive);
}

// ---- Helpers ----------------------------------------------------------------

std::vector<at::Tensor> cautioned(const std::vector<at::Tensor>& updates, const std::vector<at::Tensor>& grads) {
  std::vector<at::Tensor> masks = at::_foreach_mul(updates, grads);
  std::vector<at::Tensor> scales;
  scales.reserve(masks.size());
  for (std::size_t i = 0; i < masks.size(); ++i) {
    // In place: 1 where they agree, 0 elsewhere, without a bool tensor and
    // its conversion (timm: (update * grad > 0).to(grad.dtype)).
    masks[i].gt_(0);
    if (masks[i].scalar_type() != grads[i].scalar_type()) masks[i] = masks[i].to(grads[i].scalar_type());
    scales.push_back(masks[i].mean().clamp_min_(1e-3));
  }
  at::_foreach_div_(masks, scales);
  return at::_foreach_mul(updates, masks);
}

float caution_mask_value(int64_t agreeing, int64_t numel) {
  const float mean = static_cast<float>(static_cast<double>(agreeing) / static_cast<double>(numel));
  return 1.0f / std::max(mean, 1e-3f);
}

void bump_versions(std::initializer_list<std::reference_wrapper<const at::Tensor>> tensors) {
  for (const at::Tensor& t : tensors) torch::autograd::impl::bump_version(t);
}

void rms_clip_denominators(const std::vector<at::Tensor>& denoms, const std::vector<at::Tensor>& grads,
                           double threshold) {
  for (std::size_t i = 0; i < denoms.size(); ++i) {
    const at::Tensor rms = grads[i].div(denoms[i]).norm() / std::pow(static_cast<double>(grads[i].numel()), 0.5);
    denoms[i].mul_((rms / threshold).clamp_min_(1.0));
  }
}

std::vector<at::Tensor> select(const std::vector<at::Tensor>& list, const std::vector<std::size_t>& indices) {
  std::vector<at::Tensor> out;
  out.reserve(indices.size());
  for (std::size_t i : indices) out.push_back(list.at(i));
  return out;
}

bool fused_cpu_kernels_apply(std::initializer_list<std::reference_wrapper<const std::vector<at::Tensor>>> lists) {
  for (const std::vector<at::Tensor>& list : lists) {
    for (const at::Tensor& t : list) {
      if (!t.defined() || !t.device().is_cpu() || t.scalar_type() != at::kFloat || t.is_sparse() ||
          !t.is_contiguous()) {
        return false;
      }
    }
  }
  return true;
}

bool fused_requested(const OptimizerKwargs& kwargs) { return kwargs.repr("fused", "None") != "False"; }

bool one_pass_requested(const OptimizerKwargs& kwargs) { return kwargs.repr("foreach", "None") != "False"; }

void check_lr(const OptimizerArgs& args) {
  if (args.lr < 0) {
    throw UsageError("optimizer " + in_quotes(args.opt) + ": invalid learning rate " + python_float_repr(args.lr));
  }
}

void reject_true_kwargs(const OptimizerArgs& args, const OptimizerKwargs& kwargs,
                        std::initializer_list<const char*> keys) {
  for (const char* key : keys) {
    if (kwargs.get_bool(key, false)) {
      throw UsageError("--opt-kwargs " + std::string(key) + "=True: not supported by timm-cpp's " +
                       in_quotes(args.opt));
    }
  }
}

std::vector<c10::Scalar> to_scalars(const std::vector<double>& values) { return {values.begin(), values.end()}; }

DecayLr::DecayLr(const OptimizerArgs& args, const OptimizerKwargs& kwargs) {
  if (!kwargs.get_bool("corrected_weight_decay", false)) return;
  if (args.lr <= 0) {
    throw UsageError("optimizer " + in_quotes(args.opt) + ": corrected weight decay requires a positive max lr, got " +
                     python_float_repr(args.lr));
  }
  max_lr_ = args.lr;
}

std::vector<double> resolve_betas(const OptimizerArgs& args, const OptimizerKwargs& kwargs,
                                  const std::vector<double>& fallback, std::size_t count) {
  const std::vector<double> betas = args.betas ? *args.betas : kwargs.get_doubles("betas", fallback);
  const std::string opt = in_quotes(args.opt);
  if (betas.size() != count) {
    throw UsageError("optimizer " + opt + ": betas needs " + std::to_string(count) + " values, got " +
                     std::to_string(betas.size()));
  }
  for (std::size_t i = 0; i < betas.size(); ++i) {
    if (betas[i] < 0 || betas[i] >= 1) {
      throw UsageError("optimizer " + opt + ": invalid beta parameter at index " + std::to_string(i) + ": " +
                       python_float_repr(betas[i]));
    }
  }
  return betas;
}

std::string betas_repr(const OptimizerArgs& args, const std::vector<double>& betas, bool always_tuple) {
  // argparse's nargs='+' gives a list; ast.literal_eval keeps the brackets.
  bool list = false;
  if (!always_tuple) {
    if (args.betas) {
      list = true;
    } else if (auto it = args.kwargs.find("betas"); it != args.kwargs.end()) {
      const auto first = it->second.find_first_not_of(" \t");
      list = first != std::string::npos && it->second[first] == '[';
    }
  }
  std::string out = list ? "[" : "(";
  for (std::size_t i = 0; i < betas.size(); ++i) out += (i ? ", " : "") + python_float_repr(betas[i]);
  if (!list && betas.size() == 1) out += ",";
  return out + (list ? "]" : ")");
}

EpsArg resolve_eps(const OptimizerArgs& args, const OptimizerKwargs& kwargs, double fallback) {
  EpsArg eps{fallback, python_float_repr(fallback)};
  if (args.eps) {
    eps = {*args.eps, python_float_repr(*args.eps)};
  } else if (kwargs.has("eps")) {
    eps = {kwargs.get_double("eps", fallback), kwargs.repr("eps", "")};
  }
  if (eps.value < 0) {
    throw UsageError("optimizer " + in_quotes(args.opt) + ": invalid epsilon value " + python_float_repr(eps.value));
  }
  return eps;
}

OptimizerFactory bind_defaults(OptimizerFactory factory, std::map<std::string, std::string> defaults) {
  return [factory = std::move(factory), defaults = std::move(defaults)](std::vector<ParamGroup> groups,
                                                                        const OptimizerArgs& args) {
    OptimizerArgs bound = args;
    for (const auto& [key, value] : defaults) {
      // timm's partial(opt_class, **defaults) yields to --opt-betas / --opt-eps.
      if ((key == "betas" && args.betas) || (key == "eps" && args.eps)) continue;
      bound.kwargs.emplace(key, value);
    }
    return factory(std::move(groups), bound);
  };
}

OptionalFloatArg optional_float_kwarg(const OptimizerArgs& args, const OptimizerKwargs& kwargs, const std::string& key,
                                      std::optional<double> fallback) {
  OptionalFloatArg out{fallback, fallback ? python_float_repr(*fallback) : "None"};
  if (!kwargs.has(key)) return out;
  std::string raw = args.kwargs.at(key);
  raw.erase(0, raw.find_first_not_of(" \t"));
  raw.erase(raw.find_last_not_of(" \t") + 1);
  if (raw == "None") return {std::nullopt, "None"};
  return {kwargs.get_double(key, 0.0), kwargs.repr(key, "")};
}

}  // namespace timm
