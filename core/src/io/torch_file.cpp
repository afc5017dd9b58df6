#include "timm/io/torch_file.hpp"

#include <cstdint>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <string_view>

#include <ATen/ATen.h>
#include <caffe2/serialize/inline_container.h>

#include "timm/base/error.hpp"

namespace timm {
namespace {

// A Python value as the pickle builds it. Only what checkpoints contain has a
// kind of its own; instances of other classes are kObject (class name, the
// arguments it was built from, its BUILD state) and are never interpreted.
struct PyValue;
using PyRef = std::shared_ptr<PyValue>;

struct PyValue {
  enum class Kind { kNone, kBool, kInt, kFloat, kStr, kBytes, kTuple, kList, kDict, kTensor, kGlobal, kObject, kMark };
  Kind kind = Kind::kNone;
  int64_t i = 0;  // bool, int
  double f = 0.0;
  std::string s;                                 // str, bytes, global / object class "module.name"
  std::vector<PyRef> items;                      // tuple, list, object arguments
  std::vector<std::pair<PyRef, PyRef>> entries;  // dict
  at::Tensor tensor;
  PyRef state;  // object: BUILD state
};

PyRef make(PyValue::Kind kind) {
  auto v = std::make_shared<PyValue>();
  v->kind = kind;
  return v;
}

PyRef make_int(int64_t i) {
  auto v = make(PyValue::Kind::kInt);
  v->i = i;
  return v;
}

PyRef make_str(PyValue::Kind kind, std::string s) {
  auto v = make(kind);
  v->s = std::move(s);
  return v;
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

// Executes the opcodes of one pickle (protocols 2 to 5, as torch.save
// writes) against the zip archive's storages.
class Unpickler {
 public:
  Unpickler(std::string_view data, caffe2::serialize::PyTorchStreamReader& archive, std::string file)
      : data_(data), archive_(archive), file_(std::move(file)) {}

  PyRef run() {
    while (true) {
      const size_t at = pos_;
      const auto op = static_cast<uint8_t>(read(1)[0]);
      if (op == '.') break;  // STOP
      step(op, at);
    }
    if (stack_.size() != 1) fail("pickle ends with " + std::to_string(stack_.size()) + " values on the stack");
    return stack_.back();
  }

 private:
  [[noreturn]] void fail(const std::string& problem) const {
    throw Error("torch file " + in_quotes(file_) + ": " + problem);
  }

  std::string_view read(size_t n) {
    if (n > data_.size() - pos_)
      fail("data.pkl is truncated (wanted " + std::to_string(n) + " bytes at offset " + std::to_string(pos_) + ")");
    std::string_view out = data_.substr(pos_, n);
    pos_ += n;
    return out;
  }

  template <typename T>
  T read_le() {
    T value;
    std::memcpy(&value, read(sizeof(T)).data(), sizeof(T));
    return value;  // pickles are little-endian, as is every machine we build for
  }

  std::string read_line() {
    const size_t end = data_.find('\n', pos_);
    if (end == std::string_view::npos) fail("data.pkl is truncated (unterminated line)");
    std::string out(data_.substr(pos_, end - pos_));
    pos_ = end + 1;
    return out;
  }

  PyRef pop() {
    if (stack_.empty()) fail("malformed pickle: stack underflow at offset " + std::to_string(pos_));
    PyRef v = stack_.back();
    stack_.pop_back();
    return v;
  }

  PyRef& top() {
    if (stack_.empty()) fail("malformed pickle: stack underflow at offset " + std::to_string(pos_));
    return stack_.back();
  }

  // The values above the topmost MARK, which is removed.
  std::vector<PyRef> pop_to_mark() {
    if (marks_.empty()) fail("malformed pickle: no MARK at offset " + std::to_string(pos_));
    const size_t mark = marks_.back();
    marks_.pop_back();
    if (mark > stack_.size()) fail("malformed pickle: MARK above the stack at offset " + std::to_string(pos_));
    std::vector<PyRef> items(stack_.begin() + static_cast<std::ptrdiff_t>(mark), stack_.end());
    stack_.resize(mark);
    return items;
  }

  PyRef tuple(std::vector<PyRef> items) {
    auto v = make(PyValue::Kind::kTuple);
    v->items = std::move(items);
    return v;
  }

  PyRef memo_get(int64_t index) {
    auto it = memo_.find(index);
    if (it == memo_.end()) fail("malformed pickle: memo entry " + std::to_string(index) + " read before it was set");
    return it->second;
  }

  void set_items(PyRef& dict, const std::vector<PyRef>& kv) {
    if (kv.size() % 2 != 0) fail("malformed pickle: SETITEMS with an odd number of values");
    if (dict->kind != PyValue::Kind::kDict) fail("malformed pickle: SETITEM(S) on a value that is not a dict");
    for (size_t k = 0; k < kv.size(); k += 2) dict->entries.emplace_back(kv[k], kv[k + 1]);
  }

  void append_items(PyRef& list, const std::vector<PyRef>& items) {
    // A set (ADDITEMS) is read as a list: nothing a loader needs is a set.
    if (list->kind != PyValue::Kind::kList) fail("malformed pickle: APPEND(S) on a value that is not a list");
    list->items.insert(list->items.end(), items.begin(), items.end());
  }

  void step(uint8_t op, size_t at) {
    using K = PyValue::Kind;
    switch (op) {
      case 0x80:
        read(1);
        break;  // PROTO
      case 0x95:
        read_le<uint64_t>();
        break;  // FRAME: framing is transparent to a reader of the whole pickle
      case '(':
        marks_.push_back(stack_.size());
        break;
      case '0':
        pop();
        break;
      case '1':
        pop_to_mark();
        break;
      case '2':
        stack_.push_back(top());
        break;
      case 'N':
        stack_.push_back(make(K::kNone));
        break;
      case 0x88:
      case 0x89: {
        auto v = make(K::kBool);
        v->i = op == 0x88;
        stack_.push_back(v);
        break;
      }
      case 'J':
        stack_.push_back(make_int(read_le<int32_t>()));
        break;
      case 'K':
        stack_.push_back(make_int(read_le<uint8_t>()));
        break;
      case 'M':
        stack_.push_back(make_int(read_le<uint16_t>()));
        break;
      case 'I': {
        const std::string line = read_line();
        if (line == "01" || line == "00") {
          auto v = make(K::kBool);
          v->i = line == "01";
          stack_.push_back(v);
        } else {
          stack_.push_back(make_int(parse_int(line)));
        }
        break;
      }
      case 0x8a:
        stack_.push_back(make_int(read_long(read_le<uint8_t>())));
        break;  // LONG1
      case 0x8b:
        stack_.push_back(make_int(read_long(read_le<uint32_t>())));
        break;  // LONG4
      case 'G': {
        const uint64_t bits = read_le<uint64_t>();  // big-endian IEEE double
        uint64_t swapped = __builtin_bswap64(bits);
        auto v = make(K::kFloat);
        std::memcpy(&v->f, &swapped, sizeof(double));
        stack_.push_back(v);
        break;
      }
      case 'X':
        stack_.push_back(make_str(K::kStr, std::string(read(read_le<uint32_t>()))));
        break;
      case 0x8c:
        stack_.push_back(make_str(K::kStr, std::string(read(read_le<uint8_t>()))));
        break;
      case 0x8d:
        stack_.push_back(make_str(K::kStr, std::string(read(read_le<uint64_t>()))));
        break;
      case 'T':
        stack_.push_back(make_str(K::kStr, std::string(read(read_le<uint32_t>()))));
        break;
      case 'U':
        stack_.push_back(make_str(K::kStr, std::string(read(read_le<uint8_t>()))));
        break;
      case 'B':
        stack_.push_back(make_str(K::kBytes, std::string(read(read_le<uint32_t>()))));
        break;
      case 'C':
        stack_.push_back(make_str(K::kBytes, std::string(read(read_le<uint8_t>()))));
        break;
      case 0x8e:
        stack_.push_back(make_str(K::kBytes, std::string(read(read_le<uint64_t>()))));
        break;
      case ')':
        stack_.push_back(tuple({}));
        break;
      case 't':
        stack_.push_back(tuple(pop_to_mark()));
        break;
      case 0x85:
      case 0x86:
      case 0x87: {
        const size_t n = op - 0x84u;
        if (stack_.size() < n) fail("malformed pickle: TUPLE" + std::to_string(n) + " on a short stack");
        std::vector<PyRef> items(stack_.end() - static_cast<std::ptrdiff_t>(n), stack_.end());
        stack_.resize(stack_.size() - n);
        stack_.push_back(tuple(std::move(items)));
        break;
      }
      case ']':
      case 0x8f:
        stack_.push_back(make(K::kList));
        break;  // EMPTY_LIST, EMPTY_SET
      case 'l':
      case 0x91: {  // LIST, FROZENSET
        auto v = make(K::kList);
        v->items = pop_to_mark();
        stack_.push_back(v);
        break;
      }
      case 'a': {
        PyRef item = pop();
        append_items(top(), {item});
        break;
      }
      case 'e':
      case 0x90: {  // APPENDS, ADDITEMS
        const auto items = pop_to_mark();
        append_items(top(), items);
        break;
      }
      case '}':
        stack_.push_back(make(K::kDict));
        break;
      case 'd': {
        auto v = make(K::kDict);
        set_items(v, pop_to_mark());
        stack_.push_back(v);
        break;
      }
      case 's': {
        PyRef value = pop();
        PyRef key = pop();
        set_items(top(), {key, value});
        break;
      }
      case 'u': {
        const auto kv = pop_to_mark();
        set_items(top(), kv);
        break;
      }
      case 'c': {
        std::string module = read_line();
        std::string name = read_line();
        stack_.push_back(make_str(K::kGlobal, module + "." + name));
        break;
      }
      case 0x93: {  // STACK_GLOBAL
        PyRef name = pop();
        PyRef module = pop();
        if (name->kind != K::kStr || module->kind != K::kStr) fail("malformed pickle: STACK_GLOBAL without names");
        stack_.push_back(make_str(K::kGlobal, module->s + "." + name->s));
        break;
      }
      case 'R': {
        PyRef args = pop();
        PyRef callable = pop();
        stack_.push_back(call(callable, args));
        break;
      }
      case 0x81: {  // NEWOBJ: cls.__new__(cls, *args)
        PyRef args = pop();
        PyRef cls = pop();
        stack_.push_back(call(cls, args));
        break;
      }
      case 0x92: {  // NEWOBJ_EX: cls, args, kwargs
        pop();
        PyRef args = pop();
        PyRef cls = pop();
        stack_.push_back(call(cls, args));
        break;
      }
      case 'b': {
        PyRef state = pop();
        top()->state = state;  // an OrderedDict's _metadata, a Namespace's fields: kept, never interpreted
        break;
      }
      case 'Q':
        stack_.push_back(persistent_load(pop()));
        break;
      case 'p':
        memo_[parse_int(read_line())] = top();
        break;
      case 'q':
        memo_[read_le<uint8_t>()] = top();
        break;
      case 'r':
        memo_[read_le<uint32_t>()] = top();
        break;
      case 0x94:
        memo_[static_cast<int64_t>(memo_.size())] = top();
        break;  // MEMOIZE
      case 'g':
        stack_.push_back(memo_get(parse_int(read_line())));
        break;
      case 'h':
        stack_.push_back(memo_get(read_le<uint8_t>()));
        break;
      case 'j':
        stack_.push_back(memo_get(read_le<uint32_t>()));
        break;
      default: {
        char hex[8];
        std::snprintf(hex, sizeof(hex), "0x%02x", op);
        fail(std::string("unsupported pickle opcode ") + hex + " at offset " + std::to_string(at) +
             " (expected a torch.save file)");
      }
    }
  }

  int64_t parse_int(const std::string& text) {
    try {
      size_t used = 0;
      const int64_t v = std::stoll(text, &used);
      if (used == text.size() || (used + 1 == text.size() && text.back() == 'L')) return v;
    } catch (const std::exception&) {
    }
    fail("malformed pickle: bad integer " + in_quotes(text));
  }

  int64_t read_long(uint64_t n) {
    if (n > 8) {
      read(n);  // an integer beyond 64 bits: nothing a loader needs; keep going
      return 0;
    }
    const std::string_view bytes = read(n);
    uint64_t v = 0;
    for (size_t k = 0; k < n; ++k) v |= static_cast<uint64_t>(static_cast<uint8_t>(bytes[k])) << (8 * k);
    if (n > 0 && n < 8 && (static_cast<uint8_t>(bytes[n - 1]) & 0x80)) v |= ~uint64_t{0} << (8 * n);  // sign
    return static_cast<int64_t>(v);
  }

  // The few callables a checkpoint needs; everything else becomes an opaque object.
  PyRef call(const PyRef& callable, const PyRef& args) {
    using K = PyValue::Kind;
    if (callable->kind != K::kGlobal) fail("malformed pickle: call of a value that is not a global");
    if (args->kind != K::kTuple) fail("malformed pickle: call of " + callable->s + " without an argument tuple");
    const std::string& name = callable->s;
    if (name == "collections.OrderedDict" || name == "builtins.dict") return make(K::kDict);
    if (name == "torch._utils._rebuild_tensor_v2" || name == "torch._utils._rebuild_tensor") {
      return rebuild_tensor(args->items);
    }
    if (name == "torch._utils._rebuild_parameter" || name == "torch._utils._rebuild_parameter_with_state") {
      if (args->items.empty() || args->items[0]->kind != K::kTensor) fail("malformed " + name + " call");
      return args->items[0];
    }
    auto object = make(K::kObject);
    object->s = name;
    object->items = args->items;
    return object;
  }

  std::vector<int64_t> int_tuple(const PyRef& value, const char* what) {
    if (value->kind != PyValue::Kind::kTuple) fail(std::string("malformed tensor: ") + what + " is not a tuple");
    std::vector<int64_t> out;
    for (const auto& item : value->items) {
      if (item->kind != PyValue::Kind::kInt) fail(std::string("malformed tensor: ") + what + " is not all integers");
      out.push_back(item->i);
    }
    return out;
  }

  // _rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad, backward_hooks[, metadata])
  PyRef rebuild_tensor(const std::vector<PyRef>& args) {
    if (args.size() < 4 || args[0]->kind != PyValue::Kind::kTensor || args[1]->kind != PyValue::Kind::kInt) {
      fail("malformed _rebuild_tensor_v2 call");
    }
    const at::Tensor& storage = args[0]->tensor;
    const int64_t offset = args[1]->i;
    const auto size = int_tuple(args[2], "size");
    const auto stride = int_tuple(args[3], "stride");
    if (size.size() != stride.size()) fail("malformed tensor: size and stride differ in length");
    // The furthest element the view reaches must lie inside the storage.
    int64_t last = offset;
    bool empty = false;
    for (size_t d = 0; d < size.size(); ++d) {
      if (size[d] < 0 || stride[d] < 0) fail("malformed tensor: negative size or stride");
      if (size[d] == 0) empty = true;
      int64_t reach = 0;
      if (size[d] > 0 &&
          (__builtin_mul_overflow(size[d] - 1, stride[d], &reach) || __builtin_add_overflow(last, reach, &last))) {
        fail("malformed tensor: size and stride overflow");
      }
    }
    if (offset < 0 || (!empty && last >= storage.numel())) {
      fail("tensor view (offset " + std::to_string(offset) + ", last element " + std::to_string(last) +
           ") lies outside its storage of " + std::to_string(storage.numel()) + " elements");
    }
    auto v = make(PyValue::Kind::kTensor);
    v->tensor = empty ? at::empty(size, storage.options()) : storage.as_strided(size, stride, offset);
    return v;
  }

  // ('storage', <torch.XxxStorage>, key, location, numel): the raw bytes of
  // "data/<key>" as a 1-D tensor of that dtype, read once per key.
  PyRef persistent_load(const PyRef& pid) {
    using K = PyValue::Kind;
    if (pid->kind != K::kTuple || pid->items.size() < 5 || pid->items[0]->kind != K::kStr ||
        pid->items[0]->s != "storage" || pid->items[1]->kind != K::kGlobal || pid->items[2]->kind != K::kStr ||
        pid->items[4]->kind != K::kInt) {
      fail("unsupported persistent id (expected a torch storage reference)");
    }
    const std::string& type = pid->items[1]->s;
    const auto dtype = storage_dtype(type);
    if (!dtype) fail("unsupported storage type " + type);
    const std::string& key = pid->items[2]->s;
    auto v = make(K::kTensor);
    auto it = storages_.find(key);
    if (it != storages_.end()) {
      v->tensor = it->second;
      return v;
    }
    const std::string record = "data/" + key;
    if (!archive_.hasRecord(record)) fail("storage " + in_quotes(record) + " is missing from the archive");
    const int64_t numel = pid->items[4]->i;
    const size_t element_size = at::elementSize(*dtype);
    const size_t nbytes = archive_.getRecordSize(record);
    if (numel < 0 || static_cast<size_t>(numel) * element_size > nbytes) {
      fail("storage " + in_quotes(record) + " holds " + std::to_string(nbytes) + " bytes, fewer than " +
           std::to_string(numel) + " elements of " + type);
    }
    at::Tensor storage = at::empty({numel}, at::TensorOptions().dtype(*dtype));
    if (numel > 0) {
      auto [data, size] = archive_.getRecord(record);
      std::memcpy(storage.data_ptr(), data.get(), static_cast<size_t>(numel) * element_size);
    }
    storages_.emplace(key, storage);
    v->tensor = storage;
    return v;
  }

  std::string_view data_;
  size_t pos_ = 0;
  caffe2::serialize::PyTorchStreamReader& archive_;
  std::string file_;
  std::vector<PyRef> stack_;
  std::vector<size_t> marks_;
  std::map<int64_t, PyRef> memo_;
  std::map<std::string, at::Tensor> storages_;
};

// A dict whose keys are all str and values all tensors, as (key, tensor)
// pairs; nullopt for anything else.
std::optional<NamedTensors> as_state_dict(const PyValue& value) {
  if (value.kind != PyValue::Kind::kDict) return std::nullopt;
  NamedTensors out;
  for (const auto& [key, tensor] : value.entries) {
    if (key->kind != PyValue::Kind::kStr || tensor->kind != PyValue::Kind::kTensor) return std::nullopt;
    out.emplace_back(key->s, tensor->tensor);
  }
  return out;
}

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
  std::unique_ptr<caffe2::serialize::PyTorchStreamReader> archive;
  std::string pickle;
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
    pickle.assign(static_cast<const char*>(data.get()), size);
  } catch (const c10::Error& e) {
    throw Error("torch file " + in_quotes(file) + ": cannot read the zip archive: " + e.what_without_backtrace());
  }

  PyRef root;
  try {
    root = Unpickler(pickle, *archive, file).run();
  } catch (const c10::Error& e) {
    throw Error("torch file " + in_quotes(file) + ": " + e.what_without_backtrace());
  }

  TorchFile result;
  result.is_dict = root->kind == PyValue::Kind::kDict;
  if (auto tensors = as_state_dict(*root)) result.tensors = std::move(*tensors);
  if (!result.is_dict) return result;
  for (const auto& [key, value] : root->entries) {
    if (key->kind != PyValue::Kind::kStr) continue;
    result.keys.push_back(key->s);
    if (value->kind == PyValue::Kind::kNone) result.none_keys.push_back(key->s);
    if (auto tensors = as_state_dict(*value)) result.state_dicts.emplace_back(key->s, std::move(*tensors));
  }
  return result;
}

}  // namespace timm
