// The batch loader: worker threads decode and transform samples into uint8
// batches, a bounded number of batches ahead of the training loop.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include <ATen/core/Tensor.h>

#include "timm/data/dataset.hpp"
#include "timm/data/naflex.hpp"
#include "timm/data/naflex_mixup.hpp"
#include "timm/data/transform.hpp"

namespace timm {

struct Batch {
  at::Tensor images;  // uint8 (N, C, H, W), CPU; undefined for a NaFlex loader's batch
  // A NaFlex loader's batch (LoaderOptions::naflex): the images cut into
  // patches and padded to the choice's sequence length, uint8 until
  // normalize_patches.
  NaFlexBatch patches;
  // int64 (N); with LoaderOptions::naflex_mixup, float32 soft targets
  // (N, num_classes).
  at::Tensor targets;
  // Which of the loader's transforms made it (Sampler::batch_choices); its
  // batch stages are the ones to apply.
  std::size_t choice = 0;
};

// One epoch of a sampler, made by one computation.
struct EpochPlan {
  std::vector<int64_t> indices;
  // The batch sizes in order, summing to indices.size(), when the batches
  // are not consecutive runs of the loader's batch size: torch's DataLoader
  // over an IterableDataset takes each worker's batches in turn, and every
  // worker ends its stream with a partial batch. Empty: runs of the batch
  // size, the last one shorter. With drop_last the loader leaves out every
  // batch shorter than its batch size.
  std::vector<int64_t> batch_sizes;
  // The transform choice of each batch (an index into the loader's
  // transforms), parallel to batch_sizes, for a sampler that schedules
  // per-batch input sizes (ScheduledBatchSampler). When not empty, the
  // batches are exactly batch_sizes: the sampler has applied drop_last
  // itself. Empty: every batch uses transform 0.
  std::vector<int64_t> batch_choices;
};

// Chooses the sample order of an epoch.
class Sampler {
 public:
  virtual ~Sampler() = default;
  virtual std::vector<int64_t> indices(int64_t epoch) const = 0;
  // The epoch with its batch structure; the loader asks for it once per
  // epoch. A sampler whose batch sizes or choices come out of the same
  // computation as its order overrides it. Default: indices(epoch) alone.
  virtual EpochPlan plan(int64_t epoch) const { return {indices(epoch), {}, {}}; }
  std::vector<int64_t> batch_sizes(int64_t epoch) const { return plan(epoch).batch_sizes; }
  std::vector<int64_t> batch_choices(int64_t epoch) const { return plan(epoch).batch_choices; }
};
// A permutation seeded by (seed, epoch), or 0..n-1 when !shuffle.
std::shared_ptr<Sampler> make_local_sampler(std::size_t dataset_size, bool shuffle, std::uint64_t seed);

struct LoaderOptions {
  int64_t batch_size = 128;
  bool drop_last = false;
  int64_t num_workers = 4;       // -j; 0 loads on the calling thread
  int64_t prefetch_batches = 2;  // per worker
  std::uint64_t seed = 42;
  // Batches in page-locked host memory (torch's pin_memory) for asynchronous
  // copies to a CUDA device; needs CUDA at run time.
  bool pin_memory = false;
  // When the transform's first stage takes an undecoded JPEG
  // (TransformPipeline::takes_jpeg: RandomResizedCrop), a sample whose file
  // (Dataset::encoded) is a JPEG goes to it undecoded and it decodes only the
  // window it crops, with the whole decode's pixels. --jpeg-dct-scale (train
  // loaders): it also decodes at a DCT scale (jpeg_dct_resized_crop): the
  // same draws and crop window, pixels close to but not PIL's. Other samples
  // (PNG, a dataset of pixels, a JPEG whose header does not read) and other
  // transforms are decoded whole. docs/data-mixup.md.
  bool jpeg_dct_scale = false;
  // --naflex-loader: per transform choice, the patch size its images are cut
  // into and the sequence length they are padded (or cut) to, as timm's
  // NaFlexMapDatasetWrapper; the batches are then Batch::patches. Empty:
  // image batches. One per transform when set; no aug splits.
  std::vector<NaFlexTransformArgs> naflex;
  // With `naflex`: each batch's images mixed (timm's NaFlexMixup, in the
  // loader as timm's NaFlexMapDatasetWrapper) before they are cut into
  // patches, seeded per (seed, epoch, batch); the batch's targets are then
  // soft. Null: no mixing.
  std::shared_ptr<const NaFlexMixup> naflex_mixup;
};

class Loader {
 public:
  Loader(std::shared_ptr<const Dataset> dataset, std::shared_ptr<Sampler> sampler, TransformPipeline transform,
         LoaderOptions options);
  // One transform per choice the sampler's batch_choices() names (timm's
  // ScheduledTransformDataset): a batch is made by its choice's transform.
  Loader(std::shared_ptr<const Dataset> dataset, std::shared_ptr<Sampler> sampler,
         std::vector<TransformPipeline> transforms, LoaderOptions options);
  ~Loader();

  // Starts an epoch; the sample order and per-sample seeds depend on it.
  void start_epoch(int64_t epoch);
  // Starts an epoch at its batch `first_batch` (0 to num_batches()): the
  // batches before it are neither loaded nor decoded, the ones after it are
  // those of start_epoch(epoch) (resuming an epoch mid-way, as a
  // --recovery-interval checkpoint does). Throws Error past the epoch's end.
  void start_epoch(int64_t epoch, std::size_t first_batch);
  // The next batch of the epoch, or nullopt at its end.
  std::optional<Batch> next();
  // Batches per epoch.
  std::size_t num_batches() const;

  // The first (or only) transform, and the transform of a batch's choice.
  const TransformPipeline& transform() const { return transforms_.front(); }
  const TransformPipeline& transform(std::size_t choice) const { return transforms_.at(choice); }
  std::size_t num_transforms() const { return transforms_.size(); }
  std::size_t skipped_samples() const;

 private:
  struct State;
  std::shared_ptr<const Dataset> dataset_;
  std::shared_ptr<Sampler> sampler_;
  std::vector<TransformPipeline> transforms_;
  LoaderOptions options_;
  std::unique_ptr<State> state_;
};

}  // namespace timm
