// The epochs: train.py's train_one_epoch() and validate(), and the loop over
// epochs that runs them and hands each epoch to the report.
#include <algorithm>
#include <cmath>
#include <functional>
#include <locale>
#include <sstream>

#include <torch/cuda.h>
#include <torch/utils.h>

#include "timm/base/error.hpp"
#include "timm/base/python_repr.hpp"
#include "timm/base/stopwatch.hpp"
#include "timm/data/naflex.hpp"
#include "timm/data/save_image.hpp"
#include "timm/data/transform.hpp"
#include "timm/dist/eval.hpp"
#include "timm/log/log.hpp"
#include "timm/models/model_input.hpp"
#include "timm/train/clip_grad.hpp"
#include "timm/train/metrics.hpp"
#include "timm/train/train_status.hpp"
#include "trainer_internal.hpp"

namespace timm::train_detail {
namespace {

struct TrainContext {
  const TrainArgs& args;
  torch::Device device;
  ModelPtr model;
  TrainingTask& task;
  Optimizer& optimizer;
  Scheduler& scheduler;
  Loader& loader;
  StepTools& tools;
  const Distributed& dist;
  int64_t log_interval;  // at least 1
  // --train-img-sizes: --variable-batch-loss-scale scales each batch's loss
  // relative to this policy-average batch size.
  bool scheduled_batches = false;
  double batch_size_reference = 0.0;
  // --naflex-loader: patch batches, normalised with the data config's mean
  // and std; --naflex-loss-scale scales each batch's loss relative to
  // batch_size_reference (--batch-size).
  bool naflex = false;
  std::vector<double> mean, std;
  const PatchRandomErasing* patch_erasing = nullptr;  // --reprob with --naflex-loader
  // --naflex-patch-sizes: the patch size of each train choice; empty: the model's.
  std::vector<std::array<int64_t, 2>> choice_patch_sizes{};
  // Saves recovery-<epoch>-<update_idx> (--recovery-interval) with the
  // epoch's `position`; collective.
  std::function<void(int64_t epoch, int64_t update_idx, EpochPosition position)> save_recovery{};
  // --log-tensorboard: the primary rank's event file; null elsewhere.
  TensorBoardWriter* tensorboard = nullptr;
  // --save-images: the primary rank's output folder; empty elsewhere and
  // without the flag.
  std::filesystem::path save_images_dir{};
  // stdout is a terminal (log_status_enabled): a status line redrawn after
  // each update instead of the "Train: ..." log lines.
  bool status_line = false;
  double images_seen = 0;
  double train_seconds = 0;
};

// Where prepare_input puts each batch: the device, --model-dtype (timm's
// img_dtype) and --channels-last.
InputOptions input_options(const TrainContext& ctx) {
  return {.device = ctx.device, .dtype = ctx.tools.model_dtype, .channels_last = ctx.args.channels_last};
}

// The model's input from a loader batch: images through prepare_input, or a
// NaFlex batch as timm's NaFlexPrefetchLoader gives it (the patches on the
// device, normalised in the model's dtype, erased when `training` with
// --reprob; their coordinates and mask).
ModelInput model_input(const TrainContext& ctx, const Batch& batch, const TransformPipeline& transform, Rng& rng,
                       bool training) {
  if (!batch.patches.patches.defined()) return prepare_input(batch.images, transform, rng, input_options(ctx));
  const NaFlexBatch& naflex = batch.patches;
  PatchInputOptions options{.mean = ctx.mean,
                            .std = ctx.std,
                            .dtype = ctx.tools.model_dtype,
                            .device = ctx.device,
                            .channels_last = !ctx.args.naflex_patchify_channels_first};
  // Variable patch sizes: unflattened, the model reads the batch's size.
  if (training && !ctx.choice_patch_sizes.empty()) options.unflatten = ctx.choice_patch_sizes.at(batch.choice);
  std::function<void(at::Tensor&)> erase;
  if (training && ctx.patch_erasing) {
    // The plan reads the CPU copies of the coordinates and mask.
    erase = [&](at::Tensor& patches) {
      ctx.patch_erasing->apply(patches, naflex.patch_coord, naflex.patch_valid, static_cast<int64_t>(ctx.mean.size()),
                               rng);
    };
  }
  return patch_input(naflex, options, erase);
}

// The task's forward and loss, under autocast when --amp.
at::Tensor forward_loss(TrainContext& ctx, const ModelInput& input, const at::Tensor& target) {
  std::optional<AutocastGuard> autocast;
  if (ctx.tools.amp_dtype) autocast.emplace(ctx.device.type(), *ctx.tools.amp_dtype);
  return ctx.task.forward(input, target).loss;
}

// The parameters clipping sees: train.py's exclude_head='agc' in clip_mode.
std::vector<at::Tensor> clip_parameters(const TrainContext& ctx) {
  return ctx.task.clip_parameters(ctx.tools.clip_mode.find("agc") != std::string::npos);
}

// Backward of one batch; at an update, clipping and the optimizer step as
// timm's NativeScaler / plain path. Returns false when the scaler skipped
// the step for a non-finite gradient.
bool backward_and_step(TrainContext& ctx, const at::Tensor& loss, bool need_update) {
  StepTools& tools = ctx.tools;
  const std::vector<at::Tensor> params = ctx.task.trainable_module().parameters();
  // train.py: loss.backward(create_graph=second_order) for adahessian.
  const bool second_order = ctx.optimizer.is_second_order();
  if (tools.scaler) {
    tools.scaler->scale(loss).backward(/*gradient=*/{}, /*retain_graph=*/std::nullopt, second_order);
    if (!need_update) return true;
    if (tools.clip_grad) {
      tools.scaler->unscale_(params);
      dispatch_clip_grad(clip_parameters(ctx), *tools.clip_grad, tools.clip_mode);
    }
    const bool stepped = tools.scaler->step(ctx.optimizer, params);
    tools.scaler->update();
    return stepped;
  }
  loss.backward(/*gradient=*/{}, /*retain_graph=*/std::nullopt, second_order);
  if (!need_update) return true;
  if (tools.clip_grad) dispatch_clip_grad(clip_parameters(ctx), *tools.clip_grad, tools.clip_mode);
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

// train.py's local_scale with --train-img-sizes (--variable-batch-loss-scale)
// or --naflex-loader (--naflex-loss-scale): linear multiplies a batch's loss
// (so its gradient) by its size over batch_size_reference, sqrt by the square
// root of that; none (and with neither loader) by 1. train.py also scales a
// distributed NaFlex batch by world_size * B / (B summed over the ranks); every
// rank draws the same schedule from the same seed (NaFlexBatchSampler), so
// the ranks' B are equal, that factor is 1, and its all-reduce is left out.
double variable_batch_loss_scale(const TrainContext& ctx, int64_t batch_size) {
  if (!ctx.scheduled_batches && !ctx.naflex) return 1.0;
  const std::string& mode = ctx.naflex ? ctx.args.naflex_loss_scale : ctx.args.variable_batch_loss_scale;
  const std::string flag = ctx.naflex ? "--naflex-loss-scale" : "--variable-batch-loss-scale";
  if (mode.empty() || mode == "none") return 1.0;
  double scale = static_cast<double>(batch_size) / ctx.batch_size_reference;
  if (mode == "sqrt") {
    scale = std::pow(scale, 0.5);  // Python's ** 0.5
  } else if (mode != "linear") {
    throw UsageError(flag + " " + in_quotes(mode) + ": expected 'none', 'sqrt' or 'linear'");
  }
  return scale;
}

// Forward, loss and backward of one batch of an accumulation of `accum`
// batches, and the optimizer step when it updates; the backward pass takes
// the loss times `loss_scale` (--variable-batch-loss-scale or
// --naflex-loss-scale). Returns the batch's loss (unscaled by the
// accumulation and `loss_scale`).
double train_batch(TrainContext& ctx, const ModelInput& input, const at::Tensor& target, int64_t accum,
                   double loss_scale, bool need_update, int64_t epoch, int64_t batch_idx) {
  // Under DDP, the batches that do not update skip the all-reduce (torch's
  // no_sync); the update's backward reduces the accumulated gradients.
  std::optional<dist::DistributedDataParallel::NoSync> no_sync;
  if (ctx.dist.ddp && !need_update) no_sync.emplace(ctx.dist.ddp->no_sync());
  if (ctx.dist.ddp) ctx.dist.ddp->before_forward();
  at::Tensor loss = forward_loss(ctx, input, target);
  if (accum > 1) loss = loss / static_cast<double>(accum);
  const double loss_value = loss.item<double>() * static_cast<double>(accum);
  check_loss(ctx, loss_value, epoch, batch_idx);
  backward_and_step(ctx, loss_scale != 1.0 ? loss * loss_scale : loss, need_update);
  return loss_value;
}

// What train_one_epoch keeps between batches.
struct EpochProgress {
  int64_t epoch = 0;
  int64_t updates = 0;      // per epoch
  int64_t num_updates = 0;  // since the run's epoch 0
  AverageMeter losses, update_time, data_time;
  Stopwatch data_watch;
  Stopwatch update_watch;
  int64_t update_sample_count = 0;  // since the last update, over all ranks
  Stopwatch epoch_watch;            // for the status line's ETA
  Stopwatch status_watch;           // since the status line was last drawn
  // The epoch's random engines: the batch transforms' and mixup / cutmix's
  // (seeded per epoch in train_one_epoch).
  Rng batch_rng{0};
  Rng mixup_rng{0};
};

// An Rng's engine as std::mt19937_64's text, and back (a recovery
// checkpoint's EpochPosition); in the classic locale, whatever the global one.
std::string engine_text(Rng& rng) {
  std::ostringstream text;
  text.imbue(std::locale::classic());
  text << rng.engine();
  return text.str();
}

void restore_engine(Rng& rng, const std::string& text, const std::string& what) {
  std::istringstream in(text);
  in.imbue(std::locale::classic());
  in >> rng.engine();
  if (in.fail()) throw Error("the recovery checkpoint's " + what + " is not a std::mt19937_64 state");
}

// Where the epoch stands after update `update_idx`, whose last batch was
// `batch_idx`: a recovery checkpoint's EpochPosition. Every rank's loss meter
// goes in (collective: every rank calls it at the same update).
EpochPosition epoch_position(const TrainContext& ctx, EpochProgress& p, int64_t update_idx, int64_t batch_idx) {
  EpochPosition position;
  position.updates_done = update_idx + 1;
  position.updates_per_epoch = p.updates;
  position.batches_done = batch_idx + 1;
  position.batch_rng = engine_text(p.batch_rng);
  position.mixup_rng = engine_text(p.mixup_rng);
  // Each rank fills its own row, zeros elsewhere: the sum over the ranks is
  // every rank's row, exactly.
  const int size = ctx.dist.size();
  const auto row = static_cast<std::size_t>(ctx.dist.world.rank);
  std::vector<double> meters(2 * static_cast<std::size_t>(size), 0.0);
  meters[2 * row] = p.losses.sum();
  meters[2 * row + 1] = static_cast<double>(p.losses.count());
  ctx.dist.sum(meters, "allreduce of the train loss meters for a recovery checkpoint");
  position.train_loss = at::tensor(meters, at::TensorOptions().dtype(at::kDouble)).reshape({size, 2});
  return position;
}

// A resumed epoch (`position`, a recovery checkpoint's) continues where the
// checkpoint was written: the updates done, the random engines and this
// rank's loss meter as they were then.
void continue_epoch(const TrainContext& ctx, EpochProgress& p, const EpochPosition& position) {
  p.num_updates += position.updates_done;
  restore_engine(p.batch_rng, position.batch_rng, "batch_rng");
  restore_engine(p.mixup_rng, position.mixup_rng, "mixup_rng");
  const at::Tensor meter = position.train_loss[ctx.dist.world.rank];
  p.losses.restore(meter[0].item<double>(), static_cast<int64_t>(meter[1].item<double>()));
  const std::string rest = position.updates_done == p.updates
                               ? std::string("its updates are done; its evaluation and checkpoint follow")
                               : format("skipping the %lld batches trained before the recovery checkpoint",
                                        static_cast<long long>(position.batches_done));
  log_info(format("Resuming epoch %lld at update %lld of %lld: %s", static_cast<long long>(p.epoch),
                  static_cast<long long>(position.updates_done), static_cast<long long>(p.updates), rest.c_str()));
}

// Redraws the terminal's status line; between log points at most 10 times a
// second.
void show_train_status(EpochProgress& p, int64_t update_idx, double loss_now, double loss_avg, bool force) {
  if (!force && p.status_watch.seconds() < 0.1) return;
  p.status_watch.restart();
  log_status(format_train_status(TrainStatus{.epoch = p.epoch,
                                             .update_idx = update_idx,
                                             .updates = p.updates,
                                             .loss = loss_now,
                                             .loss_avg = loss_avg,
                                             .images_per_second = p.update_sample_count / p.update_time.avg(),
                                             .epoch_seconds = p.epoch_watch.seconds()}));
}

// train.py's "Train: ..." line, or the status line on a terminal, and the
// step's TensorBoard scalars (step: the updates so far); the logged losses
// are the means over the ranks (collective: every rank calls it).
void log_train_progress(const TrainContext& ctx, EpochProgress& p, int64_t update_idx) {
  std::vector<double> logged{p.losses.val(), p.losses.avg()};
  ctx.dist.sum(logged, "allreduce of the logged train loss");
  const double loss_now = logged[0] / ctx.dist.size(), loss_avg = logged[1] / ctx.dist.size();
  if (ctx.tensorboard) {
    ctx.tensorboard->add_scalars(p.num_updates,
                                 {{"train/loss", loss_now},
                                  {"train/loss_avg", loss_avg},
                                  {"train/lr", ctx.optimizer.mean_lr()},
                                  {"train/images_per_sec", p.update_sample_count / p.update_time.avg()}});
  }
  if (ctx.status_line) {
    show_train_status(p, update_idx, loss_now, loss_avg, /*force=*/true);
    return;
  }
  log_info(format(
      "Train: %lld [%4lld/%lld (%3.0f%%)]  Loss: %#.3g (%#.3g)  Time: %.3fs, %7.2f/s  "
      "(%.3fs, %7.2f/s)  LR: %.3e  Data: %.3f (%.3f)",
      static_cast<long long>(p.epoch), static_cast<long long>(update_idx), static_cast<long long>(p.updates),
      100.0 * (update_idx + 1) / p.updates, loss_now, loss_avg, p.update_time.val(),
      p.update_sample_count / p.update_time.val(), p.update_time.avg(), p.update_sample_count / p.update_time.avg(),
      ctx.optimizer.mean_lr(), p.data_time.val(), p.data_time.avg()));
}

// train.py's --save-images at a logged step: the batch's input as the model
// took it (normalised, after mixup / cutmix) as
// torchvision.utils.save_image(input, path, padding=0, normalize=True).
void save_input_images(const TrainContext& ctx, const ModelInput& input, int64_t batch_idx) {
  if (ctx.save_images_dir.empty()) return;
  const at::NoGradGuard no_grad;
  save_image(input.images("--save-images"), ctx.save_images_dir / ("train-batch-" + std::to_string(batch_idx) + ".jpg"),
             GridOptions{.nrow = 8, .padding = 0, .normalize = true});
}

// After an optimizer update: the EMA, the meters, the log line (and
// --save-images of `input`, the update's last batch, `batch_idx` in the
// epoch), the recovery checkpoint and the per-update scheduler step.
void after_update(TrainContext& ctx, EpochProgress& p, int64_t update_idx, bool last_batch, const ModelInput& input,
                  int64_t batch_idx) {
  ++p.num_updates;
  ctx.optimizer.zero_grad();
  if (ctx.tools.ema) ctx.tools.ema->update(*ctx.model, p.num_updates, ctx.task.task_state());
  // train.py's --synchronize-step: the step time then includes the queued
  // device work (CUDA; the CPU's is done already).
  if (ctx.args.synchronize_step && ctx.device.is_cuda()) {
    torch::cuda::synchronize(ctx.device.has_index() ? ctx.device.index() : -1);
  }
  p.update_time.update(p.update_watch.lap());
  ctx.images_seen += static_cast<double>(p.update_sample_count);
  ctx.train_seconds += p.update_time.val();
  if (update_idx % ctx.log_interval == 0 || last_batch) {
    log_train_progress(ctx, p, update_idx);
    save_input_images(ctx, input, batch_idx);
  } else if (ctx.status_line && ctx.dist.size() == 1) {
    // Between log points only for one process: with several, the line's
    // losses are the ranks' means, known at the log points.
    show_train_status(p, update_idx, p.losses.val(), p.losses.avg(), /*force=*/false);
  }
  // On every rank: the save gathers each rank's RNG state into rank 0's file.
  const int64_t recovery_interval = ctx.args.recovery_interval;
  if (ctx.save_recovery && recovery_interval > 0 && (update_idx + 1) % recovery_interval == 0) {
    ctx.save_recovery(p.epoch, update_idx, epoch_position(ctx, p, update_idx, batch_idx));
  }
  ctx.scheduler.step_update(p.num_updates, p.losses.avg());
  p.update_sample_count = 0;
}

// train.py's train_one_epoch, with gradient accumulation (a shorter last
// accumulation when the batch count is not a multiple), AMP, clipping and
// the EMA update after each optimizer update. With `resume_at` (a recovery
// checkpoint's position in this epoch), the epoch continues after its
// batches: the loader skips them without loading them.
double train_one_epoch(TrainContext& ctx, int64_t epoch, const EpochPosition* resume_at) {
  ctx.task.train();
  const int64_t first_batch = resume_at ? resume_at->batches_done : 0;
  ctx.loader.start_epoch(epoch, static_cast<std::size_t>(first_batch));
  const int64_t num_batches = static_cast<int64_t>(ctx.loader.num_batches());
  const int64_t accum_steps = ctx.tools.grad_accum_steps;
  const int64_t last_accum_steps = num_batches % accum_steps;
  const int64_t last_batch_idx_to_accum = num_batches - last_accum_steps;
  EpochProgress p;
  p.epoch = epoch;
  p.updates = updates_per_epoch(ctx.loader.num_batches(), accum_steps);
  p.num_updates = epoch * p.updates;
  const auto seed = static_cast<std::uint64_t>(ctx.args.seed);
  p.batch_rng = Rng(seed * 1000003ULL + epoch);
  if (ctx.tools.mixup && ctx.tools.mixup_off_epoch > 0 && epoch >= ctx.tools.mixup_off_epoch) {
    ctx.tools.mixup->set_enabled(false);
  }
  p.mixup_rng = Rng(seed * 7919ULL + epoch);
  if (resume_at) continue_epoch(ctx, p, *resume_at);
  int64_t batch_idx = first_batch;
  int64_t accum = accum_steps;
  ctx.optimizer.zero_grad();
  while (auto batch = ctx.loader.next()) {
    check_stop();
    const bool last_batch = batch_idx == num_batches - 1;
    const bool need_update = last_batch || (batch_idx + 1) % accum_steps == 0;
    const int64_t update_idx = batch_idx / accum_steps;
    if (batch_idx >= last_batch_idx_to_accum) accum = last_accum_steps;
    ModelInput input = model_input(ctx, *batch, ctx.loader.transform(batch->choice), p.batch_rng, /*training=*/true);
    at::Tensor target = batch->targets.to(ctx.device, /*non_blocking=*/true);
    if (ctx.tools.mixup) {
      at::Tensor images = input.images("--mixup / --cutmix");
      target = ctx.tools.mixup->apply(images, target, p.mixup_rng).targets;
      input = images;
    }
    p.data_time.update(static_cast<double>(accum) * p.data_watch.seconds());

    const int64_t batch_size = input.batch_size();
    const double loss_scale = variable_batch_loss_scale(ctx, batch_size);
    const double loss_value = train_batch(ctx, input, target, accum, loss_scale, need_update, epoch, batch_idx);
    if (std::isfinite(loss_value)) p.losses.update(loss_value, batch_size);
    p.update_sample_count += batch_size * ctx.dist.size();  // train.py: B x W, a global rate
    if (need_update) after_update(ctx, p, update_idx, last_batch, input, batch_idx);
    ++batch_idx;
    p.data_watch.restart();
  }
  if (ctx.status_line) log_status_end();
  if (batch_idx == 0) throw Error("the training loader produced no batch; is the dataset smaller than --batch-size?");
  return ctx.dist.active() ? ctx.dist.mean(p.losses.avg(), "allreduce of the epoch's train loss") : p.losses.avg();
}

// One validation batch: its mean loss and correct counts.
struct EvalBatch {
  double loss = 0.0;
  std::vector<int64_t> correct;  // top-1, top-5
  int64_t size = 0;
};

EvalBatch eval_batch(const TrainContext& ctx, const ModelPtr& model, const ModelInput& input,
                     const at::Tensor& target) {
  at::Tensor output;
  {
    std::optional<AutocastGuard> autocast;
    if (ctx.tools.amp_dtype) autocast.emplace(ctx.device.type(), *ctx.tools.amp_dtype);
    output = forward_input(*model, input);
  }
  // The metrics from float32 logits (exact also for a --model-dtype bfloat16
  // or float16 model, whose logits timm scores in that dtype).
  output = output.to(at::kFloat);
  at::Tensor reduced_target = target;
  if (ctx.args.tta > 1) {
    // train.py's augmentation reduction: the mean of each --tta consecutive
    // outputs, scored against the first of their targets; a group counts as
    // one sample.
    TtaReduced reduced = reduce_tta(output, target, ctx.args.tta);
    output = reduced.output;
    reduced_target = reduced.target;
  }
  const double loss = at::cross_entropy_loss(output, reduced_target).item<double>();
  return EvalBatch{loss, correct_topk(output, reduced_target, {1, 5}), output.size(0)};
}

// train.py's "Test: ..." line: the batch's figures, then the running ones.
void log_eval_progress(const std::string& log_suffix, int64_t batch_idx, int64_t last_idx,
                       const AverageMeter& batch_time, const EvalBatch& batch, const dist::EvalSums& sums) {
  const int64_t n = batch.size;
  const int64_t samples = sums.count;
  log_info(
      format("Test%s: [%4lld/%lld]  Time: %.3f (%.3f)  Loss: %7.3f (%6.3f)  Acc@1: %7.3f (%7.3f)  "
             "Acc@5: %7.3f (%7.3f)",
             log_suffix.c_str(), static_cast<long long>(batch_idx), static_cast<long long>(last_idx), batch_time.val(),
             batch_time.avg(), batch.loss, sums.loss_sum / samples, 100.0 * batch.correct[0] / n,
             100.0 * sums.top1_correct / samples, 100.0 * batch.correct[1] / n, 100.0 * sums.top5_correct / samples));
}

// train.py's validate, but exact: losses and hits are summed over samples
// and divided once, instead of averaging per-batch percentages.
EvalMetrics validate(const TrainContext& ctx, const ModelPtr& model, Loader& loader, const std::string& log_suffix) {
  model->eval();
  torch::NoGradGuard no_grad;
  loader.start_epoch(0);
  const int64_t last_idx = static_cast<int64_t>(loader.num_batches()) - 1;
  dist::EvalSums sums;
  AverageMeter batch_time;
  Rng rng(static_cast<uint64_t>(ctx.args.seed));
  Stopwatch batch_watch;
  int64_t batch_idx = 0;
  while (auto batch = loader.next()) {
    const ModelInput input = model_input(ctx, *batch, loader.transform(), rng, /*training=*/false);
    const at::Tensor target = batch->targets.to(ctx.device, /*non_blocking=*/true);
    const EvalBatch result = eval_batch(ctx, model, input, target);
    sums.loss_sum += result.loss * static_cast<double>(result.size);
    sums.top1_correct += result.correct[0];
    sums.top5_correct += result.correct[1];
    sums.count += result.size;
    batch_time.update(batch_watch.lap());
    if (batch_idx % ctx.log_interval == 0 || batch_idx == last_idx) {
      log_eval_progress(log_suffix, batch_idx, last_idx, batch_time, result, sums);
    }
    ++batch_idx;
  }
  // Exact: every sample was evaluated on exactly one rank (ShardSampler);
  // the sums over the ranks are the sums over the dataset.
  if (ctx.dist.active()) sums = dist::all_reduce_eval_sums(sums, ctx.dist.group->comm(), ctx.device);
  const int64_t samples = sums.count;
  if (samples == 0) throw Error("the validation loader produced no sample");
  return EvalMetrics{sums.loss_sum / samples, 100.0 * sums.top1_correct / samples, 100.0 * sums.top5_correct / samples,
                     samples};
}

// The epoch's evaluation, none without --val-split. As train.py: with an EMA
// (not forced to CPU), its metrics are the epoch's, for the summary, the best
// checkpoint and the plateau lr.
std::optional<EvalMetrics> evaluate(const TrainContext& ctx, const TrainSetup& setup) {
  if (!setup.eval_loader) return std::nullopt;
  EvalMetrics metrics = validate(ctx, setup.model, *setup.eval_loader, "");
  if (setup.tools.ema && !setup.tools.ema->options().device) {
    metrics = validate(ctx, setup.tools.ema->module(), *setup.eval_loader, " (EMA)");
  }
  return metrics;
}

TrainResult result_of(const EpochHistory& history, const RunOutput& output, const TrainContext& ctx) {
  TrainResult result;
  result.output_dir = output.dir;
  if (!history.records.empty()) result.last_eval = history.records.back().eval;
  result.best_metric = history.best_metric.value_or(0.0);
  result.best_epoch = history.best_epoch;
  result.train_images_per_second = ctx.train_seconds > 0 ? ctx.images_seen / ctx.train_seconds : 0.0;
  return result;
}

}  // namespace

int64_t updates_per_epoch(std::size_t num_batches, int64_t grad_accum_steps) {
  return (static_cast<int64_t>(num_batches) + grad_accum_steps - 1) / grad_accum_steps;
}

TrainResult train_epochs(const TrainArgs& args, TrainSetup& setup, RunOutput& output, Distributed& dist,
                         const torch::Device& device, int64_t start_epoch) {
  TrainContext ctx{.args = args,
                   .device = device,
                   .model = setup.model,
                   .task = *setup.task,
                   .optimizer = *setup.optimizer,
                   .scheduler = *setup.scheduler,
                   .loader = *setup.train_loader,
                   .tools = setup.tools,
                   .dist = dist,
                   .log_interval = std::max<int64_t>(1, args.log_interval),
                   .scheduled_batches = setup.scheduled_batches,
                   .batch_size_reference = setup.batch_size_reference,
                   .naflex = setup.naflex,
                   .mean = setup.data_config.mean,
                   .std = setup.data_config.std,
                   .patch_erasing = setup.patch_erasing ? &*setup.patch_erasing : nullptr,
                   .choice_patch_sizes = setup.naflex_choice_patch_sizes,
                   .tensorboard = output.tensorboard.get(),
                   .save_images_dir = args.save_images && dist.is_primary() ? output.dir : std::filesystem::path{},
                   .status_line = log_status_enabled()};
  ctx.save_recovery = [&](int64_t epoch, int64_t update_idx, EpochPosition position) {
    RngStates states = rng_states(dist);
    position.rank_buffers = other_ranks_buffers(*setup.model, setup.tools.ema.get(), dist);
    if (dist.is_primary()) save_recovery(setup, output, epoch, update_idx, std::move(states), std::move(position));
  };
  EpochHistory history;
  const int64_t val_interval = std::max<int64_t>(1, args.val_interval);
  const int64_t end_epoch = last_epoch_of_run(args, start_epoch, setup.scheduler->num_epochs());
  for (int64_t epoch = start_epoch; epoch < end_epoch; ++epoch) {
    // A recovery checkpoint's position: the first epoch continues there.
    const EpochPosition* resume_at = epoch == start_epoch && setup.resume_position ? &*setup.resume_position : nullptr;
    const double train_loss = train_one_epoch(ctx, epoch, resume_at);
    if (output.tensorboard) output.tensorboard->flush();  // the epoch's step scalars
    if (setup.dist_bn) distribute_bn_statistics(*setup.model, setup.tools.ema.get(), dist, *setup.dist_bn);
    if ((epoch + 1) % val_interval != 0 && epoch + 1 != end_epoch) {
      log_info("Skipping eval and checkpointing ");
      setup.scheduler->step(epoch + 1, std::nullopt);
      continue;
    }
    const EpochRecord record{epoch, train_loss, evaluate(ctx, setup)};
    const double metric = record.eval ? metric_of(*record.eval, setup.eval_metric) : train_loss;
    report_epoch(record, metric, rng_states(dist), setup, output, dist, history);
    setup.scheduler->step(epoch + 1, metric);
  }
  report_run_end(history, setup, output, dist);
  finish_distributed(*setup.model, dist);
  return result_of(history, output, ctx);
}

}  // namespace timm::train_detail
