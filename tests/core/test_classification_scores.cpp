// timm::classification_scores against scikit-learn's precision_score,
// recall_score and f1_score (zero_division=0), as validate.py --metrics-avg
// calls them (tests/oracle/tools_oracle.py scores): classes never
// predicted, and one only predicted, included.
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include "test_support.hpp"
#include "timm/base/error.hpp"
#include "timm/io/safetensors.hpp"
#include "timm/tools/classification_scores.hpp"

// Last: c10/util/Logging.h defines a CHECK macro that doctest must override.
#include <doctest/doctest.h>

namespace test_classification_scores {

TEST_CASE("classification_scores equal scikit-learn's micro, macro and weighted precision, recall and F1") {
  timm::test::TempDir tmp;
  const auto sklearn =
      nlohmann::json::parse(timm::test::run_oracle("tools_oracle.py", {"scores", tmp.path().string()}));
  at::Tensor targets, predictions;
  for (const auto& [name, tensor] : timm::read_safetensors(tmp.path() / "scores.safetensors")) {
    (name == "targets" ? targets : predictions) = tensor;
  }
  REQUIRE(targets.defined());
  REQUIRE(predictions.defined());
  for (const std::string average : {"micro", "macro", "weighted"}) {
    CAPTURE(average);
    const timm::ClassificationScores ours = timm::classification_scores(targets, predictions, average);
    const auto expected = sklearn.at(average).get<std::vector<double>>();
    CHECK(ours.precision == doctest::Approx(expected[0]).epsilon(1e-12));
    CHECK(ours.recall == doctest::Approx(expected[1]).epsilon(1e-12));
    CHECK(ours.f1 == doctest::Approx(expected[2]).epsilon(1e-12));
  }
  // The draw tells the averages apart.
  CHECK(sklearn.at("macro").at(0).get<double>() != sklearn.at("micro").at(0).get<double>());
  CHECK(sklearn.at("weighted").at(2).get<double>() != sklearn.at("macro").at(2).get<double>());
}

TEST_CASE("classification_scores: perfect predictions score 1; an unknown average is a usage error") {
  const at::Tensor labels = at::tensor(std::vector<int64_t>{0, 1, 2, 2, 5}, at::kLong);
  for (const std::string average : {"micro", "macro", "weighted"}) {
    const timm::ClassificationScores s = timm::classification_scores(labels, labels, average);
    CHECK(s.precision == 1.0);
    CHECK(s.recall == 1.0);
    CHECK(s.f1 == 1.0);
  }
  CHECK_THROWS_WITH_AS(timm::classification_scores(labels, labels, "samples"),
                       "--metrics-avg 'samples': expected micro, macro or weighted", timm::UsageError);
}

}  // namespace test_classification_scores
