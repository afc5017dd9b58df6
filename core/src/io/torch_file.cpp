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

namespace timm {
namespace {

// Limits on what a pickle may build. Each is far beyond what torch.save
// writes; they exist so that no size or depth follows from the file alone.
// Nesting: Python's pickler recurses once per level and stops at CPython's
// default recursion limit of 1000, so no torch.save file is deeper; values
// are freed recursively, so a deeper structure could overflow our stack.
constexpr int kMaxDepth = 1000;
// The stack: Python's pickler batches list and dict items by 1000, so a real
// stack holds about 1000 values per level of nesting.
constexpr size_t kMaxStack = size_t{1} << 22;
// The memo: a checkpoint memoizes about ten values per tensor.
constexpr size_t kMaxMemo = size_t{1} << 22;
// A global's "module.name", and a storage's key (torch writes a decimal
// number): copied per use, and the memo makes a use cost two bytes.
constexpr size_t kMaxName = 1024;
// Dimensions of a tensor view; torch's kernels stop at 25.
constexpr size_t kMaxDims = 64;
// The entries may declare in all at most this many times the file's size:
// torch.save writes them uncompressed (a factor of 1), and deflate gains
// little on weights. More would be a zip bomb.
constexpr uint64_t kMaxExpansion = 4;
// Deflate cannot expand by more than this (RFC 1951: a 258-byte match in
// two bits, 1032:1); a compressed entry declaring more lies about its size.
constexpr uint64_t kMaxDeflateRatio = 1032;

// A Python value as the pickle builds it. Only what checkpoints contain has a
// kind of its own; instances of other classes are kObject (their class name
// only: their arguments and BUILD state are dropped, nothing reads them).
// Containers are only filled before they are put into another one, as
// Python's pickler writes them: so values form no cycles, and `depth` (the
// levels of containers at and below a value) is exact when it is checked.
struct PyValue;
using PyRef = std::shared_ptr<PyValue>;

struct PyValue {
  enum class Kind {
    kNone,
    kBool,
    kInt,
    kFloat,
    kStr,
    kBytes,
    kTuple,
    kList,
    kDict,
    kTensor,
    kStorage,
    kGlobal,
    kObject
  };
  Kind kind = Kind::kNone;
  int64_t i = 0;  // bool, int
  double f = 0.0;
  std::string s;                                 // str, bytes, global / object class "module.name"
  std::vector<PyRef> items;                      // tuple, list
  std::vector<std::pair<PyRef, PyRef>> entries;  // dict
  at::Tensor tensor;                             // tensor, storage (1-D)
  int depth = 1;
  bool contained = false;  // put into a container, hence no longer to be changed
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
  // `max_bytes`: the most bytes the file's entries may declare, which bounds a tensor view too.
  Unpickler(std::string_view data, caffe2::serialize::PyTorchStreamReader& archive, std::string file,
            uint64_t max_bytes)
      : data_(data), archive_(archive), file_(std::move(file)), max_bytes_(max_bytes) {}

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

  void push(PyRef v) {
    if (stack_.size() >= kMaxStack)
      fail("malformed pickle: more than " + std::to_string(kMaxStack) + " values on the stack");
    stack_.push_back(std::move(v));
  }

  void memo_put(int64_t index, const PyRef& v) {
    if (memo_.size() >= kMaxMemo && !memo_.contains(index)) {
      fail("malformed pickle: more than " + std::to_string(kMaxMemo) + " memo entries");
    }
    memo_[index] = v;
  }

  // Puts `child` into `parent`, a container that is being filled.
  void adopt(PyValue& parent, PyValue& child) {
    if (&child == &parent) fail("malformed pickle: a container holds itself (recursive objects are not supported)");
    if (child.depth >= kMaxDepth) {
      // Built by appending: g++ 12 warns falsely (-Warray-bounds) on
      // "literal" + std::string&& once inlined here.
      std::string message = "malformed pickle: nested deeper than ";
      message.append(std::to_string(kMaxDepth)).append(" levels at offset ").append(std::to_string(pos_));
      fail(message);
    }
    child.contained = true;
    parent.depth = std::max(parent.depth, child.depth + 1);
  }

  // A container about to be filled must not be inside another one yet: that
  // would change the depth of containers above it, or close a cycle.
  void check_fillable(const PyValue& container, const char* op) {
    if (container.contained) {
      fail(std::string("malformed pickle: ") + op +
           " on a container already inside another (recursive objects are not supported)");
    }
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

  PyRef container(PyValue::Kind kind, std::vector<PyRef> items) {
    auto v = make(kind);
    for (const auto& item : items) adopt(*v, *item);
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
    check_fillable(*dict, "SETITEM(S)");
    for (const auto& item : kv) adopt(*dict, *item);
    for (size_t k = 0; k < kv.size(); k += 2) dict->entries.emplace_back(kv[k], kv[k + 1]);
  }

  void append_items(PyRef& list, const std::vector<PyRef>& items) {
    // A set (ADDITEMS) is read as a list: nothing a loader needs is a set.
    if (list->kind != PyValue::Kind::kList) fail("malformed pickle: APPEND(S) on a value that is not a list");
    check_fillable(*list, "APPEND(S)");
    for (const auto& item : items) adopt(*list, *item);
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
        if (marks_.size() >= kMaxStack) fail("malformed pickle: more than " + std::to_string(kMaxStack) + " MARKs");
        marks_.push_back(stack_.size());
        break;
      case '0':
        pop();
        break;
      case '1':
        pop_to_mark();
        break;
      case '2':
        push(top());
        break;
      case 'N':
        push(make(K::kNone));
        break;
      case 0x88:
      case 0x89: {
        auto v = make(K::kBool);
        v->i = op == 0x88;
        push(v);
        break;
      }
      case 'J':
        push(make_int(read_le<int32_t>()));
        break;
      case 'K':
        push(make_int(read_le<uint8_t>()));
        break;
      case 'M':
        push(make_int(read_le<uint16_t>()));
        break;
      case 'I': {
        const std::string line = read_line();
        if (line == "01" || line == "00") {
          auto v = make(K::kBool);
          v->i = line == "01";
          push(v);
        } else {
          push(make_int(parse_int(line)));
        }
        break;
      }
      case 0x8a:
        push(make_int(read_long(read_le<uint8_t>())));
        break;  // LONG1
      case 0x8b:
        push(make_int(read_long(read_le<uint32_t>())));
        break;  // LONG4
      case 'G': {
        const uint64_t bits = read_le<uint64_t>();  // big-endian IEEE double
        uint64_t swapped = __builtin_bswap64(bits);
        auto v = make(K::kFloat);
        std::memcpy(&v->f, &swapped, sizeof(double));
        push(v);
        break;
      }
      case 'X':
        push(make_str(K::kStr, std::string(read(read_le<uint32_t>()))));
        break;
      case 0x8c:
        push(make_str(K::kStr, std::string(read(read_le<uint8_t>()))));
        break;
      case 0x8d:
        push(make_str(K::kStr, std::string(read(read_le<uint64_t>()))));
        break;
      case 'T':
        push(make_str(K::kStr, std::string(read(read_le<uint32_t>()))));
        break;
      case 'U':
        push(make_str(K::kStr, std::string(read(read_le<uint8_t>()))));
        break;
      case 'B':
        push(make_str(K::kBytes, std::string(read(read_le<uint32_t>()))));
        break;
      case 'C':
        push(make_str(K::kBytes, std::string(read(read_le<uint8_t>()))));
        break;
      case 0x8e:
        push(make_str(K::kBytes, std::string(read(read_le<uint64_t>()))));
        break;
      case ')':
        push(make(K::kTuple));
        break;
      case 't':
        push(container(K::kTuple, pop_to_mark()));
        break;
      case 0x85:
      case 0x86:
      case 0x87: {
        const size_t n = op - 0x84u;
        if (stack_.size() < n) fail("malformed pickle: TUPLE" + std::to_string(n) + " on a short stack");
        std::vector<PyRef> items(stack_.end() - static_cast<std::ptrdiff_t>(n), stack_.end());
        stack_.resize(stack_.size() - n);
        push(container(K::kTuple, std::move(items)));
        break;
      }
      case ']':
      case 0x8f:
        push(make(K::kList));
        break;  // EMPTY_LIST, EMPTY_SET
      case 'l':
      case 0x91:  // LIST, FROZENSET
        push(container(K::kList, pop_to_mark()));
        break;
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
        push(make(K::kDict));
        break;
      case 'd': {
        auto v = make(K::kDict);
        set_items(v, pop_to_mark());
        push(v);
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
        push(global(module, name));
        break;
      }
      case 0x93: {  // STACK_GLOBAL
        PyRef name = pop();
        PyRef module = pop();
        if (name->kind != K::kStr || module->kind != K::kStr) fail("malformed pickle: STACK_GLOBAL without names");
        push(global(module->s, name->s));
        break;
      }
      case 'R': {
        PyRef args = pop();
        PyRef callable = pop();
        push(call(callable, args));
        break;
      }
      case 0x81: {  // NEWOBJ: cls.__new__(cls, *args)
        PyRef args = pop();
        PyRef cls = pop();
        push(call(cls, args));
        break;
      }
      case 0x92: {  // NEWOBJ_EX: cls, args, kwargs
        pop();
        PyRef args = pop();
        PyRef cls = pop();
        push(call(cls, args));
        break;
      }
      case 'b':  // BUILD: an OrderedDict's _metadata, a Namespace's fields; nothing reads them
        pop();
        if (stack_.empty()) fail("malformed pickle: BUILD without an object at offset " + std::to_string(pos_));
        break;
      case 'Q':
        push(persistent_load(pop()));
        break;
      case 'p':
        memo_put(parse_int(read_line()), top());
        break;
      case 'q':
        memo_put(read_le<uint8_t>(), top());
        break;
      case 'r':
        memo_put(read_le<uint32_t>(), top());
        break;
      case 0x94:
        memo_put(static_cast<int64_t>(memo_.size()), top());
        break;  // MEMOIZE
      case 'g':
        push(memo_get(parse_int(read_line())));
        break;
      case 'h':
        push(memo_get(read_le<uint8_t>()));
        break;
      case 'j':
        push(memo_get(read_le<uint32_t>()));
        break;
      default: {
        char hex[8];
        std::snprintf(hex, sizeof(hex), "0x%02x", op);
        fail(std::string("unsupported pickle opcode ") + hex + " at offset " + std::to_string(at) +
             " (expected a torch.save file)");
      }
    }
  }

  PyRef global(const std::string& module, const std::string& name) {
    if (module.size() + name.size() >= kMaxName) {
      fail("malformed pickle: a global name of " + std::to_string(module.size() + name.size() + 1) +
           " bytes (at most " + std::to_string(kMaxName) + ")");
    }
    return make_str(PyValue::Kind::kGlobal, module + "." + name);
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
    return make_str(K::kObject, name);
  }

  std::vector<int64_t> int_tuple(const PyRef& value, const char* what) {
    if (value->kind != PyValue::Kind::kTuple) fail(std::string("malformed tensor: ") + what + " is not a tuple");
    if (value->items.size() > kMaxDims) {
      fail(std::string("malformed tensor: ") + what + " has " + std::to_string(value->items.size()) +
           " dimensions (at most " + std::to_string(kMaxDims) + ")");
    }
    std::vector<int64_t> out;
    for (const auto& item : value->items) {
      if (item->kind != PyValue::Kind::kInt) fail(std::string("malformed tensor: ") + what + " is not all integers");
      out.push_back(item->i);
    }
    return out;
  }

  // _rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad, backward_hooks[, metadata])
  PyRef rebuild_tensor(const std::vector<PyRef>& args) {
    if (args.size() < 4 || args[0]->kind != PyValue::Kind::kStorage || args[1]->kind != PyValue::Kind::kInt) {
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
    // A view may repeat its storage (stride 0, as expand() makes); whoever
    // copies it allocates all its elements, so they too are bounded by the
    // file. Zero sizes are skipped: (0, 2^62, 2^62) still overflows at::empty.
    int64_t nbytes = storage.element_size();
    for (const int64_t n : size) {
      if (__builtin_mul_overflow(nbytes, std::max<int64_t>(n, 1), &nbytes))
        fail("malformed tensor: its size overflows");
    }
    if (!empty && static_cast<uint64_t>(nbytes) > max_bytes_) {
      fail("malformed tensor: a view of " + std::to_string(nbytes) + " bytes, more than the file can describe (" +
           std::to_string(max_bytes_) + ")");
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
    if (key.size() > kMaxName) fail("malformed pickle: a storage key of " + std::to_string(key.size()) + " bytes");
    auto v = make(K::kStorage);
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
    size_t needed = 0;
    if (numel < 0 || __builtin_mul_overflow(static_cast<size_t>(numel), element_size, &needed) || needed > nbytes) {
      fail("storage " + in_quotes(record) + " holds " + std::to_string(nbytes) + " bytes, fewer than " +
           std::to_string(numel) + " elements of " + type);
    }
    at::Tensor storage = at::empty({numel}, at::TensorOptions().dtype(*dtype));
    if (numel > 0) {
      auto [data, size] = archive_.getRecord(record);
      if (size < needed) fail("storage " + in_quotes(record) + " is shorter than the archive says");
      std::memcpy(storage.data_ptr(), data.get(), needed);
    }
    storages_.emplace(key, storage);
    v->tensor = storage;
    return v;
  }

  std::string_view data_;
  size_t pos_ = 0;
  caffe2::serialize::PyTorchStreamReader& archive_;
  std::string file_;
  uint64_t max_bytes_;
  std::vector<PyRef> stack_;
  std::vector<size_t> marks_;
  std::map<int64_t, PyRef> memo_;
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
    if (key->kind != PyValue::Kind::kStr || tensor->kind != PyValue::Kind::kTensor) return std::nullopt;
    budget.spend(key->s);
    out.emplace_back(key->s, tensor->tensor);
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
  } catch (...) {
    rethrow("cannot read the zip archive: ");
  }

  PyRef root;
  try {
    root = Unpickler(pickle, *archive, file, max_bytes).run();
  } catch (...) {
    rethrow("");
  }

  TorchFile result;
  CopyBudget budget(file, pickle.size());
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
