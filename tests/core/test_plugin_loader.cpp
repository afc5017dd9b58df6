// The plugin loader against fixture plugins, one failure mode each, and the
// checks it makes before opening anything: who may write the file and its
// folder, what is a plugin file, relative folders, all failures in one error.
#include <dlfcn.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <any>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "env_var.hpp"
#include "test_support.hpp"
#include "timm/base/error.hpp"
#include "timm/models/model.hpp"
#include "timm/plugin/loader.hpp"
#include "timm/plugin/plugin.hpp"
#include "timm/plugin/registry.hpp"

#include <doctest/doctest.h>

namespace test_plugin_loader {

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

// A model that implements only what ClassifierImpl requires.
class BareModelImpl : public timm::ClassifierImpl {
 public:
  torch::Tensor forward(torch::Tensor x) override { return x; }
  int64_t num_classes() const override { return 0; }
  const timm::PretrainedCfg& pretrained_cfg() const override { return cfg_; }

 private:
  timm::PretrainedCfg cfg_;
};

// An entry with no factory, for the registry's name checks and lookups.
timm::RegistryEntry entry_of(PluginKind kind, std::string name, std::string origin = "<test>", std::any traits = {}) {
  return timm::RegistryEntry{kind, std::move(name), "", std::move(origin), std::any(), std::move(traits)};
}

void set_mode(const fs::path& path, unsigned mode) {
  fs::permissions(path, static_cast<fs::perms>(mode), fs::perm_options::replace);
}

// The canonical path of a fresh folder `name` under `tmp`, mode 0755 whatever
// the umask (so that only what a test changes is untrusted).
fs::path make_folder(const timm::test::TempDir& tmp, const std::string& name) {
  set_mode(tmp.path(), 0755);
  const fs::path dir = fs::canonical(tmp.path()) / name;
  fs::create_directories(dir);
  set_mode(dir, 0755);
  return dir;
}

// Copies the library of fixture `name` into `dir` as `as` (default: its own
// file name), mode 0755; returns the copy's path.
fs::path copy_fixture(const std::string& name, const fs::path& dir, const std::string& as = "") {
  const fs::path to = dir / (as.empty() ? name + ".so" : as);
  fs::copy_file(fixture_so(name), to);
  set_mode(to, 0755);
  return to;
}

// Whether the dynamic linker has `path` open (RTLD_NOLOAD opens nothing).
bool is_open(const fs::path& path) {
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_NOLOAD);
  if (handle == nullptr) return false;
  dlclose(handle);  // drops the reference RTLD_NOLOAD took
  return true;
}

// Sends what is printed on stdout (timm's info log) to `file` until finish().
class CaptureStdout {
 public:
  explicit CaptureStdout(fs::path file) : file_(std::move(file)) {
    std::fflush(stdout);
    saved_ = ::dup(STDOUT_FILENO);
    const int fd = ::open(file_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    REQUIRE(saved_ >= 0);
    REQUIRE(fd >= 0);
    ::dup2(fd, STDOUT_FILENO);
    ::close(fd);
  }
  ~CaptureStdout() { restore(); }
  CaptureStdout(const CaptureStdout&) = delete;
  CaptureStdout& operator=(const CaptureStdout&) = delete;

  // What was printed since construction.
  std::string finish() {
    restore();
    return timm::test::read_file(file_);
  }

 private:
  void restore() {
    if (saved_ < 0) return;
    std::fflush(stdout);
    ::dup2(saved_, STDOUT_FILENO);
    ::close(saved_);
    saved_ = -1;
  }
  fs::path file_;
  int saved_ = -1;
};

// Runs in `dir` until destroyed, then back in the folder it started in.
class InFolder {
 public:
  explicit InFolder(const fs::path& dir) : previous_(fs::current_path()) { fs::current_path(dir); }
  ~InFolder() {
    std::error_code ec;
    fs::current_path(previous_, ec);
  }
  InFolder(const InFolder&) = delete;
  InFolder& operator=(const InFolder&) = delete;

 private:
  fs::path previous_;
};

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

TEST_CASE("a model plugin without the feature methods loads, and each throws naming the model") {
  // fixture_tiny implements only forward (as a third-party plugin built before them may): it loads and
  // trains, and the base class's defaults fail only when called, naming the model and its plugin file.
  PluginLoader loader(Registry::global());
  loader.load_directory(fixture("fixture_good"), /*required=*/true);
  timm::ModelArgs args;
  args.num_classes = 4;
  timm::ModelPtr model = timm::create_model("fixture_tiny", args);
  const std::string so = fs::canonical(fixture_so("fixture_good")).string();
  CHECK(model->registered_name() == "fixture_tiny");
  CHECK(model->registered_origin() == so);
  const torch::Tensor x = torch::ones({2, 3, 8, 8});
  CHECK(model->forward(x).sizes() == torch::IntArrayRef({2, 4}));
  const std::string features = error_of([&] { model->forward_features(x); });
  CHECK_MESSAGE(
      contains(features, "model 'fixture_tiny' (from plugin '" + so + "') does not implement forward_features"),
      features);
  CHECK(contains(features, "docs/plugins.md"));
  for (const bool pre_logits : {false, true}) {
    const std::string head = error_of([&] { model->forward_head(x, pre_logits); });
    CHECK_MESSAGE(contains(head, "model 'fixture_tiny' (from plugin '" + so + "') does not implement forward_head"),
                  head);
  }
  const std::string info = error_of([&] { model->feature_info(); });
  CHECK_MESSAGE(contains(info, "model 'fixture_tiny' (from plugin '" + so + "') does not implement feature_info"),
                info);
  const std::string inter = error_of([&] { model->forward_intermediates(x); });
  CHECK_MESSAGE(
      contains(inter, "model 'fixture_tiny' (from plugin '" + so + "') does not implement forward_intermediates"),
      inter);

  // A model built without create_model has no registered name: its class name stands in.
  BareModelImpl bare;
  const std::string bare_error = error_of([&] { bare.forward_features(x); });
  CHECK_MESSAGE(contains(bare_error, "BareModelImpl"), bare_error);
  CHECK(contains(bare_error, "does not implement forward_features"));
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

TEST_CASE("the loader keeps each plugin's SDK ABI, torch version and entries, and lists them") {
  Registry registry;
  PluginLoader loader(registry);
  loader.load_directory(fixture("fixture_good"), /*required=*/true);
  REQUIRE(loader.loaded().size() == 1);
  const timm::LoadedPlugin& plugin = loader.loaded()[0];
  CHECK(plugin.sdk_abi_version == timm::kSdkAbiVersion);
  CHECK(plugin.torch_version == TORCH_VERSION);
  using Entries = std::vector<std::pair<PluginKind, std::string>>;
  const bool entries_in_order =
      plugin.entries == Entries{{PluginKind::kModel, "fixture_tiny"}, {PluginKind::kModel, "fixture_tiny2"}};
  CHECK(entries_in_order);
  const std::string so = fs::canonical(fixture_so("fixture_good")).string();
  CHECK(timm::describe_loaded_plugins(loader.loaded()) ==
        "plugin 'fixture_good' from " + so + ": SDK ABI " + std::to_string(timm::kSdkAbiVersion) + ", torch " +
            TORCH_VERSION + "\n  models (2): fixture_tiny, fixture_tiny2\n");
  CHECK(timm::describe_loaded_plugins({}).empty());
}

TEST_CASE("a plugin registering a name that breaks its kind's rules is refused at load, naming file, name and rule") {
  Registry registry;
  PluginLoader loader(registry);
  const std::string so = fs::canonical(fixture_so("fixture_bad_names")).string();
  const std::string message = error_of([&] { loader.load_file(so); });
  CHECK(contains(message, "plugin '" + so +
                              "': refused: model name 'Fixture_Upper' has upper-case 'F' at position 0; model names "
                              "are made of a-z, 0-9 and '_' (--model matches a name exactly"));
  CHECK(contains(message,
                 "; optimizer name 'lookahead_fixture' starts with 'lookahead_', which --opt reads as a modifier "
                 "('lookahead_fixture' is lookahead around 'fixture'); an optimizer name must not start with "
                 "'lookahead_'"));
  // Whole: its good name is not registered either.
  CHECK(registry.size() == 0);
  CHECK(loader.loaded().empty());
}

TEST_CASE("the name rules of each kind") {
  using timm::name_rule_violation;
  for (PluginKind kind :
       {PluginKind::kModel, PluginKind::kOptimizer, PluginKind::kScheduler, PluginKind::kAugmentation}) {
    const std::string kind_name(timm::kind_name(kind));
    INFO(kind_name);
    CHECK(name_rule_violation(kind, "resnet50_d").empty());
    CHECK(name_rule_violation(kind, "ceo_signum").empty());
    CHECK(contains(name_rule_violation(kind, ""),
                   "an empty " + kind_name + " name; " + kind_name + " names are made of a-z, 0-9 and '_' ("));
    CHECK(contains(name_rule_violation(kind, "res-net"), kind_name + " name 'res-net' has '-' at position 3; "));
    CHECK(contains(name_rule_violation(kind, "resnet50.a1"), "has '.' at position 8"));
    CHECK(contains(name_rule_violation(kind, "ResNet"), "has upper-case 'R' at position 0"));
    CHECK(contains(name_rule_violation(kind, "a b"), "has byte 0x20 at position 1"));
    CHECK(contains(name_rule_violation(kind, "a\xff"), "has byte 0xff at position 1"));
  }
  // Only --opt reads modifiers, and only with the '_' after them.
  CHECK(name_rule_violation(PluginKind::kModel, "lookahead_x").empty());
  CHECK(name_rule_violation(PluginKind::kOptimizer, "lookahead").empty());
  CHECK(name_rule_violation(PluginKind::kOptimizer, "lookaheadx").empty());
  CHECK(contains(name_rule_violation(PluginKind::kOptimizer, "lookahead_sgd"), "starts with 'lookahead_'"));

  // The registry refuses them as the loader does, naming the origin, and adds nothing.
  Registry registry;
  const std::string message = error_of([&] {
    registry.add_all({entry_of(PluginKind::kScheduler, "cosine", "/p/x.so"),
                      entry_of(PluginKind::kScheduler, "Cosine", "/p/x.so"),
                      entry_of(PluginKind::kScheduler, "step-lr", "/p/x.so")});
  });
  CHECK(message ==
        "plugin '/p/x.so': refused: scheduler name 'Cosine' has upper-case 'C' at position 0; scheduler names are made "
        "of a-z, 0-9 and '_' (--sched matches a name exactly); scheduler name 'step-lr' has '-' at position 4; "
        "scheduler names are made of a-z, 0-9 and '_' (--sched matches a name exactly)");
  CHECK(registry.size() == 0);
}

TEST_CASE("--opt selects the whole registered name before timm's reading of prefixes") {
  Registry registry;
  registry.add_all({entry_of(PluginKind::kOptimizer, "ceo_signum"), entry_of(PluginKind::kOptimizer, "signum"),
                    entry_of(PluginKind::kOptimizer, "adamw")});
  const auto selects = [&](const std::string& opt, const std::string& name, bool lookahead) {
    INFO(opt);
    const timm::OptimizerSelection selection = timm::select_optimizer(registry, opt);
    CHECK(selection.name == name);
    CHECK(selection.lookahead == lookahead);
  };
  selects("ceo_signum", "ceo_signum", false);  // timm alone would read 'signum'
  selects("CEO_Signum", "ceo_signum", false);
  selects("lookahead_ceo_signum", "ceo_signum", true);
  selects("lookahead_adamw", "adamw", true);
  selects("LookAhead_AdamW", "adamw", true);
  selects("signum", "signum", false);
  // timm's reading when the whole name is not registered: the last part.
  selects("foo_adamw", "adamw", false);
  selects("lookahead_foo_signum", "signum", true);

  const std::string two = error_of([&] { timm::select_optimizer(registry, "ceo_signm"); });
  CHECK(contains(two, "unknown optimizer 'ceo_signm': neither 'ceo_signm' nor 'signm' is a registered optimizer"));
  CHECK(contains(two, "did you mean 'ceo_signum'"));
  const std::string three = error_of([&] { timm::select_optimizer(registry, "lookahead_ceo_signm"); });
  CHECK(contains(three,
                 "unknown optimizer 'lookahead_ceo_signm': none of 'lookahead_ceo_signm', 'ceo_signm' or "
                 "'signm' is a registered optimizer"));
  CHECK_THROWS_AS(timm::select_optimizer(registry, "lookahead_ceo_signm"), timm::UsageError);
  CHECK(contains(error_of([&] { timm::select_optimizer(registry, "adamx"); }),
                 "unknown optimizer 'adamx'; did you mean 'adamw'"));
}

TEST_CASE("optimizer_traits reads --opt with the whole registered name first") {
  // The global registry, as the trainer reads it; names no plugin uses.
  Registry::global().add_all(
      {entry_of(PluginKind::kOptimizer, "ceo_fixturesignum", "<test>", timm::OptimizerTraits{timm::LrBaseScale::kSqrt}),
       entry_of(PluginKind::kOptimizer, "fixturesignum", "<test>", timm::OptimizerTraits{timm::LrBaseScale::kLinear})});
  CHECK(timm::optimizer_traits("ceo_fixturesignum").lr_base_scale == timm::LrBaseScale::kSqrt);
  CHECK(timm::optimizer_traits("Lookahead_CEO_FixtureSignum").lr_base_scale == timm::LrBaseScale::kSqrt);
  CHECK(timm::optimizer_traits("other_fixturesignum").lr_base_scale == timm::LrBaseScale::kLinear);
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

TEST_CASE("a world-writable plugin file is refused with the chmod hint, before it is opened") {
  timm::test::TempDir tmp;
  const fs::path dir = make_folder(tmp, "plugins");
  const fs::path so = copy_fixture("fixture_good", dir);
  set_mode(so, 0777);
  Registry registry;
  PluginLoader loader(registry);
  const std::string message = error_of([&] { loader.load_directory(dir, /*required=*/true); });
  CHECK(contains(message, "plugin '" + so.string() +
                              "': refused: the file is writable by every user (mode 0777); run `chmod o-w " +
                              so.string() + "`"));
  CHECK(!is_open(so));  // refused before dlopen ran any of its code
  CHECK(registry.size() == 0);
  CHECK(loader.loaded().empty());
  CHECK(contains(error_of([&] { loader.load_file(so); }), "refused: the file is writable by every user"));

  // The suggested fix is enough.
  set_mode(so, 0755);
  loader.load_directory(dir, /*required=*/true);
  CHECK(loader.loaded().size() == 1);
  CHECK(registry.find(PluginKind::kModel, "fixture_tiny") != nullptr);
}

TEST_CASE("a world-writable plugin folder is refused whole, with the chmod hint") {
  timm::test::TempDir tmp;
  const fs::path dir = make_folder(tmp, "plugins");
  const fs::path so = copy_fixture("fixture_good", dir);
  set_mode(dir, 0777);
  Registry registry;
  PluginLoader loader(registry);
  const std::string message = error_of([&] { loader.load_directory(dir, /*required=*/true); });
  CHECK(contains(message, "plugin folder '" + dir.string() +
                              "': refused: the folder is writable by every user (mode 0777); run `chmod o-w " +
                              dir.string() + "`"));
  // The sticky bit (as on /tmp) does not make a folder safe: anyone may add a file.
  set_mode(dir, 01777);
  CHECK(contains(error_of([&] { loader.load_directory(dir, true); }), "writable by every user (mode 1777)"));
  // A file named directly is judged with its folder.
  const std::string direct = error_of([&] { loader.load_file(so); });
  CHECK(contains(direct, "plugin '" + so.string() + "': refused: its folder '" + dir.string() +
                             "' is writable by every user (mode 1777); run `chmod o-w " + dir.string() + "`"));
  CHECK(!is_open(so));
  CHECK(registry.size() == 0);
}

TEST_CASE("a symlinked plugin is judged by its target, and a refusal names the link and the target") {
  timm::test::TempDir tmp;
  const fs::path targets = make_folder(tmp, "targets");
  const fs::path plugins = make_folder(tmp, "plugins");
  const fs::path target = copy_fixture("fixture_good", targets);
  const fs::path link = plugins / "linked.so";
  fs::create_symlink(target, link);

  SUBCASE("a good target loads, with the target as its origin") {
    Registry registry;
    PluginLoader loader(registry);
    loader.load_directory(plugins, /*required=*/true);
    REQUIRE(loader.loaded().size() == 1);
    CHECK(loader.loaded()[0].path == target);
    REQUIRE(registry.find(PluginKind::kModel, "fixture_tiny") != nullptr);
    CHECK(registry.find(PluginKind::kModel, "fixture_tiny")->origin == target.string());
  }
  SUBCASE("a world-writable target") {
    set_mode(target, 0666);
    Registry registry;
    PluginLoader loader(registry);
    const std::string message = error_of([&] { loader.load_directory(plugins, /*required=*/true); });
    CHECK(contains(message, "plugin '" + link.string() + "' (resolves to '" + target.string() +
                                "'): refused: the file '" + target.string() +
                                "' is writable by every user (mode 0666); run `chmod o-w " + target.string() + "`"));
    CHECK(!is_open(target));
  }
  SUBCASE("a target in a world-writable folder") {
    set_mode(targets, 0777);
    Registry registry;
    PluginLoader loader(registry);
    const std::string message = error_of([&] { loader.load_directory(plugins, /*required=*/true); });
    CHECK(contains(message, "plugin '" + link.string() + "' (resolves to '" + target.string() +
                                "'): refused: its folder '" + targets.string() +
                                "' is writable by every user (mode 0777)"));
    CHECK(!is_open(target));
  }
}

TEST_CASE("a plugin file or folder owned by another user is refused (root only: making one needs chown)") {
  REQUIRE_MESSAGE(geteuid() == 0, "giving a file to another uid needs root; run this test as root");
  const uid_t other = 12345;
  timm::test::TempDir tmp;
  const fs::path dir = make_folder(tmp, "plugins");
  const fs::path so = copy_fixture("fixture_good", dir);
  Registry registry;
  PluginLoader loader(registry);

  REQUIRE(::chown(so.c_str(), other, static_cast<gid_t>(-1)) == 0);
  const std::string file_message = error_of([&] { loader.load_directory(dir, /*required=*/true); });
  CHECK(contains(file_message, "plugin '" + so.string() +
                                   "': refused: the file is owned by uid 12345, not by the user running (uid 0) or "
                                   "root; chown it (`chown 0 " +
                                   so.string() + "`)"));
  CHECK(!is_open(so));

  REQUIRE(::chown(so.c_str(), 0, static_cast<gid_t>(-1)) == 0);
  REQUIRE(::chown(dir.c_str(), other, static_cast<gid_t>(-1)) == 0);
  const std::string folder_message = error_of([&] { loader.load_directory(dir, /*required=*/true); });
  CHECK(contains(folder_message, "plugin folder '" + dir.string() +
                                     "': refused: the folder is owned by uid 12345, not by the user running (uid 0) "
                                     "or root"));
  CHECK(registry.size() == 0);

  // Owned by root (and so by the user running): loads.
  REQUIRE(::chown(dir.c_str(), 0, static_cast<gid_t>(-1)) == 0);
  loader.load_directory(dir, /*required=*/true);
  CHECK(loader.loaded().size() == 1);
}

TEST_CASE("relative plugin folders are resolved once, against the start-up folder, and logged") {
  timm::test::TempDir tmp;
  const fs::path rel = make_folder(tmp, "rel");
  const fs::path env = make_folder(tmp, "envrel");
  const fs::path root = rel.parent_path();
  copy_fixture("fixture_good", rel);
  copy_fixture("fixture_duplicate_a", env);

  std::string log;
  timm::PluginSearchPath path;
  {
    const timm::test::EnvVar plugin_path("TIMM_PLUGIN_PATH", "./envrel");
    const InFolder in_root(root);
    CaptureStdout capture(root / "log.txt");
    path = timm::plugin_search_path({"rel", (root / "rel").string()});
    log = capture.finish();
  }
  REQUIRE(path.user_dirs.size() == 3);
  CHECK(path.user_dirs[0] == root / "rel");
  CHECK(path.user_dirs[1] == root / "rel");  // named absolute: unchanged
  CHECK(path.user_dirs[2] == root / "envrel");
  CHECK(contains(log, "plugin folder 'rel' resolved to '" + (root / "rel").string() + "'"));
  CHECK(contains(log, "plugin folder './envrel' resolved to '" + (root / "envrel").string() + "'"));
  CHECK(!contains(log, "plugin folder '/"));  // absolute folders need no note

  // Loaded from another current folder: the resolved folders are used, each once.
  const InFolder elsewhere(fs::path("/"));
  Registry registry;
  const timm::PluginSearchPath user_only{path.user_dirs, {}};
  const std::vector<timm::LoadedPlugin> loaded = timm::load_plugins(registry, user_only);
  CHECK(loaded.size() == 2);
  CHECK(registry.find(PluginKind::kModel, "fixture_tiny") != nullptr);
  CHECK(registry.find(PluginKind::kModel, "fixture_duplicate") != nullptr);
}

TEST_CASE("only regular *.so files are loaded: folders, fifos, sockets and dangling links are skipped") {
  timm::test::TempDir tmp;
  const fs::path dir = make_folder(tmp, "plugins");
  const fs::path good = copy_fixture("fixture_good", dir);
  fs::create_directory(dir / "folder.so");
  REQUIRE(::mkfifo((dir / "fifo.so").c_str(), 0644) == 0);  // dlopen would block on it
  {
    const std::string socket_path = (dir / "socket.so").string();
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    REQUIRE(socket_path.size() < sizeof(address.sun_path));
    std::memcpy(address.sun_path, socket_path.c_str(), socket_path.size() + 1);
    const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    REQUIRE(fd >= 0);
    const int bound = ::bind(fd, reinterpret_cast<const sockaddr*>(&address), sizeof(address));
    ::close(fd);
    REQUIRE(bound == 0);
  }
  const fs::path missing = dir.parent_path() / "missing.so";
  fs::create_symlink(missing, dir / "dangling.so");
  fs::create_symlink(dir / "folder.so", dir / "folder_link.so");
  {
    std::FILE* notes = std::fopen((dir / "notes.txt").c_str(), "w");  // not *.so: never looked at
    REQUIRE(notes != nullptr);
    std::fclose(notes);
  }

  Registry registry;
  PluginLoader loader(registry);
  REQUIRE_NOTHROW(loader.load_directory(dir, /*required=*/true));
  REQUIRE(loader.loaded().size() == 1);
  CHECK(loader.loaded()[0].path == good);
  CHECK(registry.find(PluginKind::kModel, "fixture_tiny") != nullptr);

  // Named directly, each is an error saying what it is.
  CHECK(contains(
      error_of([&] { loader.load_file(dir / "dangling.so"); }),
      "plugin '" + (dir / "dangling.so").string() + "': a link to '" + missing.string() + "', which does not exist"));
  CHECK(contains(error_of([&] { loader.load_file(dir / "fifo.so"); }), "not a regular file (a fifo)"));
  CHECK(contains(error_of([&] { loader.load_file(dir / "socket.so"); }), "not a regular file (a socket)"));
  CHECK(contains(error_of([&] { loader.load_file(dir / "folder.so"); }), "not a regular file (a folder)"));
}

TEST_CASE("a folder of bad plugins names each one with its reason in one error, and loads the rest") {
  timm::test::TempDir tmp;
  const fs::path dir = make_folder(tmp, "plugins");
  const fs::path good = copy_fixture("fixture_good", dir);
  const fs::path no_entry = copy_fixture("fixture_no_entry", dir);
  const fs::path throws = copy_fixture("fixture_throws", dir);
  const fs::path wrong_abi = copy_fixture("fixture_wrong_abi", dir);
  const fs::path bad_names = copy_fixture("fixture_bad_names", dir);
  const fs::path dup_a = copy_fixture("fixture_duplicate_a", dir, "zz_dup_a.so");  // after the bad ones
  const fs::path dup_b = copy_fixture("fixture_duplicate_b", dir, "zz_dup_b.so");

  Registry registry;
  PluginLoader loader(registry);
  const std::string message = error_of([&] { loader.load_directory(dir, /*required=*/true); });
  CHECK(contains(message, "(5 problems)"));
  CHECK(contains(message, "\n  plugin '" + bad_names.string() + "': refused: model name 'Fixture_Upper'"));
  CHECK(contains(
      message, "\n  plugin '" + no_entry.string() + "': not a timm-cpp plugin: missing entry point 'timm_plugin_v1'"));
  CHECK(contains(message, "\n  plugin '" + throws.string() + "': registration failed: cannot initialise the fixture"));
  CHECK(contains(message, "\n  plugin '" + wrong_abi.string() + "': built for SDK ABI version " +
                              std::to_string(timm::kSdkAbiVersion + 1)));
  CHECK(contains(message, "\n  duplicate model name 'fixture_duplicate': registered by '" + dup_a.string() +
                              "' and by '" + dup_b.string() + "'"));
  // In the order they were tried.
  CHECK(message.find(no_entry.string()) < message.find(throws.string()));
  CHECK(message.find(throws.string()) < message.find(wrong_abi.string()));
  CHECK(message.find(no_entry.string()) == message.rfind(no_entry.string()));

  // The good ones, before and after the bad ones, loaded; a bad one registered nothing.
  REQUIRE(loader.loaded().size() == 2);
  CHECK(loader.loaded()[0].path == good);
  CHECK(loader.loaded()[1].path == dup_a);
  CHECK(registry.find(PluginKind::kModel, "fixture_tiny") != nullptr);
  REQUIRE(registry.find(PluginKind::kModel, "fixture_duplicate") != nullptr);
  CHECK(registry.find(PluginKind::kModel, "fixture_duplicate")->origin == dup_a.string());
  CHECK(registry.find(PluginKind::kModel, "fixture_before_throw") == nullptr);
}

TEST_CASE("the failures of every folder on the search path come in one error; a folder named twice is searched once") {
  timm::test::TempDir tmp;
  const fs::path a = make_folder(tmp, "a");
  const fs::path b = make_folder(tmp, "b");
  const fs::path no_entry = copy_fixture("fixture_no_entry", a);
  const fs::path throws = copy_fixture("fixture_throws", b);
  const fs::path good = copy_fixture("fixture_good", b);

  Registry registry;
  const std::string message = error_of([&] { timm::load_plugins(registry, timm::PluginSearchPath{{a, b, a}, {}}); });
  CHECK(contains(message, "(2 problems)"));
  CHECK(contains(message, no_entry.string() + "': not a timm-cpp plugin"));
  CHECK(contains(message, throws.string() + "': registration failed"));
  CHECK(message.find(no_entry.string()) == message.rfind(no_entry.string()));
  CHECK(registry.find(PluginKind::kModel, "fixture_tiny") != nullptr);  // the rest still loaded

  // A missing folder the user named is a usage error, before anything loads.
  Registry untouched;
  CHECK_THROWS_AS(timm::load_plugins(untouched, timm::PluginSearchPath{{b, tmp / "missing"}, {}}), timm::UsageError);
  CHECK(untouched.size() == 0);
}

}  // namespace test_plugin_loader
