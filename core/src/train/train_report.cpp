// What a run writes and logs beside the step lines: the output folder and
// config.toml, a summary.csv row and the checkpoints of each evaluated epoch,
// and the closing best metric, --result JSON and plot. Only the primary rank
// writes (train.py: output_dir and saver on the primary).
#include <algorithm>
#include <utility>

#include <nlohmann/json.hpp>

#include "timm/base/error.hpp"
#include "timm/base/python_repr.hpp"
#include "timm/io/atomic_file.hpp"
#include "timm/log/log.hpp"
#include "timm/plugin/loader.hpp"
#include "timm/train/plot.hpp"
#include "timm/train/summary.hpp"
#include "trainer_internal.hpp"

namespace timm::train_detail {
namespace {

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

void write_summary_row(const EpochRecord& record, const TrainSetup& setup, const RunOutput& output) {
  std::vector<std::pair<std::string, double>> eval_columns;
  if (record.eval) {
    eval_columns = {{"loss", record.eval->loss}, {"top1", record.eval->top1}, {"top5", record.eval->top5}};
  }
  update_summary(output.dir / "summary.csv", record.epoch, {{"loss", record.train_loss}}, eval_columns,
                 setup.optimizer->mean_lr());
}

// The summary.csv row's columns as TensorBoard scalars "epoch/<column>" at
// step = epoch, flushed so that a killed run keeps them.
void write_epoch_scalars(const EpochRecord& record, const TrainSetup& setup, TensorBoardWriter& tensorboard) {
  std::vector<TensorBoardScalar> scalars{{"epoch/train_loss", record.train_loss}};
  if (record.eval) {
    scalars.push_back({"epoch/eval_loss", record.eval->loss});
    scalars.push_back({"epoch/eval_top1", record.eval->top1});
    scalars.push_back({"epoch/eval_top5", record.eval->top5});
  }
  scalars.push_back({"epoch/lr", setup.optimizer->mean_lr()});
  tensorboard.add_scalars(record.epoch, scalars);
  tensorboard.flush();
}

}  // namespace

RunOutput open_run_output(const TrainArgs& args, const Config& config, const std::vector<LoadedPlugin>& plugins,
                          const TrainSetup& setup, const Distributed& dist, const torch::Device& device) {
  RunOutput output;
  if (dist.is_primary()) {
    output.dir = make_output_dir(args.output, args.experiment, args.model, setup.data_config.input_size.back());
  }
  // What was actually used, as train.py's args.yaml records the computed lr:
  // rerunning with it as --config repeats this run.
  Config effective = config;
  effective.set("device", device.str());
  effective.set("lr", setup.lr);
  effective.set("num_classes", setup.num_classes);
  output.config_toml = effective.to_toml();
  // Which plugin files the run used, as comments: the file stays usable as
  // --config.
  if (!plugins.empty()) {
    output.config_toml += "\n# Plugins loaded for this run (timm-run --list-plugins)\n";
    const std::string listing = describe_loaded_plugins(plugins);
    std::size_t start = 0;
    while (start < listing.size()) {
      const std::size_t end = listing.find('\n', start);
      output.config_toml += "# " + listing.substr(start, end - start) + "\n";
      if (end == std::string::npos) break;
      start = end + 1;
    }
  }
  if (dist.is_primary()) write_file_atomically(output.dir / "config.toml", output.config_toml);
  // Beside summary.csv, so `tensorboard --logdir <--output>` shows each
  // experiment as a run.
  if (dist.is_primary() && args.log_tensorboard) output.tensorboard = std::make_unique<TensorBoardWriter>(output.dir);
  return output;
}

void open_checkpoint_saver(const TrainArgs& args, const TrainSetup& setup, const Distributed& dist, int64_t start_epoch,
                           RunOutput& output) {
  if (!dist.is_primary()) return;
  output.saver.emplace(output.dir, setup.decreasing_metric, args.checkpoint_hist);
  // Only a resume: a fresh run into an existing --experiment folder leaves
  // the files it finds there alone, as timm does.
  const bool resumed = !args.resume.empty() || args.auto_resume;
  if (resumed && start_epoch > 0) output.saver->resume_history(start_epoch);
}

double metric_of(const EvalMetrics& metrics, const std::string& name) {
  if (name == "top1") return metrics.top1;
  if (name == "top5") return metrics.top5;
  if (name == "loss") return metrics.loss;
  throw UsageError("--eval-metric '" + name + "': expected top1, top5 or loss");
}

CheckpointParts checkpoint_parts(const TrainSetup& setup, RngStates rng_states) {
  return CheckpointParts{*setup.model,          *setup.optimizer,
                         setup.tools.ema.get(), setup.tools.scaler.get(),
                         std::move(rng_states), setup.task->task_state()};
}

void report_epoch(const EpochRecord& record, double metric, RngStates rng_states, const TrainSetup& setup,
                  RunOutput& output, const Distributed& dist, EpochHistory& history) {
  if (dist.is_primary()) {
    write_summary_row(record, setup, output);
    if (output.tensorboard) write_epoch_scalars(record, setup, *output.tensorboard);
    const TrainingState state{record.epoch, metric, setup.eval_metric, output.config_toml};
    const auto [best, best_epoch] = output.saver->save(checkpoint_parts(setup, std::move(rng_states)), state);
    history.best_metric = best;
    history.best_epoch = best_epoch;
  } else if (!history.best_metric ||
             (setup.decreasing_metric ? metric < *history.best_metric : metric > *history.best_metric)) {
    history.best_metric = metric;  // the same metric on every rank (reduced eval)
    history.best_epoch = record.epoch;
  }
  history.records.push_back(record);
}

void save_recovery(const TrainSetup& setup, RunOutput& output, int64_t epoch, int64_t update_idx,
                   RngStates rng_states, EpochPosition position) {
  const TrainingState state{epoch, std::nullopt, setup.eval_metric, output.config_toml, std::move(position)};
  output.saver->save_recovery(checkpoint_parts(setup, std::move(rng_states)), state, update_idx);
}

void report_run_end(const EpochHistory& history, const TrainSetup& setup, const RunOutput& output,
                    const Distributed& dist) {
  if (history.best_metric) {
    log_info(format("*** Best metric: %s (epoch %lld)", python_float_repr(*history.best_metric).c_str(),
                    static_cast<long long>(history.best_epoch)));
  }
  if (!dist.is_primary()) return;
  print_result(history.records, setup.eval_metric);
  // The run's curves (loss, accuracy, lr) beside its summary.
  if (std::filesystem::exists(output.dir / "summary.csv")) {
    plot_summary(output.dir / "summary.csv", output.dir / "summary.svg");
  }
}

}  // namespace timm::train_detail
