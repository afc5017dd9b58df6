// The --lr-base-scale default of train.py: each optimizer plugin declares it
// for its names (OptimizerTraits) and the core reads the declaration instead
// of testing the name. For every registered optimizer the declaration must
// equal timm's rule in train.py, on the name as given to --opt:
//   'sqrt' if any([o in args.opt.lower() for o in ('ada', 'lamb')]) else 'linear'
#include <string>

#include <nlohmann/json.hpp>

#include "test_support.hpp"
#include "timm/base/error.hpp"
#include "timm/base/names.hpp"
#include "timm/optim/optimizer.hpp"
#include "timm/plugin/registry.hpp"

#include <doctest/doctest.h>

namespace test_optimizer_traits {

namespace {

using timm::LrBaseScale;

// train.py's rule, computed from the name.
LrBaseScale timm_rule(const std::string& name) {
  const std::string opt = timm::ascii_lower(name);
  const bool adaptive = opt.find("ada") != std::string::npos || opt.find("lamb") != std::string::npos;
  return adaptive ? LrBaseScale::kSqrt : LrBaseScale::kLinear;
}

std::string scale_name(LrBaseScale scale) { return scale == LrBaseScale::kSqrt ? "sqrt" : "linear"; }

}  // namespace

TEST_CASE("every registered optimizer declares train.py's lr scaling for its name") {
  timm::test::load_builtin_plugins();
  const timm::Registry& registry = timm::Registry::global();
  // The plugins the test depends on are loaded (a missing one would pass silently).
  for (const char* name : {"sgd", "adam", "adamw", "adamp", "adopt", "lamb", "lars", "lion", "adafactor", "adahessian",
                           "madgrad", "rmsprop"}) {
    REQUIRE_MESSAGE(registry.find(timm::PluginKind::kOptimizer, name) != nullptr, name);
  }
  const auto entries = registry.entries(timm::PluginKind::kOptimizer);
  for (const timm::RegistryEntry* entry : entries) {
    const auto* traits = timm::traits_of<timm::OptimizerTraits>(*entry);
    const LrBaseScale declared = traits != nullptr ? traits->lr_base_scale : LrBaseScale::kLinear;
    const std::string what = entry->name + " from " + entry->origin + " declares " + scale_name(declared) +
                             ", timm's train.py uses " + scale_name(timm_rule(entry->name));
    CHECK_MESSAGE(declared == timm_rule(entry->name), what);
    // As --opt, also upper-case and behind timm's lookahead_ prefix.
    for (std::string opt : {entry->name, "lookahead_" + entry->name, "Lookahead_" + entry->name}) {
      CHECK_MESSAGE(timm::optimizer_traits(opt).lr_base_scale == timm_rule(opt), opt);
    }
  }
  MESSAGE(entries.size() << " optimizers checked");
}

TEST_CASE("optimizer_traits resolves --opt as create_optimizer does") {
  timm::test::load_builtin_plugins();
  CHECK(timm::optimizer_traits("AdamW").lr_base_scale == LrBaseScale::kSqrt);
  CHECK(timm::optimizer_traits("lookahead_lambc").lr_base_scale == LrBaseScale::kSqrt);
  CHECK(timm::optimizer_traits("lookahead_sgd").lr_base_scale == LrBaseScale::kLinear);
  CHECK(timm::optimizer_traits("cadoptw").lr_base_scale == LrBaseScale::kLinear);  // no "ada" in it
  CHECK(timm::optimizer_traits("madgrad").lr_base_scale == LrBaseScale::kLinear);
  CHECK_THROWS_AS(timm::optimizer_traits("adamx"), timm::UsageError);
}

TEST_CASE("every optimizer of timm's list_optimizers() is registered") {
  timm::test::load_builtin_plugins();
  const timm::Registry& registry = timm::Registry::global();
  const nlohmann::json names = nlohmann::json::parse(timm::test::run_oracle("optim_oracle.py", {"names"}));
  REQUIRE(names.at("all").size() > 90);  // timm 1.0.31 lists 101
  std::size_t registered = 0;
  for (const std::string name : names.at("all")) {
    const bool found = registry.find(timm::PluginKind::kOptimizer, name) != nullptr;
    CHECK_MESSAGE(found, name << " (timm's) is not registered");
    registered += found ? 1 : 0;
  }
  MESSAGE(registered << " of timm's " << names.at("all").size() << " optimizer names registered");
}

}  // namespace test_optimizer_traits
