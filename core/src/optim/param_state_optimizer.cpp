#include "timm/optim/param_state_optimizer.hpp"

#include <charconv>
#include <utility>

#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>

#include "timm/core/error.hpp"
#include "timm/core/python_repr.hpp"

namespace timm {

ParamStateOptimizer::ParamStateOptimizer(std::vector<ParamGroup> groups, double lr, std::string description)
    : description_(std::move(description)) {
  groups_.reserve(groups.size());
  for (ParamGroup& group : groups) {
    Group g;
    g.names = std::move(group.names);
    g.params = std::move(group.params);
    g.states.resize(g.params.size());
    g.lr = lr;
    g.weight_decay = group.weight_decay;
    g.lr_scale = group.lr_scale;
    groups_.push_back(std::move(g));
  }
}

void ParamStateOptimizer::zero_grad() {
  for (Group& group : groups_) {
    for (at::Tensor& param : group.params) {
      if (param.mutable_grad().defined()) param.mutable_grad().reset();
    }
  }
}

double ParamStateOptimizer::lr(std::size_t group) const {
  TORCH_CHECK(group < groups_.size(), "param group ", group, " out of range");
  return groups_[group].lr;
}

void ParamStateOptimizer::set_lr(std::size_t group, double lr) {
  TORCH_CHECK(group < groups_.size(), "param group ", group, " out of range");
  groups_[group].lr = lr;
}

double ParamStateOptimizer::lr_scale(std::size_t group) const {
  TORCH_CHECK(group < groups_.size(), "param group ", group, " out of range");
  return groups_[group].lr_scale;
}

double ParamStateOptimizer::weight_decay(std::size_t group) const {
  TORCH_CHECK(group < groups_.size(), "param group ", group, " out of range");
  return groups_[group].weight_decay;
}

ParamStateOptimizer::Active ParamStateOptimizer::active(Group& group) {
  Active out;
  for (std::size_t i = 0; i < group.params.size(); ++i) {
    const at::Tensor& grad = group.params[i].grad();
    if (!grad.defined()) continue;
    out.params.push_back(group.params[i]);
    out.grads.push_back(grad);
    out.states.push_back(&group.states[i]);
  }
  return out;
}

std::vector<ParamStateOptimizer::Active> ParamStateOptimizer::chunks(const Active& a, int64_t max_numel) {
  std::vector<Active> out;
  int64_t total = 0;
  for (std::size_t i = 0; i < a.params.size(); ++i) {
    const int64_t numel = a.params[i].numel();
    if (out.empty() || (!out.back().empty() && total + numel > max_numel)) {
      out.emplace_back();
      total = 0;
    }
    out.back().params.push_back(a.params[i]);
    out.back().grads.push_back(a.grads[i]);
    out.back().states.push_back(a.states[i]);
    total += numel;
  }
  return out;
}

std::vector<at::Tensor> state_list(const std::vector<ParamStateOptimizer::State*>& states, const std::string& key) {
  std::vector<at::Tensor> out;
  out.reserve(states.size());
  for (ParamStateOptimizer::State* state : states) out.push_back(state->at(key));
  return out;
}

std::vector<at::Tensor> cautious(const std::vector<at::Tensor>& updates, const std::vector<at::Tensor>& grads) {
  std::vector<at::Tensor> masks = at::_foreach_mul(updates, grads);
  std::vector<at::Tensor> scales;
  scales.reserve(masks.size());
  for (std::size_t i = 0; i < masks.size(); ++i) {
    masks[i] = masks[i].gt(0).to(grads[i].scalar_type());
    scales.push_back(masks[i].mean().clamp_(1e-3));
  }
  at::_foreach_div_(masks, scales);
  return at::_foreach_mul(updates, masks);
}

std::string betas_repr(const OptimizerArgs& args, const OptimizerKwargs& kwargs, const std::vector<double>& fallback) {
  auto join = [](const std::vector<double>& values) {
    std::string out;
    for (std::size_t i = 0; i < values.size(); ++i) out += (i ? ", " : "") + python_float_repr(values[i]);
    return out;
  };
  if (args.betas) return "[" + join(*args.betas) + "]";
  if (kwargs.has("betas")) {
    const std::vector<double> values = kwargs.get_doubles("betas", fallback);
    const bool list = kwargs.repr("betas", "").find('[') != std::string::npos;
    if (list) return "[" + join(values) + "]";
    return "(" + join(values) + (values.size() == 1 ? ",)" : ")");
  }
  return "(" + join(fallback) + ")";
}

// ---- save / load ------------------------------------------------------------
//
// Keys: "group_<g>_size" (number of parameters, to reject another model's
// state), "group_<g>_lr", "group_<g>_state_<key>", "state_<g>_<i>_<key>".

namespace {

std::string group_key(std::size_t g, const std::string& what) { return "group_" + std::to_string(g) + "_" + what; }

std::string state_prefix(std::size_t g, std::size_t i) {
  return "state_" + std::to_string(g) + "_" + std::to_string(i) + "_";
}

// Parses "<number>_" at `pos`, advancing it.
bool parse_index(const std::string& s, std::size_t& pos, std::size_t& value) {
  const char* begin = s.data() + pos;
  const char* end = s.data() + s.size();
  const auto [ptr, ec] = std::from_chars(begin, end, value);
  if (ec != std::errc() || ptr == end || *ptr != '_') return false;
  pos = static_cast<std::size_t>(ptr - s.data()) + 1;
  return true;
}

}  // namespace

void ParamStateOptimizer::save(torch::serialize::OutputArchive& archive) const {
  for (std::size_t g = 0; g < groups_.size(); ++g) {
    const Group& group = groups_[g];
    archive.write(group_key(g, "size"), at::tensor(static_cast<int64_t>(group.params.size())), /*is_buffer=*/true);
    archive.write(group_key(g, "lr"), at::tensor(group.lr, at::kDouble), /*is_buffer=*/true);
    for (const auto& [key, value] : group.state) {
      archive.write(group_key(g, "state_" + key), value.detach(), /*is_buffer=*/true);
    }
    for (std::size_t i = 0; i < group.states.size(); ++i) {
      for (const auto& [key, value] : group.states[i]) {
        archive.write(state_prefix(g, i) + key, value.detach(), /*is_buffer=*/true);
      }
    }
  }
  save_initial_lrs(archive);
}

void ParamStateOptimizer::load(torch::serialize::InputArchive& archive) {
  const std::string hint = " (does it come from the same optimizer and model?)";
  for (std::size_t g = 0; g < groups_.size(); ++g) {
    at::Tensor size;
    if (!archive.try_read(group_key(g, "size"), size, /*is_buffer=*/true) ||
        size.item<int64_t>() != static_cast<int64_t>(groups_[g].params.size())) {
      throw Error("cannot load optimizer state: param group " + std::to_string(g) + " does not match" + hint);
    }
  }
  at::Tensor extra;
  if (archive.try_read(group_key(groups_.size(), "size"), extra, /*is_buffer=*/true)) {
    throw Error("cannot load optimizer state: it has more param groups than " + std::to_string(groups_.size()) + hint);
  }
  for (Group& group : groups_) {
    group.state.clear();
    for (State& state : group.states) state.clear();
  }
  for (const std::string& key : archive.keys()) {
    std::size_t pos = 0;
    std::size_t g = 0;
    std::size_t i = 0;
    at::Tensor value;
    if (key.rfind("state_", 0) == 0) {
      pos = 6;
      if (!parse_index(key, pos, g) || !parse_index(key, pos, i) || g >= groups_.size() ||
          i >= groups_[g].params.size()) {
        throw Error("cannot load optimizer state: unexpected entry " + timm::in_quotes(key) + hint);
      }
      archive.read(key, value, /*is_buffer=*/true);
      groups_[g].states[i][key.substr(pos)] = value.to(groups_[g].params[i].device());
    } else if (key.rfind("group_", 0) == 0) {
      pos = 6;
      if (!parse_index(key, pos, g) || g >= groups_.size()) continue;
      const std::string what = key.substr(pos);
      archive.read(key, value, /*is_buffer=*/true);
      if (what == "lr") {
        groups_[g].lr = value.item<double>();
      } else if (what.rfind("state_", 0) == 0) {
        groups_[g].state[what.substr(6)] = value;
      }
    }
  }
  load_initial_lrs(archive);
}

}  // namespace timm
