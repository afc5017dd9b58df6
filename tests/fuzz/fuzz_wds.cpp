// Fuzz target: a WebDataset shard (wds/ datasets): the tar listed and grouped
// into samples, the .cls and .json targets read (both ways: the .cls member,
// then a json field), every rank's sampler order made for training and
// evaluation, and a few samples decoded.
#include <algorithm>
#include <set>
#include <string>

#include "fuzz_target.hpp"
#include "timm/base/error.hpp"
#include "timm/data/dataset.hpp"
#include "timm/data/loader.hpp"

namespace {

constexpr std::size_t kMaxDecodedSamples = 16;

void check_wds_targets(const timm::Dataset& dataset) {
  for (std::size_t i = 0; i < dataset.size(); ++i) {
    const int64_t target = dataset.target(i);
    if (target < 0 || target >= dataset.num_classes()) {
      timm::fuzz::broken_promise(dataset.describe(i) + ": target " + std::to_string(target) + " of " +
                                 std::to_string(dataset.num_classes()) + " classes");
    }
  }
}

// Two ranks of two workers, batch 3: every index a sampler gives is a sample
// of the dataset, and the batch sizes add up to the indices.
void check_wds_order(const timm::IterableDataset& dataset, bool is_training) {
  for (int64_t rank = 0; rank < 2; ++rank) {
    timm::StreamConfig config;
    config.rank = rank;
    config.world_size = 2;
    config.num_workers = 2;
    config.batch_size = 3;
    config.is_training = is_training;
    std::shared_ptr<timm::Sampler> sampler;
    try {
      sampler = dataset.make_sampler(config);
    } catch (const timm::Error&) {
      continue;  // too few shards for the ranks and workers: a refusal
    }
    const std::vector<int64_t> indices = sampler->indices(0);
    const std::vector<int64_t> sizes = sampler->batch_sizes(0);
    int64_t batched = 0;
    for (const int64_t size : sizes) batched += size;
    if (!sizes.empty() && batched != static_cast<int64_t>(indices.size())) {
      timm::fuzz::broken_promise("batch sizes add up to " + std::to_string(batched) + " of " +
                                 std::to_string(indices.size()) + " indices");
    }
    for (const int64_t index : indices) {
      if (index < 0 || index >= static_cast<int64_t>(dataset.size())) {
        timm::fuzz::broken_promise("sampler index " + std::to_string(index) + " of " + std::to_string(dataset.size()) +
                                   " samples");
      }
    }
  }
}

void read_wds_shard(const std::string& split, const timm::IterableOptions& options) {
  const auto dataset = timm::make_wds(timm::fuzz::scratch_dir(), split, 3, options);
  check_wds_targets(*dataset);
  check_wds_order(*dataset, /*is_training=*/false);
  check_wds_order(*dataset, /*is_training=*/true);
  for (std::size_t i = 0; i < std::min(dataset->size(), kMaxDecodedSamples); ++i) {
    try {
      timm::fuzz::check_image(dataset->image(i), 3, dataset->describe(i));
    } catch (const timm::Error&) {
    }
  }
}

}  // namespace

TIMM_FUZZ_TARGET(wds) {
  timm::fuzz::scratch_file("shard-0.tar", data);
  // The .cls targets; then the json sidecars' "label" field. A refusal of
  // one must not skip the other.
  try {
    read_wds_shard("shard-{0..0}.tar|8", {});
  } catch (const timm::Error&) {
  }
  timm::IterableOptions keyed;
  keyed.target_key = "label";
  read_wds_shard("shard-0.tar|8", keyed);
}
