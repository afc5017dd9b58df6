// --layer-decay against timm on resnet18: group_parameters (each parameter's
// layer id from ResNet's group_matcher), param_groups_layer_decay (groups in
// order, names, lr_scale, weight decay) and the lr each group gets from
// create_optimizer + a scheduler (lr x lr_scale). Optimizer steps with
// layer-decay groups are checked in each optimizer plugin's parity test.
#include <doctest/doctest.h>

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "test_support.hpp"
#include "timm/base/error.hpp"
#include "timm/models/model.hpp"
#include "timm/optim/optimizer.hpp"
#include "timm/optim/param_groups.hpp"
#include "timm/sched/scheduler.hpp"

namespace test_layer_decay {

namespace {

struct LayerDecayCase {
  double weight_decay;
  double layer_decay;
  double min_scale;
};

nlohmann::json timm_layer_groups(const LayerDecayCase& c) {
  return nlohmann::json::parse(timm::test::run_oracle(
      "optim_oracle.py", {"layer_groups", "resnet18", timm::python_float_repr(c.weight_decay),
                          timm::python_float_repr(c.layer_decay), timm::python_float_repr(c.min_scale)}));
}

timm::ModelPtr resnet18() {
  timm::test::load_builtin_plugins();
  return timm::create_model("resnet18", timm::ModelArgs{});
}

void check_against_timm(const LayerDecayCase& c) {
  const nlohmann::json want = timm_layer_groups(c);
  timm::ModelPtr model = resnet18();
  const timm::GroupMatcher matcher = model->group_matcher(/*coarse=*/false);

  const std::map<std::string, int64_t> layers = timm::group_parameters(*model, matcher);
  CHECK(layers == want.at("layers").get<std::map<std::string, int64_t>>());

  const auto groups = timm::param_groups_layer_decay(*model, matcher, model->no_weight_decay(),
                                                     {c.weight_decay, c.layer_decay, c.min_scale, std::nullopt});
  const nlohmann::json& want_groups = want.at("groups");
  REQUIRE(groups.size() == want_groups.size());
  for (std::size_t g = 0; g < groups.size(); ++g) {
    CAPTURE(g);
    CHECK(groups[g].names == want_groups[g].at("names").get<std::vector<std::string>>());
    CHECK(groups[g].lr_scale == want_groups[g].at("lr_scale").get<double>());
    CHECK(groups[g].weight_decay == want_groups[g].at("weight_decay").get<double>());
  }

  // The lr of each group as the scheduler sets it: initial lr x lr_scale.
  timm::OptimizerArgs args;
  args.opt = "adamw";
  args.lr = 0.1;
  args.weight_decay = c.weight_decay;
  args.layer_decay = c.layer_decay;
  args.layer_decay_min_scale = c.min_scale;
  timm::OptimizerPtr optimizer = timm::create_optimizer(*model, "resnet18", args);
  REQUIRE(optimizer->num_groups() == groups.size());
  timm::SchedulerArgs sched;
  sched.sched = "cosine";
  sched.num_epochs = 10;
  sched.warmup_epochs = 2;
  sched.warmup_lr = 1e-5;
  sched.min_lr = 0.0;
  timm::SchedulerPtr scheduler = timm::create_scheduler(*optimizer, sched);
  const auto lrs = want.at("lrs").get<std::vector<std::vector<double>>>();
  for (std::size_t e = 0; e < lrs.size(); ++e) {
    CAPTURE(e);
    if (e > 0) scheduler->step(static_cast<int64_t>(e));
    REQUIRE(lrs[e].size() == optimizer->num_groups());
    for (std::size_t g = 0; g < lrs[e].size(); ++g)
      CHECK(optimizer->lr(g) == doctest::Approx(lrs[e][g]).epsilon(1e-12));
  }
}

}  // namespace

TEST_CASE("resnet18 layer-decay groups match timm") {
  check_against_timm({0.05, 0.7, 0.0});
  check_against_timm({1e-4, 0.85, 0.3});
}

TEST_CASE("layer decay without a group_matcher is a usage error naming the model") {
  timm::test::load_builtin_plugins();
  torch::nn::Module plain;
  plain.register_parameter("w", at::zeros({2, 2}));
  timm::OptimizerArgs args;
  args.opt = "adamw";
  args.layer_decay = 0.7;
  CHECK_THROWS_WITH_AS(timm::create_optimizer(plain, {}, args, {}, "plainnet"),
                       doctest::Contains("--layer-decay: model 'plainnet' has no group_matcher()"), timm::UsageError);
}

TEST_CASE("layer_decay_no_opt_scale freezes the layers scaled below it, as timm") {
  timm::ModelPtr model = resnet18();
  const timm::GroupMatcher matcher = model->group_matcher(false);
  const std::map<std::string, int64_t> layers = timm::group_parameters(*model, matcher);
  // 10 layers (stem, 8 blocks, fc); 0.5^k < 0.1 for k >= 4: layers 0..5 frozen.
  const auto groups = timm::param_groups_layer_decay(*model, matcher, {}, {0.05, 0.5, 0.0, 0.1});
  for (const auto& group : groups) CHECK(group.lr_scale >= 0.1);
  for (const auto& item : model->named_parameters()) {
    CAPTURE(item.key());
    CHECK(item.value().requires_grad() == (layers.at(item.key()) >= 6));
  }
}

}  // namespace test_layer_decay
