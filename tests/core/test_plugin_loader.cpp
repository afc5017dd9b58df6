// The plugin loader against fixture plugins, one failure mode each.
#include <doctest/doctest.h>

#include <filesystem>
#include <string>

#include "test_support.hpp"
#include "timm/base/error.hpp"
#include "timm/plugin/plugin.hpp"
#include "timm/plugin/loader.hpp"
#include "timm/plugin/registry.hpp"
#include "timm/models/model.hpp"

namespace fs = std::filesystem;
using timm::PluginKind;
using timm::PluginLoader;
using timm::Registry;

namespace {

fs::path fixture(const std::string& name) { return timm::test::fixture_dir() / name; }
fs::path fixture_so(const std::string& name) { return fixture(name) / (name + ".so"); }

// The message of the timm::Error that `f` throws; fails the test if none.
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const timm::Error& e) {
    return e.what();
  }
  FAIL("expected a timm::Error");
  return "";
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("a good plugin registers its models with their origin") {
  Registry registry;
  PluginLoader loader(registry);
  loader.load_directory(fixture("fixture_good"), /*required=*/true);
  REQUIRE(loader.loaded().size() == 1);
  CHECK(loader.loaded()[0].name == "fixture_good");
  const timm::RegistryEntry* entry = registry.find(PluginKind::kModel, "fixture_tiny");
  REQUIRE(entry != nullptr);
  CHECK(entry->origin == fs::canonical(fixture_so("fixture_good")).string());
  CHECK(entry->description == "A tiny linear classifier for loader tests");

  const auto& factory = registry.factory<timm::ModelFactory>(PluginKind::kModel, "fixture_tiny");
  timm::ModelArgs args;
  args.num_classes = 4;
  timm::ModelPtr model = factory(args);
  CHECK(model->forward(torch::ones({2, 3, 8, 8})).sizes() == torch::IntArrayRef({2, 4}));

  // Loading the same file again is a no-op, not a duplicate.
  loader.load_file(fixture_so("fixture_good"));
  CHECK(registry.size() == 2);
}

TEST_CASE("a file that is not a shared library is refused with the reason") {
  Registry registry;
  PluginLoader loader(registry);
  const std::string message = error_of([&] { loader.load_file(fixture("fixture_not_elf") / "not_a_library.so"); });
  CHECK(contains(message, "not_a_library.so"));
  CHECK(contains(message, "cannot load"));
}

TEST_CASE("a shared library without the entry point is refused") {
  Registry registry;
  PluginLoader loader(registry);
  const std::string message = error_of([&] { loader.load_file(fixture_so("fixture_no_entry")); });
  CHECK(contains(message, "fixture_no_entry.so"));
  CHECK(contains(message, "missing entry point 'timm_plugin_v1'"));
}

TEST_CASE("a plugin built for another SDK ABI is refused with both versions") {
  Registry registry;
  PluginLoader loader(registry);
  const std::string message = error_of([&] { loader.load_file(fixture_so("fixture_wrong_abi")); });
  CHECK(contains(message, "fixture_wrong_abi.so"));
  CHECK(contains(message, "SDK ABI version " + std::to_string(timm::kSdkAbiVersion + 1)));
  CHECK(contains(message, "this timm-cpp has SDK ABI version " + std::to_string(timm::kSdkAbiVersion)));
  CHECK(registry.size() == 0);
}

TEST_CASE("a plugin built against another torch is refused with both versions") {
  Registry registry;
  PluginLoader loader(registry);
  const std::string message = error_of([&] { loader.load_file(fixture_so("fixture_wrong_torch")); });
  CHECK(contains(message, "built against torch 1.13.1"));
  CHECK(contains(message, std::string("uses torch ") + TORCH_VERSION));
}

TEST_CASE("a duplicate name across plugins names both files") {
  Registry registry;
  PluginLoader loader(registry);
  loader.load_file(fixture_so("fixture_duplicate_a"));
  const std::string message = error_of([&] { loader.load_file(fixture_so("fixture_duplicate_b")); });
  CHECK(contains(message, "duplicate model name 'fixture_duplicate'"));
  CHECK(contains(message, "fixture_duplicate_a.so"));
  CHECK(contains(message, "fixture_duplicate_b.so"));
}

TEST_CASE("a duplicate name within one plugin registers nothing of it") {
  Registry registry;
  PluginLoader loader(registry);
  const std::string message = error_of([&] { loader.load_file(fixture_so("fixture_duplicate_within")); });
  CHECK(contains(message, "duplicate model name 'fixture_within'"));
  CHECK(registry.find(PluginKind::kModel, "fixture_within_ok") == nullptr);
  CHECK(loader.loaded().empty());
}

TEST_CASE("a registration that throws names the file and registers nothing") {
  Registry registry;
  PluginLoader loader(registry);
  const std::string message = error_of([&] { loader.load_file(fixture_so("fixture_throws")); });
  CHECK(contains(message, "fixture_throws.so"));
  CHECK(contains(message, "registration failed: cannot initialise the fixture"));
  CHECK(registry.find(PluginKind::kModel, "fixture_before_throw") == nullptr);
}

TEST_CASE("an unknown name suggests the nearest known names") {
  Registry registry;
  PluginLoader loader(registry);
  loader.load_directory(fixture("fixture_good"), true);
  const std::string message = error_of([&] { registry.get(PluginKind::kModel, "fixture_tin"); });
  CHECK(contains(message, "unknown model 'fixture_tin'"));
  CHECK(contains(message, "did you mean 'fixture_tiny'"));
  CHECK_THROWS_AS(registry.get(PluginKind::kModel, "fixture_tin"), timm::UsageError);
  const std::string none = error_of([&] { registry.get(PluginKind::kOptimizer, "sgd"); });
  CHECK(contains(none, "no optimizer plugins are loaded"));
}

TEST_CASE("listing uses timm's wildcards and natural order") {
  Registry registry;
  PluginLoader loader(registry);
  loader.load_directory(fixture("fixture_good"), true);
  CHECK(registry.list(PluginKind::kModel, "fixture_tiny*") ==
        std::vector<std::string>{"fixture_tiny", "fixture_tiny2"});
  CHECK(registry.list(PluginKind::kModel, "fixture_tiny?") == std::vector<std::string>{"fixture_tiny2"});
  CHECK(registry.list(PluginKind::kModel, "nothing*").empty());
}

TEST_CASE("a folder the user named must exist") {
  Registry registry;
  PluginLoader loader(registry);
  const std::string message = error_of([&] { loader.load_directory("/nonexistent/plugins", true); });
  CHECK(contains(message, "plugin folder '/nonexistent/plugins' does not exist"));
  loader.load_directory("/nonexistent/plugins", false);  // a default folder may be missing
}
