#include "timm/plugin/plugin.hpp"

namespace timm {

void PluginRegistrar::add(PluginKind kind, std::string name, std::string description, std::any factory,
                          std::any traits) {
  entries_.push_back(
      RegistryEntry{kind, std::move(name), std::move(description), origin_, std::move(factory), std::move(traits)});
}

void PluginRegistrar::add_model(std::string name, std::string description, ModelFactory factory) {
  add(PluginKind::kModel, std::move(name), std::move(description), std::move(factory));
}

void PluginRegistrar::add_optimizer(std::string name, std::string description, OptimizerFactory factory,
                                    OptimizerTraits traits) {
  add(PluginKind::kOptimizer, std::move(name), std::move(description), std::move(factory), traits);
}

void PluginRegistrar::add_scheduler(std::string name, std::string description, SchedulerFactory factory) {
  add(PluginKind::kScheduler, std::move(name), std::move(description), std::move(factory));
}

void PluginRegistrar::add_augmentation(std::string name, std::string description, AugmentationFactory factory,
                                       AugmentationTraits traits) {
  add(PluginKind::kAugmentation, std::move(name), std::move(description), std::move(factory), std::move(traits));
}

}  // namespace timm
