#include "timm/optim/optimizer.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <exception>
#include <numeric>

#include <ATen/ATen.h>
#include <torch/optim/adagrad.h>
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/rmsprop.h>
#include <torch/optim/sgd.h>
#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>

#include "timm/base/error.hpp"
#include "timm/base/names.hpp"
#include "timm/optim/lookahead.hpp"
#include "timm/optim/param_groups.hpp"
#include "timm/plugin/registry.hpp"

namespace timm {

// ---- Optimizer --------------------------------------------------------------

double Optimizer::mean_lr() const {
  const std::size_t n = num_groups();
  if (n == 0) return 0.0;
  double sum = 0.0;
  for (std::size_t i = 0; i < n; ++i) sum += lr(i);
  return sum / static_cast<double>(n);
}

std::optional<double> Optimizer::initial_lr(std::size_t group) const {
  TORCH_CHECK(group < num_groups(), "param group ", group, " out of range");
  return group < initial_lrs_.size() ? initial_lrs_[group] : std::nullopt;
}

void Optimizer::set_initial_lr(std::size_t group, double lr) {
  TORCH_CHECK(group < num_groups(), "param group ", group, " out of range");
  if (initial_lrs_.size() < num_groups()) initial_lrs_.resize(num_groups());
  initial_lrs_[group] = lr;
}

namespace {
constexpr const char* kInitialLrKey = "timm_initial_lr";
}  // namespace

void Optimizer::save_initial_lrs(torch::serialize::OutputArchive& archive) const {
  // NaN marks a group whose initial_lr was never set.
  std::vector<double> values(num_groups(), std::nan(""));
  for (std::size_t i = 0; i < initial_lrs_.size() && i < values.size(); ++i) {
    if (initial_lrs_[i]) values[i] = *initial_lrs_[i];
  }
  archive.write(kInitialLrKey, at::tensor(values, at::kDouble));
}

void Optimizer::load_initial_lrs(torch::serialize::InputArchive& archive) {
  c10::IValue value;
  if (!archive.try_read(kInitialLrKey, value)) return;
  const at::Tensor t = value.toTensor().to(at::kDouble).contiguous();
  if (static_cast<std::size_t>(t.numel()) != num_groups()) {
    throw Error("optimizer state has initial_lr for " + std::to_string(t.numel()) + " param groups, expected " +
                std::to_string(num_groups()));
  }
  initial_lrs_.assign(num_groups(), std::nullopt);
  const double* data = t.data_ptr<double>();
  for (std::size_t i = 0; i < num_groups(); ++i) {
    if (!std::isnan(data[i])) initial_lrs_[i] = data[i];
  }
}

// ---- TorchOptimizer ---------------------------------------------------------

TorchOptimizer::TorchOptimizer(std::unique_ptr<torch::optim::Optimizer> impl, std::vector<double> lr_scales,
                               std::string description)
    : impl_(std::move(impl)), lr_scales_(std::move(lr_scales)), description_(std::move(description)) {
  TORCH_CHECK(impl_ != nullptr, "TorchOptimizer needs an optimizer");
  TORCH_CHECK(lr_scales_.size() == impl_->param_groups().size(), "TorchOptimizer: ", lr_scales_.size(),
              " lr scales for ", impl_->param_groups().size(), " param groups");
}

void TorchOptimizer::step() { impl_->step(); }

void TorchOptimizer::zero_grad() { impl_->zero_grad(/*set_to_none=*/true); }

std::size_t TorchOptimizer::num_groups() const { return impl_->param_groups().size(); }

const torch::optim::OptimizerOptions& TorchOptimizer::options(std::size_t group) const {
  TORCH_CHECK(group < num_groups(), "param group ", group, " out of range");
  return impl_->param_groups()[group].options();
}

double TorchOptimizer::lr(std::size_t group) const { return options(group).get_lr(); }

void TorchOptimizer::set_lr(std::size_t group, double lr) {
  TORCH_CHECK(group < num_groups(), "param group ", group, " out of range");
  impl_->param_groups()[group].options().set_lr(lr);
}

double TorchOptimizer::lr_scale(std::size_t group) const {
  TORCH_CHECK(group < num_groups(), "param group ", group, " out of range");
  return lr_scales_[group];
}

double TorchOptimizer::weight_decay(std::size_t group) const {
  // OptimizerOptions has no virtual weight_decay(); the set of torch's
  // optimizers with one is closed.
  const torch::optim::OptimizerOptions& o = options(group);
  if (const auto* p = dynamic_cast<const torch::optim::SGDOptions*>(&o)) return p->weight_decay();
  if (const auto* p = dynamic_cast<const torch::optim::AdamWOptions*>(&o)) return p->weight_decay();
  if (const auto* p = dynamic_cast<const torch::optim::AdamOptions*>(&o)) return p->weight_decay();
  if (const auto* p = dynamic_cast<const torch::optim::RMSpropOptions*>(&o)) return p->weight_decay();
  if (const auto* p = dynamic_cast<const torch::optim::AdagradOptions*>(&o)) return p->weight_decay();
  return 0.0;
}

void TorchOptimizer::save(torch::serialize::OutputArchive& archive) const {
  impl_->save(archive);
  save_initial_lrs(archive);
}

void TorchOptimizer::load(torch::serialize::InputArchive& archive) {
  try {
    impl_->load(archive);
  } catch (const c10::Error& e) {
    throw Error("cannot load optimizer state (does it come from the same optimizer and model?): " +
                std::string(e.what_without_backtrace()));
  }
  load_initial_lrs(archive);
}

// ---- Parameter groups -------------------------------------------------------

namespace {

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

std::vector<ParamGroup> param_groups_weight_decay(const torch::nn::Module& model, double weight_decay,
                                                  const std::vector<std::string>& no_weight_decay) {
  // As timm: a falsy weight_decay puts everything in the no-decay group.
  const bool no_wd = weight_decay == 0.0;
  ParamGroup decay;
  decay.weight_decay = weight_decay;
  ParamGroup no_decay;
  no_decay.weight_decay = 0.0;
  for (const auto& item : model.named_parameters(/*recurse=*/true)) {
    const std::string& name = item.key();
    const at::Tensor& param = item.value();
    if (!param.requires_grad()) continue;
    const bool excluded =
        no_wd || param.dim() <= 1 || ends_with(name, ".bias") || wildcard_match_any(no_weight_decay, name);
    ParamGroup& group = excluded ? no_decay : decay;
    group.names.push_back(name);
    group.params.push_back(param);
  }
  std::vector<ParamGroup> groups;
  if (!no_decay.params.empty()) groups.push_back(std::move(no_decay));
  if (!decay.params.empty()) groups.push_back(std::move(decay));
  return groups;
}

std::vector<double> lr_scales(const std::vector<ParamGroup>& groups) {
  std::vector<double> scales;
  scales.reserve(groups.size());
  for (const auto& group : groups) scales.push_back(group.lr_scale);
  return scales;
}

// ---- create_optimizer -------------------------------------------------------

namespace {

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  while (true) {
    const std::size_t end = s.find(sep, start);
    parts.push_back(s.substr(start, end == std::string::npos ? std::string::npos : end - start));
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return parts;
}

// The registered optimizer's name in `opt`: the whole name when registered,
// else timm's create_optimizer_v2 reading (select_optimizer).
std::string optimizer_name(const std::string& opt) { return select_optimizer(Registry::global(), opt).name; }

}  // namespace

OptimizerTraits optimizer_traits(const std::string& opt) {
  const RegistryEntry& entry = Registry::global().get(PluginKind::kOptimizer, optimizer_name(opt));
  const OptimizerTraits* traits = traits_of<OptimizerTraits>(entry);
  return traits != nullptr ? *traits : OptimizerTraits{};
}

OptimizerPtr create_optimizer(std::vector<ParamGroup> groups, const OptimizerArgs& args) {
  // The whole name when registered, else timm's reading: parts =
  // opt.lower().split('_'), the optimizer is the last part and a leading
  // "lookahead" wraps it.
  const OptimizerSelection selection = select_optimizer(Registry::global(), args.opt);
  const bool lookahead = selection.lookahead;
  const std::string& name = selection.name;
  const RegistryEntry& entry = Registry::global().get(PluginKind::kOptimizer, name);
  const auto& factory = Registry::global().factory<OptimizerFactory>(PluginKind::kOptimizer, name);

  std::vector<std::vector<at::Tensor>> group_params;
  for (const ParamGroup& group : groups) group_params.push_back(group.params);
  OptimizerPtr optimizer;
  try {
    optimizer = factory(std::move(groups), args);
  } catch (const Error&) {
    throw;  // already says what was wrong
  } catch (const c10::Error& e) {
    throw Error("optimizer '" + name + "' from '" + entry.origin + "': " + e.what_without_backtrace());
  } catch (const std::exception& e) {
    throw Error("optimizer '" + name + "' from '" + entry.origin + "': " + e.what());
  }
  if (!optimizer) throw Error("optimizer '" + name + "' from '" + entry.origin + "': its factory returned nothing");
  if (lookahead && optimizer->num_groups() != group_params.size()) {
    throw Error("optimizer '" + name + "' from '" + entry.origin + "': it has " +
                std::to_string(optimizer->num_groups()) + " param groups, expected " +
                std::to_string(group_params.size()));
  }
  if (lookahead) return std::make_unique<Lookahead>(std::move(optimizer), std::move(group_params));
  return optimizer;
}

std::vector<ParamGroup> optimizer_param_groups(const torch::nn::Module& model,
                                               const std::vector<std::string>& no_weight_decay,
                                               const OptimizerArgs& args, const GroupMatcher& group_matcher,
                                               const std::string& model_name) {
  if (!args.layer_decay) return param_groups_weight_decay(model, args.weight_decay, no_weight_decay);
  if (group_matcher.empty()) {
    throw UsageError("--layer-decay: model " + timm::in_quotes(model_name) +
                     " has no group_matcher() to assign its parameters to layers");
  }
  LayerDecayOptions options;
  options.weight_decay = args.weight_decay;
  options.layer_decay = *args.layer_decay;
  options.min_scale = args.layer_decay_min_scale;
  options.no_opt_scale = args.layer_decay_no_opt_scale;
  return param_groups_layer_decay(model, group_matcher, no_weight_decay, options);
}

OptimizerPtr create_optimizer(const torch::nn::Module& model, const std::vector<std::string>& no_weight_decay,
                              const OptimizerArgs& args, const GroupMatcher& group_matcher,
                              const std::string& model_name) {
  // The name first: an unknown optimizer is reported before anything else.
  Registry::global().get(PluginKind::kOptimizer, optimizer_name(args.opt));
  return create_optimizer(optimizer_param_groups(model, no_weight_decay, args, group_matcher, model_name), args);
}

OptimizerPtr create_optimizer(const ClassifierImpl& model, const std::string& model_name, const OptimizerArgs& args) {
  return create_optimizer(model, model.no_weight_decay(), args, model.group_matcher(/*coarse=*/false), model_name);
}

// ---- OptimizerKwargs --------------------------------------------------------

namespace {

std::string trim(std::string_view s) {
  std::size_t b = 0;
  std::size_t e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return std::string(s.substr(b, e - b));
}

std::optional<double> parse_double(const std::string& text) {
  const std::string s = trim(text);
  if (s.empty()) return std::nullopt;
  double value = 0.0;
  const char* begin = s.data() + (s.front() == '+' ? 1 : 0);
  const auto [ptr, ec] = std::from_chars(begin, s.data() + s.size(), value);
  if (ec != std::errc() || ptr != s.data() + s.size()) return std::nullopt;
  return value;
}

bool is_integer_literal(const std::string& text) {
  const std::string s = trim(text);
  if (s.empty()) return false;
  std::size_t i = (s[0] == '-' || s[0] == '+') ? 1 : 0;
  if (i == s.size()) return false;
  for (; i < s.size(); ++i) {
    if (!std::isdigit(static_cast<unsigned char>(s[i]))) return false;
  }
  return true;
}

}  // namespace

OptimizerKwargs::OptimizerKwargs(const OptimizerArgs& args, const std::vector<std::string>& known)
    : opt_(args.opt), kwargs_(args.kwargs) {
  for (const auto& [key, value] : kwargs_) {
    // train.py passes these as keywords too: Python fails with "got multiple
    // values for keyword argument".
    const bool from_flags = key == "opt" || key == "lr" || key == "weight_decay" || key == "momentum" ||
                            (key == "eps" && args.eps) || (key == "betas" && args.betas);
    if (from_flags) {
      throw UsageError("--opt-kwargs: " + timm::in_quotes(key) + " is already set by its own flag (--" +
                       (key == "weight_decay" ? std::string("weight-decay")
                        : key == "eps"        ? std::string("opt-eps")
                        : key == "betas"      ? std::string("opt-betas")
                                              : key) +
                       ")");
    }
    if (std::find(known.begin(), known.end(), key) != known.end()) continue;
    throw UsageError("--opt-kwargs: optimizer " + timm::in_quotes(opt_) + " has no argument " + timm::in_quotes(key) +
                     " (expected one of: " + joined_names(known) + ")");
  }
}

std::string OptimizerKwargs::where(const std::string& key) const {
  return "--opt-kwargs " + key + "=" + kwargs_.at(key) + " (optimizer " + timm::in_quotes(opt_) + ")";
}

double OptimizerKwargs::get_double(const std::string& key, double fallback) const {
  if (!has(key)) return fallback;
  const auto value = parse_double(kwargs_.at(key));
  if (!value) throw UsageError(where(key) + ": expected a number");
  return *value;
}

bool OptimizerKwargs::get_bool(const std::string& key, bool fallback) const {
  if (!has(key)) return fallback;
  const std::string s = trim(kwargs_.at(key));
  if (s == "True" || s == "true" || s == "1") return true;
  if (s == "False" || s == "false" || s == "0") return false;
  throw UsageError(where(key) + ": expected True or False");
}

std::vector<double> OptimizerKwargs::get_doubles(const std::string& key, std::vector<double> fallback) const {
  if (!has(key)) return fallback;
  std::string s = trim(kwargs_.at(key));
  if (s.size() >= 2 && ((s.front() == '(' && s.back() == ')') || (s.front() == '[' && s.back() == ']'))) {
    s = s.substr(1, s.size() - 2);
  }
  std::vector<double> values;
  for (const std::string& part : split(s, ',')) {
    if (trim(part).empty()) continue;  // "(0.9,)" as Python allows
    const auto value = parse_double(part);
    if (!value) throw UsageError(where(key) + ": expected a tuple of numbers");
    values.push_back(*value);
  }
  return values;
}

std::string OptimizerKwargs::repr(const std::string& key, const std::string& fallback) const {
  if (!has(key)) return fallback;
  const std::string s = trim(kwargs_.at(key));
  if (is_integer_literal(s)) return std::to_string(std::stoll(s));
  if (const auto value = parse_double(s)) return python_float_repr(*value);
  if (s == "true" || s == "True") return "True";
  if (s == "false" || s == "False") return "False";
  return "'" + s + "'";
}

// ---- Formatting -------------------------------------------------------------

std::string describe_optimizer(const std::string& cls, const std::string& opt,
                               const std::vector<std::pair<std::string, std::string>>& defaults) {
  std::string out = cls + " (" + opt + ") optimizer: ";
  for (std::size_t i = 0; i < defaults.size(); ++i) {
    if (i != 0) out += ", ";
    out += defaults[i].first + ": " + defaults[i].second;
  }
  return out;
}

}  // namespace timm
