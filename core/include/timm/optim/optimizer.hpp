// The optimizer interface, timm's parameter groups, and creation by name.
//
// Optimizer plugins register an OptimizerFactory under timm's names ("sgd",
// "adamw", "lion", ...; `timm-run --list-optimizers` lists them).
// create_optimizer() builds timm's parameter groups from a model (no weight
// decay on biases, 1-D parameters and the model's no_weight_decay list, or
// timm's layer-decay groups) and calls the factory, as timm's
// create_optimizer_v2. docs/optimizers.md lists the names and flags.
//
// Creating an optimizer by name outside timm-run, for any parameters:
//
//   #include "timm/plugin/loader.hpp"   // once: load the optimizer plugins
//   #include "timm/optim/optimizer.hpp"
//
//   timm::PluginLoader(timm::Registry::global()).load_directory(plugin_dir, /*required=*/true);
//   timm::OptimizerArgs args;                // train.py's flags, same defaults
//   args.opt = "adamw";
//   args.lr = 1e-3;
//   args.weight_decay = 0.05;
//   args.kwargs = {{"amsgrad", "True"}};      // --opt-kwargs, as typed
//
//   // a torch::nn::Module: timm's weight-decay groups
//   timm::OptimizerPtr opt = timm::create_optimizer(module, /*no_weight_decay=*/{}, args);
//   // or hand-made groups (each its own weight decay and lr_scale):
//   timm::ParamGroup group;
//   group.params = {w, b};
//   group.weight_decay = 0.0;
//   timm::OptimizerPtr opt2 = timm::create_optimizer(std::vector<timm::ParamGroup>{group}, args);
//
//   loss.backward();
//   opt->step();
//   opt->zero_grad();
//
// The optimizer keeps the tensors (shared storage), updates them in place and
// reads their .grad(); a parameter without a gradient is skipped that step.
// save()/load() write and restore the whole state (lr, step counts, moments).
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>
#include <torch/serialize/archive.h>

#include "timm/base/python_repr.hpp"
#include "timm/models/model.hpp"

namespace timm {

// One parameter group, as a dict in timm's param_groups.
struct ParamGroup {
  std::string name;  // timm's key for layer-decay groups ("layer_3_decay"); empty otherwise
  std::vector<std::string> names;
  std::vector<torch::Tensor> params;
  double weight_decay = 0.0;
  double lr_scale = 1.0;  // set by layer decay; the scheduler multiplies lr by it
};

// The optimizer flags of train.py (optimizer_kwargs(args)).
struct OptimizerArgs {
  std::string opt = "sgd";
  double lr = 0.1;
  double weight_decay = 2e-5;
  double momentum = 0.9;
  std::optional<double> eps;                  // --opt-eps; optimizer default when unset
  std::optional<std::vector<double>> betas;   // --opt-betas
  std::map<std::string, std::string> kwargs;  // --opt-kwargs k=v, values unparsed
  // --layer-decay: timm's param_groups_layer_decay instead of the weight-decay
  // groups (needs the model's group_matcher()).
  std::optional<double> layer_decay;
  double layer_decay_min_scale = 0.0;              // --layer-decay-min-scale
  std::optional<double> layer_decay_no_opt_scale;  // --layer-decay-no-opt-scale
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;

  virtual void step() = 0;
  // Sets gradients to None (torch's set_to_none=True default).
  virtual void zero_grad() = 0;

  virtual std::size_t num_groups() const = 0;
  virtual double lr(std::size_t group) const = 0;
  virtual void set_lr(std::size_t group, double lr) = 0;
  virtual double lr_scale(std::size_t group) const = 0;
  virtual double weight_decay(std::size_t group) const = 0;

  // Optimizer state for checkpoints; load() accepts what save() wrote,
  // including the groups' hyper-parameters (lr) and initial_lr, as torch's
  // load_state_dict restores param_groups.
  virtual void save(torch::serialize::OutputArchive& archive) const = 0;
  virtual void load(torch::serialize::InputArchive& archive) = 0;

  // timm's log line after "Created ": "SGD (sgd) optimizer: lr: 0.1, ...",
  // the optimizer's defaults as train.py prints them.
  virtual std::string describe() const = 0;

  // timm's is_second_order (adahessian): the trainer then runs backward with
  // create_graph, so that step() can differentiate the gradients again.
  virtual bool is_second_order() const { return false; }

  // The mean of the groups' lr, as train.py logs and writes to summary.csv.
  double mean_lr() const;

  // timm's group['initial_lr']: set by the first scheduler (setdefault) and
  // kept in checkpoints, so that a scheduler created after a resume starts
  // from the original base lr rather than the last scheduled one.
  std::optional<double> initial_lr(std::size_t group) const;
  void set_initial_lr(std::size_t group, double lr);

 protected:
  // For implementations' save()/load(); load() tolerates archives without it.
  void save_initial_lrs(torch::serialize::OutputArchive& archive) const;
  void load_initial_lrs(torch::serialize::InputArchive& archive);

 private:
  std::vector<std::optional<double>> initial_lrs_;
};

// Wraps a torch::optim optimizer whose param groups were built from
// ParamGroups in order; a building block for optimizer plugins.
class TorchOptimizer : public Optimizer {
 public:
  TorchOptimizer(std::unique_ptr<torch::optim::Optimizer> impl, std::vector<double> lr_scales, std::string description);
  void step() override;
  void zero_grad() override;
  std::size_t num_groups() const override;
  double lr(std::size_t group) const override;
  void set_lr(std::size_t group, double lr) override;
  double lr_scale(std::size_t group) const override;
  double weight_decay(std::size_t group) const override;
  void save(torch::serialize::OutputArchive& archive) const override;
  void load(torch::serialize::InputArchive& archive) override;
  std::string describe() const override { return description_; }

  torch::optim::Optimizer& impl() { return *impl_; }
  const torch::optim::Optimizer& impl() const { return *impl_; }

 private:
  const torch::optim::OptimizerOptions& options(std::size_t group) const;

  std::unique_ptr<torch::optim::Optimizer> impl_;
  std::vector<double> lr_scales_;
  std::string description_;
};

using OptimizerPtr = std::unique_ptr<Optimizer>;
// Receives timm's groups and the flags; args.opt is the name as the user
// spelled it (timm logs it so), the factory was looked up lowercased.
using OptimizerFactory = std::function<OptimizerPtr(std::vector<ParamGroup>, const OptimizerArgs&)>;

// How train.py scales --lr-base to the lr when --lr is not given: by the
// ratio of the global batch size to --lr-base-size, or by its square root.
enum class LrBaseScale { kLinear, kSqrt };

// What an optimizer plugin declares about an optimizer when it registers it
// (PluginRegistrar::add_optimizer), for the core to read instead of knowing
// optimizers by name.
struct OptimizerTraits {
  // The --lr-base-scale used when the flag is empty. timm's train.py picks
  // sqrt for names containing "ada" or "lamb" (its adaptive optimizers: adam,
  // adamw, lamb, adafactor, ...) and linear for the rest (sgd, lion, adopt,
  // lars, ...); each plugin declares for its names what timm picks.
  LrBaseScale lr_base_scale = LrBaseScale::kLinear;
};

// The traits of the optimizer that `opt` names, resolved as create_optimizer
// resolves it (select_optimizer: case-insensitive, the whole name when it is
// registered, else timm's reading: "lookahead_adamw" gives adamw's). An unknown
// name throws create_optimizer's UsageError; an optimizer registered without
// traits has the defaults.
OptimizerTraits optimizer_traits(const std::string& opt);

// timm's param_groups_weight_decay: groups [no-decay (wd 0), decay (wd)], each
// only if non-empty; all in the no-decay group when weight_decay is 0.
// Parameters with requires_grad false are left out. A parameter is no-decay
// if it is 1-D or smaller, its name ends in ".bias", or it matches an fnmatch
// pattern of `no_weight_decay`.
std::vector<ParamGroup> param_groups_weight_decay(const torch::nn::Module& model, double weight_decay,
                                                  const std::vector<std::string>& no_weight_decay);

// Creates the optimizer named args.opt (case-insensitive, as timm) for the
// given parameter groups, passing the flags as timm's create_optimizer_v2
// does. The name is read by select_optimizer (registry.hpp): the whole
// lowered name when registered, else timm's reading. Unknown names throw
// UsageError with the nearest known names; "lookahead_<opt>" wraps <opt>
// (any registered optimizer, its name may hold '_') in timm's
// Lookahead (alpha 0.5, k 6). args.layer_decay is ignored here (the groups
// are given).
OptimizerPtr create_optimizer(std::vector<ParamGroup> groups, const OptimizerArgs& args);

// timm's parameter groups for `model` as create_optimizer_v2 makes them: the
// weight-decay groups, or with args.layer_decay set the layer-decay groups of
// `group_matcher` (UsageError naming `model_name` when it is empty).
std::vector<ParamGroup> optimizer_param_groups(const torch::nn::Module& model,
                                               const std::vector<std::string>& no_weight_decay,
                                               const OptimizerArgs& args, const GroupMatcher& group_matcher = {},
                                               const std::string& model_name = "the model");

// Creates the optimizer for `model` with timm's groups: the weight-decay
// groups, or with args.layer_decay set the layer-decay groups of
// `group_matcher` (timm's model.group_matcher(coarse=False)). With layer
// decay and an empty group_matcher: UsageError naming `model_name`.
OptimizerPtr create_optimizer(const torch::nn::Module& model, const std::vector<std::string>& no_weight_decay,
                              const OptimizerArgs& args, const GroupMatcher& group_matcher = {},
                              const std::string& model_name = "the model");

// As train.py: create_optimizer_v2(model, **optimizer_kwargs(args)), with the
// model's no_weight_decay() and group_matcher(false).
OptimizerPtr create_optimizer(const ClassifierImpl& model, const std::string& model_name, const OptimizerArgs& args);

// torch param groups from timm's groups: each group gets a copy of `defaults`
// with its own weight_decay, as torch merges a group dict over the defaults.
template <class Options>
std::vector<torch::optim::OptimizerParamGroup> torch_param_groups(const std::vector<ParamGroup>& groups,
                                                                  const Options& defaults) {
  std::vector<torch::optim::OptimizerParamGroup> out;
  out.reserve(groups.size());
  for (const ParamGroup& group : groups) {
    auto options = std::make_unique<Options>(defaults);
    options->weight_decay(group.weight_decay);
    out.emplace_back(group.params, std::move(options));
  }
  return out;
}

// The lr_scale of each group, for TorchOptimizer.
std::vector<double> lr_scales(const std::vector<ParamGroup>& groups);

// --opt-kwargs for an optimizer plugin, read as timm's ParseKwargs
// (ast.literal_eval) would for the types the optimizer takes. Every error is a
// UsageError naming the optimizer and the key.
class OptimizerKwargs {
 public:
  // Throws UsageError if args.kwargs has a key not in `known`, or one that
  // train.py also passes from a flag (lr, weight_decay, momentum; eps and
  // betas when --opt-eps / --opt-betas are set), as Python would.
  OptimizerKwargs(const OptimizerArgs& args, const std::vector<std::string>& known);

  bool has(const std::string& key) const { return kwargs_.count(key) != 0; }
  double get_double(const std::string& key, double fallback) const;
  bool get_bool(const std::string& key, bool fallback) const;
  // "(0.9, 0.999)", "[0.9,0.999]" or "0.9,0.999".
  std::vector<double> get_doubles(const std::string& key, std::vector<double> fallback) const;
  // Python's repr of the value as it would be stored ("0.9", "1", "True").
  std::string repr(const std::string& key, const std::string& fallback) const;

 private:
  std::string where(const std::string& key) const;

  std::string opt_;
  std::map<std::string, std::string> kwargs_;
};

// The describe() string: "<cls> (<opt>) optimizer: k: v, k: v, ...".
std::string describe_optimizer(const std::string& cls, const std::string& opt,
                               const std::vector<std::pair<std::string, std::string>>& defaults);

}  // namespace timm
