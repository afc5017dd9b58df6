#include "timm/train/trainer.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <optional>

#include <ATen/ATen.h>
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
#include "timm/io/atomic_file.hpp"
#include "timm/log/log.hpp"
#include "timm/models/model.hpp"
#include "timm/optim/optimizer.hpp"
#include "timm/sched/scheduler.hpp"
#include "timm/train/checkpoint.hpp"
#include "timm/train/losses.hpp"
#include "timm/train/metrics.hpp"
#include "timm/train/summary.hpp"

namespace timm {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Refuses a multi-process launch until the distributed runtime exists, rather
// than training WORLD_SIZE independent copies.
void require_single_process() {
  const char* world = std::getenv("WORLD_SIZE");
  if (world != nullptr && std::atoi(world) > 1) {
    throw Error(std::string("WORLD_SIZE=") + world +
                ": distributed training is not implemented yet; run a single process");
  }
}

torch::Device resolve_device(const Config& config) {
  const std::string requested = config.get<std::string>("device");
  const torch::Device device(requested);
  if (device.is_cuda() && !torch::cuda::is_available()) {
    if (config.is_explicit("device")) {
      throw UsageError("--device " + requested + ": CUDA is not available on this machine");
    }
    return torch::Device(torch::kCPU);  // timm's default 'cuda', on a machine without a GPU
  }
  return device;
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
  log_info(format("Learning rate (%g) calculated from base learning rate (%g) and effective global batch size (%lld) "
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
  return args;
}

// Moves a uint8 batch to the device and applies the batch transforms there
// (as timm's prefetcher normalises on the device).
at::Tensor prepare_images(const Batch& batch, const TransformPipeline& transform, const torch::Device& device,
                          Rng& rng) {
  at::Tensor images = batch.images.to(device, /*non_blocking=*/true).to(at::kFloat);
  transform.apply(images, rng);
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
  double images_seen = 0;
  double train_seconds = 0;
};

// train.py's train_one_epoch (no gradient accumulation, no AMP yet).
double train_one_epoch(TrainContext& ctx, int64_t epoch) {
  ctx.model->train();
  ctx.loader.start_epoch(epoch);
  const int64_t updates_per_epoch = static_cast<int64_t>(ctx.loader.num_batches());
  int64_t num_updates = epoch * updates_per_epoch;
  AverageMeter losses, update_time, data_time;
  Rng batch_rng(static_cast<std::uint64_t>(ctx.config.get<int64_t>("seed")) * 1000003ULL + epoch);
  auto data_start = Clock::now();
  auto update_start = Clock::now();
  int64_t batch_idx = 0;
  while (auto batch = ctx.loader.next()) {
    const bool last_batch = batch_idx == updates_per_epoch - 1;
    const at::Tensor input = prepare_images(*batch, ctx.loader.transform(), ctx.device, batch_rng);
    const at::Tensor target = batch->targets.to(ctx.device);
    data_time.update(seconds_since(data_start));

    const at::Tensor output = ctx.model->forward(input);
    const at::Tensor loss = label_smoothing_cross_entropy(output, target, ctx.smoothing);
    ctx.optimizer.zero_grad();
    // train.py: loss.backward(create_graph=second_order) for adahessian.
    loss.backward(/*gradient=*/{}, /*retain_graph=*/std::nullopt, /*create_graph=*/ctx.optimizer.is_second_order());
    ctx.optimizer.step();

    const double loss_value = loss.item<double>();
    if (!std::isfinite(loss_value)) {
      throw Error(format("loss is %s at epoch %lld, step %lld; stopping", python_float_repr(loss_value).c_str(),
                         static_cast<long long>(epoch), static_cast<long long>(batch_idx)));
    }
    const int64_t batch_size = input.size(0);
    losses.update(loss_value, batch_size);
    ++num_updates;
    update_time.update(seconds_since(update_start));
    ctx.images_seen += static_cast<double>(batch_size);
    ctx.train_seconds += update_time.val();
    update_start = Clock::now();

    if (batch_idx % ctx.log_interval == 0 || last_batch) {
      log_info(format("Train: %lld [%4lld/%lld (%3.0f%%)]  Loss: %#.3g (%#.3g)  Time: %.3fs, %7.2f/s  "
                      "(%.3fs, %7.2f/s)  LR: %.3e  Data: %.3f (%.3f)",
                      static_cast<long long>(epoch), static_cast<long long>(batch_idx),
                      static_cast<long long>(updates_per_epoch), 100.0 * (batch_idx + 1) / updates_per_epoch,
                      losses.val(), losses.avg(), update_time.val(), batch_size / update_time.val(), update_time.avg(),
                      batch_size / update_time.avg(), ctx.optimizer.mean_lr(), data_time.val(), data_time.avg()));
    }
    ctx.scheduler.step_update(num_updates, losses.avg());
    data_start = Clock::now();
    ++batch_idx;
  }
  if (batch_idx == 0) throw Error("the training loader produced no batch; is the dataset smaller than --batch-size?");
  return losses.avg();
}

// train.py's validate, but exact: losses and hits are summed over samples
// and divided once, instead of averaging per-batch percentages.
EvalMetrics validate(const ModelPtr& model, Loader& loader, const torch::Device& device, int64_t log_interval,
                     uint64_t seed) {
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
    const at::Tensor input = prepare_images(*batch, loader.transform(), device, rng);
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
      log_info(format("Test: [%4lld/%lld]  Time: %.3f (%.3f)  Loss: %7.3f (%6.3f)  Acc@1: %7.3f (%7.3f)  "
                      "Acc@5: %7.3f (%7.3f)",
                      static_cast<long long>(batch_idx), static_cast<long long>(last_idx), batch_time.val(),
                      batch_time.avg(), loss, loss_sum / samples, 100.0 * correct[0] / n, 100.0 * top1 / samples,
                      100.0 * correct[1] / n, 100.0 * top5 / samples));
    }
    ++batch_idx;
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

std::shared_ptr<Loader> make_loader(std::shared_ptr<const Dataset> dataset, bool is_training, TransformPipeline transform,
                                    const Config& config, int64_t batch_size) {
  const auto seed = static_cast<std::uint64_t>(config.get<int64_t>("seed"));
  LoaderOptions options;
  options.batch_size = batch_size;
  options.drop_last = is_training;
  options.num_workers = config.get<int64_t>("workers");
  options.seed = seed + (is_training ? 0 : 1);
  auto sampler = make_local_sampler(dataset->size(), /*shuffle=*/is_training, seed);
  return std::make_shared<Loader>(std::move(dataset), std::move(sampler), std::move(transform), options);
}

}  // namespace

TrainResult run_training(const Config& config) {
  check_implemented(config);
  require_single_process();
  const torch::Device device = resolve_device(config);
  log_info("Training with a single process on 1 device (" + device.str() + ").");
  const int64_t seed = config.get<int64_t>("seed");
  torch::manual_seed(static_cast<uint64_t>(seed));

  // Datasets first: their class count and defaults shape the model.
  const std::string dataset = dataset_name(config);
  const DatasetDefaults defaults = dataset_defaults(dataset);
  const int64_t in_chans = resolve_in_chans(config, defaults);
  std::shared_ptr<const Dataset> train_set = limit_samples(
      create_dataset(dataset, data_root(config), config.get<std::string>("train_split"), in_chans),
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
  const DataConfig data_config = resolve_data_config(config, model->pretrained_cfg(), defaults);
  for (const auto& line : describe_data_config(data_config)) log_info(line);
  model->to(device);

  const int64_t batch_size = config.get<int64_t>("batch_size");
  auto train_loader = make_loader(train_set, true, create_transform(transform_args(config, data_config, true)), config,
                                  batch_size);
  std::shared_ptr<Loader> eval_loader;
  if (eval_set) {
    const int64_t eval_batch = config.get_optional<int64_t>("validation_batch_size").value_or(batch_size);
    eval_loader = make_loader(eval_set, false, create_transform(transform_args(config, data_config, false)), config,
                              eval_batch);
  }
  log_info("Train transform: " + train_loader->transform().repr());

  const double lr = resolve_lr(config, batch_size);
  OptimizerPtr optimizer = create_optimizer(*model, model->no_weight_decay(), optimizer_args(config, lr));
  log_info("Created " + optimizer->describe());

  const std::string eval_metric = eval_loader ? config.get<std::string>("eval_metric") : "loss";
  const bool decreasing = eval_metric == "loss";
  const auto updates_per_epoch = static_cast<int64_t>(train_loader->num_batches());
  SchedulerPtr scheduler = create_scheduler(*optimizer, scheduler_args(config, decreasing, updates_per_epoch));
  const int64_t num_epochs = scheduler->num_epochs();
  log_info(format("Scheduled epochs: %lld (epochs + cooldown_epochs). Warmup within epochs when warmup_prefix=False. "
                  "LR stepped per %s.",
                  static_cast<long long>(num_epochs), config.get<bool>("sched_on_updates") ? "update" : "epoch"));

  const auto output_dir = make_output_dir(config.get<std::string>("output"), config.get<std::string>("experiment"),
                                          model_name, data_config.input_size.back());
  // What was actually used, as train.py's args.yaml records the computed lr:
  // rerunning with it as --config repeats this run.
  Config effective = config;
  effective.set("device", device.str());
  effective.set("lr", lr);
  effective.set("num_classes", num_classes);
  const std::string config_toml = effective.to_toml();
  write_file_atomically(output_dir / "config.toml", config_toml);

  TrainContext ctx{config, device, model, *optimizer, *scheduler, *train_loader,
                   config.get<double>("smoothing"), std::max<int64_t>(1, config.get<int64_t>("log_interval"))};
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
      record.eval = validate(model, *eval_loader, device, ctx.log_interval, static_cast<uint64_t>(seed));
    }
    const double metric = record.eval ? metric_of(*record.eval, eval_metric) : train_loss;
    std::vector<std::pair<std::string, double>> eval_columns;
    if (record.eval) eval_columns = {{"loss", record.eval->loss}, {"top1", record.eval->top1}, {"top5", record.eval->top5}};
    update_summary(output_dir / "summary.csv", epoch, {{"loss", train_loss}}, eval_columns, optimizer->mean_lr(),
                   /*write_header=*/!best_metric.has_value());

    const TrainingState state{epoch, metric, eval_metric, config_toml};
    save_checkpoint(output_dir, "last", *model, *optimizer, state);
    const bool improved = !best_metric || (decreasing ? metric < *best_metric : metric > *best_metric);
    if (improved) {
      best_metric = metric;
      result.best_epoch = epoch;
      save_checkpoint(output_dir, "model_best", *model, *optimizer, state);
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
  print_result(records, eval_metric);
  return result;
}

}  // namespace timm
