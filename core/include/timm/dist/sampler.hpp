// Distributed samplers: each rank's share of a dataset's indices per epoch.
//
// - DistributedSampler: torch.utils.data.DistributedSampler, index for index
//   (a torch.Generator seeded seed + epoch -> randperm; padded by repeating
//   the start to a multiple of the world size, or cut with drop_last; rank
//   takes every num_replicas-th index from position rank).
// - RepeatAugSampler: timm/data/distributed_sampler.py's (--aug-repeats):
//   every sample repeated num_repeats times, so the repeats land on different
//   ranks, and only num_selected_samples per rank per epoch (selected_round,
//   selected_ratio as timm's). Its permutation is seeded by the epoch alone,
//   as timm's.
// - ShardSampler: exact evaluation: rank r gets the real samples r, r + W,
//   r + 2W, ... (timm's OrderedDistributedSampler without its padding), so
//   every sample is evaluated exactly once over the group; shard sizes differ
//   by at most one.
#pragma once

#include <cstdint>
#include <vector>

#include "timm/data/loader.hpp"

namespace timm::dist {

struct DistributedSamplerOptions {
  int64_t num_replicas = 1;
  int64_t rank = 0;
  bool shuffle = true;
  int64_t seed = 0;
  bool drop_last = false;
};

class DistributedSampler : public Sampler {
 public:
  // Throws UsageError for a rank outside [0, num_replicas).
  DistributedSampler(int64_t dataset_size, DistributedSamplerOptions options);
  std::vector<int64_t> indices(int64_t epoch) const override;
  int64_t num_samples() const { return num_samples_; }  // per rank, every epoch

 private:
  int64_t dataset_size_;
  DistributedSamplerOptions options_;
  int64_t num_samples_;
  int64_t total_size_;
};

struct RepeatAugSamplerOptions {
  int64_t num_replicas = 1;
  int64_t rank = 0;
  bool shuffle = true;
  double num_repeats = 3;  // --aug-repeats; a non-integer ratio resamples as timm's
  int64_t selected_round = 256;
  double selected_ratio = 0;  // 0: num_replicas
};

class RepeatAugSampler : public Sampler {
 public:
  // Throws UsageError for a rank outside [0, num_replicas) or num_repeats <= 0.
  RepeatAugSampler(int64_t dataset_size, RepeatAugSamplerOptions options);
  std::vector<int64_t> indices(int64_t epoch) const override;
  int64_t num_selected_samples() const { return num_selected_samples_; }  // per rank, every epoch

 private:
  int64_t dataset_size_;
  RepeatAugSamplerOptions options_;
  int64_t total_size_;
  int64_t num_selected_samples_;
};

class ShardSampler : public Sampler {
 public:
  // Throws UsageError for a rank outside [0, num_replicas).
  ShardSampler(int64_t dataset_size, int64_t num_replicas, int64_t rank);
  std::vector<int64_t> indices(int64_t epoch) const override;  // the same every epoch
  int64_t num_samples() const;

 private:
  int64_t dataset_size_, num_replicas_, rank_;
};

}  // namespace timm::dist
