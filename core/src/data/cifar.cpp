// torchvision's CIFAR10 and CIFAR100 (timm's "torch/cifar10", "torch/cifar100")
// from the pickled batches of the datasets' Python version, read by our own
// unpickler (timm/io/pickle.hpp) with an allow-list of globals: no code runs.
#include <c10/util/Exception.h>

#include <algorithm>
#include <fstream>
#include <vector>

#include "timm/base/error.hpp"
#include "timm/base/python_repr.hpp"
#include "timm/data/dataset.hpp"
#include "timm/data/image_ops.hpp"
#include "timm/io/pickle.hpp"

namespace fs = std::filesystem;

namespace timm {
namespace {

namespace pk = pickle;

constexpr int64_t kCifarSide = 32;
constexpr int64_t kCifarImageBytes = 3 * kCifarSide * kCifarSide;  // 3072: R, G, B planes of 32x32
// The largest batch file read: CIFAR-100's train file is 181 MB (Python 2),
// about 1.5 times more when Python 3 re-pickles it under protocol 2.
constexpr std::uint64_t kMaxCifarFileBytes = std::uint64_t{1} << 30;
// The most values a batch's pickle may push: CIFAR-100's train file holds
// 3 lists of 50000 (fine and coarse labels, file names) and a few more.
constexpr std::size_t kMaxCifarValues = std::size_t{1} << 21;
// The most dimensions of a numpy array in a batch (numpy's own limit is 64).
constexpr std::size_t kMaxArrayDims = 32;

struct CifarLayout {
  std::string_view name;   // timm's: "cifar10"
  std::string_view title;  // "CIFAR-10"
  std::string_view folder;
  std::vector<std::string_view> train_files, test_files;
  std::string_view archive;
  int64_t num_classes;
};

const CifarLayout kCifar10{"cifar10",
                           "CIFAR-10",
                           "cifar-10-batches-py",
                           {"data_batch_1", "data_batch_2", "data_batch_3", "data_batch_4", "data_batch_5"},
                           {"test_batch"},
                           "cifar-10-python.tar.gz",
                           10};
const CifarLayout kCifar100{"cifar100", "CIFAR-100", "cifar-100-python", {"train"}, {"test"}, "cifar-100-python.tar.gz",
                            100};

// numpy.dtype(descr, align, copy): its descr ('u1'); BUILD's state is not read.
struct DtypePayload {
  std::string descr;
};

// An array that _reconstruct made and BUILD filled: its shape, its dtype's
// descr and its bytes (a kBytes value, shared with the pickle's, not copied).
struct ArrayPayload {
  std::vector<int64_t> shape;
  std::string descr;
  pk::Ref bytes;
};

[[noreturn]] void batch_error(const std::string& context, const std::string& problem) {
  throw Error(context + ": " + problem);
}

// The globals a CIFAR batch names, as numpy and Python 3's pickler write
// them: numpy's array reconstructor (numpy.core in numpy 1, numpy._core in
// numpy 2), ndarray and dtype, and for the bytes of a Python 3 pickle of
// protocol 2, _codecs.encode(str, 'latin1') and bytes() (empty bytes). Any
// other global is refused by name, before anything could be called.
class CifarHooks final : public pk::Hooks {
 public:
  explicit CifarHooks(std::size_t file_size) : decode_budget_(file_size) {}

  pk::Ref find_class(pk::Unpickler& u, const std::string& module, const std::string& name) override {
    const std::string full = module + "." + name;
    for (const char* allowed :
         {"numpy.core.multiarray._reconstruct", "numpy._core.multiarray._reconstruct", "numpy.ndarray", "numpy.dtype",
          "_codecs.encode", "__builtin__.bytes", "builtins.bytes"}) {
      if (full == allowed) return pk::make_str(pk::Value::Kind::kGlobal, full);
    }
    u.fail("refuses the global " + in_quotes(full) +
           ": a CIFAR batch names only numpy's _reconstruct, ndarray and dtype and _codecs.encode (no code is run)");
  }

  pk::Ref call(pk::Unpickler& u, const pk::Ref& callable, const pk::Ref& args) override {
    using K = pk::Value::Kind;
    const std::string& name = callable->s;
    const std::vector<pk::Ref>& a = args->items;
    if (name.ends_with("multiarray._reconstruct")) {
      if (a.empty() || a[0]->kind != K::kGlobal || a[0]->s != "numpy.ndarray") {
        u.fail("malformed pickle: " + name + " of something other than numpy.ndarray");
      }
      auto v = pk::make_str(K::kObject, "numpy.ndarray");
      v->payload = ArrayPayload{};
      return v;
    }
    if (name == "numpy.dtype") {
      if (a.empty() || a[0]->kind != K::kStr) u.fail("malformed pickle: numpy.dtype without a type string");
      auto v = pk::make_str(K::kObject, "numpy.dtype");
      v->payload = DtypePayload{a[0]->s};
      return v;
    }
    if (name == "_codecs.encode") {
      // Python 3's pickler (protocol < 3) writes bytes b as _codecs.encode(b.decode('latin1'), 'latin1').
      if (a.size() != 2 || a[0]->kind != K::kStr || a[1]->kind != K::kStr ||
          (a[1]->s != "latin1" && a[1]->s != "latin-1")) {
        u.fail("malformed pickle: _codecs.encode other than of a str to 'latin1'");
      }
      auto v = pk::make(K::kBytes);
      decode(u, *a[0], v->s);
      return v;
    }
    if (name == "__builtin__.bytes" || name == "builtins.bytes") {
      if (!a.empty()) u.fail("malformed pickle: bytes() with arguments");
      return pk::make(K::kBytes);
    }
    u.fail("malformed pickle: a call of " + name);  // numpy.ndarray itself
  }

  // numpy's ndarray.__setstate__: ([version,] shape, dtype, is_fortran, data);
  // a dtype's state (byte order, fields) is not needed for 'u1'.
  void build(pk::Unpickler& u, pk::Value& object, const pk::Ref& state) override {
    using K = pk::Value::Kind;
    auto* array = std::any_cast<ArrayPayload>(&object.payload);
    if (std::any_cast<DtypePayload>(&object.payload) != nullptr) return;
    if (array == nullptr) u.fail("malformed pickle: BUILD on " + object.s);
    if (state->kind != K::kTuple || (state->items.size() != 5 && state->items.size() != 4)) {
      u.fail("malformed numpy array: its state is not (version, shape, dtype, is_fortran, data)");
    }
    const std::vector<pk::Ref>& st = state->items;
    const std::size_t first = st.size() - 4;
    const pk::Value& shape = *st[first];
    const auto* dtype = std::any_cast<DtypePayload>(&st[first + 1]->payload);
    const pk::Value& fortran = *st[first + 2];
    const pk::Ref& data = st[first + 3];
    if (shape.kind != K::kTuple || shape.items.size() > kMaxArrayDims) {
      u.fail("malformed numpy array: its shape is not a tuple of at most " + std::to_string(kMaxArrayDims) +
             " integers");
    }
    if (dtype == nullptr) u.fail("malformed numpy array: its dtype is not a numpy.dtype");
    if (fortran.kind != K::kBool && fortran.kind != K::kInt) u.fail("malformed numpy array: is_fortran is not a bool");
    ArrayPayload out;
    out.descr = dtype->descr;
    std::uint64_t elements = 1;
    for (const pk::Ref& dim : shape.items) {
      if (dim->kind != K::kInt || dim->i < 0) u.fail("malformed numpy array: a dimension that is not an integer >= 0");
      out.shape.push_back(dim->i);
      if (__builtin_mul_overflow(elements, static_cast<std::uint64_t>(dim->i), &elements)) {
        u.fail("malformed numpy array: its shape " + python_tuple_repr(out.shape) + " overflows");
      }
    }
    if (out.descr != "u1") {
      u.fail("numpy array of dtype " + in_quotes(out.descr) + "; expected uint8 ('u1') pixels");
    }
    if (fortran.i != 0 && out.shape.size() > 1) u.fail("numpy array in Fortran order; expected C order");
    if (data->kind == K::kBytes || (data->kind == K::kStr && data->py2_str)) {
      out.bytes = data;  // the pickle's bytes, not copied
    } else if (data->kind == K::kStr) {
      out.bytes = pk::make(K::kBytes);
      decode(u, *data, out.bytes->s);
    } else {
      u.fail("malformed numpy array: its data is not bytes");
    }
    if (elements != out.bytes->s.size()) {
      u.fail("numpy array of shape " + python_tuple_repr(out.shape) + " needs " + std::to_string(elements) +
             " bytes; its data holds " + std::to_string(out.bytes->s.size()));
    }
    *array = std::move(out);
  }

 private:
  // The latin1 bytes of a str. What all decodings produce is bounded by the
  // file's size: a file decodes each of its strings once, but the memo
  // could make it decode one long string many times.
  void decode(pk::Unpickler& u, const pk::Value& str, std::string& out) {
    if (!pk::latin1_bytes(str, out)) u.fail("malformed pickle: a str with characters beyond latin1 where bytes belong");
    if (out.size() > decode_budget_) {
      u.fail("malformed pickle: its strings decode to more bytes than the file holds");
    }
    decode_budget_ -= out.size();
  }

  std::size_t decode_budget_;
};

// The last value of `dict` under the str key `key` (Python's dict keeps the last), or null.
const pk::Value* find_key(const pk::Value& dict, std::string_view key) {
  const pk::Value* found = nullptr;
  for (const auto& [k, v] : dict.entries) {
    if (k->kind == pk::Value::Kind::kStr && k->s == key) found = v.get();
  }
  return found;
}

class CifarDataset final : public Dataset {
 public:
  CifarDataset(const CifarLayout& layout, const fs::path& root, bool train, int64_t channels)
      : name_("torch/" + std::string(layout.name)), num_classes_(layout.num_classes), channels_(channels) {
    const fs::path folder = root / std::string(layout.folder);
    std::vector<fs::path> files;
    for (std::string_view file : train ? layout.train_files : layout.test_files) {
      const fs::path path = folder / std::string(file);
      std::error_code ec;
      if (!fs::is_regular_file(path, ec)) {
        throw Error(name_ + ": missing " + in_quotes(path.string()) + "; expected the Python version of " +
                    std::string(layout.title) + " (" + std::string(layout.archive) +
                    " from https://www.cs.toronto.edu/~kriz/cifar.html, extracted in --data-dir)");
      }
      files.push_back(path);
    }
    for (const fs::path& path : files) read_batch(path);
  }

  std::size_t size() const override { return labels_.size(); }
  Image image(std::size_t index) const override {
    check(index);
    // A row holds the red, green and blue planes; Image is interleaved (HWC).
    Image rgb(kCifarSide, kCifarSide, 3);
    const std::uint8_t* row = pixels_.data() + index * kCifarImageBytes;
    constexpr int64_t plane = kCifarSide * kCifarSide;
    for (int64_t p = 0; p < plane; ++p) {
      for (int64_t c = 0; c < 3; ++c) rgb.pixels[p * 3 + c] = row[c * plane + p];
    }
    return channels_ == 3 ? rgb : convert_channels(rgb, channels_);
  }
  int64_t target(std::size_t index) const override {
    check(index);
    return labels_[index];
  }
  int64_t num_classes() const override { return num_classes_; }
  std::string describe(std::size_t index) const override { return name_ + "[" + std::to_string(index) + "]"; }

 private:
  void check(std::size_t index) const {
    TORCH_CHECK(index < labels_.size(), name_, ": index ", index, " out of range for ", labels_.size(), " samples");
  }

  // torchvision: entry = pickle.load(f, encoding='latin1'); data = entry['data']
  // (N x 3072 uint8), labels = entry['labels'] if present else entry['fine_labels'].
  void read_batch(const fs::path& path) {
    const std::string context = name_ + ": " + in_quotes(path.string());
    std::error_code ec;
    const std::uint64_t file_size = fs::file_size(path, ec);
    if (ec) throw Error(context + ": cannot read its size: " + ec.message());
    if (file_size > kMaxCifarFileBytes) {
      throw Error(context + ": " + std::to_string(file_size) + " bytes; expected a CIFAR batch of at most " +
                  std::to_string(kMaxCifarFileBytes));
    }
    std::string bytes(file_size, '\0');
    std::ifstream in(path, std::ios::binary);
    in.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!in || in.gcount() != static_cast<std::streamsize>(bytes.size())) throw Error(context + ": cannot read it");

    CifarHooks hooks(bytes.size());
    pk::UnpickleOptions options;
    options.context = context;
    options.name = "the pickle";
    options.expected = "a CIFAR batch pickled by Python";
    options.max_values = kMaxCifarValues;
    const pk::Ref root = pk::Unpickler(bytes, hooks, options).run();
    const auto fail = [&context](const std::string& problem) { batch_error(context, problem); };
    if (root->kind != pk::Value::Kind::kDict) fail("holds no dict; expected a CIFAR batch (a dict with 'data')");

    const pk::Value* data = find_key(*root, "data");
    if (data == nullptr) fail("has no 'data'; expected a CIFAR batch");
    const auto* array = std::any_cast<ArrayPayload>(&data->payload);
    if (array == nullptr || array->bytes == nullptr) fail("its 'data' is not a numpy array");
    if (array->shape.size() != 2 || array->shape[1] != kCifarImageBytes) {
      fail("its 'data' has shape " + python_tuple_repr(array->shape) + "; expected (N, 3072): N images of 3x32x32");
    }
    const int64_t count = array->shape[0];

    const char* label_key = "labels";
    const pk::Value* labels = find_key(*root, "labels");
    if (labels == nullptr) {
      label_key = "fine_labels";
      labels = find_key(*root, "fine_labels");
    }
    if (labels == nullptr) fail("has neither 'labels' nor 'fine_labels'");
    const std::string key = std::string("its '") + label_key + "'";
    if (labels->kind != pk::Value::Kind::kList && labels->kind != pk::Value::Kind::kTuple) {
      fail(key + " is not a list");
    }
    if (static_cast<int64_t>(labels->items.size()) != count) {
      fail(key + " holds " + std::to_string(labels->items.size()) + " labels; expected " + std::to_string(count) +
           ", one per image of its 'data'");
    }
    for (std::size_t i = 0; i < labels->items.size(); ++i) {
      const pk::Value& label = *labels->items[i];
      if (label.kind != pk::Value::Kind::kInt || label.i < 0 || label.i >= num_classes_) {
        fail(key + " has " +
             (label.kind == pk::Value::Kind::kInt ? "label " + std::to_string(label.i) : "a non-integer") + " at " +
             std::to_string(i) + "; expected 0.." + std::to_string(num_classes_ - 1));
      }
    }
    pixels_.insert(pixels_.end(), array->bytes->s.begin(), array->bytes->s.end());
    for (const pk::Ref& label : labels->items) labels_.push_back(label->i);
  }

  std::string name_;
  int64_t num_classes_;
  int64_t channels_;
  std::vector<std::uint8_t> pixels_;  // N x 3072: each image's R, G and B planes
  std::vector<int64_t> labels_;
};

}  // namespace

std::unique_ptr<Dataset> make_cifar(std::string_view name, const fs::path& root, bool train, int64_t channels) {
  if (channels != 1 && channels != 3) {
    throw UsageError("dataset: " + std::to_string(channels) + " input channels; expected 1 or 3");
  }
  if (name == kCifar10.name) return std::make_unique<CifarDataset>(kCifar10, root, train, channels);
  if (name == kCifar100.name) return std::make_unique<CifarDataset>(kCifar100, root, train, channels);
  throw UsageError("unknown CIFAR dataset " + in_quotes(std::string(name)) + "; expected cifar10 or cifar100");
}

}  // namespace timm
