// The flag table: every train.py flag with timm's name, type, default and
// help (timm-spec §1.2), then the flags of timm-cpp.
#include <algorithm>
#include <array>
#include <map>
#include <string_view>

#include "timm/base/error.hpp"
#include "timm/config/config.hpp"

namespace timm {
namespace {

// The tables are laid out by hand, one flag per entry.
// clang-format off

// The flags this port implements. Any other flag is accepted by the parsers
// but check_implemented() refuses it unless it keeps its default, so a run
// never silently ignores a setting. Flip entries here as features land.
constexpr std::array kImplementedFlags = {
    // Dataset and model.
    "data", "data-dir", "dataset", "class-map", "train-split", "val-split", "train-num-samples",
    "val-num-samples", "model", "pretrained", "pretrained-path", "initial-checkpoint", "num-classes", "gp",
    "bn-momentum", "bn-eps", "head-init-scale", "head-init-bias", "pin-mem", "worker-seeding",
    "input-img-mode", "input-key", "target-key", "epoch-repeats",
    "img-size", "in-chans", "input-size", "crop-pct", "mean", "std", "interpolation",
    "batch-size", "validation-batch-size", "channels-last", "model-kwargs", "grad-checkpointing", "fast-norm",
    // Device.
    "device", "amp-dtype", "model-dtype", "local_rank", "synchronize-step",
    // Optimizer.
    "opt", "opt-eps", "opt-betas", "momentum", "weight-decay", "opt-kwargs", "clip-mode",
    "layer-decay", "layer-decay-min-scale", "layer-decay-no-opt-scale",
    // Schedule.
    "sched", "sched-on-updates", "lr", "lr-base", "lr-base-size", "lr-base-scale", "lr-noise",
    "lr-noise-pct", "lr-noise-std", "lr-cycle-mul", "lr-cycle-decay", "lr-cycle-limit",
    "lr-k-decay", "lr-decay-fn", "lr-stable-timescale", "warmup-lr", "min-lr", "epochs", "decay-milestones", "decay-epochs",
    "warmup-epochs", "warmup-prefix", "cooldown-epochs", "patience-epochs", "decay-rate",
    // Augmentation and regularization.
    "no-aug", "train-crop-mode", "scale", "ratio", "hflip", "vflip", "color-jitter", "color-jitter-prob",
    "grayscale-prob", "gaussian-blur-prob", "aa", "reprob", "remode",
    "recount", "resplit", "aug-splits", "jsd-loss", "mixup", "cutmix", "cutmix-minmax", "mixup-prob",
    "mixup-switch-prob", "mixup-mode", "mixup-off-epoch", "smoothing",
    "train-interpolation", "drop", "drop-connect", "drop-path", "drop-block",
    // Scheduled input sizes.
    "train-img-sizes", "train-batch-sizes", "train-size-probs", "train-size-schedule",
    "train-size-schedule-spread", "train-size-random-mix", "train-batches-per-epoch",
    "variable-batch-loss-scale",
    // NaFlex patch batches.
    "naflex-loader", "naflex-train-seq-lens", "naflex-max-seq-len", "naflex-loss-scale", "naflex-patch-sizes",
    "naflex-patch-size-probs", "naflex-patchify-channels-first",
    // Batch norm and EMA.
    "dist-bn", "model-ema", "model-ema-decay", "model-ema-warmup", "model-ema-force-cpu",
    // Training step and loss.
    "amp", "clip-grad", "grad-accum-steps", "resume", "no-resume-opt", "start-epoch", "checkpoint-hist",
    "recovery-interval", "auto-resume", "stop-after-epochs", "bce-loss", "bce-sum", "bce-target-thresh", "bce-pos-weight",
    // Knowledge distillation.
    "kd-model-name", "kd-distill-type", "kd-loss-type", "distill-loss-weight", "task-loss-weight",
    "kd-temperature", "kd-student-feature-dim", "kd-teacher-feature-dim", "kd-token-distill-type",
    "kd-pretrained-path",
    // Miscellaneous.
    "seed", "log-interval", "val-interval", "workers", "no-prefetcher", "output", "experiment",
    "eval-metric", "tta", "use-multi-epochs-loader", "save-images",
    // timm-cpp's own.
    "config", "help", "plugin-dir", "list-models", "list-optimizers", "list-schedulers",
    "list-augmentations", "list-plugins",
    // Distributed runtime.
    "no-ddp-bb", "dist-backend", "dist-timeout", "ddp-bucket-cap-mb",
    "ddp-find-unused-parameters", "sync-bn", "split-bn", "aug-repeats",
    // Run logging.
    "log-tensorboard",
    // Input pipeline speed options.
    "jpeg-dct-scale",
};

// Flags of train.py that this port will not implement, with the reason a run
// that sets one is told (the others are "not implemented yet").
const std::map<std::string, std::string, std::less<>> kUnsupportedFlags = {
    {"dataset-download", "timm-cpp reads datasets from local files only"},
    {"dataset-trust-remote-code", "timm-cpp reads datasets from local files only"},
    {"fuser", "TorchScript fusers compile Python models; timm-cpp's models are C++"},
    {"torchscript", "TorchScript compiles Python models; timm-cpp's models are C++"},
    {"torchcompile", "torch.compile compiles Python models; timm-cpp's models are C++"},
    {"torchcompile-mode", "torch.compile compiles Python models; timm-cpp's models are C++"},
    {"device-modules", "it imports Python modules for a device backend"},
    {"log-wandb", "Weights & Biases is a Python service client; --log-tensorboard writes the run's scalars"},
    {"wandb-project", "Weights & Biases is a Python service client; --log-tensorboard writes the run's scalars"},
    {"wandb-tags", "Weights & Biases is a Python service client; --log-tensorboard writes the run's scalars"},
    {"wandb-resume-id", "Weights & Biases is a Python service client; --log-tensorboard writes the run's scalars"},
};

using Strings = std::vector<std::string>;

ConfigValue Int(int64_t v) { return v; }
ConfigValue Float(double v) { return v; }
ConfigValue Str(const char* v) { return std::string(v); }
ConfigValue Ints(std::vector<int64_t> v) { return v; }
ConfigValue Floats(std::vector<double> v) { return v; }
const ConfigValue None{};

using enum FlagType;

void add_group(std::vector<FlagSpec>& table, const std::string& group,
               std::vector<FlagSpec> flags) {
  for (FlagSpec& flag : flags) {
    flag.group = group;
    table.push_back(std::move(flag));
  }
}

// argparse's "positional arguments" and the top-level "options": -c/--config
// (timm's separate config parser) and the knowledge-distillation flags.
void add_top_level(std::vector<FlagSpec>& t) {
  add_group(t, "positional arguments", {
      {.name = "data", .type = kString, .default_value = None,
       .help = "path to dataset (positional is *deprecated*, use --data-dir)", .metavar = "DATA",
       .positional = true},
  });
  add_group(t, "options", {
      {.name = "config", .short_name = "c", .type = kString, .default_value = Str(""),
       .help = "TOML config file specifying default arguments (flag or dest names as keys)",
       .metavar = "FILE", .is_action = true},
      {.name = "kd-model-name", .type = kString, .default_value = None,
       .help = "Name of teacher model for knowledge distillation"},
      {.name = "kd-pretrained-path", .type = kString, .default_value = None,
       .help = "timm-cpp: the teacher's weights, loaded strictly (a checkpoint of timm-run, "
               ".safetensors or .pth); default: its pretrained weights from the Hugging Face hub cache",
       .metavar = "PATH"},
      {.name = "kd-distill-type", .type = kString, .default_value = Str("logit"),
       .help = "Type of distillation: \"logit\" for output distillation, \"feature\" for "
               "intermediate features, \"token\" for distillation-token models",
       .choices = {"logit", "feature", "token"}},
      {.name = "kd-loss-type", .type = kString, .default_value = Str("kl"),
       .help = "Loss function for logit distillation (default: kl). Currently only \"kl\" "
               "supported, reserved for future extensions"},
      {.name = "distill-loss-weight", .type = kFloat, .default_value = None,
       .help = "Weight for distillation loss. If both weights specified: loss = task_weight * "
               "task + distill_weight * distill"},
      {.name = "task-loss-weight", .type = kFloat, .default_value = None,
       .help = "Weight for task (classification) loss. See --distill-loss-weight for "
               "weighting modes"},
      {.name = "kd-temperature", .type = kFloat, .default_value = Float(4.0),
       .help = "Temperature for softmax in distillation (default: 4.0, typical range: 1-4)"},
      {.name = "kd-student-feature-dim", .type = kInt, .default_value = None,
       .help = "Student model feature dimension (auto-detected from model.head_hidden_size or "
               "model.num_features if not specified)"},
      {.name = "kd-teacher-feature-dim", .type = kInt, .default_value = None,
       .help = "Teacher model feature dimension (auto-detected from model.head_hidden_size or "
               "model.num_features if not specified)"},
      {.name = "kd-token-distill-type", .type = kString, .default_value = Str("soft"),
       .help = "Token distillation type: \"soft\" for KL-div with temperature, \"hard\" for CE "
               "with teacher argmax",
       .choices = {"soft", "hard"}},
  });
}

void add_dataset_group(std::vector<FlagSpec>& t) {
  add_group(t, "Dataset parameters", {
      {.name = "data-dir", .type = kString, .default_value = None,
       .help = "path to dataset (root dir)", .metavar = "DIR"},
      {.name = "dataset", .type = kString, .default_value = Str(""),
       .help = "dataset type + name (\"<type>/<name>\") (default: ImageFolder or ImageTar if "
               "empty)", .metavar = "NAME"},
      {.name = "train-split", .type = kString, .default_value = Str("train"),
       .help = "dataset train split (default: train)", .metavar = "NAME"},
      {.name = "val-split", .type = kString, .default_value = Str("validation"),
       .help = "dataset validation split (default: validation)", .metavar = "NAME"},
      {.name = "train-num-samples", .type = kInt, .default_value = None,
       .help = "Manually specify num samples in train split, for IterableDatasets."},
      {.name = "val-num-samples", .type = kInt, .default_value = None,
       .help = "Manually specify num samples in validation split, for IterableDatasets."},
      {.name = "dataset-download", .type = kSwitch,
       .help = "Allow download of dataset for torch/ and tfds/ datasets that support it."},
      {.name = "class-map", .type = kString, .default_value = Str(""),
       .help = "path to class to idx mapping file (default: \"\")", .metavar = "FILENAME"},
      {.name = "input-img-mode", .type = kString, .default_value = None,
       .help = "Dataset image conversion mode for input images."},
      {.name = "input-key", .type = kString, .default_value = None,
       .help = "Dataset key for input images."},
      {.name = "target-key", .type = kString, .default_value = None,
       .help = "Dataset key for target labels."},
      {.name = "dataset-trust-remote-code", .type = kSwitch,
       .help = "Allow huggingface dataset import to execute code downloaded from the "
               "dataset's repo."},
  });
}

void add_model_group(std::vector<FlagSpec>& t) {
  add_group(t, "Model parameters", {
      {.name = "model", .type = kString, .default_value = Str("resnet50"),
       .help = "Name of model to train (default: \"resnet50\")", .metavar = "MODEL"},
      {.name = "pretrained", .type = kSwitch,
       .help = "Start with pretrained version of specified network (if avail)"},
      {.name = "pretrained-path", .type = kString, .default_value = None,
       .help = "Load this checkpoint as if they were the pretrained weights (with adaptation).",
       .metavar = "PATH"},
      {.name = "initial-checkpoint", .type = kString, .default_value = Str(""),
       .help = "Load this checkpoint into model after initialization (default: none)",
       .metavar = "PATH"},
      {.name = "resume", .type = kString, .default_value = Str(""),
       .help = "Resume full model and optimizer state from checkpoint (default: none)",
       .metavar = "PATH"},
      {.name = "no-resume-opt", .type = kSwitch,
       .help = "prevent resume of optimizer state when resuming model"},
      {.name = "num-classes", .type = kInt, .default_value = None,
       .help = "number of label classes (Model default if None)"},
      {.name = "gp", .type = kString, .default_value = None,
       .help = "Global pool type, one of (fast, avg, max, avgmax, avgmaxc). Model default if "
               "None.", .metavar = "POOL"},
      {.name = "img-size", .type = kInt, .default_value = None,
       .help = "Image size (default: None => model default)"},
      {.name = "in-chans", .type = kInt, .default_value = None,
       .help = "Image input channels (default: None => 3)"},
      {.name = "input-size", .type = kInts, .default_value = None, .nargs = 3,
       .help = "Input all image dimensions (d h w, e.g. --input-size 3 224 224), uses model "
               "default if empty"},
      {.name = "crop-pct", .type = kFloat, .default_value = None,
       .help = "Input image center crop percent (for validation only)"},
      {.name = "mean", .type = kFloats, .default_value = None,
       .help = "Override mean pixel value of dataset", .metavar = "MEAN"},
      {.name = "std", .type = kFloats, .default_value = None,
       .help = "Override std deviation of dataset", .metavar = "STD"},
      {.name = "interpolation", .type = kString, .default_value = Str(""),
       .help = "Image resize interpolation type (overrides model)", .metavar = "NAME"},
      {.name = "batch-size", .short_name = "b", .type = kInt, .default_value = Int(128),
       .help = "Input batch size for training (default: 128)"},
      {.name = "validation-batch-size", .short_name = "vb", .type = kInt, .default_value = None,
       .help = "Validation batch size override (default: None)"},
      {.name = "channels-last", .type = kSwitch, .help = "Use channels_last memory layout"},
      {.name = "fuser", .type = kString, .default_value = Str(""),
       .help = "Select jit fuser. One of ('', 'te', 'old', 'nvfuser')"},
      {.name = "grad-accum-steps", .type = kInt, .default_value = Int(1),
       .help = "The number of steps to accumulate gradients (default: 1)"},
      {.name = "grad-checkpointing", .type = kSwitch,
       .help = "Enable gradient checkpointing through model blocks/stages"},
      {.name = "fast-norm", .type = kSwitch, .help = "enable experimental fast-norm"},
      {.name = "model-kwargs", .type = kKwargs,
       .help = "keyword arguments for the model constructor, as key=value"},
      {.name = "head-init-scale", .type = kFloat, .default_value = None,
       .help = "Head initialization scale"},
      {.name = "head-init-bias", .type = kFloat, .default_value = None,
       .help = "Head initialization bias value"},
      {.name = "torchcompile-mode", .type = kString, .default_value = None,
       .help = "torch.compile mode (default: None)."},
      {.name = "torchscript", .type = kSwitch, .help = "torch.jit.script the full model"},
      {.name = "torchcompile", .type = kOptionalString, .default_value = None,
       .help = "Enable compilation w/ specified backend (default: inductor).",
       .const_value = "inductor", .metavar = "BACKEND"},
  });
}

void add_device_and_optimizer_groups(std::vector<FlagSpec>& t) {
  add_group(t, "Device parameters", {
      {.name = "device", .type = kString, .default_value = Str("cuda"),
       .help = "Device (accelerator) to use."},
      {.name = "amp", .type = kSwitch, .help = "use AMP for mixed precision training"},
      {.name = "amp-dtype", .type = kString, .default_value = Str("float16"),
       .help = "lower precision AMP dtype (default: float16)"},
      {.name = "model-dtype", .type = kString, .default_value = None,
       .help = "Model dtype override (non-AMP) (default: float32)"},
      {.name = "no-ddp-bb", .type = kSwitch,
       .help = "Force broadcast buffers for native DDP to off."},
      {.name = "synchronize-step", .type = kSwitch,
       .help = "torch.cuda.synchronize() end of each step"},
      {.name = "local_rank", .type = kInt, .default_value = Int(0),
       .help = "ignored (torch.distributed.launch compatibility); the rank comes from the "
               "environment"},
      {.name = "device-modules", .type = kStrings, .default_value = None,
       .help = "Python imports for device backend modules."},
  });
  add_group(t, "Optimizer parameters", {
      {.name = "opt", .type = kString, .default_value = Str("sgd"),
       .help = "Optimizer (default: \"sgd\")", .metavar = "OPTIMIZER"},
      {.name = "opt-eps", .type = kFloat, .default_value = None,
       .help = "Optimizer Epsilon (default: None, use opt default)", .metavar = "EPSILON"},
      {.name = "opt-betas", .type = kFloats, .default_value = None,
       .help = "Optimizer Betas (default: None, use opt default)", .metavar = "BETA"},
      {.name = "momentum", .type = kFloat, .default_value = Float(0.9),
       .help = "Optimizer momentum (default: 0.9)", .metavar = "M"},
      {.name = "weight-decay", .type = kFloat, .default_value = Float(2e-5),
       .help = "weight decay (default: 2e-5)"},
      {.name = "clip-grad", .type = kFloat, .default_value = None,
       .help = "Clip gradient norm (default: None, no clipping)", .metavar = "NORM"},
      {.name = "clip-mode", .type = kString, .default_value = Str("norm"),
       .help = "Gradient clipping mode. One of (\"norm\", \"value\", \"agc\")"},
      {.name = "layer-decay", .type = kFloat, .default_value = None,
       .help = "layer-wise learning rate decay (default: None)"},
      {.name = "layer-decay-min-scale", .type = kFloat, .default_value = Float(0),
       .help = "layer-wise lr decay minimum scale clamp (default: 0)"},
      {.name = "layer-decay-no-opt-scale", .type = kFloat, .default_value = None,
       .help = "layer-wise lr decay no optimization scale (default: None)"},
      {.name = "opt-kwargs", .type = kKwargs,
       .help = "keyword arguments for the optimizer, as key=value"},
  });
}

void add_schedule_group(std::vector<FlagSpec>& t) {
  add_group(t, "Learning rate schedule parameters", {
      {.name = "sched", .type = kString, .default_value = Str("cosine"),
       .help = "LR scheduler (default: \"cosine\")", .metavar = "SCHEDULER"},
      {.name = "sched-on-updates", .type = kSwitch,
       .help = "Apply LR scheduler step on update instead of epoch end."},
      {.name = "lr", .type = kFloat, .default_value = None,
       .help = "learning rate, overrides lr-base if set (default: None)", .metavar = "LR"},
      {.name = "lr-base", .type = kFloat, .default_value = Float(0.1),
       .help = "base learning rate: lr = lr_base * global_batch_size / base_size",
       .metavar = "LR"},
      {.name = "lr-base-size", .type = kInt, .default_value = Int(256),
       .help = "base learning rate batch size (divisor, default: 256)."},
      {.name = "lr-base-scale", .type = kString, .default_value = Str(""),
       .help = "base learning rate vs batch_size scaling (\"linear\", \"sqrt\", based on opt if "
               "empty)", .metavar = "SCALE"},
      {.name = "lr-noise", .type = kFloats, .default_value = None,
       .help = "learning rate noise on/off epoch percentages", .metavar = "PCT"},
      {.name = "lr-noise-pct", .type = kFloat, .default_value = Float(0.67),
       .help = "learning rate noise limit percent (default: 0.67)", .metavar = "PERCENT"},
      {.name = "lr-noise-std", .type = kFloat, .default_value = Float(1.0),
       .help = "learning rate noise std-dev (default: 1.0)", .metavar = "STDDEV"},
      {.name = "lr-cycle-mul", .type = kFloat, .default_value = Float(1.0),
       .help = "learning rate cycle len multiplier (default: 1.0)", .metavar = "MULT"},
      {.name = "lr-cycle-decay", .type = kFloat, .default_value = Float(0.5),
       .help = "amount to decay each learning rate cycle (default: 0.5)", .metavar = "MULT"},
      {.name = "lr-cycle-limit", .type = kInt, .default_value = Int(1),
       .help = "learning rate cycle limit, cycles enabled if > 1"},
      {.name = "lr-k-decay", .type = kFloat, .default_value = Float(1.0),
       .help = "learning rate k-decay for cosine/poly (default: 1.0)"},
      {.name = "lr-decay-fn", .type = kString, .default_value = None,
       .help = "decay phase function of wsd / rsqrt: linear, 1-sqrt, cosine, power or exp "
               "(default: 1-sqrt for wsd, linear for rsqrt)",
       .metavar = "FN"},
      {.name = "lr-stable-timescale", .type = kFloat, .default_value = None,
       .help = "timescale in epochs of the rsqrt stable phase (default: warmup epochs)"},
      {.name = "warmup-lr", .type = kFloat, .default_value = Float(1e-5),
       .help = "warmup learning rate (default: 1e-5)", .metavar = "LR"},
      {.name = "min-lr", .type = kFloat, .default_value = Float(0),
       .help = "lower lr bound for cyclic schedulers that hit 0 (default: 0)", .metavar = "LR"},
      {.name = "epochs", .type = kInt, .default_value = Int(300),
       .help = "number of epochs to train (default: 300)"},
      {.name = "epoch-repeats", .type = kFloat, .default_value = Float(0.0),
       .help = "epoch repeat multiplier (number of times to repeat dataset epoch per train "
               "epoch)."},
      {.name = "start-epoch", .type = kInt, .default_value = None,
       .help = "manual epoch number (useful on restarts)"},
      {.name = "decay-milestones", .type = kInts, .default_value = Ints({90, 180, 270}),
       .help = "list of decay epoch indices for multistep lr. must be increasing",
       .metavar = "MILESTONES"},
      {.name = "decay-epochs", .type = kFloat, .default_value = Float(90),
       .help = "epoch interval to decay LR"},
      {.name = "warmup-epochs", .type = kInt, .default_value = Int(5),
       .help = "epochs to warmup LR, if scheduler supports"},
      {.name = "warmup-prefix", .type = kSwitch,
       .help = "Exclude warmup period from decay schedule."},
      {.name = "cooldown-epochs", .type = kInt, .default_value = Int(0),
       .help = "epochs to cooldown LR at min_lr, after cyclic schedule ends"},
      {.name = "patience-epochs", .type = kInt, .default_value = Int(10),
       .help = "patience epochs for Plateau LR scheduler (default: 10)"},
      {.name = "decay-rate", .type = kFloat, .default_value = Float(0.1),
       .help = "LR decay rate (default: 0.1)", .aliases = {"dr"}, .metavar = "RATE"},
  });
}

void add_augmentation_group(std::vector<FlagSpec>& t) {
  add_group(t, "Augmentation and regularization parameters", {
      {.name = "no-aug", .type = kSwitch,
       .help = "Disable all training augmentation, override other train aug args"},
      {.name = "train-crop-mode", .type = kString, .default_value = None,
       .help = "Crop-mode in train"},
      {.name = "scale", .type = kFloats, .default_value = Floats({0.08, 1.0}),
       .help = "Random resize scale (default: 0.08 1.0)", .metavar = "PCT"},
      {.name = "ratio", .type = kFloats, .default_value = Floats({3.0 / 4.0, 4.0 / 3.0}),
       .help = "Random resize aspect ratio (default: 0.75 1.33)", .metavar = "RATIO"},
      {.name = "hflip", .type = kFloat, .default_value = Float(0.5),
       .help = "Horizontal flip training aug probability"},
      {.name = "vflip", .type = kFloat, .default_value = Float(0.0),
       .help = "Vertical flip training aug probability"},
      {.name = "color-jitter", .type = kFloat, .default_value = Float(0.4),
       .help = "Color jitter factor (default: 0.4)", .metavar = "PCT"},
      {.name = "color-jitter-prob", .type = kFloat, .default_value = None,
       .help = "Probability of applying any color jitter.", .metavar = "PCT"},
      {.name = "grayscale-prob", .type = kFloat, .default_value = None,
       .help = "Probability of applying random grayscale conversion.", .metavar = "PCT"},
      {.name = "gaussian-blur-prob", .type = kFloat, .default_value = None,
       .help = "Probability of applying gaussian blur.", .metavar = "PCT"},
      {.name = "aa", .type = kString, .default_value = None,
       .help = "Use AutoAugment policy. \"v0\" or \"original\". (default: None)",
       .metavar = "NAME"},
      {.name = "aug-repeats", .type = kFloat, .default_value = Float(0),
       .help = "Number of augmentation repetitions (distributed training only) (default: 0)"},
      {.name = "aug-splits", .type = kInt, .default_value = Int(0),
       .help = "Number of augmentation splits (default: 0, valid: 0 or >=2)"},
      {.name = "jsd-loss", .type = kSwitch,
       .help = "Enable Jensen-Shannon Divergence + CE loss. Use with `--aug-splits`."},
      {.name = "bce-loss", .type = kSwitch, .help = "Enable BCE loss w/ Mixup/CutMix use."},
      {.name = "bce-sum", .type = kSwitch, .help = "Sum over classes when using BCE loss."},
      {.name = "bce-target-thresh", .type = kFloat, .default_value = None,
       .help = "Threshold for binarizing softened BCE targets (default: None, disabled)."},
      {.name = "bce-pos-weight", .type = kFloat, .default_value = None,
       .help = "Positive weighting for BCE loss."},
      {.name = "reprob", .type = kFloat, .default_value = Float(0.0),
       .help = "Random erase prob (default: 0.)", .metavar = "PCT"},
      {.name = "remode", .type = kString, .default_value = Str("pixel"),
       .help = "Random erase mode (default: \"pixel\")"},
      {.name = "recount", .type = kInt, .default_value = Int(1),
       .help = "Random erase count (default: 1)"},
      {.name = "resplit", .type = kSwitch,
       .help = "Do not random erase first (clean) augmentation split"},
      {.name = "mixup", .type = kFloat, .default_value = Float(0.0),
       .help = "mixup alpha, mixup enabled if > 0. (default: 0.)"},
      {.name = "cutmix", .type = kFloat, .default_value = Float(0.0),
       .help = "cutmix alpha, cutmix enabled if > 0. (default: 0.)"},
      {.name = "cutmix-minmax", .type = kFloats, .default_value = None,
       .help = "cutmix min/max ratio, overrides alpha and enables cutmix if set (default: "
               "None)"},
      {.name = "mixup-prob", .type = kFloat, .default_value = Float(1.0),
       .help = "Probability of performing mixup or cutmix when either/both is enabled"},
      {.name = "mixup-switch-prob", .type = kFloat, .default_value = Float(0.5),
       .help = "Probability of switching to cutmix when both mixup and cutmix enabled"},
      {.name = "mixup-mode", .type = kString, .default_value = Str("batch"),
       .help = "How to apply mixup/cutmix params. Per \"batch\", \"pair\", or \"elem\""},
      {.name = "mixup-off-epoch", .type = kInt, .default_value = Int(0),
       .help = "Turn off mixup after this epoch, disabled if 0 (default: 0)"},
      {.name = "smoothing", .type = kFloat, .default_value = Float(0.1),
       .help = "Label smoothing (default: 0.1)"},
      {.name = "train-interpolation", .type = kString, .default_value = Str("random"),
       .help = "Training interpolation (random, bilinear, bicubic default: \"random\")"},
      {.name = "drop", .type = kFloat, .default_value = Float(0.0),
       .help = "Dropout rate (default: 0.)", .metavar = "PCT"},
      {.name = "drop-connect", .type = kFloat, .default_value = None,
       .help = "Drop connect rate, DEPRECATED, use drop-path (default: None)",
       .metavar = "PCT"},
      {.name = "drop-path", .type = kFloat, .default_value = None,
       .help = "Drop path rate (default: None)", .metavar = "PCT"},
      {.name = "drop-block", .type = kFloat, .default_value = None,
       .help = "Drop block rate (default: None)", .metavar = "PCT"},
  });
}

void add_batch_norm_and_ema_groups(std::vector<FlagSpec>& t) {
  add_group(t, "Batch norm parameters", {
      {.name = "bn-momentum", .type = kFloat, .default_value = None,
       .help = "BatchNorm momentum override (if not None)"},
      {.name = "bn-eps", .type = kFloat, .default_value = None,
       .help = "BatchNorm epsilon override (if not None)"},
      {.name = "sync-bn", .type = kSwitch, .help = "Enable synchronized BatchNorm."},
      {.name = "dist-bn", .type = kString, .default_value = Str("reduce"),
       .help = "Distribute BatchNorm stats between nodes after each epoch (\"broadcast\", "
               "\"reduce\", or \"\")"},
      {.name = "split-bn", .type = kSwitch,
       .help = "Enable separate BN layers per augmentation split."},
  });
  add_group(t, "Model exponential moving average parameters", {
      {.name = "model-ema", .type = kSwitch,
       .help = "Enable tracking moving average of model weights."},
      {.name = "model-ema-force-cpu", .type = kSwitch,
       .help = "Force ema to be tracked on CPU, rank=0 node only. Disables EMA validation."},
      {.name = "model-ema-decay", .type = kFloat, .default_value = Float(0.9998),
       .help = "Decay factor for model weights moving average (default: 0.9998)"},
      {.name = "model-ema-warmup", .type = kSwitch,
       .help = "Enable warmup for model EMA decay."},
  });
}

void add_misc_group(std::vector<FlagSpec>& t) {
  add_group(t, "Miscellaneous parameters", {
      {.name = "seed", .type = kInt, .default_value = Int(42),
       .help = "random seed (default: 42)", .metavar = "S"},
      {.name = "worker-seeding", .type = kString, .default_value = Str("all"),
       .help = "worker seed mode (default: all)"},
      {.name = "log-interval", .type = kInt, .default_value = Int(50),
       .help = "how many batches to wait before logging training status"},
      {.name = "val-interval", .type = kInt, .default_value = Int(1),
       .help = "how many epochs between validation and checkpointing"},
      {.name = "recovery-interval", .type = kInt, .default_value = Int(0),
       .help = "how many batches to wait before writing recovery checkpoint"},
      {.name = "checkpoint-hist", .type = kInt, .default_value = Int(10),
       .help = "number of checkpoints to keep (default: 10)"},
      {.name = "workers", .short_name = "j", .type = kInt, .default_value = Int(4),
       .help = "how many training processes to use (default: 4)"},
      {.name = "save-images", .type = kSwitch,
       .help = "save images of input batches every log interval for debugging"},
      {.name = "pin-mem", .type = kSwitch,
       .help = "Pin CPU memory in DataLoader for more efficient (sometimes) transfer to GPU."},
      {.name = "no-prefetcher", .type = kSwitch, .help = "disable fast prefetcher"},
      {.name = "output", .type = kString, .default_value = Str(""),
       .help = "path to output folder (default: none, current dir)", .metavar = "PATH"},
      {.name = "experiment", .type = kString, .default_value = Str(""),
       .help = "name of train experiment, name of sub-folder for output"},
      {.name = "eval-metric", .type = kString, .default_value = Str("top1"),
       .help = "Best metric (default: \"top1\")", .metavar = "EVAL_METRIC"},
      {.name = "tta", .type = kInt, .default_value = Int(0),
       .help = "Test/inference time augmentation (oversampling) factor. 0=None (default: 0)",
       .metavar = "N"},
      {.name = "use-multi-epochs-loader", .type = kSwitch,
       .help = "use the multi-epochs-loader to save time at the beginning of every epoch"},
      {.name = "log-wandb", .type = kSwitch,
       .help = "log training and validation metrics to wandb"},
      {.name = "wandb-project", .type = kString, .default_value = None,
       .help = "wandb project name"},
      {.name = "wandb-tags", .type = kStrings, .default_value = Strings{},
       .help = "wandb tags"},
      {.name = "wandb-resume-id", .type = kString, .default_value = Str(""),
       .help = "If resuming a run, the id of the run in wandb"},
      {.name = "train-img-sizes", .type = kInts, .default_value = None,
       .help = "Per-batch square image sizes for scheduled resolution training"},
      {.name = "train-batch-sizes", .type = kInts, .default_value = None,
       .help = "Batch size for each --train-img-sizes choice (default: --batch-size for every "
               "choice)"},
      {.name = "train-size-probs", .type = kFloats, .default_value = None,
       .help = "Base sampling weights for --train-img-sizes (default: uniform)"},
      {.name = "train-size-schedule", .type = kString, .default_value = Str("constant"),
       .help = "Resolution choice schedule; progressive moves from the first size to the last",
       .choices = {"constant", "progressive"}},
      {.name = "train-size-schedule-spread", .type = kFloat, .default_value = Float(0.65),
       .help = "Progressive schedule spread in resolution-choice index units (default: 0.65)"},
      {.name = "train-size-random-mix", .type = kFloat, .default_value = Float(0.1),
       .help = "Fraction of uniform random active choices mixed into a progressive schedule "
               "(default: 0.1)"},
      {.name = "train-batches-per-epoch", .type = kInt, .default_value = None,
       .help = "Fixed loader batches (before gradient accumulation) per epoch; inferred if "
               "unspecified",
       .aliases = {"train-steps-per-epoch"}},
      {.name = "variable-batch-loss-scale", .type = kString, .default_value = Str("none"),
       .help = "Scale gradients relative to the policy-average scheduled batch size",
       .choices = {"none", "sqrt", "linear"}},
      {.name = "naflex-loader", .type = kSwitch,
       .help = "Use NaFlex loader (Requires NaFlex compatible model)"},
      {.name = "naflex-train-seq-lens", .type = kInts,
       .default_value = Ints({128, 256, 576, 784, 1024}),
       .help = "Sequence lengths to use for NaFlex loader"},
      {.name = "naflex-max-seq-len", .type = kInt, .default_value = Int(576),
       .help = "Fixed maximum sequence length for NaFlex loader (validation)"},
      {.name = "naflex-patch-sizes", .type = kInts, .default_value = None,
       .help = "List of patch sizes for variable patch size training (e.g., 8 12 16 24 32)"},
      {.name = "naflex-patch-size-probs", .type = kFloats, .default_value = None,
       .help = "Probabilities for each patch size (must sum to 1.0, uniform if not "
               "specified)"},
      {.name = "naflex-loss-scale", .type = kString, .default_value = Str("linear"),
       .help = "Scale loss (gradient) by batch_size (\"none\", \"sqrt\", or \"linear\")",
       .choices = {"none", "sqrt", "linear"}},
      {.name = "naflex-patchify-channels-first", .type = kSwitch,
       .help = "Emit NaFlex patches in C-P-P (channels-first) flat layout instead of the "
               "default P-P-C (channels-last)"},
  });
}

void add_timm_cpp_group(std::vector<FlagSpec>& t) {
  add_group(t, "timm-cpp", {
      {.name = "help", .short_name = "h", .type = kSwitch,
       .help = "show this help message and exit", .is_action = true},
      {.name = "plugin-dir", .type = kString, .default_value = None,
       .help = "also load the plugins in this folder (repeatable)", .metavar = "DIR",
       .is_action = true},
      {.name = "list-models", .type = kOptionalString, .default_value = Str("*"),
       .help = "list the models matching PATTERN and exit", .const_value = "*",
       .metavar = "PATTERN", .is_action = true},
      {.name = "list-optimizers", .type = kOptionalString, .default_value = Str("*"),
       .help = "list the optimizers matching PATTERN and exit", .const_value = "*",
       .metavar = "PATTERN", .is_action = true},
      {.name = "list-schedulers", .type = kOptionalString, .default_value = Str("*"),
       .help = "list the LR schedulers matching PATTERN and exit", .const_value = "*",
       .metavar = "PATTERN", .is_action = true},
      {.name = "list-augmentations", .type = kOptionalString, .default_value = Str("*"),
       .help = "list the augmentations matching PATTERN and exit", .const_value = "*",
       .metavar = "PATTERN", .is_action = true},
      {.name = "list-plugins", .type = kSwitch,
       .help = "list the loaded plugin files (name, SDK ABI, torch version, the names each registered) and exit",
       .is_action = true},
      {.name = "stop-after-epochs", .type = kInt, .default_value = None,
       .help = "stop after training this many epochs of the schedule in this run (checkpoints written as usual); "
               "resume later with --resume or --auto-resume, e.g. for time-limited jobs"},
      {.name = "log-tensorboard", .type = kSwitch,
       .help = "also write the run's scalars as TensorBoard event files in the output folder (rank 0)"},
      {.name = "jpeg-dct-scale", .type = kSwitch,
       .help = "train loader: decode JPEGs for the RandomResizedCrop at the DCT scale (1/2, 1/4, 1/8) that still "
               "covers the crop at the input size; faster on large images, but not PIL's pixels (trades exact "
               "parity with timm for speed)"},
      {.name = "auto-resume", .type = kSwitch,
       .help = "resume from the newest checkpoint (last or recovery) in the output folder, if any "
               "(for restarts under torchrun --max-restarts; needs --experiment)"},
      {.name = "dist-backend", .type = kString, .default_value = Str(""),
       .help = "distributed backend (empty: chosen from the device)"},
      {.name = "dist-timeout", .type = kInt, .default_value = Int(1800),
       .help = "timeout of distributed collectives in seconds"},
      {.name = "ddp-bucket-cap-mb", .type = kFloat, .default_value = Float(25),
       .help = "DDP gradient bucket size in MiB (torch's bucket_cap_mb; the first bucket is 1 MiB)"},
      {.name = "ddp-find-unused-parameters", .type = kSwitch,
       .help = "allow parameters that get no gradient (torch's find_unused_parameters); "
               "otherwise they are an error naming them"},
  });
}

// clang-format on

std::string dest_of(const std::string& name) {
  std::string dest = name;
  std::replace(dest.begin(), dest.end(), '-', '_');
  return dest;
}

int nargs_of(FlagType type) {
  switch (type) {
    case kSwitch:
      return 0;
    case kInts:
    case kFloats:
    case kStrings:
      return kNargsOneOrMore;
    case kKwargs:
      return kNargsZeroOrMore;
    case kOptionalString:
      return kNargsOptional;
    default:
      return 1;
  }
}

bool is_implemented(const std::string& name) {
  return std::find(kImplementedFlags.begin(), kImplementedFlags.end(), name) != kImplementedFlags.end();
}

// Fills what the rows leave to be derived: dest, nargs, implemented, and the
// defaults of switches (false) and kwargs (empty).
void complete(FlagSpec& flag) {
  if (flag.dest.empty()) flag.dest = dest_of(flag.name);
  if (flag.nargs == 0) flag.nargs = nargs_of(flag.type);
  flag.implemented = is_implemented(flag.name);
  if (const auto it = kUnsupportedFlags.find(flag.name); it != kUnsupportedFlags.end()) flag.unsupported = it->second;
  if (flag.type == kSwitch) flag.default_value = false;
  if (flag.type == kKwargs) flag.default_value = Strings{};
}

std::vector<FlagSpec> build_table() {
  std::vector<FlagSpec> table;
  add_top_level(table);
  add_dataset_group(table);
  add_model_group(table);
  add_device_and_optimizer_groups(table);
  add_schedule_group(table);
  add_augmentation_group(table);
  add_batch_norm_and_ema_groups(table);
  add_misc_group(table);
  add_timm_cpp_group(table);
  for (FlagSpec& flag : table) complete(flag);
  // A misspelt entry in kImplementedFlags would silently keep a flag refused.
  for (std::string_view name : kImplementedFlags) {
    bool found = std::any_of(table.begin(), table.end(), [&](const FlagSpec& flag) { return flag.name == name; });
    if (!found) throw Error("kImplementedFlags names no flag: " + std::string(name));
  }
  return table;
}

}  // namespace

const std::vector<FlagSpec>& train_flags() {
  static const std::vector<FlagSpec> table = build_table();
  return table;
}

const FlagSpec* find_flag(std::string_view name_or_dest) {
  for (const FlagSpec& flag : train_flags()) {
    if (flag.name == name_or_dest || flag.dest == name_or_dest) return &flag;
    for (const std::string& alias : flag.aliases) {
      if (alias == name_or_dest || dest_of(alias) == name_or_dest) return &flag;
    }
  }
  return nullptr;
}

}  // namespace timm
