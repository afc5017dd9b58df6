// Fuzz target: timm's image-in-tar shards (one .tar, possibly holding tars),
// listed and then decoded member by member as the loader reads them.
#include <algorithm>

#include "fuzz_target.hpp"
#include "timm/base/error.hpp"
#include "timm/data/dataset.hpp"

namespace {

// A tar of the largest input libFuzzer makes can list a few thousand
// members; decoding a few of them covers the member reads.
constexpr std::size_t kMaxDecoded = 32;

}  // namespace

TIMM_FUZZ_TARGET(tar) {
  const auto dataset = timm::make_image_in_tar(timm::fuzz::scratch_file("input.tar", data), 3);
  for (std::size_t i = 0; i < dataset->size(); ++i) {
    const int64_t target = dataset->target(i);
    if (target < 0 || target >= dataset->num_classes()) {
      timm::fuzz::broken_promise(dataset->describe(i) + ": target " + std::to_string(target) + " of " +
                                 std::to_string(dataset->num_classes()) + " classes");
    }
  }
  // One bad member is a skipped sample in the loader, not the end of the
  // shard: the next members are decoded all the same.
  for (std::size_t i = 0; i < std::min(dataset->size(), kMaxDecoded); ++i) {
    try {
      timm::fuzz::check_image(dataset->image(i), 3, dataset->describe(i));
    } catch (const timm::Error&) {
    }
  }
}
