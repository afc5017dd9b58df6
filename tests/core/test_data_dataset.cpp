// Datasets: ImageFolder order against timm's ReaderImageFolder, Fashion-MNIST
// against numpy, split search, create_dataset, first_samples, class_to_idx and
// has_image_extension.
#include <doctest/doctest.h>

#include <cmath>
#include <fstream>
#include <sstream>

#include "test_support.hpp"
#include "timm/base/error.hpp"
#include "timm/data/dataset.hpp"

namespace fs = std::filesystem;
using namespace timm;

namespace {

// Five samples whose target is their index.
class CountingDataset final : public Dataset {
 public:
  std::size_t size() const override { return 5; }
  Image image(std::size_t) const override { return Image(1, 1, 1); }
  int64_t target(std::size_t index) const override { return static_cast<int64_t>(index); }
  int64_t num_classes() const override { return 5; }
  std::string describe(std::size_t index) const override { return "sample " + std::to_string(index); }
};

}  // namespace

TEST_CASE("ImageFolder samples and classes match timm's ReaderImageFolder") {
  test::TempDir dir;
  const fs::path root = dir / "root";
  test::run_oracle("data_oracle.py", {"folder", root.string()});
  std::ifstream expected(dir / "samples.txt");
  std::vector<std::pair<std::string, int64_t>> want;
  std::string line;
  while (std::getline(expected, line)) {
    const auto tab = line.find('\t');
    want.emplace_back(line.substr(0, tab), std::stoll(line.substr(tab + 1)));
  }
  REQUIRE(want.size() == 15);

  auto ds = make_image_folder(root, 3);
  REQUIRE(ds->size() == want.size());
  int64_t max_target = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    CHECK_MESSAGE(ds->describe(i) == want[i].first, "sample " << i);
    CHECK_MESSAGE(ds->target(i) == want[i].second, ds->describe(i));
    max_target = std::max(max_target, want[i].second);
  }
  CHECK(ds->num_classes() == max_target + 1);
  const Image img = ds->image(0);
  CHECK(img.height == 4);
  CHECK(img.width == 5);
  CHECK(img.pixels[0] == 77);
}

TEST_CASE("an empty image folder is an error naming the root") {
  test::TempDir dir;
  fs::create_directories(dir / "a" / "b");
  std::ofstream(dir / "a" / "notes.txt") << "x";
  CHECK_THROWS_WITH_AS(make_image_folder(dir.path(), 3), doctest::Contains(dir.path().c_str()), Error);
  CHECK_THROWS_WITH_AS(make_image_folder(dir / "missing", 3), doctest::Contains("missing"), Error);
}

TEST_CASE("Fashion-MNIST counts, labels and pixels match numpy") {
  const std::string out = test::run_oracle("data_oracle.py", {"fmnist"});
  std::istringstream lines(out);
  std::string line;
  int splits = 0;
  while (std::getline(lines, line)) {
    std::istringstream f(line);
    std::string prefix;
    std::size_t n_labels, n_images;
    if (!(f >> prefix >> n_labels >> n_images) || (prefix != "train" && prefix != "t10k")) continue;
    const std::string split = prefix == "train" ? "train" : "validation";
    auto ds = make_fashion_mnist(kFashionMnistDir, split, 1);
    CHECK(ds->size() == n_labels);
    CHECK(ds->size() == (prefix == "train" ? 60000u : 10000u));
    CHECK(ds->num_classes() == 10);
    for (int i = 0; i < 32; ++i) {
      int64_t label;
      f >> label;
      CHECK_MESSAGE(ds->target(i) == label, prefix << " label " << i);
    }
    for (std::size_t index : {std::size_t{0}, std::size_t{1}, ds->size() - 1}) {
      int64_t sum;
      f >> sum;
      const Image img = ds->image(index);
      REQUIRE(img.height == 28);
      REQUIRE(img.width == 28);
      REQUIRE(img.channels == 1);
      int64_t got = 0;
      for (auto p : img.pixels) got += p;
      CHECK_MESSAGE(got == sum, prefix << " image " << index);
    }
    const Image rgb = make_fashion_mnist(kFashionMnistDir, split, 3)->image(0);
    CHECK(rgb.channels == 3);
    CHECK(rgb.pixels[300] == rgb.pixels[301]);
    CHECK(ds->describe(5) == "fashion-mnist[5]");
    ++splits;
  }
  CHECK(splits == 2);
}

TEST_CASE("Fashion-MNIST validates its files") {
  test::TempDir dir;
  CHECK_THROWS_WITH_AS(make_fashion_mnist(dir.path(), "train", 1), doctest::Contains("train-images-idx3-ubyte"), Error);
  // A label file where the image file should be: wrong magic number.
  fs::copy_file(kFashionMnistDir / "t10k-labels-idx1-ubyte.gz", dir / "t10k-images-idx3-ubyte.gz");
  fs::copy_file(kFashionMnistDir / "t10k-labels-idx1-ubyte.gz", dir / "t10k-labels-idx1-ubyte.gz");
  CHECK_THROWS_WITH_AS(make_fashion_mnist(dir.path(), "validation", 1), doctest::Contains("2051"), Error);
  // Uncompressed IDX files are read too; a short one is reported with sizes.
  std::ofstream(dir / "train-images-idx3-ubyte", std::ios::binary)
      << std::string("\x00\x00\x08\x03\x00\x00\x00\x02\x00\x00\x00\x1c\x00\x00\x00\x1c", 16) << std::string(100, 'x');
  fs::copy_file(kFashionMnistDir / "train-labels-idx1-ubyte.gz", dir / "train-labels-idx1-ubyte.gz");
  CHECK_THROWS_WITH_AS(make_fashion_mnist(dir.path(), "train", 1), doctest::Contains("expected 1584"), Error);
}

TEST_CASE("split folders and create_dataset") {
  test::TempDir dir;
  fs::create_directories(dir / "train" / "c");
  fs::create_directories(dir / "val" / "c");
  CHECK(find_split_folder(dir.path(), "train") == dir / "train");
  CHECK(find_split_folder(dir.path(), "training") == dir / "train");
  CHECK(find_split_folder(dir.path(), "validation") == dir / "val");
  CHECK(find_split_folder(dir.path(), "validation[:10%]") == dir / "val");
  CHECK(find_split_folder(dir.path(), "test") == dir.path());
  fs::create_directories(dir / "validation");
  CHECK(find_split_folder(dir.path(), "validation") == dir / "validation");

  CHECK(create_dataset("fashion-mnist", "", "train", 1)->size() == 60000);
  CHECK(create_dataset("torch/fashion_mnist", "", "validation", 1)->size() == 10000);
  CHECK_THROWS_AS(create_dataset("cifar10", dir.path(), "train", 3), UsageError);
  CHECK_THROWS_AS(create_dataset("", dir.path(), "train", 3), Error);  // no images
  CHECK_THROWS_AS(create_dataset("", dir.path(), "train", 2), UsageError);
}

TEST_CASE("first_samples keeps the leading samples and names the flag of a bad count") {
  const std::shared_ptr<const Dataset> all = std::make_shared<CountingDataset>();
  CHECK(first_samples(all, std::nullopt, "num-samples") == all);
  CHECK(first_samples(all, 5, "num-samples") == all);
  CHECK(first_samples(all, 9, "num-samples") == all);
  const auto head = first_samples(all, 3, "num-samples");
  REQUIRE(head->size() == 3);
  CHECK(head->target(2) == 2);
  CHECK(head->describe(1) == "sample 1");
  CHECK(head->num_classes() == 5);
  CHECK_THROWS_WITH_AS(first_samples(all, 0, "val-num-samples"), "--val-num-samples 0: expected a positive count",
                       UsageError);
  CHECK_THROWS_WITH_AS(first_samples(all, -2, "num-samples"), "--num-samples -2: expected a positive count",
                       UsageError);
}

TEST_CASE("repeated_samples: --epoch-repeats as passes over a map-style dataset") {
  const std::shared_ptr<const Dataset> all = std::make_shared<CountingDataset>();  // 5 samples
  CHECK(repeated_samples(all, 0) == all);                                          // timm's max(1, repeats)
  CHECK(repeated_samples(all, 1) == all);
  const auto twice = repeated_samples(all, 2);
  REQUIRE(twice->size() == 10);
  CHECK(twice->target(7) == 2);
  CHECK(twice->describe(9) == "sample 4");
  CHECK(twice->num_classes() == 5);
  CHECK(repeated_samples(all, 1.5)->size() == 8);  // ceil(7.5)
  // --train-num-samples first, then the repeats.
  CHECK(repeated_samples(first_samples(all, 3, "train-num-samples"), 2)->size() == 6);
  CHECK_THROWS_WITH_AS(repeated_samples(all, -1), "--epoch-repeats -1.0: expected a number >= 0", UsageError);
  CHECK_THROWS_WITH_AS(repeated_samples(all, std::nan("")), "--epoch-repeats nan: expected a number >= 0", UsageError);
  CHECK_THROWS_WITH_AS(repeated_samples(all, 1e12), doctest::Contains("expected at most 2147483648"), UsageError);
}

TEST_CASE("class_to_idx orders class names as timm's natural_key") {
  const std::map<std::string, int64_t> index = class_to_idx({"c1", "b10", "a", "B2", "A"});
  const std::map<std::string, int64_t> want = {{"A", 0}, {"a", 1}, {"B2", 2}, {"b10", 3}, {"c1", 4}};
  CHECK(index == want);
  CHECK(class_to_idx({}).empty());
}

TEST_CASE("has_image_extension follows os.path.splitext, in any case") {
  for (const char* name : {"a.png", "b.JPG", "c.d.Jpeg", "..x.png", ".hidden.jpg"})
    CHECK_MESSAGE(has_image_extension(name), name);
  for (const char* name : {".png", "..jpg", "png", "a.gif", "a.png.txt", "a.", ""})
    CHECK_MESSAGE(!has_image_extension(name), name);
}
