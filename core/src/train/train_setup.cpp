// What train.py's main() builds before the first epoch, in its order:
// datasets, model, step tools, loaders, optimizer, EMA, DDP, scheduler; and
// the resume.
#include <algorithm>
#include <array>
#include <cmath>

#include <torch/utils.h>

#include "timm/base/error.hpp"
#include "timm/base/python_repr.hpp"
#include "timm/data/dataset.hpp"
#include "timm/data/naflex_sampler.hpp"
#include "timm/data/scheduled_sampler.hpp"
#include "timm/data/transform.hpp"
#include "timm/dist/collectives.hpp"
#include "timm/dist/sampler.hpp"
#include "timm/layers/batch_norm.hpp"
#include "timm/layers/fast_norm.hpp"
#include "timm/layers/split_batchnorm.hpp"
#include "timm/log/log.hpp"
#include "timm/models/channels_last.hpp"
#include "timm/models/load_weights.hpp"
#include "timm/models/model_args.hpp"
#include "timm/models/model_dtype.hpp"
#include "trainer_internal.hpp"

namespace timm::train_detail {
namespace {

ModelArgs model_args(const TrainArgs& args, int64_t num_classes, int64_t in_chans) {
  ModelArgs result;
  result.num_classes = num_classes;
  result.in_chans = in_chans;
  result.drop_rate = args.drop;
  result.drop_path_rate = args.drop_path;
  // Today's train.py parses --drop-connect and drops it; older timm passed
  // it to create_model as drop_connect_rate, the drop path rate. Taken as
  // that, so an old command line keeps its meaning (train_args_from_config
  // refuses it beside --drop-path).
  if (args.drop_connect) {
    log_warning("--drop-connect is deprecated, use --drop-path: taking " + python_float_repr(*args.drop_connect) +
                " as the drop path rate");
    result.drop_path_rate = args.drop_connect;
  }
  result.global_pool = args.gp;
  result.kwargs = args.model_kwargs;
  // train.py passes --drop-block to create_model as the keyword
  // drop_block_rate; a model without DropBlock refuses it by name.
  if (args.drop_block) set_drop_block_rate(result, *args.drop_block);
  return result;
}

// train.py's lr scaling (§1.3): only when --lr is not given (or 0). The
// global batch is B x W x A, B the policy-average batch size with
// --train-img-sizes.
double resolve_lr(const TrainArgs& args, double global_batch) {
  if (args.lr && *args.lr != 0.0) return *args.lr;
  double ratio = global_batch / static_cast<double>(args.lr_base_size);
  std::string scale = args.lr_base_scale;
  if (scale.empty()) {
    // train.py's default: sqrt for its adaptive optimizers, linear otherwise,
    // as the optimizer's plugin declares.
    const bool use_sqrt = optimizer_traits(args.opt).lr_base_scale == LrBaseScale::kSqrt;
    scale = use_sqrt ? "sqrt" : "linear";
  }
  if (scale == "sqrt") ratio = std::sqrt(ratio);
  const double result = args.lr_base * ratio;
  log_info(
      format("Learning rate (%g) calculated from base learning rate (%g) and effective global batch size (%g) "
             "with %s scaling.",
             result, args.lr_base, global_batch, scale.c_str()));
  return result;
}

OptimizerArgs optimizer_args(const TrainArgs& args, double lr) {
  OptimizerArgs result;
  result.opt = args.opt;
  result.lr = lr;
  result.weight_decay = args.weight_decay;
  result.momentum = args.momentum;
  result.eps = args.opt_eps;
  result.betas = args.opt_betas;
  result.kwargs = args.opt_kwargs;
  result.layer_decay = args.layer_decay;
  result.layer_decay_min_scale = args.layer_decay_min_scale.value_or(0.0);
  result.layer_decay_no_opt_scale = args.layer_decay_no_opt_scale;
  return result;
}

SchedulerArgs scheduler_args(const TrainArgs& args, bool decreasing_metric, int64_t updates_per_epoch) {
  SchedulerArgs result;
  result.sched = args.sched;
  result.num_epochs = args.epochs;
  result.decay_epochs = args.decay_epochs;
  result.decay_milestones = args.decay_milestones;
  result.warmup_epochs = args.warmup_epochs;
  result.cooldown_epochs = args.cooldown_epochs;
  result.patience_epochs = args.patience_epochs;
  result.decay_rate = args.decay_rate;
  result.min_lr = args.min_lr;
  result.warmup_lr = args.warmup_lr;
  result.warmup_prefix = args.warmup_prefix;
  result.noise = args.lr_noise.value_or(std::vector<double>{});
  result.noise_pct = args.lr_noise_pct;
  result.noise_std = args.lr_noise_std;
  result.noise_seed = args.seed;
  result.cycle_mul = args.lr_cycle_mul;
  result.cycle_decay = args.lr_cycle_decay;
  result.cycle_limit = args.lr_cycle_limit;
  result.k_decay = args.lr_k_decay;
  result.decay_fn = args.lr_decay_fn;
  result.stable_timescale = args.lr_stable_timescale;
  result.plateau_mode = decreasing_metric ? "min" : "max";
  result.step_on_epochs = !args.sched_on_updates;
  result.updates_per_epoch = updates_per_epoch;
  return result;
}

// timm's create_loader: no random erasing with --no-aug; --resplit keeps the
// first of the --aug-splits (or of 2) clean.
void add_random_erasing(const TrainArgs& args, TransformArgs& transform) {
  transform.re_prob = args.reprob;
  transform.re_mode = args.remode;
  transform.re_count = args.recount;
  transform.aug_splits = args.aug_splits;
  transform.re_num_splits = args.resplit ? (args.aug_splits > 0 ? args.aug_splits : 2) : 0;
}

TransformArgs transform_args(const TrainArgs& args, const DataConfig& data, bool is_training) {
  TransformArgs result = eval_transform_args(data);
  if (!is_training) return result;
  result.is_training = true;
  result.no_aug = args.no_aug;
  result.interpolation =
      (result.no_aug || args.train_interpolation.empty()) ? data.interpolation : args.train_interpolation;
  result.train_crop_mode = args.train_crop_mode.value_or("");
  result.scale = args.scale;
  result.ratio = args.ratio;
  result.hflip = args.hflip;
  result.vflip = args.vflip;
  result.color_jitter = args.color_jitter;
  result.color_jitter_prob = args.color_jitter_prob;
  result.grayscale_prob = args.grayscale_prob.value_or(0.0);
  result.gaussian_blur_prob = args.gaussian_blur_prob.value_or(0.0);
  result.auto_augment = args.aa.value_or("");
  if (!result.no_aug) add_random_erasing(args, result);
  return result;
}

std::shared_ptr<Sampler> make_sampler(const Dataset& dataset, bool is_training, const TrainArgs& args,
                                      int64_t batch_size, const Distributed& dist) {
  const auto seed = static_cast<std::uint64_t>(args.seed);
  if (const auto* iterable = dynamic_cast<const IterableDataset*>(&dataset)) {
    // timm streams an iterable dataset in its own order, per rank and loader
    // worker; no distributed sampler (so no exact evaluation across ranks).
    if (args.aug_repeats > 0) throw UsageError("--aug-repeats: not supported with a streamed (wds/) dataset, as timm");
    StreamConfig config;
    config.rank = dist.active() ? dist.world.rank : 0;
    config.world_size = dist.active() ? dist.size() : 1;
    // train.py evaluates a distributed wds dataset with min(2, workers) workers.
    config.num_workers = (!is_training && dist.active()) ? std::min<int64_t>(2, args.workers) : args.workers;
    config.batch_size = batch_size;
    config.seed = args.seed;
    config.is_training = is_training;
    return iterable->make_sampler(config);
  }
  const auto size = static_cast<int64_t>(dataset.size());
  if (!dist.active()) {
    if (is_training && args.aug_repeats > 0) {
      throw UsageError("--aug-repeats: RepeatAugment is only supported in distributed training (as timm's)");
    }
    return make_local_sampler(dataset.size(), /*shuffle=*/is_training, seed);
  }
  if (!is_training) {
    // Exact evaluation: every real sample on exactly one rank, no padding.
    return std::make_shared<dist::ShardSampler>(size, dist.size(), dist.world.rank);
  }
  if (args.aug_repeats > 0) {
    dist::RepeatAugSamplerOptions repeat;
    repeat.num_replicas = dist.size();
    repeat.rank = dist.world.rank;
    repeat.num_repeats = args.aug_repeats;
    return std::make_shared<dist::RepeatAugSampler>(size, repeat);
  }
  // torch's DistributedSampler as timm's create_loader makes it (shuffled, seed 0, padded).
  dist::DistributedSamplerOptions options;
  options.num_replicas = dist.size();
  options.rank = dist.world.rank;
  return std::make_shared<dist::DistributedSampler>(size, options);
}

LoaderOptions loader_options(const TrainArgs& args, bool is_training, int64_t batch_size, const Distributed& dist) {
  const auto seed = static_cast<std::uint64_t>(args.seed);
  LoaderOptions options;
  options.batch_size = batch_size;
  options.drop_last = is_training;
  options.num_workers = args.workers;
  options.seed = seed + (is_training ? 0 : 1);
  options.pin_memory = args.pin_mem && dist.device.is_cuda();
  options.jpeg_dct_scale = is_training && args.jpeg_dct_scale;
  return options;
}

std::shared_ptr<Loader> make_loader(std::shared_ptr<const Dataset> dataset, bool is_training,
                                    TransformPipeline transform, const TrainArgs& args, int64_t batch_size,
                                    const Distributed& dist) {
  std::shared_ptr<Sampler> sampler = make_sampler(*dataset, is_training, args, batch_size, dist);
  return std::make_shared<Loader>(std::move(dataset), std::move(sampler), std::move(transform),
                                  loader_options(args, is_training, batch_size, dist));
}

// --jpeg-dct-scale: what it does in this run, or why it does nothing (the
// transforms of scheduled sizes share their crop).
void log_jpeg_dct_scale(const TransformPipeline& train) {
  if (train.takes_jpeg()) {
    log_info(
        "--jpeg-dct-scale: train JPEGs are decoded at the DCT scale (1/2, 1/4, 1/8) that still covers the crop at the "
        "input size; their pixels are close to PIL's, not equal");
    return;
  }
  const std::string crop = train.image.empty() ? std::string("none") : train.image.front()->repr();
  log_warning("--jpeg-dct-scale has no effect: the train crop " + crop +
              " does not take undecoded JPEGs (RandomResizedCrop, the default --train-crop-mode, does)");
}

// The flags of train.py's scheduled resolution group count only with
// --train-img-sizes, the spread and the random mix only in a progressive
// schedule: timm ignores them elsewhere, we refuse them. timm's create_loader
// refuses augmentation splits with scheduled sizes.
void check_train_size_flags(const TrainArgs& args) {
  if (!args.train_img_sizes) {
    if (!args.train_size_flags_set.empty()) {
      throw UsageError(args.train_size_flags_set.front() +
                       ": only used with --train-img-sizes (scheduled training input sizes)");
    }
    return;
  }
  if (args.train_size_schedule != "progressive") {
    for (const std::string& flag : args.train_size_flags_set) {
      if (flag == "--train-size-schedule-spread" || flag == "--train-size-random-mix") {
        throw UsageError(flag + ": only used by --train-size-schedule progressive");
      }
    }
  }
  if (args.aug_splits > 0) {
    throw UsageError(
        "--aug-splits: augmentation splits are not supported with --train-img-sizes (as timm's "
        "create_loader)");
  }
}

// train.py's scheduled resolution loader (create_loader with
// input_size_choices): one train transform per --train-img-sizes size (the
// same augmentation flags), the training sampler wrapped in timm's
// ScheduledBatchSampler seeded --seed (so every rank gets the same batch
// shapes), drop_last. Returns the loader; `batch_size_reference` gets the
// policy-average batch size that train.py scales the lr (and
// --variable-batch-loss-scale) by.
std::shared_ptr<Loader> make_scheduled_train_loader(std::shared_ptr<const Dataset> dataset, const TrainArgs& args,
                                                    const DataConfig& data, const Distributed& dist,
                                                    double& batch_size_reference) {
  if (dynamic_cast<const IterableDataset*>(dataset.get()) != nullptr) {
    throw UsageError(
        "--train-img-sizes: scheduled input sizes need a map-style dataset, not a streamed (wds/) one "
        "(as timm's create_loader)");
  }
  const std::vector<int64_t>& sizes = *args.train_img_sizes;
  for (const int64_t size : sizes) {
    if (size <= 0) {
      throw UsageError("--train-img-sizes " + python_list_repr(sizes) + ": every size must be positive");
    }
  }
  const std::vector<int64_t> batch_sizes =
      args.train_batch_sizes.value_or(std::vector<int64_t>(sizes.size(), args.batch_size));
  if (batch_sizes.size() != sizes.size()) {
    throw UsageError("--train-batch-sizes: " + std::to_string(batch_sizes.size()) + " batch sizes for " +
                     std::to_string(sizes.size()) + " --train-img-sizes; expected one per size");
  }
  if (args.train_size_probs && args.train_size_probs->size() != sizes.size()) {
    throw UsageError("--train-size-probs: " + std::to_string(args.train_size_probs->size()) + " weights for " +
                     std::to_string(sizes.size()) + " --train-img-sizes; expected one weight per size");
  }
  std::vector<TransformPipeline> transforms;
  for (const int64_t size : sizes) {
    TransformArgs transform = transform_args(args, data, true);
    transform.input_size = {data.input_size.at(0), size, size};
    transforms.push_back(create_transform(transform));
  }
  ScheduledBatchSamplerOptions options;
  options.batch_sizes = batch_sizes;
  options.choice_weights = args.train_size_probs;
  options.seed = args.seed;
  options.drop_last = true;
  options.num_batches = args.train_batches_per_epoch;
  options.choice_schedule = args.train_size_schedule;
  const bool progressive = args.train_size_schedule == "progressive";
  if (progressive) options.schedule_epochs = args.epochs;
  options.schedule_spread = args.train_size_schedule_spread;
  options.schedule_random_mix = args.train_size_random_mix;
  auto sampler = std::make_shared<ScheduledBatchSampler>(
      make_sampler(*dataset, /*is_training=*/true, args, args.batch_size, dist), options);
  batch_size_reference = sampler->average_batch_size();
  log_info("Using scheduled training resolutions " + python_list_repr(sizes) + " with batch sizes " +
           python_tuple_repr(batch_sizes) + ".");
  if (progressive) {
    log_info(format("Using progressive resolution schedule over %lld epochs with spread=%s and random_mix=%s.",
                    static_cast<long long>(args.epochs), python_float_repr(args.train_size_schedule_spread).c_str(),
                    python_float_repr(args.train_size_random_mix).c_str()));
  }
  log_info(format("Scheduled loader has %zu batches/epoch using policy-average batch size %.2f.", sampler->size(),
                  batch_size_reference));
  const int64_t largest = *std::max_element(batch_sizes.begin(), batch_sizes.end());
  return std::make_shared<Loader>(std::move(dataset), std::move(sampler), std::move(transforms),
                                  loader_options(args, /*is_training=*/true, largest, dist));
}

// train.py's mixup_args.
MixupOptions mixup_options(const TrainArgs& args, int64_t num_classes) {
  MixupOptions options;
  options.mixup_alpha = args.mixup;
  options.cutmix_alpha = args.cutmix;
  if (const auto& minmax = args.cutmix_minmax) {
    if (minmax->size() != 2) throw UsageError("--cutmix-minmax: expected two values, MIN and MAX");
    options.cutmix_minmax = std::make_pair((*minmax)[0], (*minmax)[1]);
  }
  options.prob = args.mixup_prob;
  options.switch_prob = args.mixup_switch_prob;
  options.mode = args.mixup_mode;
  options.label_smoothing = args.smoothing;
  options.num_classes = num_classes;
  return options;
}

// --naflex-patch-sizes and their weights, as train.py checks them (and
// positive sizes, which timm leaves to fail in the transforms).
void check_naflex_patch_sizes(const TrainArgs& args) {
  const auto& sizes = args.naflex_patch_sizes;
  const auto& probs = args.naflex_patch_size_probs;
  if (probs && !sizes) throw UsageError("--naflex-patch-size-probs: only used with --naflex-patch-sizes");
  if (!sizes) return;
  if (sizes->empty() || std::any_of(sizes->begin(), sizes->end(), [](int64_t p) { return p < 1; })) {
    throw UsageError("--naflex-patch-sizes " + python_list_repr(*sizes) + ": expected positive patch sizes");
  }
  if (probs && probs->size() != sizes->size()) {
    throw UsageError("--naflex-patch-size-probs must have same length as --naflex-patch-sizes");  // train.py's words
  }
}

// --naflex-loader's refusals, before a teacher or a loader is built: timm's
// (train.py's alternative loader modes, create_naflex_loader's aug repeats and
// map-style datasets), the mixing and erasing flags timm's NaFlex loader
// drops or ignores (--cutmix-minmax, --mixup-mode, --resplit), what cannot
// take patches (a teacher, --save-images) and bad sizes. Without
// --naflex-loader, the group's other flags are refused.
void check_naflex_flags(const TrainArgs& args, const Dataset& train) {
  if (!args.naflex_loader) {
    if (!args.naflex_flags_set.empty()) {
      throw UsageError(args.naflex_flags_set.front() + ": only used with --naflex-loader (NaFlex patch batches)");
    }
    return;
  }
  if (args.train_img_sizes) throw UsageError("--naflex-loader and --train-img-sizes are alternative loader modes.");
  if (args.aug_repeats > 0) {
    throw UsageError("--aug-repeats: not supported with --naflex-loader (as timm's create_naflex_loader)");
  }
  if (dynamic_cast<const IterableDataset*>(&train) != nullptr) {
    throw UsageError(
        "--naflex-loader: NaFlex batches need a map-style dataset, not a streamed (wds/) one (as timm's "
        "create_naflex_loader)");
  }
  // train.py drops these two from NaFlexMixup's arguments.
  if (args.cutmix_minmax) {
    throw UsageError("--cutmix-minmax with --naflex-loader: timm's NaFlexMixup has no min/max CutMix box");
  }
  if (args.mixup_mode != "batch") {
    throw UsageError("--mixup-mode " + in_quotes(args.mixup_mode) +
                     " with --naflex-loader: timm's NaFlexMixup mixes pairs of nearest aspect ratio, its one mode");
  }
  if (args.resplit) {
    throw UsageError(
        "--resplit with --naflex-loader: NaFlex batches have no clean split (timm's NaFlex loader ignores "
        "it)");
  }
  if (args.kd_model_name) {
    throw UsageError(
        "--kd-model-name with --naflex-loader: distillation feeds the teacher image batches, and NaFlex "
        "batches are patches");
  }
  if (args.save_images) {
    throw UsageError("--save-images with --naflex-loader: the batches are patches, not images");
  }
  if (args.naflex_max_seq_len < 1) {
    throw UsageError("--naflex-max-seq-len " + std::to_string(args.naflex_max_seq_len) +
                     ": expected a positive sequence length");
  }
  check_naflex_patch_sizes(args);
}

// train.py's patch size of the NaFlex loader: the model's. timm falls back to
// (16, 16) for a model without get_patch_size() and then fails at its first
// forward; refused here, naming the model.
std::array<int64_t, 2> naflex_patch_size(const ClassifierImpl& model) {
  const std::optional<std::array<int64_t, 2>> patch = model.patch_size();
  if (!patch) {
    throw UsageError("--naflex-loader: " + describe_model(model) +
                     " takes images only, not patches (NaFlex batches need a model that takes patches, such as "
                     "naflexvit_*)");
  }
  return *patch;
}

// --naflex-patchify-channels-first lays each patch out (C, Ph, Pw); the model
// must take that layout. timm passes either layout to any model, which then
// trains on scrambled pixels without a word; refused here, naming the model.
void check_patch_layout(const TrainArgs& args, const ClassifierImpl& model) {
  const bool channels_last = !args.naflex_patchify_channels_first;
  if (model.patchify_channels_last() == channels_last) return;
  const auto layout = [](bool last) { return std::string(last ? "(Ph, Pw, C)" : "(C, Ph, Pw)"); };
  throw UsageError("--naflex-loader: " + describe_model(model) + " takes patches laid out " + layout(!channels_last) +
                   ", but " +
                   (channels_last ? std::string("without --naflex-patchify-channels-first")
                                  : std::string("--naflex-patchify-channels-first")) +
                   " makes them " + layout(channels_last) + " (the model's layout is one of its --model-kwargs)");
}

// train.py's NaFlexMixup (--mixup / --cutmix with --naflex-loader): its
// mixup_args, with --mixup-off-epoch (which timm's NaFlex loader fails on);
// null when no mixing is active.
std::shared_ptr<const NaFlexMixup> make_naflex_mixup(const TrainArgs& args, int64_t num_classes) {
  const MixupOptions mixup = mixup_options(args, num_classes);
  if (!mixup_active(mixup)) return nullptr;
  NaFlexMixupOptions options;
  options.num_classes = num_classes;
  options.mixup_alpha = mixup.mixup_alpha;
  options.cutmix_alpha = mixup.cutmix_alpha;
  options.switch_prob = mixup.switch_prob;
  options.prob = mixup.prob;
  options.label_smoothing = mixup.label_smoothing;
  options.mixup_off_epoch = args.mixup_off_epoch;
  auto result = std::make_shared<const NaFlexMixup>(options);
  log_info(format("NaFlex mixing: mixup_alpha=%s, cutmix_alpha=%s, prob=%s, switch_prob=%s, label_smoothing=%s",
                  python_float_repr(options.mixup_alpha).c_str(), python_float_repr(options.cutmix_alpha).c_str(),
                  python_float_repr(options.prob).c_str(), python_float_repr(options.switch_prob).c_str(),
                  python_float_repr(options.label_smoothing).c_str()));
  return result;
}

// The NaFlexBatchSampler of create_naflex_loader: --naflex-train-seq-lens, a
// budget of --batch-size times the longest, --seed, this rank's share, and
// with --naflex-patch-sizes their weights (uniform by default).
NaFlexSamplerOptions naflex_sampler_options(const TrainArgs& args, const Distributed& dist) {
  const std::vector<int64_t>& seq_lens = args.naflex_train_seq_lens;
  NaFlexSamplerOptions options;
  options.seq_lens = seq_lens;
  const int64_t longest = seq_lens.empty() ? 0 : *std::max_element(seq_lens.begin(), seq_lens.end());
  options.max_tokens_per_batch = args.batch_size * longest;
  options.seed = args.seed;
  options.rank = dist.active() ? dist.world.rank : 0;
  options.world_size = dist.active() ? dist.size() : 1;
  if (const auto& sizes = args.naflex_patch_sizes) {
    options.patch_size_probs = args.naflex_patch_size_probs.value_or(std::vector<double>(sizes->size(), 1.0));
  }
  return options;
}

// The patch sizes a batch draws from (timm's patch_size_choices), or the
// model's alone; logged as train.py does.
std::vector<std::array<int64_t, 2>> naflex_patch_sizes(const TrainArgs& args, std::array<int64_t, 2> model_patch) {
  if (const auto& sizes = args.naflex_patch_sizes) {
    log_info("Using variable patch sizes: " + python_list_repr(*sizes));
    std::vector<std::array<int64_t, 2>> patches;
    for (const int64_t p : *sizes) patches.push_back({p, p});
    return patches;
  }
  log_info(format("Using model patch size: (%lld, %lld)", static_cast<long long>(model_patch[0]),
                  static_cast<long long>(model_patch[1])));
  return {model_patch};
}

// train.py's NaFlex train loader (create_naflex_loader, is_training): timm's
// NaFlexBatchSampler schedule (batch sizes a multiple of 8, seeded --seed
// where timm always seeds 42, which is --seed's default), one train
// transform per (sequence length, patch size) (the same augmentation flags,
// the image sized to that many patches), each batch mixed when --mixup /
// --cutmix, cut into patches and padded to its length. `choice_patch_sizes`
// gets each choice's patch size with --naflex-patch-sizes.
std::shared_ptr<Loader> make_naflex_train_loader(std::shared_ptr<const Dataset> dataset, const TrainArgs& args,
                                                 const DataConfig& data, std::array<int64_t, 2> model_patch,
                                                 int64_t num_classes, const Distributed& dist,
                                                 std::vector<std::array<int64_t, 2>>& choice_patch_sizes) {
  const std::vector<std::array<int64_t, 2>> patch_sizes = naflex_patch_sizes(args, model_patch);
  const NaFlexSamplerOptions options = naflex_sampler_options(args, dist);
  auto sampler = std::make_shared<NaFlexBatchSampler>(static_cast<int64_t>(dataset->size()), options);
  std::vector<TransformPipeline> transforms;
  LoaderOptions loader = loader_options(args, /*is_training=*/true, args.batch_size, dist);
  loader.naflex_mixup = make_naflex_mixup(args, num_classes);
  // One choice per (sequence length, patch size), in the sampler's order:
  // choice = length index * patch sizes + patch index.
  for (const int64_t seq_len : sampler->seq_lens()) {
    for (const std::array<int64_t, 2>& patch : patch_sizes) {
      TransformArgs transform = transform_args(args, data, true);
      transform.naflex = NaFlexTransformArgs{patch, seq_len};
      transforms.push_back(create_transform(transform));
      loader.naflex.push_back(*transform.naflex);
      if (args.naflex_patch_sizes) choice_patch_sizes.push_back(patch);
      const std::string patch_text =
          args.naflex_patch_sizes ? format(", patch %lld", static_cast<long long>(patch[0])) : std::string();
      log_info(format("Train transform (seq_len %lld%s): ", static_cast<long long>(seq_len), patch_text.c_str()) +
               transforms.back().repr());
    }
  }
  log_info(format("NaFlex loader has %zu batches/epoch over sequence lengths %s, at most %lld tokens per batch.",
                  sampler->size(), python_list_repr(sampler->seq_lens()).c_str(),
                  static_cast<long long>(options.max_tokens_per_batch)));
  return std::make_shared<Loader>(std::move(dataset), std::move(sampler), std::move(transforms), std::move(loader));
}

// train.py's NaFlex eval loader: the images resized to at most
// --naflex-max-seq-len patches (aspect kept), in batches of the validation
// batch size padded to that length; the usual exact evaluation sampler.
std::shared_ptr<Loader> make_naflex_eval_loader(std::shared_ptr<const Dataset> dataset, const TrainArgs& args,
                                                const DataConfig& data, std::array<int64_t, 2> patch_size,
                                                int64_t batch_size, const Distributed& dist) {
  TransformArgs transform = transform_args(args, data, false);
  transform.naflex = NaFlexTransformArgs{patch_size, args.naflex_max_seq_len};
  LoaderOptions options = loader_options(args, /*is_training=*/false, batch_size, dist);
  options.naflex.push_back(*transform.naflex);
  std::shared_ptr<Sampler> sampler = make_sampler(*dataset, /*is_training=*/false, args, batch_size, dist);
  return std::make_shared<Loader>(std::move(dataset), std::move(sampler), create_transform(transform),
                                  std::move(options));
}

// train.py's loss flags.
TrainLossArgs train_loss_args(const TrainArgs& args) {
  TrainLossArgs result;
  result.jsd_loss = args.jsd_loss;
  result.num_aug_splits = args.aug_splits;
  result.bce_loss = args.bce_loss;
  result.smoothing = args.smoothing;
  result.bce.target_threshold = args.bce_target_thresh;
  result.bce.pos_weight = args.bce_pos_weight;
  result.bce.sum_classes = args.bce_sum;
  return result;
}

// --model-dtype (float32 when not given), as train.py resolves it.
c10::ScalarType model_dtype_of(const TrainArgs& args) {
  return args.model_dtype ? parse_model_dtype(*args.model_dtype) : at::kFloat;
}

// --amp: autocast in --amp-dtype; the float16 gradient scaler on CUDA only,
// as train.py (bfloat16, and float16 on CPU, train unscaled). Without it the
// run trains in --model-dtype (the arguments' reading refused the two
// together).
void setup_amp(const TrainArgs& args, const torch::Device& device, StepTools& tools) {
  tools.model_dtype = model_dtype_of(args);
  if (!args.amp) {
    log_info("AMP not enabled. Training in " + dtype_name(tools.model_dtype) + ".");
    return;
  }
  tools.amp_dtype = parse_amp_dtype(args.amp_dtype);
  if (device.is_cuda() && *tools.amp_dtype == at::kHalf) tools.scaler = std::make_unique<GradScaler>(device);
  log_info("Using native Torch AMP. Training in mixed precision.");
}

// --model-ema: ModelEmaV3 over a second instance of the model, on its
// device and in its dtype (timm deep-copies the model).
std::unique_ptr<ModelEma> make_model_ema(const TrainArgs& args, const ModelArgs& model_args, const ModelPtr& model,
                                         c10::ScalarType model_dtype) {
  if (!args.model_ema) return nullptr;
  ModelEmaOptions options;
  options.decay = args.model_ema_decay;
  options.use_warmup = args.model_ema_warmup;
  if (args.model_ema_force_cpu) options.device = torch::Device(torch::kCPU);
  ModelPtr copy = create_model(args.model, model_args);
  copy->to(model->parameters().front().device());
  to_model_dtype(*copy, model_dtype);
  return std::make_unique<ModelEma>(std::move(copy), *model, options);
}

// train.py's Mixup set-up: active when --mixup or --cutmix > 0 or
// --cutmix-minmax is set; not with aug splits (train.py asserts it).
std::optional<Mixup> make_mixup(const TrainArgs& args, const MixupOptions& options) {
  if (!mixup_active(options)) return std::nullopt;
  if (args.aug_splits > 1) throw UsageError("--mixup / --cutmix cannot be combined with --aug-splits");
  return Mixup(options);
}

StepTools make_step_tools(const TrainArgs& args, const torch::Device& device, int64_t num_classes) {
  StepTools tools;
  const MixupOptions mixup = mixup_options(args, num_classes);
  // --naflex-loader mixes in its loader, before the images are cut into
  // patches (make_naflex_mixup); the loss takes soft targets either way.
  if (!args.naflex_loader) tools.mixup = make_mixup(args, mixup);
  tools.mixup_off_epoch = args.mixup_off_epoch;
  TrainLossArgs loss_args = train_loss_args(args);
  loss_args.mixup_active = mixup_active(mixup);
  tools.loss_fn = create_train_loss(loss_args);
  setup_amp(args, device, tools);
  tools.clip_grad = args.clip_grad;
  tools.clip_mode = args.clip_mode;
  tools.grad_accum_steps = args.grad_accum_steps;
  if (tools.grad_accum_steps < 1) {
    throw UsageError("--grad-accum-steps " + std::to_string(tools.grad_accum_steps) + ": expected 1 or more");
  }
  return tools;
}

struct Datasets {
  std::shared_ptr<const Dataset> train;
  std::shared_ptr<const Dataset> eval;  // none without --val-split
};

Datasets load_datasets(const TrainArgs& args, const std::string& dataset, int64_t in_chans) {
  const std::filesystem::path root = args.data_dir.value_or("");
  check_input_img_mode(args.input_img_mode, in_chans);
  Datasets datasets;
  // train.py: --epoch-repeats for the train split only.
  IterableOptions iterable;
  iterable.input_key = args.input_key.value_or("");
  iterable.target_key = args.target_key.value_or("");
  IterableOptions train_iterable = iterable;
  train_iterable.repeats = args.epoch_repeats;
  datasets.train = repeated_samples(
      first_samples(create_dataset(dataset, root, args.train_split, in_chans, args.class_map, train_iterable),
                    args.train_num_samples, "train-num-samples"),
      args.epoch_repeats);
  if (!args.val_split.empty()) {
    datasets.eval = first_samples(create_dataset(dataset, root, args.val_split, in_chans, args.class_map, iterable),
                                  args.val_num_samples, "val-num-samples");
  }
  return datasets;
}

// --pretrained-path (timm's load_pretrained with head adaptation), else
// --pretrained (the model's default weights from the Hugging Face hub cache,
// the head kept when --num-classes is its own), then --initial-checkpoint
// (timm's load_checkpoint: EMA weights first, strict), in create_model's
// order. Unlike train.py, --pretrained-path needs no --pretrained beside it:
// there is no download to choose instead.
void load_initial_weights(const TrainArgs& args, ClassifierImpl& model, const ModelArgs& model_args) {
  if (const auto& path = args.pretrained_path; path && !path->empty()) {
    load_pretrained_file(model, *path, model_args.in_chans);
  } else if (args.pretrained) {
    load_hub_pretrained(model, args.model, model_args.in_chans, model_args.num_classes);
  }
  const std::string& checkpoint = args.initial_checkpoint;
  if (!checkpoint.empty()) {
    load_checkpoint(model, checkpoint);
    log_info("Loaded checkpoint '" + checkpoint + "'");
  }
}

// --bn-momentum / --bn-eps on every BatchNorm (layers::set_batch_norm_args).
void apply_batch_norm_args(const TrainArgs& args, torch::nn::Module& model) {
  if (!args.bn_momentum && !args.bn_eps) return;
  const std::size_t count = layers::set_batch_norm_args(model, args.bn_momentum, args.bn_eps);
  if (count == 0) {
    throw UsageError(std::string(args.bn_momentum ? "--bn-momentum" : "--bn-eps") + ": model " + in_quotes(args.model) +
                     " has no BatchNorm layers");
  }
  log_info(format("Set %s of %zu BatchNorm layers",
                  args.bn_momentum && args.bn_eps ? "momentum and eps"
                  : args.bn_momentum              ? "momentum"
                                                  : "eps",
                  count));
}

// train.py's --head-init-scale (classifier weight and bias scaled) and
// --head-init-bias (bias set), after the weights are loaded.
void apply_head_init(const TrainArgs& args, ClassifierImpl& model) {
  if (!args.head_init_scale && !args.head_init_bias) return;
  const std::string& head = model.pretrained_cfg().classifier;
  auto params = model.named_parameters();
  const at::Tensor* weight = params.find(head + ".weight");
  const at::Tensor* bias = params.find(head + ".bias");
  if (head.empty() || weight == nullptr || bias == nullptr) {
    throw UsageError(std::string(args.head_init_scale ? "--head-init-scale" : "--head-init-bias") + ": model " +
                     in_quotes(args.model) + " has no classifier weight and bias" +
                     (head.empty() ? "" : " (" + in_quotes(head + ".weight") + ")"));
  }
  const at::NoGradGuard no_grad;
  if (args.head_init_scale) {
    weight->mul_(*args.head_init_scale);
    bias->mul_(*args.head_init_scale);
  }
  if (args.head_init_bias) bias->fill_(*args.head_init_bias);
}

ModelPtr create_train_model(const TrainArgs& args, const ModelArgs& model_args) {
  ModelPtr model = create_model(args.model, model_args);
  log_info(format("Model %s created, param count:%lld", args.model.c_str(),
                  static_cast<long long>(count_parameters(*model))));
  apply_batch_norm_args(args, *model);
  load_initial_weights(args, *model, model_args);
  apply_head_init(args, *model);
  // train.py: model.set_grad_checkpointing(enable=True) after the head init;
  // a model without it refuses, naming itself.
  if (args.grad_checkpointing) model->set_grad_checkpointing(true);
  return model;
}

void convert_to_split_bn(const TrainArgs& args, torch::nn::Module& model) {
  // train.py: assert num_aug_splits > 1 or args.resplit.
  if (args.aug_splits < 2 && !args.resplit) throw UsageError("--split-bn needs --aug-splits >= 2 (or --resplit)");
  layers::convert_splitbn_model(model, std::max<int64_t>(args.aug_splits, 2));
}

// --tta N: train.py averages each N consecutive outputs of a validation
// batch, and fails (a size mismatch) at a batch that is not a multiple of N.
// Refused before training when the validation batch size, or the validation
// samples a rank gets (ShardSampler's strided share: its last batch), is not
// a multiple of N. A streamed (wds/) dataset's batches are checked as they
// come (reduce_tta), as are batches short of a skipped bad sample.
void check_tta(const TrainArgs& args, const Dataset* eval, int64_t eval_batch, const Distributed& dist) {
  if (args.tta < 2 || eval == nullptr) return;
  const std::string tta = "--tta " + std::to_string(args.tta);
  if (eval_batch % args.tta != 0) {
    throw UsageError(tta + ": the validation batch size " + std::to_string(eval_batch) + " is not a multiple of " +
                     std::to_string(args.tta) +
                     " (each group of that many consecutive outputs is averaged into one); set "
                     "--validation-batch-size (or --batch-size)");
  }
  if (dynamic_cast<const IterableDataset*>(eval) != nullptr) return;
  const auto size = static_cast<int64_t>(eval->size());
  const int64_t ranks = dist.active() ? dist.size() : 1;
  for (int64_t rank = 0; rank < ranks; ++rank) {
    const int64_t share = (size - rank + ranks - 1) / ranks;
    if (share % args.tta == 0) continue;
    throw UsageError(tta + ": the validation set has " + std::to_string(size) + " samples" +
                     (ranks > 1 ? ", " + std::to_string(share) + " of them on rank " + std::to_string(rank) : "") +
                     ", not a multiple of " + std::to_string(args.tta) +
                     ": its last batch cannot be averaged in groups of " + std::to_string(args.tta) +
                     " (timm fails there with a size mismatch)");
  }
}

// train.py's NaFlex loaders (--naflex-loader), with the model's patch size;
// the lr scales by --batch-size, as train.py's batch_size_reference.
void make_naflex_loaders(const TrainArgs& args, const Datasets& datasets, const Distributed& dist, TrainSetup& setup) {
  log_info("Using NaFlex loader");
  const std::array<int64_t, 2> patch_size = naflex_patch_size(*setup.model);
  check_patch_layout(args, *setup.model);
  setup.train_loader = make_naflex_train_loader(datasets.train, args, setup.data_config, patch_size, setup.num_classes,
                                                dist, setup.naflex_choice_patch_sizes);
  if (datasets.eval) {
    const int64_t eval_batch = args.validation_batch_size.value_or(args.batch_size);
    check_tta(args, datasets.eval.get(), eval_batch, dist);
    setup.eval_loader = make_naflex_eval_loader(datasets.eval, args, setup.data_config, patch_size, eval_batch, dist);
  }
  if (args.jpeg_dct_scale) log_jpeg_dct_scale(setup.train_loader->transform());
  // timm's NaFlexPrefetchLoader: --reprob erases whole patches (not with --no-aug).
  if (args.reprob > 0.0 && !args.no_aug) {
    PatchRandomErasingOptions erasing;
    erasing.erasing.probability = args.reprob;
    erasing.erasing.mode = args.remode;
    erasing.erasing.max_count = args.recount;
    setup.patch_erasing.emplace(erasing);
    log_info("Train batches: " + setup.patch_erasing->repr());
  }
}

void make_loaders(const TrainArgs& args, const Datasets& datasets, const Distributed& dist, TrainSetup& setup) {
  if (args.pin_mem && !dist.device.is_cuda()) {
    log_warning("--pin-mem: the device is " + dist.device.str() +
                ", so batches are not pinned (as torch's DataLoader)");
  }
  if (args.use_multi_epochs_loader) {
    log_info(
        "--use-multi-epochs-loader: timm-run's loader starts its worker threads at each epoch in microseconds, so "
        "it has no start-up to save; the samples and their order are the same with or without it");
  }
  check_train_size_flags(args);
  setup.batch_size_reference = static_cast<double>(args.batch_size);
  setup.scheduled_batches = args.train_img_sizes.has_value();
  setup.naflex = args.naflex_loader;
  if (setup.naflex) {
    make_naflex_loaders(args, datasets, dist, setup);
    return;
  }
  if (setup.scheduled_batches) {
    setup.train_loader =
        make_scheduled_train_loader(datasets.train, args, setup.data_config, dist, setup.batch_size_reference);
  } else {
    setup.train_loader =
        make_loader(datasets.train, true, create_transform(transform_args(args, setup.data_config, true)), args,
                    args.batch_size, dist);
  }
  if (datasets.eval) {
    const int64_t eval_batch = args.validation_batch_size.value_or(args.batch_size);
    check_tta(args, datasets.eval.get(), eval_batch, dist);
    setup.eval_loader = make_loader(
        datasets.eval, false, create_transform(transform_args(args, setup.data_config, false)), args, eval_batch, dist);
  }
  const Loader& train = *setup.train_loader;
  if (args.jpeg_dct_scale) log_jpeg_dct_scale(train.transform());
  if (!setup.scheduled_batches) {
    log_info("Train transform: " + train.transform().repr());
    return;
  }
  for (std::size_t choice = 0; choice < train.num_transforms(); ++choice) {
    const int64_t size = args.train_img_sizes->at(choice);
    log_info(format("Train transform (%lldx%lld): ", static_cast<long long>(size), static_cast<long long>(size)) +
             train.transform(choice).repr());
  }
}

void make_scheduler(const TrainArgs& args, TrainSetup& setup) {
  setup.eval_metric = setup.eval_loader ? args.eval_metric : "loss";
  setup.decreasing_metric = setup.eval_metric == "loss";
  setup.updates_per_epoch = updates_per_epoch(setup.train_loader->num_batches(), setup.tools.grad_accum_steps);
  setup.scheduler =
      create_scheduler(*setup.optimizer, scheduler_args(args, setup.decreasing_metric, setup.updates_per_epoch));
  log_info(
      format("Scheduled epochs: %lld (epochs + cooldown_epochs). Warmup within epochs when warmup_prefix=False. "
             "LR stepped per %s.",
             static_cast<long long>(setup.scheduler->num_epochs()), args.sched_on_updates ? "update" : "epoch"));
}

// The model as train.py prepares it: --split-bn, the device, --sync-bn, the
// step tools, --channels-last; then the loaders from its data config.
void set_up_model_and_data(const TrainArgs& args, const Config& config, Distributed& dist, const torch::Device& device,
                           TrainSetup& setup) {
  // train.py's set_fast_norm(), before the model, the teacher and the EMA
  // copy are built: their norm layers read it then.
  if (args.fast_norm) layers::set_fast_norm(true);
  // Datasets first: their class count and defaults shape the model.
  const std::string dataset = default_dataset_name(args.dataset, args.data_dir.has_value());
  const DatasetDefaults defaults = dataset_defaults(dataset);
  const int64_t in_chans = resolve_in_chans(config, defaults);
  // torchvision's save_image makes 1-channel images RGB; PIL refuses other
  // counts as JPEG. Refused here rather than at the first logged step.
  if (args.save_images && in_chans != 1 && in_chans != 3) {
    throw UsageError("--save-images: the input has " + std::to_string(in_chans) +
                     " channels; a JPEG picture takes 1 or 3");
  }
  const Datasets datasets = load_datasets(args, dataset, in_chans);
  setup.num_classes = args.num_classes.value_or(datasets.train->num_classes());
  setup.model_args = model_args(args, setup.num_classes, in_chans);
  setup.model = create_train_model(args, setup.model_args);
  setup.data_config = resolve_data_config(config, setup.model->pretrained_cfg(), defaults);
  for (const auto& line : describe_data_config(setup.data_config)) log_info(line);
  if (args.split_bn) convert_to_split_bn(args, *setup.model);
  // train.py: model.to(device=device, dtype=model_dtype), after the weights
  // were loaded in float32.
  setup.model->to(device);
  const c10::ScalarType model_dtype = model_dtype_of(args);
  if (model_dtype == at::kHalf) {
    log_warning("float16 is not recommended for training, for half precision bfloat16 is recommended.");
  }
  to_model_dtype(*setup.model, model_dtype);
  if (uses_sync_bn(args, dist)) convert_to_sync_bn(*setup.model, dist);
  setup.tools = make_step_tools(args, device, setup.num_classes);
  check_naflex_flags(args, *datasets.train);  // before a teacher is made
  if (args.channels_last) to_channels_last(*setup.model);
  setup.task = make_task(args, config, setup, defaults, device);
  log_info(setup.task->describe());
  make_loaders(args, datasets, dist, setup);
}

// The optimizer, the EMA and DDP (last, as train.py wraps it), the scheduler.
void set_up_optimization(const TrainArgs& args, Distributed& dist, TrainSetup& setup) {
  // train.py: the effective global batch is B x W x A (B the policy-average
  // batch size with --train-img-sizes).
  setup.lr =
      resolve_lr(args, setup.batch_size_reference * dist.size() * static_cast<double>(setup.tools.grad_accum_steps));
  setup.optimizer = setup.task->create_optimizer(args.model, optimizer_args(args, setup.lr));
  log_info("Created " + setup.optimizer->describe());
  setup.tools.ema = make_model_ema(args, setup.model_args, setup.model, setup.tools.model_dtype);
  // timm's task EMA covers the whole trainable module: a projection too.
  if (setup.tools.ema) setup.tools.ema->follow_task_state(setup.task->task_state());
  const bool sync_bn = uses_sync_bn(args, dist);
  if (dist.active()) {
    setup.task->prepare_distributed([&](torch::nn::Module& trainable) { wrap_ddp(args, trainable, sync_bn, dist); });
  }
  setup.dist_bn = dist_bn_mode(args, dist, sync_bn);
  make_scheduler(args, setup);
}

// --resume, or with --auto-resume the newest checkpoint in the output
// folder; empty for none.
std::filesystem::path checkpoint_to_resume(const TrainArgs& args, const std::filesystem::path& output_dir) {
  if (!args.resume.empty() || !args.auto_resume) return args.resume;
  if (auto newest = newest_checkpoint(output_dir)) return *newest;
  return {};
}

// Why a recovery checkpoint's position in its epoch does not fit this run
// (another world size, batch count or --grad-accum-steps: other batches);
// empty when it fits.
std::string position_misfit(const EpochPosition& position, const TrainSetup& setup, const Distributed& dist) {
  const auto num_batches = static_cast<int64_t>(setup.train_loader->num_batches());
  const int64_t expected_batches = std::min(position.updates_done * setup.tools.grad_accum_steps, num_batches);
  if (position.train_loss.size(0) != dist.size()) {
    return format("it was written by %lld ranks, this run has %d", static_cast<long long>(position.train_loss.size(0)),
                  dist.size());
  }
  if (position.updates_per_epoch != setup.updates_per_epoch || position.batches_done != expected_batches) {
    return format(
        "its epoch had %lld updates, %lld of them done in %lld batches; this run's epoch has %lld updates of %lld "
        "batches with --grad-accum-steps %lld (the batch size, the accumulation or the dataset differ)",
        static_cast<long long>(position.updates_per_epoch), static_cast<long long>(position.updates_done),
        static_cast<long long>(position.batches_done), static_cast<long long>(setup.updates_per_epoch),
        static_cast<long long>(num_batches), static_cast<long long>(setup.tools.grad_accum_steps));
  }
  return {};
}

// The epoch to start at (0 without a checkpoint), as train.py: --start-epoch
// wins over the checkpoint's. A recovery checkpoint that holds its position
// in its epoch (and fits this run) resumes that epoch: its epoch, with the
// position in setup.resume_position. In a distributed run rank 0 chooses the
// checkpoint and broadcasts its path; every rank resumes from it, and either
// all succeed at the same epoch and position or all stop with the error of
// the rank that failed (a rank cannot read a folder that is not shared, say),
// never some training from other epochs than the rest.
int64_t start_epoch_of(const TrainArgs& args, const std::filesystem::path& output_dir, TrainSetup& setup,
                       const Distributed& dist, const torch::Device& device) {
  if (args.resume.empty() && args.auto_resume && !args.experiment_is_explicit) {
    throw UsageError("--auto-resume needs --experiment: without it every run writes to a new folder");
  }
  std::string path;
  if (!dist.active() || dist.is_primary()) path = checkpoint_to_resume(args, output_dir).string();
  // On the training device, as the evaluation's collectives (NCCL moves only
  // CUDA tensors).
  if (dist.active()) dist::broadcast_string(dist.group->comm(), path, 0, device);
  if (path.empty()) return args.start_epoch.value_or(0);

  auto resume = [&] {
    ResumeTargets targets{*setup.model};
    targets.rank = dist.world.rank;
    targets.world_size = dist.size();
    targets.device = dist.device;
    if (!args.no_resume_opt) {
      targets.optimizer = setup.optimizer.get();
      targets.scaler = setup.tools.scaler.get();
    }
    targets.ema = setup.tools.ema.get();
    targets.load_task_state = [&setup](const NamedTensors& state) { setup.task->load_task_state(state); };
    ResumePoint point = resume_checkpoint_at(path, targets);
    if (point.position) {
      const std::string misfit = position_misfit(*point.position, setup, dist);
      const std::string where =
          format("%s was written after update %lld of epoch %lld", path.c_str(),
                 static_cast<long long>(point.position->updates_done - 1), static_cast<long long>(point.epoch));
      if (args.start_epoch) {
        log_info(where + "; --start-epoch " + std::to_string(*args.start_epoch) + " starts an epoch at its beginning");
        point = ResumePoint{point.epoch + 1};
      } else if (!misfit.empty()) {
        // The same on every rank: said once.
        if (dist.is_primary()) log_warning(where + ", but " + misfit + ": resuming at the next epoch, as timm");
        point = ResumePoint{point.epoch + 1};
      }
    }
    // Within an epoch the ranks' BatchNorm statistics differ: each gets its own.
    if (point.position) {
      restore_rank_buffers(point.position->rank_buffers, *setup.model, setup.tools.ema.get(), dist, path);
    }
    setup.resume_position = std::move(point.position);
    return point.epoch;
  };
  int64_t resume_epoch = 0;
  if (!dist.active()) {
    resume_epoch = resume();
  } else {
    try {
      resume_epoch = dist::agree_on(dist.group->comm(), "resuming from " + in_quotes(path), resume, device);
      // Every rank read the same file: the same position, or all stop.
      const int64_t updates_done = setup.resume_position ? setup.resume_position->updates_done : 0;
      dist::agree_on(
          dist.group->comm(), "the position in epoch " + std::to_string(resume_epoch) + " of " + in_quotes(path),
          [updates_done] { return updates_done; }, device);
    } catch (const Error& e) {
      throw Error(std::string(e.what()) +
                  " (every rank resumes from the checkpoint rank 0 chose: it must be on a file system that all "
                  "ranks can read)");
    }
  }
  return args.start_epoch.value_or(resume_epoch);
}

}  // namespace

TrainSetup set_up_training(const TrainArgs& args, const Config& config, Distributed& dist,
                           const torch::Device& device) {
  // timm seeds seed + rank: augmentation differs per rank; DDP's start-up
  // broadcast makes the initial weights rank 0's.
  torch::manual_seed(static_cast<uint64_t>(args.seed + dist.world.rank));
  TrainSetup setup;
  set_up_model_and_data(args, config, dist, device, setup);
  set_up_optimization(args, dist, setup);
  return setup;
}

int64_t resume_if_asked(const TrainArgs& args, const std::filesystem::path& output_dir, TrainSetup& setup,
                        const Distributed& dist, const torch::Device& device) {
  const int64_t start_epoch = start_epoch_of(args, output_dir, setup, dist, device);
  // Within the epoch (a recovery checkpoint's position): the updates done,
  // as the loop stepped the schedule after each.
  const int64_t updates_done = setup.resume_position ? setup.resume_position->updates_done : 0;
  if (start_epoch > 0 || updates_done > 0) {
    if (args.sched_on_updates) {
      setup.scheduler->step_update(start_epoch * setup.updates_per_epoch + updates_done, std::nullopt);
    } else if (start_epoch > 0) {
      setup.scheduler->step(start_epoch, std::nullopt);
    }
  }
  return start_epoch;
}

// The schedule's end, or earlier with --stop-after-epochs.
int64_t last_epoch_of_run(const TrainArgs& args, int64_t start_epoch, int64_t num_epochs) {
  const auto& stop_after = args.stop_after_epochs;
  if (!stop_after) return num_epochs;
  if (*stop_after < 1) throw UsageError("--stop-after-epochs " + std::to_string(*stop_after) + ": expected 1 or more");
  if (start_epoch + *stop_after < num_epochs) {
    log_info(format("Stopping after epoch %lld of %lld (--stop-after-epochs %lld).",
                    static_cast<long long>(start_epoch + *stop_after - 1), static_cast<long long>(num_epochs),
                    static_cast<long long>(*stop_after)));
  }
  return std::min(num_epochs, start_epoch + *stop_after);
}

}  // namespace timm::train_detail
