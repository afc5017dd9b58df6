// timm::imagenet1k_labels against timm's ImageNetInfo('imagenet-1k')
// (tests/oracle/tools_oracle.py imagenet): every class's label name,
// description and detailed description.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "test_support.hpp"
#include "timm/tools/imagenet_info.hpp"

// Last: c10/util/Logging.h defines a CHECK macro that doctest must override.
#include <doctest/doctest.h>

namespace test_imagenet_info {

TEST_CASE("imagenet1k_labels equal timm's ImageNetInfo names, descriptions and detailed descriptions") {
  const auto timm_info = nlohmann::json::parse(timm::test::run_oracle("tools_oracle.py", {"imagenet", "-"}));
  const auto names = timm_info.at("name").get<std::vector<std::string>>();
  const auto descriptions = timm_info.at("description").get<std::vector<std::string>>();
  const auto detailed = timm_info.at("detailed").get<std::vector<std::string>>();
  const std::vector<timm::ClassLabel>& ours = timm::imagenet1k_labels();
  REQUIRE(ours.size() == 1000);
  REQUIRE(names.size() == 1000);
  int64_t differing = 0;
  for (std::size_t i = 0; i < ours.size(); ++i) {
    if (ours[i].name != names[i] || ours[i].description != descriptions[i] ||
        ours[i].detailed_description() != detailed[i]) {
      ++differing;
      CAPTURE(i);
      CHECK(ours[i].name == names[i]);
      CHECK(ours[i].description == descriptions[i]);
      CHECK(ours[i].detailed_description() == detailed[i]);
    }
  }
  CHECK(differing == 0);
}

}  // namespace test_imagenet_info
