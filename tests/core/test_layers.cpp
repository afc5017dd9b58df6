// The SDK's shared layers: DropPath, SelectAdaptivePool2d, create_classifier,
// activations, 'SAME' padding (Conv2dSame), MixedConv2d, GlobalResponseNorm and
// GlobalResponseNormMlp. Expected values are timm's
// definitions written out by hand (the padding sizes as timm 1.0.31's
// get_same_padding / is_static_pad give them).
#include <cmath>
#include <memory>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>

#include "timm/base/error.hpp"
#include "timm/layers/activations.hpp"
#include "timm/layers/classifier.hpp"
#include "timm/layers/conv2d_same.hpp"
#include "timm/layers/drop_path.hpp"
#include "timm/layers/grn.hpp"
#include "timm/layers/mixed_conv2d.hpp"
#include "timm/layers/mlp.hpp"

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

TEST_CASE("an in-place activation writes into its input, with the out-of-place values and gradients") {
  // timm's GELUs take inplace and ignore it; identity returns its input either way.
  const std::set<std::string> allocates = {"gelu", "gelu_tanh", "quick_gelu"};
  for (const auto& name : layers::activation_names()) {
    CAPTURE(name);
    const at::Tensor x = at::linspace(-4, 4, 17, at::dtype(at::kDouble)).requires_grad_(true);
    const at::Tensor expected = layers::create_act(name)(x * 1.5);
    const at::Tensor expected_grad = torch::autograd::grad({expected.sum()}, {x}).at(0);
    const at::Tensor scaled = x * 1.5;  // a fresh tensor, as a batch norm's output is
    const at::Tensor y = layers::create_act(name, /*inplace=*/true)(scaled);
    CHECK(at::allclose(y, expected));
    CHECK(y.is_same(scaled) == (allocates.count(name) == 0));
    CHECK(at::allclose(torch::autograd::grad({y.sum()}, {x}).at(0), expected_grad));
  }
}

TEST_CASE("'SAME' padding sizes are timm's get_same_padding / is_static_pad") {
  // (size, kernel, stride, dilation) -> timm's total padding.
  CHECK(layers::get_same_padding(64, 3, 2, 1) == 1);
  CHECK(layers::get_same_padding(65, 3, 2, 1) == 2);
  CHECK(layers::get_same_padding(32, 5, 2, 1) == 3);
  CHECK(layers::get_same_padding(17, 5, 2, 1) == 4);
  CHECK(layers::get_same_padding(7, 3, 1, 1) == 2);
  CHECK(layers::get_same_padding(7, 4, 1, 1) == 3);
  CHECK(layers::get_same_padding(10, 3, 2, 2) == 3);
  CHECK(layers::get_same_padding(1, 5, 2, 1) == 4);
  CHECK(layers::get_same_padding(224, 3, 2, 1) == 1);
  CHECK(layers::is_static_pad(3, 1, 1));
  CHECK_FALSE(layers::is_static_pad(3, 2, 1));
  CHECK_FALSE(layers::is_static_pad(4, 1, 1));
  CHECK(layers::is_static_pad(3, 1, 2));
  CHECK(layers::is_static_pad(2, 1, 2));
  // Smaller half first: left / top get total / 2.
  const at::Tensor x = at::ones({1, 1, 64, 65});
  const at::Tensor padded = layers::pad_same(x, {3, 3}, {2, 2}, {1, 1}, -1.0);
  CHECK((padded.sizes() == at::IntArrayRef{1, 1, 65, 67}));
  CHECK(padded[0][0][0][1].item<double>() == 1.0);    // no top padding (total 1)
  CHECK(padded[0][0][64][1].item<double>() == -1.0);  // bottom padding
  CHECK(padded[0][0][1][0].item<double>() == -1.0);   // left padding (total 2)
  CHECK(padded[0][0][1][66].item<double>() == -1.0);  // right padding
}

TEST_CASE("create_conv2d_pad: 'same' is a padded Conv2d when static, else a Conv2dSame that pads each input") {
  at::manual_seed(0);
  c10::NoGradGuard no_grad;
  const at::Tensor x = at::randn({2, 4, 10, 11});
  layers::Conv2dArgs strided;
  strided.stride = 2;
  strided.bias = true;
  torch::nn::AnyModule dynamic = layers::create_conv2d_pad(4, 6, 3, strided, "same");
  auto* same = dynamic.ptr()->as<layers::Conv2dSame>();
  REQUIRE(same != nullptr);
  // A Conv2d to code that visits modules (weight init), with Conv2d's keys and no padding of its own.
  REQUIRE(dynamic.ptr()->as<torch::nn::Conv2d>() != nullptr);
  CHECK(dynamic.ptr()->named_parameters().keys() == std::vector<std::string>{"weight", "bias"});
  const auto& own_padding = std::get<torch::ExpandingArray<2>>(same->options.padding());
  CHECK(((*own_padding)[0] == 0 && (*own_padding)[1] == 0));
  // H 10: total 1 -> (0, 1); W 11: total 2 -> (1, 1).
  const at::Tensor expected = at::conv2d(at::constant_pad_nd(x, {1, 1, 0, 1}), same->weight, same->bias,
                                         at::IntArrayRef{2, 2}, at::IntArrayRef{0, 0}, at::IntArrayRef{1, 1}, 1);
  const at::Tensor y = dynamic.forward(x);
  CHECK((y.sizes() == at::IntArrayRef{2, 6, 5, 6}));
  CHECK(at::equal(y, expected));
  // A clone is a Conv2dSame with copies of the weights.
  const auto copy = std::dynamic_pointer_cast<layers::Conv2dSameImpl>(same->clone());
  REQUIRE(copy != nullptr);
  CHECK(at::equal(copy->forward(x), expected));
  CHECK_FALSE(copy->weight.is_same(same->weight));

  // An even kernel at stride 1 is dynamic too; torch's own padding="same" puts the extra pixel last, as TF.
  torch::nn::AnyModule even = layers::create_conv2d_pad(4, 4, 4, layers::Conv2dArgs{}, "SAME");
  auto* even_same = even.ptr()->as<layers::Conv2dSame>();
  REQUIRE(even_same != nullptr);
  CHECK(at::allclose(even.forward(x), at::conv2d(x, even_same->weight, {}, 1, "same"), 1e-5, 1e-6));

  // Stride 1 with an odd kernel: a plain Conv2d with get_padding's padding; 'valid' has none; '' is create_conv2d.
  layers::Conv2dArgs depthwise;
  depthwise.depthwise = true;
  torch::nn::AnyModule fixed = layers::create_conv2d_pad(4, 4, 5, depthwise, "same");
  CHECK(fixed.ptr()->as<layers::Conv2dSame>() == nullptr);
  auto* fixed_conv = fixed.ptr()->as<torch::nn::Conv2d>();
  REQUIRE(fixed_conv != nullptr);
  CHECK(fixed_conv->options.groups() == 4);
  CHECK(at::allclose(fixed.forward(x), at::conv2d(x, fixed_conv->weight, {}, 1, "same", 1, 4), 1e-5, 1e-6));
  torch::nn::AnyModule valid = layers::create_conv2d_pad(4, 4, 3, layers::Conv2dArgs{}, "valid");
  CHECK((valid.forward(x).sizes() == at::IntArrayRef{2, 4, 8, 9}));
  torch::nn::AnyModule symmetric = layers::create_conv2d_pad(4, 4, 3, strided, "");
  CHECK(symmetric.ptr()->as<layers::Conv2dSame>() == nullptr);
  CHECK((symmetric.forward(x).sizes() == at::IntArrayRef{2, 4, 5, 6}));

  CHECK_THROWS_WITH_AS(layers::create_conv2d_pad(4, 4, 3, strided, "circular"), doctest::Contains("'circular'"),
                       timm::UsageError);
  CHECK_THROWS_AS(layers::create_conv2d_pad(4, 6, 3, depthwise, "same"), timm::UsageError);
}

TEST_CASE("MixedConv2d: timm's channel splits, one sub-conv per kernel size keyed 0, 1, ..., 'same' per group") {
  at::manual_seed(0);
  c10::NoGradGuard no_grad;
  // _split_channels: equal parts, the remainder to the first.
  CHECK(layers::split_channels(10, 3) == std::vector<int64_t>{4, 3, 3});
  CHECK(layers::split_channels(40, 2) == std::vector<int64_t>{20, 20});

  // Depthwise k3.5.7 with stride 2 and 'same' padding: every group a Conv2dSame grouped by its channels.
  layers::Conv2dArgs depthwise;
  depthwise.stride = 2;
  depthwise.groups = 10;  // = in_channels: timm's create_conv2d makes it depthwise
  torch::nn::AnyModule mixed = layers::create_mixed_conv2d(10, 10, {3, 5, 7}, depthwise, "same");
  auto* conv = mixed.ptr()->as<layers::MixedConv2d>();
  REQUIRE(conv != nullptr);
  CHECK(conv->named_parameters().keys() == std::vector<std::string>{"0.weight", "1.weight", "2.weight"});
  const auto params = conv->named_parameters();
  CHECK((params["0.weight"].sizes() == at::IntArrayRef{4, 1, 3, 3}));
  CHECK((params["2.weight"].sizes() == at::IntArrayRef{3, 1, 7, 7}));
  const at::Tensor x = at::randn({2, 10, 12, 13});
  const at::Tensor y = mixed.forward(x);
  CHECK((y.sizes() == at::IntArrayRef{2, 10, 6, 7}));
  // The third group (channels 7..9): its own conv over its own channels, 'SAME' padded.
  const at::Tensor third =
      layers::conv2d_same(x.slice(1, 7, 10), params["2.weight"], {}, at::IntArrayRef{2, 2}, at::IntArrayRef{1, 1}, 3);
  CHECK(at::allclose(y.slice(1, 7, 10), third, 1e-5, 1e-6));

  // Dense grouped pointwise (timm's a1.1): two 1x1 convs over 20 -> 60 channels, (10 -> 30) each.
  torch::nn::AnyModule pointwise = layers::create_mixed_conv2d(20, 60, {1, 1}, layers::Conv2dArgs{}, "");
  const auto pw = pointwise.ptr()->named_parameters();
  CHECK((pw["1.weight"].sizes() == at::IntArrayRef{30, 10, 1, 1}));
  const at::Tensor x20 = at::randn({2, 20, 5, 5});
  const at::Tensor expected =
      at::cat({at::conv2d(x20.slice(1, 0, 10), pw["0.weight"]), at::conv2d(x20.slice(1, 10, 20), pw["1.weight"])}, 1);
  CHECK(at::allclose(pointwise.forward(x20), expected, 1e-5, 1e-6));

  // One kernel size is timm's int kernel: a plain conv; a clone keeps the groups' types and copies the weights.
  CHECK(layers::create_mixed_conv2d(4, 4, {3}, layers::Conv2dArgs{}, "").ptr()->as<torch::nn::Conv2d>() != nullptr);
  const auto copy = std::dynamic_pointer_cast<layers::MixedConv2dImpl>(conv->clone());
  REQUIRE(copy != nullptr);
  CHECK(copy->named_children()["0"]->as<layers::Conv2dSame>() != nullptr);
  CHECK(at::equal(copy->forward(x), y));
  CHECK_FALSE(copy->named_parameters()["0.weight"].is_same(params["0.weight"]));

  layers::Conv2dArgs grouped;
  grouped.groups = 2;
  CHECK_THROWS_WITH_AS(layers::create_mixed_conv2d(8, 8, {3, 5}, grouped, ""), doctest::Contains("groups 2"),
                       timm::UsageError);
  CHECK_THROWS_AS(layers::create_mixed_conv2d(2, 8, {3, 5, 7}, layers::Conv2dArgs{}, ""), timm::UsageError);
  CHECK_THROWS_AS(layers::create_mixed_conv2d(8, 8, {3, 5}, layers::Conv2dArgs{}, "circular"), timm::UsageError);
}

namespace {

// timm's GlobalResponseNorm written out for NCHW: per-channel L2 norm over
// H, W; divided by its channel mean + eps; x + bias + weight * x * that.
at::Tensor grn_reference(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias, double eps) {
  const at::Tensor x_g = x.pow(2).sum({2, 3}, /*keepdim=*/true).sqrt();
  const at::Tensor x_n = x_g / (x_g.mean(1, /*keepdim=*/true) + eps);
  return x + bias.view({1, -1, 1, 1}) + weight.view({1, -1, 1, 1}) * x * x_n;
}

}  // namespace

TEST_CASE("GlobalResponseNorm: timm's keys and zero init, NCHW and channels-last outputs, gradients") {
  layers::GlobalResponseNorm nchw(layers::GlobalResponseNormOptions(6).channels_last(false));
  CHECK(nchw->named_parameters().keys() == std::vector<std::string>{"weight", "bias"});
  CHECK((nchw->weight.sizes() == at::IntArrayRef{6}));
  CHECK(nchw->weight.abs().max().item<double>() == 0.0);
  CHECK(nchw->bias.abs().max().item<double>() == 0.0);
  const at::Tensor x = at::randn({2, 6, 5, 4});
  CHECK(at::equal(nchw(x), x));  // zero weight and bias: the identity

  {
    c10::NoGradGuard no_grad;
    nchw->weight.copy_(at::randn({6}));
    nchw->bias.copy_(at::randn({6}) * 0.1);
  }
  const at::Tensor expected = grn_reference(x, nchw->weight, nchw->bias, 1e-6);
  CHECK(at::allclose(nchw(x), expected, 1e-5, 1e-6));

  // Channels last (the default, as timm's): the same values on (N, H, W, C).
  layers::GlobalResponseNorm last(6);
  {
    c10::NoGradGuard no_grad;
    last->weight.copy_(nchw->weight);
    last->bias.copy_(nchw->bias);
  }
  CHECK(at::allclose(last(x.permute({0, 2, 3, 1})).permute({0, 3, 1, 2}), expected, 1e-5, 1e-6));

  // Gradients through the norm equal those of the written-out form.
  const at::Tensor xa = x.clone().requires_grad_(true);
  const at::Tensor xb = x.clone().requires_grad_(true);
  nchw(xa).square().sum().backward();
  const at::Tensor w = nchw->weight.detach().clone().requires_grad_(true);
  grn_reference(xb, w, nchw->bias.detach(), 1e-6).square().sum().backward();
  CHECK(at::allclose(xa.grad(), xb.grad(), 1e-4, 1e-5));
  CHECK(at::allclose(nchw->weight.grad(), w.grad(), 1e-4, 1e-5));

  CHECK_THROWS_AS(layers::GlobalResponseNorm(layers::GlobalResponseNormOptions(0)), timm::UsageError);
}

TEST_CASE("GlobalResponseNormMlp: timm's keys, fc1 -> gelu -> grn -> fc2, Linear or 1x1 conv") {
  layers::GlobalResponseNormMlp mlp(layers::MlpOptions(4).hidden_features(8));
  CHECK(mlp->named_parameters().keys() ==
        std::vector<std::string>{"fc1.weight", "fc1.bias", "grn.weight", "grn.bias", "fc2.weight", "fc2.bias"});
  CHECK((mlp->grn->weight.sizes() == at::IntArrayRef{8}));
  CHECK(mlp->grn->options.channels_last());
  auto params = mlp->named_parameters();
  {
    c10::NoGradGuard no_grad;
    params["grn.weight"].normal_();
    params["grn.bias"].normal_();
  }
  const at::Tensor x = at::randn({2, 3, 5, 4});  // (N, H, W, C)
  at::Tensor hidden = at::gelu(at::linear(x, params["fc1.weight"], params["fc1.bias"]));
  hidden =
      grn_reference(hidden.permute({0, 3, 1, 2}), params["grn.weight"], params["grn.bias"], 1e-6).permute({0, 2, 3, 1});
  const at::Tensor expected = at::linear(hidden, params["fc2.weight"], params["fc2.bias"]);
  CHECK(at::allclose(mlp(x), expected, 1e-5, 1e-6));

  // use_conv: 1x1 convs and an NCHW GRN, the same function on NCHW input.
  layers::GlobalResponseNormMlp conv(layers::MlpOptions(4).hidden_features(8).use_conv(true));
  CHECK_FALSE(conv->grn->options.channels_last());
  auto conv_params = conv->named_parameters();
  CHECK((conv_params["fc1.weight"].sizes() == at::IntArrayRef{8, 4, 1, 1}));
  {
    c10::NoGradGuard no_grad;
    for (const auto& key : {"fc1.weight", "fc2.weight"}) conv_params[key].copy_(params[key].view_as(conv_params[key]));
    for (const auto& key : {"fc1.bias", "grn.weight", "grn.bias", "fc2.bias"}) conv_params[key].copy_(params[key]);
  }
  CHECK(at::allclose(conv(x.permute({0, 3, 1, 2})).permute({0, 2, 3, 1}), expected, 1e-5, 1e-6));
  CHECK_THROWS_AS(layers::GlobalResponseNormMlp(layers::MlpOptions(4).drop(1.5)), timm::UsageError);
}

}  // namespace test_layers
