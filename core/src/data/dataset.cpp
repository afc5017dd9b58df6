#include "timm/data/dataset.hpp"

#include <c10/util/Exception.h>
#include <sys/stat.h>
#include <zlib.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <initializer_list>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <system_error>

#include "timm/base/error.hpp"
#include "timm/base/names.hpp"
#include "timm/base/python_repr.hpp"
#include "timm/data/image_ops.hpp"
#include "timm/log/log.hpp"

namespace fs = std::filesystem;

namespace timm {
namespace {

// ---- ImageFolder -----------------------------------------------------------

struct FoundFile {
  std::string path;
  std::string label;
};

// A folder's identity, whatever path reached it.
struct FolderId {
  dev_t device;
  ino_t inode;
  auto operator<=>(const FolderId&) const = default;
};

// os.walk(top, topdown=False, followlinks=True): sub-folders first (in
// directory order), then the folder's own files. The label is the folder's
// last component ('' for the root itself).
//
// Two departures, both for folder symlinks. A link back to a folder being
// walked (a cycle) would make os.walk repeat the tree until paths grow too
// long, so it is an error. And within one class folder (a sub-folder of the
// root), a real folder that a second path reaches again is walked once:
// os.walk walks it once per path, and a chain of N folders each holding two
// links to the next (a diamond, no cycle) has 2^N paths, a hang. The same
// real folder linked into two class folders still gives its images to both,
// as in timm.
class FolderWalk {
 public:
  explicit FolderWalk(const fs::path& root) : root_(root) {}

  // Walks `dir`, reached as `dir_string`, at `depth` below the root.
  void walk(const fs::path& dir, const std::string& dir_string, const std::string& label, int depth) {
    struct stat st {};
    if (::stat(dir.c_str(), &st) != 0) return;  // os.walk ignores folders it cannot list
    const FolderId id{st.st_dev, st.st_ino};
    if (std::find(ancestors_.begin(), ancestors_.end(), id) != ancestors_.end()) {
      throw Error("image folder " + in_quotes(root_.string()) + ": " + in_quotes(dir_string) +
                  " is a symlink cycle: it leads back to a folder that contains it; expected a tree");
    }
    if (depth == 1) walked_.clear();  // a new class folder
    if (depth > 0 && !walked_.insert(id).second) {
      ++skipped_paths_;
      return;
    }
    std::vector<std::pair<fs::path, std::string>> subdirs;
    std::vector<std::string> files;
    if (!list(dir, subdirs, files)) return;
    ancestors_.push_back(id);
    for (const auto& [path, name] : subdirs) walk(path, dir_string + "/" + name, name, depth + 1);
    ancestors_.pop_back();
    for (const std::string& name : files) {
      if (has_image_extension(name)) found_.push_back({dir_string + "/" + name, label});
    }
  }

  std::vector<FoundFile>& found() { return found_; }
  // Paths not walked because they led to a folder already walked in their
  // class folder.
  int64_t skipped_paths() const { return skipped_paths_; }

 private:
  // `dir`'s sub-folders (links to folders included) and other entries, in
  // directory order; false when listing fails, as os.walk drops such a
  // folder.
  static bool list(const fs::path& dir, std::vector<std::pair<fs::path, std::string>>& subdirs,
                   std::vector<std::string>& files) {
    std::error_code ec;
    // increment(ec): the range-for's operator++ would throw a filesystem_error.
    for (fs::directory_iterator it(dir, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
      std::error_code type_ec;
      const std::string name = it->path().filename().string();
      if (it->is_directory(type_ec)) {
        subdirs.emplace_back(it->path(), name);
      } else {
        files.push_back(name);
      }
    }
    return !ec;
  }

  fs::path root_;
  std::vector<FolderId> ancestors_;  // the folders being walked, root first
  std::set<FolderId> walked_;        // in the current class folder
  std::vector<FoundFile> found_;
  int64_t skipped_paths_ = 0;
};

class ImageFolderDataset final : public Dataset {
 public:
  ImageFolderDataset(const fs::path& root, int64_t channels, const ClassMap* class_map) : channels_(channels) {
    std::error_code ec;
    if (!fs::is_directory(root, ec)) throw Error("image folder " + in_quotes(root.string()) + ": not a folder");
    std::string root_string = root.string();
    while (root_string.size() > 1 && root_string.back() == '/') root_string.pop_back();
    FolderWalk folder_walk(root);
    folder_walk.walk(root, root_string, "", /*depth=*/0);
    if (folder_walk.skipped_paths() > 0) {
      log_warning("image folder " + in_quotes(root.string()) + ": " + std::to_string(folder_walk.skipped_paths()) +
                  " folder paths (symlinks) lead to a folder already listed in the same class folder and were "
                  "skipped: each folder's images are listed once (Python timm's os.walk lists them once per path)");
    }
    std::vector<FoundFile>& found = folder_walk.found();
    if (found.empty()) {
      throw Error("image folder " + in_quotes(root.string()) +
                  ": found no images; expected class sub-folders with .png, .jpg or .jpeg files");
    }
    // timm: sorted(set(labels), key=natural_key) unless a class map is
    // given, then the samples whose label is in it, by natural path.
    std::set<std::string> labels;
    for (const FoundFile& f : found) labels.insert(f.label);
    const std::map<std::string, int64_t> class_index = class_map ? *class_map : class_to_idx(labels);
    std::stable_sort(found.begin(), found.end(),
                     [](const FoundFile& a, const FoundFile& b) { return natural_less(a.path, b.path); });
    samples_.reserve(found.size());
    for (FoundFile& f : found) {
      const auto it = class_index.find(f.label);
      if (it != class_index.end()) samples_.push_back({std::move(f.path), it->second});
    }
    if (samples_.empty()) {
      throw Error("image folder " + in_quotes(root.string()) +
                  ": no image is in a class of the class map; expected class sub-folders named as in the map");
    }
    num_classes_ = class_map ? class_map_num_classes(*class_map) : static_cast<int64_t>(class_index.size());
  }

  std::size_t size() const override { return samples_.size(); }
  Image image(std::size_t index) const override { return read_image(samples_.at(index).path, channels_); }
  int64_t target(std::size_t index) const override { return samples_.at(index).target; }
  int64_t num_classes() const override { return num_classes_; }
  std::string describe(std::size_t index) const override { return samples_.at(index).path; }
  std::optional<EncodedImage> encoded(std::size_t index) const override {
    return EncodedImage{read_image_file(samples_.at(index).path), channels_};
  }

 private:
  struct Sample {
    std::string path;
    int64_t target;
  };
  std::vector<Sample> samples_;
  int64_t num_classes_ = 0;
  int64_t channels_;
};

// ---- IDX files: Fashion-MNIST, torchvision's MNIST family ------------------

// The largest IDX payload read: Fashion-MNIST's training images are 47 MB,
// the largest MNIST-style sets (EMNIST) about 550 MB. The header's sizes are
// checked against it before any byte is read, so a small gzip cannot expand
// into gigabytes.
constexpr std::uint64_t kMaxIdxBytes = std::uint64_t{1} << 30;

// `dataset` names the reader in messages: "fashion-mnist", "torch/mnist".
[[noreturn]] void bad_idx(const std::string& dataset, const fs::path& path, const std::string& what) {
  throw Error(dataset + ": " + in_quotes(path.string()) + ": " + what);
}

// A file read through zlib, which passes uncompressed files through.
class GzReader {
 public:
  GzReader(const std::string& dataset, const fs::path& path)
      : dataset_(dataset), path_(path), file_(gzopen(path.c_str(), "rb")) {
    if (file_ == nullptr) throw Error(dataset + ": cannot open " + in_quotes(path.string()));
  }
  ~GzReader() { gzclose(file_); }
  GzReader(const GzReader&) = delete;
  GzReader& operator=(const GzReader&) = delete;

  // Appends up to `n` bytes to `out`: fewer only at the end of the data.
  // `out` grows with what was actually decompressed, never by `n` at once.
  void read(std::vector<std::uint8_t>& out, std::uint64_t n) {
    std::array<std::uint8_t, 1 << 16> buffer;
    while (n > 0) {
      const int got = gzread(file_, buffer.data(), static_cast<unsigned>(std::min<std::uint64_t>(n, buffer.size())));
      if (got < 0) {
        int err = 0;
        bad_idx(dataset_, path_, std::string("corrupt: ") + gzerror(file_, &err));
      }
      if (got == 0) return;
      out.insert(out.end(), buffer.begin(), buffer.begin() + got);
      n -= static_cast<std::uint64_t>(got);
    }
  }

 private:
  std::string dataset_;
  fs::path path_;
  gzFile file_;
};

std::uint32_t be32(const std::vector<std::uint8_t>& b, std::size_t at) {
  return (std::uint32_t{b[at]} << 24) | (std::uint32_t{b[at + 1]} << 16) | (std::uint32_t{b[at + 2]} << 8) | b[at + 3];
}

// IDX magic numbers: 0x0000TTNN, type TT (0x08 unsigned bytes, 0x0C
// big-endian int32), NN dimensions.
constexpr std::uint32_t kIdxImages = 0x0803;     // uint8, N x rows x cols
constexpr std::uint32_t kIdxLabels = 0x0801;     // uint8, N
constexpr std::uint32_t kIdxIntLabels = 0x0C02;  // int32, N x columns (QMNIST)

// An IDX file's dimensions: the big-endian u32 counts after the magic number,
// read from `in`.
std::vector<std::uint32_t> idx_header(const std::string& dataset, GzReader& in, const fs::path& path,
                                      std::uint32_t magic, const char* kind) {
  const std::size_t dims = magic & 0xFF;
  std::vector<std::uint8_t> header;
  in.read(header, 4 + 4 * dims);
  if (header.size() < 4 + 4 * dims || be32(header, 0) != magic) {
    char hex[11];
    std::snprintf(hex, sizeof hex, "0x%08X", magic);
    bad_idx(
        dataset, path,
        std::string("not an IDX ") + kind + " file; expected magic number " + std::to_string(magic) + " (" + hex + ")");
  }
  std::vector<std::uint32_t> out;
  for (std::size_t d = 0; d < dims; ++d) out.push_back(be32(header, 4 + 4 * d));
  return out;
}

// The rest of an IDX file, which must be exactly `bytes` long; `header_bytes`
// and `what` ("2 images of 28x28") are for the message. Reads at most one
// byte more than `bytes`.
std::vector<std::uint8_t> idx_payload(const std::string& dataset, GzReader& in, const fs::path& path,
                                      std::uint64_t header_bytes, std::uint64_t bytes, const std::string& what) {
  const std::string expected = "expected " + std::to_string(header_bytes + bytes) + " for " + what;
  if (bytes > kMaxIdxBytes) {
    bad_idx(
        dataset, path,
        "declares " + what + ", " + std::to_string(bytes) + " bytes; expected at most " + std::to_string(kMaxIdxBytes));
  }
  std::vector<std::uint8_t> out;
  in.read(out, bytes + 1);
  if (out.size() > bytes)
    bad_idx(dataset, path, "has more than " + std::to_string(header_bytes + bytes) + " bytes; " + expected);
  if (out.size() < bytes)
    bad_idx(dataset, path, "has " + std::to_string(header_bytes + out.size()) + " bytes; " + expected);
  return out;
}

// The first of root/<stem><suffix> that is a file, or nullopt.
std::optional<fs::path> find_file(const fs::path& root, const std::string& stem,
                                  std::initializer_list<const char*> suffixes) {
  for (const char* suffix : suffixes) {
    fs::path p = root / (stem + suffix);
    std::error_code ec;
    if (fs::is_regular_file(p, ec)) return p;
  }
  return std::nullopt;
}

fs::path idx_file(const fs::path& root, const std::string& stem) {
  if (auto p = find_file(root, stem, {".gz", ""})) return *p;
  throw Error("fashion-mnist: missing " + in_quotes((root / (stem + ".gz")).string()) +
              "; expected the IDX files of Fashion-MNIST (the package dataset-fashion-mnist installs them in " +
              kFashionMnistDir.string() + ")");
}

// 28x28-style grayscale images and their labels (0..9) from two IDX files:
// labels are unsigned bytes (MNIST), or the first column of an int32 matrix
// (QMNIST, as torchvision's QMNIST with compat=True).
class IdxDataset final : public Dataset {
 public:
  IdxDataset(const std::string& dataset, const fs::path& images_path, const fs::path& labels_path, bool int_labels,
             int64_t channels)
      : dataset_(dataset), channels_(channels) {
    GzReader images(dataset, images_path), labels(dataset, labels_path);
    const std::vector<std::uint32_t> shape = idx_header(dataset, images, images_path, kIdxImages, "image");
    const std::vector<std::uint32_t> label_shape =
        idx_header(dataset, labels, labels_path, int_labels ? kIdxIntLabels : kIdxLabels, "label");
    const std::uint32_t label_count = label_shape[0];
    count_ = shape[0];
    rows_ = shape[1];
    cols_ = shape[2];
    const std::string images_of =
        std::to_string(count_) + " images of " + std::to_string(rows_) + "x" + std::to_string(cols_);
    if (rows_ == 0 || cols_ == 0) {
      bad_idx(dataset, images_path, "declares " + images_of + "; expected images of 1x1 or more");
    }
    // Each factor is below 2^32: the first product fits, the second may not.
    std::uint64_t image_bytes = 0;
    if (__builtin_mul_overflow(std::uint64_t{count_} * rows_, std::uint64_t{cols_}, &image_bytes)) {
      bad_idx(dataset, images_path, "declares " + images_of + ", more than 2^64 bytes");
    }
    pixels_ = idx_payload(dataset, images, images_path, 16, image_bytes, images_of);
    if (label_count != count_) {
      bad_idx(dataset, labels_path,
              "has " + std::to_string(label_count) + " labels; expected " + std::to_string(count_) +
                  ", one per image of " + in_quotes(images_path.string()));
    }
    if (!int_labels) {
      labels_ = idx_payload(dataset, labels, labels_path, 8, count_, std::to_string(count_) + " labels");
    } else {
      // count x columns big-endian int32; the class is column 0.
      const std::uint32_t columns = label_shape[1];
      const std::string labels_of = std::to_string(count_) + " labels of " + std::to_string(columns) + " int32";
      if (columns == 0) bad_idx(dataset, labels_path, "declares " + labels_of + "; expected 1 or more columns");
      const std::vector<std::uint8_t> table =
          idx_payload(dataset, labels, labels_path, 12, std::uint64_t{count_} * columns * 4, labels_of);
      labels_.resize(count_);
      for (std::size_t i = 0; i < count_; ++i) {
        const auto label = static_cast<std::int32_t>(be32(table, i * columns * 4));
        if (label < 0 || label >= 10) {
          bad_idx(dataset, labels_path,
                  "has label " + std::to_string(label) + " (sample " + std::to_string(i) + "); expected 0..9");
        }
        labels_[i] = static_cast<std::uint8_t>(label);
      }
    }
    for (std::uint8_t label : labels_) {
      if (label >= 10) bad_idx(dataset, labels_path, "has label " + std::to_string(label) + "; expected 0..9");
    }
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
  std::string describe(std::size_t index) const override { return dataset_ + "[" + std::to_string(index) + "]"; }

 private:
  void check(std::size_t index) const {
    TORCH_CHECK(index < count_, dataset_, ": index ", index, " out of range for ", count_, " samples");
  }
  std::string dataset_;
  std::vector<std::uint8_t> pixels_;
  std::vector<std::uint8_t> labels_;
  std::uint32_t count_ = 0, rows_ = 0, cols_ = 0;
  int64_t channels_;
};

// torchvision's MNIST family in root/<ClassName>/raw: the IDX files
// torchvision reads (uncompressed), or the .gz it downloads.
struct MnistLayout {
  std::string_view name;        // timm's: "mnist"
  std::string_view class_name;  // torchvision's, the folder: "MNIST"
  std::string_view title;       // for messages: "MNIST"
  std::string_view train_prefix, test_prefix;
  std::string_view labels_suffix;  // after "<prefix>-labels-"
  bool int_labels;
};

constexpr MnistLayout kMnistLayouts[] = {
    {"mnist", "MNIST", "MNIST", "train", "t10k", "idx1-ubyte", false},
    {"kmnist", "KMNIST", "Kuzushiji-MNIST", "train", "t10k", "idx1-ubyte", false},
    {"fashion_mnist", "FashionMNIST", "Fashion-MNIST", "train", "t10k", "idx1-ubyte", false},
    {"qmnist", "QMNIST", "QMNIST", "qmnist-train", "qmnist-test", "idx2-int", true},
};

std::unique_ptr<Dataset> make_torch_mnist(const MnistLayout& layout, const fs::path& root, bool train,
                                          int64_t channels) {
  const std::string dataset = "torch/" + std::string(layout.name);
  const fs::path raw = root / std::string(layout.class_name) / "raw";
  const std::string prefix(train ? layout.train_prefix : layout.test_prefix);
  const auto file = [&](const std::string& stem) {
    if (auto p = find_file(raw, stem, {"", ".gz"})) return *p;
    throw Error(dataset + ": missing " + in_quotes((raw / stem).string()) + "; expected torchvision's layout of " +
                std::string(layout.title) + ": its IDX files (uncompressed, or gzipped with .gz) in " +
                in_quotes(raw.string()) + ", where torchvision.datasets." + std::string(layout.class_name) +
                "(root, download=True) puts them (root: --data-dir)");
  };
  const fs::path images = file(prefix + "-images-idx3-ubyte");
  const fs::path labels = file(prefix + "-labels-" + std::string(layout.labels_suffix));
  return std::make_unique<IdxDataset>(dataset, images, labels, layout.int_labels, channels);
}

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

// A view of `count` samples of `base` in its order, starting again from its first
// sample after its last: its head when `count` is below its size, repeated
// passes over it when above.
class CyclicSamples final : public Dataset {
 public:
  CyclicSamples(std::shared_ptr<const Dataset> base, std::size_t count) : base_(std::move(base)), count_(count) {}
  std::size_t size() const override { return count_; }
  Image image(std::size_t index) const override { return base_->image(index % base_->size()); }
  int64_t target(std::size_t index) const override { return base_->target(index % base_->size()); }
  int64_t num_classes() const override { return base_->num_classes(); }
  std::string describe(std::size_t index) const override { return base_->describe(index % base_->size()); }
  std::optional<EncodedImage> encoded(std::size_t index) const override {
    return base_->encoded(index % base_->size());
  }

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
  if (const auto* iterable = dynamic_cast<const IterableDataset*>(dataset.get())) {
    return iterable->with_num_samples(*count);
  }
  if (static_cast<std::size_t>(*count) >= dataset->size()) return dataset;
  return std::make_shared<CyclicSamples>(std::move(dataset), static_cast<std::size_t>(*count));
}

std::shared_ptr<const Dataset> repeated_samples(std::shared_ptr<const Dataset> dataset, double repeats) {
  if (!(repeats >= 0.0) || !std::isfinite(repeats)) {
    throw UsageError("--epoch-repeats " + python_float_repr(repeats) + ": expected a number >= 0");
  }
  if (repeats <= 1.0 || dynamic_cast<const IterableDataset*>(dataset.get()) != nullptr || dataset->size() == 0) {
    return dataset;
  }
  const double count = std::ceil(repeats * static_cast<double>(dataset->size()));
  if (count > static_cast<double>(kMaxRepeatedSamples)) {
    throw UsageError("--epoch-repeats " + python_float_repr(repeats) + ": an epoch of " + python_float_repr(count) +
                     " samples; expected at most " + std::to_string(kMaxRepeatedSamples));
  }
  return std::make_shared<CyclicSamples>(std::move(dataset), static_cast<std::size_t>(count));
}

std::unique_ptr<Dataset> make_image_folder(const fs::path& root, int64_t channels, const ClassMap* class_map) {
  check_channels(channels);
  return std::make_unique<ImageFolderDataset>(root, channels, class_map);
}

std::unique_ptr<Dataset> make_fashion_mnist(const fs::path& root, const std::string& split, int64_t channels) {
  check_channels(channels);
  const bool train = is_one_of(kTrainSplits, split_name(split));
  const std::string prefix = train ? "train" : "t10k";
  const fs::path images = idx_file(root, prefix + "-images-idx3-ubyte");
  const fs::path labels = idx_file(root, prefix + "-labels-idx1-ubyte");
  return std::make_unique<IdxDataset>("fashion-mnist", images, labels, /*int_labels=*/false, channels);
}

bool is_fashion_mnist(std::string_view name) {
  return name == "fashion-mnist" || name == "fashion_mnist" || name == "torch/fashion_mnist";
}

std::string default_dataset_name(const std::string& dataset, bool has_data_dir) {
  if (!dataset.empty()) return dataset;
  return has_data_dir ? "" : "fashion-mnist";
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

void check_input_img_mode(const std::optional<std::string>& mode, int64_t channels) {
  if (!mode) return;
  if (*mode != "RGB" && *mode != "L") {
    throw UsageError("--input-img-mode " + in_quotes(*mode) + ": expected 'RGB' or 'L' (the modes timm-cpp decodes)");
  }
  const int64_t decoded = *mode == "RGB" ? 3 : 1;
  if (decoded != channels) {
    throw UsageError("--input-img-mode " + in_quotes(*mode) + " gives " + std::to_string(decoded) +
                     "-channel images, but the model takes " + std::to_string(channels) + " (--in-chans)");
  }
}

std::unique_ptr<Dataset> create_dataset(const std::string& name, const fs::path& root, const std::string& split,
                                        int64_t channels, const fs::path& class_map, const IterableOptions& iterable) {
  const std::size_t prefix_end = name.find('/');
  if (prefix_end != std::string::npos && ascii_lower(name.substr(0, prefix_end)) == "wds") {
    check_channels(channels);
    std::optional<ClassMap> map;
    if (!class_map.empty()) map = load_class_map(class_map, root);
    return make_wds(root, split, channels, iterable, map ? &*map : nullptr);
  }
  if (!iterable.input_key.empty() || !iterable.target_key.empty()) {
    const std::string flag = !iterable.input_key.empty() ? "--input-key" : "--target-key";
    throw UsageError(flag + ": dataset " + in_quotes(name) +
                     " is not streamed; the flag applies to wds/ datasets only (timm ignores it for the others)");
  }
  // timm's readers: load_class_map(class_map, root) with the reader's root.
  std::optional<ClassMap> map;
  const auto read_map = [&](const fs::path& reader_root) -> const ClassMap* {
    if (class_map.empty()) return nullptr;
    map = load_class_map(class_map, reader_root);
    return &*map;
  };
  if (name.empty() || name == "image_folder") {
    if (root.empty()) throw UsageError("dataset " + in_quotes(name) + ": --data-dir is required for an image folder");
    // timm's create_reader: a .tar file (case-sensitive suffix) is read as image-in-tar.
    std::error_code ec;
    if (fs::is_regular_file(root, ec) && root.extension() == ".tar") {
      return make_image_in_tar(root, channels, read_map(root));
    }
    const fs::path folder = find_split_folder(root, split);
    return make_image_folder(folder, channels, read_map(folder));
  }
  if (name == "tar" || name == "image_in_tar") {
    if (root.empty()) throw UsageError("dataset " + in_quotes(name) + ": --data-dir is required for image-in-tar");
    std::error_code ec;
    const fs::path tar_root = fs::is_directory(root, ec) ? find_split_folder(root, split) : root;
    return make_image_in_tar(tar_root, channels, read_map(tar_root));
  }
  if (!class_map.empty()) {
    throw UsageError("--class-map " + in_quotes(class_map.string()) + ": dataset " + in_quotes(name) +
                     " has its own class indices; a class map applies to image folders and tars only");
  }
  // timm: the prefix before the first '/' in any case; for torch/, the name
  // after the second '/' if any (name.split('/', 2)[-1]), lowercased.
  const std::size_t slash = name.find('/');
  if (slash != std::string::npos && ascii_lower(name.substr(0, slash)) == "torch") {
    std::string torch_name = name.substr(slash + 1);
    if (const std::size_t second = torch_name.find('/'); second != std::string::npos) {
      torch_name = torch_name.substr(second + 1);
    }
    torch_name = ascii_lower(torch_name);
    const std::string qualified = "torch/" + torch_name;
    if (torch_name == "fashion_mnist" && root.empty()) return make_fashion_mnist(kFashionMnistDir, split, channels);
    const bool train = is_one_of(kTrainSplits, split);  // timm: split in _TRAIN_SYNONYM, slices included
    if (torch_name == "cifar10" || torch_name == "cifar100") {
      if (root.empty()) throw UsageError("dataset " + in_quotes(qualified) + ": --data-dir is required");
      return make_cifar(torch_name, root, train, channels);
    }
    for (const MnistLayout& layout : kMnistLayouts) {
      if (torch_name != layout.name) continue;
      if (root.empty()) throw UsageError("dataset " + in_quotes(qualified) + ": --data-dir is required");
      check_channels(channels);
      return make_torch_mnist(layout, root, train, channels);
    }
    throw UsageError("unknown torchvision dataset " + in_quotes(name) +
                     "; expected torch/cifar10, torch/cifar100, torch/mnist, torch/kmnist, torch/fashion_mnist or "
                     "torch/qmnist (read from --data-dir in torchvision's layout, no downloads)");
  }
  if (is_fashion_mnist(name)) {
    return make_fashion_mnist(root.empty() ? kFashionMnistDir : root, split, channels);
  }
  throw UsageError("unknown dataset " + in_quotes(name) +
                   "; expected '' or 'image_folder' (a folder of class sub-folders, or a .tar file), "
                   "'tar' (a folder of .tar shards), 'wds/<name>' (WebDataset shards), 'fashion-mnist', or "
                   "torchvision's torch/cifar10, torch/cifar100, "
                   "torch/mnist, torch/kmnist, torch/fashion_mnist or torch/qmnist (from --data-dir)");
}

}  // namespace timm
