// --fast-norm (timm/layers/fast_norm.hpp) against timm's layers/fast_norm.py
// (tests/oracle/fast_norm_oracle.py, run at test time):
// - each norm layer built with fast norm computes, under bfloat16 autocast, in
//   bfloat16 with timm's values, and without it in float32 with timm's; outside
//   autocast the fast layer is the plain one;
// - the models: with set_fast_norm(true), the modules that follow it are
//   timm's, by qualified name (timm's own norm layers do, torch.nn's do not).
// Tolerance: float32 outputs 1e-5; bfloat16 ones one bfloat16 step (2^-7
// relative) for a reduction summed in another order.
#include <algorithm>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>
#include <c10/core/GradMode.h>
#include <torch/nn/module.h>
#include <nlohmann/json.hpp>

#include "test_support.hpp"
#include "timm/layers/fast_norm.hpp"
#include "timm/layers/norm.hpp"
#include "timm/layers/rms_norm.hpp"
#include "timm/models/model.hpp"
#include "timm/train/amp.hpp"

// Last: c10/util/Logging.h defines a CHECK macro that doctest must override.
#include <doctest/doctest.h>

namespace test_fast_norm {

namespace layers = timm::layers;

namespace {

const at::Tensor& tensor(const std::string& name) { return timm::test::oracle_tensor("fast_norm_oracle.py", name); }

// The oracle's case `name` as our layer, built with fast norm on or off.
std::shared_ptr<torch::nn::Module> build(const std::string& name, bool fast) {
  constexpr int64_t kChannels = 8;
  if (name == "layer_norm")
    return layers::LayerNorm(layers::LayerNormOptions(kChannels).eps(1e-5).fast_norm(fast)).ptr();
  if (name == "layer_norm2d") return layers::LayerNorm2d(layers::LayerNormOptions(kChannels).fast_norm(fast)).ptr();
  if (name == "group_norm")
    return layers::GroupNorm(layers::GroupNormOptions(kChannels).num_groups(4).fast_norm(fast)).ptr();
  if (name == "group_norm1")
    return layers::GroupNorm(layers::GroupNormOptions(kChannels).num_groups(1).fast_norm(fast)).ptr();
  if (name == "rms_norm") return layers::RmsNorm(layers::RmsNormOptions(kChannels).fast_norm(fast)).ptr();
  if (name == "rms_norm2d") return layers::RmsNorm2d(layers::RmsNormOptions(kChannels).fast_norm(fast)).ptr();
  if (name == "simple_norm") return layers::SimpleNorm(layers::RmsNormOptions(kChannels).fast_norm(fast)).ptr();
  REQUIRE(name == "simple_norm2d");
  return layers::SimpleNorm2d(layers::RmsNormOptions(kChannels).fast_norm(fast)).ptr();
}

at::Tensor run(torch::nn::Module& m, const at::Tensor& x) {
  if (auto* a = m.as<layers::LayerNorm>()) return a->forward(x);
  if (auto* b = m.as<layers::LayerNorm2d>()) return b->forward(x);
  if (auto* c = m.as<layers::GroupNorm>()) return c->forward(x);
  if (auto* d = m.as<layers::RmsNorm>()) return d->forward(x);
  if (auto* e = m.as<layers::RmsNorm2d>()) return e->forward(x);
  if (auto* f = m.as<layers::SimpleNorm>()) return f->forward(x);
  return m.as<layers::SimpleNorm2d>()->forward(x);
}

void load_affine(torch::nn::Module& m, const std::string& name) {
  const c10::NoGradGuard no_grad;
  for (auto& param : m.named_parameters()) param.value().copy_(tensor(name + "." + param.key()));
}

void check_output(const std::string& what, const at::Tensor& ours, const at::Tensor& expected) {
  CAPTURE(what);
  REQUIRE(timm::dtype_name(ours.scalar_type()) == timm::dtype_name(expected.scalar_type()));
  REQUIRE(ours.sizes() == expected.sizes());
  const bool low = expected.scalar_type() == at::kBFloat16;
  const at::Tensor a = ours.to(at::kDouble);
  const at::Tensor b = expected.to(at::kDouble);
  CHECK_MESSAGE(at::allclose(a, b, low ? 1.0 / 128 : 1e-5, low ? 1e-2 : 1e-5),
                "max abs diff " << (a - b).abs().max().item<double>());
}

// The qualified names of `model`'s modules that follow fast norm.
std::vector<std::string> fast_modules(torch::nn::Module& model) {
  std::vector<std::string> names;
  for (const auto& item : model.named_modules("", /*include_self=*/false)) {
    const auto* layer = dynamic_cast<const layers::FastNormLayer*>(item.value().get());
    if (layer != nullptr && layer->fast_norm()) names.push_back(item.key());
  }
  std::sort(names.begin(), names.end());
  return names;
}

// The names of `a` not in `b` (both sorted), space-separated.
std::string difference(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  std::vector<std::string> only;
  std::set_difference(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(only));
  std::string text;
  for (const auto& name : only) text += (text.empty() ? "" : " ") + name;
  return text.empty() ? "(none)" : text;
}

// Restores the process's fast-norm setting (off) however the test ends.
class FastNormSetting {
 public:
  explicit FastNormSetting(bool enable) { layers::set_fast_norm(enable); }
  ~FastNormSetting() { layers::set_fast_norm(false); }
  FastNormSetting(const FastNormSetting&) = delete;
  FastNormSetting& operator=(const FastNormSetting&) = delete;
};

}  // namespace

TEST_CASE("each fast norm layer computes in the autocast dtype with timm's values, and as before outside it") {
  const timm::test::ThreadCount threads(1);
  const c10::NoGradGuard no_grad;
  for (const std::string name : {"layer_norm", "layer_norm2d", "group_norm", "group_norm1", "rms_norm", "rms_norm2d",
                                 "simple_norm", "simple_norm2d"}) {
    CAPTURE(name);
    auto fast = build(name, true);
    auto plain = build(name, false);
    CHECK(dynamic_cast<layers::FastNormLayer&>(*fast).fast_norm());
    CHECK_FALSE(dynamic_cast<layers::FastNormLayer&>(*plain).fast_norm());
    load_affine(*fast, name);
    load_affine(*plain, name);
    const at::Tensor& x = tensor(name + ".x");
    at::Tensor fast_out, plain_out;
    {
      const timm::AutocastGuard autocast(c10::DeviceType::CPU, at::kBFloat16);
      fast_out = run(*fast, x);
      plain_out = run(*plain, x);
      // The layer leaves autocast as it found it.
      CHECK(at::autocast::is_autocast_enabled(c10::DeviceType::CPU));
    }
    check_output(name + " fast under autocast", fast_out, tensor(name + ".fast"));
    check_output(name + " plain under autocast", plain_out, tensor(name + ".plain"));
    check_output(name + " fast outside autocast", run(*fast, x), tensor(name + ".fast_fp32"));
  }
}

TEST_CASE("the options default to the process's setting when they are made, as timm's layers read it when built") {
  CHECK_FALSE(layers::is_fast_norm());
  CHECK_FALSE(layers::LayerNormOptions(4).fast_norm());
  {
    const FastNormSetting on(true);
    CHECK(layers::LayerNormOptions(4).fast_norm());
    CHECK(layers::GroupNormOptions(4).fast_norm());
    CHECK(layers::RmsNormOptions(4).fast_norm());
    CHECK_FALSE(layers::LayerNormOptions(4).fast_norm(false).fast_norm());
  }
  CHECK_FALSE(layers::GroupNormOptions(4).fast_norm());
}

TEST_CASE("a GroupNorm whose groups do not divide the channels is an error naming both") {
  CHECK_THROWS_WITH_AS(layers::GroupNorm(layers::GroupNormOptions(6).num_groups(4)),
                       "GroupNorm: num_groups must be >= 1 and divide num_channels 6, got 4", timm::UsageError);
}

// One model per family and norm layer kind; swin, swinv2_cr and mobilevit's
// v1 blocks use torch.nn's LayerNorm, which fast norm leaves alone.
TEST_CASE("--fast-norm reaches the layers of each model that it reaches in timm, by name") {
  const std::vector<std::string> names = {"vit_tiny_patch16_224",
                                          "vit_base_patch16_siglip_224",
                                          "deit_tiny_distilled_patch16_224",
                                          "eva02_tiny_patch14_224",
                                          "convnext_atto",
                                          "convnext_atto_rms",
                                          "convnext_zepto_rms",
                                          "coatnet_nano_rw_224",
                                          "maxxvit_rmlp_nano_rw_256",
                                          "caformer_s18",
                                          "poolformer_s12",
                                          "poolformerv2_s12",
                                          "mobilevit_xxs",
                                          "mobilevitv2_050",
                                          "gcresnet33ts",
                                          "gc_efficientnetv2_rw_t",
                                          "resnet50_gn",
                                          "swin_tiny_patch4_window7_224",
                                          "swinv2_cr_tiny_224"};
  std::string joined;
  for (const auto& name : names) joined += (joined.empty() ? "" : ",") + name;
  const nlohmann::json theirs =
      nlohmann::json::parse(timm::test::run_oracle("fast_norm_oracle.py", {"--modules", joined}));
  timm::test::load_builtin_plugins();
  for (const auto& name : names) {
    CAPTURE(name);
    {
      timm::ModelPtr plain = timm::create_model(name, timm::ModelArgs{});
      CHECK(fast_modules(*plain).empty());
    }
    const FastNormSetting on(true);
    timm::ModelPtr model = timm::create_model(name, timm::ModelArgs{});
    const std::vector<std::string> ours = fast_modules(*model);
    const auto expected = theirs.at(name).get<std::vector<std::string>>();
    CHECK_MESSAGE(ours == expected,
                  "only ours: " << difference(ours, expected) << "; only timm's: " << difference(expected, ours));
  }
}

}  // namespace test_fast_norm
