// --bn-momentum and --bn-eps (layers::set_batch_norm_args): every BatchNorm
// of the model gets them. Against timm's create_model(bn_momentum=...,
// bn_eps=...) for the EfficientNet family, the one timm accepts them for:
// the same layers, by name, with the same momentum and eps; and for a ResNet
// (a TypeError in timm) every BatchNorm too.
#include <map>
#include <string>
#include <utility>

#include <torch/nn/modules/batchnorm.h>
#include <nlohmann/json.hpp>

#include "test_support.hpp"
#include "timm/layers/batch_norm.hpp"
#include "timm/layers/norm_act.hpp"
#include "timm/models/model.hpp"

// Last: c10/util/Logging.h defines a CHECK macro that doctest must override.
#include <doctest/doctest.h>

namespace test_bn_args {

namespace {

using Settings = std::map<std::string, std::pair<double, double>>;  // name -> (momentum, eps)

// The momentum and eps of every BatchNorm of `module`, by qualified name.
Settings batch_norm_settings(torch::nn::Module& module) {
  Settings out;
  for (const auto& item : module.named_modules("", /*include_self=*/false)) {
    torch::nn::Module* m = item.value().get();
    if (auto* bn = dynamic_cast<timm::layers::BatchNormAct2dImpl*>(m)) {
      out[item.key()] = {bn->options.momentum().value_or(-1), bn->options.eps()};
    } else if (auto* bn2 = dynamic_cast<torch::nn::BatchNorm2dImpl*>(m)) {
      out[item.key()] = {bn2->options.momentum().value_or(-1), bn2->options.eps()};
    }
  }
  return out;
}

// timm's BatchNorms of create_model(name, **kwargs) as JSON {name: [momentum, eps]}.
Settings timm_settings(const std::string& model, const std::string& kwargs) {
  const std::string script =
      "import json, timm, torch\n"
      "m = timm.create_model('" +
      model + "'" + kwargs +
      ")\n"
      "bns = {n: [x.momentum, x.eps] for n, x in m.named_modules()"
      " if isinstance(x, torch.nn.modules.batchnorm._BatchNorm)}\n"
      "print(json.dumps(bns))\n";
  const timm::test::CommandResult result = timm::test::run_command({timm::test::python(), "-c", script});
  REQUIRE_MESSAGE(result.exit_code == 0, result.output);
  Settings out;
  const nlohmann::json parsed = nlohmann::json::parse(result.output);
  for (const auto& [name, value] : parsed.items()) {
    out[name] = {value.at(0).get<double>(), value.at(1).get<double>()};
  }
  return out;
}

timm::ModelPtr make(const std::string& name) {
  timm::test::load_builtin_plugins();
  return timm::create_model(name, timm::ModelArgs{});
}

}  // namespace

TEST_CASE("--bn-momentum and --bn-eps set every BatchNorm of efficientnet_b0 as timm's constructor does") {
  timm::ModelPtr model = make("efficientnet_b0");
  CHECK(batch_norm_settings(*model) == timm_settings("efficientnet_b0", ""));  // the defaults first
  const std::size_t count = timm::layers::set_batch_norm_args(*model, 0.01, 1e-3);
  const Settings theirs = timm_settings("efficientnet_b0", ", bn_momentum=0.01, bn_eps=1e-3");
  CHECK(count == theirs.size());
  CHECK(batch_norm_settings(*model) == theirs);
}

TEST_CASE("--bn-momentum alone leaves eps, and any model with BatchNorm takes it") {
  timm::ModelPtr model = make("resnet18");
  const Settings before = batch_norm_settings(*model);
  REQUIRE(before.size() == 20);
  CHECK(timm::layers::set_batch_norm_args(*model, 0.2, std::nullopt) == before.size());
  for (const auto& [name, setting] : batch_norm_settings(*model)) {
    CAPTURE(name);
    CHECK(setting.first == 0.2);
    CHECK(setting.second == before.at(name).second);
  }
  CHECK(timm::layers::set_batch_norm_args(*model, std::nullopt, 1e-4) == before.size());
  CHECK(batch_norm_settings(*model).begin()->second == std::pair<double, double>{0.2, 1e-4});
}

}  // namespace test_bn_args
