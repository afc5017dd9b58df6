#include "train_args.hpp"

#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "timm/base/error.hpp"
#include "timm/train/model_dtype_flag.hpp"

namespace timm::train_detail {
namespace {

// One function per group of the flag table, in its order.

// The flags of `names` set away from their default (as check_implemented
// compares), as "--name", in the order given.
std::vector<std::string> flags_set(const Config& config, std::initializer_list<std::string_view> names) {
  std::vector<std::string> set;
  for (const std::string_view name : names) {
    const FlagSpec* flag = find_flag(name);
    if (flag != nullptr && config.value(flag->dest) != flag->default_value) set.push_back("--" + std::string(name));
  }
  return set;
}

void read_scheduled_sizes(const Config& config, TrainArgs& args) {
  args.train_img_sizes = config.get_optional<std::vector<int64_t>>("train_img_sizes");
  args.train_batch_sizes = config.get_optional<std::vector<int64_t>>("train_batch_sizes");
  args.train_size_probs = config.get_optional<std::vector<double>>("train_size_probs");
  args.train_size_schedule = config.get<std::string>("train_size_schedule");
  args.train_size_schedule_spread = config.get<double>("train_size_schedule_spread");
  args.train_size_random_mix = config.get<double>("train_size_random_mix");
  args.train_batches_per_epoch = config.get_optional<int64_t>("train_batches_per_epoch");
  args.variable_batch_loss_scale = config.get<std::string>("variable_batch_loss_scale");
  args.train_size_flags_set =
      flags_set(config, {"train-batch-sizes", "train-size-probs", "train-size-schedule", "train-size-schedule-spread",
                         "train-size-random-mix", "train-batches-per-epoch", "variable-batch-loss-scale"});
}

void read_naflex(const Config& config, TrainArgs& args) {
  args.naflex_loader = config.get<bool>("naflex_loader");
  args.naflex_train_seq_lens = config.get<std::vector<int64_t>>("naflex_train_seq_lens");
  args.naflex_max_seq_len = config.get<int64_t>("naflex_max_seq_len");
  args.naflex_loss_scale = config.get<std::string>("naflex_loss_scale");
  args.naflex_patch_sizes = config.get_optional<std::vector<int64_t>>("naflex_patch_sizes");
  args.naflex_patch_size_probs = config.get_optional<std::vector<double>>("naflex_patch_size_probs");
  args.naflex_patchify_channels_first = config.get<bool>("naflex_patchify_channels_first");
  args.naflex_flags_set =
      flags_set(config, {"naflex-train-seq-lens", "naflex-max-seq-len", "naflex-loss-scale", "naflex-patch-sizes",
                         "naflex-patch-size-probs", "naflex-patchify-channels-first"});
}

void read_dataset_and_model(const Config& config, TrainArgs& args) {
  args.data_dir = config.get_optional<std::string>("data_dir");
  args.dataset = config.get<std::string>("dataset");
  args.class_map = config.get<std::string>("class_map");
  args.train_split = config.get<std::string>("train_split");
  args.val_split = config.get<std::string>("val_split");
  args.train_num_samples = config.get_optional<int64_t>("train_num_samples");
  args.val_num_samples = config.get_optional<int64_t>("val_num_samples");
  args.input_key = config.get_optional<std::string>("input_key");
  args.target_key = config.get_optional<std::string>("target_key");
  args.epoch_repeats = config.get<double>("epoch_repeats");

  args.model = config.get<std::string>("model");
  args.pretrained = config.get<bool>("pretrained");
  args.bn_momentum = config.get_optional<double>("bn_momentum");
  args.bn_eps = config.get_optional<double>("bn_eps");
  args.head_init_scale = config.get_optional<double>("head_init_scale");
  args.head_init_bias = config.get_optional<double>("head_init_bias");
  args.pretrained_path = config.get_optional<std::string>("pretrained_path");
  args.initial_checkpoint = config.get<std::string>("initial_checkpoint");
  args.resume = config.get<std::string>("resume");
  args.no_resume_opt = config.get<bool>("no_resume_opt");
  args.num_classes = config.get_optional<int64_t>("num_classes");
  args.gp = config.get_optional<std::string>("gp");
  args.batch_size = config.get<int64_t>("batch_size");
  args.validation_batch_size = config.get_optional<int64_t>("validation_batch_size");
  args.channels_last = config.get<bool>("channels_last");
  args.grad_accum_steps = config.get<int64_t>("grad_accum_steps");
  args.grad_checkpointing = config.get<bool>("grad_checkpointing");
  args.fast_norm = config.get<bool>("fast_norm");
  args.model_kwargs = config.get_kwargs("model_kwargs");
}

void read_device_and_optimizer(const Config& config, TrainArgs& args) {
  args.device = config.get<std::string>("device");
  args.device_is_explicit = config.is_explicit("device");
  args.amp = config.get<bool>("amp");
  args.amp_dtype = config.get<std::string>("amp_dtype");
  // train.py asserts the choices, then that AMP has float32 weights; refused
  // here, before any data or model is loaded.
  args.model_dtype = config.get_optional<std::string>("model_dtype");
  if (args.model_dtype) {
    check_model_dtype_name(*args.model_dtype);
    check_amp_with_model_dtype(args.amp, *args.model_dtype);
  }
  args.no_ddp_bb = config.get<bool>("no_ddp_bb");
  args.synchronize_step = config.get<bool>("synchronize_step");

  args.opt = config.get<std::string>("opt");
  args.opt_eps = config.get_optional<double>("opt_eps");
  args.opt_betas = config.get_optional<std::vector<double>>("opt_betas");
  args.momentum = config.get<double>("momentum");
  args.weight_decay = config.get<double>("weight_decay");
  args.clip_grad = config.get_optional<double>("clip_grad");
  args.clip_mode = config.get<std::string>("clip_mode");
  args.layer_decay = config.get_optional<double>("layer_decay");
  args.layer_decay_min_scale = config.get_optional<double>("layer_decay_min_scale");
  args.layer_decay_no_opt_scale = config.get_optional<double>("layer_decay_no_opt_scale");
  args.opt_kwargs = config.get_kwargs("opt_kwargs");
}

void read_schedule(const Config& config, TrainArgs& args) {
  args.sched = config.get<std::string>("sched");
  args.sched_on_updates = config.get<bool>("sched_on_updates");
  args.lr = config.get_optional<double>("lr");
  args.lr_base = config.get<double>("lr_base");
  args.lr_base_size = config.get<int64_t>("lr_base_size");
  args.lr_base_scale = config.get<std::string>("lr_base_scale");
  args.lr_noise = config.get_optional<std::vector<double>>("lr_noise");
  args.lr_noise_pct = config.get<double>("lr_noise_pct");
  args.lr_noise_std = config.get<double>("lr_noise_std");
  args.lr_cycle_mul = config.get<double>("lr_cycle_mul");
  args.lr_cycle_decay = config.get<double>("lr_cycle_decay");
  args.lr_cycle_limit = config.get<int64_t>("lr_cycle_limit");
  args.lr_k_decay = config.get<double>("lr_k_decay");
  args.lr_decay_fn = config.get_optional<std::string>("lr_decay_fn");
  args.lr_stable_timescale = config.get_optional<double>("lr_stable_timescale");
  args.warmup_lr = config.get<double>("warmup_lr");
  args.min_lr = config.get<double>("min_lr");
  args.epochs = config.get<int64_t>("epochs");
  args.start_epoch = config.get_optional<int64_t>("start_epoch");
  args.decay_milestones = config.get<std::vector<int64_t>>("decay_milestones");
  args.decay_epochs = config.get<double>("decay_epochs");
  args.warmup_epochs = config.get<int64_t>("warmup_epochs");
  args.warmup_prefix = config.get<bool>("warmup_prefix");
  args.cooldown_epochs = config.get<int64_t>("cooldown_epochs");
  args.patience_epochs = config.get<int64_t>("patience_epochs");
  args.decay_rate = config.get<double>("decay_rate");
}

void read_augmentation(const Config& config, TrainArgs& args) {
  args.no_aug = config.get<bool>("no_aug");
  args.train_crop_mode = config.get_optional<std::string>("train_crop_mode");
  args.scale = config.get<std::vector<double>>("scale");
  args.ratio = config.get<std::vector<double>>("ratio");
  args.hflip = config.get<double>("hflip");
  args.vflip = config.get<double>("vflip");
  args.color_jitter = config.get_optional<double>("color_jitter");
  args.color_jitter_prob = config.get_optional<double>("color_jitter_prob");
  args.grayscale_prob = config.get_optional<double>("grayscale_prob");
  args.gaussian_blur_prob = config.get_optional<double>("gaussian_blur_prob");
  args.aa = config.get_optional<std::string>("aa");
  args.aug_repeats = config.get<double>("aug_repeats");
  args.aug_splits = config.get<int64_t>("aug_splits");
  args.jsd_loss = config.get<bool>("jsd_loss");
  args.bce_loss = config.get<bool>("bce_loss");
  args.bce_sum = config.get<bool>("bce_sum");
  args.bce_target_thresh = config.get_optional<double>("bce_target_thresh");
  args.bce_pos_weight = config.get_optional<double>("bce_pos_weight");
  args.reprob = config.get<double>("reprob");
  args.remode = config.get<std::string>("remode");
  args.recount = config.get<int64_t>("recount");
  args.resplit = config.get<bool>("resplit");
  args.mixup = config.get<double>("mixup");
  args.cutmix = config.get<double>("cutmix");
  args.cutmix_minmax = config.get_optional<std::vector<double>>("cutmix_minmax");
  args.mixup_prob = config.get<double>("mixup_prob");
  args.mixup_switch_prob = config.get<double>("mixup_switch_prob");
  args.mixup_mode = config.get<std::string>("mixup_mode");
  args.mixup_off_epoch = config.get<int64_t>("mixup_off_epoch");
  args.smoothing = config.get<double>("smoothing");
  args.train_interpolation = config.get<std::string>("train_interpolation");
  args.drop = config.get<double>("drop");
  args.drop_path = config.get_optional<double>("drop_path");
  args.drop_connect = config.get_optional<double>("drop_connect");
  if (args.drop_connect && args.drop_path) {
    throw UsageError("--drop-connect (deprecated) and --drop-path both set the drop path rate; give --drop-path only");
  }
  args.drop_block = config.get_optional<double>("drop_block");
}

void read_batch_norm_and_ema(const Config& config, TrainArgs& args) {
  args.sync_bn = config.get<bool>("sync_bn");
  args.dist_bn = config.get<std::string>("dist_bn");
  args.split_bn = config.get<bool>("split_bn");

  args.model_ema = config.get<bool>("model_ema");
  args.model_ema_force_cpu = config.get<bool>("model_ema_force_cpu");
  args.model_ema_decay = config.get<double>("model_ema_decay");
  args.model_ema_warmup = config.get<bool>("model_ema_warmup");
}

void read_misc(const Config& config, TrainArgs& args) {
  args.seed = config.get<int64_t>("seed");
  args.log_interval = config.get<int64_t>("log_interval");
  args.val_interval = config.get<int64_t>("val_interval");
  args.recovery_interval = config.get<int64_t>("recovery_interval");
  args.checkpoint_hist = config.get<int64_t>("checkpoint_hist");
  args.workers = config.get<int64_t>("workers");
  args.pin_mem = config.get<bool>("pin_mem");
  args.kd_model_name = config.get_optional<std::string>("kd_model_name");
  args.kd_distill_type = config.get<std::string>("kd_distill_type");
  args.kd_loss_type = config.get<std::string>("kd_loss_type");
  args.distill_loss_weight = config.get_optional<double>("distill_loss_weight");
  args.task_loss_weight = config.get_optional<double>("task_loss_weight");
  args.kd_temperature = config.get<double>("kd_temperature");
  args.kd_student_feature_dim = config.get_optional<int64_t>("kd_student_feature_dim");
  args.kd_teacher_feature_dim = config.get_optional<int64_t>("kd_teacher_feature_dim");
  args.kd_token_distill_type = config.get<std::string>("kd_token_distill_type");
  args.kd_pretrained_path = config.get_optional<std::string>("kd_pretrained_path");
  args.input_img_mode = config.get_optional<std::string>("input_img_mode");
  args.worker_seeding = config.get<std::string>("worker_seeding");
  if (args.worker_seeding != "all" && args.worker_seeding != "part") {
    throw UsageError("--worker-seeding " + in_quotes(args.worker_seeding) + ": expected 'all' or 'part'");
  }
  args.output = config.get<std::string>("output");
  args.experiment = config.get<std::string>("experiment");
  args.experiment_is_explicit = config.is_explicit("experiment");
  args.eval_metric = config.get<std::string>("eval_metric");
  args.tta = config.get<int64_t>("tta");
  if (args.tta < 0) throw UsageError("--tta " + std::to_string(args.tta) + ": expected 0 (none) or more");
  args.use_multi_epochs_loader = config.get<bool>("use_multi_epochs_loader");
  if (args.use_multi_epochs_loader && config.get<bool>("naflex_loader")) {
    throw UsageError("--use-multi-epochs-loader is not supported with --naflex-loader.");  // train.py's words
  }
  args.save_images = config.get<bool>("save_images");

  args.stop_after_epochs = config.get_optional<int64_t>("stop_after_epochs");
  args.auto_resume = config.get<bool>("auto_resume");
  args.log_tensorboard = config.get<bool>("log_tensorboard");
  args.jpeg_dct_scale = config.get<bool>("jpeg_dct_scale");
  args.dist_backend = config.get<std::string>("dist_backend");
  args.dist_timeout = config.get<int64_t>("dist_timeout");
  args.ddp_bucket_cap_mb = config.get<double>("ddp_bucket_cap_mb");
  args.ddp_find_unused_parameters = config.get<bool>("ddp_find_unused_parameters");
}

}  // namespace

TrainArgs train_args_from_config(const Config& config) {
  TrainArgs args;
  read_dataset_and_model(config, args);
  read_device_and_optimizer(config, args);
  read_schedule(config, args);
  read_augmentation(config, args);
  read_batch_norm_and_ema(config, args);
  read_misc(config, args);
  read_scheduled_sizes(config, args);
  read_naflex(config, args);
  return args;
}

}  // namespace timm::train_detail
