// The SDK's shared layers: DropPath, SelectAdaptivePool2d, create_classifier,
// activations. Expected values are timm's definitions written out by hand.
#include <cmath>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <torch/nn/modules/linear.h>

#include "timm/base/error.hpp"
#include "timm/layers/activations.hpp"
#include "timm/layers/classifier.hpp"
#include "timm/layers/drop_path.hpp"

// Last: c10/util/Logging.h defines a CHECK macro that doctest must override.
#include <doctest/doctest.h>

namespace test_layers {

namespace layers = timm::layers;

TEST_CASE("drop_path is the identity in eval mode or at rate 0") {
  const at::Tensor x = at::randn({4, 3, 2, 2});
  CHECK(layers::drop_path(x, 0.5, /*training=*/false).is_same(x));
  CHECK(layers::drop_path(x, 0.0, /*training=*/true).is_same(x));
  layers::DropPath module(0.3);
  module->eval();
  CHECK(module(x).is_same(x));
}

TEST_CASE("drop_path keeps or drops whole samples, scaled by 1 / keep") {
  at::manual_seed(0);
  const at::Tensor x = at::ones({2000, 3, 2});
  const at::Tensor y = layers::drop_path(x, 0.25, /*training=*/true);
  const at::Tensor per_sample = y.reshape({2000, -1});
  // Each sample is all 0 or all 1/0.75.
  CHECK(at::equal(per_sample.amin(1), per_sample.amax(1)));
  const at::Tensor kept = per_sample.select(1, 0) > 0;
  CHECK(at::allclose(per_sample.index({kept}), at::full({1}, 1.0 / 0.75)));
  const double keep_fraction = kept.to(at::kDouble).mean().item<double>();
  CHECK(keep_fraction == doctest::Approx(0.75).epsilon(0.05));

  const at::Tensor unscaled = layers::drop_path(x, 0.25, true, /*scale_by_keep=*/false);
  CHECK(unscaled.max().item<double>() == 1.0);
  CHECK(layers::drop_path(x, 1.0, true).abs().max().item<double>() == 0.0);
}

TEST_CASE("drop_path_rates is timm's float32 linspace") {
  const auto rates = layers::drop_path_rates(0.1, 5);
  REQUIRE(rates.size() == 5);
  CHECK(rates[0] == 0.0);
  CHECK(rates[2] == static_cast<double>(0.05f));
  CHECK(rates[4] == static_cast<double>(0.1f));
  CHECK(layers::drop_path_rates(0.1, 1) == std::vector<double>{0.0});
  CHECK(layers::drop_path_rates(0.1, 0).empty());
  CHECK_THROWS_AS(layers::DropPath(1.5), timm::UsageError);
}

TEST_CASE("SelectAdaptivePool2d pools as timm for every pool type") {
  const at::Tensor x = at::randn({2, 3, 5, 4});
  const at::Tensor avg = x.mean({2, 3});
  const at::Tensor max = x.amax({2, 3});
  auto pool = [&](const std::string& type, bool flatten = true) {
    return layers::SelectAdaptivePool2d(layers::SelectAdaptivePool2dOptions(type).flatten(flatten))(x);
  };
  CHECK(at::allclose(pool("avg"), avg));
  CHECK(at::allclose(pool("max"), max));
  CHECK(at::allclose(pool("avgmax"), 0.5 * (avg + max)));
  CHECK(at::allclose(pool("catavgmax"), at::cat({avg, max}, 1)));
  CHECK(at::allclose(pool("fast"), avg));
  CHECK(at::allclose(pool("fastavgmax"), 0.5 * avg + 0.5 * max));
  CHECK(at::allclose(pool("fastcatavgmax"), at::cat({avg, max}, 1)));
  CHECK((pool("avg", /*flatten=*/false).sizes() == at::IntArrayRef{2, 3, 1, 1}));
  CHECK(pool("", /*flatten=*/false).is_same(x));
  CHECK((pool("", /*flatten=*/true).sizes() == at::IntArrayRef{2, 60}));
  CHECK(layers::adaptive_pool_feat_mult("catavgmax") == 2);
  CHECK(layers::adaptive_pool_feat_mult("avgmax") == 1);
  CHECK_THROWS_WITH_AS(pool("median"), doctest::Contains("global_pool 'median'"), timm::UsageError);
}

TEST_CASE("create_classifier gives timm's pool + fc") {
  auto head = layers::create_classifier(8, 5, "catavgmax");
  CHECK(head.num_pooled_features == 16);
  auto* linear = head.fc.ptr()->as<torch::nn::Linear>();
  REQUIRE(linear != nullptr);
  CHECK((linear->weight.sizes() == at::IntArrayRef{5, 16}));
  const at::Tensor x = at::randn({2, 8, 3, 3});
  CHECK((head.fc.forward(head.global_pool(x)).sizes() == at::IntArrayRef{2, 5}));

  auto features = layers::create_classifier(8, 0, "avg");
  CHECK(features.fc.ptr()->as<torch::nn::Identity>() != nullptr);
  CHECK((features.fc.forward(features.global_pool(x)).sizes() == at::IntArrayRef{2, 8}));

  // No pooling: no flattening either, as timm.
  auto unpooled = layers::create_classifier(8, 0, "");
  CHECK(unpooled.global_pool(x).is_same(x));
}

TEST_CASE("activations by timm's names") {
  const at::Tensor x = at::linspace(-4, 4, 17);
  auto act = [&](const std::string& name) { return layers::create_act(name)(x); };
  CHECK(at::allclose(act("relu"), x.clamp_min(0)));
  CHECK(at::allclose(act("relu6"), x.clamp(0, 6)));
  CHECK(at::allclose(act("silu"), x * at::sigmoid(x)));
  CHECK(at::allclose(act("swish"), x * at::sigmoid(x)));
  CHECK(at::allclose(act("hard_swish"), x * (x + 3).clamp(0, 6) / 6));
  CHECK(at::allclose(act("hard_sigmoid"), (x + 3).clamp(0, 6) / 6));
  CHECK(at::allclose(act("gelu"), 0.5 * x * (1 + at::erf(x / std::sqrt(2.0))), 1e-5, 1e-6));
  CHECK(act("identity").is_same(x));
  for (const auto& name : layers::activation_names()) CHECK((act(name).sizes() == x.sizes()));
  CHECK_THROWS_WITH_AS(layers::create_act("swishy"), doctest::Contains("activation 'swishy'"), timm::UsageError);
}

}  // namespace test_layers
