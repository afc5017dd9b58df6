// RegNet plugin against timm (tests/oracle/regnet_oracle.py), both ways:
// timm's weights load here and give timm's logits and gradients; our weights
// load in timm and give our logits. Tolerance for every float comparison:
// |ours - timm| <= kAtol + kRtol * |timm|.
//
// The parity cases (smallest and largest RegNetX and RegNetY) run on one
// thread, as the oracle does: train-mode gradients through BatchNorm over few
// values per channel (8 in stage 4 at 64 px, batch 2) are ill-conditioned and
// depend on the summation order.
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
#include "timm/models/model.hpp"
#include "timm/models/state_dict.hpp"

// Last: c10/util/Logging.h defines a CHECK macro that doctest must override.
#include <doctest/doctest.h>

namespace {

constexpr double kAtol = 1e-4;
constexpr double kRtol = 1e-4;
constexpr int64_t kNumClasses = 10;

struct Case {
  std::string name;
  int64_t in_chans;
};
// Smallest and largest of each family; one with a single input channel.
const std::vector<Case> kCases = {{"regnetx_002", 3}, {"regnety_002", 1}, {"regnetx_320", 3}, {"regnety_320", 3}};

// Every name registered here (timm 1.0.31's regnet[xy]_* but regnety_040_sgn,
// regnety_640, regnety_1280 and regnety_2560).
const std::vector<std::string> kNames = {
    "regnetx_002", "regnetx_004", "regnetx_004_tv", "regnetx_006",    "regnetx_008", "regnetx_016", "regnetx_032",
    "regnetx_040", "regnetx_064", "regnetx_080",    "regnetx_120",    "regnetx_160", "regnetx_320", "regnety_002",
    "regnety_004", "regnety_006", "regnety_008",    "regnety_008_tv", "regnety_016", "regnety_032", "regnety_040",
    "regnety_064", "regnety_080", "regnety_080_tv", "regnety_120",    "regnety_160", "regnety_320"};
const std::vector<std::string> kNotRegistered = {"regnety_040_sgn", "regnety_640", "regnety_1280", "regnety_2560"};

std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ",") + n;
  return out;
}

std::string cases_arg() {
  std::string out;
  for (const auto& c : kCases) out += (out.empty() ? "" : ",") + c.name + ":" + std::to_string(c.in_chans);
  return out;
}

std::string stem(const timm::test::TempDir& dir, const Case& c) {
  return (dir / (c.name + "_c" + std::to_string(c.in_chans))).string();
}

timm::ModelPtr make(const std::string& name, int64_t in_chans = 3, int64_t num_classes = kNumClasses) {
  timm::test::load_builtin_plugins();
  timm::ModelArgs args;
  args.num_classes = num_classes;
  args.in_chans = in_chans;
  return timm::create_model(name, args);
}

double max_abs_diff(const at::Tensor& a, const at::Tensor& b) {
  return (a.to(at::kDouble) - b.to(at::kDouble)).abs().max().item<double>();
}

bool close(const at::Tensor& ours, const at::Tensor& expected) {
  return at::allclose(ours.to(at::kDouble), expected.to(at::kDouble), kRtol, kAtol);
}

timm::NamedTensors with_prefix(const timm::NamedTensors& all, const std::string& prefix) {
  timm::NamedTensors out;
  for (const auto& [key, tensor] : all) {
    if (key.rfind(prefix, 0) == 0) out.emplace_back(key.substr(prefix.size()), tensor);
  }
  return out;
}

std::map<std::string, at::Tensor> as_map(const timm::NamedTensors& tensors) { return {tensors.begin(), tensors.end()}; }

int64_t param_count(const torch::nn::Module& model) {
  int64_t n = 0;
  for (const auto& p : model.parameters()) n += p.numel();
  return n;
}

// The drop_prob of each block's drop_path (0 where it has none), in block order.
std::vector<double> block_drop_path_rates(const torch::nn::Module& model) {
  std::vector<double> rates;
  for (const auto* stage : {"s1", "s2", "s3", "s4"}) {
    for (const auto& block : model.named_children()[stage]->children()) {
      double rate = 0.0;
      for (const auto& child : block->named_children()) {
        if (child.key() == "drop_path") rate = child.value()->as<timm::layers::DropPath>()->options.drop_prob();
      }
      rates.push_back(rate);
    }
  }
  return rates;
}

// timm's weights give timm's outputs here: eval, train mode, gradients, BN statistics.
void check_timm_to_cpp(const Case& c, const timm::SafetensorsFile& expected_file) {
  const auto expected = as_map(expected_file.tensors);
  const auto& meta = expected_file.metadata;
  timm::ModelPtr model = make(c.name, c.in_chans);
  CHECK(param_count(*model) == std::stoll(meta.at("param_count")));
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
  for (const auto& key : nlohmann::json::parse(meta.at("grad_keys")).get<std::vector<std::string>>()) {
    const at::Tensor grad = params[key].grad();
    const at::Tensor& timm_grad = expected.at("grad." + key);
    MESSAGE(c.name << " grad " << key << " max abs diff " << max_abs_diff(grad, timm_grad) << " (max |grad| "
                   << timm_grad.abs().max().item<double>() << ")");
    CHECK_MESSAGE(close(grad, timm_grad), key);
  }
  const auto buffers = model->named_buffers();
  for (const auto* key : {"stem.bn.running_mean", "stem.bn.running_var", "stem.bn.num_batches_tracked"}) {
    CHECK_MESSAGE(close(buffers[key], expected.at(std::string("after.") + key)), key);
  }

  timm::ModelArgs args;
  args.num_classes = kNumClasses;
  args.in_chans = c.in_chans;
  args.drop_path_rate = 0.2;
  const auto timm_rates = nlohmann::json::parse(meta.at("drop_path_rates")).get<std::vector<double>>();
  const auto our_rates = block_drop_path_rates(*timm::create_model(c.name, args));
  REQUIRE(our_rates.size() == timm_rates.size());
  for (size_t i = 0; i < our_rates.size(); ++i) CHECK(our_rates[i] == doctest::Approx(timm_rates[i]).epsilon(1e-6));
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

TEST_CASE("every registered regnet has timm's state_dict keys, shapes, parameter count and pretrained_cfg") {
  timm::test::load_builtin_plugins();
  const auto info =
      nlohmann::json::parse(timm::test::run_oracle("regnet_oracle.py", {"info", "--names", joined(kNames)}));
  for (const auto& name : kNames) {
    CAPTURE(name);
    const auto& e = info.at("models").at(name);
    timm::ModelPtr model = make(name, 3, 1000);
    std::vector<std::pair<std::string, std::vector<int64_t>>> ours;
    for (const auto& [key, tensor] : timm::state_dict(*model)) ours.emplace_back(key, tensor.sizes().vec());
    const auto theirs = e.at("state_dict").get<std::vector<std::pair<std::string, std::vector<int64_t>>>>();
    CHECK(ours == theirs);
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
  }
  // Ours are timm's regnet[xy]_* less the documented exceptions, in timm's order.
  std::vector<std::string> expected_names;
  for (const auto& name : info.at("registered").get<std::vector<std::string>>()) {
    if (std::find(kNotRegistered.begin(), kNotRegistered.end(), name) == kNotRegistered.end()) {
      expected_names.push_back(name);
    }
  }
  CHECK(timm::Registry::global().list(timm::PluginKind::kModel, "regnet[xy]_*") == expected_names);
  CHECK(expected_names == kNames);
}

TEST_CASE("regnet matches timm both ways: logits, train-mode gradients, weights (smallest and largest X and Y)") {
  const ThreadCount one_thread(1);
  timm::test::TempDir dir;
  MESSAGE(
      timm::test::run_oracle("regnet_oracle.py", {"generate", "--dir", dir.path().string(), "--cases", cases_arg()}));
  for (const auto& c : kCases) {
    CAPTURE(c.name);
    check_timm_to_cpp(c, timm::read_safetensors_file(stem(dir, c) + ".expected.safetensors"));
    write_cpp_model(c, stem(dir, c));
  }
  MESSAGE(timm::test::run_oracle("regnet_oracle.py", {"check", "--dir", dir.path().string(), "--cases", cases_arg()}));
}

TEST_CASE("regnet init follows timm: conv normal(0, sqrt(2 / fan_out)), zero biases, fc std 0.01, last BN zero") {
  at::manual_seed(0);
  timm::ModelPtr model = make("regnety_016");
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
  timm::ModelPtr features = make("regnetx_002", 3, 0);
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
