#include "timm/models/model.hpp"

#include <algorithm>
#include <cmath>

#include "timm/base/error.hpp"
#include "timm/base/names.hpp"
#include "timm/base/python_repr.hpp"
#include "timm/models/model_args.hpp"
#include "timm/plugin/registry.hpp"

namespace timm {

std::string describe_model(const ClassifierImpl& model) {
  if (model.registered_name().empty()) return "model " + in_quotes(model.name());
  return "model " + in_quotes(model.registered_name()) + " (from plugin " + in_quotes(model.registered_origin()) + ")";
}

torch::Tensor ClassifierImpl::forward_features(torch::Tensor x) {
  (void)x;
  throw Error(describe_model(*this) +
              " does not implement forward_features (timm's unpooled features); its plugin must override "
              "ClassifierImpl::forward_features and forward_head to support this (docs/plugins.md, Models)");
}

torch::Tensor ClassifierImpl::forward_head(torch::Tensor x, bool pre_logits) {
  (void)x;
  (void)pre_logits;
  throw Error(describe_model(*this) +
              " does not implement forward_head (timm's pooling and classifier on forward_features' output); its "
              "plugin must override ClassifierImpl::forward_features and forward_head to support this "
              "(docs/plugins.md, Models)");
}

std::vector<FeatureInfo> ClassifierImpl::feature_info() const {
  throw Error(describe_model(*this) +
              " does not implement feature_info (timm's feature levels); its plugin must override "
              "ClassifierImpl::feature_info and forward_intermediates to support this (docs/plugins.md, Models)");
}

Intermediates ClassifierImpl::forward_intermediates(torch::Tensor x, const IntermediatesOptions& options) {
  (void)x;
  (void)options;
  throw Error(describe_model(*this) +
              " does not implement forward_intermediates (timm's feature maps per level); its plugin must override "
              "ClassifierImpl::feature_info and forward_intermediates to support this (docs/plugins.md, Models)");
}

torch::Tensor ClassifierImpl::forward_patches(const PatchBatch& batch) {
  (void)batch;
  throw UsageError(describe_model(*this) +
                   " takes images only, not patches (NaFlex input, --naflex-loader, needs a model that takes "
                   "patches, such as naflexvit_*)");
}

std::pair<torch::Tensor, torch::Tensor> ClassifierImpl::forward_distilled(torch::Tensor x) {
  (void)x;
  throw UsageError(describe_model(*this) +
                   " has no distillation head (token distillation trains a model with one, such as "
                   "deit_*_distilled_*)");
}

void ClassifierImpl::set_grad_checkpointing(bool enable) {
  if (!enable) return;
  throw UsageError(describe_model(*this) +
                   " does not support gradient checkpointing (--grad-checkpointing); its plugin must override "
                   "ClassifierImpl::set_grad_checkpointing to support it (docs/plugins.md, Models)");
}

ModelPtr create_model(const std::string& name, const ModelArgs& args) {
  const RegistryEntry& entry = Registry::global().get(PluginKind::kModel, name);
  const auto& factory = Registry::global().factory<ModelFactory>(PluginKind::kModel, name);
  ModelPtr model = factory(args);
  if (!model) throw Error("model '" + name + "': its factory returned no model");
  model->set_registered(entry.name, entry.origin);
  return model;
}

void set_drop_block_rate(ModelArgs& args, double rate) {
  if (args.kwargs.contains("drop_block_rate")) {
    throw UsageError("--drop-block and --model-kwargs drop_block_rate both set the drop block rate; give one");
  }
  args.kwargs["drop_block_rate"] = python_float_repr(rate);
}

void check_model_kwargs(const std::string& model, const ModelArgs& args, const std::vector<std::string>& known) {
  for (const auto& [key, value] : args.kwargs) {
    if (std::find(known.begin(), known.end(), key) == known.end()) {
      throw UsageError("model '" + model + "' has no argument '" + key + "'" +
                       (known.empty() ? " (it takes none)" : " (expected one of: " + joined_names(known) + ")"));
    }
  }
}

std::optional<double> model_kwarg_double(const std::string& model, const ModelArgs& args, const std::string& key) {
  const auto it = args.kwargs.find(key);
  if (it == args.kwargs.end()) return std::nullopt;
  try {
    std::size_t used = 0;
    const double value = std::stod(it->second, &used);
    if (used == it->second.size()) return value;
  } catch (const std::exception&) {
  }
  throw UsageError(model + ": " + key + "=" + in_quotes(it->second) + ": expected a number");
}

std::optional<bool> model_kwarg_bool(const std::string& model, const ModelArgs& args, const std::string& key) {
  const auto it = args.kwargs.find(key);
  if (it == args.kwargs.end()) return std::nullopt;
  const std::string& value = it->second;
  if (value == "true" || value == "True" || value == "1") return true;
  if (value == "false" || value == "False" || value == "0") return false;
  throw UsageError(model + ": " + key + "=" + in_quotes(value) + ": expected true or false");
}

std::optional<int64_t> model_kwarg_positive_int(const std::string& model, const ModelArgs& args,
                                                const std::string& key) {
  const std::optional<double> value = model_kwarg_double(model, args, key);
  if (!value) return std::nullopt;
  // Bounded before the cast (a huge value would overflow int64).
  if (!(*value >= 1.0 && *value <= 65536.0 && std::floor(*value) == *value)) {
    throw UsageError(model + ": " + key + "=" + in_quotes(args.kwargs.at(key)) + ": expected an integer in [1, 65536]");
  }
  return static_cast<int64_t>(*value);
}

namespace {

void check_probability(const std::string& model, const char* name, double value) {
  if (!(value >= 0.0 && value <= 1.0)) {
    throw UsageError(model + ": " + name + " must be in [0, 1], got " + python_float_repr(value));
  }
}

}  // namespace

void validate_model_args(const std::string& model, const ModelArgs& args,
                         const std::vector<std::string>& known_kwargs) {
  check_model_kwargs(model, args, known_kwargs);
  if (args.num_classes < 0) {
    throw UsageError(model + ": num_classes must be >= 0, got " + std::to_string(args.num_classes));
  }
  if (args.in_chans < 1) throw UsageError(model + ": in_chans must be >= 1, got " + std::to_string(args.in_chans));
  check_probability(model, "drop_rate", args.drop_rate);
  if (args.drop_path_rate) check_probability(model, "drop_path_rate", *args.drop_path_rate);
}

int64_t count_parameters(const torch::nn::Module& model) {
  int64_t n = 0;
  for (const auto& p : model.parameters()) n += p.numel();
  return n;
}

}  // namespace timm
