// NaFlexBatchSampler (--naflex-loader's batch schedule) against timm's
// NaFlexMapDatasetWrapper, run by tests/oracle/naflex_sampler_oracle.py at
// test time: the canonical schedule and every batch's sequence length, patch
// size index and indices for several epochs, with and without shuffling, one
// and several patch sizes, each rank of a distributed run over a dataset that
// does not divide among them; and the refusals of bad options.
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "test_support.hpp"
#include "timm/base/error.hpp"
#include "timm/data/naflex_sampler.hpp"

// Last: c10/util/Logging.h defines a CHECK macro that doctest must override.
#include <doctest/doctest.h>

namespace test_naflex_sampler {

namespace {

using nlohmann::json;
using namespace timm;

NaFlexSamplerOptions options_of(const json& c) {
  NaFlexSamplerOptions o;
  if (c.contains("seq_lens")) o.seq_lens = c["seq_lens"].get<std::vector<int64_t>>();
  o.max_tokens_per_batch = c.value("max_tokens_per_batch", o.max_tokens_per_batch);
  o.seed = c.value("seed", o.seed);
  o.shuffle = c.value("shuffle", o.shuffle);
  if (c.value("distributed", false)) {
    o.rank = c["rank"];
    o.world_size = c["world_size"];
  }
  o.batch_divisor = c.value("batch_divisor", o.batch_divisor);
  if (c.contains("patch_size_choices")) {
    o.patch_size_probs = c.contains("patch_size_choice_probs")
                             ? c["patch_size_choice_probs"].get<std::vector<double>>()
                             : std::vector<double>(c["patch_size_choices"].size(), 1.0);
  }
  return o;
}

json on_rank(json c, int64_t rank, int64_t world_size) {
  c["distributed"] = true;
  c["rank"] = rank;
  c["world_size"] = world_size;
  return c;
}

}  // namespace

TEST_CASE("NaFlexBatchSampler gives timm's schedule and batches: lengths, patch sizes, indices, every rank") {
  const json base = {
      {"size", 100}, {"epochs", {0, 1, 2}}, {"max_tokens_per_batch", 2048}, {"seq_lens", {256, 128, 64}}};
  json cases = json::array();
  cases.push_back(base);
  cases.push_back({{"size", 1000}, {"epochs", {0, 3}}});  // timm's defaults
  json unshuffled = base;
  unshuffled["shuffle"] = false;
  cases.push_back(unshuffled);
  json divisor1 = base;
  divisor1["batch_divisor"] = 1;
  divisor1["seed"] = 3;
  cases.push_back(divisor1);
  json patch_sizes = base;
  patch_sizes["patch_size_choices"] = {12, 16, 24};
  patch_sizes["patch_size_choice_probs"] = {1.0, 2.0, 1.0};
  cases.push_back(patch_sizes);
  json uniform_patches = base;
  uniform_patches["patch_size_choices"] = {16, 32};
  cases.push_back(uniform_patches);
  json uneven = base;
  uneven["size"] = 101;
  uneven["seed"] = 7;
  for (int64_t rank = 0; rank < 3; ++rank) cases.push_back(on_rank(uneven, rank, 3));
  const json timm_out = json::parse(test::run_oracle("naflex_sampler_oracle.py", {cases.dump()}));
  REQUIRE(timm_out.size() == cases.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    const json& c = cases[i];
    const json& expected = timm_out[i];
    CAPTURE(c.dump());
    REQUIRE_FALSE(expected.contains("error"));
    const NaFlexBatchSampler sampler(c["size"], options_of(c));
    CHECK(sampler.size() == expected["len"].get<size_t>());
    std::vector<std::vector<int64_t>> schedule;
    for (const auto& [seq_len, batch] : sampler.schedule()) schedule.push_back({seq_len, batch});
    CHECK(schedule == expected["schedule"].get<std::vector<std::vector<int64_t>>>());
    for (const json& epoch : expected["epochs"]) {
      const int64_t e = epoch["epoch"];
      CAPTURE(e);
      const auto batches = sampler.batches(e);
      REQUIRE(batches.size() == epoch["batches"].size());
      std::vector<int64_t> all;
      for (size_t b = 0; b < batches.size(); ++b) {
        const json& theirs = epoch["batches"][b];
        const auto& [choice, indices] = batches[b];
        CHECK(sampler.seq_len_of(choice) == theirs[0].get<int64_t>());
        CHECK(sampler.patch_index_of(choice) == theirs[1].get<int64_t>());
        CHECK(indices == theirs[2].get<std::vector<int64_t>>());
        all.insert(all.end(), indices.begin(), indices.end());
      }
      // The loader's view: the same batches as one plan.
      const EpochPlan plan = sampler.plan(e);
      CHECK(plan.indices == all);
      CHECK(plan.batch_sizes.size() == batches.size());
      CHECK(plan.batch_choices.size() == batches.size());
    }
  }
}

TEST_CASE("NaFlexBatchSampler refuses bad options, naming the flag") {
  NaFlexSamplerOptions empty;
  empty.seq_lens = {};
  CHECK_THROWS_WITH_AS(NaFlexBatchSampler(10, empty), doctest::Contains("--naflex-train-seq-lens"), UsageError);
  NaFlexSamplerOptions zero_len;
  zero_len.seq_lens = {0, 128};
  CHECK_THROWS_AS(NaFlexBatchSampler(10, zero_len), UsageError);
  NaFlexSamplerOptions no_tokens;
  no_tokens.max_tokens_per_batch = 0;
  CHECK_THROWS_WITH_AS(NaFlexBatchSampler(10, no_tokens), doctest::Contains("token budget"), UsageError);
  NaFlexSamplerOptions bad_rank;
  bad_rank.world_size = 2;
  bad_rank.rank = 2;
  CHECK_THROWS_WITH_AS(NaFlexBatchSampler(10, bad_rank), doctest::Contains("rank 2"), UsageError);
  NaFlexSamplerOptions zero_probs;
  zero_probs.patch_size_probs = std::vector<double>{0.0, 0.0};
  CHECK_THROWS_WITH_AS(NaFlexBatchSampler(10, zero_probs), doctest::Contains("--naflex-patch-size-probs"), UsageError);
  NaFlexSamplerOptions nan_probs;
  nan_probs.patch_size_probs = std::vector<double>{1.0, std::nan("")};
  CHECK_THROWS_AS(NaFlexBatchSampler(10, nan_probs), UsageError);
  // An empty dataset has no batches.
  CHECK(NaFlexBatchSampler(0, NaFlexSamplerOptions{}).batches(0).empty());
}

}  // namespace test_naflex_sampler
