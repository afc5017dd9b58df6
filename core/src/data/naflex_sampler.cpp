#include "timm/data/naflex_sampler.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <ATen/ATen.h>

#include "timm/base/error.hpp"
#include "timm/base/torch_random.hpp"

namespace timm {
namespace {

// timm's calculate_naflex_batch_size(tokens, seq_len, max_size, divisor, 'floor').
int64_t naflex_batch_size(int64_t tokens_per_batch, int64_t seq_len, int64_t max_size, int64_t divisor) {
  const double raw = static_cast<double>(tokens_per_batch) / static_cast<double>(seq_len);
  const auto batch = divisor > 1 ? static_cast<int64_t>(std::floor(raw / static_cast<double>(divisor))) * divisor
                                 : static_cast<int64_t>(raw);
  return std::min(std::max<int64_t>(1, batch), max_size);
}

}  // namespace

NaFlexBatchSampler::NaFlexBatchSampler(int64_t dataset_size, NaFlexSamplerOptions options)
    : dataset_size_(dataset_size), options_(std::move(options)) {
  seq_lens_ = options_.seq_lens;
  std::sort(seq_lens_.begin(), seq_lens_.end());
  seq_lens_.erase(std::unique(seq_lens_.begin(), seq_lens_.end()), seq_lens_.end());
  if (seq_lens_.empty() || seq_lens_.front() < 1) {
    throw UsageError("--naflex-train-seq-lens: expected one or more positive sequence lengths");
  }
  if (options_.max_tokens_per_batch < 1 || options_.batch_divisor < 1) {
    throw UsageError(
        "NaFlex loader: expected a positive token budget per batch (--batch-size times the longest "
        "--naflex-train-seq-lens) and batch divisor, got " +
        std::to_string(options_.max_tokens_per_batch) + " and " + std::to_string(options_.batch_divisor));
  }
  if (options_.world_size < 1 || options_.rank < 0 || options_.rank >= options_.world_size) {
    throw UsageError("NaFlex loader: rank " + std::to_string(options_.rank) + " is outside a world of " +
                     std::to_string(options_.world_size));
  }
  if (dataset_size_ < 0) throw UsageError("NaFlex loader: negative dataset size");
  if (const auto& probs = options_.patch_size_probs) {
    double sum = 0.0;
    for (const double p : *probs) {
      if (!std::isfinite(p) || p < 0.0) {
        throw UsageError("--naflex-patch-size-probs: expected finite non-negative weights, got " + std::to_string(p));
      }
      sum += p;
    }
    if (probs->empty() || !(sum > 0.0)) {
      throw UsageError("--naflex-patch-size-probs: expected weights with a positive sum");
    }
    num_patch_sizes_ = static_cast<int64_t>(probs->size());
    std::vector<double> normalised;
    for (const double p : *probs) normalised.push_back(p / sum);
    patch_size_probs_ = at::tensor(normalised, at::TensorOptions().dtype(at::kDouble)).to(at::kFloat);
  }

  // timm pads the dataset to a multiple of the world size.
  samples_per_rank_ = (dataset_size_ + options_.world_size - 1) / options_.world_size;
  at::Generator generator = seeded_generator(options_.seed);
  const auto num_lens = static_cast<int64_t>(seq_lens_.size());
  for (int64_t remaining = samples_per_rank_; remaining > 0;) {
    const int64_t seq_idx =
        at::randint(0, num_lens, {1}, generator, at::TensorOptions().dtype(at::kLong)).item<int64_t>();
    const int64_t seq_len = seq_lens_[static_cast<size_t>(seq_idx)];
    const int64_t batch = naflex_batch_size(options_.max_tokens_per_batch, seq_len, remaining, options_.batch_divisor);
    schedule_.emplace_back(seq_len, batch);
    remaining -= batch;
  }
}

std::vector<std::pair<int64_t, std::vector<int64_t>>> NaFlexBatchSampler::batches(int64_t epoch) const {
  at::Generator generator = seeded_generator(options_.seed + epoch);
  std::vector<int64_t> order;
  if (options_.shuffle) {
    order = randperm(dataset_size_, generator);
  } else {
    for (int64_t i = 0; i < dataset_size_; ++i) order.push_back(i);
  }
  std::vector<int64_t> mine;
  if (options_.world_size > 1) {
    // Every world_size-th of the shuffled order from this rank, wrapping around.
    for (int64_t i = options_.rank; i < samples_per_rank_ * options_.world_size; i += options_.world_size) {
      mine.push_back(order[static_cast<size_t>(i % dataset_size_)]);
    }
  } else {
    mine = std::move(order);
  }
  std::vector<std::pair<int64_t, int64_t>> schedule = schedule_;
  if (options_.shuffle) {
    const std::vector<int64_t> perm = randperm(static_cast<int64_t>(schedule_.size()), generator);
    for (size_t i = 0; i < perm.size(); ++i) schedule[i] = schedule_[static_cast<size_t>(perm[i])];
  }
  std::vector<std::pair<int64_t, std::vector<int64_t>>> out;
  size_t pos = 0;
  for (const auto& [seq_len, batch] : schedule) {
    const auto take = std::min(static_cast<size_t>(batch), mine.size() - pos);
    if (take == 0) break;
    int64_t patch_idx = 0;
    if (patch_size_probs_.defined())
      patch_idx = at::multinomial(patch_size_probs_, 1, /*replacement=*/false, generator).item<int64_t>();
    const auto seq_idx = std::lower_bound(seq_lens_.begin(), seq_lens_.end(), seq_len) - seq_lens_.begin();
    out.emplace_back(seq_idx * num_patch_sizes_ + patch_idx,
                     std::vector<int64_t>(mine.begin() + static_cast<std::ptrdiff_t>(pos),
                                          mine.begin() + static_cast<std::ptrdiff_t>(pos + take)));
    pos += take;
  }
  return out;
}

std::vector<int64_t> NaFlexBatchSampler::indices(int64_t epoch) const { return plan(epoch).indices; }

EpochPlan NaFlexBatchSampler::plan(int64_t epoch) const {
  EpochPlan plan;
  for (auto& [choice, indices] : batches(epoch)) {
    plan.batch_sizes.push_back(static_cast<int64_t>(indices.size()));
    plan.batch_choices.push_back(choice);
    plan.indices.insert(plan.indices.end(), indices.begin(), indices.end());
  }
  return plan;
}

}  // namespace timm
