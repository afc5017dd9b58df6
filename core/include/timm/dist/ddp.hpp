// Distributed data parallel training: our own reducer (LibTorch has no C++
// DDP), with the design of torch's DistributedDataParallel and reducer.cpp.
//
//   timm::dist::DistributedDataParallel ddp(*model, group->comm(), {}, group.get());
//   // start: parameters and buffers broadcast from rank 0
//   for (each micro-batch) {
//     auto no_sync = last_micro_batch ? std::nullopt : std::optional(ddp.no_sync());
//     ddp.before_forward();            // buffers from rank 0, as broadcast_buffers=True
//     loss = criterion(model->forward(x), y); loss.backward();   // gradients averaged over ranks
//   }
//
// Gradients are all-reduced in buckets of about bucket_cap_bytes (the first
// about first_bucket_bytes), filled in reverse parameter order, each launched
// asynchronously from the parameters' grad-accumulator post-hooks as soon as
// its last gradient is ready, so communication overlaps the rest of
// backward. The end of backward waits for the buckets and writes the averaged
// gradients back. Every rank must run the same backward passes.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

#include "timm/dist/process_group.hpp"

namespace timm::dist {

struct DdpOptions {
  int64_t bucket_cap_bytes = 25 * 1024 * 1024;  // torch's bucket_cap_mb=25
  int64_t first_bucket_bytes = 1024 * 1024;     // torch's kDefaultFirstBucketBytes
  // false: a parameter that got no gradient in a synchronised backward is an
  // error naming it; true: it contributes zeros (and keeps no gradient when no
  // rank used it), as torch's find_unused_parameters=True.
  bool find_unused_parameters = false;
  // Broadcast the buffers (BatchNorm running stats) from rank 0 before each
  // training forward, as torch's broadcast_buffers=True. Off under SyncBatchNorm,
  // whose statistics agree already.
  bool broadcast_buffers = true;
};

class DistributedDataParallel {
 public:
  // `group`, when given, is used to wait on collectives so that failures
  // name the collective and the dead rank. The module must outlive this.
  DistributedDataParallel(torch::nn::Module& module, Communicator comm, DdpOptions options = {},
                          ProcessGroup* group = nullptr);
  ~DistributedDataParallel();
  DistributedDataParallel(const DistributedDataParallel&) = delete;
  DistributedDataParallel& operator=(const DistributedDataParallel&) = delete;

  // Copies rank 0's parameters and buffers to every rank (done at construction).
  void broadcast_module_states();
  // Call before each forward: broadcasts buffers when they are due.
  void before_forward();

  // While a NoSync lives, backward passes only accumulate local gradients
  // (torch's no_sync()); the next synchronised backward reduces the sum.
  class NoSync {
   public:
    explicit NoSync(DistributedDataParallel& ddp) : ddp_(&ddp), previous_(ddp.sync_enabled_) {
      ddp.sync_enabled_ = false;
    }
    NoSync(NoSync&& other) noexcept : ddp_(other.ddp_), previous_(other.previous_) { other.ddp_ = nullptr; }
    NoSync(const NoSync&) = delete;
    NoSync& operator=(const NoSync&) = delete;
    NoSync& operator=(NoSync&&) = delete;
    ~NoSync() {
      if (ddp_ != nullptr) ddp_->sync_enabled_ = previous_;
    }

   private:
    DistributedDataParallel* ddp_;
    bool previous_;
  };
  NoSync no_sync() { return NoSync(*this); }

  // The parameter names of each bucket, in launch order (for tests and logs).
  std::vector<std::vector<std::string>> bucket_parameter_names() const;
  // Seconds spent waiting for the all-reduces at the end of backward, summed.
  double reduce_wait_seconds() const { return reduce_wait_seconds_; }
  // Skips the all-reduce (gradients stay local): what the benchmark compares against.
  void set_skip_allreduce(bool skip) { skip_allreduce_ = skip; }
  // Seconds one all-reduce of every gradient bucket takes on its own (not
  // overlapped with backward), the mean of `repeats`; a collective, so every
  // rank must call it.
  double time_allreduce_alone(int repeats);
  // Synchronised backward passes so far.
  int64_t reduced_backwards() const { return reduced_backwards_; }
  // Gradient bytes all-reduced per backward.
  int64_t gradient_bytes() const;

 private:
  struct Bucket;
  struct Hook;
  void on_gradient_ready(std::size_t param_index);
  void mark_ready(std::size_t param_index);
  void launch(std::size_t bucket_index);
  void finalize_backward();
  void reset_backward_state();
  void wait(const c10::intrusive_ptr<c10d::Work>& work, const std::string& what);
  void broadcast(std::vector<at::Tensor> tensors, const std::string& what);

  torch::nn::Module& module_;
  Communicator comm_;
  DdpOptions options_;
  ProcessGroup* group_;
  std::vector<at::Tensor> params_;
  std::vector<std::string> names_;
  std::vector<at::Tensor> buffers_;
  std::vector<std::unique_ptr<Bucket>> buckets_;
  std::vector<std::size_t> bucket_of_;  // param index -> bucket
  struct Accumulators;                  // the hooked grad accumulators, kept alive (autograd holds them weakly)
  std::unique_ptr<Accumulators> accumulators_;

  std::mutex mutex_;
  bool sync_enabled_ = true;
  bool skip_allreduce_ = false;
  bool callback_queued_ = false;
  std::vector<bool> ready_;
  std::size_t next_bucket_ = 0;
  double reduce_wait_seconds_ = 0.0;
  int64_t reduced_backwards_ = 0;
};

// Bucket assignment as torch's _compute_bucket_assignment_by_size: tensors in
// the given order, one open bucket per (dtype, device); a bucket closes once
// it reaches its cap (the first one first_bucket_bytes, then
// bucket_cap_bytes). Returns indices into `tensors`, buckets ordered by their
// first index.
std::vector<std::vector<std::size_t>> assign_buckets(const std::vector<at::Tensor>& tensors, int64_t first_bucket_bytes,
                                                     int64_t bucket_cap_bytes);

}  // namespace timm::dist
