// timm-run: trains an image classifier the way timm's train.py does.
//
// Parses timm's flags (and --config FILE.toml), loads the plugins, then lists
// registry entries or trains. User errors print one line and exit 2 (usage)
// or 1 (runtime).
#include <iostream>

#include <c10/util/Exception.h>

#include "timm/base/app_main.hpp"
#include "timm/base/cpu_allocator.hpp"
#include "timm/base/error.hpp"
#include "timm/base/stopwatch.hpp"
#include "timm/config/config.hpp"
#include "timm/log/log.hpp"
#include "timm/plugin/loader.hpp"
#include "timm/plugin/registry.hpp"
#include "timm/train/trainer.hpp"

namespace {

void print_list(timm::PluginKind kind, const std::string& pattern) {
  const timm::Registry& registry = timm::Registry::global();
  for (const auto& name : registry.list(kind, pattern)) {
    std::cout << name << "\t" << registry.get(kind, name).description << "\n";
  }
}

int run(int argc, char** argv) {
  const timm::Stopwatch startup_watch;
  timm::CommandLine command = timm::parse_train_command_line(argc, argv);
  if (command.action == timm::Action::kHelp) {
    std::cout << command.help_text;
    return 0;
  }
  const auto plugins = timm::load_plugins(timm::Registry::global(), timm::plugin_search_path(command.plugin_dirs));
  const double startup = startup_watch.seconds();
  switch (command.action) {
    case timm::Action::kListModels:
      print_list(timm::PluginKind::kModel, command.list_pattern);
      return 0;
    case timm::Action::kListOptimizers:
      print_list(timm::PluginKind::kOptimizer, command.list_pattern);
      return 0;
    case timm::Action::kListSchedulers:
      print_list(timm::PluginKind::kScheduler, command.list_pattern);
      return 0;
    case timm::Action::kListAugmentations:
      print_list(timm::PluginKind::kAugmentation, command.list_pattern);
      return 0;
    case timm::Action::kListPlugins:
      std::cout << (plugins.empty() ? "no plugins are loaded (check --plugin-dir and TIMM_PLUGIN_PATH)\n"
                                    : timm::describe_loaded_plugins(plugins));
      return 0;
    default:
      break;
  }
  // --grad-checkpointing asks for memory over speed: glibc returns freed buffers again.
  if (command.config.get<bool>("grad_checkpointing")) timm::release_freed_cpu_memory();
  timm::log_info(timm::format("Start-up: %zu plugins, %zu registry entries, config parsed in %.3f s; CPU allocator: %s",
                              plugins.size(), timm::Registry::global().size(), startup,
                              timm::cpu_allocator_policy().reason.c_str()));
  const timm::TrainResult result = timm::run_training(command.config, plugins);
  if (result.last_eval) {
    timm::log_info(timm::format("Test top-1: %.2f%%  top-5: %.2f%%  loss: %.4f  (%lld images)", result.last_eval->top1,
                                result.last_eval->top5, result.last_eval->loss,
                                static_cast<long long>(result.last_eval->samples)));
  }
  timm::log_info(timm::format("Train throughput: %.1f images/s%s%s", result.train_images_per_second,
                              result.output_dir.empty() ? "" : "; output in ", result.output_dir.string().c_str()));
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return timm::run_app("timm-run", argc, argv, run); }
