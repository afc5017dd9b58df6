// The plugin interface: what a plugin library exports and how it registers.
//
// A plugin is a shared library with exactly one C entry point,
// `timm_plugin_v1`, returning a PluginInfo that carries the SDK ABI version,
// the torch version and the C++ ABI flag it was built with. The loader checks
// those before calling `register_plugin`. Write a plugin as:
//
//   #include "timm/plugin/plugin.hpp"
//   TIMM_PLUGIN("resnet") {
//     registrar.add_model("resnet18", "ResNet-18", make_resnet18);
//   }
//
// Registrations are collected and committed to the registry only when the
// whole function returns: a plugin that throws half-way adds nothing.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <torch/version.h>

#include "timm/base/version.hpp"
#include "timm/data/transform.hpp"
#include "timm/models/model.hpp"
#include "timm/optim/optimizer.hpp"
#include "timm/plugin/registry.hpp"
#include "timm/sched/scheduler.hpp"

namespace timm {

// Collects one plugin's registrations.
class PluginRegistrar {
 public:
  explicit PluginRegistrar(std::string origin) : origin_(std::move(origin)) {}

  void add_model(std::string name, std::string description, ModelFactory factory);
  // `traits`: what the core needs to know about the optimizer (train.py's lr
  // scaling rule for it); the defaults unless declared.
  void add_optimizer(std::string name, std::string description, OptimizerFactory factory, OptimizerTraits traits = {});
  void add_scheduler(std::string name, std::string description, SchedulerFactory factory);
  // `traits`: where create_transform places the stage and when it applies;
  // without them the stage is only made by name.
  void add_augmentation(std::string name, std::string description, AugmentationFactory factory,
                        AugmentationTraits traits = {});

  const std::string& origin() const { return origin_; }
  std::vector<RegistryEntry> take_entries() { return std::move(entries_); }

 private:
  void add(PluginKind kind, std::string name, std::string description, std::any factory, std::any traits = {});

  std::string origin_;
  std::vector<RegistryEntry> entries_;
};

// What `timm_plugin_v1` returns. Plain data so that the loader can read it
// before trusting anything else in the library.
struct PluginInfo {
  std::uint32_t sdk_abi_version;
  const char* torch_version;  // TORCH_VERSION the plugin was compiled against
  int cxx11_abi;              // _GLIBCXX_USE_CXX11_ABI
  const char* name;
  void (*register_plugin)(PluginRegistrar& registrar);
};

// The entry point's name and signature.
inline constexpr const char* kPluginEntryPoint = "timm_plugin_v1";
using PluginEntryPoint = const PluginInfo* (*)();

}  // namespace timm

// Defines the entry point of a plugin named `plugin_name`; the braces that
// follow are the registration function, with `registrar` in scope.
#define TIMM_PLUGIN(plugin_name)                                                                                     \
  static void timm_plugin_register(::timm::PluginRegistrar& registrar);                                              \
  extern "C" __attribute__((visibility("default"))) const ::timm::PluginInfo* timm_plugin_v1() {                     \
    static const ::timm::PluginInfo info{::timm::kSdkAbiVersion, TORCH_VERSION, _GLIBCXX_USE_CXX11_ABI, plugin_name, \
                                         &timm_plugin_register};                                                     \
    return &info;                                                                                                    \
  }                                                                                                                  \
  static void timm_plugin_register([[maybe_unused]] ::timm::PluginRegistrar& registrar)
