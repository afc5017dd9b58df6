// RegNet plugin against timm (tests/oracle/regnet_oracle.py) through the
// shared harness (tests/support/model_parity.hpp), both ways: timm's weights
// load here and give timm's logits, eval forward_features / forward_head /
// pre-logits outputs, gradients and BN statistics; our weights load in timm
// and give our logits. Tolerance for every float comparison:
// |ours - timm| <= 1e-4 + 1e-4 * |timm|.
//
// The parity cases (smallest and largest RegNetX and RegNetY) run on one
// thread, as the oracle does: train-mode gradients through BatchNorm over few
// values per channel (8 in stage 4 at 64 px, batch 2) are ill-conditioned and
// depend on the summation order.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <nlohmann/json.hpp>

#include "model_parity.hpp"
#include "test_support.hpp"
#include "timm/base/error.hpp"
#include "timm/layers/drop_path.hpp"
#include "timm/models/model.hpp"
#include "timm/models/state_dict.hpp"
#include "timm/plugin/registry.hpp"

// Last: c10/util/Logging.h defines a CHECK macro that doctest must override.
#include <doctest/doctest.h>

namespace test_regnet {

namespace {

using timm::test::make_model;
using timm::test::ParityCase;

constexpr int64_t kNumClasses = timm::test::kParityNumClasses;

// Smallest and largest of each family; one with a single input channel. 64x64 inputs, batch 2.
const std::vector<ParityCase> kCases = {
    {"regnetx_002", "regnetx_002", 3, 64, 2},
    {"regnety_002_c1", "regnety_002", 1, 64, 2},
    {"regnetx_320", "regnetx_320", 3, 64, 2},
    {"regnety_320", "regnety_320", 3, 64, 2},
};

// Every name registered here (timm 1.0.31's regnet[xy]_* but regnety_040_sgn,
// regnety_640, regnety_1280 and regnety_2560).
const std::vector<std::string> kNames = {
    "regnetx_002", "regnetx_004", "regnetx_004_tv", "regnetx_006",    "regnetx_008", "regnetx_016", "regnetx_032",
    "regnetx_040", "regnetx_064", "regnetx_080",    "regnetx_120",    "regnetx_160", "regnetx_320", "regnety_002",
    "regnety_004", "regnety_006", "regnety_008",    "regnety_008_tv", "regnety_016", "regnety_032", "regnety_040",
    "regnety_064", "regnety_080", "regnety_080_tv", "regnety_120",    "regnety_160", "regnety_320"};
const std::vector<std::string> kNotRegistered = {"regnety_040_sgn", "regnety_640", "regnety_1280", "regnety_2560"};

// The drop_prob of each block's drop_path (0 where it has none), in block order.
std::vector<double> block_drop_path_rates(const torch::nn::Module& model) {
  std::vector<double> rates;
  for (const auto* stage : {"s1", "s2", "s3", "s4"}) {
    for (const auto& block : model.named_children()[stage]->children()) {
      rates.push_back(timm::test::drop_prob(*block, "drop_path"));
    }
  }
  return rates;
}

// timm's rates come from a float32 linspace.
const timm::test::ParityOptions kParity = {
    .tol = {1e-4, 1e-4},
    .block_rates = block_drop_path_rates,
    .rates_epsilon = 1e-6,
    .after_buffers = {"stem.bn.running_mean", "stem.bn.running_var", "stem.bn.num_batches_tracked"},
};

}  // namespace

TEST_CASE("every registered regnet has timm's state_dict keys, shapes, parameter count and pretrained_cfg") {
  // Also dtypes, no_weight_decay, group_matcher and drop-path rates.
  const auto info = timm::test::check_registered("regnet_oracle.py", kNames, {"regnet[xy]_*"}, kParity);
  // Ours are timm's regnet[xy]_* less the documented exceptions, in timm's order.
  std::vector<std::string> expected_names;
  for (const auto& name : info.at("list").at("regnet[xy]_*").get<std::vector<std::string>>()) {
    if (std::find(kNotRegistered.begin(), kNotRegistered.end(), name) == kNotRegistered.end()) {
      expected_names.push_back(name);
    }
  }
  CHECK(timm::Registry::global().list(timm::PluginKind::kModel, "regnet[xy]_*") == expected_names);
  CHECK(expected_names == kNames);
}

TEST_CASE("regnet matches timm both ways: logits, train-mode gradients, weights (smallest and largest X and Y)") {
  timm::test::run_parity("regnet_oracle.py", kCases, kParity);
}

TEST_CASE("regnet forward_head without a classifier is the pre-logits features (RegNetX, RegNetY)") {
  timm::test::check_head_split("regnetx_002", 64);
  timm::test::check_head_split("regnety_002", 64);
}

TEST_CASE("regnet init follows timm: conv normal(0, sqrt(2 / fan_out)), zero biases, fc std 0.01, last BN zero") {
  at::manual_seed(0);
  timm::ModelPtr model = make_model("regnety_016");
  const auto params = model->named_parameters();
  // s3.b2.conv2: 336 x 14 x 3 x 3 (group width 24): fan_out = 9 * 336 / 14.
  const at::Tensor w = params["s3.b2.conv2.conv.weight"];
  const double expected_std = std::sqrt(2.0 / (9.0 * w.size(0) / (w.size(0) / w.size(1))));
  CHECK(w.std().item<double>() == doctest::Approx(expected_std).epsilon(0.02));
  CHECK(params["s3.b2.se.fc1.bias"].abs().max().item<double>() == 0.0);
  CHECK(params["s3.b2.conv3.bn.weight"].abs().max().item<double>() == 0.0);
  CHECK(params["s3.b2.conv2.bn.weight"].min().item<double>() == 1.0);
  CHECK(params["head.fc.weight"].std().item<double>() == doctest::Approx(0.01).epsilon(0.05));
  CHECK(params["head.fc.bias"].abs().max().item<double>() == 0.0);
  // Groups: bottleneck width / group width.
  CHECK(w.size(1) == 24);
}

TEST_CASE("regnet head options, group_matcher and bad input") {
  c10::NoGradGuard no_grad;
  const at::Tensor x = at::randn({2, 3, 64, 64});
  timm::ModelPtr features = make_model("regnetx_002", 3, 0);
  features->eval();
  CHECK((features->forward(x).sizes() == at::IntArrayRef{2, 368}));

  timm::ModelArgs args;
  args.num_classes = kNumClasses;
  args.global_pool = "catavgmax";
  timm::ModelPtr cat = timm::create_model("regnetx_002", args);
  CHECK((cat->named_parameters()["head.fc.weight"].sizes() == at::IntArrayRef{kNumClasses, 736}));

  const auto matcher = cat->group_matcher(false);
  REQUIRE(matcher.size() == 2);
  CHECK(matcher[0].first == "stem");
  CHECK(matcher[1].second[0].pattern == R"(^s(\d+)\.b(\d+))");
  CHECK(cat->group_matcher(true)[1].second[0].pattern == R"(^s(\d+))");

  args.kwargs["output_stride"] = "16";
  CHECK_THROWS_AS(timm::create_model("regnetx_002", args), timm::UsageError);
  args.kwargs.clear();
  args.drop_path_rate = 1.5;
  CHECK_THROWS_AS(timm::create_model("regnetx_002", args), timm::UsageError);
}

TEST_CASE("regnet --grad-checkpointing: each block of s1..s4 checkpointed, the plain step's gradients") {
  timm::test::check_grad_checkpointing("regnetx_002", 32, 32);
}

}  // namespace test_regnet
