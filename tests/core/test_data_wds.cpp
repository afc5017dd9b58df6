// The wds/ dataset against timm's ReaderWds (webdataset 1.0.2): the samples,
// targets and pixels, and the stream each rank's loader yields, batch by
// batch, for evaluation and training (epochs 0 and 1, 1 and 2 ranks, 0 and 2
// workers), alt_label, --target-key, --class-map and a brace split; webdataset's
// brace expansion; the errors of bad splits and shards.
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>

#include "test_support.hpp"
#include "timm/base/error.hpp"
#include "timm/data/dataset.hpp"
#include "timm/data/loader.hpp"

#include <doctest/doctest.h>

namespace fs = std::filesystem;
using namespace timm;

namespace {

std::vector<std::string> split_on(const std::string& text, char sep) {
  std::vector<std::string> out;
  std::string item;
  std::istringstream in(text);
  while (std::getline(in, item, sep)) out.push_back(item);
  if (!text.empty() && text.back() == sep) out.emplace_back();
  return out;
}

// The sample key of describe() "<shard path>:<key>".
std::string key_of(const Dataset& ds, int64_t index) {
  const std::string name = ds.describe(static_cast<std::size_t>(index));
  return name.substr(name.rfind(':') + 1);
}

// The stream a loader over `sampler` yields: one line per batch, as the oracle writes it.
std::vector<std::string> stream_lines(const Dataset& ds, const Sampler& sampler, int64_t epoch, int64_t batch) {
  const std::vector<int64_t> order = sampler.indices(epoch);
  std::vector<int64_t> sizes = sampler.batch_sizes(epoch);
  if (sizes.empty()) {
    for (std::size_t begin = 0; begin < order.size(); begin += static_cast<std::size_t>(batch)) {
      sizes.push_back(std::min<int64_t>(batch, static_cast<int64_t>(order.size() - begin)));
    }
  }
  std::vector<std::string> lines;
  std::size_t pos = 0;
  for (const int64_t size : sizes) {
    std::string line;
    for (int64_t k = 0; k < size; ++k, ++pos) {
      const int64_t i = order.at(pos);
      line += (k == 0 ? "" : " ") + key_of(ds, i) + ":" + std::to_string(ds.target(static_cast<std::size_t>(i)));
    }
    lines.push_back(line);
  }
  CHECK(pos == order.size());
  return lines;
}

std::vector<std::string> read_lines(const fs::path& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

void write(const fs::path& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

}  // namespace

TEST_CASE("wds: samples, targets, pixels and every rank's loader stream match timm's ReaderWds") {
  test::TempDir dir;
  test::run_oracle("wds_oracle.py", {dir.path().string()}, std::chrono::seconds(300));
  const fs::path root = dir / "ds";
  int checked = 0;
  for (const std::string& line : read_lines(dir / "cases.txt")) {
    const std::vector<std::string> f = split_on(line, '\t');
    REQUIRE(f.size() == 10);
    const std::string& name = f[0];
    CAPTURE(name);
    IterableOptions options;
    options.target_key = f[8];
    const fs::path class_map = f[9].empty() ? fs::path() : root / f[9];
    std::unique_ptr<Dataset> ds = create_dataset("wds/ds", root, f[1], 3, class_map, options);
    const auto* iterable = dynamic_cast<const IterableDataset*>(ds.get());
    REQUIRE(iterable != nullptr);
    StreamConfig config;
    config.is_training = f[2] == "1";
    config.world_size = std::stoll(f[3]);
    config.rank = std::stoll(f[4]);
    config.num_workers = std::stoll(f[5]);
    config.batch_size = std::stoll(f[6]);
    config.seed = 42;
    const int64_t epoch = std::stoll(f[7]);
    const std::shared_ptr<Sampler> sampler = iterable->make_sampler(config);
    CHECK(stream_lines(*ds, *sampler, epoch, config.batch_size) == read_lines(dir / (name + ".txt")));
    ++checked;
  }
  CHECK(checked == 3 * 2 * 3 + 6);  // (rank, world) x workers 0, 2 x (eval, 2 train epochs), 6 others

  // Pixels: the same decoders as PIL.
  const std::unique_ptr<Dataset> ds = create_dataset("wds/ds", root, "train", 3);
  CHECK(ds->size() == 29);  // 30 samples, one without an image
  CHECK(ds->num_classes() == 5);
  std::map<std::string, std::size_t> by_key;
  for (std::size_t i = 0; i < ds->size(); ++i) by_key[key_of(*ds, static_cast<int64_t>(i))] = i;
  for (const std::string& line : read_lines(dir / "pixels.txt")) {
    if (line.empty()) continue;
    std::istringstream in(line);
    std::string key;
    int64_t h = 0, w = 0;
    in >> key >> h >> w;
    CAPTURE(key);
    REQUIRE(by_key.count(key) == 1);
    const Image img = ds->image(by_key[key]);
    const Image pil = test::read_raw(dir / "pixels" / (key + ".raw"), h, w, 3);
    REQUIRE(img.height == h);
    REQUIRE(img.width == w);
    CHECK(test::max_diff(img.pixels, pil.pixels) == 0);
  }

  // --train-num-samples sets the epoch length (timm's num_samples), cutting nothing.
  const auto train = std::shared_ptr<const Dataset>(create_dataset("wds/ds", root, "train", 3));
  const auto longer = first_samples(train, 40, "train-num-samples");
  CHECK(longer->size() == train->size());
  StreamConfig config;
  config.is_training = true;
  config.batch_size = 4;
  const auto* it = dynamic_cast<const IterableDataset*>(longer.get());
  REQUIRE(it != nullptr);
  CHECK(it->make_sampler(config)->indices(0).size() == 40);  // ceil(40 / 4) * 4 on one worker
  // --epoch-repeats 2: twice the samples per epoch (timm's tfds / hfids rule).
  IterableOptions repeats;
  repeats.repeats = 2;
  const std::unique_ptr<Dataset> twice = create_dataset("wds/ds", root, "train", 3, {}, repeats);
  CHECK(dynamic_cast<const IterableDataset&>(*twice).make_sampler(config)->indices(0).size() == 60);
}

TEST_CASE("wds: brace patterns expand as webdataset's expand_urls") {
  test::TempDir dir;
  test::run_oracle("wds_oracle.py", {dir.path().string()}, std::chrono::seconds(300));
  int checked = 0;
  for (const std::string& line : read_lines(dir / "braces.txt")) {
    if (line.empty()) continue;
    const std::size_t tab = line.find('\t');
    CAPTURE(line);
    CHECK(wds_expand_urls(line.substr(0, tab)) == split_on(line.substr(tab + 1), '|'));
    ++checked;
  }
  CHECK(checked == 9);
  CHECK_THROWS_AS(wds_expand_urls("a{0..3"), UsageError);
  CHECK_THROWS_AS(wds_expand_urls("a{0..99999999}"), UsageError);
}

TEST_CASE("wds: errors name the split, the shard, the sample and the keys") {
  test::TempDir dir;
  // No info file and no brace split: the files tried are named.
  CHECK_THROWS_WITH_AS(create_dataset("wds/x", dir.path(), "train", 3), doctest::Contains("_info.json"), UsageError);
  write(dir / "_info.json",
        R"({"splits": {"train": {"num_samples": 2, "filenames": ["a.tar", "gone.tar"], "shard_lengths": [1, 1]}}})");
  CHECK_THROWS_WITH_AS(create_dataset("wds/x", dir.path(), "validation", 3), doctest::Contains("'train'"), UsageError);
  // A listed shard that is missing.
  const auto member = [&](const std::string& name, const std::string& data) {
    std::string h(512, '\0');
    h.replace(0, name.size(), name);
    char size[12];
    std::snprintf(size, sizeof size, "%011o", static_cast<unsigned>(data.size()));
    h.replace(124, 11, size);
    h[156] = '0';
    std::string padded = data;
    padded.resize((data.size() + 511) / 512 * 512, '\0');
    return h + padded;
  };
  write(dir / "a.tar", member("k1.cls", "1") + member("k1.json", R"({"other": 3})") + std::string(1024, '\0'));
  CHECK_THROWS_WITH_AS(create_dataset("wds/x", dir.path(), "train", 3), doctest::Contains("gone.tar"), Error);
  // A sample without an image is left out: no usable sample at all.
  CHECK_THROWS_WITH_AS(create_dataset("wds/x", dir.path(), "a.tar|1", 3), doctest::Contains("no usable sample"), Error);
  // A missing target key names the sample and the keys it has.
  IterableOptions options;
  options.target_key = "label";
  CHECK_THROWS_WITH_AS(create_dataset("wds/x", dir.path(), "a.tar|1", 3, {}, options),
                       doctest::Contains("available keys: 'other'"), Error);
  // Multi-field targets are refused.
  options.target_key = "a,b";
  CHECK_THROWS_AS(create_dataset("wds/x", dir.path(), "a.tar|1", 3, {}, options), UsageError);
  // --input-key and --target-key belong to wds/ datasets.
  IterableOptions keyed;
  keyed.input_key = "png";
  CHECK_THROWS_WITH_AS(create_dataset("tar", dir.path(), "train", 3, {}, keyed), doctest::Contains("--input-key"),
                       UsageError);
}

TEST_CASE("wds: training needs num_samples; a truncated shard keeps its samples before the damage") {
  test::TempDir dir;
  test::run_oracle("wds_oracle.py", {dir.path().string()}, std::chrono::seconds(300));
  const fs::path root = dir / "ds";
  // A brace split without "|N" has no sample count: fine for evaluation, an error for training.
  const std::unique_ptr<Dataset> ds = create_dataset("wds/ds", root, "ds-{0000..0001}.tar", 3);
  StreamConfig config;
  CHECK_NOTHROW(dynamic_cast<const IterableDataset&>(*ds).make_sampler(config));
  config.is_training = true;
  CHECK_THROWS_WITH_AS(dynamic_cast<const IterableDataset&>(*ds).make_sampler(config), doctest::Contains("num_samples"),
                       UsageError);
  // Cut shard 4 in the middle of a member: its earlier samples stay.
  const fs::path shard = root / "ds-0004.tar";
  const std::vector<std::uint8_t> bytes = test::read_bytes(shard);
  write(shard, std::string(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(bytes.size() / 2 + 100)));
  const std::unique_ptr<Dataset> cut = create_dataset("wds/ds", root, "validation", 3);
  CHECK(cut->size() > 4);  // shard 3's four samples and some of shard 4's
  CHECK(cut->size() < 12);
  // A split's num_samples beyond any sensible epoch is refused, not allocated.
  const std::unique_ptr<Dataset> huge = create_dataset("wds/x", dir / "ds", "ds-0000.tar|100000000000000000", 3);
  StreamConfig stream;
  stream.is_training = true;
  CHECK_THROWS_WITH_AS(dynamic_cast<const IterableDataset&>(*huge).make_sampler(stream),
                       doctest::Contains("samples per process (num_samples 100000000000000000"), UsageError);
}
