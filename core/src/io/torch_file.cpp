#include "timm/io/torch_file.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <new>
#include <optional>
#include <string_view>

#include <ATen/ATen.h>
#include <caffe2/serialize/inline_container.h>

#include "timm/base/error.hpp"
#include "timm/io/pickle.hpp"

namespace timm {
namespace {

// Limits on what a checkpoint's pickle may build besides the unpickler's own
// (timm/io/pickle.hpp: nesting, stack, memo, names). Each is far beyond what
// torch.save writes; they exist so that no size follows from the file alone.
// Dimensions of a tensor view; torch's kernels stop at 25.
constexpr size_t kMaxDims = 64;
// The entries may declare in all at most this many times the file's size:
// torch.save writes them uncompressed (a factor of 1), and deflate gains
// little on weights. More would be a zip bomb.
constexpr uint64_t kMaxExpansion = 4;
// Deflate cannot expand by more than this (RFC 1951: a 258-byte match in
// two bits, 1032:1); a compressed entry declaring more lies about its size.
constexpr uint64_t kMaxDeflateRatio = 1032;

using pickle::Ref;
using PyValue = pickle::Value;

// What a checkpoint's values hold besides plain Python values: a tensor
// (torch._utils._rebuild_tensor_v2) and a storage (a persistent id), each as
// the payload of a kObject. Instances of other classes are kObjects without
// a payload (their class name only: their arguments and BUILD state are
// dropped, nothing reads them).
struct TensorPayload {
  at::Tensor tensor;
};
struct StoragePayload {
  at::Tensor tensor;  // 1-D
};

const at::Tensor* tensor_of(const PyValue& value) {
  const auto* p = std::any_cast<TensorPayload>(&value.payload);
  return value.kind == PyValue::Kind::kObject && p != nullptr ? &p->tensor : nullptr;
}

const at::Tensor* storage_of(const PyValue& value) {
  const auto* p = std::any_cast<StoragePayload>(&value.payload);
  return value.kind == PyValue::Kind::kObject && p != nullptr ? &p->tensor : nullptr;
}

struct StorageType {
  std::string_view name;
  at::ScalarType dtype;
};

constexpr StorageType kStorageTypes[] = {
    {"torch.DoubleStorage", at::kDouble},     {"torch.FloatStorage", at::kFloat}, {"torch.HalfStorage", at::kHalf},
    {"torch.BFloat16Storage", at::kBFloat16}, {"torch.LongStorage", at::kLong},   {"torch.IntStorage", at::kInt},
    {"torch.ShortStorage", at::kShort},       {"torch.CharStorage", at::kChar},   {"torch.ByteStorage", at::kByte},
    {"torch.BoolStorage", at::kBool},
};

std::optional<at::ScalarType> storage_dtype(std::string_view name) {
  for (const auto& t : kStorageTypes) {
    if (t.name == name) return t.dtype;
  }
  return std::nullopt;
}

// The globals of a torch.save pickle (protocols 2 to 5): dicts, tensors and
// the zip archive's storages; any other class is an opaque object.
class TorchHooks final : public pickle::Hooks {
 public:
  // `max_bytes`: the most bytes the file's entries may declare, which bounds a tensor view too.
  TorchHooks(caffe2::serialize::PyTorchStreamReader& archive, uint64_t max_bytes)
      : archive_(archive), max_bytes_(max_bytes) {}

  // The few callables a checkpoint needs; everything else becomes an opaque object.
  Ref call(pickle::Unpickler& u, const Ref& callable, const Ref& args) override {
    using K = PyValue::Kind;
    const std::string& name = callable->s;
    if (name == "collections.OrderedDict" || name == "builtins.dict") return pickle::make(K::kDict);
    if (name == "torch._utils._rebuild_tensor_v2" || name == "torch._utils._rebuild_tensor") {
      return rebuild_tensor(u, args->items);
    }
    if (name == "torch._utils._rebuild_parameter" || name == "torch._utils._rebuild_parameter_with_state") {
      if (args->items.empty() || tensor_of(*args->items[0]) == nullptr) u.fail("malformed " + name + " call");
      return args->items[0];
    }
    return pickle::make_str(K::kObject, name);
  }

  // ('storage', <torch.XxxStorage>, key, location, numel): the raw bytes of
  // "data/<key>" as a 1-D tensor of that dtype, read once per key.
  Ref persistent_load(pickle::Unpickler& u, const Ref& pid) override {
    using K = PyValue::Kind;
    if (pid->kind != K::kTuple || pid->items.size() < 5 || pid->items[0]->kind != K::kStr ||
        pid->items[0]->s != "storage" || pid->items[1]->kind != K::kGlobal || pid->items[2]->kind != K::kStr ||
        pid->items[4]->kind != K::kInt) {
      u.fail("unsupported persistent id (expected a torch storage reference)");
    }
    const std::string& type = pid->items[1]->s;
    const auto dtype = storage_dtype(type);
    if (!dtype) u.fail("unsupported storage type " + type);
    const std::string& key = pid->items[2]->s;
    if (key.size() > pickle::kMaxName) {
      u.fail("malformed pickle: a storage key of " + std::to_string(key.size()) + " bytes");
    }
    auto v = pickle::make_str(K::kObject, "torch.storage");
    auto it = storages_.find(key);
    if (it != storages_.end()) {
      v->payload = StoragePayload{it->second};
      return v;
    }
    const std::string record = "data/" + key;
    if (!archive_.hasRecord(record)) u.fail("storage " + in_quotes(record) + " is missing from the archive");
    const int64_t numel = pid->items[4]->i;
    const size_t element_size = at::elementSize(*dtype);
    const size_t nbytes = archive_.getRecordSize(record);
    size_t needed = 0;
    if (numel < 0 || __builtin_mul_overflow(static_cast<size_t>(numel), element_size, &needed) || needed > nbytes) {
      u.fail("storage " + in_quotes(record) + " holds " + std::to_string(nbytes) + " bytes, fewer than " +
             std::to_string(numel) + " elements of " + type);
    }
    at::Tensor storage = at::empty({numel}, at::TensorOptions().dtype(*dtype));
    if (numel > 0) {
      auto [data, size] = archive_.getRecord(record);
      if (size < needed) u.fail("storage " + in_quotes(record) + " is shorter than the archive says");
      std::memcpy(storage.data_ptr(), data.get(), needed);
    }
    storages_.emplace(key, storage);
    v->payload = StoragePayload{storage};
    return v;
  }

 private:
  static std::vector<int64_t> int_tuple(pickle::Unpickler& u, const Ref& value, const char* what) {
    if (value->kind != PyValue::Kind::kTuple) u.fail(std::string("malformed tensor: ") + what + " is not a tuple");
    if (value->items.size() > kMaxDims) {
      u.fail(std::string("malformed tensor: ") + what + " has " + std::to_string(value->items.size()) +
             " dimensions (at most " + std::to_string(kMaxDims) + ")");
    }
    std::vector<int64_t> out;
    for (const auto& item : value->items) {
      if (item->kind != PyValue::Kind::kInt) u.fail(std::string("malformed tensor: ") + what + " is not all integers");
      out.push_back(item->i);
    }
    return out;
  }

  // _rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad, backward_hooks[, metadata])
  Ref rebuild_tensor(pickle::Unpickler& u, const std::vector<Ref>& args) {
    if (args.size() < 4 || storage_of(*args[0]) == nullptr || args[1]->kind != PyValue::Kind::kInt) {
      u.fail("malformed _rebuild_tensor_v2 call");
    }
    const at::Tensor& storage = *storage_of(*args[0]);
    const int64_t offset = args[1]->i;
    const auto size = int_tuple(u, args[2], "size");
    const auto stride = int_tuple(u, args[3], "stride");
    if (size.size() != stride.size()) u.fail("malformed tensor: size and stride differ in length");
    // The furthest element the view reaches must lie inside the storage.
    int64_t last = offset;
    bool empty = false;
    for (size_t d = 0; d < size.size(); ++d) {
      if (size[d] < 0 || stride[d] < 0) u.fail("malformed tensor: negative size or stride");
      if (size[d] == 0) empty = true;
      int64_t reach = 0;
      if (size[d] > 0 &&
          (__builtin_mul_overflow(size[d] - 1, stride[d], &reach) || __builtin_add_overflow(last, reach, &last))) {
        u.fail("malformed tensor: size and stride overflow");
      }
    }
    if (offset < 0 || (!empty && last >= storage.numel())) {
      u.fail("tensor view (offset " + std::to_string(offset) + ", last element " + std::to_string(last) +
             ") lies outside its storage of " + std::to_string(storage.numel()) + " elements");
    }
    // A view may repeat its storage (stride 0, as expand() makes); whoever
    // copies it allocates all its elements, so they too are bounded by the
    // file. Zero sizes are skipped: (0, 2^62, 2^62) still overflows at::empty.
    int64_t nbytes = storage.element_size();
    for (const int64_t n : size) {
      if (__builtin_mul_overflow(nbytes, std::max<int64_t>(n, 1), &nbytes)) {
        u.fail("malformed tensor: its size overflows");
      }
    }
    if (!empty && static_cast<uint64_t>(nbytes) > max_bytes_) {
      u.fail("malformed tensor: a view of " + std::to_string(nbytes) + " bytes, more than the file can describe (" +
             std::to_string(max_bytes_) + ")");
    }
    auto v = pickle::make_str(PyValue::Kind::kObject, "torch.Tensor");
    v->payload = TensorPayload{empty ? at::empty(size, storage.options()) : storage.as_strided(size, stride, offset)};
    return v;
  }

  caffe2::serialize::PyTorchStreamReader& archive_;
  uint64_t max_bytes_;
  std::map<std::string, at::Tensor> storages_;
};

// What the result may copy out of the pickle's values. The memo lets a file
// name one dict (or one long key) under many keys for a few bytes each; a
// checkpoint shares a state_dict under a key or two (model, state_dict).
class CopyBudget {
 public:
  static constexpr size_t kPerPickleByte = 8;

  CopyBudget(const std::string& file, size_t pickle_size)
      : file_(file), left_(kPerPickleByte * pickle_size + (size_t{1} << 20)) {}

  void spend(const std::string& key) {
    const size_t cost = key.size() + sizeof(std::pair<std::string, at::Tensor>);
    if (cost > left_) {
      throw Error("torch file " + in_quotes(file_) + ": malformed pickle: its dicts repeat more than " +
                  std::to_string(kPerPickleByte) + " times its size");
    }
    left_ -= cost;
  }

 private:
  const std::string& file_;
  size_t left_;
};

// A dict whose keys are all str and values all tensors, as (key, tensor)
// pairs; nullopt for anything else.
std::optional<NamedTensors> as_state_dict(const PyValue& value, CopyBudget& budget) {
  if (value.kind != PyValue::Kind::kDict) return std::nullopt;
  NamedTensors out;
  for (const auto& [key, tensor] : value.entries) {
    const at::Tensor* t = tensor_of(*tensor);
    if (key->kind != PyValue::Kind::kStr || t == nullptr) return std::nullopt;
    budget.spend(key->s);
    out.emplace_back(key->s, *t);
  }
  return out;
}

// Reads and checks the central directory of a zip archive before
// PyTorchStreamReader (miniz) sees it: miniz allocates each entry's declared
// size before reading it, the "version" entry already in the reader's
// constructor. Every declared size must be one the file can back: a stored
// entry (torch.save stores every entry) lies inside the file, a deflated one
// claims no more than deflate can expand, and all together claim at most
// kMaxExpansion times the file. Entries that share their bytes (an
// overlapping zip bomb) count once per entry.
class ZipCheck {
 public:
  ZipCheck(const std::string& file, uint64_t file_size) : file_(file), size_(file_size), in_(file, std::ios::binary) {}

  // The most bytes the entries may declare in all.
  uint64_t run() {
    if (!in_) fail("cannot open it");
    const uint64_t tail_size = std::min<uint64_t>(size_, kEndSize + 0xffff);  // the record and its longest comment
    const std::string tail = read_at(size_ - tail_size, tail_size);
    size_t end = std::string::npos;
    for (size_t at = tail.size() >= kEndSize ? tail.size() - kEndSize + 1 : 0; at-- > 0;) {
      if (le(tail, at, 4) == 0x06054b50) {
        end = at;
        break;
      }
    }
    if (end == std::string::npos) fail("not a zip archive (no end of central directory record)");
    uint64_t count = le(tail, end + 10, 2);
    uint64_t dir_size = le(tail, end + 12, 4);
    uint64_t dir_offset = le(tail, end + 16, 4);
    if (count == 0xffff || dir_size == 0xffffffff || dir_offset == 0xffffffff) {
      const uint64_t end_offset = size_ - tail_size + end;
      if (end_offset < 20) fail("zip64 archive without its end of central directory locator");
      const std::string locator = read_at(end_offset - 20, 20);
      if (le(locator, 0, 4) != 0x07064b50) fail("zip64 archive without its end of central directory locator");
      const std::string record = read_at(le(locator, 8, 8), 56);
      if (le(record, 0, 4) != 0x06064b50) fail("zip64 end of central directory record is missing");
      count = le(record, 32, 8);
      dir_size = le(record, 40, 8);
      dir_offset = le(record, 48, 8);
    }
    const std::string dir = read_at(dir_offset, dir_size);
    size_t pos = 0;
    for (uint64_t k = 0; k < count; ++k) pos = check_entry(dir, pos);
    return max_total();
  }

 private:
  static constexpr size_t kEndSize = 22;    // end of central directory record, without its comment
  static constexpr size_t kEntrySize = 46;  // central directory file header, without its name

  [[noreturn]] void fail(const std::string& problem) const {
    throw Error("torch file " + in_quotes(file_) + ": " + problem);
  }

  uint64_t max_total() const { return kMaxExpansion * size_; }

  // A little-endian field; `at + n` lies inside `bytes`.
  static uint64_t le(std::string_view bytes, size_t at, size_t n) {
    uint64_t v = 0;
    for (size_t k = 0; k < n; ++k) v |= static_cast<uint64_t>(static_cast<uint8_t>(bytes[at + k])) << (8 * k);
    return v;
  }

  std::string read_at(uint64_t offset, uint64_t n) {
    if (offset > size_ || n > size_ - offset) {
      fail("truncated zip archive (wanted " + std::to_string(n) + " bytes at offset " + std::to_string(offset) +
           " of " + std::to_string(size_) + ")");
    }
    std::string out(n, '\0');
    in_.seekg(static_cast<std::streamoff>(offset));
    in_.read(out.data(), static_cast<std::streamsize>(n));
    if (!in_) fail("cannot read it");
    return out;
  }

  // Checks the central directory entry at `pos` of `dir`; the position of the next.
  size_t check_entry(const std::string& dir, size_t pos) {
    if (dir.size() < kEntrySize || pos > dir.size() - kEntrySize || le(dir, pos, 4) != 0x02014b50) {
      fail("malformed zip central directory (entry at offset " + std::to_string(pos) + ")");
    }
    const uint64_t method = le(dir, pos + 10, 2);
    uint64_t compressed = le(dir, pos + 20, 4);
    uint64_t size = le(dir, pos + 24, 4);
    const size_t name_size = le(dir, pos + 28, 2);
    const size_t extra_size = le(dir, pos + 30, 2);
    const size_t comment_size = le(dir, pos + 32, 2);
    uint64_t offset = le(dir, pos + 42, 4);
    const size_t next = pos + kEntrySize + name_size + extra_size + comment_size;
    if (next > dir.size()) fail("malformed zip central directory (entry at offset " + std::to_string(pos) + ")");
    const std::string name = dir.substr(pos + kEntrySize, name_size);
    if (size == 0xffffffff || compressed == 0xffffffff || offset == 0xffffffff) {
      zip64_fields(std::string_view(dir).substr(pos + kEntrySize + name_size, extra_size), name, size, compressed,
                   offset);
    }
    const std::string entry = "zip entry " + in_quotes(name);
    if (offset > size_ || compressed > size_ - offset) {
      fail(entry + " (" + std::to_string(compressed) + " bytes at offset " + std::to_string(offset) +
           ") lies outside the file of " + std::to_string(size_) + " bytes");
    }
    if (method == 0 && size != compressed) {
      fail(entry + " is stored uncompressed in " + std::to_string(compressed) + " bytes but declares " +
           std::to_string(size));
    }
    if (method == 8 && size / kMaxDeflateRatio > compressed) {
      fail(entry + " declares " + std::to_string(size) + " bytes, more than deflate can expand its " +
           std::to_string(compressed) + " compressed bytes to");
    }
    if (method != 0 && method != 8) {
      fail(entry + " uses compression method " + std::to_string(method) + " (expected stored or deflated)");
    }
    if (size > max_total() - total_) {
      fail("the zip entries declare more than " + std::to_string(max_total()) + " bytes in all (" +
           std::to_string(kMaxExpansion) + " times the file's size); " + entry + " declares " + std::to_string(size));
    }
    total_ += size;
    return next;
  }

  // The 64-bit sizes and offset that a zip64 entry keeps in its extra field,
  // in this order, each present only where the 32-bit field is 0xffffffff.
  void zip64_fields(std::string_view extra, const std::string& name, uint64_t& size, uint64_t& compressed,
                    uint64_t& offset) {
    const bool need_size = size == 0xffffffff, need_compressed = compressed == 0xffffffff,
               need_offset = offset == 0xffffffff;
    size_t pos = 0;
    while (pos + 4 <= extra.size()) {
      const uint64_t id = le(extra, pos, 2);
      const size_t n = le(extra, pos + 2, 2);
      if (n > extra.size() - pos - 4) break;
      if (id == 0x0001) {
        const size_t wanted = 8 * (need_size + need_compressed + need_offset);
        if (n < wanted) break;
        size_t at = pos + 4;
        for (auto [need, value] :
             {std::pair{need_size, &size}, {need_compressed, &compressed}, {need_offset, &offset}}) {
          if (!need) continue;
          *value = le(extra, at, 8);
          at += 8;
        }
        return;
      }
      pos += 4 + n;
    }
    fail("zip entry " + in_quotes(name) + " lacks its zip64 sizes");
  }

  const std::string& file_;
  uint64_t size_;
  std::ifstream in_;
  uint64_t total_ = 0;
};

bool starts_with_bytes(const std::filesystem::path& path, std::string_view prefix) {
  std::ifstream in(path, std::ios::binary);
  std::string head(prefix.size(), '\0');
  in.read(head.data(), static_cast<std::streamsize>(head.size()));
  return in.gcount() == static_cast<std::streamsize>(prefix.size()) && head == prefix;
}

}  // namespace

TorchFile read_torch_file(const std::filesystem::path& path) {
  const std::string file = path.string();
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) throw Error("torch file " + in_quotes(file) + ": no such file");
  if (!starts_with_bytes(path, "PK\x03\x04")) {
    if (starts_with_bytes(path, "\x80\x02\x8a\x0a")) {
      throw Error("torch file " + in_quotes(file) +
                  ": the legacy (pre-1.6, non-zip) torch.save format is not supported; re-save it with "
                  "torch.save(torch.load(path), path) in Python");
    }
    throw Error("torch file " + in_quotes(file) + ": not a torch.save zip archive (expected a .pth/.pth.tar file)");
  }
  const auto file_size = std::filesystem::file_size(path, ec);
  if (ec) throw Error("torch file " + in_quotes(file) + ": cannot read its size: " + ec.message());
  const uint64_t max_bytes = ZipCheck(file, file_size).run();
  // LibTorch's reader reports through c10::Error, and a few library calls
  // through std exceptions (std::stoull of the version entry): all become
  // this file's error.
  const auto rethrow = [&](const std::string& what) {
    try {
      throw;
    } catch (const Error&) {
      throw;
    } catch (const c10::Error& e) {
      throw Error("torch file " + in_quotes(file) + ": " + what + e.what_without_backtrace());
    } catch (const std::bad_alloc&) {
      throw Error("torch file " + in_quotes(file) + ": " + what + "out of memory");
    } catch (const std::exception& e) {
      throw Error("torch file " + in_quotes(file) + ": " + what + "malformed archive (" + e.what() + " failed)");
    }
  };
  std::unique_ptr<caffe2::serialize::PyTorchStreamReader> archive;
  std::string pickle_bytes;
  try {
    archive = std::make_unique<caffe2::serialize::PyTorchStreamReader>(file);
    if (!archive->hasRecord("data.pkl")) {
      throw Error("torch file " + in_quotes(file) + ": the archive has no data.pkl (a TorchScript module?)");
    }
    if (archive->hasRecord("byteorder")) {
      auto [data, size] = archive->getRecord("byteorder");
      if (std::string_view(static_cast<const char*>(data.get()), size) != "little") {
        throw Error("torch file " + in_quotes(file) + ": big-endian data is not supported");
      }
    }
    auto [data, size] = archive->getRecord("data.pkl");
    pickle_bytes.assign(static_cast<const char*>(data.get()), size);
  } catch (...) {
    rethrow("cannot read the zip archive: ");
  }

  Ref root;
  try {
    TorchHooks hooks(*archive, max_bytes);
    root = pickle::Unpickler(pickle_bytes, hooks, {"torch file " + in_quotes(file), "data.pkl", "a torch.save file"})
               .run();
  } catch (...) {
    rethrow("");
  }

  TorchFile result;
  CopyBudget budget(file, pickle_bytes.size());
  result.is_dict = root->kind == PyValue::Kind::kDict;
  if (auto tensors = as_state_dict(*root, budget)) result.tensors = std::move(*tensors);
  if (!result.is_dict) return result;
  for (const auto& [key, value] : root->entries) {
    if (key->kind != PyValue::Kind::kStr) continue;
    budget.spend(key->s);
    result.keys.push_back(key->s);
    if (value->kind == PyValue::Kind::kNone) result.none_keys.push_back(key->s);
    if (auto tensors = as_state_dict(*value, budget)) result.state_dicts.emplace_back(key->s, std::move(*tensors));
  }
  return result;
}

}  // namespace timm
