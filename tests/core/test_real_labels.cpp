// timm::RealLabels against timm's RealLabelsImagenet (tests/oracle/
// real_labels_oracle.py): the same reassessed labels, file names and logits
// give timm's top-1 and top-5 exactly; bad label files are usage errors
// naming the file.
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include "test_support.hpp"
#include "timm/base/error.hpp"
#include "timm/io/safetensors.hpp"
#include "timm/tools/real_labels.hpp"

// Last: c10/util/Logging.h defines a CHECK macro that doctest must override.
#include <doctest/doctest.h>

namespace test_real_labels {

namespace fs = std::filesystem;

TEST_CASE("RealLabels scores as timm's RealLabelsImagenet: top-1 and top-5 over the samples with real labels") {
  timm::test::TempDir tmp;
  const auto timm_out = nlohmann::json::parse(timm::test::run_oracle("real_labels_oracle.py", {tmp.path().string()}));
  const auto filenames = timm_out["filenames"].get<std::vector<std::string>>();
  const at::Tensor logits = timm::read_safetensors(tmp.path() / "logits.safetensors").front().second;
  timm::RealLabels real(tmp.path() / "real.json", filenames);
  const int64_t batch = timm_out["batch"];
  for (int64_t i = 0; i < logits.size(0); i += batch) real.add_result(logits.slice(0, i, i + batch));
  CHECK(real.accuracy(1) == doctest::Approx(timm_out["top1"].get<double>()).epsilon(1e-12));
  CHECK(real.accuracy(5) == doctest::Approx(timm_out["top5"].get<double>()).epsilon(1e-12));
  CHECK(real.accuracy(5) > real.accuracy(1));  // the oracle's draw tells the two apart
}

TEST_CASE("RealLabels refuses a bad label file, naming it and what is wrong") {
  timm::test::TempDir tmp;
  const fs::path file = tmp.path() / "real.json";
  const std::vector<std::string> two{"ILSVRC2012_val_00000002.JPEG", "ILSVRC2012_val_00000001.JPEG"};
  const auto refused = [&](const std::string& text, const std::vector<std::string>& names, const std::string& message) {
    std::ofstream(file) << text;
    CHECK_THROWS_WITH_AS(timm::RealLabels(file, names), doctest::Contains(message.c_str()), timm::UsageError);
  };
  refused("[[1], [2]", two, "not JSON");
  refused("{\"a\": 1}", two, "expected a list of label lists");
  refused("[[1], [\"x\"]]", two, "entry 1 is not a list of class indices");
  refused("[[1]]", two, "1 entries for a dataset of 2 samples");
  refused("[[1], []]", {"ILSVRC2012_val_00000001.JPEG", "cat.jpg"}, "sample 'cat.jpg' is not an ImageNet validation");
  CHECK_THROWS_WITH_AS(timm::RealLabels(tmp.path() / "none.json", two), doctest::Contains("cannot open"),
                       timm::UsageError);
  // Nothing to score: an error, not timm's NaN.
  std::ofstream(file) << "[[], []]";
  timm::RealLabels empty(file, two);
  empty.add_result(at::randn({2, 6}));
  CHECK_THROWS_WITH_AS(empty.accuracy(1), doctest::Contains("no sample validated has real labels"), timm::Error);
}

}  // namespace test_real_labels
