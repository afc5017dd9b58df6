// decode_jpeg_region (libjpeg's partial decoding of a crop window) against the
// whole decode, byte for byte, on every JPEG layout PIL writes and many
// windows; its errors against decode_image's; and jpeg_dct_resized_crop,
// which now decodes only the region its resampling reads, against the
// algorithm it replaced (a copy below), which decoded the whole image.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <random>
#include <sstream>

#include "test_support.hpp"
#include "timm/base/error.hpp"
#include "timm/data/image.hpp"
#include "timm/data/image_ops.hpp"

#include <doctest/doctest.h>

namespace test_data_jpeg_region {
namespace {

using timm::Image;
using timm::ImageRegion;
using timm::Interpolation;

struct JpegFile {
  std::string name;
  std::vector<std::uint8_t> bytes;
};

// The files jpeg_region_oracle.py writes into `dir`, in its manifest's order.
std::vector<JpegFile> oracle_files(const timm::test::TempDir& dir) {
  timm::test::run_oracle("jpeg_region_oracle.py", {dir.path().string()}, std::chrono::seconds(120));
  std::ifstream manifest(dir / "manifest.txt");
  std::vector<JpegFile> files;
  std::string line;
  while (std::getline(manifest, line)) {
    std::istringstream fields(line);
    JpegFile file;
    fields >> file.name;
    file.bytes = timm::test::read_bytes(dir / file.name);
    files.push_back(std::move(file));
  }
  return files;
}

struct Window {
  int64_t top, left, height, width;
};

// Windows of an h x w image: the whole image, single pixels in the corners
// and the centre, one-pixel strips along the four edges, and `n` random ones
// (of every five: one reaching the bottom, one the right edge, one small).
std::vector<Window> windows(int64_t h, int64_t w, int n, std::mt19937& rng) {
  std::vector<Window> out = {{0, 0, h, w},     {0, 0, 1, 1},         {h - 1, w - 1, 1, 1}, {0, w - 1, 1, 1},
                             {h - 1, 0, 1, 1}, {h / 2, w / 2, 1, 1}, {0, 0, h, 1},         {0, w - 1, h, 1},
                             {0, 0, 1, w},     {h - 1, 0, 1, w}};
  for (int i = 0; i < n; ++i) {
    const int64_t top = std::uniform_int_distribution<int64_t>(0, h - 1)(rng);
    const int64_t left = std::uniform_int_distribution<int64_t>(0, w - 1)(rng);
    int64_t height = std::uniform_int_distribution<int64_t>(1, h - top)(rng);
    int64_t width = std::uniform_int_distribution<int64_t>(1, w - left)(rng);
    if (i % 5 == 1) height = h - top;
    if (i % 5 == 2) width = w - left;
    if (i % 5 == 3) {
      height = std::min<int64_t>(height, 1 + rng() % 24);
      width = std::min<int64_t>(width, 1 + rng() % 24);
    }
    out.push_back({top, left, height, width});
  }
  return out;
}

// Empty when `region` holds the window and equals `full` there byte for
// byte; otherwise what is wrong.
std::string region_mismatch(const Image& full, const ImageRegion& region, const Window& win) {
  const Image& im = region.image;
  std::ostringstream where;
  where << "window " << win.top << "," << win.left << " " << win.height << "x" << win.width << ", region " << region.top
        << "," << region.left << " " << im.height << "x" << im.width << "x" << im.channels;
  if (im.channels != full.channels || region.top > win.top || region.left > win.left ||
      region.top + im.height < win.top + win.height || region.left + im.width < win.left + win.width ||
      im.pixels.size() != static_cast<std::size_t>(im.height * im.width * im.channels)) {
    return where.str() + ": does not hold the window";
  }
  const int64_t c = full.channels;
  for (int64_t y = win.top; y < win.top + win.height; ++y) {
    const std::uint8_t* want = full.row(y) + win.left * c;
    const std::uint8_t* got = im.row(y - region.top) + (win.left - region.left) * c;
    if (std::memcmp(want, got, static_cast<std::size_t>(win.width * c)) != 0) {
      int64_t x = 0;
      while (std::memcmp(want + x * c, got + x * c, static_cast<std::size_t>(c)) == 0) ++x;
      where << ": differs at row " << y << ", column " << win.left + x;
      return where.str();
    }
  }
  return {};
}

// The message of the timm::Error `fn` throws; empty when it throws none.
std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const timm::Error& e) {
    return e.what();
  }
  return {};
}

// ---- jpeg_dct_resized_crop as it was before decode_jpeg_region: the whole
// 1/d image decoded, then Pillow's resampling (image_ops.cpp's, copied). ----

struct Filter {
  double (*fn)(double);
  double support;
};

double box_filter(double x) { return (x > -0.5 && x <= 0.5) ? 1.0 : 0.0; }
double bilinear_filter(double x) {
  x = std::fabs(x);
  return x < 1.0 ? 1.0 - x : 0.0;
}
double hamming_filter(double x) {
  x = std::fabs(x);
  if (x == 0.0) return 1.0;
  if (x >= 1.0) return 0.0;
  x = x * M_PI;
  return std::sin(x) / x * (0.54f + 0.46f * std::cos(x));
}
double bicubic_filter(double x) {
  constexpr double a = -0.5;
  x = std::fabs(x);
  if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1;
  if (x < 2.0) return (((x - 5) * x + 8) * x - 4) * a;
  return 0.0;
}
double sinc_filter(double x) {
  if (x == 0.0) return 1.0;
  x = x * M_PI;
  return std::sin(x) / x;
}
double lanczos_filter(double x) { return (-3.0 <= x && x < 3.0) ? sinc_filter(x) * sinc_filter(x / 3) : 0.0; }

Filter filter_of(Interpolation interpolation) {
  switch (interpolation) {
    case Interpolation::kBox:
      return {box_filter, 0.5};
    case Interpolation::kBilinear:
      return {bilinear_filter, 1.0};
    case Interpolation::kHamming:
      return {hamming_filter, 1.0};
    case Interpolation::kBicubic:
      return {bicubic_filter, 2.0};
    case Interpolation::kLanczos:
      return {lanczos_filter, 3.0};
    case Interpolation::kNearest:
      break;
  }
  throw std::logic_error("nearest has no filter");
}

constexpr int kPrecisionBits = 32 - 8 - 2;

struct Coeffs {
  int ksize = 0;
  std::vector<int> first, count;
  std::vector<std::int32_t> k;
};

Coeffs box_coeffs(int in_size, int out_size, const Filter& filter, double in0, double in1) {
  const double scale = (in1 - in0) / out_size;
  const double filterscale = std::max(scale, 1.0);
  const double support = filter.support * filterscale;
  Coeffs c;
  c.ksize = static_cast<int>(std::ceil(support)) * 2 + 1;
  c.first.resize(out_size);
  c.count.resize(out_size);
  c.k.assign(static_cast<std::size_t>(out_size) * c.ksize, 0);
  std::vector<double> w(c.ksize);
  for (int xx = 0; xx < out_size; ++xx) {
    const double center = in0 + (xx + 0.5) * scale;
    const double ss = 1.0 / filterscale;
    int xmin = std::max(static_cast<int>(center - support + 0.5), 0);
    int xmax = std::min(static_cast<int>(center + support + 0.5), in_size) - xmin;
    double ww = 0.0;
    for (int x = 0; x < xmax; ++x) {
      w[x] = filter.fn((x + xmin - center + 0.5) * ss);
      ww += w[x];
    }
    std::int32_t* k = &c.k[static_cast<std::size_t>(xx) * c.ksize];
    for (int x = 0; x < xmax; ++x) {
      const double v = ww != 0.0 ? w[x] / ww : w[x];
      k[x] = static_cast<std::int32_t>(v < 0 ? -0.5 + v * (1 << kPrecisionBits) : 0.5 + v * (1 << kPrecisionBits));
    }
    c.first[xx] = xmin;
    c.count[xx] = std::max(xmax, 0);
  }
  return c;
}

std::uint8_t clip8(int v) {
  v >>= kPrecisionBits;
  return static_cast<std::uint8_t>(v < 0 ? 0 : (v > 255 ? 255 : v));
}

Image old_jpeg_dct_resized_crop(const Image& scaled, int d, int64_t top, int64_t left, int64_t height, int64_t width,
                                int64_t out_h, int64_t out_w, Interpolation interpolation) {
  const bool inside = top >= 0 && left >= 0 && top + height <= scaled.height * d && left + width <= scaled.width * d;
  if (d == 1 || !inside || interpolation == Interpolation::kNearest) {
    auto scale = [d](int64_t v) { return timm::round_half_even(static_cast<double>(v) / d); };
    const int64_t t = std::clamp<int64_t>(scale(top), 0, scaled.height - 1);
    const int64_t l = std::clamp<int64_t>(scale(left), 0, scaled.width - 1);
    const int64_t h = std::clamp<int64_t>(scale(top + height) - t, 1, scaled.height - t);
    const int64_t w = std::clamp<int64_t>(scale(left + width) - l, 1, scaled.width - l);
    return timm::resized_crop(scaled, t, l, h, w, out_h, out_w, interpolation);
  }
  const Filter filter = filter_of(interpolation);
  const Coeffs horiz = box_coeffs(static_cast<int>(scaled.width), static_cast<int>(out_w), filter,
                                  static_cast<double>(left) / d, static_cast<double>(left + width) / d);
  const Coeffs vert = box_coeffs(static_cast<int>(scaled.height), static_cast<int>(out_h), filter,
                                 static_cast<double>(top) / d, static_cast<double>(top + height) / d);
  const int64_t c = scaled.channels;
  // Horizontal pass over every row the vertical pass reads, then vertical.
  Image temp(scaled.height, out_w, c);
  for (int y = vert.first.front(); y < vert.first.back() + vert.count.back(); ++y) {
    for (int64_t xx = 0; xx < out_w; ++xx) {
      const std::int32_t* k = &horiz.k[static_cast<std::size_t>(xx) * horiz.ksize];
      for (int64_t ch = 0; ch < c; ++ch) {
        int ss = 1 << (kPrecisionBits - 1);
        for (int x = 0; x < horiz.count[xx]; ++x) ss += scaled.row(y)[(horiz.first[xx] + x) * c + ch] * k[x];
        temp.row(y)[xx * c + ch] = clip8(ss);
      }
    }
  }
  Image out(out_h, out_w, c);
  for (int64_t yy = 0; yy < out_h; ++yy) {
    const std::int32_t* k = &vert.k[static_cast<std::size_t>(yy) * vert.ksize];
    for (int64_t i = 0; i < out_w * c; ++i) {
      int ss = 1 << (kPrecisionBits - 1);
      for (int y = 0; y < vert.count[yy]; ++y) ss += temp.row(vert.first[yy] + y)[i] * k[y];
      out.row(yy)[i] = clip8(ss);
    }
  }
  return out;
}

// torchvision's RandomResizedCrop.get_params (scale 0.08-1, ratio 3/4-4/3).
Window random_resized_crop(int64_t h, int64_t w, std::mt19937& rng) {
  std::uniform_real_distribution<double> scale(0.08, 1.0), log_ratio(std::log(3.0 / 4.0), std::log(4.0 / 3.0));
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double area = static_cast<double>(h * w) * scale(rng);
    const double ratio = std::exp(log_ratio(rng));
    const auto cw = static_cast<int64_t>(std::llround(std::sqrt(area * ratio)));
    const auto ch = static_cast<int64_t>(std::llround(std::sqrt(area / ratio)));
    if (cw > 0 && cw <= w && ch > 0 && ch <= h) {
      return {std::uniform_int_distribution<int64_t>(0, h - ch)(rng),
              std::uniform_int_distribution<int64_t>(0, w - cw)(rng), ch, cw};
    }
  }
  const int64_t side = std::min(h, w);
  return {(h - side) / 2, (w - side) / 2, side, side};
}

// The file's bytes with its frame header declaring height x width.
std::vector<std::uint8_t> with_declared_size(std::vector<std::uint8_t> bytes, int height, int width) {
  std::size_t pos = 2;
  while (pos + 9 < bytes.size() && bytes[pos] == 0xFF) {
    const int marker = bytes[pos + 1];
    if (marker == 0xC0 || marker == 0xC1 || marker == 0xC2) {
      bytes[pos + 5] = static_cast<std::uint8_t>(height >> 8);
      bytes[pos + 6] = static_cast<std::uint8_t>(height & 0xFF);
      bytes[pos + 7] = static_cast<std::uint8_t>(width >> 8);
      bytes[pos + 8] = static_cast<std::uint8_t>(width & 0xFF);
      return bytes;
    }
    pos += 2 + ((bytes[pos + 2] << 8) | bytes[pos + 3]);
  }
  throw std::runtime_error("no frame header found");
}

}  // namespace

TEST_CASE("decode_jpeg_region equals the whole decode in every window, for every layout and scale") {
  timm::test::TempDir dir;
  const std::vector<JpegFile> files = oracle_files(dir);
  REQUIRE(files.size() == 21);
  std::mt19937 rng(2024);
  constexpr int kRandomWindows = 40;  // per file, channel count and scale, besides the 10 fixed ones
  int64_t checked = 0, partial_total = 0;
  for (const JpegFile& file : files) {
    const bool cmyk = file.name == "cmyk.jpg";
    for (int64_t channels : {3, 1}) {
      for (int d : {1, 2, 4, 8}) {
        CAPTURE(file.name);
        CAPTURE(channels);
        CAPTURE(d);
        Image full;
        const std::string full_error =
            error_of([&] { full = timm::decode_jpeg_scaled(file.bytes, file.name, channels, d); });
        if (!full_error.empty()) {
          // Whatever the whole decode refuses, the region decode refuses alike.
          CHECK(error_of([&] { timm::decode_jpeg_region(file.bytes, file.name, channels, d, 0, 0, 1, 1); }) ==
                full_error);
          continue;
        }
        int partial = 0;
        for (const Window& win : windows(full.height, full.width, kRandomWindows, rng)) {
          const ImageRegion region =
              timm::decode_jpeg_region(file.bytes, file.name, channels, d, win.top, win.left, win.height, win.width);
          const std::string mismatch = region_mismatch(full, region, win);
          CHECK_MESSAGE(mismatch.empty(), mismatch);
          ++checked;
          if (region.image.height * region.image.width < full.height * full.width) ++partial;
        }
        partial_total += partial;
        if (cmyk) {
          CHECK(partial == 0);  // CMYK takes the whole decode
        } else if (full.height >= 32 && full.width >= 32) {
          CHECK(partial > 0);  // the partial path ran
        }
      }
    }
  }
  MESSAGE("decode_jpeg_region: " << checked << " windows of " << files.size() << " files, 2 channel counts, 4 scales; "
                                 << partial_total << " decoded partially; all equal to the whole decode");
}

TEST_CASE("decode_jpeg_region clamps the window to the image") {
  timm::test::TempDir dir;
  const std::vector<JpegFile> files = oracle_files(dir);
  const JpegFile& photo = files.front();  // photo_420.jpg, 375 x 500
  REQUIRE(photo.name == "photo_420.jpg");
  const Image full = timm::decode_image(photo.bytes, photo.name, 3);
  const ImageRegion corner = timm::decode_jpeg_region(photo.bytes, photo.name, 3, 1, -5, -7, 20, 30);
  CHECK(region_mismatch(full, corner, {0, 0, 15, 23}).empty());
  const ImageRegion beyond = timm::decode_jpeg_region(photo.bytes, photo.name, 3, 1, 370, 490, 50, 50);
  CHECK(region_mismatch(full, beyond, {370, 490, 5, 10}).empty());
}

TEST_CASE("decode_jpeg_region fails as decode_image does") {
  timm::test::TempDir dir;
  oracle_files(dir);
  const std::vector<std::uint8_t> photo = timm::test::read_bytes(dir / "photo_420.jpg");

  // A truncated file (PIL: "image file is truncated") is an error, whatever the window.
  const std::vector<std::uint8_t> truncated = timm::test::read_bytes(dir / "truncated.jpg");
  const std::string truncated_error = error_of([&] { timm::decode_image(truncated, "cut/photo.jpg", 3); });
  CHECK(truncated_error.find("cut/photo.jpg") != std::string::npos);
  CHECK(truncated_error.find("Premature end") != std::string::npos);
  for (const Window& win : {Window{0, 0, 1, 1}, Window{0, 0, 16, 16}, Window{300, 400, 75, 100}}) {
    CHECK(error_of([&] {
            timm::decode_jpeg_region(truncated, "cut/photo.jpg", 3, 1, win.top, win.left, win.height, win.width);
          }) == truncated_error);
  }
  CHECK(error_of([&] {
          timm::jpeg_dct_resized_crop(truncated, "cut/photo.jpg", 3, 0, 0, 20, 20, 8, 8, Interpolation::kBilinear);
        }) == truncated_error);

  // A progressive file of more than 500 scans (TurboJPEG's TJFLAG_LIMITSCANS).
  const std::vector<std::uint8_t> many_scans = timm::test::read_bytes(dir / "many_scans.jpg");
  const std::string scans_error = error_of([&] { timm::decode_image(many_scans, "scans.jpg", 3); });
  CHECK(scans_error.find("more than 500 scans") != std::string::npos);
  CHECK(error_of([&] { timm::decode_jpeg_region(many_scans, "scans.jpg", 3, 1, 0, 0, 4, 4); }) == scans_error);

  // A header declaring more pixels than the limit: refused before decoding.
  const std::vector<std::uint8_t> bomb = with_declared_size(photo, 30000, 30000);
  const std::string bomb_error = error_of([&] { timm::decode_image(bomb, "bomb.jpg", 3); });
  CHECK(bomb_error.find("bomb.jpg") != std::string::npos);
  CHECK(bomb_error.find("decompression bomb") != std::string::npos);
  CHECK(error_of([&] { timm::decode_jpeg_region(bomb, "bomb.jpg", 3, 1, 0, 0, 10, 10); }) == bomb_error);
  CHECK(error_of([&] { timm::decode_jpeg_region(bomb, "bomb.jpg", 3, 8, 0, 0, 10, 10); }) == bomb_error);
  CHECK(error_of([&] {
          timm::jpeg_dct_resized_crop(bomb, "bomb.jpg", 3, 0, 0, 4000, 4000, 224, 224, Interpolation::kBilinear);
        }) == bomb_error);

  // A corrupt header, and bytes that are no JPEG.
  const std::vector<std::uint8_t> bad_header = {0xFF, 0xD8, 0xFF, 0xE0, 1, 2, 3};
  const std::string header_error = error_of([&] { timm::decode_image(bad_header, "bad.jpg", 3); });
  CHECK(header_error.find("bad.jpg") != std::string::npos);
  CHECK(error_of([&] { timm::decode_jpeg_region(bad_header, "bad.jpg", 3, 1, 0, 0, 1, 1); }) == header_error);
  CHECK(error_of([&] {
          timm::jpeg_dct_resized_crop(bad_header, "bad.jpg", 3, 0, 0, 1, 1, 1, 1, Interpolation::kBilinear);
        }) == header_error);
  const std::vector<std::uint8_t> png_magic = {0x89, 'P', 'N', 'G', 0x0D, 0x0A, 0x1A, 0x0A};
  CHECK(error_of([&] { timm::decode_jpeg_region(png_magic, "x.png", 3, 1, 0, 0, 1, 1); }).find("x.png") !=
        std::string::npos);
}

TEST_CASE("jpeg_dct_resized_crop gives the bytes of the whole-decode algorithm it replaced") {
  timm::test::TempDir dir;
  const std::vector<JpegFile> files = oracle_files(dir);
  std::mt19937 rng(99);
  constexpr Interpolation kInterpolations[] = {Interpolation::kBilinear, Interpolation::kBicubic,
                                               Interpolation::kLanczos,  Interpolation::kNearest,
                                               Interpolation::kBox,      Interpolation::kHamming};
  int compared = 0, by_denominator[9] = {};
  for (const JpegFile& file : files) {
    if (file.name != "photo_420.jpg" && file.name != "photo_422.jpg" && file.name != "gray.jpg" &&
        file.name != "progressive_420.jpg" && file.name != "large_420.jpg" &&
        file.name != "partial_progressive_420.jpg") {
      continue;
    }
    const Image full = timm::decode_image(file.bytes, file.name, 3);
    // Output sizes that make the crops take each denominator.
    for (int64_t out : {224, 96, 48, 24}) {
      for (int i = 0; i < 8; ++i) {
        // RandomResizedCrop's windows, plus the whole image and the corner
        // windows every so often.
        Window win = random_resized_crop(full.height, full.width, rng);
        if (i == 0) win = {0, 0, full.height, full.width};
        if (i == 1) win = {full.height - win.height, full.width - win.width, win.height, win.width};
        const Interpolation interpolation = kInterpolations[(i + out) % 6];
        const int d = timm::jpeg_dct_denominator(win.height, win.width, out, out);
        CAPTURE(file.name);
        CAPTURE(out);
        CAPTURE(d);
        CAPTURE(win.top);
        CAPTURE(win.left);
        CAPTURE(win.height);
        CAPTURE(win.width);
        CAPTURE(timm::interpolation_name(interpolation));
        const Image fast = timm::jpeg_dct_resized_crop(file.bytes, file.name, 3, win.top, win.left, win.height,
                                                       win.width, out, out, interpolation);
        const Image old = old_jpeg_dct_resized_crop(timm::decode_jpeg_scaled(file.bytes, file.name, 3, d), d, win.top,
                                                    win.left, win.height, win.width, out, out, interpolation);
        REQUIRE(fast.pixels.size() == old.pixels.size());
        CHECK(timm::test::max_diff(fast.pixels, old.pixels) == 0);
        if (d == 1) {
          // d = 1 is exactly decode_image + resized_crop (PIL's pipeline).
          const Image exact =
              timm::resized_crop(full, win.top, win.left, win.height, win.width, out, out, interpolation);
          CHECK(timm::test::max_diff(fast.pixels, exact.pixels) == 0);
        }
        ++compared;
        ++by_denominator[d];
      }
    }
  }
  CHECK(by_denominator[1] > 0);
  CHECK(by_denominator[2] > 0);
  CHECK(by_denominator[4] > 0);
  CHECK(by_denominator[8] > 0);
  MESSAGE("jpeg_dct_resized_crop: " << compared << " crops equal to the whole-decode algorithm (d=1: "
                                    << by_denominator[1] << ", 2: " << by_denominator[2] << ", 4: " << by_denominator[4]
                                    << ", 8: " << by_denominator[8] << ")");
}

}  // namespace test_data_jpeg_region
