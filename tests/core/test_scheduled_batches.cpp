// ScheduledBatchSampler (--train-img-sizes) against timm's, run by
// tests/oracle/scheduled_sampler_oracle.py at test time: every batch's
// indices and transform choice for epochs 0..3 over a SequentialSampler and
// over each rank of torch's DistributedSampler, in sample-budget and
// fixed-batch mode, constant and progressive; choice_weights_for_epoch
// within 1e-12 and the policy-average batch size; each of timm's ValueErrors
// as a UsageError naming the flag; and the Loader making each batch with its
// choice's transform.
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "test_support.hpp"
#include "timm/base/error.hpp"
#include "timm/data/dataset.hpp"
#include "timm/data/image_ops.hpp"
#include "timm/data/loader.hpp"
#include "timm/data/scheduled_sampler.hpp"
#include "timm/dist/sampler.hpp"

// Last: c10/util/Logging.h defines a CHECK macro that doctest must override.
#include <doctest/doctest.h>

namespace test_scheduled_batches {

namespace {

using nlohmann::json;
using namespace timm;

std::shared_ptr<Sampler> base_of(const json& c) {
  const int64_t size = c["size"];
  if (c["base"] == "sequential") return make_local_sampler(static_cast<std::size_t>(size), /*shuffle=*/false, 0);
  dist::DistributedSamplerOptions o;
  o.num_replicas = c["num_replicas"], o.rank = c["rank"], o.seed = c["base_seed"], o.shuffle = true;
  return std::make_shared<dist::DistributedSampler>(size, o);
}

ScheduledBatchSamplerOptions options_of(const json& c) {
  ScheduledBatchSamplerOptions o;
  o.batch_sizes = c["batch_sizes"].get<std::vector<int64_t>>();
  if (c.contains("choice_weights") && !c["choice_weights"].is_null()) {
    o.choice_weights = c["choice_weights"].get<std::vector<double>>();
  }
  o.seed = c.value("seed", int64_t{0});
  o.drop_last = c.value("drop_last", true);
  o.shuffle_schedule = c.value("shuffle_schedule", true);
  if (c.contains("num_batches") && !c["num_batches"].is_null()) o.num_batches = c["num_batches"].get<int64_t>();
  o.choice_schedule = c.value("choice_schedule", std::string("constant"));
  if (c.contains("schedule_epochs") && !c["schedule_epochs"].is_null()) {
    o.schedule_epochs = c["schedule_epochs"].get<int64_t>();
  }
  o.schedule_spread = c.value("schedule_spread", 0.65);
  o.schedule_random_mix = c.value("schedule_random_mix", 0.1);
  return o;
}

json seq(int64_t size, std::vector<int64_t> batch_sizes, int64_t seed) {
  return {
      {"size", size}, {"base", "sequential"}, {"batch_sizes", batch_sizes}, {"seed", seed}, {"epochs", {0, 1, 2, 3}}};
}

json on_rank(json c, int64_t rank, int64_t base_seed) {
  c["base"] = "distributed";
  c["num_replicas"] = 2;
  c["rank"] = rank;
  c["base_seed"] = base_seed;
  return c;
}

json progressive(json c, int64_t epochs, double spread, double mix) {
  c["choice_schedule"] = "progressive";
  c["schedule_epochs"] = epochs;
  c["schedule_spread"] = spread;
  c["schedule_random_mix"] = mix;
  return c;
}

json with(json c, const std::string& key, json value) {
  c[key] = std::move(value);
  return c;
}

std::vector<json> schedule_cases() {
  std::vector<json> cases;
  // Constant schedules in sample-budget mode.
  cases.push_back(seq(50, {8, 8, 8}, 42));                                             // uniform, equal sizes
  cases.push_back(with(seq(103, {16, 8, 4}, 7), "choice_weights", {0.5, 0.3, 0.2}));   // weights, unequal sizes
  cases.push_back(with(seq(103, {16, 8, 4}, 3), "drop_last", false));                  // a short last batch
  cases.push_back(with(seq(101, {16, 8, 4}, 11), "choice_weights", {1.0, 0.0, 2.0}));  // a zero weight
  cases.push_back(with(seq(64, {5, 3}, -4), "shuffle_schedule", false));
  cases.push_back(seq(7, {16, 4}, 1));  // only the small batch fits
  // Constant schedule, fixed batches: more samples than the sampler has (cycles).
  cases.push_back(with(seq(50, {8, 4}, 5), "num_batches", 20));
  // Progressive over --epochs: spread 0.65 and 0, random mix 0.1, 0 and 0.5.
  cases.push_back(progressive(seq(200, {32, 16, 8}, 42), 4, 0.65, 0.1));
  cases.push_back(progressive(seq(200, {32, 16, 8}, 42), 4, 0.0, 0.0));
  cases.push_back(progressive(seq(200, {32, 16, 8, 4}, 9), 3, 0.0, 0.1));
  cases.push_back(with(progressive(seq(120, {24, 12, 6}, 2), 4, 0.65, 0.5), "num_batches", 30));
  cases.push_back(progressive(seq(90, {10, 5}, 8), 1, 0.65, 0.1));  // schedule_epochs 1
  cases.push_back(
      with(progressive(seq(90, {10, 5, 3}, 8), 4, 0.0, 0.0), "choice_weights", {0.0, 1.0, 1.0}));  // nearest active
  cases.push_back(with(progressive(seq(90, {10, 5, 3}, 8), 4, 0.65, 0.2), "choice_weights", {0.2, 0.0, 0.8}));
  cases.push_back(with(progressive(seq(61, {8, 8}, 4), 4, 0.65, 0.1), "drop_last", false));  // equal sizes, ceil
  cases.push_back(with(progressive(seq(61, {8, 4}, 4), 4, 0.65, 0.1), "drop_last", false));
  // Each rank of two over torch's DistributedSampler (every rank the same shapes).
  for (int64_t rank = 0; rank < 2; ++rank) {
    cases.push_back(on_rank(with(seq(103, {16, 8, 4}, 42), "choice_weights", {0.5, 0.3, 0.2}), rank, 0));
    cases.push_back(on_rank(progressive(seq(157, {12, 8, 4}, 42), 4, 0.65, 0.1), rank, 3));
    cases.push_back(on_rank(with(seq(33, {8, 4}, 6), "num_batches", 9), rank, 0));
  }
  return cases;
}

// Each error case and the flag its UsageError must name.
std::vector<std::pair<json, std::string>> error_cases() {
  const json ok = seq(50, {8, 4}, 0);
  return {
      {with(ok, "size", 0), "--train-img-sizes"},
      {with(ok, "batch_sizes", json::array()), "--train-batch-sizes"},
      {with(ok, "batch_sizes", {8, 0}), "--train-batch-sizes"},
      {with(ok, "num_batches", 0), "--train-batches-per-epoch"},
      {with(ok, "choice_schedule", "linear"), "--train-size-schedule"},
      {progressive(seq(50, {8}, 0), 4, 0.65, 0.1), "--train-size-schedule"},
      {progressive(ok, 0, 0.65, 0.1), "--epochs"},
      {with(progressive(ok, 4, 0.65, 0.1), "schedule_epochs", nullptr), "--epochs"},
      {progressive(ok, 4, -0.5, 0.1), "--train-size-schedule-spread"},
      {progressive(ok, 4, 0.65, 1.5), "--train-size-random-mix"},
      {progressive(ok, 4, 0.65, -0.1), "--train-size-random-mix"},
      {with(ok, "choice_weights", {1.0}), "--train-size-probs"},
      {with(ok, "choice_weights", {1.0, -1.0}), "--train-size-probs"},
      {with(ok, "choice_weights", {0.0, 0.0}), "--train-size-probs"},
      {seq(3, {8, 16}, 0), "--train-batch-sizes"},                             // sample budget: no batch fits
      {progressive(seq(3, {8, 16}, 0), 4, 0.65, 0.1), "--train-batch-sizes"},  // inferred 0 batches
  };
}

}  // namespace

TEST_CASE("ScheduledBatchSampler gives timm's batches, choices and weights") {
  const std::vector<json> cases = schedule_cases();
  const json expected = json::parse(test::run_oracle("scheduled_sampler_oracle.py", {json(cases).dump()}));
  REQUIRE(expected.size() == cases.size());
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const json& c = cases[i];
    const json& e = expected[i];
    INFO("case " << c.dump());
    REQUIRE_MESSAGE(!e.contains("error"), "timm raised " << e.value("error", std::string()));
    const ScheduledBatchSampler sampler(base_of(c), options_of(c));
    CHECK(sampler.size() == e["len"].get<std::size_t>());
    CHECK(std::abs(sampler.average_batch_size() - e["average_batch_size"].get<double>()) <= 1e-12);
    for (const json& epoch : e["epochs"]) {
      const int64_t ep = epoch["epoch"];
      INFO("epoch " << ep);
      const std::vector<double> weights = sampler.choice_weights_for_epoch(ep);
      const auto want = epoch["weights"].get<std::vector<double>>();
      REQUIRE(weights.size() == want.size());
      for (std::size_t k = 0; k < want.size(); ++k) CHECK(std::abs(weights[k] - want[k]) <= 1e-12);
      const std::vector<ScheduledBatch> batches = sampler.batches(ep);
      REQUIRE(batches.size() == epoch["batches"].size());
      for (std::size_t b = 0; b < batches.size(); ++b) {
        INFO("batch " << b);
        CHECK(batches[b].choice == epoch["batches"][b][0].get<int64_t>());
        CHECK(batches[b].indices == epoch["batches"][b][1].get<std::vector<int64_t>>());
      }
      // The Sampler view the Loader reads: the same batches, flattened.
      const std::vector<int64_t> sizes = sampler.batch_sizes(ep), choices = sampler.batch_choices(ep);
      std::vector<int64_t> flat;
      REQUIRE(sizes.size() == batches.size());
      REQUIRE(choices.size() == batches.size());
      for (std::size_t b = 0; b < batches.size(); ++b) {
        CHECK(sizes[b] == static_cast<int64_t>(batches[b].indices.size()));
        CHECK(choices[b] == batches[b].choice);
        flat.insert(flat.end(), batches[b].indices.begin(), batches[b].indices.end());
      }
      CHECK(sampler.indices(ep) == flat);
    }
  }
  MESSAGE(cases.size() << " cases compared");
}

TEST_CASE("ScheduledBatchSampler: timm's ValueErrors are UsageErrors naming the flag") {
  const auto cases = error_cases();
  std::vector<json> specs;
  for (const auto& [c, flag] : cases) specs.push_back(c);
  const json expected = json::parse(test::run_oracle("scheduled_sampler_oracle.py", {json(specs).dump()}));
  REQUIRE(expected.size() == cases.size());
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const auto& [c, flag] = cases[i];
    INFO("case " << c.dump());
    REQUIRE_MESSAGE(expected[i].contains("error"), "timm accepted it");
    MESSAGE("timm: " << expected[i]["error"].get<std::string>());
    CHECK(expected[i]["error"].get<std::string>().rfind("ValueError: ", 0) == 0);
    try {
      ScheduledBatchSampler sampler(base_of(c), options_of(c));
      FAIL("accepted");
    } catch (const UsageError& error) {
      CHECK_MESSAGE(std::string(error.what()).find(flag) != std::string::npos, error.what());
    }
  }
  // Not sent to timm (JSON has no NaN): a NaN weight is refused as timm's isfinite check.
  ScheduledBatchSamplerOptions nan_weight;
  nan_weight.batch_sizes = {8, 4};
  nan_weight.choice_weights = std::vector<double>{1.0, std::nan("")};
  CHECK_THROWS_AS(ScheduledBatchSampler(make_local_sampler(50, false, 0), nan_weight), UsageError);
}

namespace {

// n samples of distinct sizes: the Loader's crop gives each batch its size.
class SizedDataset final : public Dataset {
 public:
  explicit SizedDataset(std::size_t n) : n_(n) {}
  std::size_t size() const override { return n_; }
  Image image(std::size_t index) const override {
    Image image;
    image.height = 40, image.width = 40, image.channels = 1;
    image.pixels.assign(40 * 40, static_cast<std::uint8_t>(index));
    return image;
  }
  int64_t target(std::size_t index) const override { return static_cast<int64_t>(index); }
  int64_t num_classes() const override { return static_cast<int64_t>(n_); }
  std::string describe(std::size_t index) const override { return "sample " + std::to_string(index); }

 private:
  std::size_t n_;
};

// A centre crop to a fixed size: each choice's transform.
class CropTo final : public ImageTransform {
 public:
  explicit CropTo(int64_t size) : size_(size) {}
  void apply(Image& image, Rng&) const override {
    image = crop(image, (image.height - size_) / 2, (image.width - size_) / 2, size_, size_);
  }
  std::string repr() const override { return "CropTo(" + std::to_string(size_) + ")"; }

 private:
  int64_t size_;
};

}  // namespace

TEST_CASE("Loader: each scheduled batch has its choice's size, samples and transform") {
  const std::vector<int64_t> sizes{16, 24, 32};
  std::vector<TransformPipeline> transforms;
  for (const int64_t size : sizes) {
    TransformPipeline t;
    t.image.push_back(std::make_shared<CropTo>(size));
    transforms.push_back(std::move(t));
  }
  ScheduledBatchSamplerOptions options;
  options.batch_sizes = {6, 4, 2};
  options.seed = 42;
  auto sampler = std::make_shared<ScheduledBatchSampler>(make_local_sampler(37, /*shuffle=*/true, 0), options);
  for (const int64_t workers : {0, 2}) {
    LoaderOptions loader_options;
    loader_options.batch_size = 128;  // not used by a scheduled sampler, nor its drop_last
    loader_options.drop_last = true;
    loader_options.num_workers = workers;
    Loader loader(std::make_shared<SizedDataset>(37), sampler, transforms, loader_options);
    CHECK(loader.num_batches() == sampler->size());
    for (const int64_t epoch : {0, 1}) {
      loader.start_epoch(epoch);
      const std::vector<ScheduledBatch> expected = sampler->batches(epoch);
      std::size_t b = 0;
      while (auto batch = loader.next()) {
        REQUIRE(b < expected.size());
        const auto choice = static_cast<std::size_t>(expected[b].choice);
        CHECK(batch->choice == choice);
        const int64_t n = static_cast<int64_t>(expected[b].indices.size());
        CHECK(batch->images.sizes() == at::IntArrayRef({n, 1, sizes[choice], sizes[choice]}));
        CHECK(std::vector<int64_t>(batch->targets.data_ptr<int64_t>(), batch->targets.data_ptr<int64_t>() + n) ==
              expected[b].indices);
        ++b;
      }
      CHECK(b == expected.size());
    }
    CHECK(loader.num_transforms() == 3);
    CHECK(loader.transform(2).repr() != loader.transform(0).repr());
  }
}

}  // namespace test_scheduled_batches
