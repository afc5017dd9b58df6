// The NaFlex input pipeline's pieces (timm/data/naflex.hpp) against timm,
// run by tests/oracle/naflex_data_oracle.py at test time: the image size for a
// sequence length over 3000 (image, patch, length, max_ratio) combinations
// (sizes and ratios exactly); six images (RGB and L, most no multiple of the
// patch) cut into patches; the batch of the RGB ones padded and cut to 12
// patches; its normalisation as timm's prefetcher.
#include <array>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include "test_support.hpp"
#include "timm/base/error.hpp"
#include "timm/data/naflex.hpp"

// Last: c10/util/Logging.h defines a CHECK macro that doctest must override.
#include <doctest/doctest.h>

namespace test_naflex_data {

namespace {

using namespace timm;

constexpr int64_t kImages = 6;
constexpr int64_t kSeqLen = 12;
const std::vector<double> kMean = {0.485, 0.456, 0.406};
const std::vector<double> kStd = {0.229, 0.224, 0.225};

Image image_of(const at::Tensor& hwc) {
  Image image(hwc.size(0), hwc.size(1), hwc.size(2));
  std::memcpy(image.pixels.data(), hwc.contiguous().data_ptr<std::uint8_t>(), image.pixels.size());
  return image;
}

}  // namespace

TEST_CASE("NaFlex pieces equal timm's: image size for a sequence, patchify, collate, normalise") {
  nlohmann::json cases = nlohmann::json::array();
  for (const int64_t h : {1, 7, 16, 100, 224, 333, 480, 640, 1000, 4000}) {
    for (const int64_t w : {1, 7, 16, 100, 224, 333, 480, 640, 1000, 4000}) {
      for (const int64_t patch : {14, 16, 32}) {
        for (const int64_t seq : {1, 64, 256, 576, 1024}) {
          cases.push_back({h, w, patch, seq, nullptr});
          cases.push_back({h, w, patch, seq, 1.0});
        }
      }
    }
  }
  const auto timm_out = test::oracle_tensors("naflex_data_oracle.py", {cases.dump()});
  const at::Tensor sizes = timm_out.at("seq.sizes");
  const at::Tensor ratios = timm_out.at("seq.ratios");
  int64_t refused = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const auto& c = cases[i];
    CAPTURE(c.dump());
    const int64_t patch = c[2];
    std::optional<double> max_ratio;
    if (!c[4].is_null()) max_ratio = c[4].get<double>();
    const auto idx = static_cast<int64_t>(i);
    if (ratios[idx].item<double>() < 0) {
      CHECK_THROWS_AS(image_size_for_seq({c[0], c[1]}, {patch, patch}, c[3], true, max_ratio), UsageError);
      ++refused;
      continue;
    }
    const SeqImageSize ours = image_size_for_seq({c[0], c[1]}, {patch, patch}, c[3], true, max_ratio);
    CHECK(ours.ratio == ratios[idx].item<double>());
    CHECK(ours.size[0] == sizes[idx][0].item<int64_t>());
    CHECK(ours.size[1] == sizes[idx][1].item<int64_t>());
  }
  CHECK(refused < static_cast<int64_t>(cases.size()) / 2);  // most combinations have a size

  std::vector<ImagePatches> rgb;
  for (int64_t i = 0; i < kImages; ++i) {
    CAPTURE(i);
    const std::string n = std::to_string(i);
    const ImagePatches ours = patchify_image(image_of(timm_out.at("img" + n)), {16, 16});
    CHECK(at::equal(ours.patches, timm_out.at("patches" + n)));
    CHECK(at::equal(ours.patch_coord, timm_out.at("coord" + n)));
    if (timm_out.at("img" + n).size(2) == 3) rgb.push_back(ours);
  }
  const NaFlexBatch batch = collate_patches(rgb, kSeqLen);
  CHECK(at::equal(batch.patches.to(at::kFloat), timm_out.at("batch.patches")));
  CHECK(at::equal(batch.patch_coord, timm_out.at("batch.coord")));
  CHECK(at::equal(batch.patch_valid, timm_out.at("batch.valid")));
  CHECK(at::allclose(normalize_patches(batch.patches, kMean, kStd), timm_out.at("batch.normalized"), 1e-6, 1e-6));
}

TEST_CASE("NaFlex pieces refuse bad input with a message naming it") {
  CHECK_THROWS_WITH_AS(image_size_for_seq({0, 10}, {16, 16}, 64), doctest::Contains("image 0x10"), UsageError);
  CHECK_THROWS_AS(image_size_for_seq({10, 10}, {16, 16}, 0), UsageError);
  CHECK_THROWS_AS(patchify_image(Image(), {16, 16}), UsageError);
  CHECK_THROWS_AS(patchify_image(Image(4, 4, 3), {0, 16}), UsageError);
  CHECK_THROWS_AS(collate_patches({}, 4), UsageError);
  const ImagePatches rgb = patchify_image(Image(16, 32, 3), {16, 16});
  const ImagePatches gray = patchify_image(Image(16, 16, 1), {16, 16});
  CHECK_THROWS_WITH_AS(collate_patches({rgb, gray}, 4), doctest::Contains("sample 1 has patches of 256 values"),
                       UsageError);
  CHECK_THROWS_AS(
      normalize_patches(collate_patches({rgb}, 4).patches, std::vector<double>(5, 0.5), std::vector<double>(5, 0.5)),
      UsageError);
}

}  // namespace test_naflex_data
