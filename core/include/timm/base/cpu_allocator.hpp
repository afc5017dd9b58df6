// How the process allocates large CPU buffers (tensors' storage).
//
// LibTorch allocates CPU tensor storage with posix_memalign. glibc serves
// each request above its mmap threshold (128 KiB, adapting up to 32 MiB)
// with a fresh mmap and unmaps it on free, so every training or inference
// step page-faults and zero-fills its large activations and gradients again:
// about a third of a resnet50 inference step on the build machine (perf:
// clear_page_erms, exc_page_fault), for Python timm as for us.
//
// keep_freed_cpu_memory() makes glibc serve every size from its heap and
// keep freed memory for the next step (mallopt M_MMAP_MAX 0, M_TRIM_THRESHOLD
// 2 GiB), as jemalloc/tcmalloc set-ups do for PyTorch. The cost: memory freed
// after a peak stays with the process (below 2 GiB at the heap's top). A user
// who sets glibc's malloc tunables (GLIBC_TUNABLES=glibc.malloc.*, or the
// MALLOC_*_ variables) keeps them: the policy is then left alone.
// run_app (app_main.hpp) applies it before an app's body runs.
#pragma once

#include <string>

namespace timm {

// What keep_freed_cpu_memory() did, for the log.
struct CpuAllocatorPolicy {
  bool applied = false;  // whether freed memory is kept for reuse
  std::string reason;    // why (not), in a few words
};

CpuAllocatorPolicy keep_freed_cpu_memory();

// Undoes keep_freed_cpu_memory() where it was applied, for a run that asked
// to trade speed for memory (--grad-checkpointing): every buffer above 128
// KiB (glibc's initial mmap threshold) is mapped on its own and returned to
// the kernel when freed, and what the heap kept so far is released. Under
// the kept policy, the transient buffers of the checkpointed blocks' reruns
// fragment the heap: convnext_base's checkpointed step peaked at 7.0 GB
// there against 2.2 GB this way (docs/models.md). A no-op, returning the
// current policy, where keep_freed_cpu_memory() was not applied.
CpuAllocatorPolicy release_freed_cpu_memory();

// The policy in force: the outcome of the last keep_freed_cpu_memory() or
// release_freed_cpu_memory() call (not applied, "not set", before the first).
const CpuAllocatorPolicy& cpu_allocator_policy();

}  // namespace timm
