// torchvision's make_grid and save_image (--save-images) against hand
// computations with torch ops: the grid's layout, padding and min-max
// normalisation, 1-channel images made RGB, and the JPEG file decoding to
// the grid's size and (within JPEG's loss) its pixels.
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "test_support.hpp"
#include "timm/base/error.hpp"
#include "timm/data/image.hpp"
#include "timm/data/save_image.hpp"

// Last: c10/util/Logging.h defines a CHECK macro that doctest must override.
#include <doctest/doctest.h>

namespace test_save_image {

namespace {

const timm::GridOptions kSaveImages{.nrow = 8, .padding = 0, .normalize = true};  // train.py's call

// (x - min) / (max - min) over the whole tensor.
at::Tensor min_max(const at::Tensor& x) {
  const at::Tensor low = x.min(), high = x.max();
  return (x - low) / (high - low);
}

void check_close(const at::Tensor& ours, const at::Tensor& expected) {
  REQUIRE(ours.sizes() == expected.sizes());
  CHECK_MESSAGE(at::allclose(ours, expected, 1e-6, 1e-6),
                "max |diff| " << (ours - expected).abs().max().item<double>());
}

}  // namespace

TEST_CASE("make_grid as train.py's save_image calls it: rows of 8, no padding, normalised by the grid's min and max") {
  const at::Tensor images = at::randn({11, 3, 4, 5}) * 3.0 + 1.0;  // normalised inputs: outside [0, 1]
  const at::Tensor grid = timm::make_grid(images, kSaveImages);
  REQUIRE(grid.sizes() == at::IntArrayRef{3, 2 * 4, 8 * 5});
  const at::Tensor expected = min_max(images);
  for (int64_t k = 0; k < 16; ++k) {
    CAPTURE(k);
    const at::Tensor cell = grid.narrow(1, (k / 8) * 4, 4).narrow(2, (k % 8) * 5, 5);
    if (k < 11) {
      check_close(cell, expected[k]);
    } else {
      CHECK(at::equal(cell, at::zeros_like(cell)));  // the second row's empty cells: pad_value 0
    }
  }
  CHECK(grid.min().item<double>() == 0.0);
  CHECK(grid.max().item<double>() == doctest::Approx(1.0));
  CHECK(at::equal(images, images.clone()));  // the input is left as it was (make_grid normalises a copy)
}

TEST_CASE("make_grid: padding and pad_value, fewer images than nrow, 1-channel images, one image") {
  {
    INFO("3 images, nrow 2, padding 2, pad_value 0.5, no normalisation: a 2 x 2 grid");
    const at::Tensor images = at::rand({3, 3, 4, 5});
    const at::Tensor grid = timm::make_grid(images, {.nrow = 2, .padding = 2, .normalize = false, .pad_value = 0.5});
    REQUIRE(grid.sizes() == at::IntArrayRef{3, 2 * (4 + 2) + 2, 2 * (5 + 2) + 2});
    at::Tensor expected = at::full({3, 14, 16}, 0.5);
    for (int64_t k = 0; k < 3; ++k)
      expected.narrow(1, 2 + (k / 2) * 6, 4).narrow(2, 2 + (k % 2) * 7, 5).copy_(images[k]);
    CHECK(at::equal(grid, expected));
  }
  {
    INFO("3 images and nrow 8: one row of 3");
    const at::Tensor grid = timm::make_grid(at::rand({3, 3, 4, 5}), kSaveImages);
    CHECK(grid.sizes() == at::IntArrayRef{3, 4, 15});
  }
  {
    INFO("1-channel images: the channel repeated to 3");
    const at::Tensor images = at::randn({2, 1, 4, 5});
    const at::Tensor grid = timm::make_grid(images, kSaveImages);
    REQUIRE(grid.sizes() == at::IntArrayRef{3, 4, 10});
    const at::Tensor normalised = min_max(images);
    const at::Tensor gray = at::cat({normalised[0][0], normalised[1][0]}, 1);  // (4, 10)
    for (int64_t c = 0; c < 3; ++c) check_close(grid[c], gray);
  }
  {
    INFO("one image: returned as itself, normalised, without a grid");
    const at::Tensor images = at::randn({1, 3, 4, 5});
    check_close(timm::make_grid(images, kSaveImages), min_max(images)[0]);
  }
  {
    INFO("a constant batch: divided by 1e-5, not by 0");
    const at::Tensor grid = timm::make_grid(at::full({2, 3, 2, 2}, 0.25), kSaveImages);
    CHECK(at::equal(grid, at::zeros({3, 2, 4})));
  }
  CHECK_THROWS_AS(timm::make_grid(at::zeros({0, 3, 4, 4}), kSaveImages), timm::Error);
  CHECK_THROWS_AS(timm::make_grid(at::zeros({2, 2, 3, 4, 4}), kSaveImages), timm::Error);
}

TEST_CASE("save_image writes a JPEG of the grid's size that decodes to its pixels within JPEG's loss") {
  timm::test::TempDir dir;
  // 10 images of 16 x 16, each one grey level (k - 4.5): 16-pixel cells keep
  // JPEG's 8x8 blocks (and 4:2:0's 16x16 macroblocks) inside one cell.
  const at::Tensor levels = at::arange(10, at::kFloat).sub(4.5).view({10, 1, 1, 1});
  const at::Tensor images = levels.expand({10, 3, 16, 16}).contiguous();
  const auto path = dir / "train-batch-3.jpg";
  timm::save_image(images, path, kSaveImages);
  const std::vector<std::uint8_t> bytes = timm::test::read_bytes(path);
  REQUIRE(bytes.size() > 3);
  CHECK(bytes[0] == 0xFF);
  CHECK(bytes[1] == 0xD8);
  const timm::Image decoded = timm::read_image(path, 3);
  REQUIRE(decoded.height == 2 * 16);
  REQUIRE(decoded.width == 8 * 16);
  // save_image's uint8: x * 255 + 0.5, clamped, truncated; grey k / 9 here.
  for (int64_t k = 0; k < 16; ++k) {
    const int expected = k < 10 ? static_cast<int>(k / 9.0 * 255.0 + 0.5) : 0;
    const int64_t y0 = (k / 8) * 16, x0 = (k % 8) * 16;
    int worst = 0;
    for (int64_t y = y0; y < y0 + 16; ++y) {
      for (int64_t x = x0; x < x0 + 16; ++x) {
        for (int64_t c = 0; c < 3; ++c) worst = std::max(worst, std::abs(decoded.row(y)[x * 3 + c] - expected));
      }
    }
    CAPTURE(k);
    CHECK(worst <= 3);  // JPEG at quality 75 on flat 16x16 cells
  }
  {
    INFO("errors: another extension, 4-channel images");
    CHECK_THROWS_AS(timm::save_image(images, dir / "x.png", kSaveImages), timm::Error);
    CHECK_THROWS_AS(timm::save_image(at::rand({2, 4, 8, 8}), dir / "x.jpg", kSaveImages), timm::Error);
    CHECK_FALSE(std::filesystem::exists(dir / "x.jpg"));
  }
}

TEST_CASE("encode_jpeg: a 1-channel image as a grayscale JPEG; only 1 or 3 channels") {
  timm::Image gray(24, 40, 1);
  for (int64_t y = 0; y < 24; ++y) {
    for (int64_t x = 0; x < 40; ++x) gray.row(y)[x] = static_cast<std::uint8_t>(y < 8 ? 50 : 200);
  }
  const std::string jpeg = timm::encode_jpeg(gray);
  const auto* data = reinterpret_cast<const std::uint8_t*>(jpeg.data());
  const timm::Image decoded = timm::decode_image({data, jpeg.size()}, "encoded", 1);
  REQUIRE(decoded.height == 24);
  REQUIRE(decoded.width == 40);
  CHECK(timm::test::max_diff(decoded.pixels, gray.pixels) <= 3);
  CHECK_THROWS_AS(timm::encode_jpeg(timm::Image(4, 4, 4)), timm::Error);
}

}  // namespace test_save_image
