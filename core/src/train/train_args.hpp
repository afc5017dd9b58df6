// Internal: the flags the trainer reads, typed and read once.
//
// train_args_from_config() is the only code in train/ that reads a Config by
// key; the trainer's functions take a TrainArgs. Field names are the flags'
// dest names (--batch-size: batch_size), and types and defaults are the flag
// table's (core/src/config/flags.cpp): a flag the trainer reads as possibly
// None is a std::optional, as Config::get_optional gives it. The initialisers
// below only avoid indeterminate values: the defaults are the flag table's,
// through the Config. A new flag the trainer reads gets a field here and a
// line in train_args_from_config().
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "timm/config/config.hpp"

namespace timm::train_detail {

struct TrainArgs {
  // Dataset parameters.
  std::optional<std::string> data_dir;       // none and no --dataset: Fashion-MNIST
  std::string dataset;                       // "<type>/<name>"; empty: from the folder
  std::string class_map;                     // --class-map file; empty: none
  std::string train_split;                   // "train"
  std::string val_split;                     // "validation"; empty: no evaluation
  std::optional<int64_t> train_num_samples;  // keep the first N train samples
  std::optional<int64_t> val_num_samples;    // keep the first N validation samples
  std::optional<std::string> input_key;      // wds/: the image fields ('jpg;png;webp')
  std::optional<std::string> target_key;     // wds/: the json field of the target; none: .cls
  double epoch_repeats = 0;                  // wds/: passes over the train split per epoch

  // Model parameters.
  std::string model;                             // registry name, "resnet50"
  bool pretrained = false;                       // timm's default weights, from the hub cache
  std::optional<double> bn_momentum;             // every BatchNorm's momentum, when set
  std::optional<double> bn_eps;                  // every BatchNorm's eps, when set
  std::optional<double> head_init_scale;         // classifier weight and bias scaled by it
  std::optional<double> head_init_bias;          // classifier bias set to it
  std::optional<std::string> pretrained_path;    // weights loaded with head adaptation
  std::string initial_checkpoint;                // weights loaded strictly; empty: none
  std::string resume;                            // checkpoint to resume; empty: none
  bool no_resume_opt = false;                    // resume the model only
  std::optional<int64_t> num_classes;            // none: the dataset's
  std::optional<std::string> gp;                 // global pool; none: the model's
  int64_t batch_size = 0;                        // per process
  std::optional<int64_t> validation_batch_size;  // none: batch_size
  bool channels_last = false;
  int64_t grad_accum_steps = 1;
  bool grad_checkpointing = false;  // model.set_grad_checkpointing(true)
  bool fast_norm = false;           // timm's set_fast_norm() before any model is built
  std::map<std::string, std::string> model_kwargs;

  // Device parameters.
  std::string device;               // "cuda", "cpu", "cuda:1"
  bool device_is_explicit = false;  // given, so a missing CUDA is an error
  bool amp = false;
  std::string amp_dtype;  // "float16" or "bfloat16"
  // --model-dtype: the weights' and the input batches' dtype, "float32",
  // "float16" or "bfloat16" (checked when read, with train.py's rule beside
  // --amp); none: float32.
  std::optional<std::string> model_dtype;
  bool no_ddp_bb = false;  // DDP without buffer broadcast
  // torch.cuda.synchronize() after each optimizer update, before the step
  // time is read (CUDA only; nothing on the CPU, as train.py).
  bool synchronize_step = false;

  // Optimizer parameters.
  std::string opt;  // registry name, "sgd"
  std::optional<double> opt_eps;
  std::optional<std::vector<double>> opt_betas;
  double momentum = 0.0;
  double weight_decay = 0.0;
  std::optional<double> clip_grad;  // none: no clipping
  std::string clip_mode;            // "norm", "value" or "agc"
  std::optional<double> layer_decay;
  std::optional<double> layer_decay_min_scale;
  std::optional<double> layer_decay_no_opt_scale;
  std::map<std::string, std::string> opt_kwargs;

  // Learning rate schedule parameters.
  std::string sched;              // registry name, "cosine"
  bool sched_on_updates = false;  // step per update instead of per epoch
  std::optional<double> lr;       // none or 0: from lr_base
  double lr_base = 0.0;
  int64_t lr_base_size = 0;
  std::string lr_base_scale;  // "linear", "sqrt"; empty: the optimizer's
  std::optional<std::vector<double>> lr_noise;
  double lr_noise_pct = 0.0;
  double lr_noise_std = 0.0;
  double lr_cycle_mul = 0.0;
  double lr_cycle_decay = 0.0;
  int64_t lr_cycle_limit = 0;
  double lr_k_decay = 0.0;
  std::optional<std::string> lr_decay_fn;
  std::optional<double> lr_stable_timescale;
  double warmup_lr = 0.0;
  double min_lr = 0.0;
  int64_t epochs = 0;
  std::optional<int64_t> start_epoch;  // overrides the resumed epoch
  std::vector<int64_t> decay_milestones;
  double decay_epochs = 0.0;
  int64_t warmup_epochs = 0;
  bool warmup_prefix = false;
  int64_t cooldown_epochs = 0;
  int64_t patience_epochs = 0;
  double decay_rate = 0.0;

  // Augmentation and regularization parameters.
  bool no_aug = false;
  std::optional<std::string> train_crop_mode;
  std::vector<double> scale;  // random resized crop's area range
  std::vector<double> ratio;  // random resized crop's aspect range
  double hflip = 0.0;
  double vflip = 0.0;
  std::optional<double> color_jitter;
  std::optional<double> color_jitter_prob;   // RandomApply's p around colour jitter
  std::optional<double> grayscale_prob;      // RandomGrayscale's p
  std::optional<double> gaussian_blur_prob;  // RandomApply's p around GaussianBlur
  std::optional<std::string> aa;             // auto-augment policy
  double aug_repeats = 0.0;                  // RepeatAugSampler's repeats (distributed)
  int64_t aug_splits = 0;
  bool jsd_loss = false;
  bool bce_loss = false;
  bool bce_sum = false;
  std::optional<double> bce_target_thresh;
  std::optional<double> bce_pos_weight;
  double reprob = 0.0;  // random erasing
  std::string remode;
  int64_t recount = 0;
  bool resplit = false;
  double mixup = 0.0;   // alpha
  double cutmix = 0.0;  // alpha
  std::optional<std::vector<double>> cutmix_minmax;
  double mixup_prob = 0.0;
  double mixup_switch_prob = 0.0;
  std::string mixup_mode;
  int64_t mixup_off_epoch = 0;  // 0: never off
  double smoothing = 0.0;       // label smoothing
  std::string train_interpolation;
  double drop = 0.0;
  std::optional<double> drop_path;
  // Deprecated in train.py (older timm's drop_connect_rate): with no
  // --drop-path, the drop path rate, with a warning; both: a UsageError.
  std::optional<double> drop_connect;
  std::optional<double> drop_block;  // passed to the model as drop_block_rate, as train.py

  // Scheduled input sizes (train.py's scheduled resolution loader).
  std::optional<std::vector<int64_t>> train_img_sizes;    // none: one input size
  std::optional<std::vector<int64_t>> train_batch_sizes;  // per size; none: --batch-size each
  std::optional<std::vector<double>> train_size_probs;    // base weights; none: uniform
  std::string train_size_schedule;                        // "constant" or "progressive"
  double train_size_schedule_spread = 0.0;
  double train_size_random_mix = 0.0;
  std::optional<int64_t> train_batches_per_epoch;  // none: from the schedule
  std::string variable_batch_loss_scale;           // "none", "sqrt" or "linear"
  // The flags of that group other than --train-img-sizes whose value is not
  // their default ("--train-batch-sizes", ...): timm ignores them without
  // --train-img-sizes (and the spread and mix with a constant schedule); we
  // refuse them there.
  std::vector<std::string> train_size_flags_set;

  // NaFlex (train.py's --naflex-loader): batches of patches of images sized
  // to sequence lengths, for a model that takes patches.
  bool naflex_loader = false;
  std::vector<int64_t> naflex_train_seq_lens;  // the training sequence lengths
  int64_t naflex_max_seq_len = 576;            // the evaluation's
  std::string naflex_loss_scale;               // "none", "sqrt" or "linear"
  // Variable patch sizes: the choices and their weights (none: uniform);
  // none: the model's patch size.
  std::optional<std::vector<int64_t>> naflex_patch_sizes;
  std::optional<std::vector<double>> naflex_patch_size_probs;
  // Patches laid out (C, Ph, Pw) instead of (Ph, Pw, C); the model must take them so.
  bool naflex_patchify_channels_first = false;
  // The group's other flags set away from their default: timm ignores them
  // without --naflex-loader, we refuse them there.
  std::vector<std::string> naflex_flags_set;

  // Batch norm parameters.
  bool sync_bn = false;
  std::string dist_bn;  // "broadcast", "reduce" or ""
  bool split_bn = false;

  // Model EMA parameters.
  bool model_ema = false;
  bool model_ema_force_cpu = false;
  double model_ema_decay = 0.0;
  bool model_ema_warmup = false;

  // Knowledge distillation (the top-level flags of train.py).
  std::optional<std::string> kd_model_name;  // the teacher; none: a classification task
  std::string kd_distill_type;               // "logit", "feature" or "token"
  std::string kd_loss_type;                  // "kl"
  std::optional<double> distill_loss_weight;
  std::optional<double> task_loss_weight;
  double kd_temperature = 0.0;
  std::optional<int64_t> kd_student_feature_dim;  // none: detected
  std::optional<int64_t> kd_teacher_feature_dim;  // none: detected
  std::string kd_token_distill_type;              // "soft" or "hard"
  // timm-cpp's: the teacher's weights (timm's pretrained_path overlay); none:
  // its default weights from the Hugging Face hub cache.
  std::optional<std::string> kd_pretrained_path;

  // Miscellaneous parameters.
  int64_t seed = 0;
  int64_t log_interval = 0;       // in updates
  int64_t val_interval = 0;       // in epochs
  int64_t recovery_interval = 0;  // in updates; 0: no recovery checkpoints
  int64_t checkpoint_hist = 0;
  int64_t workers = 0;                        // loader threads
  std::optional<std::string> input_img_mode;  // 'RGB' or 'L'; none: from --in-chans
  bool pin_mem = false;                       // pinned host batches, for a CUDA device
  // timm's worker seeding, "all" or "part": our loader seeds every sample
  // from (seed, epoch, index), whatever the worker, so both mean the same.
  std::string worker_seeding = "all";
  std::string output;                   // parent of the experiment folder
  std::string experiment;               // the folder's name; empty: a dated one
  bool experiment_is_explicit = false;  // given (--auto-resume needs it)
  std::string eval_metric;              // "top1", "top5" or "loss"
  // train.py's validate(): each N consecutive outputs of a batch averaged,
  // the first target of each N kept; 0 or 1: none.
  int64_t tta = 0;
  // timm's MultiEpochsDataLoader; our loader's threads start per epoch at no
  // cost, so accepted with a log line and otherwise the same.
  bool use_multi_epochs_loader = false;
  // The input batch as <output>/train-batch-<batch_idx>.jpg at each logged
  // step (primary rank), as torchvision's save_image.
  bool save_images = false;

  // timm-cpp's own.
  std::optional<int64_t> stop_after_epochs;
  bool auto_resume = false;
  std::string dist_backend;  // empty: from the device
  int64_t dist_timeout = 0;  // seconds
  double ddp_bucket_cap_mb = 0.0;
  bool ddp_find_unused_parameters = false;
  bool log_tensorboard = false;  // event files in the output folder
  // The train loader's JPEG DCT-domain downscaling (LoaderOptions::jpeg_dct_scale).
  bool jpeg_dct_scale = false;
};

// Reads every field from `config`. Throws timm::Error when a value the
// trainer needs is None or of another type, which the parsers never produce.
TrainArgs train_args_from_config(const Config& config);

}  // namespace timm::train_detail
