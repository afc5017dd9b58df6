// The batch schedule of timm's NaFlex training loader (timm/data/
// naflex_dataset.py NaFlexMapDatasetWrapper, train.py's --naflex-loader):
// batches of variable sequence length, each with as many samples as fill a
// token budget.
//
// - Once, from torch.Generator().manual_seed(seed): a canonical schedule of
//   (sequence length, batch size) pairs covering this rank's samples, each
//   length drawn uniformly from seq_lens (torch.randint) and its batch size
//   max_tokens_per_batch / length floored to a multiple of batch_divisor (at
//   least 1, at most the samples left).
// - Each epoch, from a generator seeded seed + epoch: the dataset's order
//   (torch.randperm, or 0..n-1 without shuffle); in a distributed run this
//   rank's share of it (every world_size-th from rank, wrapping around to pad
//   the dataset to a multiple of world_size); the schedule's order
//   (torch.randperm); and, with several patch sizes, each batch's patch size
//   (torch.multinomial over patch_size_probs).
//
// The draws are torch's own on a CPU generator, so the batches equal timm's
// index for index. A batch's choice (EpochPlan::batch_choices) names its
// (sequence length, patch size) pair: choice = seq_idx * num_patch_sizes +
// patch_idx, seq_idx into the sorted, deduplicated seq_lens.
#pragma once

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>

#include "timm/data/loader.hpp"

namespace timm {

struct NaFlexSamplerOptions {
  std::vector<int64_t> seq_lens{128, 256, 576, 784, 1024};  // --naflex-train-seq-lens
  int64_t max_tokens_per_batch = 4096 * 4;                  // timm's loader: batch_size * max(seq_lens)
  int64_t seed = 42;
  bool shuffle = true;
  int64_t rank = 0;
  int64_t world_size = 1;
  int64_t batch_divisor = 8;
  // One weight per patch size (--naflex-patch-size-probs, uniform when
  // --naflex-patch-sizes is given alone); nullopt: one fixed patch size, no
  // draw (timm's patch_size mode).
  std::optional<std::vector<double>> patch_size_probs;
};

class NaFlexBatchSampler final : public Sampler {
 public:
  // Throws UsageError naming the flag for an empty or non-positive
  // seq_lens, non-positive token budget or divisor, a rank outside
  // [0, world_size), or patch size weights that are negative, not finite or
  // sum to zero.
  NaFlexBatchSampler(int64_t dataset_size, NaFlexSamplerOptions options);

  // The epoch's batches in order: (choice, indices), as timm's
  // _prepare_epoch_batches gives them (its (seq_len, patch_idx) as the choice).
  std::vector<std::pair<int64_t, std::vector<int64_t>>> batches(int64_t epoch) const;
  // The canonical (sequence length, batch size) schedule, unshuffled.
  const std::vector<std::pair<int64_t, int64_t>>& schedule() const { return schedule_; }
  // The sorted, deduplicated sequence lengths, and a choice's length and patch size index.
  const std::vector<int64_t>& seq_lens() const { return seq_lens_; }
  int64_t num_patch_sizes() const { return num_patch_sizes_; }
  int64_t seq_len_of(int64_t choice) const { return seq_lens_.at(static_cast<size_t>(choice / num_patch_sizes_)); }
  int64_t patch_index_of(int64_t choice) const { return choice % num_patch_sizes_; }
  // Batches per epoch (timm's __len__).
  std::size_t size() const { return schedule_.size(); }

  std::vector<int64_t> indices(int64_t epoch) const override;
  EpochPlan plan(int64_t epoch) const override;

 private:
  int64_t dataset_size_;
  NaFlexSamplerOptions options_;
  std::vector<int64_t> seq_lens_;
  int64_t num_patch_sizes_ = 1;
  at::Tensor patch_size_probs_;  // normalised, float32 as torch.tensor(floats); undefined: one fixed size
  int64_t samples_per_rank_ = 0;
  std::vector<std::pair<int64_t, int64_t>> schedule_;
};

}  // namespace timm
