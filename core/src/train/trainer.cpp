#include "timm/train/trainer.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <optional>

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <torch/cuda.h>
#include <torch/nn/module.h>
#include <torch/utils.h>

#include <nlohmann/json.hpp>

#include "timm/core/error.hpp"
#include "timm/core/python_repr.hpp"
#include "timm/data/data_config.hpp"
#include "timm/data/dataset.hpp"
#include "timm/data/loader.hpp"
#include "timm/data/transform.hpp"
#include "timm/dist/ddp.hpp"
#include "timm/dist/process_group.hpp"
#include "timm/dist/setup_check.hpp"
#include "timm/dist/world.hpp"
#include "timm/io/atomic_file.hpp"
#include "timm/log/log.hpp"
#include "timm/models/channels_last.hpp"
#include "timm/models/load_weights.hpp"
#include "timm/models/model.hpp"
#include "timm/optim/optimizer.hpp"
#include "timm/sched/scheduler.hpp"
#include "timm/train/checkpoint.hpp"
#include "timm/train/jsd_loss.hpp"
#include "timm/train/losses.hpp"
#include "timm/train/metrics.hpp"
#include "timm/train/summary.hpp"

namespace timm {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// As timm's init_distributed_device: in a distributed run the CUDA device
// index is the local rank (a user-given index is dropped).
torch::Device resolve_device(const Config& config, const dist::WorldInfo& world) {
  const std::string requested = config.get<std::string>("device");
  const torch::Device device(requested);
  if (device.is_cuda() && !torch::cuda::is_available()) {
    if (config.is_explicit("device")) {
      throw UsageError("--device " + requested + ": CUDA is not available on this machine");
    }
    return torch::Device(torch::kCPU);  // timm's default 'cuda', on a machine without a GPU
  }
  if (device.is_cuda() && world.distributed()) {
    if (device.has_index() && device.index() != world.local_rank) {
      log_warning(
          format("device index %d removed from specified (%s).", static_cast<int>(device.index()), requested.c_str()));
    }
    return torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(world.local_rank));
  }
  return device;
}

// The distributed side of a run; inactive (no group) for a single process.
struct Distributed {
  dist::WorldInfo world;
  std::unique_ptr<dist::ProcessGroup> group;
  std::unique_ptr<dist::DistributedDataParallel> ddp;

  bool active() const { return group != nullptr; }
  bool is_primary() const { return world.is_primary(); }
  int size() const { return world.world_size; }

  // Sums `values` over the ranks (in place); a no-op for a single process.
  void sum(std::vector<double>& values, const std::string& what) const {
    if (!active() || values.empty()) return;
    std::vector<at::Tensor> io{at::tensor(values, at::kDouble)};
    group->wait(group->comm()->allreduce(io), what);
    std::copy(io[0].data_ptr<double>(), io[0].data_ptr<double>() + values.size(), values.begin());
  }
  // timm's reduce_tensor: the mean over ranks.
  double mean(double value, const std::string& what) const {
    std::vector<double> values{value};
    sum(values, what);
    return values[0] / static_cast<double>(size());
  }
};

// The rank's share of an epoch's order: rank r takes every W-th index from r.
// Training pads the order to a multiple of W by repeating its head, as
// torch's DistributedSampler, so every rank runs the same number of steps;
// evaluation does not pad, so each sample is counted exactly once.
// (To be replaced by timm::dist's samplers; see issue 3.)
class RankShardSampler : public Sampler {
 public:
  RankShardSampler(std::shared_ptr<Sampler> base, int rank, int world_size, bool pad)
      : base_(std::move(base)), rank_(rank), world_size_(world_size), pad_(pad) {}
  std::vector<int64_t> indices(int64_t epoch) const override {
    std::vector<int64_t> all = base_->indices(epoch);
    if (pad_ && !all.empty()) {
      const std::size_t total = (all.size() + world_size_ - 1) / world_size_ * world_size_;
      for (std::size_t i = 0; all.size() < total; ++i) all.push_back(all[i]);
    }
    std::vector<int64_t> mine;
    for (std::size_t i = static_cast<std::size_t>(rank_); i < all.size(); i += world_size_) mine.push_back(all[i]);
    return mine;
  }

 private:
  std::shared_ptr<Sampler> base_;
  int rank_;
  int world_size_;
  bool pad_;
};

// Every rank must end with rank 0's parameters (DDP keeps them in step); a
// difference means a bug or a rank that trained differently, so it is an
// error rather than silently saving rank 0's. Each rank logs the checksum.
void check_identical_parameters(torch::nn::Module& model, const Distributed& dist) {
  uint64_t checksum = 0;
  for (const auto& p : model.parameters()) {
    const at::Tensor bytes = p.detach().to(at::kCPU).contiguous();
    checksum = checksum * 1099511628211ULL ^
               dist::fnv1a(std::string_view(static_cast<const char*>(bytes.data_ptr()), bytes.nbytes()));
  }
  log_info_all_ranks(
      format("Rank %d final parameter checksum %016llx", dist.world.rank, static_cast<unsigned long long>(checksum)));
  // Two halves as doubles compare exactly after a SUM of rank 0 - rank r.
  std::vector<double> parts{static_cast<double>(checksum >> 32), static_cast<double>(checksum & 0xffffffffULL)};
  std::vector<double> sums = parts;
  dist.sum(sums, "allreduce of the final parameter checksums");
  if (sums[0] != parts[0] * dist.size() || sums[1] != parts[1] * dist.size()) {
    throw Error(format("rank %d: the final parameters differ between ranks (checksum %016llx here)", dist.world.rank,
                       static_cast<unsigned long long>(checksum)));
  }
}

void check_stop() {
  if (const int signal = dist::stop_requested(); signal != 0) throw dist::Interrupted(signal);
}

std::string dataset_name(const Config& config) {
  const std::string name = config.get<std::string>("dataset");
  if (!name.empty()) return name;
  // With no data at all, train on the built-in Fashion-MNIST.
  return config.has("data_dir") ? "" : "fashion-mnist";
}

std::filesystem::path data_root(const Config& config) {
  return config.get_optional<std::string>("data_dir").value_or("");
}

// The first `count` samples of a dataset (--train-num-samples,
// --val-num-samples), for quick runs on a part of the data.
class FirstSamples : public Dataset {
 public:
  FirstSamples(std::shared_ptr<const Dataset> base, std::size_t count) : base_(std::move(base)), count_(count) {}
  std::size_t size() const override { return count_; }
  Image image(std::size_t index) const override { return base_->image(index); }
  int64_t target(std::size_t index) const override { return base_->target(index); }
  int64_t num_classes() const override { return base_->num_classes(); }
  std::string describe(std::size_t index) const override { return base_->describe(index); }

 private:
  std::shared_ptr<const Dataset> base_;
  std::size_t count_;
};

std::shared_ptr<const Dataset> limit_samples(std::shared_ptr<const Dataset> dataset, std::optional<int64_t> count,
                                             const std::string& flag) {
  if (!count) return dataset;
  if (*count <= 0) throw UsageError("--" + flag + " " + std::to_string(*count) + ": expected a positive count");
  if (static_cast<std::size_t>(*count) >= dataset->size()) return dataset;
  return std::make_shared<FirstSamples>(std::move(dataset), static_cast<std::size_t>(*count));
}

ModelArgs model_args(const Config& config, int64_t num_classes, int64_t in_chans) {
  ModelArgs args;
  args.num_classes = num_classes;
  args.in_chans = in_chans;
  args.drop_rate = config.get<double>("drop");
  args.drop_path_rate = config.get_optional<double>("drop_path");
  args.global_pool = config.get_optional<std::string>("gp");
  args.kwargs = config.get_kwargs("model_kwargs");
  return args;
}

int64_t count_parameters(const torch::nn::Module& model) {
  int64_t n = 0;
  for (const auto& p : model.parameters()) n += p.numel();
  return n;
}

// train.py's lr scaling (§1.3): only when --lr is not given (or 0).
double resolve_lr(const Config& config, int64_t global_batch) {
  const auto lr = config.get_optional<double>("lr");
  if (lr && *lr != 0.0) return *lr;
  const double lr_base = config.get<double>("lr_base");
  double ratio = static_cast<double>(global_batch) / static_cast<double>(config.get<int64_t>("lr_base_size"));
  std::string scale = config.get<std::string>("lr_base_scale");
  if (scale.empty()) {
    std::string opt = config.get<std::string>("opt");
    std::transform(opt.begin(), opt.end(), opt.begin(), ::tolower);
    scale = (opt.find("ada") != std::string::npos || opt.find("lamb") != std::string::npos) ? "sqrt" : "linear";
  }
  if (scale == "sqrt") ratio = std::sqrt(ratio);
  const double result = lr_base * ratio;
  log_info(
      format("Learning rate (%g) calculated from base learning rate (%g) and effective global batch size (%lld) "
             "with %s scaling.",
             result, lr_base, static_cast<long long>(global_batch), scale.c_str()));
  return result;
}

OptimizerArgs optimizer_args(const Config& config, double lr) {
  OptimizerArgs args;
  args.opt = config.get<std::string>("opt");
  args.lr = lr;
  args.weight_decay = config.get<double>("weight_decay");
  args.momentum = config.get<double>("momentum");
  args.eps = config.get_optional<double>("opt_eps");
  args.betas = config.get_optional<std::vector<double>>("opt_betas");
  args.kwargs = config.get_kwargs("opt_kwargs");
  return args;
}

SchedulerArgs scheduler_args(const Config& config, bool decreasing_metric, int64_t updates_per_epoch) {
  SchedulerArgs args;
  args.sched = config.get<std::string>("sched");
  args.num_epochs = config.get<int64_t>("epochs");
  args.decay_epochs = config.get<double>("decay_epochs");
  args.decay_milestones = config.get<std::vector<int64_t>>("decay_milestones");
  args.warmup_epochs = config.get<int64_t>("warmup_epochs");
  args.cooldown_epochs = config.get<int64_t>("cooldown_epochs");
  args.patience_epochs = config.get<int64_t>("patience_epochs");
  args.decay_rate = config.get<double>("decay_rate");
  args.min_lr = config.get<double>("min_lr");
  args.warmup_lr = config.get<double>("warmup_lr");
  args.warmup_prefix = config.get<bool>("warmup_prefix");
  args.noise = config.get_optional<std::vector<double>>("lr_noise").value_or(std::vector<double>{});
  args.noise_pct = config.get<double>("lr_noise_pct");
  args.noise_std = config.get<double>("lr_noise_std");
  args.noise_seed = config.get<int64_t>("seed");
  args.cycle_mul = config.get<double>("lr_cycle_mul");
  args.cycle_decay = config.get<double>("lr_cycle_decay");
  args.cycle_limit = config.get<int64_t>("lr_cycle_limit");
  args.k_decay = config.get<double>("lr_k_decay");
  args.plateau_mode = decreasing_metric ? "min" : "max";
  args.step_on_epochs = !config.get<bool>("sched_on_updates");
  args.updates_per_epoch = updates_per_epoch;
  return args;
}

TransformArgs transform_args(const Config& config, const DataConfig& data, bool is_training) {
  TransformArgs args;
  args.is_training = is_training;
  args.input_size = data.input_size;
  args.mean = data.mean;
  args.std = data.std;
  args.crop_pct = data.crop_pct;
  args.crop_mode = data.crop_mode;
  if (!is_training) {
    args.interpolation = data.interpolation;
    return args;
  }
  const std::string train_interpolation = config.get<std::string>("train_interpolation");
  args.no_aug = config.get<bool>("no_aug");
  args.interpolation = (args.no_aug || train_interpolation.empty()) ? data.interpolation : train_interpolation;
  args.train_crop_mode = config.get_optional<std::string>("train_crop_mode").value_or("rrc");
  args.scale = config.get<std::vector<double>>("scale");
  args.ratio = config.get<std::vector<double>>("ratio");
  args.hflip = config.get<double>("hflip");
  args.vflip = config.get<double>("vflip");
  args.color_jitter = config.get_optional<double>("color_jitter");
  args.auto_augment = config.get_optional<std::string>("aa").value_or("");
  if (!args.no_aug) {
    // timm's create_loader: no random erasing with --no-aug; --resplit keeps
    // the first of the --aug-splits (or of 2) clean.
    args.re_prob = config.get<double>("reprob");
    args.re_mode = config.get<std::string>("remode");
    args.re_count = config.get<int64_t>("recount");
    const int64_t aug_splits = config.get<int64_t>("aug_splits");
    args.aug_splits = aug_splits;
    args.re_num_splits = config.get<bool>("resplit") ? (aug_splits > 0 ? aug_splits : 2) : 0;
  }
  return args;
}

// Moves a uint8 batch to the device and applies the batch transforms there
// (as timm's prefetcher normalises on the device); --channels-last re-lays the
// result out as train.py does with input.contiguous(memory_format=...).
at::Tensor prepare_images(const Batch& batch, const TransformPipeline& transform, const torch::Device& device, Rng& rng,
                          bool channels_last) {
  at::Tensor images = batch.images.to(device, /*non_blocking=*/true).to(at::kFloat);
  transform.apply(images, rng);
  if (channels_last) images = images.contiguous(at::MemoryFormat::ChannelsLast);
  return images;
}

struct TrainContext {
  const Config& config;
  torch::Device device;
  ModelPtr model;
  Optimizer& optimizer;
  Scheduler& scheduler;
  Loader& loader;
  double smoothing;
  int64_t log_interval;
  const Distributed& dist;
  int64_t grad_accum_steps = 1;
  bool channels_last = false;
  double images_seen = 0;
  double train_seconds = 0;
  int64_t jsd_splits = 0;  // --jsd-loss with --aug-splits
};

// train.py's train_one_epoch (no AMP yet): gradients accumulate over
// --grad-accum-steps batches (the last group of an epoch may be shorter), the
// loss scaled by 1/accum; under DDP the non-update batches skip the
// all-reduce (no_sync) and the update batch reduces the accumulated sum.
double train_one_epoch(TrainContext& ctx, int64_t epoch) {
  ctx.model->train();
  ctx.loader.start_epoch(epoch);
  const int64_t num_batches = static_cast<int64_t>(ctx.loader.num_batches());
  const int64_t accum_steps = ctx.grad_accum_steps;
  const int64_t last_accum_steps = num_batches % accum_steps;
  const int64_t updates_per_epoch = (num_batches + accum_steps - 1) / accum_steps;
  const int64_t last_batch_idx_to_accum = num_batches - last_accum_steps;
  int64_t num_updates = epoch * updates_per_epoch;
  AverageMeter losses, update_time, data_time;
  Rng batch_rng(static_cast<std::uint64_t>(ctx.config.get<int64_t>("seed")) * 1000003ULL + epoch);
  auto data_start = Clock::now();
  auto update_start = Clock::now();
  int64_t batch_idx = 0;
  int64_t update_sample_count = 0;
  int64_t accum = accum_steps;
  ctx.optimizer.zero_grad();
  while (auto batch = ctx.loader.next()) {
    check_stop();
    const bool last_batch = batch_idx == num_batches - 1;
    const bool need_update = last_batch || (batch_idx + 1) % accum_steps == 0;
    const int64_t update_idx = batch_idx / accum_steps;
    if (batch_idx >= last_batch_idx_to_accum) accum = last_accum_steps;
    const at::Tensor input = prepare_images(*batch, ctx.loader.transform(), ctx.device, batch_rng, ctx.channels_last);
    const at::Tensor target = batch->targets.to(ctx.device);
    data_time.update(static_cast<double>(accum) * seconds_since(data_start));

    {
      std::optional<dist::DistributedDataParallel::NoSync> no_sync;
      if (ctx.dist.ddp && !need_update) no_sync.emplace(ctx.dist.ddp->no_sync());
      if (ctx.dist.ddp) ctx.dist.ddp->before_forward();
      const at::Tensor output = ctx.model->forward(input);
      // train.py: JsdCrossEntropy(num_aug_splits, smoothing) with --jsd-loss.
      at::Tensor loss = ctx.jsd_splits > 1 ? jsd_cross_entropy(output, target, ctx.jsd_splits, 12.0, ctx.smoothing)
                                           : label_smoothing_cross_entropy(output, target, ctx.smoothing);
      const double loss_value = loss.item<double>();
      if (!std::isfinite(loss_value)) {
        throw Error(format("loss is %s at epoch %lld, step %lld; stopping", python_float_repr(loss_value).c_str(),
                           static_cast<long long>(epoch), static_cast<long long>(batch_idx)));
      }
      if (accum > 1) loss = loss / static_cast<double>(accum);
      loss.backward();
      losses.update(loss_value, input.size(0));
    }
    const int64_t batch_size = input.size(0);
    update_sample_count += batch_size * ctx.dist.size();
    ctx.images_seen += static_cast<double>(batch_size * ctx.dist.size());
    if (!need_update) {
      data_start = Clock::now();
      ++batch_idx;
      continue;
    }
    ctx.optimizer.step();
    ctx.optimizer.zero_grad();
    ++num_updates;
    update_time.update(seconds_since(update_start));
    ctx.train_seconds += update_time.val();
    update_start = Clock::now();

    if (update_idx % ctx.log_interval == 0 || last_batch) {
      double loss_now = losses.val(), loss_avg = losses.avg();
      if (ctx.dist.active()) {
        std::vector<double> values{loss_now, loss_avg};
        ctx.dist.sum(values, "allreduce of the logged train loss");
        loss_now = values[0] / ctx.dist.size();
        loss_avg = values[1] / ctx.dist.size();
      }
      log_info(
          format("Train: %lld [%4lld/%lld (%3.0f%%)]  Loss: %#.3g (%#.3g)  Time: %.3fs, %7.2f/s  "
                 "(%.3fs, %7.2f/s)  LR: %.3e  Data: %.3f (%.3f)",
                 static_cast<long long>(epoch), static_cast<long long>(update_idx),
                 static_cast<long long>(updates_per_epoch), 100.0 * (update_idx + 1) / updates_per_epoch, loss_now,
                 loss_avg, update_time.val(), update_sample_count / update_time.val(), update_time.avg(),
                 update_sample_count / update_time.avg(), ctx.optimizer.mean_lr(), data_time.val(), data_time.avg()));
    }
    ctx.scheduler.step_update(num_updates, losses.avg());
    update_sample_count = 0;
    data_start = Clock::now();
    ++batch_idx;
  }
  if (batch_idx == 0) throw Error("the training loader produced no batch; is the dataset smaller than --batch-size?");
  return ctx.dist.active() ? ctx.dist.mean(losses.avg(), "allreduce of the epoch's train loss") : losses.avg();
}

// train.py's validate, but exact: losses and hits are summed over samples
// and divided once, instead of averaging per-batch percentages.
EvalMetrics validate(const ModelPtr& model, Loader& loader, const torch::Device& device, int64_t log_interval,
                     uint64_t seed, bool channels_last, const Distributed& dist) {
  model->eval();
  torch::NoGradGuard no_grad;
  loader.start_epoch(0);
  const int64_t last_idx = static_cast<int64_t>(loader.num_batches()) - 1;
  double loss_sum = 0.0;
  int64_t top1 = 0, top5 = 0, samples = 0;
  AverageMeter batch_time;
  Rng rng(seed);
  auto start = Clock::now();
  int64_t batch_idx = 0;
  while (auto batch = loader.next()) {
    const at::Tensor input = prepare_images(*batch, loader.transform(), device, rng, channels_last);
    const at::Tensor target = batch->targets.to(device);
    const at::Tensor output = model->forward(input);
    const double loss = at::cross_entropy_loss(output, target).item<double>();
    const auto correct = correct_topk(output, target, {1, 5});
    const int64_t n = input.size(0);
    loss_sum += loss * static_cast<double>(n);
    top1 += correct[0];
    top5 += correct[1];
    samples += n;
    batch_time.update(seconds_since(start));
    start = Clock::now();
    if (batch_idx % log_interval == 0 || batch_idx == last_idx) {
      log_info(
          format("Test: [%4lld/%lld]  Time: %.3f (%.3f)  Loss: %7.3f (%6.3f)  Acc@1: %7.3f (%7.3f)  "
                 "Acc@5: %7.3f (%7.3f)",
                 static_cast<long long>(batch_idx), static_cast<long long>(last_idx), batch_time.val(),
                 batch_time.avg(), loss, loss_sum / samples, 100.0 * correct[0] / n, 100.0 * top1 / samples,
                 100.0 * correct[1] / n, 100.0 * top5 / samples));
    }
    ++batch_idx;
  }
  if (dist.active()) {
    // Each rank evaluated its own samples, each sample on exactly one rank:
    // the sums over ranks are the sums over the dataset.
    std::vector<double> sums{loss_sum, static_cast<double>(top1), static_cast<double>(top5),
                             static_cast<double>(samples)};
    dist.sum(sums, "allreduce of the validation metrics");
    loss_sum = sums[0];
    top1 = static_cast<int64_t>(sums[1]);
    top5 = static_cast<int64_t>(sums[2]);
    samples = static_cast<int64_t>(sums[3]);
  }
  if (samples == 0) throw Error("the validation loader produced no sample");
  return EvalMetrics{loss_sum / samples, 100.0 * top1 / samples, 100.0 * top5 / samples, samples};
}

double metric_of(const EvalMetrics& m, const std::string& name) {
  if (name == "top1") return m.top1;
  if (name == "top5") return m.top5;
  if (name == "loss") return m.loss;
  throw UsageError("--eval-metric '" + name + "': expected top1, top5 or loss");
}

struct EpochRecord {
  int64_t epoch;
  double train_loss;
  std::optional<EvalMetrics> eval;
};

// train.py's closing "--result" JSON: the 10 best epochs, best last.
void print_result(std::vector<EpochRecord> records, const std::string& eval_metric) {
  const bool decreasing = eval_metric == "loss";
  auto key = [&](const EpochRecord& r) { return r.eval ? metric_of(*r.eval, eval_metric) : r.train_loss; };
  std::stable_sort(records.begin(), records.end(), [&](const EpochRecord& a, const EpochRecord& b) {
    return decreasing ? key(a) > key(b) : key(a) < key(b);
  });
  if (records.size() > 10) records.erase(records.begin(), records.end() - 10);
  nlohmann::json results = nlohmann::json::array();
  for (const auto& r : records) {
    nlohmann::json entry{{"epoch", r.epoch}, {"train", {{"loss", r.train_loss}}}};
    if (r.eval) entry["validation"] = {{"loss", r.eval->loss}, {"top1", r.eval->top1}, {"top5", r.eval->top5}};
    results.push_back(entry);
  }
  log_info("--result");
  log_info(results.dump(4));
}

std::shared_ptr<Loader> make_loader(std::shared_ptr<const Dataset> dataset, bool is_training,
                                    TransformPipeline transform, const Config& config, int64_t batch_size,
                                    const Distributed& dist) {
  const auto seed = static_cast<std::uint64_t>(config.get<int64_t>("seed"));
  LoaderOptions options;
  options.batch_size = batch_size;
  options.drop_last = is_training;
  options.num_workers = config.get<int64_t>("workers");
  options.seed = seed + (is_training ? 0 : 1);
  std::shared_ptr<Sampler> sampler = make_local_sampler(dataset->size(), /*shuffle=*/is_training, seed);
  if (dist.active()) {
    sampler = std::make_shared<RankShardSampler>(std::move(sampler), dist.world.rank, dist.size(), /*pad=*/is_training);
  }
  return std::make_shared<Loader>(std::move(dataset), std::move(sampler), std::move(transform), options);
}

// --pretrained-path (timm's load_pretrained with head adaptation), then
// --initial-checkpoint (timm's load_checkpoint: EMA weights first, strict), in
// create_model's order. Unlike train.py, --pretrained-path needs no
// --pretrained beside it: there is no download to choose instead.
void load_initial_weights(const Config& config, ClassifierImpl& model, int64_t in_chans) {
  if (const auto path = config.get_optional<std::string>("pretrained_path"); path && !path->empty()) {
    load_pretrained_file(model, *path, in_chans);
  }
  const std::string checkpoint = config.get<std::string>("initial_checkpoint");
  if (!checkpoint.empty()) {
    load_checkpoint(model, checkpoint);
    log_info("Loaded checkpoint '" + checkpoint + "'");
  }
}

// The training itself, once the world is set up.
TrainResult train(const Config& config, Distributed& dist, const torch::Device& device) {
  const int64_t seed = config.get<int64_t>("seed");
  // timm seeds seed + rank: augmentation differs per rank; DDP's start-up
  // broadcast makes the initial weights rank 0's.
  torch::manual_seed(static_cast<uint64_t>(seed + dist.world.rank));

  // Datasets first: their class count and defaults shape the model.
  const std::string dataset = dataset_name(config);
  const DatasetDefaults defaults = dataset_defaults(dataset);
  const int64_t in_chans = resolve_in_chans(config, defaults);
  std::shared_ptr<const Dataset> train_set =
      limit_samples(create_dataset(dataset, data_root(config), config.get<std::string>("train_split"), in_chans),
                    config.get_optional<int64_t>("train_num_samples"), "train-num-samples");
  const std::string val_split = config.get<std::string>("val_split");
  std::shared_ptr<const Dataset> eval_set;
  if (!val_split.empty()) {
    eval_set = limit_samples(create_dataset(dataset, data_root(config), val_split, in_chans),
                             config.get_optional<int64_t>("val_num_samples"), "val-num-samples");
  }

  const int64_t num_classes = config.get_optional<int64_t>("num_classes").value_or(train_set->num_classes());
  const std::string model_name = config.get<std::string>("model");
  ModelPtr model = create_model(model_name, model_args(config, num_classes, in_chans));
  log_info(format("Model %s created, param count:%lld", model_name.c_str(),
                  static_cast<long long>(count_parameters(*model))));
  load_initial_weights(config, *model, in_chans);
  const DataConfig data_config = resolve_data_config(config, model->pretrained_cfg(), defaults);
  for (const auto& line : describe_data_config(data_config)) log_info(line);
  model->to(device);
  const bool channels_last = config.get<bool>("channels_last");
  if (channels_last) to_channels_last(*model);

  const int64_t batch_size = config.get<int64_t>("batch_size");
  const int64_t grad_accum_steps = std::max<int64_t>(1, config.get<int64_t>("grad_accum_steps"));
  auto train_loader = make_loader(train_set, true, create_transform(transform_args(config, data_config, true)), config,
                                  batch_size, dist);
  std::shared_ptr<Loader> eval_loader;
  if (eval_set) {
    const int64_t eval_batch = config.get_optional<int64_t>("validation_batch_size").value_or(batch_size);
    eval_loader = make_loader(eval_set, false, create_transform(transform_args(config, data_config, false)), config,
                              eval_batch, dist);
  }
  log_info("Train transform: " + train_loader->transform().repr());

  // train.py: the effective global batch is B x W x A.
  const double lr = resolve_lr(config, batch_size * dist.size() * grad_accum_steps);
  OptimizerPtr optimizer = create_optimizer(*model, model->no_weight_decay(), optimizer_args(config, lr));
  log_info("Created " + optimizer->describe());

  if (dist.active()) {
    dist::DdpOptions ddp_options;
    ddp_options.bucket_cap_bytes = static_cast<int64_t>(config.get<double>("ddp_bucket_cap_mb") * 1024.0 * 1024.0);
    ddp_options.find_unused_parameters = config.get<bool>("ddp_find_unused_parameters");
    ddp_options.broadcast_buffers = !config.get<bool>("no_ddp_bb");
    dist.ddp =
        std::make_unique<dist::DistributedDataParallel>(*model, dist.group->comm(), ddp_options, dist.group.get());
    log_info(format("Using native DDP (our reducer): %zu gradient buckets, %.2f MiB of gradients.",
                    dist.ddp->bucket_parameter_names().size(), dist.ddp->gradient_bytes() / 1048576.0));
    // For bench/distributed.py only: the step time without communication.
    if (const char* skip = std::getenv("TIMM_BENCH_SKIP_ALLREDUCE"); skip != nullptr && std::string(skip) == "1") {
      log_warning("TIMM_BENCH_SKIP_ALLREDUCE=1: gradients are NOT averaged over ranks (benchmark mode)");
      dist.ddp->set_skip_allreduce(true);
    }
  }

  const std::string eval_metric = eval_loader ? config.get<std::string>("eval_metric") : "loss";
  const bool decreasing = eval_metric == "loss";
  const int64_t updates_per_epoch =
      (static_cast<int64_t>(train_loader->num_batches()) + grad_accum_steps - 1) / grad_accum_steps;
  SchedulerPtr scheduler = create_scheduler(*optimizer, scheduler_args(config, decreasing, updates_per_epoch));
  const int64_t num_epochs = scheduler->num_epochs();
  log_info(
      format("Scheduled epochs: %lld (epochs + cooldown_epochs). Warmup within epochs when warmup_prefix=False. "
             "LR stepped per %s.",
             static_cast<long long>(num_epochs), config.get<bool>("sched_on_updates") ? "update" : "epoch"));

  // Only the primary rank writes (train.py: output_dir and saver on the primary).
  std::filesystem::path output_dir;
  // What was actually used, as train.py's args.yaml records the computed lr:
  // rerunning with it as --config repeats this run.
  Config effective = config;
  effective.set("device", device.str());
  effective.set("lr", lr);
  effective.set("num_classes", num_classes);
  const std::string config_toml = effective.to_toml();
  if (dist.is_primary()) {
    output_dir = make_output_dir(config.get<std::string>("output"), config.get<std::string>("experiment"), model_name,
                                 data_config.input_size.back());
    write_file_atomically(output_dir / "config.toml", config_toml);
  }

  TrainContext ctx{config,
                   device,
                   model,
                   *optimizer,
                   *scheduler,
                   *train_loader,
                   config.get<double>("smoothing"),
                   std::max<int64_t>(1, config.get<int64_t>("log_interval")),
                   dist,
                   grad_accum_steps,
                   channels_last};
  if (config.get<bool>("jsd_loss")) {
    // train.py asserts this: JSD only works on aug splits.
    ctx.jsd_splits = config.get<int64_t>("aug_splits");
    if (ctx.jsd_splits < 2) throw UsageError("--jsd-loss needs --aug-splits >= 2");
  }
  TrainResult result;
  result.output_dir = output_dir;
  std::vector<EpochRecord> records;
  std::optional<double> best_metric;
  const int64_t val_interval = std::max<int64_t>(1, config.get<int64_t>("val_interval"));
  for (int64_t epoch = 0; epoch < num_epochs; ++epoch) {
    const double train_loss = train_one_epoch(ctx, epoch);
    if ((epoch + 1) % val_interval != 0 && epoch + 1 != num_epochs) {
      log_info("Skipping eval and checkpointing ");
      scheduler->step(epoch + 1, std::nullopt);
      continue;
    }
    EpochRecord record{epoch, train_loss, std::nullopt};
    if (eval_loader) {
      record.eval =
          validate(model, *eval_loader, device, ctx.log_interval, static_cast<uint64_t>(seed), channels_last, dist);
    }
    const double metric = record.eval ? metric_of(*record.eval, eval_metric) : train_loss;
    const bool improved = !best_metric || (decreasing ? metric < *best_metric : metric > *best_metric);
    if (dist.is_primary()) {
      std::vector<std::pair<std::string, double>> eval_columns;
      if (record.eval) {
        eval_columns = {{"loss", record.eval->loss}, {"top1", record.eval->top1}, {"top5", record.eval->top5}};
      }
      update_summary(output_dir / "summary.csv", epoch, {{"loss", train_loss}}, eval_columns, optimizer->mean_lr(),
                     /*write_header=*/!best_metric.has_value());
      const TrainingState state{epoch, metric, eval_metric, config_toml};
      save_checkpoint(output_dir, "last", *model, *optimizer, state);
      if (improved) save_checkpoint(output_dir, "model_best", *model, *optimizer, state);
    }
    if (improved) {
      best_metric = metric;
      result.best_epoch = epoch;
    }
    records.push_back(record);
    result.last_eval = record.eval;
    scheduler->step(epoch + 1, metric);
  }
  result.best_metric = best_metric.value_or(0.0);
  result.train_images_per_second = ctx.train_seconds > 0 ? ctx.images_seen / ctx.train_seconds : 0.0;
  if (best_metric) {
    log_info(format("*** Best metric: %s (epoch %lld)", python_float_repr(*best_metric).c_str(),
                    static_cast<long long>(result.best_epoch)));
  }
  if (dist.is_primary()) print_result(records, eval_metric);
  if (dist.ddp && dist.ddp->reduced_backwards() > 0) {
    const double alone = dist.ddp->time_allreduce_alone(3);
    log_info(format(
        "DDP: %.1f ms per step waiting for all-reduces after backward; the same all-reduces alone take "
        "%.1f ms (%.0f%% hidden behind backward)",
        1000.0 * dist.ddp->reduce_wait_seconds() / dist.ddp->reduced_backwards(), 1000.0 * alone,
        alone > 0 ? 100.0 * std::max(0.0, 1.0 - dist.ddp->reduce_wait_seconds() / dist.ddp->reduced_backwards() / alone)
                  : 0.0));
  }
  if (dist.active() && std::getenv("TIMM_BENCH_SKIP_ALLREDUCE") == nullptr) check_identical_parameters(*model, dist);
  dist.ddp.reset();  // its hooks live on the model's parameters
  return result;
}

}  // namespace

TrainResult run_training(const Config& config, const std::vector<LoadedPlugin>& plugins) {
  check_implemented(config);
  dist::install_stop_handlers();
  Distributed dist;
  dist.world = dist::world_from_env(dist::current_env());
  const torch::Device device = resolve_device(config, dist.world);
  if (!dist.world.distributed()) {
    log_info("Training with a single process on 1 device (" + device.str() + ").");
    return train(config, dist, device);
  }
  setup_logging(dist.world.rank, dist.world.world_size);
  dist.group = dist::ProcessGroup::create(
      dist.world, device,
      {config.get<std::string>("dist_backend"), std::chrono::seconds(config.get<int64_t>("dist_timeout"))});
  log_info_all_ranks(
      format("Training in distributed mode with multiple processes, 1 device per process.Process %d, "
             "total %d, device %s.",
             dist.world.rank, dist.world.world_size, device.str().c_str()));
  try {
    dist::check_same_setup(*dist.group, dist::describe_plugins(plugins), dist::describe_config(config));
    return train(config, dist, device);
  } catch (const dist::Interrupted&) {
    throw;
  } catch (const std::exception& e) {
    if (const int signal = dist::stop_requested(); signal != 0) throw dist::Interrupted(signal);
    // Tell the peers why this rank stops, then leave through the destructors
    // (the DDP hooks first, then the communicator).
    const Error* error = dynamic_cast<const Error*>(&e);
    const c10::Error* c10_error = dynamic_cast<const c10::Error*>(&e);
    const std::string message = c10_error != nullptr ? std::string(c10_error->what_without_backtrace()) : e.what();
    dist.group->publish_failure(message);
    if (error != nullptr) throw;
    // A collective outside our waits (e.g. a layer's own) failed: name the rank.
    throw Error(dist.group->explain_failure("a collective in the training step", message));
  }
}

}  // namespace timm
