// Internal: the parts of run_training (trainer.cpp), one concern per file:
//   train_args.hpp    the flags the trainer reads, typed (TrainArgs)
//   train_dist.cpp    the distributed side: device, process group, SyncBN, DDP,
//                     BatchNorm statistics, the closing checks
//   train_setup.cpp   datasets, model, loaders, step tools, optimizer,
//                     scheduler, resume: everything built before epoch 0
//   train_task.cpp    the training task: classification or distillation
//   train_loop.cpp    the epochs: train_one_epoch, validate
//   train_report.cpp  what a run writes and logs: the output folder,
//                     config.toml, summary.csv, checkpoints, the result
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <torch/nn/module.h>

#include "timm/config/config.hpp"
#include "timm/data/data_config.hpp"
#include "timm/data/loader.hpp"
#include "timm/data/mixup.hpp"
#include "timm/data/naflex_random_erasing.hpp"
#include "timm/dist/ddp.hpp"
#include "timm/dist/distribute_bn.hpp"
#include "timm/dist/process_group.hpp"
#include "timm/dist/world.hpp"
#include "timm/log/tensorboard.hpp"
#include "timm/models/model.hpp"
#include "timm/optim/optimizer.hpp"
#include "timm/sched/scheduler.hpp"
#include "timm/train/amp.hpp"
#include "timm/train/checkpoint.hpp"
#include "timm/train/losses.hpp"
#include "timm/train/model_ema.hpp"
#include "timm/train/task.hpp"
#include "timm/train/trainer.hpp"
#include "train_args.hpp"

namespace timm::train_detail {

// ---- train_dist.cpp

// The distributed side of a run; inactive (no group) for a single process.
struct Distributed {
  dist::WorldInfo world;
  std::unique_ptr<dist::ProcessGroup> group;
  std::unique_ptr<dist::DistributedDataParallel> ddp;
  // The training device: collectives run there (NCCL takes CUDA tensors only).
  torch::Device device{torch::kCPU};

  bool active() const { return group != nullptr; }
  bool is_primary() const { return world.is_primary(); }
  int size() const { return world.world_size; }

  // Sums `values` over the ranks (in place); a no-op for a single process.
  void sum(std::vector<double>& values, const std::string& what) const;
  // timm's reduce_tensor: the mean over ranks.
  double mean(double value, const std::string& what) const;
};

// --device as timm's init_distributed_device resolves it.
torch::Device resolve_device(const TrainArgs& args, const dist::WorldInfo& world);

// Per-rank logging and the process group of a distributed run.
void start_process_group(const TrainArgs& args, const torch::Device& device, Distributed& dist);

// --sync-bn, which counts only in a distributed run.
bool uses_sync_bn(const TrainArgs& args, const Distributed& dist);
void convert_to_sync_bn(torch::nn::Module& model, const Distributed& dist);

// Wraps the model in our DDP (dist.ddp), with the --ddp-* flags.
void wrap_ddp(const TrainArgs& args, torch::nn::Module& model, bool sync_bn, Distributed& dist);

// --dist-bn at each epoch end; none for a single process or under --sync-bn.
std::optional<dist::DistBnMode> dist_bn_mode(const TrainArgs& args, const Distributed& dist, bool sync_bn);
void distribute_bn_statistics(torch::nn::Module& model, const ModelEma* ema, const Distributed& dist,
                              dist::DistBnMode mode);

// Every rank's torch RNG states in rank order (the CPU generator's, and the
// CUDA device's on a CUDA device), for the checkpoint the primary rank
// writes; this process's alone for a single process. Collective in a
// distributed run: every rank calls it at the same point.
RngStates rng_states(const Distributed& dist);

// A recovery checkpoint's EpochPosition::rank_buffers: ranks 1 and up's
// buffers of the model and the EMA (collective in a distributed run; the
// primary rank gets them, the others an empty list; empty for one process).
NamedTensors other_ranks_buffers(const torch::nn::Module& model, const ModelEma* ema, const Distributed& dist);

// On ranks 1 and up, resuming from a recovery checkpoint: their own buffers
// back from `saved` (other_ranks_buffers); throws Error naming `file` when one
// is missing. A no-op on the primary rank and for one process.
void restore_rank_buffers(const NamedTensors& saved, torch::nn::Module& model, ModelEma* ema, const Distributed& dist,
                          const std::string& file);

// Throws dist::Interrupted once SIGINT or SIGTERM arrived.
void check_stop();

// The closing lines of a distributed run and the check that every rank ends
// with the same parameters; releases the DDP hooks. A no-op for one process.
void finish_distributed(torch::nn::Module& model, Distributed& dist);

// ---- train_setup.cpp

// What a training step uses beside the model and the optimizer.
struct StepTools {
  LossFn loss_fn;
  // --model-dtype: the model's weights and the input batches (converted from
  // uint8 before the loader's normalisation, as timm's img_dtype).
  c10::ScalarType model_dtype = c10::ScalarType::Float;
  std::optional<c10::ScalarType> amp_dtype;  // --amp: autocast in this dtype
  std::unique_ptr<GradScaler> scaler;        // --amp with float16
  std::optional<double> clip_grad;
  std::string clip_mode;
  std::unique_ptr<ModelEma> ema;
  std::optional<Mixup> mixup;  // --mixup / --cutmix
  int64_t mixup_off_epoch = 0;
  int64_t grad_accum_steps = 1;
};

// Everything built before the first epoch, in train.py's order.
struct TrainSetup {
  int64_t num_classes = 0;
  ModelArgs model_args;  // also the --model-ema copy's
  ModelPtr model;        // the trained model: evaluated, EMA'd, checkpointed
  // What a step trains: the model's loss, or with a teacher its distillation.
  std::unique_ptr<TrainingTask> task;
  DataConfig data_config;
  StepTools tools;
  std::shared_ptr<Loader> train_loader;
  // --train-img-sizes: the loader's batches come in scheduled sizes
  // (ScheduledBatchSampler), each with its choice's transform.
  bool scheduled_batches = false;
  // train.py's batch_size_reference: --batch-size, or with scheduled sizes
  // the policy-average batch size (the lr scaling and
  // --variable-batch-loss-scale use it).
  double batch_size_reference = 0.0;
  // --naflex-loader: the batches are NaFlex patch batches (Batch::patches)
  // of variable batch size, their loss scaled by --naflex-loss-scale.
  bool naflex = false;
  // --naflex-patch-sizes: each train choice's patch size; its batches go to
  // the model as (B, N, Ph, Pw, C), timm's variable patch size batches.
  // Empty: the model's patch size, flat patches.
  std::vector<std::array<int64_t, 2>> naflex_choice_patch_sizes;
  // --reprob with --naflex-loader: timm's PatchRandomErasing of the
  // normalised training patches.
  std::optional<PatchRandomErasing> patch_erasing;
  std::shared_ptr<Loader> eval_loader;  // none without --val-split
  double lr = 0.0;                      // --lr, or scaled from --lr-base
  OptimizerPtr optimizer;
  std::optional<dist::DistBnMode> dist_bn;
  std::string eval_metric;  // "loss" without evaluation
  bool decreasing_metric = false;
  int64_t updates_per_epoch = 0;
  SchedulerPtr scheduler;
  // Resumed from a recovery checkpoint: where in the start epoch to continue
  // (resume_if_asked); none: the start epoch runs from its beginning.
  std::optional<EpochPosition> resume_position;
};

// ---- train_task.cpp

// train.py's task: ClassificationTask, or with --kd-model-name a
// distillation task whose teacher is created, loaded and put on `device`
// here. `setup` has the model, data config and loss; `defaults`: the
// dataset's, for the teacher's input normalisation.
std::unique_ptr<TrainingTask> make_task(const TrainArgs& args, const Config& config, const TrainSetup& setup,
                                        const DatasetDefaults& defaults, const torch::Device& device);

// ---- train_setup.cpp (continued)

// Seeds torch (seed + rank), then builds it all.
TrainSetup set_up_training(const TrainArgs& args, const Config& config, Distributed& dist, const torch::Device& device);

// --resume or --auto-resume, then --start-epoch: the epoch to start at, with
// the scheduler stepped to it; from a recovery checkpoint that holds its
// position (and without --start-epoch), its epoch, with the position in
// setup.resume_position and the scheduler stepped to its update. In a
// distributed run rank 0 chooses the checkpoint and every rank resumes from
// it, or all stop (collective).
int64_t resume_if_asked(const TrainArgs& args, const std::filesystem::path& output_dir, TrainSetup& setup,
                        const Distributed& dist, const torch::Device& device);

// The epoch after the last one this run trains.
int64_t last_epoch_of_run(const TrainArgs& args, int64_t start_epoch, int64_t num_epochs);

// ---- train_loop.cpp

// train.py's updates per epoch: ceil(batches / grad_accum_steps).
int64_t updates_per_epoch(std::size_t num_batches, int64_t grad_accum_steps);

struct RunOutput;

// The epochs from `start_epoch` on (the first from setup.resume_position
// when set): train, evaluate, report each, then the closing report and the
// distributed checks.
TrainResult train_epochs(const TrainArgs& args, TrainSetup& setup, RunOutput& output, Distributed& dist,
                         const torch::Device& device, int64_t start_epoch);

// ---- train_report.cpp

// What the primary rank writes into; empty elsewhere but for config_toml.
struct RunOutput {
  std::filesystem::path dir;
  std::string config_toml;  // the effective config, kept in each checkpoint
  std::optional<CheckpointSaver> saver;
  // --log-tensorboard: the run's event file in `dir` (primary rank only).
  std::unique_ptr<TensorBoardWriter> tensorboard;
};

// Creates the output folder and writes config.toml (primary rank only): the
// effective config, then `plugins` (describe_loaded_plugins) as comments;
// with --log-tensorboard, opens the event file there.
RunOutput open_run_output(const TrainArgs& args, const Config& config, const std::vector<LoadedPlugin>& plugins,
                          const TrainSetup& setup, const Distributed& dist, const torch::Device& device);

// CheckpointSaver (primary rank only), after the resume as train.py; a run
// resumed at `start_epoch` > 0 takes in the checkpoint-N files of earlier
// epochs, so that --checkpoint-hist prunes them.
void open_checkpoint_saver(const TrainArgs& args, const TrainSetup& setup, const Distributed& dist, int64_t start_epoch,
                           RunOutput& output);

struct EpochRecord {
  int64_t epoch;
  double train_loss;
  std::optional<EvalMetrics> eval;
};

// The epochs reported so far; the same on every rank.
struct EpochHistory {
  std::vector<EpochRecord> records;
  std::optional<double> best_metric;
  int64_t best_epoch = -1;
};

// The --eval-metric of an evaluation: top1, top5 or loss; UsageError else.
double metric_of(const EvalMetrics& metrics, const std::string& name);

// `rng_states`: rng_states(), every rank's.
CheckpointParts checkpoint_parts(const TrainSetup& setup, RngStates rng_states);

// An evaluated epoch: its summary.csv row (and the same scalars in the
// TensorBoard file, flushed) and checkpoints (primary rank, with every
// rank's `rng_states`), and the best metric so far.
void report_epoch(const EpochRecord& record, double metric, RngStates rng_states, const TrainSetup& setup,
                  RunOutput& output, const Distributed& dist, EpochHistory& history);

// recovery-<epoch>-<update_idx> (--recovery-interval) with its `position` in
// the epoch, primary rank only.
void save_recovery(const TrainSetup& setup, RunOutput& output, int64_t epoch, int64_t update_idx, RngStates rng_states,
                   EpochPosition position);

// The closing lines and files: the best metric, the --result JSON, the plot.
void report_run_end(const EpochHistory& history, const TrainSetup& setup, const RunOutput& output,
                    const Distributed& dist);

}  // namespace timm::train_detail
