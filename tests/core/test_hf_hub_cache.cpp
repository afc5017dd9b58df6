// --pretrained: the model's default weights (pretrained_cfg().hf_hub_id) found
// in a Hugging Face hub cache laid out as huggingface_hub does, and loaded as
// timm's load_pretrained loads them. The oracle (hub_cache_oracle.py) writes
// the cache and loads it with Python timm offline; every tensor timm takes
// from the file must be ours, bit for bit, and the head and stem adapt as
// timm's do.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

#include <ATen/ATen.h>

#include "test_support.hpp"
#include "timm/base/error.hpp"
#include "timm/io/safetensors.hpp"
#include "timm/models/hf_hub_cache.hpp"
#include "timm/models/load_weights.hpp"
#include "timm/models/model.hpp"
#include "timm/models/state_dict.hpp"

// Last: c10/util/Logging.h defines a CHECK macro that doctest must override.
#include <doctest/doctest.h>

namespace test_hf_hub_cache {

namespace {

namespace fs = std::filesystem;

constexpr const char* kModel = "resnet18";
constexpr const char* kHubId = "timm/resnet18.a1_in1k";
constexpr const char* kRepo = "models--timm--resnet18.a1_in1k";
constexpr const char* kCommit = "0123456789abcdef0123456789abcdef01234567";

// Sets an environment variable for one scope, restoring the old value.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::optional<std::string>& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    set(value);
  }
  ~ScopedEnv() { set(old_); }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  void set(const std::optional<std::string>& value) {
    if (value) {
      ::setenv(name_, value->c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }
  const char* name_;
  std::optional<std::string> old_;
};

// The oracle's cache and what timm loaded from it, made once per process.
struct Oracle {
  timm::test::TempDir dir;
  fs::path cache = dir.path() / "cache";
  fs::path out = dir.path() / "out";
  std::string hub_id;
  Oracle() {
    hub_id = timm::test::run_oracle("hub_cache_oracle.py", {"make", cache.string(), kModel, out.string()});
    while (!hub_id.empty() && (hub_id.back() == '\n' || hub_id.back() == '\r')) hub_id.pop_back();
  }
  timm::NamedTensors loaded(int64_t num_classes, int64_t in_chans) const {
    return timm::read_safetensors(
        out / ("loaded_" + std::to_string(num_classes) + "_" + std::to_string(in_chans) + ".safetensors"));
  }
};

const Oracle& oracle() {
  static const Oracle instance;
  return instance;
}

timm::ModelPtr make(const std::string& name, int64_t num_classes, int64_t in_chans) {
  timm::test::load_builtin_plugins();
  timm::ModelArgs args;
  args.num_classes = num_classes;
  args.in_chans = in_chans;
  return timm::create_model(name, args);
}

const at::Tensor* find(const timm::NamedTensors& tensors, const std::string& key) {
  for (const auto& [name, tensor] : tensors) {
    if (name == key) return &tensor;
  }
  return nullptr;
}

void touch(const fs::path& path) {
  fs::create_directories(path.parent_path());
  std::ofstream(path) << "x";
}

}  // namespace

TEST_CASE("the hub cache folder is found as huggingface_hub finds it") {
  const ScopedEnv hub("HF_HUB_CACHE", std::nullopt), legacy("HUGGINGFACE_HUB_CACHE", std::nullopt);
  const ScopedEnv home("HF_HOME", std::nullopt), xdg("XDG_CACHE_HOME", std::nullopt), user("HOME", "/home/u");
  CHECK(timm::hf_hub_cache_dir() == fs::path("/home/u/.cache/huggingface/hub"));
  {
    const ScopedEnv set_xdg("XDG_CACHE_HOME", "/xdg");
    CHECK(timm::hf_hub_cache_dir() == fs::path("/xdg/huggingface/hub"));
    const ScopedEnv set_home("HF_HOME", "/hf");
    CHECK(timm::hf_hub_cache_dir() == fs::path("/hf/hub"));
    const ScopedEnv set_legacy("HUGGINGFACE_HUB_CACHE", "/legacy");
    CHECK(timm::hf_hub_cache_dir() == fs::path("/legacy"));
    const ScopedEnv set_hub("HF_HUB_CACHE", "/hub");
    CHECK(timm::hf_hub_cache_dir() == fs::path("/hub"));
  }
}

TEST_CASE("every model names timm's default pretrained weights") {
  // model_parity.hpp's check_registered compares every model's hf_hub_id with
  // timm's; here the id this test's cache is built for.
  CHECK(make(kModel, 1000, 3)->pretrained_cfg().hf_hub_id == oracle().hub_id);
  CHECK(oracle().hub_id == kHubId);
  CHECK(make("seresnet18", 1000, 3)->pretrained_cfg().hf_hub_id.empty());  // timm has no weights for it
}

TEST_CASE("find_hf_cached_weights takes refs/main's snapshot, safetensors first") {
  const timm::test::TempDir dir;
  const fs::path repo = dir.path() / kRepo;
  const fs::path other = repo / "snapshots" / "ffffffffffffffffffffffffffffffffffffffff";
  touch(other / "model.safetensors");
  CHECK(timm::find_hf_cached_weights(kHubId, dir.path()) == other / "model.safetensors");  // the only snapshot
  const fs::path main = repo / "snapshots" / kCommit;
  touch(main / "pytorch_model.bin");
  CHECK_THROWS_WITH_AS(timm::find_hf_cached_weights(kHubId, dir.path()), doctest::Contains("no refs/main"),
                       timm::Error);
  touch(repo / "refs" / "main");
  std::ofstream(repo / "refs" / "main") << kCommit;
  CHECK(timm::find_hf_cached_weights(kHubId, dir.path()) == main / "pytorch_model.bin");
  touch(main / "model.safetensors");
  CHECK(timm::find_hf_cached_weights(kHubId, dir.path()) == main / "model.safetensors");
}

TEST_CASE("a weights file missing from the cache, or a bad hub id, names what was looked for") {
  const timm::test::TempDir dir;
  CHECK_THROWS_WITH_AS(timm::find_hf_cached_weights(kHubId, dir.path()),
                       doctest::Contains((dir.path() / kRepo / "snapshots").string().c_str()), timm::Error);
  CHECK_THROWS_WITH_AS(timm::find_hf_cached_weights(kHubId, dir.path()), doctest::Contains("--pretrained-path"),
                       timm::Error);
  for (const char* bad : {"resnet18", "/resnet18", "timm/", "a/b/c", "timm/../x"}) {
    CAPTURE(bad);
    CHECK_THROWS_AS(timm::find_hf_cached_weights(bad, dir.path()), timm::UsageError);
  }
  const ScopedEnv hub("HF_HUB_CACHE", dir.path().string());
  timm::ModelPtr model = make("seresnet18", 1000, 3);
  CHECK_THROWS_WITH_AS(timm::load_hub_pretrained(*model, "seresnet18", 3, 1000),
                       doctest::Contains("timm has no pretrained weights for model 'seresnet18'"), timm::Error);
}

TEST_CASE("--pretrained loads what timm loads: the head for 1000 classes, a fresh one otherwise, the stem adapted") {
  const ScopedEnv hub("HF_HUB_CACHE", oracle().cache.string());
  for (int64_t num_classes : {1000, 10}) {
    for (int64_t in_chans : {3, 1}) {
      CAPTURE(num_classes);
      CAPTURE(in_chans);
      timm::ModelPtr model = make(kModel, num_classes, in_chans);
      const at::Tensor fresh_fc = model->named_parameters()["fc.weight"].clone();
      timm::load_hub_pretrained(*model, kModel, in_chans, num_classes);
      const timm::NamedTensors timm_loaded = oracle().loaded(num_classes, in_chans);
      const timm::NamedTensors ours = timm::state_dict(*model);
      REQUIRE(ours.size() == timm_loaded.size());
      for (const auto& [key, tensor] : ours) {
        CAPTURE(key);
        const at::Tensor* theirs = find(timm_loaded, key);
        REQUIRE(theirs != nullptr);
        if (num_classes != 1000 && key.rfind("fc.", 0) == 0) continue;  // fresh on both sides
        CHECK(at::equal(tensor, *theirs));
      }
      const at::Tensor fc = model->named_parameters()["fc.weight"];
      CHECK(at::equal(fc, fresh_fc) == (num_classes != 1000));
    }
  }
}

}  // namespace test_hf_hub_cache
