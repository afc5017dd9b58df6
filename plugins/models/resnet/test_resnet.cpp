// ResNet plugin against timm (tests/oracle/resnet_oracle.py) through the
// shared harness (tests/support/model_parity.hpp), both ways: timm's weights
// load here and give timm's logits, eval forward_features / forward_head /
// pre-logits outputs, gradients and BN statistics; our weights load in timm
// and give our logits. Tolerance for every float comparison:
// |ours - timm| <= 1e-4 + 1e-4 * |timm|.
//
// The parity case runs on one thread, as the oracle does: train-mode
// gradients through BatchNorm over few values per channel (8 in resnet50's
// layer4 here) are ill-conditioned, and timm alone differs by ~1.5% between
// one and two threads from the summation order. On one thread ours and
// timm's agree bit for bit.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <torch/nn/modules/linear.h>
#include <nlohmann/json.hpp>

#include "model_parity.hpp"
#include "test_support.hpp"
#include "timm/base/error.hpp"
#include "timm/layers/drop_path.hpp"
#include "timm/layers/eca.hpp"
#include "timm/layers/squeeze_excite.hpp"
#include "timm/models/model.hpp"
#include "timm/models/state_dict.hpp"
#include "timm/plugin/registry.hpp"

// Last: c10/util/Logging.h defines a CHECK macro that doctest must override.
#include <doctest/doctest.h>

namespace test_resnet {

namespace {

using timm::test::make_model;
using timm::test::ParityCase;

constexpr int64_t kNumClasses = timm::test::kParityNumClasses;

// One model per block kind: plain basic / bottleneck, SE basic (seresnet18),
// deep stem + avg-down + grouped conv + SE bottleneck (seresnext26d_32x4d),
// grouped conv with the plain stem (resnext50_32x4d), deep stem + avg-down
// without SE, basic blocks (resnet18d, 1 channel), base width 128
// (wide_resnet50_2), the tiered stem with basic blocks (resnet10t, 1 channel),
// the 64-wide deep stem without avg-down (resnet50s), ECA after the tiered
// stem (ecaresnet26t) and after the 7x7 stem with avg-down (ecaresnetlight),
// the ResNet-RS stem-pool conv and SE at rd_ratio 0.25 (resnetrs50); the
// anti-aliased blocks and AvgPool2d(2) stem pool with basic (resnetaa34d) and
// bottleneck blocks (resnetaa50), the blur-pool blocks and stem
// (resnetblur18, resnetblur50d), the tiered stem with grouped conv and SE
// (seresnext26t_32x4d), mixed block kinds and stage widths (test_resnet), the
// pruned widths (ecaresnet50d_pruned) and the half-width first conv with 3x3
// strided shortcut convs (senet154). 64x64 inputs, batch 2. resnet50_gn
// (GroupNorm, no running statistics) has its own case below.
const std::vector<ParityCase> kCases = {
    {"resnet18", "resnet18", 3, 64, 2},
    {"resnet34_c1", "resnet34", 1, 64, 2},
    {"resnet50", "resnet50", 3, 64, 2},
    {"seresnet18", "seresnet18", 3, 64, 2},
    {"seresnext26d_32x4d", "seresnext26d_32x4d", 3, 64, 2},
    {"resnext50_32x4d", "resnext50_32x4d", 3, 64, 2},
    {"resnet18d_c1", "resnet18d", 1, 64, 2},
    {"wide_resnet50_2", "wide_resnet50_2", 3, 64, 2},
    {"resnet10t_c1", "resnet10t", 1, 64, 2},
    {"resnet50s", "resnet50s", 3, 64, 2},
    {"ecaresnet26t", "ecaresnet26t", 3, 64, 2},
    {"ecaresnetlight", "ecaresnetlight", 3, 64, 2},
    {"resnetrs50", "resnetrs50", 3, 64, 2},
    {"resnetaa34d", "resnetaa34d", 3, 64, 2},
    {"resnetaa50", "resnetaa50", 3, 64, 2},
    {"resnetblur18", "resnetblur18", 3, 64, 2},
    {"resnetblur50d_c1", "resnetblur50d", 1, 64, 2},
    {"seresnext26t_32x4d", "seresnext26t_32x4d", 3, 64, 2},
    {"test_resnet", "test_resnet", 3, 64, 2},
    {"ecaresnet50d_pruned", "ecaresnet50d_pruned", 3, 64, 2},
    {"senet154", "senet154", 3, 64, 2},
    // DropBlock in layer3 (5x5 blocks, 6x6 maps) and layer4 (3x3 of 3x3): the
    // same seeded masks as timm's in the train step.
    {"resnet18_dropblock", "resnet18", 3, 96, 2, {{"drop_block_rate", 0.3}}},
    {"resnet50_dropblock", "resnet50", 3, 96, 2, {{"drop_block_rate", 0.3}}},
};

// Every registered name: these and kMoreVariants.
const std::vector<std::string> kVariants = {
    "resnet18",        "resnet26",           "resnet34",          "resnet50",         "resnet101",    "resnet152",
    "resnet200",       "resnet10t",          "resnet14t",         "resnet18d",        "resnet26d",    "resnet26t",
    "resnet34d",       "resnet50c",          "resnet50d",         "resnet50s",        "resnet50t",    "resnet101c",
    "resnet101d",      "resnet101s",         "resnet152c",        "resnet152d",       "resnet152s",   "resnet200d",
    "wide_resnet50_2", "wide_resnet101_2",   "resnext50_32x4d",   "resnext101_32x8d", "seresnet18",   "seresnet34",
    "seresnet50",      "seresnet50t",        "seresnet101",       "seresnet152",      "seresnet152d", "seresnet200d",
    "seresnet269d",    "seresnext26d_32x4d", "seresnext50_32x4d", "ecaresnetlight",   "ecaresnet26t", "ecaresnet50d",
    "ecaresnet50t",    "ecaresnet101d",      "ecaresnet200d",     "ecaresnet269d",    "resnetrs50",   "resnetrs101",
    "resnetrs152",     "resnetrs200",        "resnetrs270",       "resnetrs350",      "resnetrs420"};

// The rest of timm's resnet.py: more ResNeXt / SE / ECA combinations,
// senet154, test_resnet, the anti-aliased, blur-pool, GroupNorm and pruned
// models.
const std::vector<std::string> kMoreVariants = {
    // ResNeXt / SE / ECA combinations, senet154, test_resnet
    "resnext50d_32x4d", "resnext101_32x4d", "resnext101_32x16d", "resnext101_32x32d", "resnext101_64x4d",
    "seresnext26t_32x4d", "seresnext101_32x4d", "seresnext101_32x8d", "seresnext101_64x4d", "seresnext101d_32x8d",
    "senet154", "ecaresnext26t_32x4d", "ecaresnext50t_32x4d", "test_resnet",
    // anti-aliased, blur-pool
    "resnetaa34d", "resnetaa50", "resnetaa50d", "resnetaa101d", "seresnetaa50d", "seresnextaa101d_32x8d",
    "seresnextaa201d_32x8d", "resnetblur18", "resnetblur50", "resnetblur50d", "resnetblur101d",
    // GroupNorm, pruned
    "resnet50_gn", "ecaresnet50d_pruned", "ecaresnet101d_pruned"};

// The drop_prob of each block's drop_path (0 where it has none), in block order.
std::vector<double> block_drop_path_rates(const torch::nn::Module& model) {
  std::vector<double> rates;
  for (const auto& stage : {"layer1", "layer2", "layer3", "layer4"}) {
    for (const auto& block : model.named_children()[stage]->children()) {
      rates.push_back(timm::test::drop_prob(*block, "drop_path"));
    }
  }
  return rates;
}

const timm::test::ParityOptions kParity = {
    .tol = {1e-4, 1e-4},
    .block_rates = block_drop_path_rates,
    .after_buffers = {"bn1.running_mean", "bn1.running_var", "bn1.num_batches_tracked"},
};

}  // namespace

TEST_CASE("resnet matches timm both ways: structure, logits, gradients, weights") {
  timm::test::run_parity("resnet_oracle.py", kCases, kParity);
}

TEST_CASE("resnet50_gn (GroupNorm everywhere) matches timm both ways") {
  timm::test::ParityOptions gn = kParity;
  gn.after_buffers = {};  // GroupNorm keeps no running statistics
  timm::test::run_parity("resnet_oracle.py", {{"resnet50_gn", "resnet50_gn", 3, 64, 2}}, gn);
}

TEST_CASE("resnet init of the new block kinds follows timm: aa, blur, GroupNorm, pruned, mixed blocks") {
  timm::test::check_init_stats("resnet_oracle.py",
                               {"resnetaa34d", "resnetblur18", "resnet50_gn", "test_resnet", "seresnext26t_32x4d"});

  // The pruned models keep torch's default init (timm's adapt_model_from_file
  // rebuilds every conv, norm and the classifier after init_weights):
  // kaiming_uniform(a = sqrt(5)), i.e. U(-1/sqrt(fan_in), 1/sqrt(fan_in)), not
  // kaiming-normal fan_out, and no zeroed last norm. (Not through
  // check_init_stats: their ECA convs have 5 or 7 values, too few for its
  // statistics.)
  at::manual_seed(0);
  timm::ModelPtr pruned = make_model("ecaresnet50d_pruned", 3, 1000);
  const auto p = pruned->named_parameters();
  for (const auto& [key, fan_in] : std::vector<std::pair<std::string, int64_t>>{
           {"conv1.0.weight", 27}, {"layer3.0.conv2.weight", 198 * 9}, {"layer4.2.conv3.weight", 490}}) {
    CAPTURE(key);
    const double bound = 1.0 / std::sqrt(static_cast<double>(fan_in));
    CHECK(p[key].abs().max().item<double>() <= bound);
    CHECK(p[key].std().item<double>() == doctest::Approx(bound / std::sqrt(3.0)).epsilon(0.1));
  }
  CHECK((p["layer3.0.conv2.weight"].sizes() == at::IntArrayRef{126, 198, 3, 3}));
  CHECK(p["layer3.0.bn3.weight"].min().item<double>() == 1.0);
  CHECK(p["layer1.1.bn3.weight"].min().item<double>() == 1.0);
  CHECK((p["fc.weight"].sizes() == at::IntArrayRef{1000, 2022}));
}

TEST_CASE("resnet forward_head without a classifier is the pre-logits features (plain and deep-stem SE bottleneck)") {
  timm::test::check_head_split("resnet18", 64);
  timm::test::check_head_split("seresnext26d_32x4d", 64);
}

TEST_CASE("resnet init follows timm: kaiming fan_out convs, last BN of each block zero") {
  at::manual_seed(0);
  timm::ModelPtr model = make_model("resnet50");
  const auto params = model->named_parameters();
  // kaiming_normal_(fan_out, relu): std = sqrt(2 / (out * kh * kw)).
  const at::Tensor w = params["layer3.0.conv2.weight"];  // 256 x 256 x 3 x 3
  const double expected_std = std::sqrt(2.0 / (256 * 9));
  CHECK(w.std().item<double>() == doctest::Approx(expected_std).epsilon(0.02));
  CHECK(params["layer3.0.bn3.weight"].abs().max().item<double>() == 0.0);
  CHECK(params["layer3.0.bn2.weight"].min().item<double>() == 1.0);
  CHECK(params["layer3.0.bn1.bias"].abs().max().item<double>() == 0.0);
  CHECK(params["fc.weight"].abs().max().item<double>() <= 1.0 / std::sqrt(2048.0));

  timm::ModelPtr basic = make_model("resnet18");
  CHECK(basic->named_parameters()["layer2.1.bn2.weight"].abs().max().item<double>() == 0.0);
}

TEST_CASE("resnet registry entries, parameter counts and pretrained_cfg match timm") {
  timm::test::load_builtin_plugins();
  // timm's numbers at num_classes=1000 (timm-spec §8.9).
  const std::vector<std::tuple<std::string, int64_t, size_t>> expected = {
      {"resnet18", 11'689'512, 122}, {"resnet34", 21'797'672, 218}, {"resnet50", 25'557'032, 320}};
  for (const auto& [name, params, entries] : expected) {
    CAPTURE(name);
    timm::ModelPtr model = make_model(name, 3, 1000);
    CHECK(timm::count_parameters(*model) == params);
    CHECK(timm::state_dict(*model).size() == entries);
    CHECK(model->num_classes() == 1000);
    const auto& cfg = model->pretrained_cfg();
    CHECK((cfg.input_size == std::vector<int64_t>{3, 224, 224}));
    CHECK(cfg.crop_pct == 0.95);
    CHECK(cfg.interpolation == "bicubic");
    CHECK(cfg.first_conv == "conv1");
    CHECK(cfg.classifier == "fc");
    CHECK(model->no_weight_decay().empty());
  }
  CHECK(make_model("resnet26")->pretrained_cfg().crop_pct == 0.875);
  for (const auto* name : {"resnet26", "resnet101", "resnet152"}) {
    CHECK(timm::Registry::global().find(timm::PluginKind::kModel, name) != nullptr);
  }
}

TEST_CASE("resnet head options: num_classes 0, global_pool, drop_rate") {
  c10::NoGradGuard no_grad;
  const at::Tensor x = at::randn({2, 3, 64, 64});

  timm::ModelPtr features = make_model("resnet18", 3, 0);
  features->eval();
  CHECK((features->forward(x).sizes() == at::IntArrayRef{2, 512}));
  CHECK(timm::state_dict(*features).size() == 120);  // no fc.weight, fc.bias

  timm::ModelArgs args;
  args.num_classes = 0;
  args.global_pool = "";
  timm::ModelPtr unpooled = timm::create_model("resnet18", args);
  unpooled->eval();
  CHECK((unpooled->forward(x).sizes() == at::IntArrayRef{2, 512, 2, 2}));

  args.num_classes = kNumClasses;
  args.global_pool = "catavgmax";
  timm::ModelPtr cat = timm::create_model("resnet18", args);
  CHECK((cat->named_parameters()["fc.weight"].sizes() == at::IntArrayRef{kNumClasses, 1024}));
  cat->eval();
  CHECK((cat->forward(x).sizes() == at::IntArrayRef{2, kNumClasses}));

  args.global_pool = std::nullopt;
  timm::test::check_head_dropout_gives_bias("resnet18", args, "fc.bias", x);
}

TEST_CASE("resnet rejects what it does not support") {
  timm::test::load_builtin_plugins();
  timm::ModelArgs args;
  args.kwargs["output_stride"] = "16";
  CHECK_THROWS_WITH_AS(timm::create_model("resnet50", args),
                       doctest::Contains("model 'resnet50' has no argument 'output_stride'"), timm::UsageError);
  args.kwargs = {{"drop_block_rate", "1.5"}};
  CHECK_THROWS_WITH_AS(timm::create_model("resnet50", args),
                       doctest::Contains("resnet50: drop_block_rate must be in [0, 1], got 1.5"), timm::UsageError);
  args.kwargs = {{"drop_block_rate", "0.1x"}};
  CHECK_THROWS_WITH_AS(timm::create_model("resnet50", args),
                       doctest::Contains("resnet50: drop_block_rate='0.1x': expected a number"), timm::UsageError);
  args.kwargs.clear();
  args.global_pool = "median";
  CHECK_THROWS_WITH_AS(timm::create_model("resnet50", args), doctest::Contains("'median'"), timm::UsageError);
  args.global_pool = std::nullopt;
  // The common checks (timm::validate_model_args) name the model, the argument, the value and the range.
  args.drop_path_rate = 1.5;
  CHECK_THROWS_WITH_AS(timm::create_model("resnet50", args),
                       doctest::Contains("resnet50: drop_path_rate must be in [0, 1], got 1.5"), timm::UsageError);
  args.drop_path_rate = std::nullopt;
  args.drop_rate = std::numeric_limits<double>::quiet_NaN();
  CHECK_THROWS_WITH_AS(timm::create_model("resnet50", args),
                       doctest::Contains("resnet50: drop_rate must be in [0, 1], got nan"), timm::UsageError);
  args.drop_rate = 0.0;
  args.num_classes = -1;
  CHECK_THROWS_WITH_AS(timm::create_model("resnet50", args),
                       doctest::Contains("resnet50: num_classes must be >= 0, got -1"), timm::UsageError);
  args.num_classes = 10;
  args.in_chans = 0;
  CHECK_THROWS_WITH_AS(timm::create_model("resnet50", args),
                       doctest::Contains("resnet50: in_chans must be >= 1, got 0"), timm::UsageError);
}

TEST_CASE("resnet DropBlock: in layer3 and layer4 only, no state, the identity in eval mode") {
  timm::test::load_builtin_plugins();
  timm::ModelArgs args;
  args.num_classes = kNumClasses;
  args.kwargs["drop_block_rate"] = "0.5";
  timm::ModelPtr dropped = timm::create_model("resnet18", args);
  timm::ModelPtr plain = make_model("resnet18");
  CHECK(timm::state_dict(*dropped).size() == timm::state_dict(*plain).size());
  std::vector<std::string> with_drop_block;
  for (const auto& item : dropped->named_modules()) {
    if (item.key().ends_with(".drop_block")) with_drop_block.push_back(item.key());
  }
  CHECK(with_drop_block == std::vector<std::string>{"layer3.0.drop_block", "layer3.1.drop_block", "layer4.0.drop_block",
                                                    "layer4.1.drop_block"});
  c10::NoGradGuard no_grad;
  // timm's init zeroes each block's last BN weight, which would cut the branch
  // holding the DropBlock off the output.
  for (auto& p : plain->parameters()) {
    if (p.dim() == 1) p.add_(at::rand_like(p) * 0.5 + 0.5);
  }
  timm::load_state_dict(*dropped, timm::state_dict(*plain), /*strict=*/true);
  const at::Tensor x = at::randn({2, 3, 96, 96});
  dropped->eval();
  plain->eval();
  CHECK(at::equal(dropped->forward(x), plain->forward(x)));
  dropped->train();
  plain->train();
  CHECK_FALSE(at::allclose(dropped->forward(x), plain->forward(x)));
}

TEST_CASE("load_state_dict on a resnet names every missing, unexpected and mis-shaped key") {
  timm::ModelPtr model = make_model("resnet18");
  timm::NamedTensors state = timm::state_dict(*make_model("resnet18"));
  state.erase(state.begin());                         // conv1.weight missing
  state.emplace_back("head.weight", at::zeros({1}));  // unexpected
  try {
    timm::load_state_dict(*model, state, /*strict=*/true);
    FAIL("expected an error");
  } catch (const timm::Error& e) {
    CHECK(std::string(e.what()).find("'conv1.weight'") != std::string::npos);
    CHECK(std::string(e.what()).find("'head.weight'") != std::string::npos);
  }
  const auto result = timm::load_state_dict(*model, state, /*strict=*/false);
  CHECK(result.missing_keys == std::vector<std::string>{"conv1.weight"});
  CHECK(result.unexpected_keys == std::vector<std::string>{"head.weight"});

  timm::NamedTensors wrong = timm::state_dict(*make_model("resnet18", 3, 7));
  CHECK_THROWS_WITH_AS(timm::load_state_dict(*model, wrong, /*strict=*/false),
                       doctest::Contains("'fc.weight': checkpoint has [7, 512], model has [10, 512]"), timm::Error);
}

TEST_CASE("every resnet: parameter counts, state_dict sizes, pretrained_cfg and --list-models 'se*' match timm") {
  // The state_dict's keys in order (so its size), shapes and dtypes, no_weight_decay, group_matcher and drop-path
  // rates too.
  std::vector<std::string> names = kVariants;
  names.insert(names.end(), kMoreVariants.begin(), kMoreVariants.end());
  const auto info = timm::test::check_registered("resnet_oracle.py", names, {"se*"}, kParity);
  // --list-models 'se*' goes through Registry::list: ours are timm's SE-ResNets, in timm's order.
  std::vector<std::string> timm_se;
  for (const auto& name : info.at("list").at("se*").get<std::vector<std::string>>()) {
    if (timm::Registry::global().find(timm::PluginKind::kModel, name) != nullptr) timm_se.push_back(name);
  }
  const auto ours = timm::Registry::global().list(timm::PluginKind::kModel, "se*");
  CHECK(ours == timm_se);
  for (const auto* name : {"seresnet18", "seresnet34", "seresnet50", "seresnext26d_32x4d", "seresnext50_32x4d"}) {
    CHECK(std::find(ours.begin(), ours.end(), name) != ours.end());
  }
}

TEST_CASE("resnet variant init follows timm: SE convs kaiming fan_out, last BN zero with SE, deep stem and avg-down") {
  at::manual_seed(0);
  timm::ModelPtr model = make_model("seresnext26d_32x4d");
  const auto params = model->named_parameters();
  // SE of layer3 (1024 channels): fc1 1024 -> 64, fc2 64 -> 1024, kaiming_normal_(fan_out).
  const at::Tensor fc1 = params["layer3.0.se.fc1.weight"];
  CHECK((fc1.sizes() == at::IntArrayRef{64, 1024, 1, 1}));
  CHECK(fc1.std().item<double>() == doctest::Approx(std::sqrt(2.0 / 64)).epsilon(0.05));
  const at::Tensor fc2 = params["layer3.0.se.fc2.weight"];
  CHECK(fc2.std().item<double>() == doctest::Approx(std::sqrt(2.0 / 1024)).epsilon(0.05));
  // Conv2d default bias: U(-1/sqrt(fan_in), 1/sqrt(fan_in)), not zero.
  const at::Tensor b1 = params["layer3.0.se.fc1.bias"];
  CHECK(b1.abs().max().item<double>() <= 1.0 / std::sqrt(1024.0));
  CHECK(b1.abs().max().item<double>() > 0.0);
  // zero_init_last still zeroes bn3 (before the SE).
  CHECK(params["layer3.0.bn3.weight"].abs().max().item<double>() == 0.0);
  // Grouped 3x3: width 128 * 4 / 64 * 32 = 256 in layer2, 32 groups.
  CHECK((params["layer2.0.conv2.weight"].sizes() == at::IntArrayRef{256, 8, 3, 3}));
  // Deep stem and avg-down keys.
  CHECK((params["conv1.0.weight"].sizes() == at::IntArrayRef{32, 3, 3, 3}));
  CHECK((params["conv1.6.weight"].sizes() == at::IntArrayRef{64, 32, 3, 3}));
  CHECK((params["layer1.0.downsample.1.weight"].sizes() == at::IntArrayRef{256, 64, 1, 1}));
  CHECK((params["layer2.0.downsample.2.weight"].sizes() == at::IntArrayRef{512}));

  timm::ModelPtr basic = make_model("seresnet18");
  const auto basic_params = basic->named_parameters();
  CHECK(basic_params["layer2.1.bn2.weight"].abs().max().item<double>() == 0.0);
  CHECK((basic_params["layer1.0.se.fc1.weight"].sizes() == at::IntArrayRef{8, 64, 1, 1}));
  CHECK((basic_params["layer4.0.se.fc1.weight"].sizes() == at::IntArrayRef{32, 512, 1, 1}));
}

TEST_CASE("resnet stems, ECA and the ResNet-RS stem pool: timm's shapes and init") {
  at::manual_seed(0);
  timm::ModelPtr eca = make_model("ecaresnet26t");
  const auto p = eca->named_parameters();
  // Tiered deep stem 24, 32, 64.
  CHECK((p["conv1.0.weight"].sizes() == at::IntArrayRef{24, 3, 3, 3}));
  CHECK((p["conv1.3.weight"].sizes() == at::IntArrayRef{32, 24, 3, 3}));
  CHECK((p["conv1.6.weight"].sizes() == at::IntArrayRef{64, 32, 3, 3}));
  // ECA kernels adapt to the channels: 256 .. 1024 -> 5, 2048 -> 7; no SE keys.
  CHECK((p["layer1.0.se.conv.weight"].sizes() == at::IntArrayRef{1, 1, 5}));
  CHECK((p["layer3.1.se.conv.weight"].sizes() == at::IntArrayRef{1, 1, 5}));
  CHECK((p["layer4.0.se.conv.weight"].sizes() == at::IntArrayRef{1, 1, 7}));
  CHECK_FALSE(p.contains("layer1.0.se.fc1.weight"));
  // timm's init_weights touches only Conv2d: the ECA's Conv1d keeps torch's
  // default U(-1/sqrt(5), 1/sqrt(5)); kaiming (std sqrt(2/5)) would exceed it.
  for (const auto* stage : {"layer1", "layer2", "layer3"}) {
    for (const auto* block : {"0", "1"}) {
      const at::Tensor w = p[std::string(stage) + "." + block + ".se.conv.weight"];
      CHECK(w.abs().max().item<double>() <= 1.0 / std::sqrt(5.0));
    }
  }
  CHECK(p["layer3.0.bn3.weight"].abs().max().item<double>() == 0.0);

  // 's': deep stem 64, 64, 128 without avg-down, so layer1 takes 128 channels
  // through a strided-conv shortcut.
  timm::ModelPtr s = make_model("resnet50s");
  const auto sp = s->named_parameters();
  CHECK((sp["conv1.6.weight"].sizes() == at::IntArrayRef{128, 64, 3, 3}));
  CHECK((sp["bn1.weight"].sizes() == at::IntArrayRef{128}));
  CHECK((sp["layer1.0.conv1.weight"].sizes() == at::IntArrayRef{64, 128, 1, 1}));
  CHECK((sp["layer1.0.downsample.0.weight"].sizes() == at::IntArrayRef{256, 128, 1, 1}));
  CHECK((sp["layer2.0.downsample.0.weight"].sizes() == at::IntArrayRef{512, 256, 1, 1}));

  // Wide: bottleneck width planes * 128 / 64.
  timm::ModelPtr wide = make_model("wide_resnet50_2");
  const auto wp = wide->named_parameters();
  CHECK((wp["layer1.0.conv2.weight"].sizes() == at::IntArrayRef{128, 128, 3, 3}));
  CHECK((wp["layer4.0.conv3.weight"].sizes() == at::IntArrayRef{2048, 1024, 1, 1}));

  // ResNet-RS: the stem pool is a strided 3x3 conv (kaiming fan_out), BN, ReLU;
  // SE at rd_ratio 0.25.
  timm::ModelPtr rs = make_model("resnetrs50");
  const auto rp = rs->named_parameters();
  const at::Tensor pool_conv = rp["maxpool.0.weight"];
  CHECK((pool_conv.sizes() == at::IntArrayRef{64, 64, 3, 3}));
  CHECK(pool_conv.std().item<double>() == doctest::Approx(std::sqrt(2.0 / (64 * 9))).epsilon(0.05));
  CHECK(rp["maxpool.1.weight"].min().item<double>() == 1.0);
  CHECK((rp["layer1.0.se.fc1.weight"].sizes() == at::IntArrayRef{64, 256, 1, 1}));
  CHECK((rp["layer4.0.se.fc1.weight"].sizes() == at::IntArrayRef{512, 2048, 1, 1}));
  c10::NoGradGuard no_grad;
  rs->eval();
  CHECK((rs->forward_features(at::randn({1, 3, 64, 64})).sizes() == at::IntArrayRef{1, 2048, 2, 2}));
}

TEST_CASE("EcaModule: timm's adaptive kernel size, a gate from a 1-d conv over the pooled channels") {
  using timm::layers::eca_kernel_size;
  CHECK(eca_kernel_size(1) == 3);
  CHECK(eca_kernel_size(64) == 3);
  CHECK(eca_kernel_size(128) == 5);  // log2 + 1 = 8 exactly: even, bumped to 5
  CHECK(eca_kernel_size(1024) == 5);
  CHECK(eca_kernel_size(2048) == 7);
  CHECK(eca_kernel_size(2048, 3.0, 1.0) == 5);  // t = 4 -> 5
  timm::layers::EcaModule eca(timm::layers::EcaModuleOptions(256));
  CHECK(eca->kernel_size() == 5);
  CHECK(timm::state_dict(*eca).size() == 1);
  c10::NoGradGuard no_grad;
  const at::Tensor x = at::randn({2, 256, 3, 3});
  const at::Tensor pooled = x.mean({2, 3}).unsqueeze(1);  // (N, 1, C)
  const at::Tensor gate = at::sigmoid(at::conv1d(pooled, eca->conv->weight, {}, {1}, {2})).view({2, 256, 1, 1});
  CHECK(at::allclose(eca->forward(x), x * gate));
  timm::layers::EcaModule fixed(timm::layers::EcaModuleOptions().kernel_size(7));
  CHECK((fixed->conv->weight.sizes() == at::IntArrayRef{1, 1, 7}));
  CHECK_THROWS_AS(timm::layers::EcaModule(timm::layers::EcaModuleOptions().kernel_size(4)), timm::UsageError);
  CHECK_THROWS_AS(timm::layers::EcaModule(timm::layers::EcaModuleOptions(0)), timm::UsageError);
}

TEST_CASE("make_divisible follows timm's rounding") {
  using timm::layers::make_divisible;
  CHECK(make_divisible(4.0, 8, std::nullopt, 0.0) == 8);    // min_value = divisor
  CHECK(make_divisible(12.0, 8, std::nullopt, 0.0) == 16);  // halves round up
  CHECK(make_divisible(11.9, 8, std::nullopt, 0.0) == 8);
  CHECK(make_divisible(128.0, 8, std::nullopt, 0.0) == 128);
  CHECK(make_divisible(20.0, 8) == 24);
  CHECK(make_divisible(17.0, 8) == 16);
  CHECK(make_divisible(11.0, 8) == 16);  // 8 < 0.9 * 11 -> bumped
  CHECK(make_divisible(3.0, 8, 4, 0.9) == 4);
  timm::layers::SEModule se(timm::layers::SEModuleOptions(256));
  CHECK(se->rd_channels() == 16);
  const at::Tensor x = at::randn({2, 256, 3, 3});
  CHECK((se->forward(x).sizes() == x.sizes()));
}

TEST_CASE("resnet --grad-checkpointing: each block of layer1..layer4 checkpointed, the plain step's gradients") {
  // resnet18 at 32 px with drop path: the blocks' masks are drawn again in the rerun.
  timm::test::check_grad_checkpointing("resnet18", 32, 32);
}

}  // namespace test_resnet
