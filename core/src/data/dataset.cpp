#include "timm/data/dataset.hpp"

#include <c10/util/Exception.h>
#include <zlib.h>

#include <algorithm>
#include <array>
#include <map>
#include <set>
#include <span>
#include <system_error>

#include "timm/base/error.hpp"
#include "timm/base/names.hpp"
#include "timm/data/image_ops.hpp"

namespace fs = std::filesystem;

namespace timm {
namespace {

// ---- ImageFolder -----------------------------------------------------------

struct FoundFile {
  std::string path;
  std::string label;
};

// os.walk(top, topdown=False, followlinks=True): sub-folders first (in
// directory order), then the folder's own files. `rel` is the folder relative
// to the root; the label is its last component ('' for the root itself).
void walk(const fs::path& dir, const std::string& dir_string, const std::string& label, std::vector<FoundFile>& out) {
  std::error_code ec;
  fs::directory_iterator it(dir, ec);
  if (ec) return;  // os.walk ignores folders it cannot list
  std::vector<std::pair<fs::path, std::string>> subdirs;
  std::vector<std::string> files;
  for (const fs::directory_entry& entry : it) {
    std::error_code type_ec;
    const std::string name = entry.path().filename().string();
    if (entry.is_directory(type_ec)) {
      subdirs.emplace_back(entry.path(), name);
    } else {
      files.push_back(name);
    }
  }
  for (const auto& [path, name] : subdirs) walk(path, dir_string + "/" + name, name, out);
  for (const std::string& name : files) {
    if (has_image_extension(name)) out.push_back({dir_string + "/" + name, label});
  }
}

class ImageFolderDataset final : public Dataset {
 public:
  ImageFolderDataset(const fs::path& root, int64_t channels) : channels_(channels) {
    std::error_code ec;
    if (!fs::is_directory(root, ec)) throw Error("image folder " + in_quotes(root.string()) + ": not a folder");
    std::string root_string = root.string();
    while (root_string.size() > 1 && root_string.back() == '/') root_string.pop_back();
    std::vector<FoundFile> found;
    walk(root, root_string, "", found);
    if (found.empty()) {
      throw Error("image folder " + in_quotes(root.string()) +
                  ": found no images; expected class sub-folders with .png, .jpg or .jpeg files");
    }
    // timm: sorted(set(labels), key=natural_key), then samples by natural path.
    std::set<std::string> labels;
    for (const FoundFile& f : found) labels.insert(f.label);
    const std::map<std::string, int64_t> class_index = class_to_idx(labels);
    std::stable_sort(found.begin(), found.end(),
                     [](const FoundFile& a, const FoundFile& b) { return natural_less(a.path, b.path); });
    samples_.reserve(found.size());
    for (FoundFile& f : found) samples_.push_back({std::move(f.path), class_index.at(f.label)});
    num_classes_ = static_cast<int64_t>(class_index.size());
  }

  std::size_t size() const override { return samples_.size(); }
  Image image(std::size_t index) const override { return read_image(samples_.at(index).path, channels_); }
  int64_t target(std::size_t index) const override { return samples_.at(index).target; }
  int64_t num_classes() const override { return num_classes_; }
  std::string describe(std::size_t index) const override { return samples_.at(index).path; }

 private:
  struct Sample {
    std::string path;
    int64_t target;
  };
  std::vector<Sample> samples_;
  int64_t num_classes_ = 0;
  int64_t channels_;
};

// ---- Fashion-MNIST (IDX files) --------------------------------------------

// Reads a whole file through zlib, which passes uncompressed files through.
std::vector<std::uint8_t> read_maybe_gzip(const fs::path& path) {
  gzFile file = gzopen(path.c_str(), "rb");
  if (file == nullptr) throw Error("fashion-mnist: cannot open " + in_quotes(path.string()));
  std::vector<std::uint8_t> out;
  std::array<std::uint8_t, 1 << 16> buffer;
  while (true) {
    const int n = gzread(file, buffer.data(), buffer.size());
    if (n < 0) {
      int err = 0;
      const std::string message = gzerror(file, &err);
      gzclose(file);
      throw Error("fashion-mnist: " + in_quotes(path.string()) + " is corrupt: " + message);
    }
    if (n == 0) break;
    out.insert(out.end(), buffer.begin(), buffer.begin() + n);
  }
  gzclose(file);
  return out;
}

std::uint32_t be32(const std::vector<std::uint8_t>& b, std::size_t at) {
  return (std::uint32_t{b[at]} << 24) | (std::uint32_t{b[at + 1]} << 16) | (std::uint32_t{b[at + 2]} << 8) | b[at + 3];
}

fs::path idx_file(const fs::path& root, const std::string& stem) {
  for (const char* suffix : {".gz", ""}) {
    fs::path p = root / (stem + suffix);
    std::error_code ec;
    if (fs::is_regular_file(p, ec)) return p;
  }
  throw Error("fashion-mnist: missing " + in_quotes((root / (stem + ".gz")).string()) +
              "; expected the IDX files of Fashion-MNIST (the package dataset-fashion-mnist installs them in " +
              kFashionMnistDir.string() + ")");
}

class FashionMnistDataset final : public Dataset {
 public:
  FashionMnistDataset(const fs::path& root, const std::string& prefix, int64_t channels) : channels_(channels) {
    const fs::path images_path = idx_file(root, prefix + "-images-idx3-ubyte");
    const fs::path labels_path = idx_file(root, prefix + "-labels-idx1-ubyte");
    const std::vector<std::uint8_t> images = read_maybe_gzip(images_path);
    labels_ = read_maybe_gzip(labels_path);
    auto bad = [](const fs::path& p, const std::string& what) {
      return Error("fashion-mnist: " + in_quotes(p.string()) + ": " + what);
    };
    if (images.size() < 16 || be32(images, 0) != 2051) {
      throw bad(images_path, "not an IDX image file; expected magic number 2051 (0x00000803)");
    }
    if (labels_.size() < 8 || be32(labels_, 0) != 2049) {
      throw bad(labels_path, "not an IDX label file; expected magic number 2049 (0x00000801)");
    }
    count_ = be32(images, 4);
    rows_ = be32(images, 8);
    cols_ = be32(images, 12);
    const std::size_t expected = 16 + std::size_t{count_} * rows_ * cols_;
    if (images.size() != expected) {
      throw bad(images_path, "has " + std::to_string(images.size()) + " bytes; expected " + std::to_string(expected) +
                                 " for " + std::to_string(count_) + " images of " + std::to_string(rows_) + "x" +
                                 std::to_string(cols_));
    }
    if (be32(labels_, 4) != count_ || labels_.size() != 8 + std::size_t{count_}) {
      throw bad(labels_path, "has " + std::to_string(be32(labels_, 4)) + " labels; expected " + std::to_string(count_) +
                                 ", one per image");
    }
    labels_.erase(labels_.begin(), labels_.begin() + 8);
    for (std::uint8_t label : labels_) {
      if (label >= 10) throw bad(labels_path, "has label " + std::to_string(label) + "; expected 0..9");
    }
    pixels_.assign(images.begin() + 16, images.end());
  }

  std::size_t size() const override { return count_; }
  Image image(std::size_t index) const override {
    check(index);
    Image gray(rows_, cols_, 1);
    const std::size_t n = std::size_t{rows_} * cols_;
    std::copy_n(pixels_.begin() + index * n, n, gray.pixels.begin());
    return channels_ == 1 ? gray : convert_channels(gray, channels_);
  }
  int64_t target(std::size_t index) const override {
    check(index);
    return labels_[index];
  }
  int64_t num_classes() const override { return 10; }
  std::string describe(std::size_t index) const override { return "fashion-mnist[" + std::to_string(index) + "]"; }

 private:
  void check(std::size_t index) const {
    TORCH_CHECK(index < count_, "fashion-mnist: index ", index, " out of range for ", count_, " samples");
  }
  std::vector<std::uint8_t> pixels_;
  std::vector<std::uint8_t> labels_;
  std::uint32_t count_ = 0, rows_ = 0, cols_ = 0;
  int64_t channels_;
};

void check_channels(int64_t channels) {
  if (channels != 1 && channels != 3) {
    throw UsageError("dataset: " + std::to_string(channels) + " input channels; expected 1 or 3");
  }
}

// timm's split synonyms; a split's name is what precedes its "[...]" slice.
constexpr std::array<std::string_view, 2> kTrainSplits = {"train", "training"};
constexpr std::array<std::string_view, 5> kEvalSplits = {"val", "valid", "validation", "eval", "evaluation"};

std::string split_name(const std::string& split) { return split.substr(0, split.find('[')); }

bool is_one_of(std::span<const std::string_view> names, std::string_view name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

// A view of a dataset's leading samples; the base checks the indices.
class FirstSamples final : public Dataset {
 public:
  FirstSamples(std::shared_ptr<const Dataset> base, std::size_t count) : base_(std::move(base)), count_(count) {}
  std::size_t size() const override { return count_; }
  Image image(std::size_t index) const override { return base_->image(index); }
  int64_t target(std::size_t index) const override { return base_->target(index); }
  int64_t num_classes() const override { return base_->num_classes(); }
  std::string describe(std::size_t index) const override { return base_->describe(index); }

 private:
  std::shared_ptr<const Dataset> base_;
  std::size_t count_;
};

}  // namespace

bool has_image_extension(std::string_view name) {
  const std::size_t dot = name.rfind('.');
  if (dot == std::string_view::npos || name.find_first_not_of('.') > dot) return false;
  const std::string ext = ascii_lower(name.substr(dot));
  return ext == ".png" || ext == ".jpg" || ext == ".jpeg";
}

std::map<std::string, int64_t> class_to_idx(const std::set<std::string>& labels) {
  std::vector<std::string> classes(labels.begin(), labels.end());
  std::stable_sort(classes.begin(), classes.end(),
                   [](const std::string& a, const std::string& b) { return natural_less(a, b); });
  std::map<std::string, int64_t> index;
  for (std::size_t i = 0; i < classes.size(); ++i) index[classes[i]] = static_cast<int64_t>(i);
  return index;
}

std::shared_ptr<const Dataset> first_samples(std::shared_ptr<const Dataset> dataset, std::optional<int64_t> count,
                                             const std::string& flag) {
  if (!count) return dataset;
  if (*count <= 0) throw UsageError("--" + flag + " " + std::to_string(*count) + ": expected a positive count");
  if (static_cast<std::size_t>(*count) >= dataset->size()) return dataset;
  return std::make_shared<FirstSamples>(std::move(dataset), static_cast<std::size_t>(*count));
}

std::unique_ptr<Dataset> make_image_folder(const fs::path& root, int64_t channels) {
  check_channels(channels);
  return std::make_unique<ImageFolderDataset>(root, channels);
}

std::unique_ptr<Dataset> make_fashion_mnist(const fs::path& root, const std::string& split, int64_t channels) {
  check_channels(channels);
  const bool train = is_one_of(kTrainSplits, split_name(split));
  return std::make_unique<FashionMnistDataset>(root, train ? "train" : "t10k", channels);
}

bool is_fashion_mnist(std::string_view name) {
  return name == "fashion-mnist" || name == "fashion_mnist" || name == "torch/fashion_mnist";
}

fs::path find_split_folder(const fs::path& root, const std::string& split) {
  const std::string name = split_name(split);
  std::error_code ec;
  if (!name.empty() && fs::exists(root / name, ec)) return root / name;
  std::span<const std::string_view> synonyms;
  if (is_one_of(kTrainSplits, name)) synonyms = kTrainSplits;
  if (is_one_of(kEvalSplits, name)) synonyms = kEvalSplits;
  for (const std::string_view s : synonyms) {
    if (fs::exists(root / s, ec)) return root / s;
  }
  return root;
}

std::unique_ptr<Dataset> create_dataset(const std::string& name, const fs::path& root, const std::string& split,
                                        int64_t channels) {
  if (name.empty() || name == "image_folder") {
    if (root.empty()) throw UsageError("dataset " + in_quotes(name) + ": --data-dir is required for an image folder");
    // timm's create_reader: a .tar file (case-sensitive suffix) is read as image-in-tar.
    std::error_code ec;
    if (fs::is_regular_file(root, ec) && root.extension() == ".tar") return make_image_in_tar(root, channels);
    return make_image_folder(find_split_folder(root, split), channels);
  }
  if (name == "tar" || name == "image_in_tar") {
    if (root.empty()) throw UsageError("dataset " + in_quotes(name) + ": --data-dir is required for image-in-tar");
    std::error_code ec;
    return make_image_in_tar(fs::is_directory(root, ec) ? find_split_folder(root, split) : root, channels);
  }
  if (is_fashion_mnist(name)) {
    return make_fashion_mnist(root.empty() ? kFashionMnistDir : root, split, channels);
  }
  throw UsageError("unknown dataset " + in_quotes(name) +
                   "; expected '' or 'image_folder' (a folder of class sub-folders, or a .tar file), "
                   "'tar' (a folder of .tar shards) or 'fashion-mnist'");
}

}  // namespace timm
