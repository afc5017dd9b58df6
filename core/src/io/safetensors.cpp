#include "timm/io/safetensors.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <numeric>
#include <optional>
#include <set>
#include <span>
#include <string_view>

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include "timm/base/error.hpp"
#include "timm/io/atomic_file.hpp"

namespace timm {
namespace {

static_assert(std::endian::native == std::endian::little, "safetensors data is little-endian");

// The reference implementation's limit; it also bounds what a corrupt length
// field can make us allocate.
constexpr uint64_t kMaxSafetensorsHeaderBytes = 100'000'000;
constexpr const char* kMetadataKey = "__metadata__";

struct DtypeInfo {
  std::string_view name;
  at::ScalarType scalar_type;
  uint64_t size;
};

constexpr DtypeInfo kDtypes[] = {
    {"F64", at::kDouble, 8},
    {"F32", at::kFloat, 4},
    {"F16", at::kHalf, 2},
    {"BF16", at::kBFloat16, 2},
    {"F8_E4M3", at::kFloat8_e4m3fn, 1},
    {"F8_E5M2", at::kFloat8_e5m2, 1},
    {"I64", at::kLong, 8},
    {"I32", at::kInt, 4},
    {"I16", at::kShort, 2},
    {"I8", at::kChar, 1},
    {"U64", at::kUInt64, 8},
    {"U32", at::kUInt32, 4},
    {"U16", at::kUInt16, 2},
    {"U8", at::kByte, 1},
    {"BOOL", at::kBool, 1},
};

const DtypeInfo* find_dtype(std::string_view name) {
  for (const auto& d : kDtypes) {
    if (d.name == name) return &d;
  }
  return nullptr;
}

const DtypeInfo* find_dtype(at::ScalarType type) {
  for (const auto& d : kDtypes) {
    if (d.scalar_type == type) return &d;
  }
  return nullptr;
}

std::string known_dtypes() {
  std::string out;
  for (const auto& d : kDtypes) {
    if (!out.empty()) out += ' ';
    out += d.name;
  }
  return out;
}

std::string system_error(const std::string& what) { return what + ": " + std::strerror(errno); }

// ---------------------------------------------------------------- reading

// A read-only mapping of a whole file, unmapped on destruction.
class MappedFile {
 public:
  explicit MappedFile(const std::filesystem::path& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw Error(system_error("safetensors file '" + path.string() + "': cannot open"));
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
      ::close(fd);
      throw Error(system_error("safetensors file '" + path.string() + "': cannot stat"));
    }
    size_ = static_cast<size_t>(st.st_size);
    if (size_ > 0) {
      void* data = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
      if (data == MAP_FAILED) {
        ::close(fd);
        throw Error(system_error("safetensors file '" + path.string() + "': cannot map"));
      }
      data_ = static_cast<const std::byte*>(data);
    }
    ::close(fd);
  }
  ~MappedFile() {
    if (data_ != nullptr) ::munmap(const_cast<std::byte*>(data_), size_);
  }
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  std::span<const std::byte> bytes() const { return {data_, size_}; }

 private:
  const std::byte* data_ = nullptr;
  size_t size_ = 0;
};

// One validated header entry.
struct Entry {
  std::string name;
  const DtypeInfo* dtype = nullptr;
  std::vector<int64_t> shape;
  uint64_t begin = 0;
  uint64_t end = 0;
};

// Throws timm::Error prefixed with the file's name.
class Reader {
 public:
  explicit Reader(const std::filesystem::path& path) : path_(path.string()) {}

  [[noreturn]] void fail(const std::string& problem) const {
    throw Error("safetensors file '" + path_ + "': " + problem);
  }

  SafetensorsFile read(std::span<const std::byte> file) const {
    const uint64_t header_size = read_header_size(file);
    const auto header_bytes = file.subspan(8, header_size);
    const auto data = file.subspan(8 + header_size);
    const nlohmann::ordered_json header = parse_header(header_bytes);

    SafetensorsFile result;
    std::vector<Entry> entries;
    for (const auto& [key, value] : header.items()) {
      if (key == kMetadataKey) {
        result.metadata = parse_metadata(value);
      } else {
        entries.push_back(parse_entry(key, value, data.size()));
      }
    }
    check_coverage(entries, data.size());
    for (const auto& entry : entries) result.tensors.emplace_back(entry.name, copy_tensor(entry, data));
    return result;
  }

 private:
  uint64_t read_header_size(std::span<const std::byte> file) const {
    if (file.size() < 8) {
      fail("file is " + std::to_string(file.size()) + " bytes, shorter than the 8-byte header length");
    }
    uint64_t header_size = 0;
    std::memcpy(&header_size, file.data(), 8);
    if (header_size > kMaxSafetensorsHeaderBytes) {
      fail("header length " + std::to_string(header_size) + " exceeds the limit of " +
           std::to_string(kMaxSafetensorsHeaderBytes) + " bytes");
    }
    if (header_size > file.size() - 8) {
      fail("header length " + std::to_string(header_size) + " runs past the end of the file (" +
           std::to_string(file.size()) + " bytes; truncated?)");
    }
    return header_size;
  }

  nlohmann::ordered_json parse_header(std::span<const std::byte> bytes) const {
    const std::string_view text(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    // nlohmann keeps the last of duplicate keys silently; the format forbids them.
    std::set<std::string> top_level_keys;
    std::optional<std::string> duplicate;
    auto track_keys = [&](int depth, nlohmann::ordered_json::parse_event_t event, nlohmann::ordered_json& parsed) {
      if (depth == 1 && event == nlohmann::ordered_json::parse_event_t::key && parsed.is_string()) {
        const auto key = parsed.get<std::string>();
        if (!top_level_keys.insert(key).second && !duplicate) duplicate = key;
      }
      return true;
    };
    nlohmann::ordered_json header;
    try {
      header = nlohmann::ordered_json::parse(text.begin(), text.end(), track_keys);
    } catch (const nlohmann::json::exception& e) {
      fail(std::string("header is not valid JSON: ") + e.what());
    }
    if (!header.is_object()) fail("header is not a JSON object");
    if (duplicate) fail("header has the key '" + *duplicate + "' twice");
    return header;
  }

  std::map<std::string, std::string> parse_metadata(const nlohmann::ordered_json& value) const {
    if (!value.is_object()) fail("'__metadata__' is not an object of strings");
    std::map<std::string, std::string> metadata;
    for (const auto& [key, item] : value.items()) {
      if (!item.is_string()) fail("'__metadata__' entry '" + key + "' is not a string");
      metadata[key] = item.get<std::string>();
    }
    return metadata;
  }

  Entry parse_entry(const std::string& name, const nlohmann::ordered_json& value, uint64_t data_size) const {
    const std::string where = "tensor '" + name + "': ";
    if (!value.is_object()) fail(where + "entry is not an object");
    for (const char* field : {"dtype", "shape", "data_offsets"}) {
      if (!value.contains(field)) fail(where + "missing '" + field + "'");
    }
    Entry entry;
    entry.name = name;
    const auto& dtype = value["dtype"];
    if (!dtype.is_string()) fail(where + "'dtype' is not a string");
    entry.dtype = find_dtype(dtype.get<std::string>());
    if (entry.dtype == nullptr) {
      fail(where + "unknown dtype '" + dtype.get<std::string>() + "' (expected one of " + known_dtypes() + ")");
    }
    uint64_t numel = 1;
    const auto& shape = value["shape"];
    if (!shape.is_array()) fail(where + "'shape' is not an array");
    for (const auto& dim : shape) {
      if (!dim.is_number_unsigned()) fail(where + "'shape' has an entry that is not a non-negative integer");
      const uint64_t size = dim.get<uint64_t>();
      if (size > static_cast<uint64_t>(INT64_MAX) || __builtin_mul_overflow(numel, size, &numel)) {
        fail(where + "shape " + shape.dump() + " is too large");
      }
      entry.shape.push_back(static_cast<int64_t>(size));
    }
    const auto& offsets = value["data_offsets"];
    if (!offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_unsigned() ||
        !offsets[1].is_number_unsigned()) {
      fail(where + "'data_offsets' is not a pair of non-negative integers");
    }
    entry.begin = offsets[0].get<uint64_t>();
    entry.end = offsets[1].get<uint64_t>();
    const std::string span = "[" + std::to_string(entry.begin) + ", " + std::to_string(entry.end) + ")";
    if (entry.begin > entry.end) fail(where + "data_offsets " + span + " end before they begin");
    if (entry.end > data_size) {
      fail(where + "data_offsets " + span + " run past the end of the data (" + std::to_string(data_size) + " bytes)");
    }
    uint64_t nbytes = 0;
    if (__builtin_mul_overflow(numel, entry.dtype->size, &nbytes) || nbytes != entry.end - entry.begin) {
      fail(where + "shape " + shape.dump() + " of " + std::string(entry.dtype->name) + " needs " +
           std::to_string(numel * entry.dtype->size) + " bytes but data_offsets " + span + " span " +
           std::to_string(entry.end - entry.begin));
    }
    return entry;
  }

  // The tensors must tile the data section exactly: no gap, no overlap, no
  // trailing bytes (the reference validator's rule).
  void check_coverage(const std::vector<Entry>& entries, uint64_t data_size) const {
    std::vector<const Entry*> by_offset;
    for (const auto& e : entries) by_offset.push_back(&e);
    std::stable_sort(by_offset.begin(), by_offset.end(), [](const Entry* a, const Entry* b) {
      return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
    });
    uint64_t covered = 0;
    const Entry* previous = nullptr;
    for (const Entry* e : by_offset) {
      if (e->begin < covered) {
        fail("tensor '" + e->name + "' (bytes [" + std::to_string(e->begin) + ", " + std::to_string(e->end) +
             ")) overlaps tensor '" + previous->name + "' (bytes [" + std::to_string(previous->begin) + ", " +
             std::to_string(previous->end) + "))");
      }
      if (e->begin > covered) {
        fail("bytes [" + std::to_string(covered) + ", " + std::to_string(e->begin) +
             ") of the data belong to no tensor (a gap before tensor '" + e->name + "')");
      }
      covered = e->end;
      previous = e;
    }
    if (covered != data_size) {
      fail(std::to_string(data_size - covered) + " bytes at the end of the data belong to no tensor");
    }
  }

  at::Tensor copy_tensor(const Entry& entry, std::span<const std::byte> data) const {
    at::Tensor tensor = at::empty(entry.shape, at::TensorOptions().dtype(entry.dtype->scalar_type));
    const auto bytes = data.subspan(entry.begin, entry.end - entry.begin);
    if (entry.dtype->scalar_type == at::kBool) {
      const bool valid = std::all_of(bytes.begin(), bytes.end(), [](std::byte b) { return b <= std::byte{1}; });
      if (!valid) fail("tensor '" + entry.name + "': BOOL data has a byte other than 0 or 1");
    }
    if (!bytes.empty()) std::memcpy(tensor.data_ptr(), bytes.data(), bytes.size());
    return tensor;
  }

  std::string path_;
};

// ---------------------------------------------------------------- writing

// A temp file beside the target: removed on destruction unless committed by
// renaming it over the target.
struct Prepared {
  std::string name;
  const DtypeInfo* dtype;
  at::Tensor data;  // CPU, contiguous
};

std::vector<Prepared> prepare_tensors(const std::filesystem::path& path, const NamedTensors& tensors) {
  auto fail = [&](const std::string& problem) {
    throw Error("cannot write safetensors file '" + path.string() + "': " + problem);
  };
  std::set<std::string> names;
  std::vector<Prepared> prepared;
  for (const auto& [name, tensor] : tensors) {
    if (name.empty()) fail("a tensor has an empty name");
    if (name == kMetadataKey) fail("'__metadata__' is reserved and cannot name a tensor");
    if (!names.insert(name).second) fail("tensor '" + name + "' is given twice");
    if (!tensor.defined()) fail("tensor '" + name + "' is undefined");
    const DtypeInfo* dtype = find_dtype(tensor.scalar_type());
    if (dtype == nullptr) {
      fail("tensor '" + name + "' has dtype " + std::string(c10::toString(tensor.scalar_type())) +
           ", which safetensors cannot store (supported: " + known_dtypes() + ")");
    }
    prepared.push_back({name, dtype, tensor.detach().to(at::kCPU).contiguous()});
  }
  std::stable_sort(prepared.begin(), prepared.end(),
                   [](const Prepared& a, const Prepared& b) { return a.dtype->size > b.dtype->size; });
  return prepared;
}

std::string make_header(const std::vector<Prepared>& tensors, const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header[kMetadataKey] = metadata;
  uint64_t offset = 0;
  for (const auto& t : tensors) {
    const uint64_t nbytes = static_cast<uint64_t>(t.data.numel()) * t.dtype->size;
    header[t.name] = {
        {"dtype", t.dtype->name}, {"shape", t.data.sizes().vec()}, {"data_offsets", {offset, offset + nbytes}}};
    offset += nbytes;
  }
  std::string text = header.dump();
  // Padded to 8 bytes so the data section, and so every tensor, is aligned.
  text.append((8 - text.size() % 8) % 8, ' ');
  return text;
}

}  // namespace

SafetensorsFile read_safetensors_file(const std::filesystem::path& path) {
  const MappedFile file(path);
  return Reader(path).read(file.bytes());
}

NamedTensors read_safetensors(const std::filesystem::path& path) { return read_safetensors_file(path).tensors; }

void write_safetensors(const std::filesystem::path& path, const NamedTensors& tensors,
                       const std::map<std::string, std::string>& metadata) {
  const std::vector<Prepared> prepared = prepare_tensors(path, tensors);
  const std::string header = make_header(prepared, metadata);
  const uint64_t header_size = header.size();
  AtomicFile file(path, "safetensors file");
  file.write(&header_size, sizeof(header_size));
  file.write(header.data(), header.size());
  for (const auto& t : prepared) file.write(t.data.data_ptr(), static_cast<size_t>(t.data.numel()) * t.dtype->size);
  file.commit();
}

}  // namespace timm
