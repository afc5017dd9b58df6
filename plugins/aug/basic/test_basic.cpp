// The basic augmentations: eval crops against timm's PIL transforms, reprs
// against timm's, RandomResizedCrop geometry, flips, ColorJitter, Normalize;
// rkrc / rkrr against timm's transforms on the same random draws, blur and
// grayscale against torchvision's, the probabilities of the RandomApply'd
// stages.
#include <ATen/ATen.h>
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <unordered_set>

#include <nlohmann/json.hpp>

#include "test_support.hpp"
#include "timm/data/image_ops.hpp"
#include "timm/data/transform.hpp"
#include "timm/log/log.hpp"
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
       {"rrc", "rkrc", "rkrr", "hflip", "vflip", "color_jitter", "grayscale", "gaussian_blur", "center", "squash",
        "border", "resize_center", "normalize", "naflex_rrc", "naflex_resize", "trim_border"}) {
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
    int64_t border;
    f >> name >> in_h >> in_w >> mode >> interp >> crop_pct >> h >> w >> no_aug >> border >> out_h >> out_w >>
        expected >> repr_file;
    TransformArgs args;
    args.is_training = no_aug != 0;
    args.no_aug = no_aug != 0;
    args.input_size = {3, h, w};
    args.interpolation = interp;
    args.crop_pct = crop_pct;
    args.crop_mode = mode;
    args.crop_border_pixels = border;
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
  CHECK(cases == 32);  // 4 images x 8 configs, 2 of them with TrimBorder
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

TEST_CASE("normalize equals torch's sub_ then div_ bit for bit, contiguous (one pass) or channels-last") {
  test::load_builtin_plugins();
  TransformArgs args;
  auto norm = Registry::global().factory<AugmentationFactory>(PluginKind::kAugmentation, "normalize")(args).batch;
  const at::Tensor pixels = at::randint(0, 256, {3, 3, 17, 19}, at::kByte).to(at::kFloat);
  const at::Tensor mean = at::tensor(std::vector<double>{0.485 * 255, 0.456 * 255, 0.406 * 255}).to(at::kFloat);
  const at::Tensor std = at::tensor(std::vector<double>{0.229 * 255, 0.224 * 255, 0.225 * 255}).to(at::kFloat);
  const at::Tensor want = pixels.clone().sub_(mean.view({1, 3, 1, 1})).div_(std.view({1, 3, 1, 1}));
  Rng rng(0);
  at::Tensor contiguous = pixels.clone();
  norm->apply(contiguous, rng);
  CHECK(at::equal(contiguous, want));
  at::Tensor channels_last = pixels.contiguous(at::MemoryFormat::ChannelsLast);
  norm->apply(channels_last, rng);
  CHECK(at::equal(channels_last, want));
}

namespace {

// A batch stage that records the intra-op threads it ran with.
class ThreadsSeen final : public BatchTransform {
 public:
  explicit ThreadsSeen(int& seen) : seen_(seen) {}
  void apply(at::Tensor&, Rng&) const override { seen_ = at::get_num_threads(); }
  std::string repr() const override { return "ThreadsSeen()"; }

 private:
  int& seen_;
};

}  // namespace

TEST_CASE("prepare_input: the batch as the dtype with the batch stages applied, on the calling thread alone") {
  test::load_builtin_plugins();
  TransformArgs args;
  TransformPipeline pipeline;
  pipeline.batch.push_back(
      Registry::global().factory<AugmentationFactory>(PluginKind::kAugmentation, "normalize")(args).batch);
  int seen = 0;
  pipeline.batch.push_back(std::make_shared<ThreadsSeen>(seen));
  const at::Tensor images = at::randint(0, 256, {2, 3, 5, 7}, at::kByte);
  at::Tensor want = images.to(at::kFloat);
  Rng rng(0);
  pipeline.batch.front()->apply(want, rng);

  const int threads = at::get_num_threads();
  at::set_num_threads(2);  // one thread would show nothing
  const at::Tensor input = prepare_input(images, pipeline, rng, {});
  CHECK(seen == 1);
  CHECK(at::get_num_threads() == 2);  // restored
  CHECK((input.scalar_type() == at::kFloat));
  CHECK(at::equal(input, want));

  const at::Tensor last = prepare_input(images, pipeline, rng, {.dtype = at::kBFloat16, .channels_last = true});
  CHECK((last.scalar_type() == at::kBFloat16));
  CHECK(last.is_contiguous(at::MemoryFormat::ChannelsLast));
  CHECK(at::allclose(last.to(at::kFloat), want, /*rtol=*/1e-2, /*atol=*/1e-2));
  at::set_num_threads(threads);
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

TEST_CASE("trim_border: eval only, before the crop; a negative border or an image it leaves empty is an error") {
  test::load_builtin_plugins();
  TransformArgs eval;
  eval.crop_border_pixels = 5;
  const TransformPipeline t = create_transform(eval);
  REQUIRE(t.image.size() == 2);
  CHECK(t.image[0]->repr() == "TrimBorder()");
  TransformArgs train = eval;
  train.is_training = true;  // timm's train transforms take no border
  for (const auto& stage : create_transform(train).image) CHECK(stage->repr() != "TrimBorder()");

  eval.crop_border_pixels = -1;
  CHECK_THROWS_WITH_AS(create_transform(eval), "--crop-border-pixels must be >= 0, got -1", UsageError);
  eval.crop_border_pixels = 20;
  Image image(40, 60, 3);
  Rng rng(0);
  CHECK_THROWS_WITH_AS(create_transform(eval).apply(image, rng),
                       "TrimBorder(20): a 40x60 image has no pixels inside a border of 20", Error);
  eval.crop_border_pixels = 19;  // (40 - 38) x (60 - 38) left
  Image thin(40, 60, 3);
  create_transform(eval).image[0]->apply(thin, rng);
  CHECK(thin.height == 2);
  CHECK(thin.width == 22);
  eval.crop_border_pixels = INT64_MAX;  // no overflow on the way to the error
  CHECK_THROWS_AS(create_transform(eval).apply(image, rng), Error);
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

// ---- --train-crop-mode rkrc / rkrr, --color-jitter-prob, --grayscale-prob,
// --gaussian-blur-prob -----------------------------------------------------

namespace {

std::string exact(double v) { return format("%.17g", v); }

void write_raw(const std::filesystem::path& path, const Image& img) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(img.pixels.data()), static_cast<std::streamsize>(img.pixels.size()));
  REQUIRE(f.good());
}

// Gradients with noise and sharp edges, so that resampling, padding and
// blurring all show.
Image pattern_image(int64_t h, int64_t w, int64_t c, std::uint32_t seed) {
  Image img(h, w, c);
  std::uint32_t s = seed * 2654435761U + 1U;
  for (int64_t y = 0; y < h; ++y) {
    for (int64_t x = 0; x < w; ++x) {
      for (int64_t k = 0; k < c; ++k) {
        s = s * 1664525U + 1013904223U;
        const int64_t v = x * 255 / std::max<int64_t>(1, w - 1) * (k % 2 == 0) + y * 9 * (k + 1) + (s >> 27);
        img.row(y)[x * c + k] = static_cast<std::uint8_t>(((x / 5 + y / 7) % 3 == 0 ? 255 - v % 256 : v) & 255);
      }
    }
  }
  return img;
}

AugmentationFactory stage_factory(const char* name) {
  return Registry::global().factory<AugmentationFactory>(PluginKind::kAugmentation, name);
}

// The draws the rkrc / rkrr stage makes for `seed`, replayed in its order
// (basic.cpp's ResizeKeepRatioCrop), as QueueRandom tokens for the oracle,
// which then runs timm's own transforms on them.
std::vector<std::string> rkr_draws(std::uint64_t seed, int64_t in_h, int64_t in_w, int64_t th, int64_t tw,
                                   bool random_interpolation, bool random_crop, const std::vector<double>& scale,
                                   const std::vector<double>& ratio) {
  std::vector<std::string> draws;
  Rng rng(seed);
  double fh = 1.0, fw = 1.0;
  double u = rng.uniform();
  draws.push_back("r:" + exact(u));
  if (u < 0.5) {
    const double s = scale[0] + (scale[1] - scale[0]) * rng.uniform();
    draws.push_back("u:" + exact(s));
    fh = fw = 1.0 / std::sqrt(s);
  }
  u = rng.uniform();
  draws.push_back("r:" + exact(u));
  if (u < 0.5) {
    const double lo = std::log(ratio[0]), hi = std::log(ratio[1]);
    const double la = lo + (hi - lo) * rng.uniform();
    draws.push_back("u:" + exact(la));
    const double a = std::sqrt(std::exp(la));
    fh = fh / a;
    fw = fw * a;
  }
  const double r = std::min(static_cast<double>(in_h) / th, static_cast<double>(in_w) / tw);
  const int64_t h = round_half_even(static_cast<double>(in_h) * fh / r);
  const int64_t w = round_half_even(static_cast<double>(in_w) * fw / r);
  if (random_interpolation) draws.push_back("c:" + std::to_string(rng.randint(0, 1)));
  if (random_crop) {
    draws.push_back("i:" + std::to_string(rng.randint(0, std::abs(h - th))));
    draws.push_back("i:" + std::to_string(rng.randint(0, std::abs(w - tw))));
  }
  return draws;
}

// The number of `seeds` samples (seeded 0, 1, ...) for which `applied` holds.
template <class F>
int count_applied(int seeds, F applied) {
  int n = 0;
  for (int seed = 0; seed < seeds; ++seed) n += applied(static_cast<std::uint64_t>(seed)) ? 1 : 0;
  return n;
}

}  // namespace

TEST_CASE("rkrc, rkrr, colour jitter probability, grayscale and blur: reprs match timm's create_transform") {
  test::load_builtin_plugins();
  test::TempDir dir;
  test::run_oracle("aug_oracle.py", {"basic", dir.path().string()});
  std::ifstream manifest(dir / "basic_reprs.txt");
  std::string line;
  int cases = 0;
  while (std::getline(manifest, line)) {
    std::istringstream f(line);
    std::string mode, interp, cj, cjp, aa, repr_file;
    int64_t h, w;
    double gray, blur, s0, s1, r0, r1, hflip;
    f >> mode >> h >> w >> interp >> cj >> cjp >> gray >> blur >> aa >> s0 >> s1 >> r0 >> r1 >> hflip >> repr_file;
    REQUIRE_MESSAGE(!f.fail(), line);
    TransformArgs args;
    args.is_training = true;
    args.train_crop_mode = mode == "-" ? "" : mode;
    args.input_size = {3, h, w};
    args.interpolation = interp;
    args.color_jitter = cj == "-" ? std::nullopt : std::optional<double>(std::stod(cj));
    args.color_jitter_prob = cjp == "-" ? std::nullopt : std::optional<double>(std::stod(cjp));
    args.grayscale_prob = gray;
    args.gaussian_blur_prob = blur;
    args.auto_augment = aa == "-" ? "" : aa;
    args.scale = {s0, s1};
    args.ratio = {r0, r1};
    args.hflip = hflip;
    const TransformPipeline t = create_transform(args);
    CHECK_MESSAGE(compose_repr(t) == test::read_file(dir / repr_file), line);
    ++cases;
  }
  CHECK(cases == 6);
}

TEST_CASE("rkrc and rkrr equal timm's transforms for the same random draws; blur and grayscale equal torchvision's") {
  test::load_builtin_plugins();
  test::TempDir dir;
  struct Input {
    std::string name;
    Image image;
  };
  const std::vector<Input> inputs{{"rgb0", pattern_image(50, 70, 3, 1)},
                                  {"gray1", pattern_image(23, 31, 1, 2)},
                                  {"rgb2", pattern_image(61, 45, 3, 3)},
                                  {"rgb3", pattern_image(12, 12, 3, 4)},
                                  {"rgb4", pattern_image(40, 52, 3, 5)}};
  for (const Input& in : inputs) write_raw(dir / (in.name + ".in"), in.image);

  struct RkrCase {
    std::size_t input;
    std::string mode;
    int64_t th, tw;
    std::string interpolation;
    std::vector<double> scale, ratio;
  };
  // Scales above 1 shrink the image below the crop: reflect padding, beyond
  // one reflection with (16, 25).
  const std::vector<RkrCase> rkr{
      {0, "rkrc", 32, 40, "bilinear", {0.08, 1.0}, {0.75, 4.0 / 3.0}},
      {0, "rkrr", 32, 40, "bicubic", {0.08, 1.0}, {0.75, 4.0 / 3.0}},
      {1, "rkrr", 40, 36, "random", {0.08, 1.0}, {0.5, 2.0}},
      {2, "rkrc", 24, 24, "nearest", {16.0, 25.0}, {0.75, 4.0 / 3.0}},
      {2, "rkrr", 30, 20, "bilinear", {16.0, 25.0}, {0.75, 4.0 / 3.0}},
      {1, "rkrc", 40, 36, "random", {2.5, 4.0}, {0.8, 1.25}},
  };
  struct Expect {
    std::string tag;
    Image ours;
    bool blur = false;
  };
  std::vector<Expect> expect;
  std::ofstream cases(dir / "basic_cases.txt");
  auto head = [&](const char* kind, const std::string& tag, const Input& in) {
    cases << kind << ' ' << tag << ' ' << in.name << ".in " << in.image.height << ' ' << in.image.width << ' '
          << in.image.channels;
  };
  for (std::size_t k = 0; k < rkr.size(); ++k) {
    const RkrCase& c = rkr[k];
    TransformArgs args;
    args.is_training = true;
    args.input_size = {3, c.th, c.tw};
    args.interpolation = c.interpolation;
    args.scale = c.scale;
    args.ratio = c.ratio;
    const auto stage = stage_factory(c.mode.c_str())(args).image;
    REQUIRE(stage);
    const Input& in = inputs[c.input];
    for (std::uint64_t seed = 0; seed < 12; ++seed) {
      const std::string tag = "rkr" + std::to_string(k) + "_" + std::to_string(seed);
      Image img = in.image;
      Rng rng(seed);
      stage->apply(img, rng);
      REQUIRE(img.height == c.th);
      REQUIRE(img.width == c.tw);
      head("rkr", tag, in);
      cases << ' ' << c.mode << ' ' << c.th << ' ' << c.tw << ' ' << c.interpolation << ' ' << exact(c.scale[0]) << ' '
            << exact(c.scale[1]) << ' ' << exact(c.ratio[0]) << ' ' << exact(c.ratio[1]);
      for (const std::string& d : rkr_draws(seed, in.image.height, in.image.width, c.th, c.tw,
                                            c.interpolation == "random", c.mode == "rkrr", c.scale, c.ratio)) {
        cases << ' ' << d;
      }
      cases << '\n';
      expect.push_back({tag, std::move(img)});
    }
  }

  // Blur with p=1: the stage draws RandomApply's uniform, then sigma.
  TransformArgs blur_args;
  blur_args.gaussian_blur_prob = 1.0;
  const auto blur = stage_factory("gaussian_blur")(blur_args).image;
  for (std::size_t i : {0, 1, 2, 3, 4}) {
    for (std::uint64_t seed = 0; seed < 6; ++seed) {
      const std::string tag = "blur" + std::to_string(i) + "_" + std::to_string(seed);
      Rng replay(seed);
      replay.uniform();
      const auto sigma = static_cast<float>(replay.uniform(0.1, 2.0));
      Image img = inputs[i].image;
      Rng rng(seed);
      blur->apply(img, rng);
      head("blur", tag, inputs[i]);
      cases << ' ' << exact(sigma) << '\n';
      expect.push_back({tag, std::move(img), true});
    }
  }
  TransformArgs gray_args;
  gray_args.grayscale_prob = 1.0;
  const auto gray = stage_factory("grayscale")(gray_args).image;
  for (std::size_t i : {0, 1, 4}) {
    const std::string tag = "gray" + std::to_string(i);
    Image img = inputs[i].image;
    Rng rng(7);
    gray->apply(img, rng);
    head("gray", tag, inputs[i]);
    cases << '\n';
    expect.push_back({tag, std::move(img)});
  }
  cases.close();

  test::run_oracle("aug_oracle.py", {"basic", dir.path().string()});
  std::ifstream results(dir / "basic_results.txt");
  std::string tag;
  int64_t h, w, c;
  std::size_t n = 0;
  int worst_blur = 0;
  std::size_t blur_values = 0, blur_off = 0;
  while (results >> tag >> h >> w >> c) {
    REQUIRE(n < expect.size());
    const Expect& e = expect[n++];
    REQUIRE(e.tag == tag);
    REQUIRE(e.ours.height == h);
    REQUIRE(e.ours.width == w);
    REQUIRE(e.ours.channels == c);
    const Image want = test::read_raw(dir / (tag + ".out"), h, w, c);
    if (!e.blur) {
      CHECK_MESSAGE(test::max_diff(e.ours.pixels, want.pixels) == 0, tag);
      continue;
    }
    const int d = test::max_diff(e.ours.pixels, want.pixels);
    CHECK_MESSAGE(d <= 1, tag << ": max difference " << d);
    worst_blur = std::max(worst_blur, d);
    for (std::size_t i = 0; i < want.pixels.size(); ++i) blur_off += e.ours.pixels[i] != want.pixels[i];
    blur_values += want.pixels.size();
  }
  CHECK(n == expect.size());
  // Tolerance: torch's float32 23x23 convolution against ours in double
  // differs only where the exact value lies within float rounding of a half:
  // at most 1, in at most 0.5% of the values.
  MESSAGE("gaussian blur vs torchvision: max difference " << worst_blur << ", " << blur_off << " of " << blur_values
                                                          << " values differ");
  CHECK(blur_off * 200 <= blur_values);
}

TEST_CASE("grayscale, blur and colour jitter apply with their probability") {
  test::load_builtin_plugins();
  // Deterministic counts (fixed seeds); the bounds are six standard
  // deviations of Binomial(20000, 0.3) wide (sd 64.8).
  constexpr int kSeeds = 20000;
  auto within = [](int count) {
    CHECK(count > 6000 - 389);
    CHECK(count < 6000 + 389);
  };
  const Image colour = pattern_image(4, 4, 3, 9);

  TransformArgs args;
  args.grayscale_prob = 0.3;
  const auto gray = stage_factory("grayscale")(args).image;
  CHECK(gray->repr() == "RandomGrayscale(p=0.3)");
  within(count_applied(kSeeds, [&](std::uint64_t seed) {
    Image img = colour;
    Rng rng(seed);
    gray->apply(img, rng);
    return img.pixels != colour.pixels;
  }));
  args.grayscale_prob = 0.0;
  const auto never_gray = stage_factory("grayscale")(args).image;
  CHECK(count_applied(2000, [&](std::uint64_t seed) {
          Image img = colour;
          Rng rng(seed);
          never_gray->apply(img, rng);
          return img.pixels != colour.pixels;
        }) == 0);

  // Colour jitter: p=1 is the plain jitter after RandomApply's draw, p=0 a no-op.
  TransformArgs cj;
  cj.color_jitter = 0.4;
  const auto plain = stage_factory("color_jitter")(cj).image;
  cj.color_jitter_prob = 1.0;
  const auto always = stage_factory("color_jitter")(cj).image;
  CHECK(always->repr() == "RandomApply(\n    p=1.0\n    " + plain->repr() + "\n)");
  for (std::uint64_t seed = 0; seed < 200; ++seed) {
    Image a = colour, b = colour;
    Rng ra(seed), rb(seed);
    always->apply(a, ra);
    rb.uniform();
    plain->apply(b, rb);
    REQUIRE(a.pixels == b.pixels);
  }
  cj.color_jitter_prob = 0.0;
  const auto never = stage_factory("color_jitter")(cj).image;
  CHECK(count_applied(2000, [&](std::uint64_t seed) {
          Image img = colour;
          Rng rng(seed);
          never->apply(img, rng);
          return img.pixels != colour.pixels;
        }) == 0);
  cj.color_jitter_prob = 0.3;
  const auto sometimes = stage_factory("color_jitter")(cj).image;
  within(count_applied(kSeeds, [&](std::uint64_t seed) {
    Image img = colour;
    Rng rng(seed);
    sometimes->apply(img, rng);
    return img.pixels != colour.pixels;
  }));

  // Blur: a small sigma can leave an image as it was, so count the draws:
  // an applied blur draws its sigma after RandomApply's uniform.
  TransformArgs b;
  b.gaussian_blur_prob = 0.3;
  const auto blur = stage_factory("gaussian_blur")(b).image;
  const Image big = pattern_image(12, 12, 3, 10);
  within(count_applied(kSeeds, [&](std::uint64_t seed) {
    Image img = big;
    Rng rng(seed), skipped(seed);
    blur->apply(img, rng);
    skipped.uniform();
    const bool applied = !(rng.engine() == skipped.engine());
    if (!applied) REQUIRE(img.pixels == big.pixels);
    return applied;
  }));
}

TEST_CASE("the new stages' conditions, order and limits follow timm's transforms_imagenet_train") {
  test::load_builtin_plugins();
  TransformArgs args;
  args.is_training = true;
  args.input_size = {3, 32, 32};
  args.grayscale_prob = 0.2;
  args.gaussian_blur_prob = 0.5;
  args.color_jitter_prob = 0.8;
  auto names = [](const TransformPipeline& t) {
    std::vector<std::string> out;
    for (const auto& s : t.image) out.push_back(s->repr().substr(0, s->repr().find('(')));
    return out;
  };
  const std::vector<std::string> expected{"RandomResizedCropAndInterpolation", "RandomHorizontalFlip", "RandomApply",
                                          "RandomGrayscale", "RandomApply"};
  CHECK(names(create_transform(args)) == expected);
  // The three are secondary: with --aug-splits only the augmented splits run them.
  CHECK(create_transform(args).secondary_begin == 2);
  // --aa (not 3a) turns colour jitter off, not grayscale or blur.
  args.auto_augment = "rand-m9-mstd0.5-inc1";
  const std::vector<std::string> with_aa{"RandomResizedCropAndInterpolation", "RandomHorizontalFlip", "RandAugment",
                                         "RandomGrayscale", "RandomApply"};
  CHECK(names(create_transform(args)) == with_aa);
  // --no-aug: none of them.
  args.no_aug = true;
  CHECK(create_transform(args).image.size() == 1);
  args.no_aug = false;
  args.auto_augment.clear();

  args.train_crop_mode = "rkrr";
  CHECK(names(create_transform(args)).front() == "ResizeKeepRatio");
  args.scale = {0.0, 1.0};
  CHECK_THROWS_AS(create_transform(args), UsageError);
  args.scale = {0.08, 1.0};
  args.ratio = {-1.0, 1.0};
  CHECK_THROWS_AS(create_transform(args), UsageError);
  args.ratio = {0.75, 4.0 / 3.0};

  // timm's 23-pixel kernel needs 12 pixels a side (torch's reflect padding).
  args.input_size = {3, 11, 32};
  CHECK_THROWS_AS(create_transform(args), UsageError);
  TransformArgs one;
  one.gaussian_blur_prob = 1.0;
  const auto blur = stage_factory("gaussian_blur")(one).image;
  Image small = pattern_image(11, 30, 3, 1);
  Rng rng(0);
  CHECK_THROWS_AS(blur->apply(small, rng), Error);
}

namespace {

struct NaFlexCase {
  int64_t h, w, patch, max_seq_len;
  std::string interpolation;
  bool is_training, no_aug;
};

TransformArgs naflex_args(const NaFlexCase& c) {
  TransformArgs args;
  args.is_training = c.is_training;
  args.no_aug = c.no_aug;
  args.interpolation = c.interpolation;
  args.naflex = NaFlexTransformArgs{{c.patch, c.patch}, c.max_seq_len};
  return args;
}

}  // namespace

TEST_CASE("NaFlex crops: eval and no-aug resize to timm's pixels, train crops fit the sequence, reprs are timm's") {
  test::load_builtin_plugins();
  const std::vector<NaFlexCase> cases = {
      {300, 200, 16, 256, "bicubic", false, false}, {61, 400, 16, 576, "bilinear", false, false},
      {16, 16, 16, 1024, "bicubic", false, false},  {480, 640, 14, 196, "bicubic", false, false},
      {250, 250, 16, 64, "random", true, true},     {333, 500, 16, 256, "random", true, false},
      {200, 120, 32, 49, "bicubic", true, false},
  };
  nlohmann::json json_cases = nlohmann::json::array();
  for (const auto& c : cases) {
    json_cases.push_back({{"h", c.h},
                          {"w", c.w},
                          {"patch", c.patch},
                          {"max_seq_len", c.max_seq_len},
                          {"interpolation", c.interpolation},
                          {"is_training", c.is_training},
                          {"no_aug", c.no_aug}});
  }
  const auto timm_out = test::oracle_tensors("naflex_transform_oracle.py", {json_cases.dump()});
  for (size_t i = 0; i < cases.size(); ++i) {
    const NaFlexCase& c = cases[i];
    const std::string n = std::to_string(i);
    CAPTURE(i);
    const TransformPipeline t = create_transform(naflex_args(c));
    const at::Tensor repr_bytes = timm_out.at("repr" + n);
    CHECK(compose_repr(t) ==
          std::string(repr_bytes.data_ptr<std::uint8_t>(), repr_bytes.data_ptr<std::uint8_t>() + repr_bytes.numel()));
    CHECK(t.batch.empty());  // NaFlex batches are normalised as patches
    const Image input = test::image_from_tensor(timm_out.at("in" + n));
    if (!c.is_training || c.no_aug) {
      Image img = input;
      Rng rng(0);
      t.apply(img, rng);
      const at::Tensor want = timm_out.at("out" + n).permute({1, 2, 0}).contiguous();
      REQUIRE(img.height == want.size(0));
      REQUIRE(img.width == want.size(1));
      CHECK(test::max_diff(img.pixels, test::image_from_tensor(want).pixels) <= 1);
      continue;
    }
    for (uint64_t seed = 0; seed < 20; ++seed) {
      Image img = input, again = input;
      Rng rng(seed), rng_again(seed);
      t.apply(img, rng);
      t.apply(again, rng_again);
      CHECK(img.pixels == again.pixels);
      CHECK(img.height % c.patch == 0);
      CHECK(img.width % c.patch == 0);
      CHECK((img.height / c.patch) * (img.width / c.patch) <= c.max_seq_len);
      // The largest size that fits: one more patch row or column would not.
      CHECK((img.height / c.patch + 1) * (img.width / c.patch + 1) > c.max_seq_len);
    }
  }
}

}  // namespace test_basic
