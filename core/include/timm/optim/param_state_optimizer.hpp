// A building block for optimizer plugins that implement their own step():
// timm's parameter groups with their hyper-parameters, and per-parameter
// state as named tensors (torch's optimizer.state[p]), saved and loaded
// generically so that a resumed run continues exactly.
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "timm/core/python_repr.hpp"
#include "timm/optim/optimizer.hpp"

namespace timm {

class ParamStateOptimizer : public Optimizer {
 public:
  // State keys are timm's (torch's state[p] / group keys); scalars such as
  // step counts are 0-dim tensors.
  using State = std::map<std::string, at::Tensor>;

  struct Group {
    std::vector<std::string> names;
    std::vector<at::Tensor> params;
    std::vector<State> states;  // one per parameter, empty until its first step
    State state;                // group-level state (LAMB's step)
    double lr = 0.0;
    double weight_decay = 0.0;
    double lr_scale = 1.0;
  };

  // Each group gets `lr` and its own weight decay, as torch merges a group
  // dict over the defaults.
  ParamStateOptimizer(std::vector<ParamGroup> groups, double lr, std::string description);

  void zero_grad() override;
  std::size_t num_groups() const override { return groups_.size(); }
  double lr(std::size_t group) const override;
  void set_lr(std::size_t group, double lr) override;
  double lr_scale(std::size_t group) const override;
  double weight_decay(std::size_t group) const override;
  void save(torch::serialize::OutputArchive& archive) const override;
  void load(torch::serialize::InputArchive& archive) override;
  std::string describe() const override { return description_; }

  const std::vector<Group>& groups() const { return groups_; }

 protected:
  // The parameters of a group that have a gradient (timm skips the others),
  // with their state.
  struct Active {
    std::vector<at::Tensor> params;
    std::vector<at::Tensor> grads;
    std::vector<State*> states;
    bool empty() const { return params.empty(); }
  };
  Active active(Group& group);

  // `a` split into runs of consecutive tensors of at most `max_numel`
  // elements in all (a larger tensor alone), so that the foreach ops'
  // temporaries stay small and cache-resident on the CPU, as timm chunks its
  // foreach steps on CUDA.
  static std::vector<Active> chunks(const Active& a, int64_t max_numel = int64_t{1} << 20);

  std::vector<Group>& mutable_groups() { return groups_; }

 private:
  std::vector<Group> groups_;
  std::string description_;
};

// The values of `key` in each state of `active`, for the foreach ops.
std::vector<at::Tensor> state_list(const std::vector<ParamStateOptimizer::State*>& states, const std::string& key);

// 'Cautious Optimizers' (arXiv 2411.16085) as timm: each update times the
// mask (update * grad > 0), the mask divided by max(mean(mask), 1e-3).
std::vector<at::Tensor> cautious(const std::vector<at::Tensor>& updates, const std::vector<at::Tensor>& grads);

// Python's repr of the betas timm passes on: --opt-betas is a list
// ("[0.9, 0.99]"), --opt-kwargs betas as written ("(0.9, 0.99)" or a list),
// else the optimizer's default tuple `fallback`.
std::string betas_repr(const OptimizerArgs& args, const OptimizerKwargs& kwargs, const std::vector<double>& fallback);


}  // namespace timm
