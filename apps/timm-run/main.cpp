// timm-run: trains an image classifier the way timm's train.py does.
#include <iostream>

#include "timm/core/error.hpp"
#include "timm/core/plugin_loader.hpp"
#include "timm/core/registry.hpp"

int main(int argc, char** argv) {
  try {
    timm::load_plugins(timm::Registry::global(), timm::plugin_search_path({}));
    for (const auto& name : timm::Registry::global().list(timm::PluginKind::kModel)) std::cout << name << "\n";
    return 0;
  } catch (const timm::Error& e) {
    std::cerr << "timm-run: error: " << e.what() << "\n";
    return e.exit_code();
  }
}
