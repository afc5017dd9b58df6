// Fuzz target: JPEG decoding (libjpeg-turbo behind decode_image), in full and
// DCT-scaled, as the loader decodes dataset images.
#include <array>

#include "fuzz_target.hpp"
#include "timm/data/image.hpp"

TIMM_FUZZ_TARGET(jpeg) {
  // Chosen by the input's length, so that one input always takes one path
  // (a finding replays) while the corpus covers both.
  const int64_t channels = data.size() % 2 == 0 ? 3 : 1;
  constexpr std::array<int, 4> kDenominators = {1, 2, 4, 8};
  const int denominator = kDenominators[data.size() / 2 % kDenominators.size()];
  timm::jpeg_dimensions(data);
  timm::fuzz::check_image(timm::decode_image(data, "input.jpg", channels), channels, "input.jpg");
  timm::fuzz::check_image(timm::decode_jpeg_scaled(data, "input.jpg", channels, denominator), channels, "input.jpg");
}
