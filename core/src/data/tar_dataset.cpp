// timm's ReaderImageInTar (timm/data/readers/reader_image_in_tar.py): images
// inside uncompressed .tar files, one tar or a folder of tar shards, with
// one level of tars inside tars. Members are byte ranges of the files, read
// with pread so that loader threads share one descriptor per file.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <set>

#include "tar_members.hpp"
#include "timm/base/error.hpp"
#include "timm/base/names.hpp"
#include "timm/data/dataset.hpp"

namespace fs = std::filesystem;

namespace timm {
namespace tar {
namespace {

constexpr int64_t kBlock = 512;

// A NUL-terminated (or full-length) string field.
std::string field(const std::uint8_t* header, std::size_t begin, std::size_t length) {
  // An empty field may have no storage (an empty GNU long name's bytes):
  // strnlen must not see a null pointer.
  if (length == 0) return {};
  const char* p = reinterpret_cast<const char*>(header + begin);
  return std::string(p, strnlen(p, length));
}

// GNU long names and pax headers are a few hundred bytes in practice; a
// larger one is refused rather than read into memory.
constexpr int64_t kMaxMetadataBytes = int64_t{1} << 20;

[[noreturn]] void corrupt_header(const File& file, int64_t at, const std::string& what) {
  throw Error(file.reader() + ": " + in_quotes(file.path()) + ": corrupt header at byte " + std::to_string(at) + ": " +
              what);
}

// The size field (12 bytes at 124): octal digits, NUL/space padded, or GNU
// base-256 (first byte 0x80, then a big-endian number; 0xFF marks a negative
// one). Never negative; the caller checks it against the archive.
int64_t member_size(const std::uint8_t* header, const File& file, int64_t at) {
  constexpr int kBegin = 124, kLength = 12;
  const std::uint8_t first = header[kBegin];
  if (first & 0x80) {
    if (first != 0x80) corrupt_header(file, at, "negative or oversized base-256 member size");
    int64_t v = 0;
    for (int i = 1; i < kLength; ++i) {
      if (v > (std::numeric_limits<int64_t>::max() >> 8)) corrupt_header(file, at, "base-256 member size overflows");
      v = (v << 8) | header[kBegin + i];
    }
    return v;
  }
  // At most 12 octal digits: below 2^36, no overflow.
  int64_t v = 0;
  for (int i = 0; i < kLength; ++i) {
    const char c = static_cast<char>(header[kBegin + i]);
    if (c == '\0' || c == ' ') {
      if (v != 0) break;
      continue;
    }
    if (c < '0' || c > '7') corrupt_header(file, at, "member size is not an octal number");
    v = v * 8 + (c - '0');
  }
  return v;
}

// The decimal length that starts a pax record, up to its space; nullopt when
// malformed or longer than `limit`.
std::optional<std::size_t> pax_length(const std::vector<std::uint8_t>& data, std::size_t& pos, std::size_t limit) {
  std::size_t length = 0;
  const std::size_t begin = pos;
  for (; pos < data.size() && data[pos] != ' '; ++pos) {
    if (data[pos] < '0' || data[pos] > '9') return std::nullopt;
    length = length * 10 + (data[pos] - '0');
    if (length > limit) return std::nullopt;
  }
  if (pos == begin || pos >= data.size()) return std::nullopt;
  return length;
}

// The "path" of a pax extended header's records ("<len> key=value\n"); a
// malformed record is an error, as in tarfile.
std::string pax_path(const std::vector<std::uint8_t>& data, const File& file, int64_t at) {
  std::size_t pos = 0;
  std::string path;
  // tarfile stops at a NUL: the records may be padded.
  while (pos < data.size() && data[pos] != 0) {
    const std::size_t record_begin = pos;
    const std::optional<std::size_t> length = pax_length(data, pos, data.size() - record_begin);
    // The length counts the digits, the space and the closing newline.
    const std::size_t record_end = record_begin + length.value_or(0);
    if (!length || record_end <= pos + 1 || data[record_end - 1] != '\n') {
      corrupt_header(file, at, "malformed pax record at byte " + std::to_string(record_begin) + " of its data");
    }
    const std::string record(data.begin() + pos + 1, data.begin() + record_end - 1);
    const std::size_t eq = record.find('=');
    if (eq != std::string::npos && record.substr(0, eq) == "path") path = record.substr(eq + 1);
    pos = record_end;
  }
  return path;
}

// list_members' loop, appending to `members` as it goes (so that a caller
// stopping at an error keeps the members before it). Every position moves
// forward by at least one block and stays within the file.
void scan_members(const File& file, int64_t begin, int64_t end, std::vector<Member>& members) {
  std::string long_name;
  int64_t pos = begin;
  while (pos + kBlock <= end) {
    const std::vector<std::uint8_t> header = file.read(pos, kBlock);
    if (std::all_of(header.begin(), header.end(), [](std::uint8_t b) { return b == 0; })) break;
    const int64_t size = member_size(header.data(), file, pos);
    const char type = static_cast<char>(header[156]);
    const int64_t data = pos + kBlock;
    if (size > end - data) {
      corrupt_header(file, pos,
                     "member " + in_quotes(field(header.data(), 0, 100)) + " declares " + std::to_string(size) +
                         " bytes; only " + std::to_string(end - data) + " remain in the archive");
    }
    const int64_t header_at = pos;
    pos = data + (size + kBlock - 1) / kBlock * kBlock;
    if (type == 'L' || type == 'x') {
      if (size > kMaxMetadataBytes) {
        corrupt_header(file, header_at,
                       (type == 'L' ? "GNU long name of " : "pax header of ") + std::to_string(size) +
                           " bytes; expected at most " + std::to_string(kMaxMetadataBytes));
      }
      const std::vector<std::uint8_t> bytes = file.read(data, size);
      long_name = type == 'L' ? field(bytes.data(), 0, bytes.size()) : pax_path(bytes, file, header_at);
      continue;
    }
    std::string name = field(header.data(), 0, 100);
    const std::string prefix = field(header.data(), 345, 155);
    if (std::memcmp(header.data() + 257, "ustar\0", 6) == 0 && !prefix.empty()) name = prefix + "/" + name;
    if (!long_name.empty()) name = std::exchange(long_name, "");
    // tarfile: an old-style regular file with a trailing slash is a folder.
    const bool regular = (type == '0' || type == '\0' || type == '7') && !(type == '\0' && name.ends_with('/'));
    if (regular) members.push_back({name, data, size});
  }
}

}  // namespace

File::File(const fs::path& path, std::string reader)
    : path_(path.string()), reader_(std::move(reader)), fd_(::open(path.c_str(), O_RDONLY | O_CLOEXEC)) {
  if (fd_ < 0) throw Error(reader_ + ": cannot open " + in_quotes(path_) + ": " + std::strerror(errno));
}

File::~File() { ::close(fd_); }

std::vector<std::uint8_t> File::read(int64_t offset, int64_t size) const {
  std::vector<std::uint8_t> out(size);
  int64_t done = 0;
  while (done < size) {
    const ssize_t n = ::pread(fd_, out.data() + done, size - done, offset + done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw Error(reader_ + ": " + in_quotes(path_) + " is truncated at byte " + std::to_string(offset));
    done += n;
  }
  return out;
}

int64_t File::size() const {
  struct stat st {};
  if (::fstat(fd_, &st) != 0) throw Error(reader_ + ": cannot stat " + in_quotes(path_) + ": " + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) throw Error(reader_ + ": " + in_quotes(path_) + " is not a regular file");
  return static_cast<int64_t>(st.st_size);
}

std::vector<Member> list_members(const File& file, int64_t begin, int64_t end, std::string* error) {
  std::vector<Member> members;
  if (error == nullptr) {
    scan_members(file, begin, end, members);
    return members;
  }
  try {
    scan_members(file, begin, end, members);
  } catch (const Error& e) {
    *error = e.what();
  }
  return members;
}

}  // namespace tar

namespace {

using tar::File;
using tar::list_members;
using tar::Member;

// os.path.split / splitext as Python's.
std::pair<std::string, std::string> split_path(const std::string& path) {
  const std::size_t slash = path.rfind('/');
  if (slash == std::string::npos) return {"", path};
  std::string head = path.substr(0, slash + 1);
  if (head.find_first_not_of('/') != std::string::npos) {
    while (head.ends_with('/')) head.pop_back();
  }
  return {head, path.substr(slash + 1)};
}

std::pair<std::string, std::string> split_ext(const std::string& name) {
  const std::size_t dot = name.rfind('.');
  if (dot == std::string::npos || name.find_first_not_of('.') > dot) return {name, ""};
  return {name.substr(0, dot), name.substr(dot)};
}

// os.path.join(a, b).
std::string join(const std::string& a, const std::string& b) {
  if (b.starts_with('/') || a.empty()) return b;
  return a.ends_with('/') ? a + b : a + "/" + b;
}

// _label_from_paths(leaf_only=True): the last component of the joined path.
std::string label_of(const std::string& tree_path, const std::string& member_path) {
  std::string p = join(tree_path, split_path(member_path).first);
  const std::size_t first = p.find_first_not_of('/');
  if (first == std::string::npos) return "";
  p = p.substr(first);
  while (p.ends_with('/')) p.pop_back();
  return p.substr(p.rfind('/') == std::string::npos ? 0 : p.rfind('/') + 1);
}

class ImageInTarDataset final : public Dataset {
 public:
  ImageInTarDataset(const fs::path& root, int64_t channels, const ClassMap* class_map) : channels_(channels) {
    std::error_code ec;
    std::vector<std::pair<fs::path, std::string>> tars;  // file, tree path ('' for a root tar)
    if (fs::is_regular_file(root, ec)) {
      if (ascii_lower(root.extension().string()) != ".tar") {
        throw UsageError("image-in-tar: " + in_quotes(root.string()) + ": expected a .tar file or a folder of them");
      }
      tars.emplace_back(root, "");
    } else {
      // glob(root/*.tar): directory order, hidden files skipped, case-sensitive.
      // increment(ec): the range-for's operator++ would throw a filesystem_error.
      for (fs::directory_iterator it(root, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
        const std::string name = it->path().filename().string();
        if (!name.starts_with('.') && name.ends_with(".tar")) tars.emplace_back(it->path(), split_ext(name).first);
      }
      if (ec) throw Error("image-in-tar: cannot list " + in_quotes(root.string()) + ": " + ec.message());
    }
    if (tars.empty()) throw Error("image-in-tar: no .tar files found at " + in_quotes(root.string()));
    std::vector<Found> found;
    for (const auto& [path, tree_path] : tars) scan(path, tree_path, found);
    if (found.empty()) {
      throw Error("image-in-tar: " + in_quotes(root.string()) + ": found no .png, .jpg or .jpeg members");
    }
    build_index(std::move(found), class_map);
    if (samples_.empty()) {
      throw Error("image-in-tar: " + in_quotes(root.string()) +
                  ": no member is in a class of the class map; expected members in folders named as in the map");
    }
  }

  std::size_t size() const override { return samples_.size(); }
  Image image(std::size_t index) const override {
    const Sample& s = samples_.at(index);
    const std::vector<std::uint8_t> bytes = files_[s.file]->read(s.offset, s.size);
    return decode_image(bytes, describe(index), channels_);
  }
  int64_t target(std::size_t index) const override { return samples_.at(index).target; }
  int64_t num_classes() const override { return num_classes_; }
  std::string describe(std::size_t index) const override { return samples_.at(index).name; }
  std::optional<EncodedImage> encoded(std::size_t index) const override {
    const Sample& s = samples_.at(index);
    return EncodedImage{files_[s.file]->read(s.offset, s.size), channels_};
  }

 private:
  struct Found {
    std::string member_path;  // the sort key
    std::string label;
    std::string name;  // for messages
    std::size_t file;
    int64_t offset;
    int64_t size;
  };
  struct Sample {
    std::string name;
    std::size_t file;
    int64_t offset;
    int64_t size;
    int64_t target;
  };

  static bool is_image(const std::string& path) { return has_image_extension(split_path(path).second); }

  // _extract_tarinfo and _add_samples: children's samples before the tar's
  // own; tars nested deeper than one level are ignored, as timm's flattening.
  void scan(const fs::path& path, const std::string& tree_path, std::vector<Found>& found) {
    files_.push_back(std::make_unique<File>(path, "image-in-tar"));
    const File& file = *files_.back();
    const std::size_t index = files_.size() - 1;
    const int64_t end = file.size();
    std::vector<Found> own;
    for (const Member& m : list_members(file, 0, end)) {
      const auto [stem, ext] = split_ext(split_path(m.path).second);
      if (ascii_lower(ext) == ".tar") {
        const std::string child_path = join(tree_path, stem);
        for (const Member& c : list_members(file, m.offset, m.offset + m.size)) {
          if (!is_image(c.path)) continue;
          found.push_back({c.path, label_of(child_path, c.path), file.path() + "/" + m.path + ":" + c.path, index,
                           c.offset, c.size});
        }
      } else if (is_image(m.path)) {
        own.push_back({m.path, label_of(tree_path, m.path), file.path() + ":" + m.path, index, m.offset, m.size});
      }
    }
    found.insert(found.end(), own.begin(), own.end());
  }

  // timm: the class map's index, else the labels in natural order; samples
  // whose label the map lacks are dropped.
  void build_index(std::vector<Found> found, const ClassMap* class_map) {
    std::set<std::string> labels;
    for (const Found& f : found) labels.insert(f.label);
    const std::map<std::string, int64_t> class_index = class_map ? *class_map : class_to_idx(labels);
    std::stable_sort(found.begin(), found.end(),
                     [](const Found& a, const Found& b) { return natural_less(a.member_path, b.member_path); });
    for (Found& f : found) {
      const auto it = class_index.find(f.label);
      if (it != class_index.end()) samples_.push_back({std::move(f.name), f.file, f.offset, f.size, it->second});
    }
    num_classes_ = class_map ? class_map_num_classes(*class_map) : static_cast<int64_t>(class_index.size());
  }

  std::vector<std::unique_ptr<File>> files_;
  std::vector<Sample> samples_;
  int64_t num_classes_ = 0;
  int64_t channels_;
};

}  // namespace

std::unique_ptr<Dataset> make_image_in_tar(const fs::path& root, int64_t channels, const ClassMap* class_map) {
  return std::make_unique<ImageInTarDataset>(root, channels, class_map);
}

}  // namespace timm
