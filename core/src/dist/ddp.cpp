#include "timm/dist/ddp.hpp"

#include <map>
#include <tuple>

#include <ATen/ATen.h>
#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/grad_mode.h>
#include <torch/csrc/autograd/variable.h>

#include "timm/base/error.hpp"
#include "timm/base/stopwatch.hpp"
#include "timm/log/log.hpp"

namespace timm::dist {

using AccumulatorPtr =
    decltype(torch::autograd::impl::grad_accumulator(std::declval<const torch::autograd::Variable&>()));

struct DistributedDataParallel::Accumulators {
  std::vector<AccumulatorPtr> nodes;
  std::vector<uintptr_t> hook_keys;
};

struct DistributedDataParallel::Bucket {
  std::vector<std::size_t> params;  // indices into params_
  std::vector<int64_t> offsets;     // element offset of each in `flat`
  int64_t numel = 0;
  at::Tensor flat;
  std::vector<at::Tensor> io;  // {flat}: the collective's argument
  std::size_t pending = 0;     // gradients not ready yet in this backward
  c10::intrusive_ptr<c10d::Work> work;
};

// Runs after AccumulateGrad for one parameter, so p.grad() already holds the
// accumulated gradient (a tensor pre-hook would see only this pass's part).
struct DistributedDataParallel::Hook : torch::autograd::FunctionPostHook {
  Hook(DistributedDataParallel* ddp, std::size_t index) : ddp(ddp), index(index) {}
  torch::autograd::variable_list operator()(const torch::autograd::variable_list& outputs,
                                            const torch::autograd::variable_list& /*inputs*/) override {
    ddp->on_gradient_ready(index);
    return outputs;
  }
  DistributedDataParallel* ddp;
  std::size_t index;
};

std::vector<std::vector<std::size_t>> assign_buckets(const std::vector<at::Tensor>& tensors, int64_t first_bucket_bytes,
                                                     int64_t bucket_cap_bytes) {
  struct Open {
    std::vector<std::size_t> indices;
    int64_t bytes = 0;
    bool first = true;  // the first bucket of this (dtype, device) takes the first cap
  };
  std::map<std::tuple<int, int, int>, Open> open;
  std::vector<std::vector<std::size_t>> closed;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const at::Tensor& t = tensors[i];
    const auto key = std::make_tuple(static_cast<int>(t.scalar_type()), static_cast<int>(t.device().type()),
                                     static_cast<int>(t.device().index()));
    Open& bucket = open[key];
    bucket.indices.push_back(i);
    bucket.bytes += static_cast<int64_t>(t.numel() * t.element_size());
    if (bucket.bytes >= (bucket.first ? first_bucket_bytes : bucket_cap_bytes)) {
      closed.push_back(std::move(bucket.indices));
      bucket = Open{{}, 0, false};
    }
  }
  for (auto& [key, bucket] : open) {
    if (!bucket.indices.empty()) closed.push_back(std::move(bucket.indices));
  }
  // As torch: ordered by their first tensor, so they become ready in order.
  std::sort(closed.begin(), closed.end(), [](const auto& a, const auto& b) { return a.front() < b.front(); });
  return closed;
}

DistributedDataParallel::DistributedDataParallel(torch::nn::Module& module, Communicator comm, DdpOptions options,
                                                 ProcessGroup* group)
    : module_(module),
      comm_(std::move(comm)),
      options_(options),
      group_(group),
      accumulators_(std::make_unique<Accumulators>()) {
  TORCH_CHECK(comm_, "DistributedDataParallel needs a communicator");
  if (options_.bucket_cap_bytes <= 0 || options_.first_bucket_bytes <= 0) {
    throw UsageError("DDP bucket sizes must be positive");
  }
  for (const auto& item : module_.named_parameters(/*recurse=*/true)) {
    if (!item.value().requires_grad()) continue;
    names_.push_back(item.key());
    params_.push_back(item.value());
  }
  for (const auto& buffer : module_.buffers(/*recurse=*/true)) {
    if (buffer.defined()) buffers_.push_back(buffer);
  }
  broadcast_module_states();

  // Gradients arrive roughly in reverse order of definition: bucket in that
  // order, so the first buckets fill (and launch) early in backward.
  std::vector<at::Tensor> reversed(params_.rbegin(), params_.rend());
  bucket_of_.resize(params_.size());
  for (auto& indices : assign_buckets(reversed, options_.first_bucket_bytes, options_.bucket_cap_bytes)) {
    auto bucket = std::make_unique<Bucket>();
    for (std::size_t r : indices) {
      const std::size_t p = params_.size() - 1 - r;
      bucket->params.push_back(p);
      bucket->offsets.push_back(bucket->numel);
      bucket->numel += params_[p].numel();
      bucket_of_[p] = buckets_.size();
    }
    bucket->flat = at::empty({bucket->numel}, params_[bucket->params.front()].options());
    bucket->io = {bucket->flat};
    buckets_.push_back(std::move(bucket));
  }
  for (std::size_t i = 0; i < params_.size(); ++i) {
    auto accumulator = torch::autograd::impl::grad_accumulator(params_[i]);
    accumulators_->hook_keys.push_back(accumulator->add_post_hook(std::make_unique<Hook>(this, i)));
    accumulators_->nodes.push_back(std::move(accumulator));
  }
  reset_backward_state();
}

DistributedDataParallel::~DistributedDataParallel() {
  // The hooks point at this object: leave the accumulators without them.
  for (std::size_t i = 0; i < accumulators_->nodes.size(); ++i) {
    accumulators_->nodes[i]->del_post_hook(accumulators_->hook_keys[i]);
  }
}

void DistributedDataParallel::wait(const c10::intrusive_ptr<c10d::Work>& work, const std::string& what) {
  if (group_ != nullptr) {
    group_->wait(work, what);
  } else {
    work->wait();
  }
}

// Coalesced per dtype: one broadcast per dtype instead of one per tensor.
void DistributedDataParallel::broadcast(std::vector<at::Tensor> tensors, const std::string& what) {
  if (tensors.empty()) return;
  torch::NoGradGuard no_grad;
  std::map<std::tuple<int, int>, std::vector<at::Tensor>> by_type;
  for (auto& t : tensors) {
    by_type[{static_cast<int>(t.scalar_type()), static_cast<int>(t.device().type())}].push_back(t);
  }
  for (auto& [key, group] : by_type) {
    std::vector<at::Tensor> flat_views;
    for (const auto& t : group) flat_views.push_back(t.reshape({-1}));
    std::vector<at::Tensor> io{at::cat(flat_views)};
    c10d::BroadcastOptions options;
    options.rootRank = 0;
    wait(comm_->broadcast(io, options), what);
    int64_t offset = 0;
    for (auto& t : group) {
      t.copy_(io[0].narrow(0, offset, t.numel()).view(t.sizes()));
      offset += t.numel();
    }
  }
}

void DistributedDataParallel::broadcast_module_states() {
  std::vector<at::Tensor> states(params_.begin(), params_.end());
  states.insert(states.end(), buffers_.begin(), buffers_.end());
  broadcast(states, "broadcast of the parameters and buffers from rank 0");
}

void DistributedDataParallel::before_forward() {
  if (!options_.broadcast_buffers || buffers_.empty() || !sync_enabled_ || !torch::GradMode::is_enabled()) return;
  broadcast(buffers_, "broadcast of the buffers from rank 0");
}

void DistributedDataParallel::reset_backward_state() {
  ready_.assign(params_.size(), false);
  for (auto& bucket : buckets_) {
    bucket->pending = bucket->params.size();
    bucket->work.reset();
  }
  next_bucket_ = 0;
  callback_queued_ = false;
}

void DistributedDataParallel::on_gradient_ready(std::size_t param_index) {
  if (!sync_enabled_) return;
  std::lock_guard lock(mutex_);
  if (!callback_queued_) {
    // Runs once at the end of this backward, on the engine's thread.
    torch::autograd::Engine::get_default_engine().queue_callback([this] { finalize_backward(); });
    callback_queued_ = true;
  }
  mark_ready(param_index);
}

void DistributedDataParallel::mark_ready(std::size_t param_index) {
  if (ready_[param_index]) return;
  ready_[param_index] = true;
  --buckets_[bucket_of_[param_index]]->pending;
  // Launch strictly in bucket order: every rank issues the same collectives
  // in the same sequence whatever order its gradients came in.
  while (next_bucket_ < buckets_.size() && buckets_[next_bucket_]->pending == 0) launch(next_bucket_++);
}

void DistributedDataParallel::launch(std::size_t bucket_index) {
  Bucket& bucket = *buckets_[bucket_index];
  if (skip_allreduce_) return;
  torch::NoGradGuard no_grad;
  for (std::size_t k = 0; k < bucket.params.size(); ++k) {
    const at::Tensor& param = params_[bucket.params[k]];
    at::Tensor slot = bucket.flat.narrow(0, bucket.offsets[k], param.numel());
    if (param.grad().defined()) {
      slot.view(param.sizes()).copy_(param.grad());  // copy_ honours the gradient's strides
    } else {
      slot.zero_();  // an unused parameter (find_unused_parameters) contributes nothing
    }
  }
  // Prescale so the sum is the average (Gloo has no AVG).
  bucket.flat.div_(static_cast<double>(comm_->getSize()));
  bucket.work = comm_->allreduce(bucket.io);
}

void DistributedDataParallel::finalize_backward() {
  std::lock_guard lock(mutex_);
  std::vector<std::string> unused;
  for (std::size_t i = 0; i < params_.size(); ++i) {
    if (!ready_[i]) unused.push_back(names_[i]);
  }
  at::Tensor used;
  if (!unused.empty()) {
    if (!options_.find_unused_parameters) {
      // Drain what was launched so no collective is left in flight, then fail
      // (every rank runs the same model, so every rank fails the same way).
      for (auto& bucket : buckets_) {
        if (bucket->work) bucket->work->wait();
      }
      reset_backward_state();
      std::string list;
      for (std::size_t i = 0; i < unused.size() && i < 10; ++i) list += (i ? ", " : "") + unused[i];
      if (unused.size() > 10) list += format(" and %zu more", unused.size() - 10);
      throw Error(
          format("DDP: %zu parameter(s) got no gradient in this backward: %s. If the model leaves them "
                 "unused on purpose, pass --ddp-find-unused-parameters",
                 unused.size(), list.c_str()));
    }
    // Which parameters any rank used: those keep (or get) a gradient.
    std::vector<float> mask(params_.size());
    for (std::size_t i = 0; i < params_.size(); ++i) mask[i] = ready_[i] ? 1.0f : 0.0f;
    used = at::tensor(mask).to(params_.front().device());
    for (std::size_t i = 0; i < params_.size(); ++i) {
      if (!ready_[i]) mark_ready(i);
    }
  }
  if (skip_allreduce_) {
    reset_backward_state();
    return;
  }
  const Stopwatch wait_watch;
  for (std::size_t b = 0; b < buckets_.size(); ++b) {
    wait(buckets_[b]->work, format("allreduce of gradient bucket %zu/%zu", b + 1, buckets_.size()));
  }
  if (used.defined()) {
    std::vector<at::Tensor> io{used};
    wait(comm_->allreduce(io), "allreduce of the used-parameter mask");
    used = used.cpu();
  }
  reduce_wait_seconds_ += wait_watch.seconds();
  ++reduced_backwards_;

  torch::NoGradGuard no_grad;
  for (auto& bucket : buckets_) {
    for (std::size_t k = 0; k < bucket->params.size(); ++k) {
      at::Tensor param = params_[bucket->params[k]];
      at::Tensor averaged = bucket->flat.narrow(0, bucket->offsets[k], param.numel()).view(param.sizes());
      if (param.grad().defined()) {
        param.mutable_grad().copy_(averaged);
      } else if (used.defined() && used.data_ptr<float>()[bucket->params[k]] > 0) {
        param.mutable_grad() = averaged.clone();
      }
    }
  }
  reset_backward_state();
}

double DistributedDataParallel::time_allreduce_alone(int repeats) {
  double total = 0.0;
  for (int i = 0; i < repeats; ++i) {
    const Stopwatch watch;
    std::vector<c10::intrusive_ptr<c10d::Work>> works;
    for (auto& bucket : buckets_) works.push_back(comm_->allreduce(bucket->io));
    for (std::size_t b = 0; b < works.size(); ++b) wait(works[b], format("timing all-reduce of bucket %zu", b + 1));
    total += watch.seconds();
  }
  return repeats > 0 ? total / repeats : 0.0;
}

int64_t DistributedDataParallel::gradient_bytes() const {
  int64_t bytes = 0;
  for (const auto& bucket : buckets_) bytes += bucket->numel * static_cast<int64_t>(bucket->flat.element_size());
  return bytes;
}

std::vector<std::vector<std::string>> DistributedDataParallel::bucket_parameter_names() const {
  std::vector<std::vector<std::string>> result;
  for (const auto& bucket : buckets_) {
    std::vector<std::string> names;
    for (std::size_t p : bucket->params) names.push_back(names_[p]);
    result.push_back(std::move(names));
  }
  return result;
}

}  // namespace timm::dist
