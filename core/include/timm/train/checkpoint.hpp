// Training checkpoints in our format, with timm's file names and rules.
//
// A checkpoint <stem> is two files, each written atomically:
//   <stem>.safetensors  the model's weights with timm's key names, loadable by
//                       Python timm as they are;
//   <stem>.state.pt     what a resume needs beside them: optimizer, EMA
//                       weights, gradient scaler, the task's state (timm's
//                       task_state, e.g. a feature projection) and its EMA
//                       (task_state_ema), epoch,
//                       metric, every rank's torch CPU RNG state and the
//                       effective config; a recovery checkpoint also its
//                       position in its epoch (EpochPosition).
// The state file is written first and the weights name its checkpoint id, so
// a pair torn by a crash between the two writes is detected on resume.
//
// CheckpointSaver keeps timm's CheckpointSaver files: `last`, the best
// --checkpoint-hist as `checkpoint-<epoch>` (hard links of `last`),
// `model_best`, and `recovery-<epoch>-<update>` every --recovery-interval
// updates (the two newest kept), which a resume continues at the next update
// of its epoch (timm's resume starts the next epoch).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

#include "timm/io/named_tensors.hpp"
#include "timm/optim/optimizer.hpp"

namespace timm {

class GradScaler;
class ModelEma;

// Where in its epoch a recovery checkpoint (--recovery-interval) was written,
// after an optimizer update (so with no gradient accumulation in flight):
// what a resume needs to continue the epoch at its next update as an
// uninterrupted run would.
struct EpochPosition {
  int64_t updates_done = 0;       // optimizer updates done in the epoch (>= 1)
  int64_t updates_per_epoch = 0;  // of the run that saved it
  int64_t batches_done = 0;       // loader batches those updates took
  // The training loop's per-epoch random engines (batch transforms, then
  // mixup / cutmix) as std::mt19937_64's text; the same on every rank (seeded
  // by seed and epoch, drawing per batch shape).
  std::string batch_rng;
  std::string mixup_rng;
  // Each rank's train loss meter so far: float64 (world size, 2), rows (sum
  // of loss x batch size, sample count) in rank order.
  at::Tensor train_loss;
  // A distributed run's ranks 1 and up: the buffers of their model and EMA
  // (BatchNorm statistics, which differ between ranks within an epoch), named
  // "rank<r>.model.<name>" and "rank<r>.ema.<name>"; rank 0's are the
  // checkpoint's weights and EMA. Empty for a single process.
  NamedTensors rank_buffers{};
};

struct TrainingState {
  int64_t epoch = 0;
  std::optional<double> metric;  // none for recovery checkpoints
  std::string metric_name;
  std::string config_toml;
  // Recovery checkpoints: where in `epoch` they were written. None for a
  // checkpoint of an epoch's end (and for recovery checkpoints written
  // before positions were saved).
  std::optional<EpochPosition> position{};
};

// Every rank's torch RNG states in rank order (a distributed run gathers
// them to the rank that saves). Dropout and drop path draw from the
// generator of the device they run on, so a CUDA run resumes exactly only
// with its CUDA generator's state too.
struct RngStates {
  // The CPU generator's; empty: this process's, as rank 0 of a world of one.
  std::vector<at::Tensor> cpu{};
  // Each rank's CUDA device's generator's; empty for a run on the CPU.
  std::vector<at::Tensor> cuda{};
};

// What a checkpoint holds besides the TrainingState; ema and scaler optional.
struct CheckpointParts {
  const torch::nn::Module& model;
  const Optimizer& optimizer;
  const ModelEma* ema = nullptr;
  const GradScaler* scaler = nullptr;
  RngStates rng_states{};
  NamedTensors task_state{};  // TrainingTask::task_state(); empty: none
};

// This process's torch CPU RNG state (a byte tensor, the same size on every
// rank), for RngStates::cpu.
at::Tensor cpu_rng_state();

// The RNG state of CUDA device `device`'s default generator (a byte tensor,
// the same size on every rank), for RngStates::cuda.
at::Tensor cuda_rng_state(const torch::Device& device);

// Writes <dir>/<stem>.state.pt, then <dir>/<stem>.safetensors.
void save_checkpoint(const std::filesystem::path& dir, const std::string& stem, const CheckpointParts& parts,
                     const TrainingState& state);

class CheckpointSaver {
 public:
  // `decreasing`: a lower metric is better (eval metric "loss").
  CheckpointSaver(std::filesystem::path dir, bool decreasing, int64_t max_history);

  // Saves `last`; keeps it as checkpoint-<epoch> if it ranks among the best
  // max_history, and as model_best if it is the best. Returns the best
  // (metric, epoch) so far.
  std::pair<double, int64_t> save(const CheckpointParts& parts, const TrainingState& state);
  // Saves recovery-<epoch>-<batch_idx> (the training loop passes the update
  // index), deleting the one from two saves ago.
  void save_recovery(const CheckpointParts& parts, const TrainingState& state, int64_t batch_idx);

  // After a resume that starts at `start_epoch`: the checkpoint-<epoch> files
  // of earlier epochs already in the folder join the kept list, ranked by the
  // metric each saved, so that the next saves prune them as if the run had
  // not stopped (timm's saver starts empty and never prunes them). Files of
  // later epochs (left by a resume from an earlier checkpoint) are left alone
  // until this run replaces them.
  void resume_history(int64_t start_epoch);

 private:
  bool better(double a, double b) const { return decreasing_ ? a < b : a > b; }
  void keep_if_among_best(const std::string& stem, double metric, const std::string& id);
  void log_checkpoints() const;

  std::filesystem::path dir_;
  bool decreasing_;
  int64_t max_history_;
  std::vector<std::pair<std::string, double>> kept_;  // (stem, metric), best first
  std::optional<std::pair<double, int64_t>> best_;
  std::vector<std::string> recovery_stems_;
};

// Mutable parts a resume restores; ema and scaler optional, optimizer null
// with --no-resume-opt. `rank` and `world_size` are the resuming process's:
// they pick the RNG state it restores.
struct ResumeTargets {
  torch::nn::Module& model;
  Optimizer* optimizer = nullptr;
  ModelEma* ema = nullptr;
  GradScaler* scaler = nullptr;
  // Receives the saved task state (empty when the checkpoint has none):
  // TrainingTask::load_task_state. Unset: the task state is not restored.
  std::function<void(const NamedTensors&)> load_task_state{};
  int rank = 0;
  int world_size = 1;
  // A CUDA device: its generator's state is restored too, where the
  // checkpoint holds this rank's.
  torch::Device device = torch::kCPU;
};

// --resume: restores a checkpoint written by save_checkpoint, given either of
// its two files (or its path without extension), strictly; restores this
// rank's torch CPU RNG state (and its CUDA generator's, on a CUDA device). A
// checkpoint written by another world size (or one that holds rank 0's state
// only) restores the states it holds: ranks without one keep theirs, and
// rank 0 warns that the random draws (drop path, dropout) will differ from
// an uninterrupted run's. Returns the epoch to start at (the saved epoch +
// 1), as timm's resume_checkpoint. Throws Error naming the file on any
// mismatch.
int64_t resume_checkpoint(const std::filesystem::path& path, const ResumeTargets& targets);

// Where a resumed run continues.
struct ResumePoint {
  // The epoch to start at: the saved epoch + 1, or with `position` the saved
  // epoch itself.
  int64_t epoch = 0;
  // A recovery checkpoint's position in `epoch` (TrainingState::position):
  // the run continues that epoch after its `updates_done` updates. None: the
  // run starts `epoch` at its beginning.
  std::optional<EpochPosition> position{};
};

// resume_checkpoint, but a recovery checkpoint that holds its position in its
// epoch resumes that epoch where it was written rather than at the next one.
ResumePoint resume_checkpoint_at(const std::filesystem::path& path, const ResumeTargets& targets);

// validate.py's --use-ema: the EMA weights (--model-ema) of the checkpoint
// `weights` (<stem>.safetensors, or its path without extension) into
// `model`, strictly by name, from the training state saved with it. Returns
// false, loading nothing, when the checkpoint holds no EMA (no state file
// beside it, or a run without --model-ema); timm's load_checkpoint then
// loads the plain weights. Throws Error naming the file when the state does
// not match the weights or lacks a weight of the model.
bool load_ema_weights(torch::nn::Module& model, const std::filesystem::path& weights);

// The newest checkpoint (by modification time) among `last` and `recovery-*`
// in `dir`, for --auto-resume; none if there is none.
std::optional<std::filesystem::path> newest_checkpoint(const std::filesystem::path& dir);

}  // namespace timm
