// A JPEG sample goes to the train loader's RandomResizedCrop undecoded
// (TransformPipeline::apply_splits_jpeg), which draws the same window from
// the header's size and decodes only that window; with --jpeg-dct-scale at
// a DCT scale. Against the whole decode (then the same pipeline, which
// equals PIL): the same random draws; without the flag (and at scale 1) the
// same pixels; at scales 2-8 pixels within the stated bounds. PNGs, pixel
// datasets, the eval and the other crops decode whole; bad JPEGs are skipped
// and counted as on the whole decode. Needs the aug_basic plugin (its rrc
// stage).
#include <ATen/ATen.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "png_bytes.hpp"
#include "test_support.hpp"
#include "timm/base/error.hpp"
#include "timm/data/dataset.hpp"
#include "timm/data/image.hpp"
#include "timm/data/image_ops.hpp"
#include "timm/data/loader.hpp"
#include "timm/data/transform.hpp"

#include <doctest/doctest.h>

namespace test_data_jpeg_dct_train {

namespace fs = std::filesystem;
using namespace timm;
using timm::test::png_of;

namespace {

// Bounds of the DCT-scaled path against the exact one at a 64x64 output, in
// channel values (0-255): the mean absolute difference of one sample, and
// over all samples. A PIL draft-mode simulation of the same path on these
// images (tests/oracle/jpeg_oracle.py, 300x400 and 480x640) gave a worst
// sample of 3.8 and an overall mean of 1.3; a window off by 4 pixels gives
// 10 or more.
constexpr double kSampleMeanTol = 6.0;
constexpr double kOverallMeanTol = 2.5;

void write_bytes(const fs::path& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string as_string(const std::vector<std::uint8_t>& bytes) { return {bytes.begin(), bytes.end()}; }

// A tar member (ustar name, octal size, no checksum: the reader does not
// need one), padded to whole blocks.
std::string tar_member(const std::string& name, const std::string& data) {
  std::string header(512, '\0');
  header.replace(0, name.size(), name);
  char size[16];
  std::snprintf(size, sizeof size, "%011llo", static_cast<unsigned long long>(data.size()));
  header.replace(124, 11, size);
  header[156] = '0';
  std::string padded = data;
  padded.resize((data.size() + 511) / 512 * 512, '\0');
  return header + padded;
}

// The offset of the marker segment FF `marker` of a JPEG, walking its
// segments from the start of image.
std::size_t jpeg_segment(const std::string& jpeg, unsigned char marker) {
  std::size_t at = 2;
  while (at + 4 <= jpeg.size() && static_cast<unsigned char>(jpeg[at]) == 0xFF) {
    if (static_cast<unsigned char>(jpeg[at + 1]) == marker) return at;
    at += 2 + (static_cast<std::size_t>(static_cast<unsigned char>(jpeg[at + 2])) << 8 |
               static_cast<unsigned char>(jpeg[at + 3]));
  }
  FAIL("no JPEG segment FF " << int(marker));
  return 0;
}

// The JPEGs of the train folder, relative to it.
const std::vector<std::string> kJpegs = {"a/img0.jpg", "a/img1.jpg", "a/img2.jpg", "a/img3.jpg",
                                         "b/img0.jpg", "b/img1.jpg", "b/img2.jpg", "c/gray.jpg"};
// Those no window of which reaches 448x448 (300x400): at a 224 output the
// DCT scale is always 1.
const std::vector<std::string> kSmallJpegs = {"a/img0.jpg", "a/img1.jpg", "a/img2.jpg", "a/img3.jpg", "c/gray.jpg"};

// An image folder: a/ four photo-like 300x400 JPEGs, b/ three 480x640
// JPEGs, c/ an RGB and a grayscale PNG and a grayscale 300x400 JPEG.
fs::path make_folder(const test::TempDir& dir) {
  const fs::path root = dir / "train";
  test::run_oracle("jpeg_oracle.py", {(root / "a").string(), "4", "300", "400", "1"}, std::chrono::seconds(120));
  test::run_oracle("jpeg_oracle.py", {(root / "b").string(), "3", "480", "640", "2"}, std::chrono::seconds(120));
  fs::create_directories(root / "c");
  write_bytes(root / "c" / "rgb.png", png_of(read_image(root / "a" / "img0.jpg", 3)));
  Image flipped = read_image(root / "a" / "img1.jpg", 3);
  hflip(flipped);
  write_bytes(root / "c" / "gray.png", png_of(convert_channels(flipped, 1)));
  write_bytes(root / "c" / "gray.jpg", encode_jpeg(convert_channels(read_image(root / "a" / "img2.jpg", 3), 1), 90));
  return root;
}

TransformArgs train_args(int64_t size) {
  TransformArgs args;
  args.is_training = true;
  args.input_size = {3, size, size};
  args.interpolation = "random";  // bilinear or bicubic: one more draw
  return args;
}

// create_transform of `args`, whose first stage must take a JPEG.
TransformPipeline fast_pipeline(const TransformArgs& args) {
  test::load_builtin_plugins();
  TransformPipeline pipeline = create_transform(args);
  REQUIRE_MESSAGE(pipeline.takes_jpeg(), "the first stage does not take a JPEG: " << pipeline.repr());
  return pipeline;
}

// The sample the loader makes of a JPEG file with --jpeg-dct-scale.
JpegSample jpeg_sample(const std::vector<std::uint8_t>& bytes, const std::string& source, int64_t channels) {
  const auto size = jpeg_dimensions(bytes);
  REQUIRE(size.has_value());
  return JpegSample{bytes, size->first, size->second, channels, source, /*dct_scale=*/true};
}

double mean_abs_diff(const at::Tensor& a, const at::Tensor& b) {
  return (a.to(at::kInt) - b.to(at::kInt)).abs().to(at::kDouble).mean().item<double>();
}

// Forwards to `base`, counting encoded() calls; with `files` false it holds
// pixels only (encoded() is nullopt), as Fashion-MNIST.
class Probe final : public Dataset {
 public:
  Probe(std::shared_ptr<const Dataset> base, bool files) : base_(std::move(base)), files_(files) {}
  std::size_t size() const override { return base_->size(); }
  Image image(std::size_t index) const override { return base_->image(index); }
  int64_t target(std::size_t index) const override { return base_->target(index); }
  int64_t num_classes() const override { return base_->num_classes(); }
  std::string describe(std::size_t index) const override { return base_->describe(index); }
  std::optional<EncodedImage> encoded(std::size_t index) const override {
    calls_.fetch_add(1);
    return files_ ? base_->encoded(index) : std::nullopt;
  }
  std::size_t calls() const { return calls_.load(); }

 private:
  std::shared_ptr<const Dataset> base_;
  bool files_;
  mutable std::atomic<std::size_t> calls_{0};
};

struct Run {
  std::vector<Batch> batches;
  std::vector<int64_t> order;  // the epoch's sample order
  std::size_t skipped = 0;
};

Run run_epoch(std::shared_ptr<const Dataset> ds, const TransformPipeline& transform, bool jpeg_dct_scale,
              int64_t workers, bool shuffle = true, int64_t batch_size = 4) {
  LoaderOptions options;
  options.batch_size = batch_size;
  options.num_workers = workers;
  options.seed = 3;
  options.jpeg_dct_scale = jpeg_dct_scale;
  std::shared_ptr<Sampler> sampler = make_local_sampler(ds->size(), shuffle, 3);
  Run run;
  run.order = sampler->indices(1);
  Loader loader(std::move(ds), sampler, transform, options);
  loader.start_epoch(1);
  while (auto batch = loader.next()) run.batches.push_back(std::move(*batch));
  run.skipped = loader.skipped_samples();
  return run;
}

bool same(const Run& a, const Run& b) {
  if (a.batches.size() != b.batches.size()) return false;
  for (std::size_t i = 0; i < a.batches.size(); ++i) {
    const Batch& x = a.batches[i];
    const Batch& y = b.batches[i];
    if (!x.images.sizes().equals(y.images.sizes()) || !x.images.equal(y.images) || !x.targets.equal(y.targets)) {
      return false;
    }
  }
  return true;
}

}  // namespace

TEST_CASE("at DCT scale 1 the JPEG path is the exact path: same draws, window and pixels") {
  test::TempDir dir;
  const fs::path root = make_folder(dir);
  // Colour jitter on: its factors are drawn after the crop and the flip, so
  // they show that the crop drew exactly what it draws on the decoded image.
  TransformArgs args = train_args(224);
  const TransformPipeline pipeline = fast_pipeline(args);
  args.aug_splits = 2;  // AugMix's splits: the crop and flip once, jitter per split
  const TransformPipeline splits = fast_pipeline(args);
  for (const std::string& name : kSmallJpegs) {
    const std::vector<std::uint8_t> bytes = test::read_bytes(root / name);
    for (const int64_t channels : {3, 1}) {
      const JpegSample jpeg = jpeg_sample(bytes, name, channels);
      const Image decoded = decode_image(bytes, name, channels);
      for (const TransformPipeline* p : {&pipeline, &splits}) {
        for (std::uint64_t seed = 0; seed < 12; ++seed) {
          CAPTURE(name);
          CAPTURE(channels);
          CAPTURE(seed);
          Rng exact_rng(seed), fast_rng(seed);
          const std::vector<Image> exact = p->apply_splits(decoded, exact_rng);
          const std::vector<Image> fast = p->apply_splits_jpeg(jpeg, fast_rng);
          CHECK(fast_rng.engine() == exact_rng.engine());
          REQUIRE(fast.size() == exact.size());
          REQUIRE(fast.size() == static_cast<std::size_t>(p->num_splits()));
          for (std::size_t s = 0; s < fast.size(); ++s) {
            CHECK(fast[s].height == 224);
            CHECK(fast[s].width == 224);
            CHECK(fast[s].channels == channels);
            CHECK(fast[s].pixels == exact[s].pixels);
          }
        }
      }
    }
  }
}

TEST_CASE("at DCT scales 2 to 8 the JPEG path draws the same and its pixels are close to the exact path") {
  test::TempDir dir;
  const fs::path root = make_folder(dir);
  TransformArgs args = train_args(64);
  args.color_jitter = std::nullopt;  // the bounds are on the resampled crop (and flip)
  const TransformPipeline pipeline = fast_pipeline(args);
  double sum = 0;
  int samples = 0, differing = 0;
  for (const std::string& name : kJpegs) {
    const std::vector<std::uint8_t> bytes = test::read_bytes(root / name);
    const JpegSample jpeg = jpeg_sample(bytes, name, 3);
    const Image decoded = decode_image(bytes, name, 3);
    for (std::uint64_t seed = 0; seed < 20; ++seed) {
      CAPTURE(name);
      CAPTURE(seed);
      Rng exact_rng(seed), fast_rng(seed);
      const std::vector<Image> exact = pipeline.apply_splits(decoded, exact_rng);
      const std::vector<Image> fast = pipeline.apply_splits_jpeg(jpeg, fast_rng);
      CHECK(fast_rng.engine() == exact_rng.engine());
      REQUIRE(fast.size() == 1);
      REQUIRE(fast[0].height == 64);
      REQUIRE(fast[0].width == 64);
      REQUIRE(fast[0].channels == 3);
      double diff = 0;
      for (std::size_t k = 0; k < fast[0].pixels.size(); ++k) diff += std::abs(fast[0].pixels[k] - exact[0].pixels[k]);
      diff /= static_cast<double>(fast[0].pixels.size());
      CHECK(diff < kSampleMeanTol);
      sum += diff;
      ++samples;
      differing += diff > 0 ? 1 : 0;
    }
  }
  const double mean = sum / samples;
  MESSAGE("mean abs diff over " << samples << " samples: " << mean << "; " << differing << " not equal");
  CHECK(mean < kOverallMeanTol);
  // Most windows of these images are over 128 pixels a side: a scaled decode.
  CHECK(differing > samples / 2);
}

TEST_CASE("the train loader decodes a JPEG's crop window only, exactly; with --jpeg-dct-scale at a DCT scale") {
  test::TempDir dir;
  const fs::path root = make_folder(dir);
  TransformArgs args = train_args(64);
  args.color_jitter = std::nullopt;
  const TransformPipeline pipeline = fast_pipeline(args);
  std::shared_ptr<const Dataset> folder = make_image_folder(root, 3);
  REQUIRE(folder->size() == 10);

  const auto on = std::make_shared<Probe>(folder, true);
  const Run fast = run_epoch(on, pipeline, true, 2);
  CHECK(on->calls() == folder->size());  // each file read once, as encoded()
  // Flag off: the JPEGs' windows alone are decoded, with the whole decode's
  // pixels (a dataset of pixels, encoded() nullopt, decodes whole).
  const auto off = std::make_shared<Probe>(folder, true);
  const Run region = run_epoch(off, pipeline, false, 2);
  CHECK(off->calls() == folder->size());
  const auto whole_decode = std::make_shared<Probe>(folder, false);
  const Run exact = run_epoch(whole_decode, pipeline, false, 2);
  CHECK(same(region, exact));
  CHECK(same(fast, run_epoch(folder, pipeline, true, 0)));  // any worker count
  CHECK(fast.skipped == 0);

  REQUIRE(fast.batches.size() == exact.batches.size());
  REQUIRE(fast.order == exact.order);
  double sum = 0;
  int jpegs = 0, pngs = 0, differing = 0;
  for (std::size_t b = 0; b < fast.batches.size(); ++b) {
    const Batch& f = fast.batches[b];
    const Batch& e = exact.batches[b];
    REQUIRE(f.images.sizes().equals(e.images.sizes()));
    CHECK(f.images.dtype() == e.images.dtype());
    CHECK(f.images.size(1) == 3);
    CHECK(f.images.size(2) == 64);
    CHECK(f.images.size(3) == 64);
    CHECK(f.targets.equal(e.targets));
    for (int64_t r = 0; r < f.images.size(0); ++r) {
      const std::string name =
          folder->describe(static_cast<std::size_t>(fast.order.at(b * 4 + static_cast<std::size_t>(r))));
      CAPTURE(name);
      if (name.ends_with(".png")) {
        CHECK(f.images[r].equal(e.images[r]));
        ++pngs;
        continue;
      }
      const double diff = mean_abs_diff(f.images[r], e.images[r]);
      CHECK(diff < kSampleMeanTol);
      sum += diff;
      ++jpegs;
      differing += diff > 0 ? 1 : 0;
    }
  }
  CHECK(pngs == 2);
  REQUIRE(jpegs == 8);
  CHECK(sum / jpegs < kOverallMeanTol);
  CHECK(differing >= 2);

  // A dataset of pixels (encoded() nullopt) with the flag on: the exact path.
  const auto pixels = std::make_shared<Probe>(folder, false);
  CHECK(same(run_epoch(pixels, pipeline, true, 2), exact));
  CHECK(pixels->calls() == folder->size());
}

TEST_CASE("with --jpeg-dct-scale, the eval crops and the other train crops decode as without it") {
  test::TempDir dir;
  const fs::path root = make_folder(dir);
  test::load_builtin_plugins();
  TransformArgs eval;
  eval.input_size = {3, 64, 64};
  TransformArgs rkrc = train_args(64);
  rkrc.train_crop_mode = "rkrc";
  std::shared_ptr<const Dataset> folder = make_image_folder(root, 3);
  for (const TransformArgs& args : {eval, rkrc}) {
    const TransformPipeline pipeline = create_transform(args);
    CAPTURE(pipeline.repr());
    CHECK_FALSE(pipeline.takes_jpeg());
    const auto probe = std::make_shared<Probe>(folder, true);
    CHECK(same(run_epoch(probe, pipeline, true, 2), run_epoch(folder, pipeline, false, 2)));
    CHECK(probe->calls() == 0);  // the file is not read twice: image() alone
  }
}

TEST_CASE("a bad JPEG is skipped and counted as on the whole decode, with and without --jpeg-dct-scale") {
  test::TempDir dir;
  const fs::path root = dir / "train";
  test::run_oracle("jpeg_oracle.py", {(root / "a").string(), "3", "300", "400", "3"}, std::chrono::seconds(120));
  const std::string good = as_string(test::read_bytes(root / "a" / "img0.jpg"));
  // A truncated file (its header reads), a header that does not read, and a
  // header that declares 65000x65000 pixels (over the decompression-bomb
  // limit; the window is drawn from it, the decode refuses it).
  write_bytes(root / "a" / "truncated.jpg", good.substr(0, good.size() / 2));
  write_bytes(root / "a" / "garbage.jpg", std::string("\xFF\xD8\xFF", 3) + std::string(200, 'x'));
  std::string bomb = encode_jpeg(Image(16, 16, 3));
  const std::size_t sof = jpeg_segment(bomb, 0xC0);
  // Byte by byte: string::replace here trips g++ 12's -Wstringop-overflow.
  for (std::size_t at : {sof + 5, sof + 7}) {
    bomb[at] = '\xFD';  // 65000, big-endian
    bomb[at + 1] = '\xE8';
  }
  write_bytes(root / "a" / "bomb.jpg", bomb);
  TransformArgs args = train_args(64);
  args.color_jitter = std::nullopt;
  const TransformPipeline pipeline = fast_pipeline(args);
  std::shared_ptr<const Dataset> folder = make_image_folder(root, 3);
  // In order: bomb, garbage, img0, img1, img2, truncated. Position 0 skips
  // bomb and garbage, position 1 garbage, position 5 truncated, bomb and
  // garbage: six skips, each replaced by img0.
  REQUIRE(folder->size() == 6);
  REQUIRE(folder->describe(0).ends_with("bomb.jpg"));
  REQUIRE(jpeg_dimensions(folder->encoded(0)->bytes).has_value());
  REQUIRE(jpeg_dimensions(folder->encoded(5)->bytes).has_value());
  for (const int64_t workers : {0, 2}) {
    CAPTURE(workers);
    const Run fast = run_epoch(folder, pipeline, true, workers, /*shuffle=*/false, 2);
    const Run exact = run_epoch(folder, pipeline, false, workers, /*shuffle=*/false, 2);
    const Run whole = run_epoch(std::make_shared<Probe>(folder, false), pipeline, false, workers, false, 2);
    CHECK(fast.skipped == 6);
    CHECK(exact.skipped == 6);
    CHECK(same(exact, whole));  // the window-only decode skips what the whole decode skips
    REQUIRE(fast.batches.size() == 3);
    REQUIRE(exact.batches.size() == 3);
    for (std::size_t b = 0; b < 3; ++b) {
      REQUIRE(fast.batches[b].images.sizes().equals(exact.batches[b].images.sizes()));
      for (int64_t r = 0; r < 2; ++r)
        CHECK(mean_abs_diff(fast.batches[b].images[r], exact.batches[b].images[r]) < kSampleMeanTol);
    }
  }
}

TEST_CASE("image folders, image-in-tar and their views give their files as encoded()") {
  test::TempDir dir;
  const fs::path root = make_folder(dir);
  std::shared_ptr<const Dataset> folder = make_image_folder(root, 3);
  std::string tar;
  for (const char* name : {"a/img0.jpg", "c/rgb.png"})
    tar += tar_member(name, as_string(test::read_bytes(root / name)));
  write_bytes(dir / "shard.tar", tar + std::string(1024, '\0'));
  std::shared_ptr<const Dataset> shard = make_image_in_tar(dir / "shard.tar", 1);
  REQUIRE(shard->size() == 2);
  const std::shared_ptr<const Dataset> head = first_samples(folder, 3, "train-num-samples");
  const std::shared_ptr<const Dataset> repeated = repeated_samples(shard, 2.0);
  for (const Dataset* ds : {folder.get(), shard.get(), head.get(), repeated.get()}) {
    for (std::size_t i = 0; i < ds->size(); ++i) {
      CAPTURE(ds->describe(i));
      const std::optional<EncodedImage> file = ds->encoded(i);
      REQUIRE(file.has_value());
      const Image image = ds->image(i);
      CHECK(file->channels == image.channels);
      const Image decoded = decode_image(file->bytes, ds->describe(i), file->channels);
      CHECK(decoded.pixels == image.pixels);
    }
  }
  CHECK(as_string(shard->encoded(0)->bytes) == as_string(test::read_bytes(root / "a" / "img0.jpg")));
  CHECK(shard->encoded(0)->channels == 1);
  // Fashion-MNIST and the other pixel datasets have no file.
  CHECK_FALSE(make_fashion_mnist(kFashionMnistDir, "val", 1)->encoded(0).has_value());
}

}  // namespace test_data_jpeg_dct_train
