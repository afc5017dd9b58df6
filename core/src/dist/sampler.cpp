#include "timm/dist/sampler.hpp"

#include <cmath>
#include <string>

#include <ATen/ATen.h>

#include "timm/base/error.hpp"
#include "timm/base/torch_random.hpp"

namespace timm::dist {
namespace {

void check_rank(const char* sampler, int64_t num_replicas, int64_t rank) {
  if (num_replicas < 1 || rank < 0 || rank >= num_replicas) {
    throw UsageError(std::string(sampler) + ": rank " + std::to_string(rank) + " of world size " +
                     std::to_string(num_replicas) + "; expected a world size >= 1 and 0 <= rank < world size");
  }
}

// torch.randperm(n, generator=torch.Generator().manual_seed(seed)).
std::vector<int64_t> randperm(int64_t n, int64_t seed) {
  at::Generator generator = seeded_generator(seed);
  return timm::randperm(n, generator);
}

std::vector<int64_t> arange(int64_t n) {
  std::vector<int64_t> out(n);
  for (int64_t i = 0; i < n; ++i) out[i] = i;
  return out;
}

// Python's float floor division a // b (float_floor_div in floatobject.c).
double python_floordiv(double a, double b) {
  double mod = std::fmod(a, b);
  double div = (a - mod) / b;
  if (mod != 0 && ((b < 0) != (mod < 0))) div -= 1.0;
  if (div == 0) return std::copysign(0.0, a / b);
  double floored = std::floor(div);
  if (div - floored > 0.5) floored += 1.0;
  return floored;
}

}  // namespace

DistributedSampler::DistributedSampler(int64_t dataset_size, DistributedSamplerOptions options)
    : dataset_size_(dataset_size), options_(options) {
  check_rank("DistributedSampler", options.num_replicas, options.rank);
  const double n = static_cast<double>(dataset_size), w = static_cast<double>(options.num_replicas);
  if (options.drop_last && dataset_size % options.num_replicas != 0) {
    num_samples_ = static_cast<int64_t>(std::ceil((n - w) / w));
  } else {
    num_samples_ = static_cast<int64_t>(std::ceil(n / w));
  }
  total_size_ = num_samples_ * options.num_replicas;
}

std::vector<int64_t> DistributedSampler::indices(int64_t epoch) const {
  auto all = options_.shuffle ? randperm(dataset_size_, options_.seed + epoch) : arange(dataset_size_);
  // Padding repeats the list from its start (torch's indices * k, cut).
  const int64_t n = dataset_size_;
  for (int64_t i = 0; static_cast<int64_t>(all.size()) < total_size_ && n > 0; ++i) all.push_back(all[i % n]);
  all.resize(total_size_);
  std::vector<int64_t> mine;
  mine.reserve(num_samples_);
  for (int64_t i = options_.rank; i < total_size_; i += options_.num_replicas) mine.push_back(all[i]);
  return mine;
}

RepeatAugSampler::RepeatAugSampler(int64_t dataset_size, RepeatAugSamplerOptions options)
    : dataset_size_(dataset_size), options_(options) {
  check_rank("RepeatAugSampler", options.num_replicas, options.rank);
  if (!(options.num_repeats > 0)) {
    throw UsageError("--aug-repeats " + std::to_string(options.num_repeats) + ": expected a number > 0");
  }
  const double n = static_cast<double>(dataset_size);
  const int64_t num_samples = static_cast<int64_t>(std::ceil(n * options.num_repeats / options.num_replicas));
  total_size_ = num_samples * options.num_replicas;
  const double ratio = options.selected_ratio != 0 ? options.selected_ratio : static_cast<double>(options.num_replicas);
  if (options.selected_round > 0 && dataset_size >= options.selected_round) {
    const int64_t rounded = dataset_size / options.selected_round * options.selected_round;
    num_selected_samples_ = static_cast<int64_t>(std::floor(static_cast<double>(rounded) / ratio));
  } else {
    num_selected_samples_ = static_cast<int64_t>(std::ceil(n / ratio));
  }
  num_selected_samples_ = std::min(num_selected_samples_, num_samples);
}

std::vector<int64_t> RepeatAugSampler::indices(int64_t epoch) const {
  const auto order = options_.shuffle ? randperm(dataset_size_, epoch) : arange(dataset_size_);
  std::vector<int64_t> repeated;
  const double repeats = options_.num_repeats;
  if (repeats != std::floor(repeats)) {  // timm resamples: entry i is order[i // repeats]
    const auto size = static_cast<int64_t>(std::ceil(repeats * static_cast<double>(dataset_size_)));
    for (int64_t i = 0; i < size; ++i) {
      repeated.push_back(order[static_cast<int64_t>(python_floordiv(static_cast<double>(i), repeats))]);
    }
  } else {
    for (auto index : order) repeated.insert(repeated.end(), static_cast<int64_t>(repeats), index);
  }
  // Rank's stride through the padded length, wrapping around, the first num_selected_samples.
  const auto n = static_cast<int64_t>(repeated.size());
  std::vector<int64_t> mine;
  if (n == 0) return mine;
  for (int64_t i = options_.rank; i < total_size_ && static_cast<int64_t>(mine.size()) < num_selected_samples_;
       i += options_.num_replicas) {
    mine.push_back(repeated[i % n]);
  }
  return mine;
}

ShardSampler::ShardSampler(int64_t dataset_size, int64_t num_replicas, int64_t rank)
    : dataset_size_(dataset_size), num_replicas_(num_replicas), rank_(rank) {
  check_rank("ShardSampler", num_replicas, rank);
}

std::vector<int64_t> ShardSampler::indices(int64_t) const {
  std::vector<int64_t> mine;
  for (int64_t i = rank_; i < dataset_size_; i += num_replicas_) mine.push_back(i);
  return mine;
}

int64_t ShardSampler::num_samples() const {
  return std::max<int64_t>(0, (dataset_size_ + num_replicas_ - 1 - rank_) / num_replicas_);
}

}  // namespace timm::dist
