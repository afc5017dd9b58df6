#include "timm/data/scheduled_sampler.hpp"

#include <algorithm>
#include <cmath>
#include <set>
#include <string>

#include <ATen/ATen.h>

#include "timm/base/error.hpp"
#include "timm/base/python_repr.hpp"
#include "timm/base/torch_random.hpp"

namespace timm {
namespace {

std::string sizes_repr(const std::vector<int64_t>& sizes) {
  std::string out;
  for (const int64_t size : sizes) out += (out.empty() ? "" : " ") + std::to_string(size);
  return out;
}

std::string no_batch_fits(const std::vector<int64_t>& sizes, int64_t samples) {
  return "--train-batch-sizes " + sizes_repr(sizes) + ": no full scheduled batch fits the " + std::to_string(samples) +
         " samples the training sampler gives (per rank); reduce the batch sizes";
}

// timm's _sample_choice: torch.multinomial(weights[valid], 1) on the generator.
int64_t sample_choice(at::Generator& generator, const at::Tensor& choice_weights,
                      const std::vector<int64_t>* valid_choices) {
  if (valid_choices == nullptr) {
    return at::multinomial(choice_weights, 1, /*replacement=*/false, generator).item<int64_t>();
  }
  const at::Tensor index = at::tensor(*valid_choices, at::TensorOptions().dtype(at::kLong));
  const at::Tensor weights = choice_weights.index_select(0, index);
  TORCH_CHECK(weights.sum().item<double>() > 0, "No positive-weight scheduled choice is available for this batch.");
  const int64_t sampled = at::multinomial(weights, 1, /*replacement=*/false, generator).item<int64_t>();
  return (*valid_choices)[static_cast<std::size_t>(sampled)];
}

// timm's _normalize_choice_weights.
at::Tensor normalize_choice_weights(const std::optional<std::vector<double>>& weights, std::size_t num_choices) {
  const auto f64 = at::TensorOptions().dtype(at::kDouble);
  if (!weights) return at::full({static_cast<int64_t>(num_choices)}, 1.0 / static_cast<double>(num_choices), f64);
  if (weights->size() != num_choices) {
    throw UsageError("--train-size-probs: " + std::to_string(weights->size()) + " weights for " +
                     std::to_string(num_choices) + " --train-img-sizes; expected one weight per size");
  }
  for (const double w : *weights) {
    if (!std::isfinite(w) || w < 0) {
      throw UsageError("--train-size-probs: weight " + python_float_repr(w) +
                       "; the weights must be finite and non-negative");
    }
  }
  const at::Tensor t = at::tensor(*weights, f64);
  const at::Tensor sum = t.sum();
  if (sum.item<double>() <= 0) throw UsageError("--train-size-probs: the weights must have a positive sum");
  return t / sum;
}

}  // namespace

ScheduledBatchSampler::ScheduledBatchSampler(std::shared_ptr<Sampler> base, ScheduledBatchSamplerOptions options)
    : base_(std::move(base)), options_(std::move(options)) {
  TORCH_CHECK(base_ != nullptr, "ScheduledBatchSampler needs a base sampler");
  const ScheduledBatchSamplerOptions& o = options_;
  base_size_ = static_cast<int64_t>(base_->indices(0).size());
  if (base_size_ <= 0) {
    throw UsageError(
        "--train-img-sizes: the training sampler gives no samples (an empty train split?); scheduled "
        "batches need at least one");
  }
  if (o.batch_sizes.empty()) throw UsageError("--train-batch-sizes: expected at least one batch size");
  for (const int64_t size : o.batch_sizes) {
    if (size <= 0) {
      throw UsageError("--train-batch-sizes " + sizes_repr(o.batch_sizes) +
                       ": every scheduled batch size must be a positive integer");
    }
  }
  if (o.num_batches && *o.num_batches <= 0) {
    throw UsageError("--train-batches-per-epoch " + std::to_string(*o.num_batches) + ": expected a positive integer");
  }
  const bool progressive = o.choice_schedule == "progressive";
  if (!progressive && o.choice_schedule != "constant") {
    throw UsageError("--train-size-schedule " + in_quotes(o.choice_schedule) +
                     ": expected 'constant' or 'progressive'");
  }
  if (progressive) {
    if (o.batch_sizes.size() < 2) {
      throw UsageError("--train-size-schedule progressive: needs at least two --train-img-sizes choices, got " +
                       std::to_string(o.batch_sizes.size()));
    }
    if (!o.schedule_epochs || *o.schedule_epochs <= 0) {
      throw UsageError("--epochs " + (o.schedule_epochs ? std::to_string(*o.schedule_epochs) : std::string("None")) +
                       ": a progressive --train-size-schedule needs a positive number of epochs to move over");
    }
    // timm lets a NaN spread through to a failing torch.multinomial.
    if (!(o.schedule_spread >= 0)) {
      throw UsageError("--train-size-schedule-spread " + python_float_repr(o.schedule_spread) +
                       ": expected a non-negative value");
    }
    if (!(o.schedule_random_mix >= 0 && o.schedule_random_mix <= 1)) {
      throw UsageError("--train-size-random-mix " + python_float_repr(o.schedule_random_mix) +
                       ": expected a value between 0 and 1");
    }
  }
  choice_weights_ = normalize_choice_weights(o.choice_weights, o.batch_sizes.size());
  const double* w = choice_weights_.data_ptr<double>();
  for (std::size_t i = 0; i < o.batch_sizes.size(); ++i) {
    if (w[i] > 0) active_choices_.push_back(static_cast<int64_t>(i));
  }
  average_batch_size_ = calculate_average_batch_size();
  if (progressive && !options_.num_batches) options_.num_batches = infer_num_batches();
  if (!options_.num_batches) {
    sample_budget_schedule_ = create_sample_budget_schedule();
    if (sample_budget_schedule_.empty()) throw UsageError(no_batch_fits(o.batch_sizes, base_size_));
  }
}

at::Tensor ScheduledBatchSampler::weights_for_epoch(int64_t epoch) const {
  const ScheduledBatchSamplerOptions& o = options_;
  const auto n = static_cast<int64_t>(o.batch_sizes.size());
  if (o.choice_schedule == "constant" || n == 1) return choice_weights_;
  // The same float64 operations as timm's, in its order, so the weights (and
  // the multinomial draws from them) are bit for bit timm's.
  const int64_t epochs = *o.schedule_epochs;
  const double progress =
      epochs == 1 ? 1.0 : std::min(std::max(static_cast<double>(epoch) / static_cast<double>(epochs - 1), 0.0), 1.0);
  const at::Tensor positions = at::arange(n, at::TensorOptions().dtype(at::kDouble));
  const double center = progress * static_cast<double>(n - 1);
  at::Tensor curriculum;
  if (o.schedule_spread == 0) {
    const at::Tensor distances = (positions - center).abs();
    curriculum = (distances == distances.min()).to(at::kDouble);
  } else {
    curriculum = at::exp(((positions - center) / o.schedule_spread).pow(2) * -0.5);
  }
  curriculum *= choice_weights_;
  if (curriculum.sum().item<double>() <= 0) {
    int64_t nearest = active_choices_.front();
    for (const int64_t index : active_choices_) {
      if (std::abs(static_cast<double>(index) - center) < std::abs(static_cast<double>(nearest) - center)) {
        nearest = index;
      }
    }
    curriculum = at::zeros_like(choice_weights_);
    curriculum[nearest].fill_(1.0);
  } else {
    curriculum /= curriculum.sum();
  }
  if (o.schedule_random_mix != 0) {
    at::Tensor random = (choice_weights_ > 0).to(curriculum.scalar_type());
    random /= random.sum();
    curriculum = curriculum * (1.0 - o.schedule_random_mix) + random * o.schedule_random_mix;
  }
  return curriculum / curriculum.sum();
}

std::vector<double> ScheduledBatchSampler::choice_weights_for_epoch(int64_t epoch) const {
  const at::Tensor w = weights_for_epoch(epoch).contiguous();
  return {w.data_ptr<double>(), w.data_ptr<double>() + w.numel()};
}

double ScheduledBatchSampler::calculate_average_batch_size() const {
  std::vector<double> sizes(options_.batch_sizes.begin(), options_.batch_sizes.end());
  const at::Tensor batch_sizes = at::tensor(sizes, at::TensorOptions().dtype(at::kDouble));
  if (options_.choice_schedule == "progressive") {
    std::vector<at::Tensor> expected;
    for (int64_t epoch = 0; epoch < *options_.schedule_epochs; ++epoch) {
      expected.push_back(at::dot(weights_for_epoch(epoch), batch_sizes));
    }
    return at::stack(expected).mean().item<double>();
  }
  return at::dot(choice_weights_, batch_sizes).item<double>();
}

int64_t ScheduledBatchSampler::infer_num_batches() const {
  const std::vector<int64_t>& sizes = options_.batch_sizes;
  const auto len = static_cast<double>(base_size_);
  int64_t num_batches = 0;
  if (std::set<int64_t>(sizes.begin(), sizes.end()).size() == 1) {
    num_batches = options_.drop_last ? base_size_ / sizes.front()
                                     : static_cast<int64_t>(std::ceil(len / static_cast<double>(sizes.front())));
  } else {
    num_batches = options_.drop_last ? static_cast<int64_t>(len / average_batch_size_)
                                     : static_cast<int64_t>(std::ceil(len / average_batch_size_));
  }
  if (num_batches < 1) throw UsageError(no_batch_fits(sizes, base_size_));
  return num_batches;
}

std::vector<std::pair<int64_t, int64_t>> ScheduledBatchSampler::create_sample_budget_schedule() const {
  at::Generator generator = seeded_generator(options_.seed);
  const std::vector<int64_t>& sizes = options_.batch_sizes;
  int64_t remaining = base_size_;
  int64_t min_batch_size = sizes[static_cast<std::size_t>(active_choices_.front())];
  for (const int64_t index : active_choices_) {
    min_batch_size = std::min(min_batch_size, sizes[static_cast<std::size_t>(index)]);
  }
  std::vector<std::pair<int64_t, int64_t>> schedule;
  while (remaining >= min_batch_size) {
    std::vector<int64_t> valid;
    for (const int64_t index : active_choices_) {
      if (sizes[static_cast<std::size_t>(index)] <= remaining) valid.push_back(index);
    }
    const int64_t choice = sample_choice(generator, choice_weights_, &valid);
    const int64_t size = sizes[static_cast<std::size_t>(choice)];
    schedule.emplace_back(choice, size);
    remaining -= size;
  }
  if (remaining > 0 && !options_.drop_last) {
    schedule.emplace_back(sample_choice(generator, choice_weights_, nullptr), remaining);
  }
  return schedule;
}

std::vector<std::pair<int64_t, int64_t>> ScheduledBatchSampler::schedule(int64_t epoch) const {
  if (!options_.num_batches) return sample_budget_schedule_;
  // timm's _create_fixed_batch_schedule.
  at::Generator generator = seeded_generator(options_.seed + 2 * epoch);
  const at::Tensor weights = weights_for_epoch(epoch);
  std::vector<std::pair<int64_t, int64_t>> schedule;
  for (int64_t b = 0; b < *options_.num_batches; ++b) {
    const int64_t choice = sample_choice(generator, weights, nullptr);
    schedule.emplace_back(choice, options_.batch_sizes[static_cast<std::size_t>(choice)]);
  }
  return schedule;
}

std::size_t ScheduledBatchSampler::size() const {
  if (options_.num_batches) return static_cast<std::size_t>(*options_.num_batches);
  return sample_budget_schedule_.size();
}

std::vector<ScheduledBatch> ScheduledBatchSampler::batches(int64_t epoch) const {
  std::vector<std::pair<int64_t, int64_t>> plan = schedule(epoch);
  if (options_.shuffle_schedule && plan.size() > 1) {
    at::Generator generator = seeded_generator(options_.seed + 2 * epoch + 1);
    const std::vector<int64_t> o = randperm(static_cast<int64_t>(plan.size()), generator);
    std::vector<std::pair<int64_t, int64_t>> shuffled;
    shuffled.reserve(plan.size());
    for (std::size_t i = 0; i < plan.size(); ++i) shuffled.push_back(plan[static_cast<std::size_t>(o[i])]);
    plan = std::move(shuffled);
  }
  // The base order of the epoch, cycled in fixed-batch mode (timm's
  // _cycling_sampler iterates the base sampler again; ours gives the same
  // order again within an epoch).
  const std::vector<int64_t> order = base_->indices(epoch);
  const bool cycle = options_.num_batches.has_value() && !order.empty();
  std::size_t next = 0;
  std::vector<ScheduledBatch> result;
  result.reserve(plan.size());
  for (const auto& [choice, batch_size] : plan) {
    ScheduledBatch batch{choice, {}};
    batch.indices.reserve(static_cast<std::size_t>(batch_size));
    while (static_cast<int64_t>(batch.indices.size()) < batch_size && (cycle || next < order.size())) {
      batch.indices.push_back(order[next % order.size()]);
      ++next;
    }
    if (static_cast<int64_t>(batch.indices.size()) != batch_size && (options_.drop_last || batch.indices.empty())) {
      break;
    }
    result.push_back(std::move(batch));
  }
  return result;
}

std::vector<int64_t> ScheduledBatchSampler::indices(int64_t epoch) const { return plan(epoch).indices; }

EpochPlan ScheduledBatchSampler::plan(int64_t epoch) const {
  EpochPlan out;
  for (const ScheduledBatch& batch : batches(epoch)) {
    out.indices.insert(out.indices.end(), batch.indices.begin(), batch.indices.end());
    out.batch_sizes.push_back(static_cast<int64_t>(batch.indices.size()));
    out.batch_choices.push_back(batch.choice);
  }
  return out;
}

}  // namespace timm
