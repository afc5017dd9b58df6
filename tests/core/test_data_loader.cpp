// The loader: determinism across worker counts, order, drop_last, skipping
// bad samples, shutdown mid-epoch.
#include <ATen/ATen.h>
#include <doctest/doctest.h>

#include <fstream>

#include "test_support.hpp"
#include "timm/base/error.hpp"
#include "timm/data/image_ops.hpp"
#include "timm/data/loader.hpp"

namespace test_data_loader {

namespace fs = std::filesystem;
using namespace timm;

namespace {

// Images whose pixels encode their index; index `bad` fails to "decode".
class SyntheticDataset final : public Dataset {
 public:
  SyntheticDataset(std::size_t n, std::vector<std::size_t> bad = {}) : n_(n), bad_(std::move(bad)) {}
  std::size_t size() const override { return n_; }
  Image image(std::size_t index) const override {
    for (std::size_t b : bad_) {
      if (b == index) throw Error("synthetic[" + std::to_string(index) + "]: corrupt");
    }
    Image img(10, 12, 3);
    for (std::size_t i = 0; i < img.pixels.size(); ++i) img.pixels[i] = static_cast<std::uint8_t>(index * 7 + i);
    return img;
  }
  int64_t target(std::size_t index) const override { return static_cast<int64_t>(index % 5); }
  int64_t num_classes() const override { return 5; }
  std::string describe(std::size_t index) const override { return "synthetic[" + std::to_string(index) + "]"; }

 private:
  std::size_t n_;
  std::vector<std::size_t> bad_;
};

// A random crop and flip: uses the per-sample Rng.
class RandomCropFlip final : public ImageTransform {
 public:
  void apply(Image& image, Rng& rng) const override {
    const int64_t top = rng.randint(0, image.height - 6), left = rng.randint(0, image.width - 6);
    image = crop(image, top, left, 6, 6);
    if (rng.bernoulli(0.5)) hflip(image);
  }
  std::string repr() const override { return "RandomCropFlip()"; }
};

TransformPipeline random_pipeline() {
  TransformPipeline t;
  t.image.push_back(std::make_shared<RandomCropFlip>());
  return t;
}

std::vector<Batch> run_epoch(std::shared_ptr<const Dataset> ds, int64_t workers, int64_t epoch, bool shuffle,
                             bool drop_last = false, std::size_t* skipped = nullptr) {
  LoaderOptions opt;
  opt.batch_size = 8;
  opt.num_workers = workers;
  opt.drop_last = drop_last;
  opt.seed = 7;
  Loader loader(ds, make_local_sampler(ds->size(), shuffle, 7), random_pipeline(), opt);
  loader.start_epoch(epoch);
  std::vector<Batch> out;
  while (auto b = loader.next()) out.push_back(std::move(*b));
  CHECK(out.size() == loader.num_batches());
  if (skipped != nullptr) *skipped = loader.skipped_samples();
  return out;
}

bool same(const std::vector<Batch>& a, const std::vector<Batch>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (!a[i].images.equal(b[i].images) || !a[i].targets.equal(b[i].targets)) return false;
  }
  return true;
}

}  // namespace

TEST_CASE("the same seed gives the same batches with 0, 1 and 3 workers") {
  auto ds = std::make_shared<SyntheticDataset>(61);
  const auto inline_batches = run_epoch(ds, 0, 3, true);
  REQUIRE(inline_batches.size() == 8);
  CHECK((inline_batches[0].images.sizes() == at::IntArrayRef({8, 3, 6, 6})));
  CHECK((inline_batches[0].images.scalar_type() == at::kByte));
  CHECK((inline_batches[0].targets.scalar_type() == at::kLong));
  CHECK(inline_batches.back().images.size(0) == 61 - 7 * 8);
  CHECK(same(inline_batches, run_epoch(ds, 1, 3, true)));
  CHECK(same(inline_batches, run_epoch(ds, 3, 3, true)));
  // Another epoch reorders and re-augments.
  CHECK_FALSE(same(inline_batches, run_epoch(ds, 3, 4, true)));
}

TEST_CASE("sequential order, CHW layout, drop_last") {
  auto ds = std::make_shared<SyntheticDataset>(20);
  LoaderOptions opt;
  opt.batch_size = 8;
  opt.num_workers = 2;
  opt.drop_last = true;
  Loader loader(ds, make_local_sampler(ds->size(), false, 0), TransformPipeline{}, opt);
  CHECK(loader.num_batches() == 2);
  loader.start_epoch(0);
  auto b0 = loader.next();
  REQUIRE(b0);
  // Sample 1, channel 2, pixel (0, 1): HWC offset (0 * 12 + 1) * 3 + 2 = 5.
  CHECK(b0->images[1][2][0][1].item<std::uint8_t>() == static_cast<std::uint8_t>(1 * 7 + 5));
  CHECK(b0->targets[6].item<int64_t>() == 1);
  REQUIRE(loader.next());
  CHECK_FALSE(loader.next());
  CHECK_FALSE(loader.next());

  // Shuffled sampler: a permutation, reproducible per (seed, epoch).
  auto s = make_local_sampler(100, true, 42);
  auto p = s->indices(1);
  CHECK(p == s->indices(1));
  CHECK(p != s->indices(2));
  std::vector<int64_t> sorted = p;
  std::sort(sorted.begin(), sorted.end());
  for (int64_t i = 0; i < 100; ++i) CHECK(sorted[i] == i);
}

TEST_CASE("a bad sample is skipped, counted and replaced by the next one") {
  auto ds = std::make_shared<SyntheticDataset>(16, std::vector<std::size_t>{3, 9, 10});
  for (int64_t workers : {0, 2}) {
    std::size_t skipped = 0;
    const auto batches = run_epoch(ds, workers, 0, false, false, &skipped);
    CHECK(skipped == 4);  // 3, then 9 and 10 for position 9, then 10 for position 10
    REQUIRE(batches.size() == 2);
    CHECK(batches[0].images.size(0) == 8);
    // Position 3 holds sample 4 (timm retries index + 1); 9 and 10 become 11.
    CHECK(batches[0].targets[3].item<int64_t>() == 4 % 5);
    CHECK(batches[1].targets[1].item<int64_t>() == 11 % 5);
    CHECK(batches[1].targets[2].item<int64_t>() == 11 % 5);
  }
}

TEST_CASE("a corrupt file in an image folder is skipped and counted") {
  test::TempDir dir;
  fs::create_directories(dir / "a");
  fs::create_directories(dir / "b");
  // Minimal valid 1x1 grayscale PNG.
  static const unsigned char kPng[] = {
      0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 0x00, 0x00, 0x00, 0x0D, 0x49, 0x48, 0x44, 0x52, 0x00,
      0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x00, 0x00, 0x00, 0x00, 0x3A, 0x7E, 0x9B, 0x55, 0x00,
      0x00, 0x00, 0x0A, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9C, 0x63, 0x60, 0x00, 0x00, 0x00, 0x02, 0x00, 0x01,
      0x48, 0xAF, 0xA4, 0x71, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45, 0x4E, 0x44, 0xAE, 0x42, 0x60, 0x82};
  for (const char* name : {"a/1.png", "a/2.png", "b/1.png", "b/3.png"}) {
    std::ofstream(dir / name, std::ios::binary).write(reinterpret_cast<const char*>(kPng), sizeof(kPng));
  }
  std::ofstream(dir / "a" / "2b.jpg", std::ios::binary) << "\xFF\xD8\xFF garbage";
  std::shared_ptr<const Dataset> ds = make_image_folder(dir.path(), 3);
  REQUIRE(ds->size() == 5);
  LoaderOptions opt;
  opt.batch_size = 5;
  opt.num_workers = 1;
  Loader loader(ds, make_local_sampler(ds->size(), false, 0), TransformPipeline{}, opt);
  loader.start_epoch(0);
  auto batch = loader.next();
  REQUIRE(batch);
  CHECK((batch->images.sizes() == at::IntArrayRef({5, 3, 1, 1})));
  CHECK(loader.skipped_samples() == 1);
  CHECK(batch->targets.equal(at::tensor(std::vector<int64_t>{0, 0, 1, 1, 1})));
}

TEST_CASE("too many consecutive bad samples is an error, not a crash") {
  std::vector<std::size_t> bad;
  for (std::size_t i = 0; i < 30; ++i) bad.push_back(i);
  auto ds = std::make_shared<SyntheticDataset>(30, bad);
  for (int64_t workers : {0, 2}) {
    LoaderOptions opt;
    opt.batch_size = 4;
    opt.num_workers = workers;
    Loader loader(ds, make_local_sampler(ds->size(), false, 0), TransformPipeline{}, opt);
    loader.start_epoch(0);
    CHECK_THROWS_WITH_AS(loader.next(), doctest::Contains("consecutive"), Error);
  }
}

TEST_CASE("destroying a loader mid-epoch shuts down cleanly") {
  auto ds = std::make_shared<SyntheticDataset>(2000);
  LoaderOptions opt;
  opt.batch_size = 16;
  opt.num_workers = 3;
  for (int round = 0; round < 3; ++round) {
    Loader loader(ds, make_local_sampler(ds->size(), true, 1), random_pipeline(), opt);
    loader.start_epoch(0);
    REQUIRE(loader.next());
    loader.start_epoch(1);  // restarting mid-epoch is clean too
    REQUIRE(loader.next());
  }
  // And one that never started an epoch.
  Loader idle(ds, make_local_sampler(ds->size(), true, 1), random_pipeline(), opt);
  CHECK_FALSE(idle.next());
}

}  // namespace test_data_loader
