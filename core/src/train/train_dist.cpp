// The distributed side of a run (timm::dist): device, process group, SyncBN,
// DDP, BatchNorm statistics at epoch ends, and the closing checks.
#include <algorithm>
#include <chrono>
#include <cstdlib>

#include <torch/cuda.h>

#include "timm/base/error.hpp"
#include "timm/base/names.hpp"
#include "timm/dist/setup_check.hpp"
#include "timm/dist/sync_batchnorm.hpp"
#include "timm/log/log.hpp"
#include "trainer_internal.hpp"

namespace timm::train_detail {
namespace {

// Every rank must end with rank 0's parameters (DDP keeps them in step); a
// difference means a bug or a rank that trained differently, so it is an
// error rather than silently saving rank 0's. Each rank logs the checksum.
void check_identical_parameters(torch::nn::Module& model, const Distributed& dist) {
  uint64_t checksum = 0;
  for (const auto& p : model.parameters()) {
    const at::Tensor bytes = p.detach().to(at::kCPU).contiguous();
    checksum = checksum * 1099511628211ULL ^
               dist::fnv1a(std::string_view(static_cast<const char*>(bytes.data_ptr()), bytes.nbytes()));
  }
  log_info_all_ranks(
      format("Rank %d final parameter checksum %016llx", dist.world.rank, static_cast<unsigned long long>(checksum)));
  // Two halves as doubles compare exactly after a SUM of rank 0 - rank r.
  std::vector<double> parts{static_cast<double>(checksum >> 32), static_cast<double>(checksum & 0xffffffffULL)};
  std::vector<double> sums = parts;
  dist.sum(sums, "allreduce of the final parameter checksums");
  if (sums[0] != parts[0] * dist.size() || sums[1] != parts[1] * dist.size()) {
    throw Error(format("rank %d: the final parameters differ between ranks (checksum %016llx here)", dist.world.rank,
                       static_cast<unsigned long long>(checksum)));
  }
}

// TIMM_BENCH_SKIP_ALLREDUCE=1 (bench/distributed.py only): DDP's hooks run
// but the gradients stay local, to time a step without communication.
bool bench_skips_allreduce() {
  const char* skip = std::getenv("TIMM_BENCH_SKIP_ALLREDUCE");
  return skip != nullptr && std::string(skip) == "1";
}

}  // namespace

void Distributed::sum(std::vector<double>& values, const std::string& what) const {
  if (!active() || values.empty()) return;
  std::vector<at::Tensor> io{at::tensor(values, at::TensorOptions().dtype(at::kDouble).device(device))};
  group->wait(group->comm()->allreduce(io), what);
  const at::Tensor sums = io[0].cpu();
  std::copy(sums.data_ptr<double>(), sums.data_ptr<double>() + values.size(), values.begin());
}

double Distributed::mean(double value, const std::string& what) const {
  std::vector<double> values{value};
  sum(values, what);
  return values[0] / static_cast<double>(size());
}

// As timm's init_distributed_device: in a distributed run the CUDA device
// index is the local rank (a user-given index is dropped).
torch::Device resolve_device(const TrainArgs& args, const dist::WorldInfo& world) {
  const std::string& requested = args.device;
  const torch::Device device(requested);
  if (device.is_cuda() && !torch::cuda::is_available()) {
    if (args.device_is_explicit) {
      throw UsageError("--device " + requested + ": CUDA is not available on this machine");
    }
    return torch::Device(torch::kCPU);  // timm's default 'cuda', on a machine without a GPU
  }
  if (device.is_cuda() && world.distributed()) {
    if (device.has_index() && device.index() != world.local_rank) {
      log_warning(
          format("device index %d removed from specified (%s).", static_cast<int>(device.index()), requested.c_str()));
    }
    return torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(world.local_rank));
  }
  return device;
}

void start_process_group(const TrainArgs& args, const torch::Device& device, Distributed& dist) {
  setup_logging(dist.world.rank, dist.world.world_size);
  dist.device = device;
  dist.group =
      dist::ProcessGroup::create(dist.world, device, {args.dist_backend, std::chrono::seconds(args.dist_timeout)});
  log_info_all_ranks(
      format("Training in distributed mode with multiple processes, 1 device per process.Process %d, "
             "total %d, device %s.",
             dist.world.rank, dist.world.world_size, device.str().c_str()));
}

bool uses_sync_bn(const TrainArgs& args, const Distributed& dist) { return dist.active() && args.sync_bn; }

void convert_to_sync_bn(torch::nn::Module& model, const Distributed& dist) {
  dist::convert_sync_batchnorm(model, dist.group->comm());
  log_info(
      "Converted model to use Synchronized BatchNorm. WARNING: You may have issues if using zero initialized BN "
      "layers (enabled by default for ResNets) while sync-bn enabled.");
}

void wrap_ddp(const TrainArgs& args, torch::nn::Module& model, bool sync_bn, Distributed& dist) {
  dist::DdpOptions ddp_options;
  ddp_options.bucket_cap_bytes = static_cast<int64_t>(args.ddp_bucket_cap_mb * 1024.0 * 1024.0);
  ddp_options.find_unused_parameters = args.ddp_find_unused_parameters;
  // SyncBatchNorm keeps the statistics in step already.
  ddp_options.broadcast_buffers = !args.no_ddp_bb && !sync_bn;
  dist.ddp = std::make_unique<dist::DistributedDataParallel>(model, dist.group->comm(), ddp_options, dist.group.get());
  log_info(format("Using native DDP (our reducer): %zu gradient buckets, %.2f MiB of gradients.",
                  dist.ddp->bucket_parameter_names().size(), dist.ddp->gradient_bytes() / 1048576.0));
  // For bench/distributed.py only: the step time without communication.
  if (bench_skips_allreduce()) {
    log_warning("TIMM_BENCH_SKIP_ALLREDUCE=1: gradients are NOT averaged over ranks (benchmark mode)");
    dist.ddp->set_skip_allreduce(true);
  }
}

// train.py turns --dist-bn off under --sync-bn.
std::optional<dist::DistBnMode> dist_bn_mode(const TrainArgs& args, const Distributed& dist, bool sync_bn) {
  if (!dist.active() || sync_bn) return std::nullopt;
  return dist::parse_dist_bn(args.dist_bn);
}

void distribute_bn_statistics(torch::nn::Module& model, const ModelEma* ema, const Distributed& dist,
                              dist::DistBnMode mode) {
  log_info("Distributing BatchNorm running means and vars");
  dist::distribute_bn(model, dist.group->comm(), mode);
  if (ema) dist::distribute_bn(*ema->module(), dist.group->comm(), mode);
}

namespace {

// Every rank's `mine` in rank order (collective in a distributed run).
std::vector<at::Tensor> gather_rng_state(const at::Tensor& mine, const Distributed& dist, const char* generator) {
  if (!dist.active()) return {mine};
  // On the training device, as the other collectives; the states have one
  // size on every rank.
  std::vector<at::Tensor> input{mine.to(dist.device)};
  std::vector<std::vector<at::Tensor>> output(1);
  for (int r = 0; r < dist.size(); ++r) output[0].push_back(at::empty_like(input[0]));
  dist.group->wait(dist.group->comm()->allgather(output, input),
                   std::string("allgather of the ") + generator + " RNG states for a checkpoint");
  std::vector<at::Tensor> states;
  for (const at::Tensor& state : output[0]) states.push_back(state.to(at::kCPU));
  return states;
}

}  // namespace

RngStates rng_states(const Distributed& dist) {
  RngStates states;
  states.cpu = gather_rng_state(cpu_rng_state(), dist, "CPU");
  if (dist.device.is_cuda()) states.cuda = gather_rng_state(cuda_rng_state(dist.device), dist, "CUDA");
  return states;
}

namespace {

// Appends, on the primary rank, ranks 1 and up's buffers of `module` as
// "rank<r>.<prefix>.<name>" (one allgather per buffer, on the training device).
void gather_rank_buffers(const torch::nn::Module& module, const std::string& prefix, const Distributed& dist,
                         NamedTensors& out) {
  for (const auto& item : module.named_buffers(/*recurse=*/true)) {
    const at::Tensor& buffer = item.value();
    if (!buffer.defined()) continue;
    std::vector<at::Tensor> input{buffer.detach().to(dist.device).reshape({-1}).contiguous()};
    std::vector<std::vector<at::Tensor>> output(1);
    for (int r = 0; r < dist.size(); ++r) output[0].push_back(at::empty_like(input[0]));
    dist.group->wait(dist.group->comm()->allgather(output, input),
                     "allgather of the buffers " + in_quotes(item.key()) + " for a recovery checkpoint");
    if (!dist.is_primary()) continue;
    for (int r = 1; r < dist.size(); ++r) {
      out.emplace_back(format("rank%d.%s.%s", r, prefix.c_str(), item.key().c_str()),
                       output[0][static_cast<std::size_t>(r)].reshape(buffer.sizes()).to(at::kCPU));
    }
  }
}

// Copies this rank's saved buffers of `module` ("rank<r>.<prefix>.<name>").
void restore_buffers_of(torch::nn::Module& module, const std::string& prefix, const NamedTensors& saved, int rank,
                        const std::string& file) {
  const at::NoGradGuard no_grad;
  for (auto& item : module.named_buffers(/*recurse=*/true)) {
    at::Tensor& buffer = item.value();
    if (!buffer.defined()) continue;
    const std::string key = format("rank%d.%s.%s", rank, prefix.c_str(), item.key().c_str());
    const auto it = std::find_if(saved.begin(), saved.end(), [&](const auto& named) { return named.first == key; });
    if (it == saved.end() || it->second.sizes() != buffer.sizes()) {
      const std::string shape = joined_ints(buffer.sizes(), 'x');
      throw Error(file + ": the recovery checkpoint has no buffer " + in_quotes(key) + " shaped as this rank's (" +
                  shape + ")");
    }
    buffer.copy_(it->second);
  }
}

}  // namespace

NamedTensors other_ranks_buffers(const torch::nn::Module& model, const ModelEma* ema, const Distributed& dist) {
  NamedTensors buffers;
  if (!dist.active()) return buffers;
  gather_rank_buffers(model, "model", dist, buffers);
  if (ema) gather_rank_buffers(*ema->module(), "ema", dist, buffers);
  return buffers;
}

void restore_rank_buffers(const NamedTensors& saved, torch::nn::Module& model, ModelEma* ema, const Distributed& dist,
                          const std::string& file) {
  if (!dist.active() || dist.is_primary()) return;
  restore_buffers_of(model, "model", saved, dist.world.rank, file);
  if (ema) restore_buffers_of(*ema->module(), "ema", saved, dist.world.rank, file);
}

void check_stop() {
  if (const int signal = dist::stop_requested(); signal != 0) throw dist::Interrupted(signal);
}

// How much of the all-reduce time backward hid, then the parameter check.
void finish_distributed(torch::nn::Module& model, Distributed& dist) {
  if (!dist.active()) return;
  if (dist.ddp && dist.ddp->reduced_backwards() > 0) {
    const double alone = dist.ddp->time_allreduce_alone(3);
    const double waited = dist.ddp->reduce_wait_seconds() / static_cast<double>(dist.ddp->reduced_backwards());
    log_info(
        format("DDP: %.1f ms per step waiting for all-reduces after backward; the same all-reduces alone take "
               "%.1f ms (%.0f%% hidden behind backward)",
               1000.0 * waited, 1000.0 * alone, alone > 0 ? 100.0 * std::max(0.0, 1.0 - waited / alone) : 0.0));
  }
  if (!bench_skips_allreduce()) check_identical_parameters(model, dist);
  dist.ddp.reset();  // its hooks live on the model's parameters
}

}  // namespace timm::train_detail
