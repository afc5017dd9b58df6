#include "timm/data/loader.hpp"

#include <ATen/ATen.h>

#include <atomic>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "timm/base/error.hpp"
#include "timm/data/image.hpp"
#include "timm/log/log.hpp"

namespace timm {
namespace {

// timm's ImageDataset gives up after this many consecutive bad samples.
constexpr int kMaxRetries = 20;

std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// A seed per (seed, epoch, dataset index): independent of workers and batching.
std::uint64_t sample_seed(std::uint64_t seed, int64_t epoch, int64_t index) {
  return splitmix64(splitmix64(splitmix64(seed) ^ static_cast<std::uint64_t>(epoch)) ^
                    static_cast<std::uint64_t>(index));
}

class LocalSampler final : public Sampler {
 public:
  LocalSampler(std::size_t size, bool shuffle, std::uint64_t seed) : size_(size), shuffle_(shuffle), seed_(seed) {}

  std::vector<int64_t> indices(int64_t epoch) const override {
    std::vector<int64_t> order(size_);
    for (std::size_t i = 0; i < size_; ++i) order[i] = static_cast<int64_t>(i);
    if (!shuffle_) return order;
    // Fisher-Yates with a plain modulo: the same order with any standard
    // library (std::uniform_int_distribution is implementation-defined).
    std::mt19937_64 engine(seed_ + static_cast<std::uint64_t>(epoch));
    for (std::size_t i = size_; i > 1; --i) {
      const std::size_t j = engine() % i;
      std::swap(order[i - 1], order[j]);
    }
    return order;
  }

 private:
  std::size_t size_;
  bool shuffle_;
  std::uint64_t seed_;
};

// Copies an interleaved HWC image into one CHW slot of the batch.
void copy_chw(const Image& image, std::uint8_t* dst) {
  const int64_t plane = image.height * image.width;
  if (image.channels == 1) {
    std::memcpy(dst, image.pixels.data(), plane);
    return;
  }
  const std::uint8_t* src = image.pixels.data();
  const int64_t c = image.channels;
  for (int64_t ch = 0; ch < c; ++ch) {
    std::uint8_t* out = dst + ch * plane;
    for (int64_t i = 0; i < plane; ++i) out[i] = src[i * c + ch];
  }
}

// The epoch's batches as [begin, end) ranges of the order: runs of the batch
// size, or the sampler's own sizes; drop_last leaves out the short ones.
// (A sampler that schedules the batches' choices applies drop_last itself:
// the caller passes false.)
std::vector<std::pair<std::size_t, std::size_t>> batch_ranges(std::size_t order_size, std::vector<int64_t> sizes,
                                                              int64_t batch_size, bool drop_last) {
  const auto bs = static_cast<std::size_t>(batch_size);
  if (sizes.empty()) {
    for (std::size_t begin = 0; begin < order_size; begin += bs) {
      sizes.push_back(static_cast<int64_t>(std::min(bs, order_size - begin)));
    }
  }
  std::vector<std::pair<std::size_t, std::size_t>> ranges;
  std::size_t begin = 0;
  for (const int64_t size : sizes) {
    TORCH_CHECK(size > 0 && begin + static_cast<std::size_t>(size) <= order_size,
                "Sampler::batch_sizes does not partition the epoch's indices");
    const std::size_t end = begin + static_cast<std::size_t>(size);
    if (!drop_last || static_cast<std::size_t>(size) >= bs) ranges.emplace_back(begin, end);
    begin = end;
  }
  TORCH_CHECK(begin == order_size, "Sampler::batch_sizes does not partition the epoch's indices");
  return ranges;
}

}  // namespace

std::shared_ptr<Sampler> make_local_sampler(std::size_t dataset_size, bool shuffle, std::uint64_t seed) {
  return std::make_shared<LocalSampler>(dataset_size, shuffle, seed);
}

// One epoch's work: batch b is built by whichever worker claims it; the
// consumer takes batches strictly in order.
struct Loader::State {
  int64_t epoch = 0;
  std::vector<int64_t> order;
  std::vector<std::pair<std::size_t, std::size_t>> batches;  // [begin, end) of order
  std::vector<std::size_t> choices;                          // each batch's transform
  std::size_t num_batches = 0;
  std::size_t next_to_claim = 0;   // guarded by mutex
  std::size_t next_to_return = 0;  // guarded by mutex
  std::map<std::size_t, Batch> ready;
  std::exception_ptr error;       // the first failure, rethrown by next()
  std::atomic<bool> stop{false};  // set under mutex; read lock-free mid-batch
  std::mutex mutex;
  std::condition_variable work_cv;   // workers wait for room to prefetch
  std::condition_variable ready_cv;  // the consumer waits for its batch
  std::vector<std::thread> workers;
  std::atomic<std::size_t> skipped{0};

  void shutdown() {
    {
      std::lock_guard<std::mutex> lock(mutex);
      stop = true;
    }
    work_cv.notify_all();
    ready_cv.notify_all();
    for (auto& t : workers) {
      if (t.joinable()) t.join();
    }
    workers.clear();
  }
};

Loader::Loader(std::shared_ptr<const Dataset> dataset, std::shared_ptr<Sampler> sampler, TransformPipeline transform,
               LoaderOptions options)
    : Loader(std::move(dataset), std::move(sampler), std::vector<TransformPipeline>{std::move(transform)}, options) {}

Loader::Loader(std::shared_ptr<const Dataset> dataset, std::shared_ptr<Sampler> sampler,
               std::vector<TransformPipeline> transforms, LoaderOptions options)
    : dataset_(std::move(dataset)),
      sampler_(std::move(sampler)),
      transforms_(std::move(transforms)),
      options_(options),
      state_(std::make_unique<State>()) {
  TORCH_CHECK(dataset_ != nullptr && sampler_ != nullptr, "Loader needs a dataset and a sampler");
  TORCH_CHECK(!transforms_.empty(), "Loader needs at least one transform");
  if (options_.batch_size <= 0)
    throw UsageError("batch size must be positive, got " + std::to_string(options_.batch_size));
  if (options_.num_workers < 0)
    throw UsageError("workers (-j) must be >= 0, got " + std::to_string(options_.num_workers));
  options_.prefetch_batches = std::max<int64_t>(options_.prefetch_batches, 1);
  if (!options_.naflex.empty()) {
    if (options_.naflex.size() != transforms_.size()) {
      throw UsageError("NaFlex loader: " + std::to_string(options_.naflex.size()) + " patch and sequence sizes for " +
                       std::to_string(transforms_.size()) + " transforms; expected one per transform");
    }
    for (const TransformPipeline& t : transforms_) {
      if (t.num_splits() > 1) throw UsageError("--aug-splits is not supported with --naflex-loader (nor in timm)");
    }
  } else if (options_.naflex_mixup) {
    throw UsageError("NaFlex mixing (LoaderOptions::naflex_mixup) needs a NaFlex loader (LoaderOptions::naflex)");
  }
}

Loader::~Loader() {
  if (state_) state_->shutdown();
}

std::size_t Loader::num_batches() const {
  // The sampler's length, not the dataset's: a distributed sampler gives each
  // rank its share (every epoch the same length).
  EpochPlan plan = sampler_->plan(0);
  const bool drop_last = options_.drop_last && plan.batch_choices.empty();
  return batch_ranges(plan.indices.size(), std::move(plan.batch_sizes), options_.batch_size, drop_last).size();
}

std::size_t Loader::skipped_samples() const { return state_->skipped.load(); }

namespace {

// The transformed images of sample `index`. When the first stage takes a
// JPEG (a crop), a JPEG file goes to it undecoded, so that it decodes only
// the part it crops (pixels equal to the whole decode's), and with
// --jpeg-dct-scale at a DCT scale; any other file is decoded from the bytes
// already read, as image() decodes it (a JPEG whose header does not read
// too: decode_image then reports it).
std::vector<Image> transform_sample(const Dataset& dataset, const TransformPipeline& transform, std::size_t index,
                                    bool jpeg_dct_scale, Rng& rng) {
  if (!transform.takes_jpeg()) return transform.apply_splits(dataset.image(index), rng);
  std::optional<EncodedImage> file = dataset.encoded(index);
  if (!file) return transform.apply_splits(dataset.image(index), rng);
  std::string source = dataset.describe(index);
  if (const auto size = jpeg_dimensions(file->bytes)) {
    const JpegSample jpeg{file->bytes, size->first, size->second, file->channels, std::move(source), jpeg_dct_scale};
    return transform.apply_splits_jpeg(jpeg, rng);
  }
  return transform.apply_splits(decode_image(file->bytes, source, file->channels), rng);
}

// Loads the sample at `index`, moving on to the next index on a bad file as
// timm's ImageDataset does; throws after kMaxRetries consecutive failures.
std::vector<Image> load_sample(const Dataset& dataset, const TransformPipeline& transform, int64_t index,
                               const LoaderOptions& options, int64_t epoch, std::atomic<std::size_t>& skipped,
                               int64_t& target) {
  const int64_t n = static_cast<int64_t>(dataset.size());
  int64_t i = index;
  for (int attempt = 0;; ++attempt) {
    try {
      Rng rng(sample_seed(options.seed, epoch, i));
      std::vector<Image> images =
          transform_sample(dataset, transform, static_cast<std::size_t>(i), options.jpeg_dct_scale, rng);
      target = dataset.target(static_cast<std::size_t>(i));
      return images;
    } catch (const UsageError&) {
      throw;  // a configuration error, not a bad sample
    } catch (const Error& e) {
      skipped.fetch_add(1);
      log_warning("Skipped sample (index " + std::to_string(i) + ", file " + dataset.describe(i) + "). " + e.what());
      if (attempt + 1 >= kMaxRetries) {
        throw Error("data: " + std::to_string(kMaxRetries) + " consecutive samples failed to load, the last " +
                    in_quotes(dataset.describe(i)) + ": " + e.what());
      }
      i = (i + 1) % n;
    }
  }
}

}  // namespace

// A NaFlex batch (LoaderOptions::naflex): each sample cut into its choice's
// patches, then all padded to its sequence length (timm's Patchify and
// NaFlexCollator).
static Batch build_patch_batch(const Dataset& dataset, const TransformPipeline& transform, std::size_t choice,
                               const LoaderOptions& options, const std::vector<int64_t>& order, int64_t epoch,
                               std::pair<std::size_t, std::size_t> range, std::atomic<std::size_t>& skipped,
                               const std::atomic<bool>* stop) {
  const auto [begin, end] = range;
  const NaFlexTransformArgs& naflex = options.naflex.at(choice);
  Batch batch;
  batch.choice = choice;
  batch.targets = at::empty({static_cast<int64_t>(end - begin)}, at::kLong);
  int64_t* targets = batch.targets.data_ptr<int64_t>();
  std::vector<Image> images;
  for (std::size_t k = 0; k < end - begin; ++k) {
    if (stop != nullptr && stop->load(std::memory_order_relaxed)) return {};
    std::vector<Image> sample = load_sample(dataset, transform, order[begin + k], options, epoch, skipped, targets[k]);
    images.push_back(std::move(sample.front()));
  }
  if (options.naflex_mixup) {
    // Seeded by the batch (a negative index, apart from the samples' seeds),
    // whichever worker builds it.
    Rng rng(sample_seed(options.seed, epoch, -1 - static_cast<int64_t>(begin)));
    batch.targets = options.naflex_mixup->apply(images, batch.targets, epoch, rng);
  }
  std::vector<ImagePatches> samples;
  for (const Image& image : images) samples.push_back(patchify_image(image, naflex.patch_size));
  batch.patches = collate_patches(samples, naflex.max_seq_len);
  if (options.pin_memory) {
    batch.targets = batch.targets.pin_memory();
    batch.patches.patches = batch.patches.patches.pin_memory();
    batch.patches.patch_coord = batch.patches.patch_coord.pin_memory();
    batch.patches.patch_valid = batch.patches.patch_valid.pin_memory();
  }
  return batch;
}

// Builds batch `b` of the epoch (called from a worker or inline).
static Batch build_batch(const Dataset& dataset, const TransformPipeline& transform, std::size_t choice,
                         const LoaderOptions& options, const std::vector<int64_t>& order, int64_t epoch,
                         std::pair<std::size_t, std::size_t> range, std::atomic<std::size_t>& skipped,
                         const std::atomic<bool>* stop) {
  if (!options.naflex.empty()) {
    return build_patch_batch(dataset, transform, choice, options, order, epoch, range, skipped, stop);
  }
  const auto [begin, end] = range;
  const int64_t n = static_cast<int64_t>(end - begin);
  // With aug splits, split j of sample k is row k + j * n (timm's fast_collate).
  const int64_t splits = transform.num_splits();
  Batch batch;
  batch.choice = choice;
  const auto pinned = at::TensorOptions().pinned_memory(options.pin_memory);
  batch.targets = at::empty({n * splits}, pinned.dtype(at::kLong));
  int64_t* targets = batch.targets.data_ptr<int64_t>();
  std::uint8_t* images = nullptr;
  int64_t c = 0, h = 0, w = 0;
  for (int64_t k = 0; k < n; ++k) {
    if (stop != nullptr && stop->load(std::memory_order_relaxed)) return {};
    const int64_t index = order[begin + k];
    const std::vector<Image> sample = load_sample(dataset, transform, index, options, epoch, skipped, targets[k]);
    const Image& image = sample.front();
    if (k == 0) {
      c = image.channels, h = image.height, w = image.width;
      batch.images = at::empty({n * splits, c, h, w}, pinned.dtype(at::kByte));
      images = batch.images.data_ptr<std::uint8_t>();
    } else if (image.channels != c || image.height != h || image.width != w) {
      throw Error("data: sample " + in_quotes(dataset.describe(index)) + " is " + std::to_string(image.height) + "x" +
                  std::to_string(image.width) + "x" + std::to_string(image.channels) +
                  " after the transforms; expected " + std::to_string(h) + "x" + std::to_string(w) + "x" +
                  std::to_string(c) + " like the rest of its batch (is a crop stage missing?)");
    }
    for (int64_t j = 0; j < splits; ++j) {
      const Image& part = sample[static_cast<std::size_t>(j)];
      TORCH_CHECK(part.channels == c && part.height == h && part.width == w, "aug split ", j, " changed the size");
      copy_chw(part, images + (k + j * n) * c * h * w);
      targets[k + j * n] = targets[k];
    }
  }
  return batch;
}

void Loader::start_epoch(int64_t epoch) { start_epoch(epoch, 0); }

void Loader::start_epoch(int64_t epoch, std::size_t first_batch) {
  state_->shutdown();
  auto fresh = std::make_unique<State>();
  fresh->skipped.store(state_->skipped.load());
  state_ = std::move(fresh);
  State& s = *state_;
  s.epoch = epoch;
  EpochPlan plan = sampler_->plan(epoch);
  s.order = std::move(plan.indices);
  const std::vector<int64_t>& choices = plan.batch_choices;
  s.batches = batch_ranges(s.order.size(), std::move(plan.batch_sizes), options_.batch_size,
                           options_.drop_last && choices.empty());
  s.num_batches = s.batches.size();
  s.choices.assign(s.num_batches, 0);
  if (!choices.empty()) {
    TORCH_CHECK(choices.size() == s.num_batches, "Sampler::batch_choices gives ", choices.size(), " choices for ",
                s.num_batches, " batches");
    for (std::size_t b = 0; b < s.num_batches; ++b) {
      TORCH_CHECK(choices[b] >= 0 && static_cast<std::size_t>(choices[b]) < transforms_.size(), "batch choice ",
                  choices[b], " names no transform of the loader's ", transforms_.size());
      s.choices[b] = static_cast<std::size_t>(choices[b]);
    }
  }
  if (first_batch > s.num_batches) {
    throw Error("the loader cannot start epoch " + std::to_string(epoch) + " at batch " + std::to_string(first_batch) +
                ": the epoch has " + std::to_string(s.num_batches) + " batches");
  }
  // The workers claim from here on; nothing before it is built.
  s.next_to_claim = first_batch;
  s.next_to_return = first_batch;
  if (options_.num_workers == 0) return;

  const std::size_t max_ahead = static_cast<std::size_t>(options_.num_workers * options_.prefetch_batches);
  for (int64_t wkr = 0; wkr < options_.num_workers; ++wkr) {
    s.workers.emplace_back([this, &s, max_ahead] {
      while (true) {
        std::size_t b;
        {
          std::unique_lock<std::mutex> lock(s.mutex);
          s.work_cv.wait(lock, [&] {
            return s.stop || s.error || s.next_to_claim >= s.num_batches ||
                   s.next_to_claim < s.next_to_return + max_ahead;
          });
          if (s.stop || s.error || s.next_to_claim >= s.num_batches) return;
          b = s.next_to_claim++;
        }
        try {
          Batch batch = build_batch(*dataset_, transforms_[s.choices[b]], s.choices[b], options_, s.order, s.epoch,
                                    s.batches[b], s.skipped, &s.stop);
          std::lock_guard<std::mutex> lock(s.mutex);
          s.ready.emplace(b, std::move(batch));
        } catch (...) {
          std::lock_guard<std::mutex> lock(s.mutex);
          if (!s.error) s.error = std::current_exception();
        }
        s.ready_cv.notify_all();
      }
    });
  }
}

std::optional<Batch> Loader::next() {
  State& s = *state_;
  if (options_.num_workers == 0) {
    if (s.next_to_return >= s.num_batches) return std::nullopt;
    const std::size_t b = s.next_to_return++;
    return build_batch(*dataset_, transforms_[s.choices[b]], s.choices[b], options_, s.order, s.epoch, s.batches[b],
                       s.skipped, nullptr);
  }
  std::unique_lock<std::mutex> lock(s.mutex);
  if (s.next_to_return >= s.num_batches) return std::nullopt;
  const std::size_t b = s.next_to_return;
  s.ready_cv.wait(lock, [&] { return s.error || s.ready.count(b) > 0; });
  if (s.ready.count(b) == 0) {
    std::exception_ptr error = s.error;
    lock.unlock();
    std::rethrow_exception(error);
  }
  Batch batch = std::move(s.ready.at(b));
  s.ready.erase(b);
  ++s.next_to_return;
  lock.unlock();
  s.work_cv.notify_all();
  return batch;
}

}  // namespace timm
