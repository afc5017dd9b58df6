// Distributed samplers: DistributedSampler and RepeatAugSampler index for
// index against Python's (torch.utils.data.DistributedSampler and timm's
// RepeatAugSampler, run by tests/oracle/dist_oracle.py at test time), and the
// properties the training and exact eval rely on.
#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "test_support.hpp"
#include "timm/base/error.hpp"
#include "timm/dist/sampler.hpp"

// Last: c10/util/Logging.h defines a CHECK macro that doctest must override.
#include <doctest/doctest.h>

namespace test_dist_sampler {

namespace {

using nlohmann::json;

std::vector<int64_t> cpp_indices(const json& c) {
  const int64_t size = c["size"], epoch = c["epoch"];
  if (c["kind"] == "distributed") {
    timm::dist::DistributedSamplerOptions o;
    o.num_replicas = c["num_replicas"], o.rank = c["rank"], o.shuffle = c["shuffle"], o.seed = c["seed"];
    o.drop_last = c["drop_last"];
    return timm::dist::DistributedSampler(size, o).indices(epoch);
  }
  timm::dist::RepeatAugSamplerOptions o;
  o.num_replicas = c["num_replicas"], o.rank = c["rank"], o.shuffle = c["shuffle"];
  o.num_repeats = c["num_repeats"], o.selected_round = c["selected_round"], o.selected_ratio = c["selected_ratio"];
  return timm::dist::RepeatAugSampler(size, o).indices(epoch);
}

json distributed_cases() {
  json cases = json::array();
  // Sizes divisible or not by the world size, smaller than it (padding longer
  // than the list), shuffled or not, drop_last, several seeds and epochs.
  for (int64_t world : {1, 2, 3, 4, 5}) {
    for (int64_t size : {2, 3, 10, 11, 37, 1000}) {
      for (bool shuffle : {true, false}) {
        for (bool drop_last : {false, true}) {
          for (int64_t epoch : {0, 3}) {
            for (int64_t rank = 0; rank < world; ++rank) {
              cases.push_back({{"kind", "distributed"},
                               {"size", size},
                               {"epoch", epoch},
                               {"num_replicas", world},
                               {"rank", rank},
                               {"shuffle", shuffle},
                               {"seed", epoch == 0 ? 0 : 42},
                               {"drop_last", drop_last}});
            }
          }
        }
      }
    }
  }
  return cases;
}

json repeat_aug_cases() {
  json cases = json::array();
  for (int64_t world : {1, 2, 3, 4}) {
    for (int64_t size : {7, 10, 300}) {
      for (double repeats : {3.0, 2.0, 1.5, 2.3}) {
        for (double ratio : {0.0, 1.5}) {
          for (int64_t round : {256, 0}) {
            for (int64_t rank = 0; rank < world; ++rank) {
              cases.push_back({{"kind", "repeat_aug"},
                               {"size", size},
                               {"epoch", rank + size % 5},
                               {"num_replicas", world},
                               {"rank", rank},
                               {"shuffle", size != 10},
                               {"num_repeats", repeats},
                               {"selected_round", round},
                               {"selected_ratio", ratio}});
            }
          }
        }
      }
    }
  }
  return cases;
}

void check_against_python(const json& cases) {
  const auto expected = json::parse(timm::test::run_oracle("dist_oracle.py", {"sampler", cases.dump()}));
  REQUIRE(expected.size() == cases.size());
  int mismatches = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    if (cpp_indices(cases[i]) != expected[i].get<std::vector<int64_t>>()) {
      if (++mismatches <= 5) MESSAGE("mismatch for " << cases[i].dump());
    }
  }
  MESSAGE(cases.size() << " cases compared");
  CHECK(mismatches == 0);
}

}  // namespace

TEST_CASE("DistributedSampler gives torch's indices") { check_against_python(distributed_cases()); }

TEST_CASE("RepeatAugSampler gives timm's indices") { check_against_python(repeat_aug_cases()); }

TEST_CASE("DistributedSampler: every rank the same permutation, complete, padded, changing with the epoch") {
  const int64_t size = 11, world = 3;
  std::vector<int64_t> union_epoch0, first_epoch1;
  for (int64_t rank = 0; rank < world; ++rank) {
    timm::dist::DistributedSampler sampler(size, {.num_replicas = world, .rank = rank, .seed = 5});
    const auto e0 = sampler.indices(0);
    CHECK(static_cast<int64_t>(e0.size()) == 4);  // ceil(11 / 3), one padded sample over the group
    CHECK(sampler.indices(0) == e0);              // deterministic
    union_epoch0.insert(union_epoch0.end(), e0.begin(), e0.end());
    const auto e1 = sampler.indices(1);
    first_epoch1.insert(first_epoch1.end(), e1.begin(), e1.end());
  }
  CHECK(std::set<int64_t>(union_epoch0.begin(), union_epoch0.end()).size() == size);
  CHECK(union_epoch0 != first_epoch1);
}

TEST_CASE("ShardSampler: disjoint shards of the real samples, complete, sizes within one") {
  for (int64_t world : {1, 2, 3, 4, 7}) {
    for (int64_t size : {0, 1, 5, 37}) {
      std::vector<int64_t> all;
      int64_t smallest = size, largest = 0;
      for (int64_t rank = 0; rank < world; ++rank) {
        timm::dist::ShardSampler sampler(size, world, rank);
        const auto mine = sampler.indices(0);
        CHECK(static_cast<int64_t>(mine.size()) == sampler.num_samples());
        CHECK(sampler.indices(9) == mine);
        smallest = std::min<int64_t>(smallest, mine.size()), largest = std::max<int64_t>(largest, mine.size());
        all.insert(all.end(), mine.begin(), mine.end());
      }
      std::sort(all.begin(), all.end());
      std::vector<int64_t> expected(size);
      for (int64_t i = 0; i < size; ++i) expected[i] = i;
      CHECK(all == expected);
      CHECK(largest - smallest <= 1);
    }
  }
}

TEST_CASE("samplers reject a rank outside the world") {
  CHECK_THROWS_AS(timm::dist::ShardSampler(10, 2, 2), timm::UsageError);
  CHECK_THROWS_AS(timm::dist::DistributedSampler(10, {.num_replicas = 2, .rank = -1}), timm::UsageError);
  CHECK_THROWS_AS(timm::dist::RepeatAugSampler(10, {.num_replicas = 2, .rank = 0, .num_repeats = 0}), timm::UsageError);
}

}  // namespace test_dist_sampler
