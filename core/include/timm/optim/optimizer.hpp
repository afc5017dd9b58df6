// The optimizer interface, timm's parameter groups, and creation by name.
//
// Optimizer plugins register an OptimizerFactory under timm's names ("sgd",
// "adamw", ...). create_optimizer() builds timm's parameter groups from a
// model (no weight decay on biases, 1-D parameters and the model's
// no_weight_decay list) and calls the factory, as timm's create_optimizer_v2.
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>
#include <torch/serialize/archive.h>

namespace timm {

// One parameter group, as a dict in timm's param_groups.
struct ParamGroup {
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
  std::optional<double> eps;            // --opt-eps; optimizer default when unset
  std::optional<std::vector<double>> betas;  // --opt-betas
  std::map<std::string, std::string> kwargs;  // --opt-kwargs k=v
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

  // Optimizer state for checkpoints; load() accepts what save() wrote.
  virtual void save(torch::serialize::OutputArchive& archive) const = 0;
  virtual void load(torch::serialize::InputArchive& archive) = 0;

  // timm's log line: "SGD (sgd) optimizer: lr: 0.1, momentum: 0.9, ...".
  virtual std::string describe() const = 0;

  double mean_lr() const;
};

// Wraps a torch::optim optimizer whose param groups were built from
// ParamGroups in order; a building block for optimizer plugins.
class TorchOptimizer : public Optimizer {
 public:
  TorchOptimizer(std::unique_ptr<torch::optim::Optimizer> impl, std::vector<double> lr_scales,
                 std::string description);
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

 private:
  std::unique_ptr<torch::optim::Optimizer> impl_;
  std::vector<double> lr_scales_;
  std::string description_;
};

using OptimizerPtr = std::unique_ptr<Optimizer>;
using OptimizerFactory = std::function<OptimizerPtr(std::vector<ParamGroup>, const OptimizerArgs&)>;

// timm's param_groups_weight_decay: groups [no-decay (wd 0), decay (wd)], each
// only if non-empty; all in the no-decay group when weight_decay is 0.
// A parameter is no-decay if it is 1-D or smaller, its name ends in ".bias",
// or it matches a pattern of `no_weight_decay`.
std::vector<ParamGroup> param_groups_weight_decay(const torch::nn::Module& model, double weight_decay,
                                                  const std::vector<std::string>& no_weight_decay);

// Creates the optimizer named args.opt for `model` with timm's groups.
OptimizerPtr create_optimizer(const torch::nn::Module& model, const std::vector<std::string>& no_weight_decay,
                              const OptimizerArgs& args);

}  // namespace timm
