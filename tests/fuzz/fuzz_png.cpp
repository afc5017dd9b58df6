// Fuzz target: PNG decoding (libpng behind decode_image), as the loader
// decodes dataset images.
#include "fuzz_target.hpp"
#include "timm/data/image.hpp"

TIMM_FUZZ_TARGET(png) {
  // Chosen by the input's length, so that one input always takes one path.
  const int64_t channels = data.size() % 2 == 0 ? 3 : 1;
  timm::fuzz::check_image(timm::decode_image(data, "input.png", channels), channels, "input.png");
}
