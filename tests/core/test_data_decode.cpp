// Decoding against PIL: Image.open(f).convert("RGB" | "L") on files PIL wrote.
#include <doctest/doctest.h>

#include <fstream>
#include <sstream>

#include "test_support.hpp"
#include "timm/base/error.hpp"
#include "timm/data/image.hpp"

using namespace timm;

namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

// JPEG tolerance: PIL bundles its own libjpeg-turbo (3.x) and we link the
// system's (2.1.5). Both decode with the exact ISLOW IDCT and fancy
// upsampling, which have not changed between them, so we expect 0 and allow 1.
constexpr int kJpegTolerance = 1;

TEST_CASE("decode matches PIL: exact for PNG, within 1 for JPEG") {
  test::TempDir dir;
  test::run_oracle("data_oracle.py", {"decode", dir.path().string()});
  std::ifstream manifest(dir / "manifest.txt");
  std::string line;
  int files = 0, worst_jpeg = 0;
  while (std::getline(manifest, line)) {
    std::istringstream f(line);
    std::string name, pil_mode;
    int64_t h, w;
    f >> name >> h >> w >> pil_mode;
    const std::vector<std::uint8_t> bytes = test::read_bytes(dir / name);
    for (int64_t channels : {3, 1}) {
      CAPTURE(name);
      CAPTURE(channels);
      const Image image = decode_image(bytes, name, channels);
      CHECK(image.height == h);
      CHECK(image.width == w);
      CHECK(image.channels == channels);
      const auto want = test::read_bytes(dir / (name + (channels == 3 ? ".rgb" : ".l")));
      const int d = test::max_diff(image.pixels, want);
      if (ends_with(name, ".jpg")) {
        CHECK_MESSAGE(d <= kJpegTolerance, name << " (" << pil_mode << "): max difference " << d);
        worst_jpeg = std::max(worst_jpeg, d);
      } else {
        CHECK_MESSAGE(d == 0, name << " (" << pil_mode << "): max difference " << d);
      }
    }
    ++files;
  }
  CHECK(files == 12);
  MESSAGE("decode vs PIL: " << files << " files; PNG exact; JPEG max difference " << worst_jpeg);

  // Truncated files fail as they do in PIL, naming the file.
  for (const char* name : {"truncated_photo.jpg", "truncated_rgb.png"}) {
    const std::string path = (dir / name).string();
    CHECK_THROWS_WITH_AS(read_image(path, 3), doctest::Contains(path.c_str()), Error);
  }
}

TEST_CASE("unknown and empty data are errors naming the source") {
  const std::vector<std::uint8_t> garbage = {'G', 'I', 'F', '8', '9', 'a', 0, 0};
  CHECK_THROWS_WITH_AS(decode_image(garbage, "x/a.gif", 3), doctest::Contains("x/a.gif"), Error);
  CHECK_THROWS_WITH_AS(decode_image({}, "empty.png", 3), doctest::Contains("empty.png"), Error);
  const std::vector<std::uint8_t> bad_jpeg = {0xFF, 0xD8, 0xFF, 0xE0, 1, 2, 3};
  CHECK_THROWS_WITH_AS(decode_image(bad_jpeg, "bad.jpg", 3), doctest::Contains("bad.jpg"), Error);
  CHECK_THROWS_WITH_AS(read_image("/nonexistent/dir/img.png", 3), doctest::Contains("/nonexistent/dir/img.png"), Error);
  CHECK_THROWS_AS(decode_image(garbage, "x", 2), Error);
}
