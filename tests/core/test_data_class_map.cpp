// --class-map: timm's load_class_map (.txt, .pkl) and the folder and tar
// readers with a class map, against timm's ReaderImageFolder and
// ReaderImageInTar on the same tree and maps (data_oracle.py classmap).
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "test_support.hpp"
#include "timm/base/error.hpp"
#include "timm/data/class_map.hpp"
#include "timm/data/dataset.hpp"

#include <doctest/doctest.h>

namespace test_data_class_map {

namespace fs = std::filesystem;

namespace {

std::vector<std::pair<std::string, int64_t>> read_samples(const fs::path& file) {
  std::ifstream in(file);
  std::vector<std::pair<std::string, int64_t>> samples;
  std::string line;
  while (std::getline(in, line)) {
    const auto tab = line.find('\t');
    samples.emplace_back(line.substr(0, tab), std::stoll(line.substr(tab + 1)));
  }
  return samples;
}

// `ds`'s samples equal timm's: the path (for a tar, the member after the
// last ':') and the target, in order.
void check_samples(const timm::Dataset& ds, const std::vector<std::pair<std::string, int64_t>>& want, bool tar) {
  REQUIRE(ds.size() == want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    std::string name = ds.describe(i);
    if (tar) name = name.substr(name.rfind(':') + 1);
    CHECK_MESSAGE(name == want[i].first, "sample " << i);
    CHECK_MESSAGE(ds.target(i) == want[i].second, ds.describe(i));
  }
}

void write(const fs::path& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

}  // namespace

TEST_CASE("a class map gives the folder and tar readers timm's samples and targets") {
  timm::test::TempDir dir;
  timm::test::run_oracle("data_oracle.py", {"classmap", dir.path().string()});
  // txt: zeta, class2, no_such_class (no folder), "  Class1 \r\n" (stripped), nested.
  const timm::ClassMap txt = timm::load_class_map(dir / "map.txt");
  CHECK(txt == timm::ClassMap{{"zeta", 0}, {"class2", 1}, {"no_such_class", 2}, {"Class1", 3}, {"nested", 4}});
  CHECK(timm::class_map_num_classes(txt) == 5);
  const timm::ClassMap pkl = timm::load_class_map(dir / "map.pkl");
  CHECK(pkl == timm::ClassMap{{"class10", 4}, {"alpha_9", 0}, {"absent", 2}});
  CHECK(timm::class_map_num_classes(pkl) == 5);

  for (const char* map : {"txt", "pkl"}) {
    CAPTURE(map);
    const fs::path file = dir / (std::string("map.") + map);
    const auto folder = timm::create_dataset("", dir / "root", "validation", 3, file);
    check_samples(*folder, read_samples(dir / (std::string("folder_") + map + ".txt")), false);
    CHECK(folder->num_classes() == 5);
    const auto tar = timm::create_dataset("", dir / "root.tar", "validation", 3, file);
    check_samples(*tar, read_samples(dir / (std::string("tar_") + map + ".txt")), true);
    CHECK(tar->num_classes() == 5);
  }
  // A relative name is looked up in the reader's root, as timm.
  write(dir / "root" / "in_root.txt", "class10\n");
  CHECK(timm::create_dataset("", dir / "root", "validation", 3, "in_root.txt")->num_classes() == 1);
}

TEST_CASE("a malformed or unsupported class map is an error naming the file and line") {
  timm::test::TempDir dir;
  const auto message = [&](const std::string& name, const std::string& text) {
    write(dir / name, text);
    try {
      timm::load_class_map(dir / name);
    } catch (const timm::Error& e) {
      return std::string(e.what());
    }
    FAIL("no error for " << name);
    return std::string();
  };
  CHECK(message("blank.txt", "a\n\nb\n").find("blank.txt', line 2: empty class name") != std::string::npos);
  CHECK(message("repeat.txt", "a\nb\na\n").find("line 3: class name 'a' repeats line 1") != std::string::npos);
  CHECK(message("latin1.txt", "a\ncaf\xe9\n").find("latin1.txt', line 2: not UTF-8") != std::string::npos);
  CHECK(message("empty.txt", "").find("no class names") != std::string::npos);
  // A pickle naming a global (os.system) runs nothing.
  CHECK(message("evil.pkl", "cos\nsystem\n(S'true'\ntR.").find("is not permitted in a class map file") !=
        std::string::npos);
  CHECK(message("list.pkl", "(lp0\n.").find("expected a pickled dict") != std::string::npos);
  CHECK_THROWS_AS(timm::load_class_map(dir / "map.json"), timm::UsageError);
  write(dir / "map.json", "{}");
  CHECK_THROWS_WITH_AS(timm::load_class_map(dir / "map.json"), doctest::Contains("unsupported class map file"),
                       timm::UsageError);
  CHECK_THROWS_WITH_AS(timm::create_dataset("fashion-mnist", "", "validation", 1, dir / "blank.txt"),
                       doctest::Contains("a class map applies to image folders and tars only"), timm::UsageError);
}

}  // namespace test_data_class_map
