#include "timm/base/cpu_allocator.hpp"

#include <cstdlib>
#include <limits>
#include <string_view>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace timm {
namespace {

// The sanitizers bring their own allocator, which ignores glibc's settings.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitizedAllocator = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
constexpr bool kSanitizedAllocator = true;
#else
constexpr bool kSanitizedAllocator = false;
#endif
#else
constexpr bool kSanitizedAllocator = false;
#endif

CpuAllocatorPolicy& last_policy() {
  static CpuAllocatorPolicy policy{false, "not set"};
  return policy;
}

bool user_set_malloc_tunables() {
  const char* tunables = std::getenv("GLIBC_TUNABLES");
  if (tunables != nullptr && std::string_view(tunables).find("glibc.malloc.") != std::string_view::npos) return true;
  for (const char* name : {"MALLOC_MMAP_MAX_", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_"}) {
    if (std::getenv(name) != nullptr) return true;
  }
  return false;
}

CpuAllocatorPolicy glibc_keep_freed_memory() {
#if defined(__GLIBC__)
  if (kSanitizedAllocator) return {false, "a sanitizer's allocator is in use"};
  if (user_set_malloc_tunables()) return {false, "glibc malloc tunables set in the environment are kept"};
  // mallopt returns 1 on success. The trim threshold is an int: at most 2 GiB.
  const bool applied = mallopt(M_MMAP_MAX, 0) == 1 && mallopt(M_TRIM_THRESHOLD, std::numeric_limits<int>::max()) == 1;
  return {applied, applied ? "large buffers from glibc's heap, kept for reuse (no mmap, trim above 2 GiB)"
                           : "glibc refused mallopt"};
#else
  return {false, "not glibc"};
#endif
}

CpuAllocatorPolicy glibc_release_freed_memory() {
#if defined(__GLIBC__)
  constexpr int kThreshold = 128 * 1024;  // glibc's initial mmap threshold
  constexpr int kMmapMax = 65536;         // glibc's default M_MMAP_MAX
  const bool applied = mallopt(M_MMAP_THRESHOLD, kThreshold) == 1 && mallopt(M_TRIM_THRESHOLD, kThreshold) == 1 &&
                       mallopt(M_MMAP_MAX, kMmapMax) == 1;
  malloc_trim(0);
  return {!applied, applied ? "buffers above 128 KiB mapped on their own and returned when freed (less memory)"
                            : "glibc refused mallopt; freed memory still kept for reuse"};
#else
  return last_policy();
#endif
}

}  // namespace

CpuAllocatorPolicy keep_freed_cpu_memory() { return last_policy() = glibc_keep_freed_memory(); }

CpuAllocatorPolicy release_freed_cpu_memory() {
  if (!last_policy().applied) return last_policy();
  return last_policy() = glibc_release_freed_memory();
}

const CpuAllocatorPolicy& cpu_allocator_policy() { return last_policy(); }

}  // namespace timm
