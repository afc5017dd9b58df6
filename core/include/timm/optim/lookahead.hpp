// timm's Lookahead (timm/optim/lookahead.py): wraps any optimizer; every k
// steps of a group, its slow weights move alpha of the way to the fast ones
// and the fast weights are reset to them. create_optimizer() builds it for
// "lookahead_<opt>".
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "timm/optim/optimizer.hpp"

namespace timm {

class Lookahead : public Optimizer {
 public:
  // `group_params` are the parameters of the base optimizer's groups, in
  // order. Throws UsageError for alpha outside [0, 1] or k < 1, as timm.
  Lookahead(OptimizerPtr base, std::vector<std::vector<at::Tensor>> group_params, double alpha = 0.5, int64_t k = 6);

  void step() override;
  void zero_grad() override { base_->zero_grad(); }
  std::size_t num_groups() const override { return base_->num_groups(); }
  double lr(std::size_t group) const override { return base_->lr(group); }
  void set_lr(std::size_t group, double lr) override { base_->set_lr(group, lr); }
  double lr_scale(std::size_t group) const override { return base_->lr_scale(group); }
  double weight_decay(std::size_t group) const override { return base_->weight_decay(group); }
  bool is_second_order() const override { return base_->is_second_order(); }
  // The base optimizer's state plus the lookahead steps and slow weights; an
  // archive without them (a base optimizer's) loads as timm's does.
  void save(torch::serialize::OutputArchive& archive) const override;
  void load(torch::serialize::InputArchive& archive) override;
  // "Lookahead (<opt>) optimizer: <base defaults>, lookahead_alpha: 0.5, ...".
  std::string describe() const override;

  const Optimizer& base() const { return *base_; }
  // timm's lookahead_slow_buff of a parameter; undefined before its first sync.
  const at::Tensor& slow_weights(std::size_t group, std::size_t index) const { return slow_.at(group).at(index); }
  int64_t lookahead_step(std::size_t group) const { return steps_.at(group); }

 private:
  void update_slow(std::size_t group);

  OptimizerPtr base_;
  std::vector<std::vector<at::Tensor>> params_;
  std::vector<std::vector<at::Tensor>> slow_;
  std::vector<int64_t> steps_;
  double alpha_;
  int64_t k_;
};

}  // namespace timm
