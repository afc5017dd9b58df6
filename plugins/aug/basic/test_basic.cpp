// The basic augmentations: eval crops against timm's PIL transforms, reprs
// against timm's, RandomResizedCrop geometry, flips, ColorJitter, Normalize.
#include <ATen/ATen.h>
#include <doctest/doctest.h>

#include <fstream>
#include <sstream>
#include <unordered_set>

#include "test_support.hpp"
#include "timm/data/image_ops.hpp"
#include "timm/data/transform.hpp"
#include "timm/plugin/registry.hpp"

namespace test_basic {

using namespace timm;

namespace {

// The Compose part of our repr: timm prints only that.
std::string compose_repr(const TransformPipeline& t) {
  const std::string r = t.repr();
  return r.substr(0, r.find("\nBatch("));
}

// An image whose pixel (y, x) holds (x, y, 0): nearest resampling keeps them.
Image coordinate_image(int64_t h, int64_t w) {
  Image img(h, w, 3);
  for (int64_t y = 0; y < h; ++y) {
    for (int64_t x = 0; x < w; ++x) {
      img.row(y)[x * 3] = static_cast<std::uint8_t>(x);
      img.row(y)[x * 3 + 1] = static_cast<std::uint8_t>(y);
    }
  }
  return img;
}

const ImageTransform& image_stage(const TransformPipeline& t, std::size_t i) {
  REQUIRE(t.image.size() > i);
  return *t.image[i];
}

}  // namespace

TEST_CASE("the plugin registers timm's stage names with descriptions") {
  test::load_builtin_plugins();
  for (const char* name :
       {"rrc", "hflip", "vflip", "color_jitter", "center", "squash", "border", "resize_center", "normalize"}) {
    const RegistryEntry* entry = Registry::global().find(PluginKind::kAugmentation, name);
    REQUIRE_MESSAGE(entry != nullptr, name);
    CHECK(!entry->description.empty());
  }
}

TEST_CASE("eval and no-aug transforms match timm's PIL pipeline; reprs match timm") {
  test::load_builtin_plugins();
  test::TempDir dir;
  test::run_oracle("data_oracle.py", {"eval", dir.path().string()});
  std::ifstream manifest(dir / "manifest.txt");
  std::string line;
  int cases = 0, worst = 0;
  while (std::getline(manifest, line)) {
    std::istringstream f(line);
    std::string name, mode, interp, expected, repr_file;
    int64_t in_h, in_w, h, w, out_h, out_w;
    double crop_pct;
    int no_aug;
    f >> name >> in_h >> in_w >> mode >> interp >> crop_pct >> h >> w >> no_aug >> out_h >> out_w >> expected >>
        repr_file;
    TransformArgs args;
    args.is_training = no_aug != 0;
    args.no_aug = no_aug != 0;
    args.input_size = {3, h, w};
    args.interpolation = interp;
    args.crop_pct = crop_pct;
    args.crop_mode = mode;
    const TransformPipeline t = create_transform(args);
    CHECK_MESSAGE(compose_repr(t) == test::read_file(dir / repr_file), line);
    Image img = test::read_raw(dir / (name + ".in"), in_h, in_w, 3);
    Rng rng(0);
    t.apply(img, rng);
    REQUIRE(img.height == out_h);
    REQUIRE(img.width == out_w);
    const Image want = test::read_raw(dir / expected, out_h, out_w, 3);
    const int d = test::max_diff(img.pixels, want.pixels);
    CHECK_MESSAGE(d <= 1, line << ": max difference " << d);
    worst = std::max(worst, d);
    ++cases;
  }
  CHECK(cases == 24);
  MESSAGE("eval transforms vs timm: " << cases << " cases, max difference " << worst);
  CHECK(worst == 0);

  // Train pipelines: the reprs (randomness differs by design).
  struct TrainCase {
    std::string interpolation = "bilinear";
    double hflip = 0.5, vflip = 0.0;
    std::optional<double> color_jitter = 0.4;
    std::vector<double> scale{0.08, 1.0}, ratio{3.0 / 4.0, 4.0 / 3.0};
  };
  std::vector<TrainCase> train(3);
  train[1].interpolation = "random";
  train[1].vflip = 0.5;
  train[1].color_jitter.reset();
  train[1].scale = {0.35, 1.0};
  train[2].interpolation = "bicubic";
  train[2].hflip = 0.0;
  train[2].color_jitter = 0.25;
  train[2].ratio = {0.5, 2.0};
  for (std::size_t k = 0; k < train.size(); ++k) {
    TransformArgs args;
    args.is_training = true;
    args.input_size = {3, 192, 160};
    args.interpolation = train[k].interpolation;
    args.hflip = train[k].hflip;
    args.vflip = train[k].vflip;
    args.color_jitter = train[k].color_jitter;
    args.scale = train[k].scale;
    args.ratio = train[k].ratio;
    const TransformPipeline t = create_transform(args);
    CHECK(compose_repr(t) == test::read_file(dir / ("repr_train_" + std::to_string(k) + ".txt")));
    REQUIRE(t.batch.size() == 1);
    CHECK(t.batch[0]->repr() == "Normalize(mean=(0.485, 0.456, 0.406), std=(0.229, 0.224, 0.225))");
  }
}

TEST_CASE("rrc: output size, crops inside the image, deterministic per seed") {
  test::load_builtin_plugins();
  TransformArgs args;
  args.is_training = true;
  args.input_size = {3, 48, 40};
  args.interpolation = "nearest";
  args.hflip = 0.0;
  args.color_jitter.reset();
  const TransformPipeline t = create_transform(args);
  REQUIRE(t.image.size() == 1);
  const ImageTransform& rrc = image_stage(t, 0);
  const Image src = coordinate_image(150, 200);
  std::unordered_set<std::string> distinct;
  for (std::uint64_t seed = 0; seed < 300; ++seed) {
    Image img = src;
    Rng rng(seed);
    rrc.apply(img, rng);
    REQUIRE(img.height == 48);
    REQUIRE(img.width == 40);
    // Nearest samples of a crop: coordinates inside the image, increasing
    // along rows and columns, spanning an area and aspect in range.
    const int x0 = img.row(0)[0], y0 = img.row(0)[1];
    const int x1 = img.row(47)[39 * 3], y1 = img.row(47)[39 * 3 + 1];
    REQUIRE(x1 < 200);
    REQUIRE(y1 < 150);
    for (int64_t x = 1; x < 40; ++x) REQUIRE(img.row(0)[x * 3] >= img.row(0)[(x - 1) * 3]);
    for (int64_t y = 1; y < 48; ++y) REQUIRE(img.row(y)[1] >= img.row(y - 1)[1]);
    // The sampled span covers most of the crop: (n - 1) / n of it at least.
    const double w = (x1 - x0 + 1) * 40.0 / 39.0, h = (y1 - y0 + 1) * 48.0 / 47.0;
    CHECK(w * h >= 0.08 * 200 * 150 * 0.85);
    CHECK(w / h >= 0.75 * 0.85);
    CHECK(w / h <= 4.0 / 3.0 / 0.85);
    Image again = src;
    Rng rng2(seed);
    rrc.apply(again, rng2);
    REQUIRE(again.pixels == img.pixels);
    distinct.insert(std::string(img.pixels.begin(), img.pixels.end()));
  }
  CHECK(distinct.size() > 250);

  // A tiny image still works (the fallback crop).
  Image tiny = coordinate_image(3, 50);
  Rng rng(1);
  rrc.apply(tiny, rng);
  CHECK(tiny.height == 48);
}

TEST_CASE("flips follow their probability; p=1 flips exactly") {
  test::load_builtin_plugins();
  const auto& factory = Registry::global().factory<AugmentationFactory>(PluginKind::kAugmentation, "hflip");
  TransformArgs args;
  args.hflip = 1.0;
  auto always = factory(args).image;
  const Image src = coordinate_image(5, 7);
  Image img = src;
  Rng rng(3);
  always->apply(img, rng);
  Image want = src;
  hflip(want);
  CHECK(img.pixels == want.pixels);
  CHECK(always->repr() == "RandomHorizontalFlip(p=1.0)");

  args.hflip = 0.5;
  auto half = factory(args).image;
  int flipped = 0;
  for (std::uint64_t seed = 0; seed < 2000; ++seed) {
    Image i = src;
    Rng r(seed);
    half->apply(i, r);
    flipped += i.pixels != src.pixels;
  }
  CHECK(flipped > 900);
  CHECK(flipped < 1100);

  args.vflip = 1.0;
  auto v = Registry::global().factory<AugmentationFactory>(PluginKind::kAugmentation, "vflip")(args).image;
  img = src;
  v->apply(img, rng);
  want = src;
  vflip(want);
  CHECK(img.pixels == want.pixels);
  CHECK(v->repr() == "RandomVerticalFlip(p=1.0)");
}

TEST_CASE("color_jitter stays in range and is a no-op on saturation for L") {
  test::load_builtin_plugins();
  TransformArgs args;
  args.color_jitter = 0.4;
  auto cj = Registry::global().factory<AugmentationFactory>(PluginKind::kAugmentation, "color_jitter")(args).image;
  Image gray(8, 8, 1);
  for (std::size_t i = 0; i < gray.pixels.size(); ++i) gray.pixels[i] = static_cast<std::uint8_t>(i * 4);
  bool changed = false;
  for (std::uint64_t seed = 0; seed < 20; ++seed) {
    Image g = gray;
    Rng rng(seed);
    cj->apply(g, rng);
    CHECK(g.channels == 1);
    changed |= g.pixels != gray.pixels;
  }
  CHECK(changed);
  // Brightness factors are in [0.6, 1.4]: a mid-gray pixel stays in range
  // of what those factors can make of it.
  Image rgb(1, 1, 3);
  rgb.pixels = {100, 100, 100};
  for (std::uint64_t seed = 0; seed < 200; ++seed) {
    Image x = rgb;
    Rng rng(seed);
    cj->apply(x, rng);
    CHECK(x.pixels[0] >= 60);
    CHECK(x.pixels[0] <= 140);
  }
}

TEST_CASE("normalize: (x - mean*255) / (std*255), adapting mean/std to the channels") {
  test::load_builtin_plugins();
  TransformArgs args;
  args.input_size = {3, 2, 2};
  auto norm = Registry::global().factory<AugmentationFactory>(PluginKind::kAugmentation, "normalize")(args).batch;
  REQUIRE(norm);
  at::Tensor batch = at::full({2, 3, 2, 2}, 128, at::kByte);
  Rng rng(0);
  norm->apply(batch, rng);
  REQUIRE((batch.scalar_type() == at::kFloat));
  CHECK(batch[1][0][1][1].item<float>() == doctest::Approx((128 - 0.485 * 255) / (0.229 * 255)).epsilon(1e-6));
  CHECK(batch[0][2][0][0].item<float>() == doctest::Approx((128 - 0.406 * 255) / (0.225 * 255)).epsilon(1e-6));

  // One channel with ImageNet's three values: timm uses their average.
  at::Tensor gray = at::full({1, 1, 2, 2}, 50.0, at::kFloat);
  norm->apply(gray, rng);
  const double m = (0.485 + 0.456 + 0.406) / 3, s = (0.229 + 0.224 + 0.225) / 3;
  CHECK(gray[0][0][0][0].item<float>() == doctest::Approx((50 - m * 255) / (s * 255)).epsilon(1e-6));

  args.mean = {0.5};
  args.std = {0.25};
  auto single = Registry::global().factory<AugmentationFactory>(PluginKind::kAugmentation, "normalize")(args).batch;
  at::Tensor x = at::full({1, 3, 1, 1}, 255.0, at::kFloat);
  single->apply(x, rng);
  CHECK(x[0][2][0][0].item<float>() == doctest::Approx(2.0));
  CHECK(single->repr() == "Normalize(mean=(0.5,), std=(0.25,))");
}

TEST_CASE("unknown crop modes are usage errors") {
  test::load_builtin_plugins();
  TransformArgs args;
  args.crop_mode = "zoom";
  CHECK_THROWS_AS(create_transform(args), UsageError);
  args.crop_mode = "center";
  args.interpolation = "cubic";
  CHECK_THROWS_AS(create_transform(args), UsageError);

  TransformArgs train;
  train.is_training = true;
  train.train_crop_mode = "zoom";
  try {
    create_transform(train);
    FAIL("expected a UsageError");
  } catch (const UsageError& e) {
    const std::string message = e.what();
    CHECK_MESSAGE(message.find("--train-crop-mode 'zoom'") != std::string::npos, message);
    CHECK_MESSAGE(message.find("rrc") != std::string::npos, message);
  }
  train.no_aug = true;  // --no-aug ignores the train crop mode, as timm
  CHECK(create_transform(train).image.size() == 1);
}

TEST_CASE("the stages declare their place in timm's create_transform") {
  test::load_builtin_plugins();
  auto traits = [](const char* name) {
    const RegistryEntry* entry = Registry::global().find(PluginKind::kAugmentation, name);
    REQUIRE_MESSAGE(entry != nullptr, name);
    const AugmentationTraits* t = traits_of<AugmentationTraits>(*entry);
    REQUIRE_MESSAGE(t != nullptr, name);
    REQUIRE_MESSAGE(t->applies, name);
    return *t;
  };
  for (const char* crop : {"rrc", "center", "squash", "border", "resize_center"}) {
    CHECK_MESSAGE(traits(crop).stage == AugmentationStage::kCrop, crop);
  }
  CHECK(traits("hflip").stage == AugmentationStage::kPrimary);
  CHECK(traits("vflip").stage == AugmentationStage::kPrimary);
  CHECK(traits("hflip").order < traits("vflip").order);
  CHECK(traits("color_jitter").stage == AugmentationStage::kSecondary);
  CHECK(traits("normalize").stage == AugmentationStage::kFinal);

  // Which crop applies: timm's defaults for empty modes, --no-aug's resize.
  TransformArgs eval;
  CHECK(traits("center").applies(eval));
  CHECK_FALSE(traits("rrc").applies(eval));
  eval.crop_mode = "squash";
  CHECK(traits("squash").applies(eval));
  CHECK_FALSE(traits("center").applies(eval));
  TransformArgs train;
  train.is_training = true;
  CHECK(traits("rrc").applies(train));
  CHECK_FALSE(traits("center").applies(train));
  CHECK(traits("hflip").applies(train));
  train.no_aug = true;
  CHECK(traits("resize_center").applies(train));
  CHECK_FALSE(traits("rrc").applies(train));
  CHECK_FALSE(traits("hflip").applies(train));
  CHECK(traits("normalize").applies(train));

  // Colour jitter: off with --aa, except for 3-Augment.
  TransformArgs jitter;
  jitter.is_training = true;
  CHECK(traits("color_jitter").applies(jitter));
  jitter.auto_augment = "rand-m9-mstd0.5-inc1";
  CHECK_FALSE(traits("color_jitter").applies(jitter));
  jitter.auto_augment = "3a";
  CHECK(traits("color_jitter").applies(jitter));
  jitter.color_jitter = 0.0;
  CHECK_FALSE(traits("color_jitter").applies(jitter));
}

}  // namespace test_basic
