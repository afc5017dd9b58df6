// timm's ScheduledBatchSampler (timm/data/scheduled_sampler.py, train.py's
// --train-img-sizes): every batch of an epoch gets a transform choice (an
// input size) and that choice's batch size.
//
// - Sample-budget mode (no num_batches, constant schedule): a canonical
//   composition of (choice, batch size) pairs that fits the base sampler's
//   length is drawn once from torch.Generator().manual_seed(seed) with
//   torch.multinomial over the choices whose batch still fits; with
//   drop_last the remainder is dropped, else it becomes one short batch.
// - Fixed-batch mode (num_batches given, or a progressive schedule, which
//   infers it from the training-average batch size): each epoch draws
//   num_batches choices from choice_weights_for_epoch(epoch) with a
//   generator seeded seed + 2 * epoch; the base sampler's order is cycled when
//   the batches need more samples than it gives.
// - Each epoch the schedule is shuffled by torch.randperm with a generator
//   seeded seed + 2 * epoch + 1, so every rank of a distributed run, given the
//   same seed, gets the same shapes in the same order.
//
// The draws are torch's own (at::multinomial, at::randperm on a CPU
// generator), so the batches equal timm's index for index wherever the base
// sampler's order does (SequentialSampler, DistributedSampler). Invalid
// options throw UsageError naming train.py's flag that sets them.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>

#include "timm/data/loader.hpp"

namespace timm {

struct ScheduledBatchSamplerOptions {
  std::vector<int64_t> batch_sizes;                   // per choice (--train-batch-sizes)
  std::optional<std::vector<double>> choice_weights;  // base weights (--train-size-probs); none: uniform
  int64_t seed = 0;                                   // --seed
  bool drop_last = true;                              // timm: True for the training loader
  bool shuffle_schedule = true;
  std::optional<int64_t> num_batches;        // --train-batches-per-epoch
  std::string choice_schedule = "constant";  // --train-size-schedule: "constant" or "progressive"
  std::optional<int64_t> schedule_epochs;    // progressive: --epochs
  double schedule_spread = 0.65;             // --train-size-schedule-spread
  double schedule_random_mix = 0.1;          // --train-size-random-mix
};

// One batch of an epoch: its transform choice and its samples.
struct ScheduledBatch {
  int64_t choice = 0;
  std::vector<int64_t> indices;
};

class ScheduledBatchSampler final : public Sampler {
 public:
  // `base` gives the sample order of each epoch (its length the same every
  // epoch). Throws UsageError as timm's constructor raises ValueError.
  ScheduledBatchSampler(std::shared_ptr<Sampler> base, ScheduledBatchSamplerOptions options);

  // The epoch's batches in order, as timm's __iter__ yields them.
  std::vector<ScheduledBatch> batches(int64_t epoch) const;
  // The unshuffled (choice, batch size) schedule of an epoch (timm's schedule).
  std::vector<std::pair<int64_t, int64_t>> schedule(int64_t epoch) const;
  // Normalised float64 choice weights of an epoch, as timm computes them.
  std::vector<double> choice_weights_for_epoch(int64_t epoch) const;
  // The policy-average batch size (timm's average_batch_size).
  double average_batch_size() const { return average_batch_size_; }
  // Batches per epoch (timm's __len__).
  std::size_t size() const;
  const std::vector<int64_t>& choice_batch_sizes() const { return options_.batch_sizes; }

  // Sampler: the batches' indices concatenated, their sizes and choices.
  std::vector<int64_t> indices(int64_t epoch) const override;
  EpochPlan plan(int64_t epoch) const override;

 private:
  at::Tensor weights_for_epoch(int64_t epoch) const;
  double calculate_average_batch_size() const;
  int64_t infer_num_batches() const;
  std::vector<std::pair<int64_t, int64_t>> create_sample_budget_schedule() const;

  std::shared_ptr<Sampler> base_;
  ScheduledBatchSamplerOptions options_;
  int64_t base_size_ = 0;
  at::Tensor choice_weights_;  // float64, normalised
  std::vector<int64_t> active_choices_;
  double average_batch_size_ = 0.0;
  std::vector<std::pair<int64_t, int64_t>> sample_budget_schedule_;
};

}  // namespace timm
