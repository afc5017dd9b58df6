// The PIL ops of timm's auto_augment.py against PIL itself (through timm's op
// functions): affine geometry with every resampling, the point ops, the
// enhance ops, sharpness and gaussian blur, on Fashion-MNIST images, synthetic
// images and real photographs, over a sweep of arguments.
#include <doctest/doctest.h>

#include <fstream>
#include <map>
#include <sstream>

#include "pil_ops.hpp"
#include "test_support.hpp"
#include "timm/base/error.hpp"
#include "timm/data/image_ops.hpp"

using namespace timm;
using namespace timm::autoaugment;

namespace {

// The fill colour aug_oracle.py passes: a mean-like colour per channel.
std::vector<std::uint8_t> fill_for(const Image& img) {
  return img.channels == 3 ? std::vector<std::uint8_t>{124, 116, 104} : std::vector<std::uint8_t>{121};
}

Image apply_op(const Image& src, const std::string& op, double arg, const std::string& resample) {
  const std::vector<std::uint8_t> fill = fill_for(src);
  const Interpolation r = resample == "-" ? Interpolation::kBilinear : interpolation_from_name(resample);
  Image img = src;
  if (op == "rotate") return rotate(src, arg, r, fill);
  if (op == "shear_x") return shear_x(src, arg, r, fill);
  if (op == "shear_y") return shear_y(src, arg, r, fill);
  if (op == "translate_x_abs") return translate_x(src, arg, r, fill);
  if (op == "translate_y_abs") return translate_y(src, arg, r, fill);
  if (op == "translate_x_rel") return translate_x(src, arg * static_cast<double>(src.width), r, fill);
  if (op == "translate_y_rel") return translate_y(src, arg * static_cast<double>(src.height), r, fill);
  if (op == "auto_contrast") autocontrast(img);
  if (op == "equalize") equalize(img);
  if (op == "invert") invert(img);
  if (op == "grayscale") return convert_channels(src, 1);
  if (op == "posterize") posterize(img, static_cast<int>(arg));
  if (op == "solarize") solarize(img, static_cast<int>(arg));
  if (op == "solarize_add") solarize_add(img, static_cast<int>(arg));
  if (op == "color") adjust_saturation(img, arg);
  if (op == "contrast") adjust_contrast(img, arg);
  if (op == "brightness") adjust_brightness(img, arg);
  if (op == "sharpness") adjust_sharpness(img, arg);
  if (op == "gaussian_blur") return gaussian_blur(src, arg);
  return img;
}

}  // namespace

TEST_CASE("every op timm's augmentations use matches PIL, on Fashion-MNIST, synthetic images and photographs") {
  test::TempDir dir;
  test::run_oracle("aug_oracle.py", {"ops", dir.path().string()});
  const std::string photo_list = test::read_file(dir / "photos.txt");
  std::ifstream manifest(dir / "manifest.txt");
  std::string line;
  int cases = 0, photo_cases = 0, worst = 0;
  std::map<std::string, int> worst_by_op;
  std::map<std::string, Image> inputs;
  while (std::getline(manifest, line)) {
    std::istringstream f(line);
    std::string name, op, resample, expected;
    int64_t h, w, c, out_c;
    double arg;
    f >> name >> h >> w >> c >> op >> arg >> resample >> out_c >> expected;
    if (!inputs.count(name)) inputs[name] = test::read_raw(dir / (name + ".in"), h, w, c);
    const Image got = apply_op(inputs[name], op, arg, resample);
    REQUIRE(got.height == h);
    REQUIRE(got.width == w);
    REQUIRE(got.channels == out_c);
    const int d = test::max_diff(got.pixels, test::read_raw(dir / expected, h, w, out_c).pixels);
    // Exact ports: every op is expected to equal PIL bit for bit.
    CHECK_MESSAGE(d == 0, line << ": max difference " << d);
    worst = std::max(worst, d);
    const std::string key = op + (resample == "-" ? "" : "/" + resample);
    worst_by_op[key] = std::max(worst_by_op[key], d);
    ++cases;
    photo_cases += name.rfind("photo", 0) == 0;
  }
  CHECK(cases > 800);
  MESSAGE("PIL ops vs PIL: " << cases << " cases (" << photo_cases << " on photographs), max difference " << worst);
  for (const auto& [op, d] : worst_by_op) MESSAGE("  " << op << ": max difference " << d);
  if (photo_cases == 0) {
    WARN_MESSAGE(false, "no photographs found (plasma-workspace-wallpapers or the Rust docs' JPEGs)");
  } else {
    MESSAGE("photographs: " << photo_list);
  }
}

TEST_CASE("affine ops reject resampling PIL's transform refuses; fills must match the channels") {
  Image img(4, 5, 3);
  const std::vector<std::uint8_t> fill{1, 2, 3};
  CHECK_THROWS_AS(rotate(img, 10.0, Interpolation::kLanczos, fill), UsageError);
  const std::vector<std::uint8_t> bad{1, 2};
  CHECK_THROWS_AS(shear_x(img, 0.1, Interpolation::kBilinear, bad), UsageError);
  // A translation by the whole width leaves only the fill.
  const Image moved = translate_x(img, 5.0, Interpolation::kNearest, fill);
  for (std::size_t i = 0; i < moved.pixels.size(); ++i) CHECK(moved.pixels[i] == fill[i % 3]);
}
