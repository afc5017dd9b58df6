// NaFlexMixup against timm's (tests/oracle/naflex_mixup_oracle.py): batches of
// images of different sizes mixed with timm's recorded random draws replayed
// into ours (Mixup and CutMix, switching, local shuffles, odd batches, label
// smoothing, prob): the mixed pixels and the soft targets equal timm's. Then,
// with our Rng: --mixup-off-epoch, a batch of one, and bad settings.
#include <cstdio>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include "test_support.hpp"
#include "timm/base/error.hpp"
#include "timm/data/mixup.hpp"
#include "timm/data/naflex_mixup.hpp"

// Last: c10/util/Logging.h defines a CHECK macro that doctest must override.
#include <doctest/doctest.h>

namespace test_naflex_mixup {

using json = nlohmann::json;
using namespace timm;

namespace {

// Replays timm's draws, checking that ours asks for the same kind of draw
// with the same bounds, in the same order.
class ScriptedMixDraws final : public NaFlexMixDraws {
 public:
  explicit ScriptedMixDraws(std::vector<std::string> tokens) : tokens_(std::move(tokens)) {}
  double random() override { return std::stod(expect("r:").substr(2)); }
  int64_t randint(int64_t lo, int64_t hi) override {
    long tlo = 0, thi = 0, v = 0;
    REQUIRE(std::sscanf(expect("i:").c_str(), "i:%ld:%ld:%ld", &tlo, &thi, &v) == 3);
    CHECK(tlo == lo);
    CHECK(thi == hi);
    return v;
  }
  int64_t randbelow(int64_t n) override {
    long tn = 0, v = 0;
    REQUIRE(std::sscanf(expect("s:").c_str(), "s:%ld:%ld", &tn, &v) == 2);
    CHECK(tn == n);
    return v;
  }
  double torch_rand() override { return std::stod(expect("t:").substr(2)); }
  double beta(double alpha) override {
    const std::string t = expect("B:");
    const size_t colon = t.find(':', 2);
    CHECK(std::stod(t.substr(2, colon - 2)) == alpha);
    return std::stod(t.substr(colon + 1));
  }
  bool done() const { return pos_ == tokens_.size(); }

 private:
  std::string expect(const std::string& kind) {
    REQUIRE_MESSAGE(pos_ < tokens_.size(), "more draws than timm made; ours wants " << kind);
    const std::string& t = tokens_[pos_++];
    REQUIRE_MESSAGE(t.rfind(kind, 0) == 0, "ours draws " << kind << ", timm drew " << t);
    return t;
  }
  std::vector<std::string> tokens_;
  std::size_t pos_ = 0;
};

json mix_case(const std::string& id, std::vector<std::pair<int, int>> sizes, int seed, json mixup_args) {
  json c = {{"id", id}, {"channels", 3}, {"num_classes", 7}, {"seed", seed}};
  c["sizes"] = json::array();
  for (const auto& [h, w] : sizes) c["sizes"].push_back({h, w});
  c.update(mixup_args);
  return c;
}

NaFlexMixupOptions options_of(const json& c) {
  NaFlexMixupOptions o;
  o.num_classes = c["num_classes"];
  o.mixup_alpha = c.value("mixup_alpha", 0.8);
  o.cutmix_alpha = c.value("cutmix_alpha", 1.0);
  o.switch_prob = c.value("switch_prob", 0.5);
  o.prob = c.value("prob", 1.0);
  o.local_shuffle = c.value("local_shuffle", 4);
  o.label_smoothing = c.value("label_smoothing", 0.0);
  return o;
}

}  // namespace

TEST_CASE("NaFlexMixup: the mixed pixels and soft targets equal timm's for the same draws") {
  const std::vector<std::pair<int, int>> ten{{20, 28}, {24, 24}, {16, 36}, {28, 20}, {20, 20},
                                             {12, 40}, {32, 16}, {24, 30}, {18, 18}, {30, 26}};
  const std::vector<std::pair<int, int>> odd{{20, 28}, {24, 24}, {16, 36}, {28, 20}, {20, 20}};
  json cases = json::array();
  // Both modes on: each seed's torch.rand picks Mixup or CutMix.
  for (int seed = 1; seed <= 12; ++seed) {
    cases.push_back(mix_case("both" + std::to_string(seed), seed % 2 ? ten : odd, seed, {{"label_smoothing", 0.1}}));
  }
  for (int seed = 20; seed < 24; ++seed) {
    cases.push_back(mix_case("mixup" + std::to_string(seed), ten, seed, {{"cutmix_alpha", 0.0}}));
    cases.push_back(mix_case("cutmix" + std::to_string(seed), odd, seed, {{"mixup_alpha", 0.0}}));
  }
  cases.push_back(mix_case("noshuffle", ten, 30, {{"local_shuffle", 0}}));
  cases.push_back(mix_case("window3", ten, 31, {{"local_shuffle", 3}, {"switch_prob", 0.9}}));
  cases.push_back(mix_case("prob", ten, 32, {{"prob", 0.3}}));  // mixed or not by its draw
  cases.push_back(mix_case("pair", {{20, 28}, {24, 24}}, 33, {{"mixup_alpha", 2.0}, {"cutmix_alpha", 0.0}}));
  const auto timm_out = test::oracle_tensors("naflex_mixup_oracle.py", {cases.dump()});
  int64_t images = 0, changed = 0;
  for (const json& c : cases) {
    const std::string case_id = c["id"];
    CAPTURE(case_id);
    const auto get = [&](const std::string& key) -> const at::Tensor& {
      const std::string name = case_id + "." + key;
      const auto it = timm_out.find(name);
      REQUIRE_MESSAGE(it != timm_out.end(), name);
      return it->second;
    };
    const at::Tensor draws_text = get("draws");
    const auto* text = draws_text.data_ptr<std::uint8_t>();
    const json draws = json::parse(std::string(text, text + draws_text.numel()));
    std::vector<Image> batch;
    for (size_t k = 0; k < c["sizes"].size(); ++k) {
      batch.push_back(test::image_from_tensor(get("in." + std::to_string(k)).permute({1, 2, 0})));
    }
    const NaFlexMixup mixup(options_of(c));
    ScriptedMixDraws scripted(draws.get<std::vector<std::string>>());
    const at::Tensor targets = mixup.apply(batch, get("labels"), /*epoch=*/0, scripted);
    CHECK_MESSAGE(scripted.done(), "fewer draws than timm made: " << draws.dump());
    // The same float32 operations in the same order: equal.
    CHECK(at::equal(targets, get("targets")));
    for (size_t k = 0; k < batch.size(); ++k) {
      CAPTURE(k);
      const at::Tensor ours = at::from_blob(batch[k].pixels.data(), {batch[k].height, batch[k].width, 3}, at::kByte);
      const at::Tensor theirs = get("out." + std::to_string(k)).permute({1, 2, 0});
      CHECK(at::equal(ours, theirs));
      ++images;
      if (!at::equal(theirs, get("in." + std::to_string(k)).permute({1, 2, 0}))) ++changed;
    }
  }
  CHECK(images == 182);
  CHECK(changed > 120);  // the cases mix most images (not the odd ones out, not "prob")
  MESSAGE("NaFlexMixup vs timm: " << images << " images (" << changed << " mixed) and their targets equal");
}

TEST_CASE("NaFlexMixup: --mixup-off-epoch and a batch of one give the smoothed one-hot targets, images unchanged") {
  NaFlexMixupOptions o;
  o.num_classes = 4;
  o.label_smoothing = 0.2;
  o.mixup_off_epoch = 3;
  const NaFlexMixup mixup(o);
  at::manual_seed(0);
  std::vector<Image> batch;
  for (const auto& [h, w] : std::vector<std::pair<int, int>>{{8, 10}, {9, 9}, {10, 6}, {7, 7}}) {
    batch.push_back(test::image_from_tensor(at::randint(0, 256, {h, w, 3}, at::kByte)));
  }
  const at::Tensor labels = at::tensor({0, 3, 1, 2}, at::kLong);
  const at::Tensor one_hot = mixup_target(labels, 4, 1.0, 0.2);
  std::vector<Image> off = batch;
  Rng rng(5);
  CHECK(at::equal(mixup.apply(off, labels, /*epoch=*/3, rng), one_hot));
  for (size_t k = 0; k < batch.size(); ++k) CHECK(off[k].pixels == batch[k].pixels);
  std::vector<Image> one{batch[0]};
  CHECK(at::equal(mixup.apply(one, labels.slice(0, 0, 1), 0, rng), one_hot.slice(0, 0, 1)));
  // Before the off epoch it mixes: the rows stay distributions.
  std::vector<Image> on = batch;
  const at::Tensor mixed = mixup.apply(on, labels, /*epoch=*/2, rng);
  CHECK(at::allclose(mixed.sum(1), at::ones({4})));
  CHECK_FALSE(at::equal(mixed, one_hot));
}

TEST_CASE("NaFlexMixup: bad settings are usage errors naming the flag") {
  NaFlexMixupOptions o;
  o.mixup_alpha = 0.0;
  o.cutmix_alpha = 0.0;
  CHECK_THROWS_WITH_AS(NaFlexMixup{o}, doctest::Contains("needs a positive Mixup or CutMix alpha"), UsageError);
  o.mixup_alpha = 0.8;
  o.prob = 1.5;
  CHECK_THROWS_WITH_AS(NaFlexMixup{o}, doctest::Contains("--mixup-prob 1.5: expected a probability"), UsageError);
  o.prob = 1.0;
  o.switch_prob = -0.1;
  CHECK_THROWS_WITH_AS(NaFlexMixup{o}, doctest::Contains("--mixup-switch-prob -0.1"), UsageError);
}

}  // namespace test_naflex_mixup
