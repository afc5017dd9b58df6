// The image-in-tar dataset against timm's ReaderImageInTar: same samples,
// labels and order over a folder of shards and over one tar, and the same
// pixels as PIL for each member; create_dataset's selection rules.
#include <fstream>
#include <sstream>

#include "test_support.hpp"
#include "timm/base/error.hpp"
#include "timm/data/dataset.hpp"

#include <doctest/doctest.h>

namespace fs = std::filesystem;
using namespace timm;

namespace {

struct Expected {
  std::string name;
  int64_t target;
  int64_t height, width;
  std::string raw;
};

std::vector<Expected> read_listing(const fs::path& path) {
  std::ifstream in(path);
  std::vector<Expected> out;
  std::string line;
  while (std::getline(in, line)) {
    const auto tab1 = line.find('\t');
    const auto tab2 = line.find('\t', tab1 + 1);
    Expected e;
    e.name = line.substr(0, tab1);
    e.target = std::stoll(line.substr(tab1 + 1, tab2 - tab1 - 1));
    std::istringstream rest(line.substr(tab2 + 1));
    rest >> e.height >> e.width >> e.raw;
    out.push_back(e);
  }
  return out;
}

void check_same_as_timm(const Dataset& ds, const std::vector<Expected>& want) {
  REQUIRE(ds.size() == want.size());
  int64_t max_target = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    CAPTURE(i);
    CHECK(ds.describe(i) == want[i].name);
    CHECK(ds.target(i) == want[i].target);
    max_target = std::max(max_target, want[i].target);
    const Image img = ds.image(i);
    const Image pil = test::read_raw(want[i].raw, want[i].height, want[i].width, 3);
    REQUIRE(img.height == pil.height);
    REQUIRE(img.width == pil.width);
    // Same libjpeg-turbo / zlib decoders as PIL: identical pixels.
    CHECK(test::max_diff(img.pixels, pil.pixels) == 0);
  }
  CHECK(ds.num_classes() == max_target + 1);
}

}  // namespace

TEST_CASE("image-in-tar samples, labels, order and pixels match timm's ReaderImageInTar") {
  test::TempDir dir;
  test::run_oracle("tar_oracle.py", {dir.path().string()}, std::chrono::seconds(120));
  const auto shards = read_listing(dir / "shards.txt");
  const auto single = read_listing(dir / "single.txt");
  REQUIRE(shards.size() == 12);
  REQUIRE(single.size() == 9);
  check_same_as_timm(*make_image_in_tar(dir / "shards", 3), shards);
  check_same_as_timm(*make_image_in_tar(dir / "single.tar", 3), single);

  // create_dataset: a .tar file path is image-in-tar as timm's create_reader;
  // --dataset tar reads a folder of shards.
  check_same_as_timm(*create_dataset("", dir / "single.tar", "train", 3), single);
  check_same_as_timm(*create_dataset("tar", dir / "shards", "train", 3), shards);
  fs::create_directories(dir / "split" / "train");
  fs::copy_file(dir / "single.tar", dir / "split" / "train" / "single.tar");
  CHECK(create_dataset("tar", dir / "split", "train", 3)->size() == single.size());
}

TEST_CASE("image-in-tar errors name the input") {
  test::TempDir dir;
  CHECK_THROWS_WITH_AS(make_image_in_tar(dir.path(), 3), doctest::Contains("no .tar files"), Error);
  std::ofstream(dir / "notes.txt") << "x";
  CHECK_THROWS_AS(make_image_in_tar(dir / "notes.txt", 3), UsageError);
  // A truncated tar: the header promises more bytes than the file has. It is
  // refused when listed (test_hostile_data.cpp has more hostile headers).
  std::string header(512, '\0');
  header.replace(0, 9, "a/img.png");
  header.replace(124, 11, "00000010000");
  header[156] = '0';
  std::ofstream(dir / "bad.tar", std::ios::binary) << header << "short";
  CHECK_THROWS_WITH_AS(make_image_in_tar(dir / "bad.tar", 3), doctest::Contains("bad.tar"), Error);
}
