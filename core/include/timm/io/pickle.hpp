// A bounds-checked interpreter of Python pickles that executes no code.
//
// Unpickler runs the opcodes of protocols 0 to 5 and builds Values: None,
// bools, ints (64 bits), floats, str, bytes, tuples, lists, dicts, globals.
// What a global means is up to the reader: Hooks decides what a GLOBAL
// names, what calling it (REDUCE, NEWOBJ) builds, what BUILD does to the
// object and what a persistent id (BINPERSID) stands for. By default a
// global is a name, a call makes an opaque object of that class and BUILD
// drops its state, so no code runs whatever the file names. Every read is
// bounds-checked, and nesting, the stack, the memo and names are bounded
// (the limits below); a malformed pickle throws Error "<context>: <problem>".
// read_torch_file (torch.save archives) and the CIFAR reader of
// create_dataset ("torch/cifar10") are built on it.
#pragma once

#include <any>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace timm::pickle {

// Nesting: Python's pickler recurses once per level and stops at CPython's
// default recursion limit of 1000, so no real pickle is deeper; values are
// freed recursively, so a deeper structure could overflow our stack.
inline constexpr int kMaxDepth = 1000;
// The stack (and the MARKs): Python's pickler batches list and dict items by
// 1000, so a real stack holds about 1000 values per level of nesting.
inline constexpr std::size_t kMaxStack = std::size_t{1} << 22;
// The memo: a checkpoint memoizes about ten values per tensor.
inline constexpr std::size_t kMaxMemo = std::size_t{1} << 22;
// A global's "module.name" (and a torch storage key): copied per use, and the
// memo makes a use cost two bytes.
inline constexpr std::size_t kMaxName = 1024;

struct Value;
using Ref = std::shared_ptr<Value>;

// A Python value as the pickle builds it. Containers are only filled before
// they are put into another one, as Python's pickler writes them: so values
// form no cycles, and `depth` (the levels of containers at and below a
// value) is exact when it is checked.
struct Value {
  enum class Kind {
    kNone,
    kBool,
    kInt,
    kFloat,
    kStr,
    kBytes,
    kTuple,
    kList,  // also a set or frozenset
    kDict,
    kGlobal,  // a class or function named by GLOBAL: `s` is "module.name"
    kObject,  // an instance a Hooks call made: `s` names its class, `payload` holds what the reader keeps
  };
  Kind kind = Kind::kNone;
  int64_t i = 0;  // bool, int
  double f = 0.0;
  // str (UTF-8), bytes, or the name of a global or an object's class.
  std::string s;
  // A str of a Python 2 STRING opcode (STRING, BINSTRING, SHORT_BINSTRING):
  // `s` holds its raw bytes, which Python 3 decodes with the unpickler's
  // encoding (torchvision's CIFAR reader: latin1, so each byte is one
  // character).
  bool py2_str = false;
  std::vector<Ref> items;                    // tuple, list
  std::vector<std::pair<Ref, Ref>> entries;  // dict, in file order (a repeated key appears twice)
  std::any payload;                          // object: what the Hooks that made it keep
  int depth = 1;
  bool contained = false;  // put into a container, hence no longer to be changed
};

Ref make(Value::Kind kind);
Ref make_int(int64_t i);
Ref make_str(Value::Kind kind, std::string s);

class Unpickler;

// What the globals of a pickle mean to its reader. Every method may throw
// (Unpickler::fail gives the reader's message prefix).
class Hooks {
 public:
  virtual ~Hooks() = default;
  // GLOBAL, STACK_GLOBAL (the name's length is checked before): a kGlobal
  // named "module.name".
  virtual Ref find_class(Unpickler& unpickler, const std::string& module, const std::string& name);
  // REDUCE, NEWOBJ, NEWOBJ_EX: `callable` is a kGlobal, `args` a tuple (both
  // checked before): a kObject of the callable's name.
  virtual Ref call(Unpickler& unpickler, const Ref& callable, const Ref& args);
  // BUILD with `state` on `object` (the value on the stack, which memo
  // references share): nothing. An override may set the object's `s` and
  // `payload`, never its items or entries.
  virtual void build(Unpickler& unpickler, Value& object, const Ref& state);
  // BINPERSID: fails ("unsupported persistent id").
  virtual Ref persistent_load(Unpickler& unpickler, const Ref& pid);
};

struct UnpickleOptions {
  // The message prefix: "torch file '/x/a.pth'" gives "torch file '/x/a.pth': <problem>".
  std::string context;
  // The pickle's name in "<name> is truncated (...)": "data.pkl", "the pickle".
  std::string name = "the pickle";
  // What the file should be, in "unsupported pickle opcode 0xff at offset 2
  // (expected <expected>)".
  std::string expected = "a pickle";
  // The most values the opcodes may push in all (each push of a new or
  // memoized value counts), 0 for no limit beyond the stack's and the memo's:
  // a reader that knows how many values its files hold bounds its memory
  // with it (a value costs about 200 bytes, a 1-byte opcode makes one).
  std::size_t max_values = 0;
};

// Executes the opcodes of one pickle, from its first byte to STOP.
class Unpickler {
 public:
  Unpickler(std::string_view data, Hooks& hooks, UnpickleOptions options);

  // The pickled value. Throws Error on a malformed or unsupported pickle.
  Ref run();

  // Throws Error "<context>: <problem>".
  [[noreturn]] void fail(const std::string& problem) const;
  // The offset of the next byte to read.
  std::size_t offset() const { return pos_; }

 private:
  std::string_view read(std::size_t n);
  template <typename T>
  T read_le();
  std::string read_line();
  void push(Ref v);
  Ref pop();
  Ref& top();
  std::vector<Ref> pop_to_mark();
  void memo_put(int64_t index, const Ref& v);
  Ref memo_get(int64_t index);
  void adopt(Value& parent, Value& child);
  void check_fillable(const Value& container, const char* op);
  Ref container(Value::Kind kind, std::vector<Ref> items);
  void set_items(Ref& dict, const std::vector<Ref>& kv);
  void append_items(Ref& list, const std::vector<Ref>& items);
  Ref global(const std::string& module, const std::string& name);
  Ref call(const Ref& callable, const Ref& args);
  int64_t parse_int(const std::string& text);
  int64_t read_long(uint64_t n);
  void step(uint8_t op, std::size_t at);

  std::string_view data_;
  std::size_t pos_ = 0;
  Hooks& hooks_;
  UnpickleOptions options_;
  std::vector<Ref> stack_;
  std::vector<std::size_t> marks_;
  std::map<int64_t, Ref> memo_;
  std::size_t pushed_ = 0;
};

// The bytes a str or bytes value stands for as Python's latin1 codec
// encodes it (what numpy and _codecs.encode(s, 'latin1') do with a str): the
// raw bytes of bytes and of a Python 2 str; each character of a (UTF-8) str,
// which must be below U+0100. False (and `out` unspecified) for any other
// value or character.
bool latin1_bytes(const Value& value, std::string& out);

}  // namespace timm::pickle
