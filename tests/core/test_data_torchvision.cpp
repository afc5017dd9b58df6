// timm's torch/ dataset names against timm's create_dataset on the same
// synthetic files in torchvision's layouts (CIFAR batches as Python 3 and as
// Python 2 pickled them, MNIST / KMNIST / FashionMNIST / QMNIST IDX files):
// every label and sampled images exactly; hostile CIFAR batches; the real
// Fashion-MNIST in torchvision's layout.
#include <cctype>
#include <fstream>
#include <iterator>
#include <sstream>

#include "test_support.hpp"
#include "timm/base/error.hpp"
#include "timm/data/dataset.hpp"

#include <doctest/doctest.h>

namespace test_data_torchvision {
namespace {

namespace fs = std::filesystem;
using namespace timm;

std::string read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// The message create_dataset throws for `root`; fails the test when none is thrown.
std::string error_of(const std::string& name, const fs::path& root, const std::string& split) {
  try {
    create_dataset(name, root, split, 3);
  } catch (const Error& e) {
    return e.what();
  }
  FAIL("no error for " << root);
  return "";
}

}  // namespace

TEST_CASE("torch/ datasets match timm's create_dataset on torchvision's layouts") {
  test::TempDir dir;
  test::run_oracle("data_oracle.py", {"torchvision", dir.path().string()});
  std::ifstream manifest(dir / "manifest.txt");
  std::string line;
  int datasets = 0, images = 0;
  while (std::getline(manifest, line)) {
    std::istringstream f(line);
    std::string kind, name, split;
    f >> kind >> name >> split;
    CAPTURE(line.substr(0, 80));
    const auto ds = create_dataset(name, dir.path(), split, 3);
    std::string lower = name;
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (kind == "ds") {
      std::size_t size = 0;
      int64_t classes = 0;
      f >> size >> classes;
      REQUIRE(ds->size() == size);
      CHECK(ds->num_classes() == classes);
      for (std::size_t i = 0; i < size; ++i) {
        int64_t label = -1;
        f >> label;
        CHECK_MESSAGE(ds->target(i) == label, name << " " << split << " label " << i);
      }
      CHECK(ds->describe(size - 1) == lower + "[" + std::to_string(size - 1) + "]");
      ++datasets;
    } else if (kind == "img") {
      std::size_t index = 0;
      int64_t h = 0, w = 0, c = 0;
      std::string file;
      f >> index >> h >> w >> c >> file;
      const std::string want = read_bytes(dir / file);
      // timm's images are PIL RGB (CIFAR) or L (MNIST): read with their own channel count.
      const Image img = create_dataset(name, dir.path(), split, c)->image(index);
      REQUIRE(img.height == h);
      REQUIRE(img.width == w);
      REQUIRE(img.channels == c);
      CHECK_MESSAGE(std::string(img.pixels.begin(), img.pixels.end()) == want, name << " " << split << " " << index);
      if (c == 1) {  // converted to RGB on request: gray in all three channels
        const Image rgb = ds->image(index);
        CHECK(rgb.channels == 3);
        CHECK(rgb.pixels[3 * 100] == img.pixels[100]);
        CHECK(rgb.pixels[3 * 100 + 2] == img.pixels[100]);
      }
      ++images;
    }
  }
  CHECK(datasets == 24);  // 6 names x 4 splits
  CHECK(images >= 60);

  // Hostile CIFAR batches: an Error naming the file and the problem.
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"truncated", "the pickle is truncated"},
      {"global", "refuses the global 'os.system'"},
      {"shape", "numpy array of shape (6, 3072) needs 18432 bytes; its data holds 15360"},
      {"labels", "its 'labels' holds 4 labels; expected 5"},
  };
  for (const auto& [name, problem] : cases) {
    const fs::path root = dir / "hostile" / name;
    const std::string message = error_of("torch/cifar10", root, "validation");
    CAPTURE(message);
    CHECK(message.find((root / "cifar-10-batches-py" / "test_batch").string()) != std::string::npos);
    CHECK(message.find(problem) != std::string::npos);
  }
}

TEST_CASE("a missing torchvision file names the path and the layout expected") {
  test::TempDir dir;
  std::string message = error_of("torch/cifar10", dir.path(), "train");
  CHECK(message.find("torch/cifar10: missing '" + (dir / "cifar-10-batches-py" / "data_batch_1").string() + "'") !=
        std::string::npos);
  CHECK(message.find("cifar-10-python.tar.gz from https://www.cs.toronto.edu/~kriz/cifar.html") != std::string::npos);
  message = error_of("torch/cifar100", dir.path(), "validation");
  CHECK(message.find((dir / "cifar-100-python" / "test").string()) != std::string::npos);
  message = error_of("torch/qmnist", dir.path(), "train");
  CHECK(message.find((dir / "QMNIST" / "raw" / "qmnist-train-images-idx3-ubyte").string()) != std::string::npos);
  message = error_of("torch/mnist", dir.path(), "test");
  CHECK(message.find((dir / "MNIST" / "raw" / "t10k-images-idx3-ubyte").string()) != std::string::npos);
  CHECK_THROWS_AS(create_dataset("torch/cifar10", "", "train", 3), UsageError);
  CHECK_THROWS_AS(create_dataset("torch/imagenet", dir.path(), "train", 3), UsageError);
  try {
    create_dataset("cifar10", dir.path(), "train", 3);
  } catch (const UsageError& e) {
    CHECK(std::string(e.what()).find("torch/cifar100") != std::string::npos);
  }
}

TEST_CASE("the real Fashion-MNIST in torchvision's layout reads as the fashion-mnist reader") {
  test::TempDir dir;
  const fs::path raw = dir / "FashionMNIST" / "raw";
  fs::create_directories(raw);
  for (const char* file : {"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz", "t10k-images-idx3-ubyte.gz",
                           "t10k-labels-idx1-ubyte.gz"}) {
    fs::create_symlink(kFashionMnistDir / file, raw / file);
  }
  for (const char* split : {"train", "validation"}) {
    const auto torch = create_dataset("torch/fashion_mnist", dir.path(), split, 1);
    const auto debian = make_fashion_mnist(kFashionMnistDir, split, 1);
    REQUIRE(torch->size() == debian->size());
    CHECK(torch->num_classes() == 10);
    for (std::size_t i = 0; i < torch->size(); i += 997) {
      CHECK(torch->target(i) == debian->target(i));
      CHECK(torch->image(i).pixels == debian->image(i).pixels);
    }
    CHECK(torch->describe(3) == "torch/fashion_mnist[3]");
  }
  // timm's train set is chosen by the exact split name: a slice of train is the test set.
  CHECK(create_dataset("torch/fashion_mnist", dir.path(), "train[:10%]", 1)->size() == 10000);
}

}  // namespace test_data_torchvision
