#include "timm/models/model.hpp"

#include <algorithm>

#include "timm/core/error.hpp"
#include "timm/core/registry.hpp"

namespace timm {

ModelPtr create_model(const std::string& name, const ModelArgs& args) {
  const auto& factory = Registry::global().factory<ModelFactory>(PluginKind::kModel, name);
  ModelPtr model = factory(args);
  if (!model) throw Error("model '" + name + "': its factory returned no model");
  return model;
}

void check_model_kwargs(const std::string& model, const ModelArgs& args, const std::vector<std::string>& known) {
  for (const auto& [key, value] : args.kwargs) {
    if (std::find(known.begin(), known.end(), key) == known.end()) {
      std::string expected;
      for (const auto& k : known) expected += (expected.empty() ? "" : ", ") + k;
      throw UsageError("--model-kwargs: model '" + model + "' has no argument '" + key + "'" +
                       (expected.empty() ? " (it takes none)" : " (expected one of: " + expected + ")"));
    }
  }
}

int64_t count_parameters(const torch::nn::Module& model) {
  int64_t n = 0;
  for (const auto& p : model.parameters()) n += p.numel();
  return n;
}

}  // namespace timm
