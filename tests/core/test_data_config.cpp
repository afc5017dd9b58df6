// timm::resolve_data_config against timm's (tests/oracle/data_oracle.py
// dataconfig): the input size and crop of pretrained cfgs with a test size
// and crop, a test size only, and neither, with and without use_test_size
// (the tools' default) and with --img-size, --input-size and --crop-pct.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "test_support.hpp"
#include "timm/config/config.hpp"
#include "timm/data/data_config.hpp"

// Last: c10/util/Logging.h defines a CHECK macro that doctest must override.
#include <doctest/doctest.h>

namespace test_data_config {

using nlohmann::json;

timm::PretrainedCfg pretrained_cfg(const json& cfg) {
  timm::PretrainedCfg out;
  out.input_size = cfg.at("input_size").get<std::vector<int64_t>>();
  out.crop_pct = cfg.at("crop_pct").get<double>();
  if (!cfg.at("test_input_size").is_null()) out.test_input_size = cfg.at("test_input_size").get<std::vector<int64_t>>();
  if (!cfg.at("test_crop_pct").is_null()) out.test_crop_pct = cfg.at("test_crop_pct").get<double>();
  return out;
}

timm::Config flags(const json& args) {
  timm::Config config;
  if (args.contains("img_size")) config.set_explicit("img_size", args.at("img_size").get<int64_t>());
  if (args.contains("input_size")) config.set_explicit("input_size", args.at("input_size").get<std::vector<int64_t>>());
  if (args.contains("crop_pct")) config.set_explicit("crop_pct", args.at("crop_pct").get<double>());
  return config;
}

TEST_CASE("resolve_data_config takes the pretrained cfg's test size and crop as timm's with use_test_size") {
  const json cases = json::parse(timm::test::run_oracle("data_oracle.py", {"dataconfig"}));
  REQUIRE(cases.size() == 24);
  int64_t differ = 0;  // cases where use_test_size changes timm's answer: the oracle's draw tells the two apart
  for (const auto& c : cases) {
    CAPTURE(c.dump());
    const timm::DataConfig ours =
        timm::resolve_data_config(flags(c.at("args")), pretrained_cfg(c.at("cfg")), {}, c.at("use_test_size"));
    CHECK(ours.input_size == c.at("input_size").get<std::vector<int64_t>>());
    CHECK(ours.crop_pct == c.at("crop_pct").get<double>());
    const timm::DataConfig train = timm::resolve_data_config(flags(c.at("args")), pretrained_cfg(c.at("cfg")), {});
    if (train.input_size != ours.input_size || train.crop_pct != ours.crop_pct) ++differ;
  }
  CHECK(differ == 6);
}

TEST_CASE("a dataset's own image size comes before the pretrained cfg's test size; the test crop still applies") {
  timm::PretrainedCfg cfg;
  cfg.test_input_size = std::vector<int64_t>{3, 288, 288};
  cfg.test_crop_pct = 1.0;
  const timm::DataConfig data =
      timm::resolve_data_config(timm::Config(), cfg, timm::dataset_defaults("torch/fashion_mnist"),
                                /*use_test_size=*/true);
  CHECK(data.input_size == std::vector<int64_t>{1, 28, 28});
  CHECK(data.crop_pct == 1.0);
}

}  // namespace test_data_config
