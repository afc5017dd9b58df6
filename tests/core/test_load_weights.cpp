// Weights written by Python's torch.save (tests/oracle/torch_checkpoint_oracle.py)
// load here as timm's load_checkpoint / load_pretrained would load them, and
// give Python's logits; malformed files give an Error naming the file and the
// problem. Tolerance for logits: |ours - timm| <= kAtol + kRtol * |timm| (one
// thread on both sides, where they agree to float rounding).
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include "test_support.hpp"
#include "timm/base/error.hpp"
#include "timm/io/atomic_file.hpp"
#include "timm/io/safetensors.hpp"
#include "timm/io/torch_file.hpp"
#include "timm/models/load_weights.hpp"
#include "timm/models/model.hpp"
#include "timm/models/state_dict.hpp"

// Last: c10/util/Logging.h defines a CHECK macro that doctest must override.
#include <doctest/doctest.h>

namespace test_load_weights {

namespace {

constexpr double kAtol = 1e-4;
constexpr double kRtol = 1e-4;
constexpr const char* kModel = "resnet18";
constexpr int64_t kNumClasses = 10;

using timm::test::ThreadCount;

// The oracle's files, written once for all test cases.
const timm::test::TempDir& oracle_dir() {
  static timm::test::TempDir dir;
  static const bool written = [] {
    MESSAGE(timm::test::run_oracle(
        "torch_checkpoint_oracle.py",
        {"write", "--dir", dir.path().string(), "--model", kModel, "--num-classes", std::to_string(kNumClasses)}));
    return true;
  }();
  (void)written;
  return dir;
}

at::Tensor expected(const std::string& key) {
  for (const auto& [name, tensor] : timm::read_safetensors(oracle_dir() / "expected.safetensors")) {
    if (name == key) return tensor;
  }
  throw std::runtime_error("expected.safetensors has no " + key);
}

timm::ModelPtr make(int64_t num_classes = kNumClasses, int64_t in_chans = 3, const std::string& name = kModel) {
  timm::test::load_builtin_plugins();
  timm::ModelArgs args;
  args.num_classes = num_classes;
  args.in_chans = in_chans;
  return timm::create_model(name, args);
}

at::Tensor eval_logits(timm::ClassifierImpl& model) {
  c10::NoGradGuard no_grad;
  model.eval();
  return model.forward(expected("input"));
}

void check_logits(const at::Tensor& ours, const at::Tensor& theirs, const std::string& what) {
  const double diff = (ours - theirs).abs().max().item<double>();
  MESSAGE(what << ": logits max abs diff " << diff << " (atol " << kAtol << ", rtol " << kRtol << ")");
  CHECK_MESSAGE(at::allclose(ours, theirs, kRtol, kAtol), what);
}

std::string error_of(const std::string& file) {
  try {
    timm::ModelPtr model = make();
    timm::load_checkpoint(*model, oracle_dir() / file);
  } catch (const timm::Error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("torch.save'd state_dicts and timm training checkpoints load with Python's logits") {
  const ThreadCount one_thread(1);
  struct Case {
    std::string file;
    bool use_ema;
    std::string logits;
  };
  const std::vector<Case> cases = {
      {"state_dict.pth", true, "logits"},                // an OrderedDict at the top level
      {"state_dict_p4.pth", true, "logits"},             // pickle protocol 4
      {"ddp_model.pth", true, "logits"},                 // {'model': ...} with 'module.' prefixes
      {"train_checkpoint.pth.tar", true, "logits_ema"},  // timm prefers state_dict_ema
      {"train_checkpoint.pth.tar", false, "logits"},     // ... unless use_ema is off
  };
  for (const auto& c : cases) {
    CAPTURE(c.file);
    CAPTURE(c.use_ema);
    timm::ModelPtr model = make();
    const auto result = timm::load_checkpoint(*model, oracle_dir() / c.file, c.use_ema);
    CHECK(result.missing_keys.empty());
    CHECK(result.unexpected_keys.empty());
    check_logits(eval_logits(*model), expected(c.logits), c.file);
  }
}

TEST_CASE("read_torch_file keeps what a loader needs and ignores the rest of a checkpoint") {
  const timm::TorchFile file = timm::read_torch_file(oracle_dir() / "train_checkpoint.pth.tar");
  CHECK(file.is_dict);
  CHECK(file.keys == std::vector<std::string>{"epoch", "arch", "state_dict", "optimizer", "version", "args", "metric",
                                              "state_dict_ema"});
  std::vector<std::string> names;
  for (const auto& [name, tensors] : file.state_dicts) names.push_back(name);
  CHECK(names == std::vector<std::string>{"state_dict", "state_dict_ema"});
  CHECK(file.tensors.empty());
  // Same keys, order and shapes as our model's state_dict (timm's), and int64 BN counters.
  const auto ours = timm::state_dict(*make());
  const auto& theirs = file.state_dicts[0].second;
  REQUIRE(theirs.size() == ours.size());
  for (size_t i = 0; i < ours.size(); ++i) {
    CHECK(theirs[i].first == ours[i].first);
    CHECK((theirs[i].second.sizes() == ours[i].second.sizes()));
    CHECK((theirs[i].second.scalar_type() == ours[i].second.scalar_type()));
  }
}

TEST_CASE("--pretrained-path semantics: the head is never loaded, the stem adapts to in_chans") {
  const ThreadCount one_thread(1);
  // Another class count: everything but fc comes from the file, fc keeps its fresh init.
  timm::ModelPtr model = make(7);
  const at::Tensor fresh_fc = model->named_parameters()["fc.weight"].clone();
  timm::load_pretrained_file(*model, oracle_dir() / "state_dict.pth", 3);
  const auto file = timm::load_state_dict_file(oracle_dir() / "state_dict.pth");
  const auto params = model->named_parameters();
  CHECK(at::equal(params["fc.weight"], fresh_fc));
  for (const auto& [key, tensor] : file) {
    if (key.rfind("fc.", 0) == 0) continue;
    const auto own = timm::state_dict(*model);
    for (const auto& [name, value] : own) {
      if (name == key) CHECK_MESSAGE(at::equal(value, tensor), key);
    }
  }
  // The same class count: timm still drops the head (num_classes=-1 in train.py's overlay).
  timm::ModelPtr same = make(kNumClasses);
  const at::Tensor same_fc = same->named_parameters()["fc.bias"].clone();
  timm::load_pretrained_file(*same, oracle_dir() / "state_dict.pth", 3);
  CHECK(at::equal(same->named_parameters()["fc.bias"], same_fc));

  // timm's adapt_input_conv for 1 and 5 input channels.
  for (int64_t chans : {1, 5}) {
    CAPTURE(chans);
    timm::ModelPtr adapted = make(kNumClasses, chans);
    timm::load_pretrained_file(*adapted, oracle_dir() / "state_dict.pth", chans);
    const at::Tensor stem = adapted->named_parameters()["conv1.weight"];
    const at::Tensor want = expected("adapted_stem_c" + std::to_string(chans));
    CHECK((stem.sizes() == want.sizes()));
    CHECK(at::allclose(stem, want, 1e-6, 1e-7));
  }
}

TEST_CASE("strict loading names every missing, unexpected and mis-shaped key, and the file") {
  timm::ModelPtr model = make(5);  // fc has 5 classes, the file 10
  try {
    timm::load_checkpoint(*model, oracle_dir() / "state_dict.pth");
    FAIL("expected an error");
  } catch (const timm::Error& e) {
    const std::string message = e.what();
    CHECK(message.find("state_dict.pth") != std::string::npos);
    CHECK(message.find("'fc.weight': checkpoint has [10, 512], model has [5, 512]") != std::string::npos);
  }
  timm::ModelPtr resnet34 = make(kNumClasses, 3, "resnet34");
  try {
    timm::load_checkpoint(*resnet34, oracle_dir() / "state_dict.pth");
    FAIL("expected an error");
  } catch (const timm::Error& e) {
    const std::string message = e.what();
    CHECK(message.find("missing keys") != std::string::npos);
    CHECK(message.find("'layer1.2.conv1.weight'") != std::string::npos);
  }
  // A failed load leaves the model untouched.
  timm::ModelPtr fresh = make(5);
  const at::Tensor before = fresh->named_parameters()["conv1.weight"].clone();
  CHECK_THROWS_AS(timm::load_checkpoint(*fresh, oracle_dir() / "state_dict.pth"), timm::Error);
  CHECK(at::equal(fresh->named_parameters()["conv1.weight"], before));
}

TEST_CASE("malformed and unsupported files give an Error naming the file and the problem") {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"legacy.pth", "legacy (pre-1.6, non-zip) torch.save format is not supported"},
      {"list.pth", "expected a dict"},
      {"no_state_dict.pth", "holds no state_dict"},
      {"bad_opcode.pth", "unsupported pickle opcode 0xff at offset 2"},
      {"truncated_pickle.pth", "data.pkl is truncated"},
      {"short_storage.pth", "holds 8 bytes, fewer than"},
      {"missing.pth", "no such file"},
      {"expected.safetensors", ""},  // a safetensors file with no model keys: strict key error
  };
  for (const auto& [file, problem] : cases) {
    CAPTURE(file);
    const std::string message = error_of(file);
    CHECK(message.find(file) != std::string::npos);
    if (!problem.empty()) CHECK_MESSAGE(message.find(problem) != std::string::npos, message);
  }
  CHECK(error_of("no_state_dict.pth").find("its keys: 'epoch', 'args'") != std::string::npos);
  // Not a zip at all.
  timm::test::TempDir dir;
  timm::write_file_atomically(dir / "text.pth", "hello");
  CHECK_THROWS_WITH_AS(timm::read_torch_file(dir / "text.pth"), doctest::Contains("not a torch.save zip archive"),
                       timm::Error);
}

TEST_CASE("randomly corrupted pickles are read or refused with an Error, never a crash") {
  int refused = 0;
  for (int i = 0; i < 200; ++i) {
    const auto file = oracle_dir() / ("fuzz" + std::to_string(i) + ".pth");
    try {
      timm::read_torch_file(file);
    } catch (const timm::Error& e) {
      ++refused;
      CHECK(std::string(e.what()).find(file.string()) != std::string::npos);
    }
  }
  MESSAGE(refused << " of 200 corrupted files refused, the others read");
  CHECK(refused > 0);
}

TEST_CASE("clean_state_dict strips timm's wrapper prefixes") {
  const at::Tensor t = at::zeros({1});
  const auto cleaned = timm::clean_state_dict(
      {{"module.a", t}, {"_orig_mod.module.b", t}, {"module._orig_mod.c", t}, {"d.module.e", t}});
  std::vector<std::string> keys;
  for (const auto& [key, tensor] : cleaned) keys.push_back(key);
  CHECK(keys == std::vector<std::string>{"a", "b", "c", "d.module.e"});
}

}  // namespace test_load_weights
