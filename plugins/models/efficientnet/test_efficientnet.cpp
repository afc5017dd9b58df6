// EfficientNet / MobileNetV2 / MobileNetV3 plugin against timm
// (tests/oracle/efficientnet_oracle.py), both ways: for every registered name
// the state_dict keys, shapes, dtypes, parameter count, pretrained cfg,
// group_matcher and drop-path schedule equal timm's; for one model of each
// family and block kind, timm's random weights load here and give timm's
// eval logits, train-mode logits, gradients and BN statistics, and our
// weights load in timm (strict) and give our logits. Tolerance for every float
// comparison: |ours - timm| <= kAtol + kRtol * |timm|.
//
// The parity case runs on one thread, as the oracle does: train-mode
// gradients through BatchNorm over few values per channel (8 in the last
// stage at 64 x 64, batch 2) depend on the summation order.
#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <nlohmann/json.hpp>

#include "test_support.hpp"
#include "timm/core/error.hpp"
#include "timm/core/registry.hpp"
#include "timm/io/safetensors.hpp"
#include "timm/layers/drop_path.hpp"
#include "timm/layers/norm_act.hpp"
#include "timm/models/model.hpp"
#include "timm/models/state_dict.hpp"

// Last: c10/util/Logging.h defines a CHECK macro that doctest must override.
#include <doctest/doctest.h>

namespace {

using nlohmann::json;

constexpr double kAtol = 1e-4;
constexpr double kRtol = 1e-4;
constexpr int64_t kNumClasses = 10;

const std::vector<std::string> kNames = {"efficientnet_b0",       "efficientnet_b1",       "efficientnet_b2",
                                         "efficientnet_b3",       "efficientnet_b4",       "efficientnet_b5",
                                         "efficientnet_b6",       "efficientnet_b7",       "mobilenetv2_035",
                                         "mobilenetv2_050",       "mobilenetv2_075",       "mobilenetv2_100",
                                         "mobilenetv2_110d",      "mobilenetv2_120d",      "mobilenetv2_140",
                                         "mobilenetv3_large_075", "mobilenetv3_large_100", "mobilenetv3_large_150d",
                                         "mobilenetv3_small_050", "mobilenetv3_small_075", "mobilenetv3_small_100"};

struct Case {
  std::string name;
  int64_t in_chans;
};
// Smallest and largest EfficientNet (DS + IR with swish SE), MobileNetV3
// large (DS without SE, relu / hard_swish IR, hard_sigmoid SE, ConvBnAct,
// pooled head) and small (DS with SE and stride, fixed stem, 1 channel),
// MobileNetV2 (relu6, no SE) and its depth-scaled "d" variant.
const std::vector<Case> kCases = {{"efficientnet_b0", 3},       {"efficientnet_b7", 3}, {"mobilenetv3_large_100", 3},
                                  {"mobilenetv3_small_050", 1}, {"mobilenetv2_100", 3}, {"mobilenetv2_110d", 3}};

std::string cases_arg() {
  std::string out;
  for (const auto& c : kCases) out += (out.empty() ? "" : ",") + c.name + ":" + std::to_string(c.in_chans);
  return out;
}

std::string stem(const timm::test::TempDir& dir, const Case& c) {
  return (dir / (c.name + "_c" + std::to_string(c.in_chans))).string();
}

timm::ModelPtr make(const std::string& name, int64_t in_chans = 3, int64_t num_classes = kNumClasses,
                    std::optional<double> drop_path_rate = std::nullopt) {
  timm::test::load_builtin_plugins();
  timm::ModelArgs args;
  args.num_classes = num_classes;
  args.in_chans = in_chans;
  args.drop_path_rate = drop_path_rate;
  return timm::create_model(name, args);
}

double max_abs_diff(const at::Tensor& a, const at::Tensor& b) {
  return (a.to(at::kDouble) - b.to(at::kDouble)).abs().max().item<double>();
}

bool close(const at::Tensor& ours, const at::Tensor& expected) {
  return ours.sizes() == expected.sizes() && at::allclose(ours.to(at::kDouble), expected.to(at::kDouble), kRtol, kAtol);
}

timm::NamedTensors with_prefix(const timm::NamedTensors& all, const std::string& prefix) {
  timm::NamedTensors out;
  for (const auto& [key, tensor] : all) {
    if (key.rfind(prefix, 0) == 0) out.emplace_back(key.substr(prefix.size()), tensor);
  }
  return out;
}

int64_t param_count(const torch::nn::Module& model) {
  int64_t n = 0;
  for (const auto& p : model.parameters()) n += p.numel();
  return n;
}

std::string dtype_name(at::ScalarType type) {
  switch (type) {
    case at::kFloat:
      return "float32";
    case at::kLong:
      return "int64";
    default:
      return c10::toString(type);
  }
}

// The drop_prob of each block's drop_path (0 where it has none), in block order.
std::vector<double> block_drop_path_rates(const torch::nn::Module& model) {
  std::vector<double> rates;
  for (const auto& stage : model.named_children()["blocks"]->children()) {
    for (const auto& block : stage->children()) {
      double rate = 0.0;
      for (const auto& child : block->named_children()) {
        if (child.key() == "drop_path") rate = child.value()->as<timm::layers::DropPath>()->options.drop_prob();
      }
      rates.push_back(rate);
    }
  }
  return rates;
}

json matcher_json(const timm::GroupMatcher& matcher) {
  json out = json::array();
  for (const auto& [group, rules] : matcher) {
    json rules_json = json::array();
    for (const auto& rule : rules)
      rules_json.push_back({rule.pattern, rule.suffix ? json(*rule.suffix) : json(nullptr)});
    out.push_back({group, rules_json});
  }
  return out;
}

// timm's weights give timm's outputs, gradients and BN statistics here.
void check_timm_to_cpp(const Case& c, const timm::SafetensorsFile& expected_file) {
  const std::map<std::string, at::Tensor> expected(expected_file.tensors.begin(), expected_file.tensors.end());
  timm::ModelPtr model = make(c.name, c.in_chans);
  timm::load_state_dict(*model, with_prefix(expected_file.tensors, "model."), /*strict=*/true);
  const at::Tensor input = expected.at("input");

  model->eval();
  {
    c10::NoGradGuard no_grad;
    const at::Tensor logits = model->forward(input);
    MESSAGE(c.name << " eval logits max abs diff " << max_abs_diff(logits, expected.at("logits_eval")));
    CHECK(close(logits, expected.at("logits_eval")));
  }

  model->train();
  const at::Tensor logits = model->forward(input);
  MESSAGE(c.name << " train logits max abs diff " << max_abs_diff(logits, expected.at("logits_train")));
  CHECK(close(logits, expected.at("logits_train")));
  const at::Tensor loss = at::nll_loss(at::log_softmax(logits, 1), expected.at("target"));
  CHECK(close(loss, expected.at("loss")));
  loss.backward();
  const auto params = model->named_parameters();
  double worst_grad = 0.0;
  const auto keys = json::parse(expected_file.metadata.at("grad_keys")).get<std::vector<std::string>>();
  REQUIRE(keys.size() > 8);
  for (const auto& key : keys) {
    const at::Tensor grad = params[key].grad();
    const at::Tensor& timm_grad = expected.at("grad." + key);
    worst_grad = std::max(worst_grad, max_abs_diff(grad, timm_grad));
    CHECK_MESSAGE(close(grad, timm_grad), key << " max abs diff " << max_abs_diff(grad, timm_grad));
  }
  MESSAGE(c.name << " " << keys.size() << " gradients, max abs diff " << worst_grad);
  const auto buffers = model->named_buffers();
  for (const auto* key : {"bn1.running_mean", "bn1.running_var", "bn1.num_batches_tracked"}) {
    CHECK_MESSAGE(close(buffers[key], expected.at(std::string("after.") + key)), key);
  }
}

// A fresh model of ours, after one train-mode step of BN statistics, written
// for timm to load; its eval logits go along as the probe.
void write_cpp_model(const Case& c, const std::string& file_stem) {
  at::manual_seed(123);
  timm::ModelPtr model = make(c.name, c.in_chans);
  const at::Tensor input = at::randn({2, c.in_chans, 64, 64});
  c10::NoGradGuard no_grad;
  model->train();
  model->forward(input);  // moves the running statistics away from (0, 1)
  model->eval();
  const at::Tensor logits = model->forward(input);
  timm::write_safetensors(file_stem + ".cpp.safetensors", timm::state_dict(*model));
  timm::write_safetensors(file_stem + ".probe.safetensors", {{"input", input}, {"logits_eval", logits}});
}

class ThreadCount {
 public:
  explicit ThreadCount(int n) : saved_(at::get_num_threads()) { at::set_num_threads(n); }
  ~ThreadCount() { at::set_num_threads(saved_); }

 private:
  int saved_;
};

}  // namespace

TEST_CASE("every registered EfficientNet / MobileNet: keys, shapes, parameter count, cfg, group_matcher as timm") {
  const ThreadCount one_thread(1);  // 2 cores shared: OpenMP's spinning threads only slow it down
  timm::test::load_builtin_plugins();
  std::string names;
  for (const auto& name : kNames) names += (names.empty() ? "" : ",") + name;
  const json info = json::parse(timm::test::run_oracle("efficientnet_oracle.py", {"info", "--names", names}));
  for (const auto& name : kNames) {
    CAPTURE(name);
    const json& e = info.at("models").at(name);
    // drop_path_rate adds no keys: one model serves the structure and the schedule.
    timm::ModelPtr model = make(name, 3, 1000, 0.2);
    const timm::NamedTensors state = timm::state_dict(*model);
    std::vector<std::string> keys;
    std::vector<std::vector<int64_t>> shapes;
    std::vector<std::string> dtypes;
    for (const auto& [key, tensor] : state) {
      keys.push_back(key);
      shapes.push_back(tensor.sizes().vec());
      dtypes.push_back(dtype_name(tensor.scalar_type()));
    }
    CHECK(keys == e.at("keys").get<std::vector<std::string>>());
    CHECK(shapes == e.at("shapes").get<std::vector<std::vector<int64_t>>>());
    CHECK(dtypes == e.at("dtypes").get<std::vector<std::string>>());
    CHECK(param_count(*model) == e.at("param_count").get<int64_t>());
    const auto& cfg = model->pretrained_cfg();
    CHECK(cfg.input_size == e.at("input_size").get<std::vector<int64_t>>());
    CHECK(cfg.crop_pct == e.at("crop_pct").get<double>());
    CHECK(cfg.interpolation == e.at("interpolation").get<std::string>());
    CHECK(cfg.mean == e.at("mean").get<std::vector<double>>());
    CHECK(cfg.std == e.at("std").get<std::vector<double>>());
    CHECK(cfg.crop_mode == e.at("crop_mode").get<std::string>());
    CHECK(cfg.first_conv == e.at("first_conv").get<std::string>());
    CHECK(cfg.classifier == e.at("classifier").get<std::string>());
    CHECK(matcher_json(model->group_matcher(false)) == e.at("group_matcher_fine"));
    CHECK(matcher_json(model->group_matcher(true)) == e.at("group_matcher_coarse"));
    CHECK(e.at("drop_rate").get<double>() == 0.0);  // timm's default: no dropout unless --drop

    // timm's drop-path schedule, rate * block / blocks.
    const auto timm_rates = e.at("drop_path_rates").get<std::vector<double>>();
    const auto our_rates = block_drop_path_rates(*model);
    REQUIRE(our_rates.size() == timm_rates.size());
    for (size_t i = 0; i < our_rates.size(); ++i) CHECK(our_rates[i] == doctest::Approx(timm_rates[i]).epsilon(1e-12));
  }
  // Every name we register is one timm registers.
  const auto listed = info.at("listed").get<std::vector<std::string>>();
  for (const auto& name : kNames) CHECK(std::find(listed.begin(), listed.end(), name) != listed.end());
  for (const auto* pattern : {"efficientnet_b*", "mobilenetv2_*", "mobilenetv3_*"}) {
    for (const auto& name : timm::Registry::global().list(timm::PluginKind::kModel, pattern)) {
      CHECK_MESSAGE(std::find(kNames.begin(), kNames.end(), name) != kNames.end(),
                    name << " is registered but untested");
    }
  }
}

TEST_CASE("efficientnet / mobilenet match timm both ways: logits, gradients, BN statistics, weights") {
  const ThreadCount one_thread(1);
  timm::test::TempDir dir;
  MESSAGE(timm::test::run_oracle("efficientnet_oracle.py",
                                 {"generate", "--dir", dir.path().string(), "--cases", cases_arg()}));
  for (const auto& c : kCases) {
    CAPTURE(c.name);
    check_timm_to_cpp(c, timm::read_safetensors_file(stem(dir, c) + ".expected.safetensors"));
    std::filesystem::remove(stem(dir, c) + ".expected.safetensors");  // b7's weights are 250 MB
    write_cpp_model(c, stem(dir, c));
  }
  MESSAGE(timm::test::run_oracle("efficientnet_oracle.py",
                                 {"check", "--dir", dir.path().string(), "--cases", cases_arg()}));
}

TEST_CASE("efficientnet init follows timm's _init_weight_goog") {
  const ThreadCount one_thread(1);  // 2 cores shared: OpenMP's spinning threads only slow it down
  at::manual_seed(0);
  timm::ModelPtr model = make("efficientnet_b0", 3, 1000);
  const auto params = model->named_parameters();
  // Dense 1x1 conv: normal(0, sqrt(2 / (k * k * out))).
  const at::Tensor pwl = params["blocks.5.0.conv_pwl.weight"];  // 192 x 672 x 1 x 1
  CHECK(pwl.std().item<double>() == doctest::Approx(std::sqrt(2.0 / 192)).epsilon(0.03));
  // Depthwise: fan_out per group, sqrt(2 / (k * k * out / groups)) = sqrt(2 / 25).
  const at::Tensor dw = params["blocks.5.0.conv_dw.weight"];  // 672 x 1 x 5 x 5
  CHECK(dw.std().item<double>() == doctest::Approx(std::sqrt(2.0 / 25)).epsilon(0.03));
  CHECK(params["blocks.5.0.se.conv_reduce.bias"].abs().max().item<double>() == 0.0);
  CHECK(params["blocks.5.0.bn2.weight"].min().item<double>() == 1.0);
  // Linear: uniform(+-1 / sqrt(out_features)), bias zero.
  const at::Tensor fc = params["classifier.weight"];
  CHECK(fc.abs().max().item<double>() <= 1.0 / std::sqrt(1000.0));
  CHECK(fc.abs().max().item<double>() > 0.9 / std::sqrt(1000.0));
  CHECK(params["classifier.bias"].abs().max().item<double>() == 0.0);
  timm::ModelPtr mnv3 = make("mobilenetv3_small_050");
  CHECK(mnv3->named_parameters()["conv_head.bias"].abs().max().item<double>() == 0.0);
}

TEST_CASE("efficientnet head options: num_classes 0, global_pool, drop_rate; bad input rejected") {
  const ThreadCount one_thread(1);  // 2 cores shared: OpenMP's spinning threads only slow it down
  c10::NoGradGuard no_grad;
  const at::Tensor x = at::randn({2, 3, 64, 64});
  for (const auto* name : {"efficientnet_b0", "mobilenetv3_small_100"}) {
    CAPTURE(name);
    timm::ModelPtr features = make(name, 3, 0);
    features->eval();
    const int64_t num_features = std::string(name).starts_with("efficientnet") ? 1280 : 1024;
    CHECK((features->forward(x).sizes() == at::IntArrayRef{2, num_features}));

    timm::ModelArgs args;
    args.num_classes = kNumClasses;
    args.drop_rate = 1.0;
    timm::ModelPtr dropped = timm::create_model(name, args);
    dropped->train();
    const at::Tensor bias = dropped->named_parameters()["classifier.bias"];
    CHECK(at::allclose(dropped->forward(x), bias.expand({2, kNumClasses})));

    args.drop_rate = 0.0;
    args.global_pool = "catavgmax";
    timm::ModelPtr cat = timm::create_model(name, args);
    cat->eval();
    CHECK((cat->forward(x).sizes() == at::IntArrayRef{2, kNumClasses}));

    args.global_pool = "median";
    CHECK_THROWS_WITH_AS(timm::create_model(name, args), doctest::Contains("'median'"), timm::UsageError);
    args.global_pool = std::nullopt;
    args.kwargs["output_stride"] = "16";
    CHECK_THROWS_WITH_AS(timm::create_model(name, args), doctest::Contains("'output_stride'"), timm::UsageError);
    args.kwargs = {{"bn_eps", "abc"}};
    CHECK_THROWS_WITH_AS(timm::create_model(name, args), doctest::Contains("bn_eps=abc"), timm::UsageError);
    args.kwargs.clear();
    args.drop_path_rate = 1.5;
    CHECK_THROWS_AS(timm::create_model(name, args), timm::UsageError);
  }
  // --model-kwargs bn_eps / bn_momentum reach every BatchNorm, as timm's resolve_bn_args.
  timm::ModelArgs tf_bn;
  tf_bn.kwargs = {{"bn_eps", "0.001"}, {"bn_momentum", "0.01"}};
  timm::ModelPtr tf_model = timm::create_model("efficientnet_b0", tf_bn);
  int64_t tf_norms = 0;
  timm::layers::for_each_batch_norm_act(*tf_model, [&](const std::string& name, timm::layers::BatchNormAct2dImpl& bn) {
    CAPTURE(name);
    CHECK(bn.options.eps() == 0.001);
    CHECK(bn.options.momentum() == 0.01);
    ++tf_norms;
  });
  CHECK(tf_norms == 49);  // bn1, 16 blocks (DS: 2 norms, IR: 3), bn2

  // Every BN of the net is a BatchNormAct2d, so a SyncBatchNorm conversion reaches them all.
  timm::ModelPtr model = make("mobilenetv3_small_050");
  int64_t norm_acts = 0;
  timm::layers::for_each_batch_norm_act(*model,
                                        [&](const std::string&, timm::layers::BatchNormAct2dImpl&) { ++norm_acts; });
  int64_t running_means = 0;
  for (const auto& b : model->named_buffers()) running_means += b.key().ends_with("running_mean") ? 1 : 0;
  CHECK(norm_acts == running_means);
  CHECK(norm_acts > 30);
}
