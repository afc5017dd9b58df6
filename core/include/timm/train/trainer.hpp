// The training run of timm-run: timm's train.py main(), train_one_epoch()
// and validate(), on one process or, launched by torchrun, Slurm or MPI, on
// many (timm::dist: DDP, rank 0 writes the outputs).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>

#include "timm/config/config.hpp"
#include "timm/plugin/loader.hpp"

namespace timm {

struct EvalMetrics {
  double loss = 0.0;
  double top1 = 0.0;  // percent
  double top5 = 0.0;  // percent
  int64_t samples = 0;
};

struct TrainResult {
  std::filesystem::path output_dir;
  std::optional<EvalMetrics> last_eval;
  double best_metric = 0.0;
  int64_t best_epoch = -1;
  double train_images_per_second = 0.0;  // over all train steps
};

// Runs the whole training described by `config` (already parsed; plugins
// already loaded, `plugins` lists them for the distributed start-up check that
// every rank loaded the same). Throws Error/UsageError on bad input, and
// dist::Interrupted on SIGINT/SIGTERM.
TrainResult run_training(const Config& config, const std::vector<LoadedPlugin>& plugins = {});

}  // namespace timm
