#include "timm/train/trainer.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <functional>
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
#include "timm/core/stopwatch.hpp"
#include "timm/data/data_config.hpp"
#include "timm/data/dataset.hpp"
#include "timm/data/loader.hpp"
#include "timm/data/mixup.hpp"
#include "timm/data/transform.hpp"
#include "timm/dist/ddp.hpp"
#include "timm/dist/distribute_bn.hpp"
#include "timm/dist/eval.hpp"
#include "timm/dist/process_group.hpp"
#include "timm/dist/sampler.hpp"
#include "timm/dist/setup_check.hpp"
#include "timm/dist/sync_batchnorm.hpp"
#include "timm/dist/world.hpp"
#include "timm/io/atomic_file.hpp"
#include "timm/layers/split_batchnorm.hpp"
#include "timm/log/log.hpp"
#include "timm/models/channels_last.hpp"
#include "timm/models/load_weights.hpp"
#include "timm/models/model.hpp"
#include "timm/optim/optimizer.hpp"
#include "timm/sched/scheduler.hpp"
#include "timm/train/amp.hpp"
#include "timm/train/checkpoint.hpp"
#include "timm/train/clip_grad.hpp"
#include "timm/train/losses.hpp"
#include "timm/train/metrics.hpp"
#include "timm/train/model_ema.hpp"
#include "timm/train/plot.hpp"
#include "timm/train/summary.hpp"

namespace timm {
namespace {

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

// TIMM_BENCH_SKIP_ALLREDUCE=1 (bench/distributed.py only): DDP's hooks run
// but the gradients stay local, to time a step without communication.
bool bench_skips_allreduce() {
  const char* skip = std::getenv("TIMM_BENCH_SKIP_ALLREDUCE");
  return skip != nullptr && std::string(skip) == "1";
}

// The closing lines of a distributed run: how much of the all-reduce time
// backward hid, and the check that every rank holds the same parameters.
void finish_distributed(torch::nn::Module& model, Distributed& dist) {
  if (!dist.active()) return;
  if (dist.ddp && dist.ddp->reduced_backwards() > 0) {
    const double alone = dist.ddp->time_allreduce_alone(3);
    const double waited = dist.ddp->reduce_wait_seconds() / static_cast<double>(dist.ddp->reduced_backwards());
    log_info(
        format("DDP: %.1f ms per step waiting for all-reduces after backward; the same all-reduces alone take "
               "%.1f ms (%.0f%% hidden behind backward)",
               1000.0 * waited, 1000.0 * alone, alone > 0 ? 100.0 * std::max(0.0, 1.0 - waited / alone) : 0.0));
  }
  if (!bench_skips_allreduce()) check_identical_parameters(model, dist);
  dist.ddp.reset();  // its hooks live on the model's parameters
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

// train.py's lr scaling (§1.3): only when --lr is not given (or 0).
double resolve_lr(const Config& config, int64_t global_batch) {
  const auto lr = config.get_optional<double>("lr");
  if (lr && *lr != 0.0) return *lr;
  const double lr_base = config.get<double>("lr_base");
  double ratio = static_cast<double>(global_batch) / static_cast<double>(config.get<int64_t>("lr_base_size"));
  std::string scale = config.get<std::string>("lr_base_scale");
  if (scale.empty()) {
    // train.py's default: sqrt for its adaptive optimizers, linear otherwise,
    // as the optimizer's plugin declares.
    const bool use_sqrt = optimizer_traits(config.get<std::string>("opt")).lr_base_scale == LrBaseScale::kSqrt;
    scale = use_sqrt ? "sqrt" : "linear";
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
  args.layer_decay = config.get_optional<double>("layer_decay");
  args.layer_decay_min_scale = config.get_optional<double>("layer_decay_min_scale").value_or(0.0);
  args.layer_decay_no_opt_scale = config.get_optional<double>("layer_decay_no_opt_scale");
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
  args.train_crop_mode = config.get_optional<std::string>("train_crop_mode").value_or("");
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

// What a training step uses beside the model and the optimizer.
struct StepTools {
  LossFn loss_fn;
  std::optional<c10::ScalarType> amp_dtype;  // --amp: autocast in this dtype
  std::unique_ptr<GradScaler> scaler;        // --amp with float16
  std::optional<double> clip_grad;
  std::string clip_mode;
  std::unique_ptr<ModelEma> ema;
  std::optional<Mixup> mixup;  // --mixup / --cutmix
  int64_t mixup_off_epoch = 0;
  int64_t grad_accum_steps = 1;
};

struct TrainContext {
  const Config& config;
  torch::Device device;
  ModelPtr model;
  Optimizer& optimizer;
  Scheduler& scheduler;
  Loader& loader;
  StepTools& tools;
  int64_t log_interval;
  // Saves recovery-<epoch>-<update_idx> (--recovery-interval); may be empty.
  std::function<void(int64_t epoch, int64_t update_idx)> save_recovery{};
  int64_t recovery_interval = 0;
  bool channels_last = false;
  const Distributed* dist = nullptr;
  double images_seen = 0;
  double train_seconds = 0;
};

// train.py's updates per epoch: ceil(batches / grad_accum_steps).
int64_t updates_per_epoch(std::size_t num_batches, int64_t grad_accum_steps) {
  return (static_cast<int64_t>(num_batches) + grad_accum_steps - 1) / grad_accum_steps;
}

// Forward and loss, under autocast when --amp.
at::Tensor forward_loss(TrainContext& ctx, const at::Tensor& input, const at::Tensor& target) {
  std::optional<AutocastGuard> autocast;
  if (ctx.tools.amp_dtype) autocast.emplace(ctx.device.type(), *ctx.tools.amp_dtype);
  const at::Tensor output = ctx.model->forward(input);
  return ctx.tools.loss_fn(output, target);
}

// Backward of one batch; at an update, clipping and the optimizer step as
// timm's NativeScaler / plain path. Returns false when the scaler skipped
// the step for a non-finite gradient.
bool backward_and_step(TrainContext& ctx, const at::Tensor& loss, bool need_update) {
  StepTools& tools = ctx.tools;
  const std::vector<at::Tensor> params = ctx.model->parameters();
  // train.py: loss.backward(create_graph=second_order) for adahessian.
  const bool second_order = ctx.optimizer.is_second_order();
  if (tools.scaler) {
    tools.scaler->scale(loss).backward(/*gradient=*/{}, /*retain_graph=*/std::nullopt, second_order);
    if (!need_update) return true;
    if (tools.clip_grad) {
      tools.scaler->unscale_(params);
      dispatch_clip_grad(clip_parameters(params, tools.clip_mode), *tools.clip_grad, tools.clip_mode);
    }
    const bool stepped = tools.scaler->step(ctx.optimizer, params);
    tools.scaler->update();
    return stepped;
  }
  loss.backward(/*gradient=*/{}, /*retain_graph=*/std::nullopt, second_order);
  if (!need_update) return true;
  if (tools.clip_grad) dispatch_clip_grad(clip_parameters(params, tools.clip_mode), *tools.clip_grad, tools.clip_mode);
  ctx.optimizer.step();
  return true;
}

// A non-finite loss stops the run, naming where, unless the float16 scaler
// is on: then the step is skipped as torch's GradScaler does, with a warning.
void check_loss(const TrainContext& ctx, double loss_value, int64_t epoch, int64_t batch_idx) {
  if (std::isfinite(loss_value)) return;
  const std::string where = format("loss is %s at epoch %lld, step %lld", python_float_repr(loss_value).c_str(),
                                   static_cast<long long>(epoch), static_cast<long long>(batch_idx));
  if (!ctx.tools.scaler) throw Error(where + "; stopping");
  log_warning(where + "; the gradient scaler skips this step");
}

// train.py's train_one_epoch, with gradient accumulation (a shorter last
// accumulation when the batch count is not a multiple), AMP, clipping and
// the EMA update after each optimizer update.
double train_one_epoch(TrainContext& ctx, int64_t epoch) {
  ctx.model->train();
  ctx.loader.start_epoch(epoch);
  const int64_t num_batches = static_cast<int64_t>(ctx.loader.num_batches());
  const int64_t accum_steps = ctx.tools.grad_accum_steps;
  const int64_t updates = updates_per_epoch(ctx.loader.num_batches(), accum_steps);
  const int64_t last_accum_steps = num_batches % accum_steps;
  const int64_t last_batch_idx_to_accum = num_batches - last_accum_steps;
  int64_t num_updates = epoch * updates;
  AverageMeter losses, update_time, data_time;
  Rng batch_rng(static_cast<std::uint64_t>(ctx.config.get<int64_t>("seed")) * 1000003ULL + epoch);
  Stopwatch data_watch;
  Stopwatch update_watch;
  if (ctx.tools.mixup && ctx.tools.mixup_off_epoch > 0 && epoch >= ctx.tools.mixup_off_epoch) {
    ctx.tools.mixup->set_enabled(false);
  }
  Rng mixup_rng(static_cast<std::uint64_t>(ctx.config.get<int64_t>("seed")) * 7919ULL + epoch);
  int64_t batch_idx = 0;
  int64_t accum = accum_steps;
  int64_t update_sample_count = 0;
  ctx.optimizer.zero_grad();
  const Distributed& dist = *ctx.dist;
  while (auto batch = ctx.loader.next()) {
    check_stop();
    const bool last_batch = batch_idx == num_batches - 1;
    const bool need_update = last_batch || (batch_idx + 1) % accum_steps == 0;
    const int64_t update_idx = batch_idx / accum_steps;
    if (batch_idx >= last_batch_idx_to_accum) accum = last_accum_steps;
    at::Tensor input = prepare_images(*batch, ctx.loader.transform(), ctx.device, batch_rng, ctx.channels_last);
    at::Tensor target = batch->targets.to(ctx.device);
    if (ctx.tools.mixup) target = ctx.tools.mixup->apply(input, target, mixup_rng).targets;
    data_time.update(static_cast<double>(accum) * data_watch.seconds());

    // Under DDP, the batches that do not update skip the all-reduce (torch's
    // no_sync); the update's backward reduces the accumulated gradients.
    std::optional<dist::DistributedDataParallel::NoSync> no_sync;
    if (dist.ddp && !need_update) no_sync.emplace(dist.ddp->no_sync());
    if (dist.ddp) dist.ddp->before_forward();
    at::Tensor loss = forward_loss(ctx, input, target);
    if (accum > 1) loss = loss / static_cast<double>(accum);
    const double loss_value = loss.item<double>() * static_cast<double>(accum);
    check_loss(ctx, loss_value, epoch, batch_idx);
    backward_and_step(ctx, loss, need_update);
    no_sync.reset();

    const int64_t batch_size = input.size(0);
    if (std::isfinite(loss_value)) losses.update(loss_value, batch_size);
    update_sample_count += batch_size * dist.size();  // train.py: B x W, a global rate
    ++batch_idx;
    if (!need_update) {
      data_watch.restart();
      continue;
    }
    ++num_updates;
    ctx.optimizer.zero_grad();
    if (ctx.tools.ema) ctx.tools.ema->update(*ctx.model, num_updates);
    update_time.update(update_watch.lap());
    ctx.images_seen += static_cast<double>(update_sample_count);
    ctx.train_seconds += update_time.val();

    if (update_idx % ctx.log_interval == 0 || last_batch) {
      // train.py: the logged losses are the means over the ranks.
      std::vector<double> logged{losses.val(), losses.avg()};
      dist.sum(logged, "allreduce of the logged train loss");
      const double loss_now = logged[0] / dist.size(), loss_avg = logged[1] / dist.size();
      log_info(
          format("Train: %lld [%4lld/%lld (%3.0f%%)]  Loss: %#.3g (%#.3g)  Time: %.3fs, %7.2f/s  "
                 "(%.3fs, %7.2f/s)  LR: %.3e  Data: %.3f (%.3f)",
                 static_cast<long long>(epoch), static_cast<long long>(update_idx), static_cast<long long>(updates),
                 100.0 * (update_idx + 1) / updates, loss_now, loss_avg, update_time.val(),
                 update_sample_count / update_time.val(), update_time.avg(), update_sample_count / update_time.avg(),
                 ctx.optimizer.mean_lr(), data_time.val(), data_time.avg()));
    }
    if (ctx.save_recovery && dist.is_primary() && ctx.recovery_interval > 0 &&
        (update_idx + 1) % ctx.recovery_interval == 0) {
      ctx.save_recovery(epoch, update_idx);
    }
    ctx.scheduler.step_update(num_updates, losses.avg());
    update_sample_count = 0;
    data_watch.restart();
  }
  if (batch_idx == 0) throw Error("the training loader produced no batch; is the dataset smaller than --batch-size?");
  return dist.active() ? dist.mean(losses.avg(), "allreduce of the epoch's train loss") : losses.avg();
}

// train.py's validate, but exact: losses and hits are summed over samples
// and divided once, instead of averaging per-batch percentages.
EvalMetrics validate(const ModelPtr& model, Loader& loader, const torch::Device& device, int64_t log_interval,
                     uint64_t seed, bool channels_last, std::optional<c10::ScalarType> amp_dtype,
                     const Distributed& dist, const std::string& log_suffix = "") {
  model->eval();
  torch::NoGradGuard no_grad;
  loader.start_epoch(0);
  const int64_t last_idx = static_cast<int64_t>(loader.num_batches()) - 1;
  double loss_sum = 0.0;
  int64_t top1 = 0, top5 = 0, samples = 0;
  AverageMeter batch_time;
  Rng rng(seed);
  Stopwatch batch_watch;
  int64_t batch_idx = 0;
  while (auto batch = loader.next()) {
    const at::Tensor input = prepare_images(*batch, loader.transform(), device, rng, channels_last);
    const at::Tensor target = batch->targets.to(device);
    at::Tensor output;
    {
      std::optional<AutocastGuard> autocast;
      if (amp_dtype) autocast.emplace(device.type(), *amp_dtype);
      output = model->forward(input);
    }
    output = output.to(at::kFloat);
    const double loss = at::cross_entropy_loss(output, target).item<double>();
    const auto correct = correct_topk(output, target, {1, 5});
    const int64_t n = input.size(0);
    loss_sum += loss * static_cast<double>(n);
    top1 += correct[0];
    top5 += correct[1];
    samples += n;
    batch_time.update(batch_watch.lap());
    if (batch_idx % log_interval == 0 || batch_idx == last_idx) {
      log_info(
          format("Test%s: [%4lld/%lld]  Time: %.3f (%.3f)  Loss: %7.3f (%6.3f)  Acc@1: %7.3f (%7.3f)  "
                 "Acc@5: %7.3f (%7.3f)",
                 log_suffix.c_str(), static_cast<long long>(batch_idx), static_cast<long long>(last_idx),
                 batch_time.val(), batch_time.avg(), loss, loss_sum / samples, 100.0 * correct[0] / n,
                 100.0 * top1 / samples, 100.0 * correct[1] / n, 100.0 * top5 / samples));
    }
    ++batch_idx;
  }
  if (dist.active()) {
    // Exact: every sample was evaluated on exactly one rank (ShardSampler);
    // the sums over the ranks are the sums over the dataset.
    dist::EvalSums local;
    local.loss_sum = loss_sum;
    local.top1_correct = top1;
    local.top5_correct = top5;
    local.count = samples;
    const dist::EvalSums total = dist::all_reduce_eval_sums(local, dist.group->comm(), device);
    loss_sum = total.loss_sum;
    top1 = total.top1_correct;
    top5 = total.top5_correct;
    samples = total.count;
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
  std::shared_ptr<Sampler> sampler;
  const auto size = static_cast<int64_t>(dataset->size());
  const double aug_repeats = config.get<double>("aug_repeats");
  if (!dist.active()) {
    if (is_training && aug_repeats > 0) {
      throw UsageError("--aug-repeats: RepeatAugment is only supported in distributed training (as timm's)");
    }
    sampler = make_local_sampler(dataset->size(), /*shuffle=*/is_training, seed);
  } else if (!is_training) {
    // Exact evaluation: every real sample on exactly one rank, no padding.
    sampler = std::make_shared<dist::ShardSampler>(size, dist.size(), dist.world.rank);
  } else if (aug_repeats > 0) {
    dist::RepeatAugSamplerOptions repeat;
    repeat.num_replicas = dist.size();
    repeat.rank = dist.world.rank;
    repeat.num_repeats = aug_repeats;
    sampler = std::make_shared<dist::RepeatAugSampler>(size, repeat);
  } else {
    // torch's DistributedSampler as timm's create_loader makes it (shuffled, seed 0, padded).
    dist::DistributedSamplerOptions options;
    options.num_replicas = dist.size();
    options.rank = dist.world.rank;
    sampler = std::make_shared<dist::DistributedSampler>(size, options);
  }
  return std::make_shared<Loader>(std::move(dataset), std::move(sampler), std::move(transform), options);
}

// train.py's loss flags.
TrainLossArgs train_loss_args(const Config& config) {
  TrainLossArgs args;
  args.jsd_loss = config.get<bool>("jsd_loss");
  args.num_aug_splits = config.get<int64_t>("aug_splits");
  args.bce_loss = config.get<bool>("bce_loss");
  args.smoothing = config.get<double>("smoothing");
  args.bce.target_threshold = config.get_optional<double>("bce_target_thresh");
  args.bce.pos_weight = config.get_optional<double>("bce_pos_weight");
  args.bce.sum_classes = config.get<bool>("bce_sum");
  return args;
}

// --amp: autocast in --amp-dtype; the float16 gradient scaler on CUDA only,
// as train.py (bfloat16, and float16 on CPU, train unscaled).
void setup_amp(const Config& config, const torch::Device& device, StepTools& tools) {
  if (!config.get<bool>("amp")) {
    log_info("AMP not enabled. Training in float32.");
    return;
  }
  tools.amp_dtype = parse_amp_dtype(config.get<std::string>("amp_dtype"));
  if (device.is_cuda() && *tools.amp_dtype == at::kHalf) tools.scaler = std::make_unique<GradScaler>(device);
  log_info("Using native Torch AMP. Training in mixed precision.");
}

// --model-ema: ModelEmaV3 over a second instance of the model.
std::unique_ptr<ModelEma> make_model_ema(const Config& config, const std::string& model_name, const ModelArgs& args,
                                         const ModelPtr& model) {
  if (!config.get<bool>("model_ema")) return nullptr;
  ModelEmaOptions options;
  options.decay = config.get<double>("model_ema_decay");
  options.use_warmup = config.get<bool>("model_ema_warmup");
  if (config.get<bool>("model_ema_force_cpu")) options.device = torch::Device(torch::kCPU);
  ModelPtr copy = create_model(model_name, args);
  copy->to(model->parameters().front().device());
  return std::make_unique<ModelEma>(std::move(copy), *model, options);
}

// --resume, or with --auto-resume the newest checkpoint in the output
// folder; the epoch to start at (0 without a checkpoint), as train.py:
// --start-epoch wins over the checkpoint's.
int64_t resume_if_asked(const Config& config, const std::filesystem::path& output_dir, torch::nn::Module& model,
                        Optimizer& optimizer, StepTools& tools) {
  std::filesystem::path path = config.get<std::string>("resume");
  if (path.empty() && config.get<bool>("auto_resume")) {
    if (!config.is_explicit("experiment")) {
      throw UsageError("--auto-resume needs --experiment: without it every run writes to a new folder");
    }
    if (auto newest = newest_checkpoint(output_dir)) path = *newest;
  }
  std::optional<int64_t> resume_epoch;
  if (!path.empty()) {
    ResumeTargets targets{model};
    if (!config.get<bool>("no_resume_opt")) {
      targets.optimizer = &optimizer;
      targets.scaler = tools.scaler.get();
    }
    targets.ema = tools.ema.get();
    resume_epoch = resume_checkpoint(path, targets);
  }
  return config.get_optional<int64_t>("start_epoch").value_or(resume_epoch.value_or(0));
}

// The epoch after the last one this run trains: the schedule's end, or
// earlier with --stop-after-epochs.
int64_t last_epoch_of_run(const Config& config, int64_t start_epoch, int64_t num_epochs) {
  const auto stop_after = config.get_optional<int64_t>("stop_after_epochs");
  if (!stop_after) return num_epochs;
  if (*stop_after < 1) throw UsageError("--stop-after-epochs " + std::to_string(*stop_after) + ": expected 1 or more");
  if (start_epoch + *stop_after < num_epochs) {
    log_info(format("Stopping after epoch %lld of %lld (--stop-after-epochs %lld).",
                    static_cast<long long>(start_epoch + *stop_after - 1), static_cast<long long>(num_epochs),
                    static_cast<long long>(*stop_after)));
  }
  return std::min(num_epochs, start_epoch + *stop_after);
}

// train.py's Mixup set-up: active when --mixup or --cutmix > 0 or
// --cutmix-minmax is set; not with aug splits (train.py asserts it).
std::optional<Mixup> make_mixup(const Config& config, int64_t num_classes) {
  MixupOptions options;
  options.mixup_alpha = config.get<double>("mixup");
  options.cutmix_alpha = config.get<double>("cutmix");
  if (auto minmax = config.get_optional<std::vector<double>>("cutmix_minmax")) {
    if (minmax->size() != 2) throw UsageError("--cutmix-minmax: expected two values, MIN and MAX");
    options.cutmix_minmax = std::make_pair((*minmax)[0], (*minmax)[1]);
  }
  options.prob = config.get<double>("mixup_prob");
  options.switch_prob = config.get<double>("mixup_switch_prob");
  options.mode = config.get<std::string>("mixup_mode");
  options.label_smoothing = config.get<double>("smoothing");
  options.num_classes = num_classes;
  if (!mixup_active(options)) return std::nullopt;
  if (config.get<int64_t>("aug_splits") > 1)
    throw UsageError("--mixup / --cutmix cannot be combined with --aug-splits");
  return Mixup(options);
}

StepTools make_step_tools(const Config& config, const torch::Device& device, int64_t num_classes) {
  StepTools tools;
  tools.mixup = make_mixup(config, num_classes);
  tools.mixup_off_epoch = config.get<int64_t>("mixup_off_epoch");
  TrainLossArgs loss_args = train_loss_args(config);
  loss_args.mixup_active = tools.mixup.has_value();
  tools.loss_fn = create_train_loss(loss_args);
  setup_amp(config, device, tools);
  tools.clip_grad = config.get_optional<double>("clip_grad");
  tools.clip_mode = config.get<std::string>("clip_mode");
  tools.grad_accum_steps = config.get<int64_t>("grad_accum_steps");
  if (tools.grad_accum_steps < 1) {
    throw UsageError("--grad-accum-steps " + std::to_string(tools.grad_accum_steps) + ": expected 1 or more");
  }
  return tools;
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
      first_samples(create_dataset(dataset, data_root(config), config.get<std::string>("train_split"), in_chans),
                    config.get_optional<int64_t>("train_num_samples"), "train-num-samples");
  const std::string val_split = config.get<std::string>("val_split");
  std::shared_ptr<const Dataset> eval_set;
  if (!val_split.empty()) {
    eval_set = first_samples(create_dataset(dataset, data_root(config), val_split, in_chans),
                             config.get_optional<int64_t>("val_num_samples"), "val-num-samples");
  }

  const int64_t num_classes = config.get_optional<int64_t>("num_classes").value_or(train_set->num_classes());
  const std::string model_name = config.get<std::string>("model");
  const ModelArgs args_of_model = model_args(config, num_classes, in_chans);
  ModelPtr model = create_model(model_name, args_of_model);
  log_info(format("Model %s created, param count:%lld", model_name.c_str(),
                  static_cast<long long>(count_parameters(*model))));
  load_initial_weights(config, *model, in_chans);
  const DataConfig data_config = resolve_data_config(config, model->pretrained_cfg(), defaults);
  for (const auto& line : describe_data_config(data_config)) log_info(line);
  if (config.get<bool>("split_bn")) {
    // train.py: assert num_aug_splits > 1 or args.resplit.
    const int64_t splits = config.get<int64_t>("aug_splits");
    if (splits < 2 && !config.get<bool>("resplit"))
      throw UsageError("--split-bn needs --aug-splits >= 2 (or --resplit)");
    layers::convert_splitbn_model(*model, std::max<int64_t>(splits, 2));
  }
  model->to(device);
  const bool sync_bn = dist.active() && config.get<bool>("sync_bn");
  if (sync_bn) {
    dist::convert_sync_batchnorm(*model, dist.group->comm());
    log_info(
        "Converted model to use Synchronized BatchNorm. WARNING: You may have issues if using zero initialized BN "
        "layers (enabled by default for ResNets) while sync-bn enabled.");
  }
  StepTools tools = make_step_tools(config, device, num_classes);
  const bool channels_last = config.get<bool>("channels_last");
  if (channels_last) to_channels_last(*model);

  const int64_t batch_size = config.get<int64_t>("batch_size");
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
  const double lr = resolve_lr(config, batch_size * dist.size() * tools.grad_accum_steps);
  OptimizerPtr optimizer = create_optimizer(*model, model_name, optimizer_args(config, lr));
  log_info("Created " + optimizer->describe());
  tools.ema = make_model_ema(config, model_name, args_of_model, model);
  if (dist.active()) {
    // After the EMA, as train.py wraps DDP last.
    dist::DdpOptions ddp_options;
    ddp_options.bucket_cap_bytes = static_cast<int64_t>(config.get<double>("ddp_bucket_cap_mb") * 1024.0 * 1024.0);
    ddp_options.find_unused_parameters = config.get<bool>("ddp_find_unused_parameters");
    // SyncBatchNorm keeps the statistics in step already.
    ddp_options.broadcast_buffers = !config.get<bool>("no_ddp_bb") && !sync_bn;
    dist.ddp =
        std::make_unique<dist::DistributedDataParallel>(*model, dist.group->comm(), ddp_options, dist.group.get());
    log_info(format("Using native DDP (our reducer): %zu gradient buckets, %.2f MiB of gradients.",
                    dist.ddp->bucket_parameter_names().size(), dist.ddp->gradient_bytes() / 1048576.0));
    // For bench/distributed.py only: the step time without communication.
    if (bench_skips_allreduce()) {
      log_warning("TIMM_BENCH_SKIP_ALLREDUCE=1: gradients are NOT averaged over ranks (benchmark mode)");
      dist.ddp->set_skip_allreduce(true);
    }
  }
  // --dist-bn at each epoch end (train.py turns it off under --sync-bn).
  std::optional<dist::DistBnMode> dist_bn;
  if (dist.active() && !sync_bn) dist_bn = dist::parse_dist_bn(config.get<std::string>("dist_bn"));

  const std::string eval_metric = eval_loader ? config.get<std::string>("eval_metric") : "loss";
  const bool decreasing = eval_metric == "loss";
  const int64_t updates = updates_per_epoch(train_loader->num_batches(), tools.grad_accum_steps);
  SchedulerPtr scheduler = create_scheduler(*optimizer, scheduler_args(config, decreasing, updates));
  const int64_t num_epochs = scheduler->num_epochs();
  log_info(
      format("Scheduled epochs: %lld (epochs + cooldown_epochs). Warmup within epochs when warmup_prefix=False. "
             "LR stepped per %s.",
             static_cast<long long>(num_epochs), config.get<bool>("sched_on_updates") ? "update" : "epoch"));

  // Only the primary rank writes (train.py: output_dir and saver on the primary).
  std::filesystem::path output_dir;
  if (dist.is_primary()) {
    output_dir = make_output_dir(config.get<std::string>("output"), config.get<std::string>("experiment"), model_name,
                                 data_config.input_size.back());
  }
  // What was actually used, as train.py's args.yaml records the computed lr:
  // rerunning with it as --config repeats this run.
  Config effective = config;
  effective.set("device", device.str());
  effective.set("lr", lr);
  effective.set("num_classes", num_classes);
  const std::string config_toml = effective.to_toml();
  if (dist.is_primary()) write_file_atomically(output_dir / "config.toml", config_toml);

  const int64_t start_epoch = resume_if_asked(config, output_dir, *model, *optimizer, tools);
  if (start_epoch > 0) {
    if (config.get<bool>("sched_on_updates")) {
      scheduler->step_update(start_epoch * updates, std::nullopt);
    } else {
      scheduler->step(start_epoch, std::nullopt);
    }
  }

  std::optional<CheckpointSaver> saver;
  if (dist.is_primary()) saver.emplace(output_dir, decreasing, config.get<int64_t>("checkpoint_hist"));
  const CheckpointParts parts{*model, *optimizer, tools.ema.get(), tools.scaler.get()};
  TrainContext ctx{.config = config,
                   .device = device,
                   .model = model,
                   .optimizer = *optimizer,
                   .scheduler = *scheduler,
                   .loader = *train_loader,
                   .tools = tools,
                   .log_interval = std::max<int64_t>(1, config.get<int64_t>("log_interval"))};
  ctx.channels_last = channels_last;
  ctx.dist = &dist;
  ctx.recovery_interval = config.get<int64_t>("recovery_interval");
  ctx.save_recovery = [&](int64_t epoch, int64_t update_idx) {
    saver->save_recovery(parts, TrainingState{epoch, std::nullopt, eval_metric, config_toml}, update_idx);
  };
  TrainResult result;
  result.output_dir = output_dir;
  std::vector<EpochRecord> records;
  std::optional<double> best_metric;
  const int64_t val_interval = std::max<int64_t>(1, config.get<int64_t>("val_interval"));
  const int64_t end_epoch = last_epoch_of_run(config, start_epoch, num_epochs);
  for (int64_t epoch = start_epoch; epoch < end_epoch; ++epoch) {
    const double train_loss = train_one_epoch(ctx, epoch);
    if (dist_bn) {
      log_info("Distributing BatchNorm running means and vars");
      dist::distribute_bn(*model, dist.group->comm(), *dist_bn);
      if (tools.ema) dist::distribute_bn(*tools.ema->module(), dist.group->comm(), *dist_bn);
    }
    if ((epoch + 1) % val_interval != 0 && epoch + 1 != end_epoch) {
      log_info("Skipping eval and checkpointing ");
      scheduler->step(epoch + 1, std::nullopt);
      continue;
    }
    EpochRecord record{epoch, train_loss, std::nullopt};
    if (eval_loader) {
      record.eval = validate(model, *eval_loader, device, ctx.log_interval, static_cast<uint64_t>(seed), channels_last,
                             tools.amp_dtype, dist);
      // As train.py: with an EMA (not forced to CPU), its metrics are the
      // epoch's, for the summary, the best checkpoint and the plateau lr.
      if (tools.ema && !tools.ema->options().device) {
        record.eval = validate(tools.ema->module(), *eval_loader, device, ctx.log_interval, static_cast<uint64_t>(seed),
                               channels_last, tools.amp_dtype, dist, " (EMA)");
      }
    }
    const double metric = record.eval ? metric_of(*record.eval, eval_metric) : train_loss;
    if (dist.is_primary()) {
      std::vector<std::pair<std::string, double>> eval_columns;
      if (record.eval)
        eval_columns = {{"loss", record.eval->loss}, {"top1", record.eval->top1}, {"top5", record.eval->top5}};
      update_summary(output_dir / "summary.csv", epoch, {{"loss", train_loss}}, eval_columns, optimizer->mean_lr(),
                     /*write_header=*/!best_metric.has_value());
      const auto [best, best_epoch] = saver->save(parts, TrainingState{epoch, metric, eval_metric, config_toml});
      best_metric = best;
      result.best_epoch = best_epoch;
    } else if (!best_metric || (decreasing ? metric < *best_metric : metric > *best_metric)) {
      best_metric = metric;  // the same metric on every rank (reduced eval)
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
  if (dist.is_primary()) {
    print_result(records, eval_metric);
    // The run's curves (loss, accuracy, lr) beside its summary.
    if (std::filesystem::exists(output_dir / "summary.csv")) {
      plot_summary(output_dir / "summary.csv", output_dir / "summary.svg");
    }
  }
  finish_distributed(*model, dist);
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
