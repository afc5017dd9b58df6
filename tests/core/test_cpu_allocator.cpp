// The CPU allocator policy (timm/base/cpu_allocator.hpp): large tensors come
// from glibc's heap and stay there for the next step, unless the user chose
// glibc's malloc tunables; release_freed_cpu_memory() undoes it.
#include <malloc.h>

#include <cstdlib>
#include <string>

#include <ATen/ATen.h>

#include "timm/base/cpu_allocator.hpp"

#include <doctest/doctest.h>

namespace {

constexpr int64_t kFloats = 16 << 20;  // 64 MiB: above glibc's largest dynamic mmap threshold (32 MiB)

// Bytes glibc holds in mmapped chunks, and bytes free in its heaps.
size_t mmapped_bytes() { return mallinfo2().hblkhd; }
size_t free_heap_bytes() { return mallinfo2().fordblks; }

void clear_malloc_environment() {
  for (const char* name :
       {"GLIBC_TUNABLES", "MALLOC_MMAP_MAX_", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_"}) {
    unsetenv(name);
  }
}

}  // namespace

#if defined(__SANITIZE_ADDRESS__)
TEST_CASE("keep_freed_cpu_memory leaves a sanitizer's allocator alone") {
  clear_malloc_environment();
  CHECK_FALSE(timm::keep_freed_cpu_memory().applied);
}
#else
TEST_CASE("keep_freed_cpu_memory serves large tensors from the heap and keeps them after they are freed") {
  clear_malloc_environment();
  CHECK(timm::cpu_allocator_policy().reason == "not set");
  {  // Without the policy glibc maps a 64 MiB buffer on its own (what makes the test able to fail).
    const size_t before = mmapped_bytes();
    const at::Tensor big = at::empty({kFloats});
    CHECK(mmapped_bytes() >= before + kFloats * sizeof(float));
  }
  const timm::CpuAllocatorPolicy policy = timm::keep_freed_cpu_memory();
  REQUIRE(policy.applied);
  CHECK(timm::cpu_allocator_policy().applied);
  const size_t mapped_before = mmapped_bytes();
  {
    const at::Tensor big = at::empty({kFloats});
    CHECK(mmapped_bytes() == mapped_before);
  }
  // Freed, the buffer stays in the heap for the next step rather than going back to the kernel.
  CHECK(free_heap_bytes() >= kFloats * sizeof(float));

  // --grad-checkpointing gives memory back: large buffers are mapped on their own again.
  const timm::CpuAllocatorPolicy released = timm::release_freed_cpu_memory();
  CHECK_FALSE(released.applied);
  CHECK(released.reason.find("returned when freed") != std::string::npos);
  CHECK_FALSE(timm::cpu_allocator_policy().applied);
  {
    const size_t before = mmapped_bytes();
    const at::Tensor big = at::empty({kFloats});
    CHECK(mmapped_bytes() >= before + kFloats * sizeof(float));
  }
}
#endif

#if !defined(__SANITIZE_ADDRESS__)
// (Under a sanitizer its allocator is the reason, whatever the tunables say.)
TEST_CASE("glibc malloc tunables chosen by the user are kept") {
  clear_malloc_environment();
  setenv("GLIBC_TUNABLES", "glibc.malloc.mmap_threshold=131072", 1);
  const timm::CpuAllocatorPolicy policy = timm::keep_freed_cpu_memory();
  CHECK_FALSE(policy.applied);
  CHECK(policy.reason.find("tunables") != std::string::npos);
  CHECK_FALSE(timm::cpu_allocator_policy().applied);
  clear_malloc_environment();
  setenv("MALLOC_TRIM_THRESHOLD_", "0", 1);
  CHECK_FALSE(timm::keep_freed_cpu_memory().applied);
  // Nothing to undo: the user's settings stay.
  CHECK(timm::release_freed_cpu_memory().reason == timm::cpu_allocator_policy().reason);
  CHECK(timm::cpu_allocator_policy().reason.find("tunables") != std::string::npos);
  clear_malloc_environment();
}
#endif
