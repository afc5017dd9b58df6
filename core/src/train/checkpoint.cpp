#include "timm/train/checkpoint.hpp"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <functional>
#include <limits>
#include <mutex>
#include <random>
#include <set>
#include <system_error>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Context.h>
#include <ATen/core/Generator.h>
#include <c10/core/GradMode.h>
#include <torch/serialize/archive.h>

#include "timm/base/error.hpp"
#include "timm/base/python_repr.hpp"
#include "timm/io/atomic_file.hpp"
#include "timm/io/safetensors.hpp"
#include "timm/log/log.hpp"
#include "timm/models/state_dict.hpp"
#include "timm/train/amp.hpp"
#include "timm/train/model_ema.hpp"

namespace timm {
namespace {

namespace fs = std::filesystem;

constexpr const char* kWeightsExt = ".safetensors";
constexpr const char* kStateExt = ".state.pt";
constexpr const char* kKeptPrefix = "checkpoint-";

// The stem of the checkpoint kept for `epoch` (--checkpoint-hist).
std::string kept_stem(int64_t epoch) { return kKeptPrefix + std::to_string(epoch); }

std::string new_checkpoint_id() {
  std::random_device rd;
  const auto now = std::chrono::system_clock::now().time_since_epoch().count();
  return std::to_string(now) + "-" + std::to_string(rd());
}

// The archive key of rank `rank`'s RNG state of `generator` ("cpu" or
// "cuda"): rank 0's CPU state keeps the name it had when only rank 0's was
// saved, so that either version reads the other's.
std::string rng_key(int64_t rank, const std::string& generator = "cpu") {
  return rank == 0 ? "rng_" + generator : "rng_" + generator + "_rank" + std::to_string(rank);
}

// Every rank's RNG states and their count: timm seeds each rank with seed +
// rank, so a model that draws on every rank (drop path, dropout) resumes
// exactly only if each rank gets its own state back.
void write_rng_states(torch::serialize::OutputArchive& archive, const RngStates& rng_states) {
  const std::vector<at::Tensor> states =
      rng_states.cpu.empty() ? std::vector<at::Tensor>{cpu_rng_state()} : rng_states.cpu;
  for (std::size_t rank = 0; rank < states.size(); ++rank) {
    archive.write(rng_key(static_cast<int64_t>(rank)), states[rank].cpu());
  }
  for (std::size_t rank = 0; rank < rng_states.cuda.size(); ++rank) {
    archive.write(rng_key(static_cast<int64_t>(rank), "cuda"), rng_states.cuda[rank].cpu());
  }
  archive.write("rng_world_size", c10::IValue(static_cast<int64_t>(states.size())));
}

void write_named_tensors(torch::serialize::OutputArchive& archive, const NamedTensors& tensors) {
  for (const auto& [name, tensor] : tensors) archive.write(name, tensor.detach().cpu());
}

// The key of a recovery checkpoint's EpochPosition archive; a state file
// without it resumes at the next epoch.
constexpr const char* kPositionKey = "epoch_position";

void write_epoch_position(torch::serialize::OutputArchive& archive, const EpochPosition& position) {
  torch::serialize::OutputArchive position_archive;
  position_archive.write("updates_done", c10::IValue(position.updates_done));
  position_archive.write("updates_per_epoch", c10::IValue(position.updates_per_epoch));
  position_archive.write("batches_done", c10::IValue(position.batches_done));
  position_archive.write("batch_rng", c10::IValue(position.batch_rng));
  position_archive.write("mixup_rng", c10::IValue(position.mixup_rng));
  position_archive.write("train_loss", position.train_loss.detach().cpu());
  if (!position.rank_buffers.empty()) {
    torch::serialize::OutputArchive buffers_archive;
    write_named_tensors(buffers_archive, position.rank_buffers);
    position_archive.write("rank_buffers", buffers_archive);
  }
  archive.write(kPositionKey, position_archive);
}

std::string serialize_state(const CheckpointParts& parts, const TrainingState& state, const std::string& id) {
  torch::serialize::OutputArchive archive;
  torch::serialize::OutputArchive optimizer_archive;
  parts.optimizer.save(optimizer_archive);
  archive.write("optimizer", optimizer_archive);
  if (parts.ema) {
    torch::serialize::OutputArchive ema_archive;
    write_named_tensors(ema_archive, state_dict(*parts.ema->module()));
    archive.write("ema", ema_archive);
    if (!parts.ema->task_state().empty()) {
      torch::serialize::OutputArchive task_ema_archive;
      write_named_tensors(task_ema_archive, parts.ema->task_state());
      archive.write("task_state_ema", task_ema_archive);
    }
  }
  if (parts.scaler) {
    torch::serialize::OutputArchive scaler_archive;
    parts.scaler->save(scaler_archive);
    archive.write("scaler", scaler_archive);
  }
  if (!parts.task_state.empty()) {
    torch::serialize::OutputArchive task_archive;
    write_named_tensors(task_archive, parts.task_state);
    archive.write("task_state", task_archive);
  }
  archive.write("epoch", c10::IValue(state.epoch));
  if (state.metric) archive.write("metric", c10::IValue(*state.metric));
  archive.write("metric_name", c10::IValue(state.metric_name));
  archive.write("config_toml", c10::IValue(state.config_toml));
  archive.write("checkpoint_id", c10::IValue(id));
  write_rng_states(archive, parts.rng_states);
  if (state.position) write_epoch_position(archive, *state.position);
  std::string bytes;
  archive.save_to([&bytes](const void* data, std::size_t size) {
    bytes.append(static_cast<const char*>(data), size);
    return size;
  });
  return bytes;
}

void remove_checkpoint(const fs::path& dir, const std::string& stem) {
  std::error_code ec;
  fs::remove(dir / (stem + kWeightsExt), ec);
  fs::remove(dir / (stem + kStateExt), ec);
}

// "<dir>/last" from "<dir>/last.safetensors", "<dir>/last.state.pt" or itself.
fs::path checkpoint_stem(const fs::path& path) {
  const std::string s = path.string();
  for (const std::string ext : {kWeightsExt, kStateExt}) {
    if (s.size() > ext.size() && s.compare(s.size() - ext.size(), ext.size(), ext) == 0) {
      return s.substr(0, s.size() - ext.size());
    }
  }
  return path;
}

torch::serialize::InputArchive read_state_archive(const fs::path& file) {
  torch::serialize::InputArchive archive;
  try {
    archive.load_from(file.string());
  } catch (const std::exception& e) {
    throw Error(file.string() + ": not a timm-cpp training state file (" + e.what() + ")");
  }
  return archive;
}

std::string state_id(torch::serialize::InputArchive& archive, const fs::path& file) {
  c10::IValue id;
  if (!archive.try_read("checkpoint_id", id)) {
    throw Error(file.string() + ": not a timm-cpp training state file (no checkpoint id)");
  }
  return id.toStringRef();
}

// Copies each of `targets` from the tensor of its name in `saved`; `what`
// names them in the error for a missing one.
void copy_by_name(const NamedTensors& targets, torch::serialize::InputArchive& saved, const fs::path& file,
                  const std::string& what) {
  for (const auto& [name, value] : targets) {
    at::Tensor tensor;
    if (!saved.try_read(name, tensor)) throw Error(file.string() + ": " + what + " lack " + in_quotes(name));
    value.copy_(tensor);
  }
}

void load_ema(torch::serialize::InputArchive& archive, ModelEma& ema, const fs::path& file) {
  torch::serialize::InputArchive ema_archive;
  if (!archive.try_read("ema", ema_archive)) {
    throw Error(file.string() + ": has no EMA weights to resume --model-ema from");
  }
  torch::NoGradGuard no_grad;
  copy_by_name(state_dict(*ema.module()), ema_archive, file, "EMA weights");
  if (ema.task_state().empty()) return;
  torch::serialize::InputArchive task_archive;
  if (!archive.try_read("task_state_ema", task_archive)) {
    // Saved before the EMA followed the task state: it starts again from the
    // resumed task state, not from the new run's initial one.
    log_warning(file.string() + ": has no EMA of the task state; it restarts from the checkpoint's task state");
    archive.try_read("task_state", task_archive);
  }
  copy_by_name(ema.task_state(), task_archive, file, "the EMA's task state");
}

// The task state a checkpoint saved; empty when it saved none.
NamedTensors read_task_state(torch::serialize::InputArchive& archive) {
  NamedTensors state;
  torch::serialize::InputArchive task_archive;
  if (!archive.try_read("task_state", task_archive)) return state;
  for (const std::string& name : task_archive.keys()) {
    at::Tensor tensor;
    task_archive.read(name, tensor);
    state.emplace_back(name, std::move(tensor));
  }
  return state;
}

// The state written for checkpoint `id` before its weights; named by the id
// so that a later save cannot overwrite the state an earlier, interrupted
// save still needs.
fs::path pending_state_file(const fs::path& state_file, const std::string& id) {
  return state_file.string() + "." + id;
}

// Leftover pending states of saves killed before their last step.
void remove_pending_states(const fs::path& state_file) {
  const std::string prefix = state_file.filename().string() + ".";
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(state_file.parent_path(), ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(prefix, 0) == 0) fs::remove(entry.path(), ec);
  }
}

// Three atomic steps, so that a crash or a failure (a full disk) at any point
// leaves a loadable pair: the state goes to <stem>.state.pt.<id>, the
// weights replace <stem>.safetensors, then the state takes its place. Killed
// after the weights, the new state is found by the id the weights carry;
// killed before, the old pair is intact.
void replace_checkpoint(const fs::path& state_file, const std::string& id,
                        const std::function<void(const fs::path&)>& write_state,
                        const std::function<void()>& write_weights) {
  const fs::path pending = pending_state_file(state_file, id);
  write_state(pending);
  try {
    write_weights();
  } catch (...) {
    // The old weights still name the old state, so the new one is of no use;
    // on a full disk its space is wanted back.
    std::error_code ec;
    fs::remove(pending, ec);
    throw;
  }
  std::error_code ec;
  fs::rename(pending, state_file, ec);
  if (ec) {
    throw Error("cannot rename training state file '" + pending.string() + "' to '" + state_file.string() +
                "': " + ec.message());
  }
  remove_pending_states(state_file);
}

// save_checkpoint; returns the checkpoint id.
std::string save_pair(const fs::path& dir, const std::string& stem, const CheckpointParts& parts,
                      const TrainingState& state) {
  const std::string id = new_checkpoint_id();
  replace_checkpoint(
      dir / (stem + kStateExt), id,
      [&](const fs::path& file) {
        write_file_atomically(file, serialize_state(parts, state, id), "training state file");
      },
      [&] {
        write_safetensors(dir / (stem + kWeightsExt), state_dict(parts.model),
                          {{"format", "pt"}, {"checkpoint_id", id}, {"epoch", std::to_string(state.epoch)}});
      });
  return id;
}

// Hard-links `from` as `to`, falling back to a copy where the file system has
// no hard links, as timm's saver. Either replaces `to` in one rename: a
// failure leaves the old `to`.
void link_or_copy(const fs::path& from, const fs::path& to, const std::string& what) {
  // Appended piece by piece: "." + string&& trips g++ 12's -Wstringop-overflow.
  std::string temp_name = ".";
  temp_name += to.filename().string();
  temp_name += ".tmp-link";
  const fs::path temp = to.parent_path() / temp_name;
  std::error_code ec;
  fs::remove(temp, ec);
  fs::create_hard_link(from, temp, ec);
  if (ec) return copy_file_atomically(from, to, what);
  fs::rename(temp, to, ec);
  std::error_code ignored;
  fs::remove(temp, ignored);  // left when `to` already was the same file
  if (ec) throw Error("cannot write " + what + " '" + to.string() + "': cannot rename a link to it: " + ec.message());
}

// Makes <to_stem> a copy of the checkpoint <from_stem> (id `id`) by the same
// steps as a save, so that a failure leaves the old <to_stem> loadable.
void link_checkpoint(const fs::path& dir, const std::string& from_stem, const std::string& to_stem,
                     const std::string& id) {
  replace_checkpoint(
      dir / (to_stem + kStateExt), id,
      [&](const fs::path& file) { link_or_copy(dir / (from_stem + kStateExt), file, "training state file"); },
      [&] { link_or_copy(dir / (from_stem + kWeightsExt), dir / (to_stem + kWeightsExt), "safetensors file"); });
}

}  // namespace

at::Tensor cpu_rng_state() {
  at::Generator generator = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(generator.mutex());
  return generator.get_state();
}

at::Tensor cuda_rng_state(const torch::Device& device) {
  if (!device.is_cuda()) throw Error("cuda_rng_state: " + device.str() + " is not a CUDA device");
  at::Generator generator = at::globalContext().defaultGenerator(device);
  std::lock_guard<std::mutex> lock(generator.mutex());
  return generator.get_state();
}

void save_checkpoint(const fs::path& dir, const std::string& stem, const CheckpointParts& parts,
                     const TrainingState& state) {
  save_pair(dir, stem, parts, state);
}

CheckpointSaver::CheckpointSaver(fs::path dir, bool decreasing, int64_t max_history)
    : dir_(std::move(dir)), decreasing_(decreasing), max_history_(std::max<int64_t>(0, max_history)) {}

std::pair<double, int64_t> CheckpointSaver::save(const CheckpointParts& parts, const TrainingState& state) {
  if (!state.metric) throw Error("CheckpointSaver::save needs the epoch's metric");
  const double metric = *state.metric;
  const std::string id = save_pair(dir_, "last", parts, state);
  keep_if_among_best(kept_stem(state.epoch), metric, id);
  if (!best_ || better(metric, best_->first)) {
    best_ = {metric, state.epoch};
    link_checkpoint(dir_, "last", "model_best", id);
  }
  return *best_;
}

// timm's top --checkpoint-hist: the new checkpoint is kept (a link of
// `last`) if it ranks among the best max_history, after the equal ones kept
// before it; the files ranked past max_history are removed: the one it
// pushes out, or several after resume_history() took in more files than
// --checkpoint-hist. The link comes first, so a failed one removes nothing.
void CheckpointSaver::keep_if_among_best(const std::string& stem, double metric, const std::string& id) {
  std::vector<std::pair<std::string, double>> ranked = kept_;
  ranked.emplace_back(stem, metric);
  std::stable_sort(ranked.begin(), ranked.end(),
                   [this](const auto& a, const auto& b) { return better(a.second, b.second); });
  const auto limit = static_cast<std::size_t>(max_history_);
  const auto position = std::find_if(ranked.begin(), ranked.end(), [&](const auto& k) { return k.first == stem; });
  const bool keep = static_cast<std::size_t>(position - ranked.begin()) < limit;
  if (keep) {
    link_checkpoint(dir_, "last", stem, id);
  } else {
    ranked.erase(position);
  }
  const bool prune = ranked.size() > limit;
  for (std::size_t i = limit; i < ranked.size(); ++i) remove_checkpoint(dir_, ranked[i].first);
  if (prune) ranked.erase(ranked.begin() + static_cast<std::ptrdiff_t>(limit), ranked.end());
  kept_ = std::move(ranked);
  if (keep || prune) log_checkpoints();
}

void CheckpointSaver::log_checkpoints() const {
  std::string text = "Current checkpoints:\n";
  for (const auto& [stem, metric] : kept_) {
    text += " ('" + (dir_ / (stem + kWeightsExt)).string() + "', " + python_float_repr(metric) + ")\n";
  }
  log_info(text);
}

void CheckpointSaver::save_recovery(const CheckpointParts& parts, const TrainingState& state, int64_t batch_idx) {
  const std::string stem = "recovery-" + std::to_string(state.epoch) + "-" + std::to_string(batch_idx);
  save_checkpoint(dir_, stem, parts, state);
  recovery_stems_.push_back(stem);
  if (recovery_stems_.size() > 2) {
    remove_checkpoint(dir_, recovery_stems_.front());
    recovery_stems_.erase(recovery_stems_.begin());
  }
}

namespace {

// N of a file named checkpoint-N.safetensors or checkpoint-N.state.pt (N as
// the saver writes it: no sign, no leading zero).
std::optional<int64_t> kept_checkpoint_epoch(const std::string& name) {
  const std::string_view prefix = kKeptPrefix;
  if (!name.starts_with(prefix)) return std::nullopt;
  for (const std::string_view ext : {kWeightsExt, kStateExt}) {
    if (!name.ends_with(ext)) continue;
    const char* first = name.data() + prefix.size();
    const char* last = name.data() + name.size() - ext.size();
    int64_t epoch = -1;
    if (first >= last) continue;
    const auto [end, ec] = std::from_chars(first, last, epoch);
    // Round trip: exactly the name kept_stem() writes.
    if (ec == std::errc() && end == last && epoch >= 0 && kept_stem(epoch) + std::string(ext) == name) return epoch;
  }
  return std::nullopt;
}

// The metric a checkpoint's state file saved; none when the file is missing
// or unreadable (torn, foreign), or its metric is missing or NaN (which
// cannot be ranked). Reading it loads the whole state, once per file and at
// resume only.
std::optional<double> saved_metric(const fs::path& state_file) {
  try {
    torch::serialize::InputArchive archive = read_state_archive(state_file);
    c10::IValue metric;
    if (archive.try_read("metric", metric) && metric.isDouble() && !std::isnan(metric.toDouble())) {
      return metric.toDouble();
    }
  } catch (const std::exception&) {
    // Ranked as a file without a metric: pruning it early costs a file the
    // run could not resume from anyway.
  }
  return std::nullopt;
}

}  // namespace

void CheckpointSaver::resume_history(int64_t start_epoch) {
  std::set<int64_t> epochs;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir_, ec)) {
    const auto epoch = kept_checkpoint_epoch(entry.path().filename().string());
    if (epoch && *epoch < start_epoch) epochs.insert(*epoch);
  }
  // In epoch order: equal metrics rank as the run saved them, oldest first.
  std::vector<std::pair<std::string, double>> ranked;
  std::vector<std::string> without_metric;
  for (const int64_t epoch : epochs) {
    const std::string stem = kept_stem(epoch);
    if (const auto metric = saved_metric(dir_ / (stem + kStateExt))) {
      ranked.emplace_back(stem, *metric);
    } else {
      without_metric.push_back(stem);
    }
  }
  std::stable_sort(ranked.begin(), ranked.end(),
                   [this](const auto& a, const auto& b) { return better(a.second, b.second); });
  // A file without a metric cannot be ranked among the others: it goes last,
  // with the worst metric, the newest first, so that pruning removes the
  // oldest first (a run's later epochs are usually its better ones).
  const double worst = decreasing_ ? std::numeric_limits<double>::infinity() : -std::numeric_limits<double>::infinity();
  for (auto it = without_metric.rbegin(); it != without_metric.rend(); ++it) ranked.emplace_back(*it, worst);
  kept_ = std::move(ranked);
  if (!kept_.empty()) log_checkpoints();
}

namespace {

// The state file whose checkpoint id is `id`: <stem>.state.pt, or the
// pending <stem>.state.pt.<id> of a save killed between its last two steps.
fs::path matching_state_file(const fs::path& state_file, const std::string& id, const fs::path& weights_file) {
  const fs::path pending = pending_state_file(state_file, id);
  for (const auto& candidate : {state_file, pending}) {
    if (!fs::exists(candidate)) continue;
    torch::serialize::InputArchive archive = read_state_archive(candidate);
    if (state_id(archive, candidate) == id) return candidate;
  }
  throw Error(weights_file.string() + ": no training state file beside it matches it (looked for " +
              state_file.string() + " and " + pending.string() + ")");
}

// The number of ranks whose CPU RNG states the checkpoint holds; 0 for a
// checkpoint from before per-rank states (rank 0's state alone).
int64_t saved_rng_world_size(torch::serialize::InputArchive& archive, const fs::path& file) {
  c10::IValue value;
  if (!archive.try_read("rng_world_size", value)) return 0;
  if (!value.isInt() || value.toInt() < 1) {
    throw Error(file.string() +
                ": rng_world_size is not a positive integer (the number of ranks whose RNG states "
                "the checkpoint holds)");
  }
  return value.toInt();
}

// Sets `generator` (the CPU's or a CUDA device's) to the checkpoint's `key`.
void set_rng_state(at::Generator generator, const at::Tensor& state, const fs::path& file, const std::string& key) {
  std::lock_guard<std::mutex> lock(generator.mutex());
  try {
    generator.set_state(state);
  } catch (const c10::Error& e) {
    throw Error(file.string() + ": " + key + " is not a torch " + generator.device().str() + " RNG state (" +
                e.what_without_backtrace() + ")");
  }
}

// This rank's CUDA generator state, where the checkpoint holds one; a
// checkpoint written on the CPU holds none, and its CPU states do not
// reproduce a CUDA device's draws.
void restore_cuda_rng(torch::serialize::InputArchive& archive, const fs::path& file, int rank,
                      const torch::Device& device) {
  const std::string key = rng_key(rank, "cuda");
  at::Tensor state;
  if (archive.try_read(key, state)) {
    set_rng_state(at::globalContext().defaultGenerator(device), state, file, key);
  } else if (rank == 0) {
    log_warning(file.string() +
                " holds no CUDA RNG state (written by a run on the CPU, or before they were saved): "
                "the resumed run's random draws on the GPU (drop path, dropout) will differ from an uninterrupted "
                "run's");
  }
}

// This rank's CPU RNG state, where the checkpoint holds one. A rank without
// one keeps its own (seeded seed + rank, as a fresh start) rather than
// another rank's: two ranks drawing the same masks would correlate them.
void restore_cpu_rng(torch::serialize::InputArchive& archive, const fs::path& file, int rank, int world_size) {
  const int64_t saved_world_size = saved_rng_world_size(archive, file);
  const std::string key = rng_key(rank);
  at::Tensor state;
  if (archive.try_read(key, state)) set_rng_state(at::detail::getDefaultCPUGenerator(), state, file, key);
  // An old checkpoint holds rank 0's state: exact for a single process.
  const bool exact = saved_world_size == world_size || (saved_world_size == 0 && world_size == 1);
  if (exact || rank != 0) return;
  auto ranks = [](int64_t n) { return format("%lld rank%s", static_cast<long long>(n), n == 1 ? "" : "s"); };
  const std::string held = saved_world_size == 0
                               ? "rank 0's CPU RNG state only (written before per-rank states were saved)"
                               : "the CPU RNG states of " + ranks(saved_world_size);
  log_warning(file.string() + " holds " + held + "; this run has " + ranks(world_size) +
              ": ranks without a saved state keep their own, so the resumed run's random draws (drop path, dropout) "
              "will differ from an uninterrupted run's");
}

// An integer of a recovery checkpoint's position.
int64_t read_position_int(torch::serialize::InputArchive& archive, const std::string& key, const fs::path& file) {
  c10::IValue value;
  if (!archive.try_read(key, value) || !value.isInt()) {
    throw Error(file.string() + ": " + kPositionKey + " has no integer " + in_quotes(key));
  }
  return value.toInt();
}

std::string read_position_string(torch::serialize::InputArchive& archive, const std::string& key,
                                 const fs::path& file) {
  c10::IValue value;
  if (!archive.try_read(key, value) || !value.isString()) {
    throw Error(file.string() + ": " + kPositionKey + " has no string " + in_quotes(key));
  }
  return value.toStringRef();
}

// A recovery checkpoint's position in its epoch; none for a checkpoint of an
// epoch's end or one written before positions were saved.
std::optional<EpochPosition> read_epoch_position(torch::serialize::InputArchive& archive, const fs::path& file) {
  torch::serialize::InputArchive position_archive;
  if (!archive.try_read(kPositionKey, position_archive)) return std::nullopt;
  EpochPosition position;
  position.updates_done = read_position_int(position_archive, "updates_done", file);
  position.updates_per_epoch = read_position_int(position_archive, "updates_per_epoch", file);
  position.batches_done = read_position_int(position_archive, "batches_done", file);
  position.batch_rng = read_position_string(position_archive, "batch_rng", file);
  position.mixup_rng = read_position_string(position_archive, "mixup_rng", file);
  if (!position_archive.try_read("train_loss", position.train_loss) || position.train_loss.dim() != 2 ||
      position.train_loss.size(1) != 2 || position.train_loss.scalar_type() != at::kDouble) {
    throw Error(file.string() + ": " + kPositionKey +
                " has no train_loss of float64 (world size, 2) rows (loss sum, sample count)");
  }
  torch::serialize::InputArchive buffers_archive;
  if (position_archive.try_read("rank_buffers", buffers_archive)) {
    for (const std::string& name : buffers_archive.keys()) {
      at::Tensor tensor;
      buffers_archive.read(name, tensor);
      position.rank_buffers.emplace_back(name, std::move(tensor));
    }
  }
  if (position.updates_done < 1 || position.updates_done > position.updates_per_epoch || position.batches_done < 1) {
    throw Error(file.string() + ": " + kPositionKey + " says " + std::to_string(position.updates_done) + " of " +
                std::to_string(position.updates_per_epoch) + " updates and " + std::to_string(position.batches_done) +
                " batches done: not a position in an epoch");
  }
  return position;
}

}  // namespace

int64_t resume_checkpoint(const fs::path& path, const ResumeTargets& targets) {
  const ResumePoint point = resume_checkpoint_at(path, targets);
  return point.position ? point.epoch + 1 : point.epoch;
}

ResumePoint resume_checkpoint_at(const fs::path& path, const ResumeTargets& targets) {
  const fs::path stem = checkpoint_stem(path);
  const fs::path weights_file = stem.string() + kWeightsExt;
  if (!fs::exists(weights_file))
    throw Error("--resume " + path.string() + ": " + weights_file.string() + " does not exist");
  const SafetensorsFile weights = read_safetensors_file(weights_file);
  const auto it = weights.metadata.find("checkpoint_id");
  if (it == weights.metadata.end()) {
    throw Error(weights_file.string() + ": not a timm-cpp checkpoint (no checkpoint_id in its metadata)");
  }
  const fs::path matching_state = matching_state_file(stem.string() + kStateExt, it->second, weights_file);
  torch::serialize::InputArchive archive = read_state_archive(matching_state);
  c10::IValue epoch;
  if (!archive.try_read("epoch", epoch)) throw Error(matching_state.string() + ": has no epoch");
  ResumePoint point;
  point.position = read_epoch_position(archive, matching_state);
  point.epoch = point.position ? epoch.toInt() : epoch.toInt() + 1;
  load_state_dict(targets.model, weights.tensors, /*strict=*/true);
  // Before the optimizer: a task of another kind is named as such, not by
  // its optimizer's other parameter groups.
  if (targets.load_task_state) {
    try {
      targets.load_task_state(read_task_state(archive));
    } catch (const Error& e) {
      throw Error(matching_state.string() + ": " + e.what());
    }
  }
  if (targets.optimizer) {
    torch::serialize::InputArchive optimizer_archive;
    archive.read("optimizer", optimizer_archive);
    targets.optimizer->load(optimizer_archive);
  }
  if (targets.ema) load_ema(archive, *targets.ema, matching_state);
  if (targets.scaler) {
    torch::serialize::InputArchive scaler_archive;
    if (archive.try_read("scaler", scaler_archive)) targets.scaler->load(scaler_archive);
  }
  restore_cpu_rng(archive, matching_state, targets.rank, targets.world_size);
  if (targets.device.is_cuda()) restore_cuda_rng(archive, matching_state, targets.rank, targets.device);
  log_info(format("Loaded checkpoint '%s' (epoch %lld)", weights_file.string().c_str(),
                  static_cast<long long>(epoch.toInt())));
  return point;
}

bool load_ema_weights(torch::nn::Module& model, const fs::path& weights) {
  const fs::path stem = checkpoint_stem(weights);
  const fs::path state_file = stem.string() + kStateExt;
  const fs::path weights_file = stem.string() + kWeightsExt;
  if (!fs::exists(state_file)) return false;
  const SafetensorsFile file = read_safetensors_file(weights_file);
  const auto id = file.metadata.find("checkpoint_id");
  if (id == file.metadata.end()) return false;  // not written by timm-run: no state of its own
  const fs::path matching_state = matching_state_file(state_file, id->second, weights_file);
  torch::serialize::InputArchive archive = read_state_archive(matching_state);
  torch::serialize::InputArchive ema_archive;
  if (!archive.try_read("ema", ema_archive)) return false;
  torch::NoGradGuard no_grad;
  copy_by_name(state_dict(model), ema_archive, matching_state, "EMA weights");
  return true;
}

std::optional<fs::path> newest_checkpoint(const fs::path& dir) {
  std::optional<fs::path> newest;
  fs::file_time_type newest_time;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    const bool candidate =
        name == std::string("last") + kWeightsExt || (name.rfind("recovery-", 0) == 0 && name.ends_with(kWeightsExt));
    if (!candidate) continue;
    const auto time = entry.last_write_time(ec);
    if (!newest || time > newest_time) {
      newest = entry.path();
      newest_time = time;
    }
  }
  return newest;
}

}  // namespace timm
