// timm-bench-optim: optimizer step time for bench/optimizer_step.py. Builds a
// module with the parameters (names and shapes) of a model from a JSON file,
// gives them fixed random gradients, and times optimizer.step() for each
// optimizer named.
//
//   timm-bench-optim PARAMS.json --opts OPT [OPT ...] [--threads 1] [--warmup 2] [--steps 10]
//                    [--whole-groups] [--one-step-above SECONDS]
//     PARAMS.json: [{"name": "layer1.0.conv1.weight", "shape": [64, 64, 1, 1]}, ...]
//     prints one line per optimizer: "<opt> <wall ms per step> <process CPU ms per step>",
//     or "<opt> failed: <error>" when it cannot step these parameters (the
//     others are still timed)
#include <cstdio>
#include <ctime>
#include <fstream>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/nn/module.h>
#include <nlohmann/json.hpp>

#include "timm/base/app_main.hpp"
#include "timm/base/error.hpp"
#include "timm/base/stopwatch.hpp"
#include "timm/optim/foreach_optimizer.hpp"
#include "timm/optim/optimizer.hpp"
#include "timm/plugin/loader.hpp"
#include "timm/plugin/registry.hpp"
#include "timm/tools/tool_args.hpp"

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

// The parameters' values and gradients at the start, which every optimizer
// steps from: the model is built once (at::randn over vit_base's 86M
// parameters took longer than the two timed steps).
struct StartingPoint {
  std::vector<at::Tensor> values, grads;

  explicit StartingPoint(torch::nn::Module& model) {
    for (auto& p : model.parameters()) {
      values.push_back(p.detach().clone());
      grads.push_back(at::randn_like(p) * 0.01);
    }
  }

  void restore(torch::nn::Module& model) const {
    const at::NoGradGuard no_grad;
    std::vector<at::Tensor> params = model.parameters();
    for (std::size_t i = 0; i < params.size(); ++i) {
      params[i].copy_(values[i]);
      if (params[i].grad().defined()) {
        params[i].mutable_grad().copy_(grads[i]);
      } else {
        params[i].mutable_grad() = grads[i].clone();
      }
    }
  }
};

struct StepTime {
  double wall_ms;
  double cpu_ms;  // process CPU time: steadier than wall time on a shared machine
};

// Wall and process CPU time per step of `steps` calls of optimizer.step().
StepTime time_per_step(timm::Optimizer& optimizer, int64_t steps) {
  const timm::Stopwatch wall;
  const std::clock_t cpu_start = std::clock();
  for (int64_t i = 0; i < steps; ++i) optimizer.step();
  const double cpu_ms = 1000.0 * static_cast<double>(std::clock() - cpu_start) / CLOCKS_PER_SEC;
  const double wall_ms = 1000.0 * wall.seconds();
  return {wall_ms / static_cast<double>(steps), cpu_ms / static_cast<double>(steps)};
}

// The time per step of `steps` steps after `warmup` untimed ones; but an
// optimizer whose first step takes longer than one_step_above_s seconds (when
// > 0) is timed on one step: at seconds per step one is a steady figure, and
// more would take minutes (the Muon family's bf16 GEMMs). The first step
// itself is not the figure: it also creates the state (timm's first Muon step
// took 0.7 s longer than its second on resnet50). As bench/optimizer_step.py's
// Python side.
StepTime time_steps(torch::nn::Module& model, const std::string& opt, int64_t warmup, int64_t steps, bool whole_groups,
                    double one_step_above_s) {
  timm::OptimizerArgs args;
  args.opt = opt;
  args.lr = 1e-3;
  args.weight_decay = 0.05;
  timm::OptimizerPtr optimizer = timm::create_optimizer(model, {}, args);
  // Each group in one run of the foreach ops, as before runs of ~1M elements.
  auto* foreach_optimizer = dynamic_cast<timm::ForeachOptimizer*>(optimizer.get());
  if (whole_groups && foreach_optimizer) foreach_optimizer->set_chunk_numel(std::numeric_limits<int64_t>::max());
  if (warmup == 0) return time_per_step(*optimizer, steps);
  const double first_ms = time_per_step(*optimizer, 1).wall_ms;
  const bool slow = one_step_above_s > 0 && first_ms > 1000.0 * one_step_above_s;
  for (int64_t i = 1; i < warmup; ++i) optimizer->step();
  return time_per_step(*optimizer, slow ? 1 : steps);
}

int run(int argc, char** argv) {
  timm::ToolArgs args("timm-bench-optim",
                      "Times optimizer.step() on a model's parameters (bench/optimizer_step.py runs it).");
  args.add_positional("PARAMS.json",
                      "the parameters: [{\"name\": \"layer1.0.conv1.weight\", \"shape\": [64, 64, 1, 1]}, ...]");
  args.add_list("opts", "", "the optimizers to time, one after the other (from the registry)");
  args.add("threads", "", "1", "intra-op threads");
  args.add("warmup", "", "2", "untimed steps");
  args.add("steps", "", "10", "timed steps");
  args.add_switch("whole-groups", "",
                  "hand each optimizer's groups to its foreach ops whole (no runs of ~1M elements)");
  args.add("one-step-above", "", "0",
           "time an optimizer whose first warm-up step takes longer than this many seconds on one step, "
           "not --steps (0: never)");
  args.add_list("plugin-dir", "", "extra folders to load plugins from (repeatable)", /*accumulate=*/true);
  if (!args.parse_or_print_help(argc, argv)) return 0;
  const std::vector<std::string> opts = args.get_list("opts");
  if (opts.empty()) throw timm::UsageError("--opts is required (see timm-bench-optim --help)");
  at::set_num_threads(static_cast<int>(args.get_int_at_least("threads", 1)));
  const int64_t warmup = args.get_int_at_least("warmup", 0);
  const int64_t steps = args.get_int_at_least("steps", 1);
  const double one_step_above_s = args.get_double("one-step-above");
  if (!(one_step_above_s >= 0)) {
    throw timm::UsageError("--one-step-above: expected seconds >= 0, got " + args.get("one-step-above"));
  }
  timm::load_plugins(timm::Registry::global(), timm::plugin_search_path(args.get_list("plugin-dir")));
  const std::string params_file = args.get("PARAMS.json");
  std::ifstream in(params_file);
  if (!in) throw timm::Error("cannot read " + timm::in_quotes(params_file));
  const nlohmann::json params = nlohmann::json::parse(in);
  at::manual_seed(0);
  torch::nn::Module model;
  for (const auto& p : params) add_parameter(model, p.at("name"), p.at("shape").get<std::vector<int64_t>>());
  const StartingPoint start(model);
  for (const std::string& opt : opts) {
    start.restore(model);  // each optimizer from the same values, as the Python side
    try {
      const StepTime t = time_steps(model, opt, warmup, steps, args.get_switch("whole-groups"), one_step_above_s);
      std::printf("%s %.4f %.4f\n", opt.c_str(), t.wall_ms, t.cpu_ms);
    } catch (const std::exception& e) {  // e.g. an allocation beyond this machine
      std::string first_line(e.what());
      first_line = first_line.substr(0, first_line.find('\n'));
      std::printf("%s failed: %s\n", opt.c_str(), first_line.c_str());
    }
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return timm::run_app("timm-bench-optim", argc, argv, run); }
