// BatchNormAct2d, ConvNormAct and the activations by name against timm
// (tests/oracle/norm_act_oracle.py, run at test time): same state_dict keys,
// timm's weights give timm's eval and train outputs, running statistics and
// gradients. Tolerance: |ours - timm| <= kAtol + kRtol * |timm|; one thread,
// as the oracle, so BatchNorm's reductions sum in the same order.
#include <algorithm>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <nlohmann/json.hpp>

#include "test_support.hpp"
#include "timm/base/error.hpp"
#include "timm/io/safetensors.hpp"
#include "timm/layers/activations.hpp"
#include "timm/layers/norm_act.hpp"
#include "timm/models/state_dict.hpp"

// Last: c10/util/Logging.h defines a CHECK macro that doctest must override.
#include <doctest/doctest.h>

namespace test_norm_act {

namespace layers = timm::layers;
using nlohmann::json;

namespace {

constexpr double kAtol = 1e-5;
constexpr double kRtol = 1e-5;

// The names timm's create_act_layer knows that have no parameters.
const std::vector<std::string> kActNames = {
    "relu", "relu6",     "silu",       "swish", "mish", "sigmoid", "tanh",       "hard_sigmoid", "hard_swish",
    "gelu", "gelu_tanh", "quick_gelu", "elu",   "celu", "selu",    "leaky_relu", "identity"};

json bn_case(const std::string& name, int64_t features, const std::string& act, bool apply_act, double eps,
             std::optional<double> momentum) {
  return {{"name", name},
          {"kind", "bn"},
          {"num_features", features},
          {"act", act},
          {"apply_act", apply_act},
          {"eps", eps},
          {"momentum", momentum ? json(*momentum) : json(nullptr)}};
}

json conv_case(const std::string& name, int64_t in, int64_t out, int64_t kernel, int64_t stride, int64_t dilation,
               int64_t groups, bool bias, bool apply_norm, bool apply_act, const std::string& act) {
  return {{"name", name},
          {"kind", "conv"},
          {"in", in},
          {"out", out},
          {"kernel", kernel},
          {"stride", stride},
          {"dilation", dilation},
          {"groups", groups},
          {"bias", bias},
          {"apply_norm", apply_norm},
          {"apply_act", apply_act},
          {"act", act}};
}

json all_cases() {
  json cases = json::array();
  cases.push_back(bn_case("bn_relu", 6, "relu", true, 1e-5, 0.1));
  cases.push_back(bn_case("bn_silu_eps3", 5, "silu", true, 1e-3, 0.01));
  cases.push_back(bn_case("bn_no_act", 4, "hard_swish", false, 1e-5, 0.1));
  cases.push_back(bn_case("bn_cumulative", 3, "relu6", true, 1e-5, std::nullopt));
  cases.push_back(conv_case("conv_3x3_s2", 4, 8, 3, 2, 1, 1, false, true, true, "relu"));
  cases.push_back(conv_case("conv_dw_5x5", 6, 6, 5, 1, 1, 6, false, true, true, "swish"));
  cases.push_back(conv_case("conv_dilated_grouped", 4, 6, 3, 1, 2, 2, true, true, true, "gelu"));
  cases.push_back(conv_case("conv_1x1_s2_no_act", 4, 5, 1, 2, 1, 1, false, true, false, "relu"));
  cases.push_back(conv_case("conv_k4_s2", 3, 4, 4, 2, 1, 1, false, true, true, "hard_sigmoid"));
  cases.push_back(conv_case("conv_no_norm", 3, 4, 3, 1, 1, 1, true, false, true, "relu"));
  for (const auto& act : kActNames) cases.push_back({{"name", "act_" + act}, {"kind", "act"}, {"act", act}});
  // BatchNormAct2d runs its act in place, as timm's (inplace=True): every
  // name after a BN, values and gradients through the in-place op.
  for (const auto& act : kActNames) cases.push_back(bn_case("bn_act_" + act, 3, act, true, 1e-5, 0.1));
  return cases;
}

std::shared_ptr<torch::nn::Module> build(const json& c) {
  const std::string kind = c.at("kind");
  if (kind == "bn") {
    std::optional<double> momentum;
    if (!c.at("momentum").is_null()) momentum = c.at("momentum").get<double>();
    return layers::BatchNormAct2d(layers::BatchNormAct2dOptions(c.at("num_features").get<int64_t>())
                                      .eps(c.at("eps").get<double>())
                                      .momentum(momentum)
                                      .apply_act(c.at("apply_act").get<bool>())
                                      .act_layer(c.at("act").get<std::string>()))
        .ptr();
  }
  if (kind == "conv") {
    return layers::ConvNormAct(layers::ConvNormActOptions(c.at("in"), c.at("out"), c.at("kernel"))
                                   .stride(c.at("stride"))
                                   .dilation(c.at("dilation"))
                                   .groups(c.at("groups"))
                                   .bias(c.at("bias"))
                                   .apply_norm(c.at("apply_norm"))
                                   .apply_act(c.at("apply_act"))
                                   .act_layer(c.at("act").get<std::string>()))
        .ptr();
  }
  return layers::create_act(c.at("act").get<std::string>()).ptr();
}

at::Tensor run(torch::nn::Module& module, const at::Tensor& x) {
  if (auto* bn = module.as<layers::BatchNormAct2d>()) return bn->forward(x);
  if (auto* cna = module.as<layers::ConvNormAct>()) return cna->forward(x);
  return module.as<layers::Activation>()->forward(x);
}

double max_abs_diff(const at::Tensor& a, const at::Tensor& b) {
  return (a.to(at::kDouble) - b.to(at::kDouble)).abs().max().item<double>();
}

void check_close(const std::string& what, const at::Tensor& ours, const at::Tensor& timm, double& worst) {
  REQUIRE_MESSAGE(ours.sizes() == timm.sizes(), what);
  const double diff = max_abs_diff(ours, timm);
  worst = timm::test::worst_diff(worst, diff);
  CHECK_MESSAGE(at::allclose(ours.to(at::kDouble), timm.to(at::kDouble), kRtol, kAtol),
                what << " max abs diff " << diff);
}

timm::NamedTensors with_prefix(const timm::NamedTensors& all, const std::string& prefix) {
  timm::NamedTensors out;
  for (const auto& [key, tensor] : all) {
    if (key.rfind(prefix, 0) == 0) out.emplace_back(key.substr(prefix.size()), tensor);
  }
  return out;
}

using timm::test::ThreadCount;

}  // namespace

TEST_CASE("BatchNormAct2d, ConvNormAct and activations match timm: keys, outputs, statistics, gradients") {
  const ThreadCount one_thread(1);
  timm::test::TempDir dir;
  const json cases = all_cases();
  const auto cases_path = dir / "cases.json";
  { std::ofstream(cases_path) << cases.dump(); }
  const auto out_path = dir / "expected.safetensors";
  MESSAGE(timm::test::run_oracle("norm_act_oracle.py",
                                 {"generate", "--cases", cases_path.string(), "--out", out_path.string()}));
  const timm::SafetensorsFile file = timm::read_safetensors_file(out_path);
  const std::map<std::string, at::Tensor> expected(file.tensors.begin(), file.tensors.end());

  double worst = 0.0;
  for (const auto& c : cases) {
    const std::string name = c.at("name");
    CAPTURE(name);
    auto module = build(c);

    std::vector<std::string> our_keys;
    for (const auto& [key, tensor] : timm::state_dict(*module)) our_keys.push_back(key);
    CHECK(our_keys == json::parse(file.metadata.at(name + ".keys")).get<std::vector<std::string>>());
    timm::load_state_dict(*module, with_prefix(file.tensors, name + ".state."), /*strict=*/true);

    const at::Tensor x = expected.at(name + ".input");
    module->eval();
    {
      c10::NoGradGuard no_grad;
      check_close(name + " eval", run(*module, x), expected.at(name + ".eval"), worst);
    }
    module->train();
    {
      c10::NoGradGuard no_grad;
      run(*module, x * 0.5 + 0.3);
    }
    const at::Tensor xg = x.clone().requires_grad_(true);
    const at::Tensor y = run(*module, xg);
    check_close(name + " train", y, expected.at(name + ".train"), worst);
    (y * expected.at(name + ".probe")).sum().backward();
    check_close(name + " grad input", xg.grad(), expected.at(name + ".grad_input"), worst);
    for (const auto& p : module->named_parameters()) {
      check_close(name + " grad " + p.key(), p.value().grad(), expected.at(name + ".grad." + p.key()), worst);
    }
    for (const auto& b : module->named_buffers()) {
      check_close(name + " " + b.key() + " after two steps", b.value(), expected.at(name + ".after." + b.key()), worst);
    }
  }
  MESSAGE("max abs diff over all cases " << worst << " (atol " << kAtol << ", rtol " << kRtol << ")");
}

TEST_CASE("get_padding and create_conv2d follow timm's symmetric padding") {
  CHECK(layers::get_padding(3) == 1);
  CHECK(layers::get_padding(3, 2) == 1);
  CHECK(layers::get_padding(5, 2) == 2);
  CHECK(layers::get_padding(1, 2) == 0);
  CHECK(layers::get_padding(4, 2) == 2);
  CHECK(layers::get_padding(3, 1, 2) == 2);
  layers::Conv2dArgs dw;
  dw.depthwise = true;
  dw.stride = 2;
  const auto conv = layers::create_conv2d(8, 16, 5, dw);
  CHECK(conv->options.groups() == 8);
  CHECK((conv->weight.sizes() == at::IntArrayRef{16, 1, 5, 5}));
  CHECK(!conv->bias.defined());
  layers::Conv2dArgs bad;
  bad.groups = 3;
  CHECK_THROWS_AS(layers::create_conv2d(8, 16, 3, bad), timm::UsageError);
  CHECK_THROWS_AS(layers::BatchNormAct2d(layers::BatchNormAct2dOptions(4).act_layer("nope")), timm::UsageError);
}

TEST_CASE("BatchNormAct2d's normalisation can be swapped in place, keeping drop and act") {
  // What a SyncBatchNorm conversion does: walk the model, replace each
  // BatchNormAct2d's BN step, leave act alone; the parent keeps its pointer.
  layers::ConvNormAct block(layers::ConvNormActOptions(3, 4, 3).act_layer("relu"));
  std::vector<std::string> seen;
  layers::for_each_batch_norm_act(*block, [&](const std::string& name, layers::BatchNormAct2dImpl& bn) {
    seen.push_back(name);
    bn.set_normalization([](layers::BatchNormAct2dImpl& self, const at::Tensor& x) {
      return self.batch_norm(x) - 10.0;  // pushes everything below zero, so relu must give 0
    });
  });
  CHECK(seen == std::vector<std::string>{"bn"});
  CHECK(block->bn->has_custom_normalization());
  block->train();
  const at::Tensor x = at::randn({2, 3, 5, 5});
  CHECK(block(x).abs().max().item<double>() == 0.0);           // act still applied after the swapped step
  CHECK(block->bn->num_batches_tracked.item<int64_t>() == 1);  // the fallback still updates the buffers
  // The tensors are the registered ones: state_dict sees what the swapped step changed.
  CHECK(timm::state_dict(*block).back().first == "bn.num_batches_tracked");
  CHECK(timm::state_dict(*block).back().second.item<int64_t>() == 1);
  block->bn->clear_normalization();
  CHECK(block(x).min().item<double>() == 0.0);
  CHECK(block(x).max().item<double>() > 0.0);
}

}  // namespace test_norm_act
