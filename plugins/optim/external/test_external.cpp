// timm's optimizers from external libraries (NVIDIA APEX's fused*,
// bitsandbytes' bnb*): each of timm's names is registered and refuses with a
// usage error naming the library and the built-in optimizer to use instead.
#include <nlohmann/json.hpp>

#include "optim_parity.hpp"
#include "test_support.hpp"
#include "timm/base/error.hpp"
#include "timm/plugin/registry.hpp"

#include <doctest/doctest.h>

namespace test_external {

TEST_CASE("each of timm's external optimizers refuses, naming its library and a built-in") {
  timm::test::load_builtin_plugins();
  const nlohmann::json names = nlohmann::json::parse(timm::test::run_oracle("optim_oracle.py", {"names"}));
  REQUIRE(names.at("external").size() == 15);  // timm 1.0.31: 5 apex, 10 bitsandbytes
  timm::test::ParityModel model;
  for (const std::string name : names.at("external")) {
    CAPTURE(name);
    REQUIRE(timm::Registry::global().find(timm::PluginKind::kOptimizer, name) != nullptr);
    timm::OptimizerArgs args;
    args.opt = name;
    const std::string library = name.rfind("bnb", 0) == 0 ? "'bitsandbytes'" : "'apex'";
    CHECK_THROWS_WITH_AS(timm::create_optimizer(model, {}, args), doctest::Contains(library.c_str()), timm::UsageError);
    CHECK_THROWS_WITH_AS(timm::create_optimizer(model, {}, args),
                         doctest::Contains(("optimizer '" + name + "' is").c_str()), timm::UsageError);
  }
}

TEST_CASE("an external optimizer names the built-in with the same update") {
  timm::test::load_builtin_plugins();
  timm::test::ParityModel model;
  timm::OptimizerArgs args;
  args.opt = "bnbadamw8bit";
  CHECK_THROWS_WITH_AS(timm::create_optimizer(model, {}, args), doctest::Contains("use --opt adamw"), timm::UsageError);
  args.opt = "FusedLAMB";  // --opt is case-insensitive, as timm
  CHECK_THROWS_WITH_AS(timm::create_optimizer(model, {}, args), doctest::Contains("use --opt lamb"), timm::UsageError);
  args.opt = "bnbademamix";
  CHECK_THROWS_WITH_AS(timm::create_optimizer(model, {}, args), doctest::Contains("adamw is the nearest"),
                       timm::UsageError);
}

}  // namespace test_external
