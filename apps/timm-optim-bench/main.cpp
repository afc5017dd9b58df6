// Optimizer step time for bench/optimizer_step.py: builds a module with the
// parameters (names and shapes) of a model from a JSON file, gives them fixed
// random gradients, and times optimizer.step() for each optimizer named.
//
//   timm-optim-bench PARAMS.json THREADS WARMUP STEPS OPT...
//     PARAMS.json: [{"name": "layer1.0.conv1.weight", "shape": [64, 64, 1, 1]}, ...]
//     prints one line per optimizer: "<opt> <wall ms per step> <process CPU ms per step>"
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/nn/module.h>
#include <nlohmann/json.hpp>

#include "timm/core/error.hpp"
#include "timm/core/plugin_loader.hpp"
#include "timm/core/registry.hpp"
#include "timm/optim/optimizer.hpp"

namespace {

// Registers `shape` under the dotted `name`, creating the submodules.
void add_parameter(torch::nn::Module& root, const std::string& name, const std::vector<int64_t>& shape) {
  torch::nn::Module* module = &root;
  std::size_t start = 0;
  for (std::size_t dot = name.find('.'); dot != std::string::npos; dot = name.find('.', start)) {
    const std::string part = name.substr(start, dot - start);
    auto children = module->named_children();
    if (!children.contains(part)) module->register_module(part, std::make_shared<torch::nn::Module>());
    module = module->named_children()[part].get();
    start = dot + 1;
  }
  module->register_parameter(name.substr(start), at::randn(shape) * 0.02);
}

struct StepTime {
  double wall_ms;
  double cpu_ms;  // process CPU time: steadier than wall time on a shared machine
};

StepTime time_steps(torch::nn::Module& model, const std::string& opt, int warmup, int steps) {
  timm::OptimizerArgs args;
  args.opt = opt;
  args.lr = 1e-3;
  args.weight_decay = 0.05;
  timm::OptimizerPtr optimizer = timm::create_optimizer(model, {}, args);
  for (auto& p : model.parameters()) p.mutable_grad() = at::randn_like(p) * 0.01;
  for (int i = 0; i < warmup; ++i) optimizer->step();
  const auto start = std::chrono::steady_clock::now();
  const std::clock_t cpu_start = std::clock();
  for (int i = 0; i < steps; ++i) optimizer->step();
  const double cpu_ms = 1000.0 * static_cast<double>(std::clock() - cpu_start) / CLOCKS_PER_SEC;
  const std::chrono::duration<double, std::milli> elapsed = std::chrono::steady_clock::now() - start;
  return {elapsed.count() / steps, cpu_ms / steps};
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 6) {
    std::fprintf(stderr, "usage: timm-optim-bench PARAMS.json THREADS WARMUP STEPS OPT...\n");
    return 2;
  }
  try {
    at::set_num_threads(std::stoi(argv[2]));
    const int warmup = std::stoi(argv[3]);
    const int steps = std::stoi(argv[4]);
    timm::load_plugins(timm::Registry::global(), timm::plugin_search_path({}));
    std::ifstream in(argv[1]);
    const nlohmann::json params = nlohmann::json::parse(in);
    at::manual_seed(0);
    for (int i = 5; i < argc; ++i) {
      torch::nn::Module model;  // fresh parameters per optimizer, as the Python side
      for (const auto& p : params) add_parameter(model, p.at("name"), p.at("shape").get<std::vector<int64_t>>());
      const StepTime t = time_steps(model, argv[i], warmup, steps);
      std::printf("%s %.4f %.4f\n", argv[i], t.wall_ms, t.cpu_ms);
      std::fflush(stdout);
    }
  } catch (const timm::UsageError& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
