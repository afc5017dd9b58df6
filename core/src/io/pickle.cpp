#include "timm/io/pickle.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <exception>

#include "timm/base/error.hpp"

namespace timm::pickle {

Ref make(Value::Kind kind) {
  auto v = std::make_shared<Value>();
  v->kind = kind;
  return v;
}

Ref make_int(int64_t i) {
  auto v = make(Value::Kind::kInt);
  v->i = i;
  return v;
}

Ref make_str(Value::Kind kind, std::string s) {
  auto v = make(kind);
  v->s = std::move(s);
  return v;
}

Ref Hooks::find_class(Unpickler&, const std::string& module, const std::string& name) {
  return make_str(Value::Kind::kGlobal, module + "." + name);
}

Ref Hooks::call(Unpickler&, const Ref& callable, const Ref&) { return make_str(Value::Kind::kObject, callable->s); }

void Hooks::build(Unpickler&, Value&, const Ref&) {}

Ref Hooks::persistent_load(Unpickler& unpickler, const Ref&) { unpickler.fail("unsupported persistent id"); }

Unpickler::Unpickler(std::string_view data, Hooks& hooks, UnpickleOptions options)
    : data_(data), hooks_(hooks), options_(std::move(options)) {}

Ref Unpickler::run() {
  while (true) {
    const std::size_t at = pos_;
    const auto op = static_cast<uint8_t>(read(1)[0]);
    if (op == '.') break;  // STOP
    step(op, at);
  }
  if (stack_.size() != 1) fail("pickle ends with " + std::to_string(stack_.size()) + " values on the stack");
  return stack_.back();
}

void Unpickler::fail(const std::string& problem) const { throw Error(options_.context + ": " + problem); }

std::string_view Unpickler::read(std::size_t n) {
  if (n > data_.size() - pos_) {
    fail(options_.name + " is truncated (wanted " + std::to_string(n) + " bytes at offset " + std::to_string(pos_) +
         ")");
  }
  std::string_view out = data_.substr(pos_, n);
  pos_ += n;
  return out;
}

template <typename T>
T Unpickler::read_le() {
  T value;
  std::memcpy(&value, read(sizeof(T)).data(), sizeof(T));
  return value;  // pickles are little-endian, as is every machine we build for
}

std::string Unpickler::read_line() {
  const std::size_t end = data_.find('\n', pos_);
  if (end == std::string_view::npos) fail(options_.name + " is truncated (unterminated line)");
  std::string out(data_.substr(pos_, end - pos_));
  pos_ = end + 1;
  return out;
}

void Unpickler::push(Ref v) {
  if (stack_.size() >= kMaxStack)
    fail("malformed pickle: more than " + std::to_string(kMaxStack) + " values on the stack");
  if (options_.max_values != 0 && ++pushed_ > options_.max_values) {
    fail("malformed pickle: more than " + std::to_string(options_.max_values) + " values (expected " +
         options_.expected + ")");
  }
  stack_.push_back(std::move(v));
}

void Unpickler::memo_put(int64_t index, const Ref& v) {
  if (memo_.size() >= kMaxMemo && !memo_.contains(index)) {
    fail("malformed pickle: more than " + std::to_string(kMaxMemo) + " memo entries");
  }
  memo_[index] = v;
}

// Puts `child` into `parent`, a container that is being filled.
void Unpickler::adopt(Value& parent, Value& child) {
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
void Unpickler::check_fillable(const Value& container, const char* op) {
  if (container.contained) {
    fail(std::string("malformed pickle: ") + op +
         " on a container already inside another (recursive objects are not supported)");
  }
}

Ref Unpickler::pop() {
  if (stack_.empty()) fail("malformed pickle: stack underflow at offset " + std::to_string(pos_));
  Ref v = stack_.back();
  stack_.pop_back();
  return v;
}

Ref& Unpickler::top() {
  if (stack_.empty()) fail("malformed pickle: stack underflow at offset " + std::to_string(pos_));
  return stack_.back();
}

// The values above the topmost MARK, which is removed.
std::vector<Ref> Unpickler::pop_to_mark() {
  if (marks_.empty()) fail("malformed pickle: no MARK at offset " + std::to_string(pos_));
  const std::size_t mark = marks_.back();
  marks_.pop_back();
  if (mark > stack_.size()) fail("malformed pickle: MARK above the stack at offset " + std::to_string(pos_));
  std::vector<Ref> items(stack_.begin() + static_cast<std::ptrdiff_t>(mark), stack_.end());
  stack_.resize(mark);
  return items;
}

Ref Unpickler::container(Value::Kind kind, std::vector<Ref> items) {
  auto v = make(kind);
  for (const auto& item : items) adopt(*v, *item);
  v->items = std::move(items);
  return v;
}

Ref Unpickler::memo_get(int64_t index) {
  auto it = memo_.find(index);
  if (it == memo_.end()) fail("malformed pickle: memo entry " + std::to_string(index) + " read before it was set");
  return it->second;
}

void Unpickler::set_items(Ref& dict, const std::vector<Ref>& kv) {
  if (kv.size() % 2 != 0) fail("malformed pickle: SETITEMS with an odd number of values");
  if (dict->kind != Value::Kind::kDict) fail("malformed pickle: SETITEM(S) on a value that is not a dict");
  check_fillable(*dict, "SETITEM(S)");
  for (const auto& item : kv) adopt(*dict, *item);
  for (std::size_t k = 0; k < kv.size(); k += 2) dict->entries.emplace_back(kv[k], kv[k + 1]);
}

void Unpickler::append_items(Ref& list, const std::vector<Ref>& items) {
  // A set (ADDITEMS) is read as a list.
  if (list->kind != Value::Kind::kList) fail("malformed pickle: APPEND(S) on a value that is not a list");
  check_fillable(*list, "APPEND(S)");
  for (const auto& item : items) adopt(*list, *item);
  list->items.insert(list->items.end(), items.begin(), items.end());
}

void Unpickler::step(uint8_t op, std::size_t at) {
  using K = Value::Kind;
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
    case 'T':  // BINSTRING, SHORT_BINSTRING: Python 2 str
    case 'U': {
      auto v = make_str(K::kStr, std::string(read(op == 'T' ? read_le<uint32_t>() : read_le<uint8_t>())));
      v->py2_str = true;
      push(v);
      break;
    }
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
      std::vector<Ref> items(stack_.end() - static_cast<std::ptrdiff_t>(n), stack_.end());
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
      Ref item = pop();
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
      Ref value = pop();
      Ref key = pop();
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
      Ref name = pop();
      Ref module = pop();
      if (name->kind != K::kStr || module->kind != K::kStr) fail("malformed pickle: STACK_GLOBAL without names");
      push(global(module->s, name->s));
      break;
    }
    case 'R': {
      Ref args = pop();
      Ref callable = pop();
      push(call(callable, args));
      break;
    }
    case 0x81: {  // NEWOBJ: cls.__new__(cls, *args)
      Ref args = pop();
      Ref cls = pop();
      push(call(cls, args));
      break;
    }
    case 0x92: {  // NEWOBJ_EX: cls, args, kwargs
      pop();
      Ref args = pop();
      Ref cls = pop();
      push(call(cls, args));
      break;
    }
    case 'b': {  // BUILD: the hooks' to apply (torch: an OrderedDict's _metadata, a Namespace's fields: dropped)
      Ref state = pop();
      if (stack_.empty()) fail("malformed pickle: BUILD without an object at offset " + std::to_string(pos_));
      hooks_.build(*this, *stack_.back(), state);
      break;
    }
    case 'Q':  // BINPERSID
      push(hooks_.persistent_load(*this, pop()));
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
      fail(std::string("unsupported pickle opcode ") + hex + " at offset " + std::to_string(at) + " (expected " +
           options_.expected + ")");
    }
  }
}

Ref Unpickler::global(const std::string& module, const std::string& name) {
  if (module.size() + name.size() >= kMaxName) {
    fail("malformed pickle: a global name of " + std::to_string(module.size() + name.size() + 1) + " bytes (at most " +
         std::to_string(kMaxName) + ")");
  }
  return hooks_.find_class(*this, module, name);
}

Ref Unpickler::call(const Ref& callable, const Ref& args) {
  if (callable->kind != Value::Kind::kGlobal) fail("malformed pickle: call of a value that is not a global");
  if (args->kind != Value::Kind::kTuple)
    fail("malformed pickle: call of " + callable->s + " without an argument tuple");
  return hooks_.call(*this, callable, args);
}

int64_t Unpickler::parse_int(const std::string& text) {
  try {
    std::size_t used = 0;
    const int64_t v = std::stoll(text, &used);
    if (used == text.size() || (used + 1 == text.size() && text.back() == 'L')) return v;
  } catch (const std::exception&) {
  }
  fail("malformed pickle: bad integer " + in_quotes(text));
}

int64_t Unpickler::read_long(uint64_t n) {
  if (n > 8) {
    read(n);  // an integer beyond 64 bits: nothing a reader needs; keep going
    return 0;
  }
  const std::string_view bytes = read(n);
  uint64_t v = 0;
  for (std::size_t k = 0; k < n; ++k) v |= static_cast<uint64_t>(static_cast<uint8_t>(bytes[k])) << (8 * k);
  if (n > 0 && n < 8 && (static_cast<uint8_t>(bytes[n - 1]) & 0x80)) v |= ~uint64_t{0} << (8 * n);  // sign
  return static_cast<int64_t>(v);
}

bool latin1_bytes(const Value& value, std::string& out) {
  if (value.kind == Value::Kind::kBytes || (value.kind == Value::Kind::kStr && value.py2_str)) {
    out = value.s;
    return true;
  }
  if (value.kind != Value::Kind::kStr) return false;
  // UTF-8 of code points below U+0100: one byte below 0x80, or 0xC2/0xC3 and a continuation byte.
  out.clear();
  out.reserve(value.s.size());
  const std::string& s = value.s;
  for (std::size_t k = 0; k < s.size(); ++k) {
    const auto c = static_cast<uint8_t>(s[k]);
    if (c < 0x80) {
      out.push_back(static_cast<char>(c));
    } else if ((c == 0xC2 || c == 0xC3) && k + 1 < s.size() && (static_cast<uint8_t>(s[k + 1]) & 0xC0) == 0x80) {
      out.push_back(static_cast<char>(((c & 0x03) << 6) | (static_cast<uint8_t>(s[k + 1]) & 0x3F)));
      ++k;
    } else {
      return false;
    }
  }
  return true;
}

}  // namespace timm::pickle
