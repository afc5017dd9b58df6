#include "timm/io/npy.hpp"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <iterator>
#include <limits>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <ATen/ATen.h>
#include <c10/util/accumulate.h>

#include "timm/base/error.hpp"
#include "timm/io/atomic_file.hpp"

namespace timm {
namespace {

constexpr std::string_view kMagic = "\x93NUMPY";

struct NpyType {
  std::string_view code;  // descr without the byte-order character
  at::ScalarType dtype;
};

constexpr NpyType kTypes[] = {
    {"f4", at::kFloat}, {"f8", at::kDouble}, {"f2", at::kHalf},   {"i8", at::kLong},
    {"i4", at::kInt},   {"i2", at::kShort},  {"i1", at::kChar},   {"u1", at::kByte},
    {"b1", at::kBool},  {"u2", at::kUInt16}, {"u4", at::kUInt32}, {"u8", at::kUInt64},
};

[[noreturn]] void fail(const std::filesystem::path& path, const std::string& problem) {
  throw Error("npy file " + in_quotes(path.string()) + ": " + problem);
}

// numpy writes headers of a few hundred bytes (and itself refuses more than
// 10000 without allow_pickle); version 2 and 3 headers declare 32-bit
// lengths, so a cap keeps a hostile length from costing memory or time.
constexpr size_t kMaxNpyHeaderBytes = size_t{1} << 20;

std::string read_all(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) fail(path, "no such file");
  const auto size = std::filesystem::file_size(path, ec);
  if (ec) fail(path, "cannot read its size: " + ec.message());
  std::string bytes(size, '\0');  // the file's real size: the one allocation the file justifies
  FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) fail(path, "cannot open it");
  const size_t got = std::fread(bytes.data(), 1, bytes.size(), f);
  std::fclose(f);
  if (got != bytes.size()) fail(path, "short read");
  return bytes;
}

// The header as a message shows it: whole when short, its start otherwise.
std::string excerpt(std::string_view header) {
  constexpr size_t kShown = 200;
  if (header.size() <= kShown) return std::string(header);
  return std::string(header.substr(0, kShown)) + "... (" + std::to_string(header.size()) + " bytes)";
}

// The three values of the header's dict literal, as raw text: a quoted
// string with its quotes, a parenthesised tuple with its parentheses, or a
// bare word (True, False).
struct HeaderFields {
  std::string descr;
  std::string fortran_order;
  std::string shape;
};

// Parses the dict literal numpy writes, {'descr': '<f4', 'fortran_order':
// False, 'shape': (2, 3), }, by hand in one pass: the header is file content.
// Its keys are exactly numpy's three, each once, as numpy itself demands.
class HeaderParser {
 public:
  HeaderParser(const std::filesystem::path& path, std::string_view header) : path_(path), header_(header) {}

  HeaderFields parse() {
    skip_spaces();
    if (!eat('{')) fail(path_, "header is not a dict literal: " + excerpt(header_));
    HeaderFields fields;
    const std::pair<std::string_view, std::string*> slots[] = {
        {"descr", &fields.descr}, {"fortran_order", &fields.fortran_order}, {"shape", &fields.shape}};
    bool seen[std::size(slots)] = {};
    skip_spaces();
    while (!eat('}')) {
      const std::string key = string_literal();
      size_t k = 0;
      while (k < std::size(slots) && slots[k].first != key) ++k;
      if (k == std::size(slots)) {
        fail(path_,
             "header has an unexpected key " + in_quotes(key) + " (expected 'descr', 'fortran_order' and 'shape')");
      }
      if (seen[k]) fail(path_, "header repeats the key " + in_quotes(key));
      seen[k] = true;
      skip_spaces();
      if (!eat(':')) missing(key);
      skip_spaces();
      *slots[k].second = value(key);
      skip_spaces();
      if (eat(',')) {
        skip_spaces();
      } else if (pos_ >= header_.size() || header_[pos_] != '}') {
        missing(key);
      }
    }
    skip_spaces();
    if (pos_ != header_.size()) fail(path_, "header has text after its dict: " + excerpt(header_));
    for (size_t k = 0; k < std::size(slots); ++k) {
      if (!seen[k]) missing(std::string(slots[k].first));
    }
    return fields;
  }

 private:
  [[noreturn]] void missing(const std::string& key) const {
    fail(path_, "header has no valid '" + key + "': " + excerpt(header_));
  }

  void skip_spaces() {
    while (pos_ < header_.size() &&
           (header_[pos_] == ' ' || header_[pos_] == '\t' || header_[pos_] == '\n' || header_[pos_] == '\r')) {
      ++pos_;
    }
  }

  bool eat(char c) {
    if (pos_ >= header_.size() || header_[pos_] != c) return false;
    ++pos_;
    return true;
  }

  // A key: a quoted string without escapes (numpy's keys and dtype codes need none).
  std::string string_literal() {
    const size_t start = pos_;
    if (pos_ >= header_.size() || (header_[pos_] != '\'' && header_[pos_] != '"')) {
      fail(path_, "header has a malformed key at offset " + std::to_string(pos_) + ": " + excerpt(header_));
    }
    const size_t end = header_.find(header_[pos_], pos_ + 1);
    if (end == std::string_view::npos) {
      fail(path_, "header has an unterminated string at offset " + std::to_string(start) + ": " + excerpt(header_));
    }
    pos_ = end + 1;
    return std::string(header_.substr(start + 1, end - start - 1));
  }

  // A value as raw text; what it must be is checked by the caller, per key.
  std::string value(const std::string& key) {
    const size_t start = pos_;
    if (pos_ >= header_.size()) missing(key);
    const char first = header_[pos_];
    size_t end = std::string_view::npos;
    if (first == '\'' || first == '"') {
      end = header_.find(first, pos_ + 1);
    } else if (first == '(' || first == '[') {
      end = header_.find(first == '(' ? ')' : ']', pos_ + 1);
    } else {
      while (pos_ < header_.size() && (std::isalnum(static_cast<unsigned char>(header_[pos_])) ||
                                       header_[pos_] == '-' || header_[pos_] == '.' || header_[pos_] == '_')) {
        ++pos_;
      }
      if (pos_ == start) missing(key);
      return std::string(header_.substr(start, pos_ - start));
    }
    if (end == std::string_view::npos) missing(key);
    pos_ = end + 1;
    return std::string(header_.substr(start, pos_ - start));
  }

  const std::filesystem::path& path_;
  std::string_view header_;
  size_t pos_ = 0;
};

// The dimensions of a shape tuple such as "(3, 224, 224)", "(10,)" or "()",
// each checked so that the element count cannot overflow. Python 2's numpy
// wrote long integers with an 'L' suffix ("(3L, 4L)").
std::vector<int64_t> parse_shape(const std::filesystem::path& path, const std::string& text) {
  const auto bad = [&]() { fail(path, "bad shape " + excerpt(text) + " (expected a tuple of non-negative integers)"); };
  if (text.size() < 2 || text.front() != '(' || text.back() != ')') bad();
  const std::string_view inner = std::string_view(text).substr(1, text.size() - 2);
  std::vector<int64_t> shape;
  int64_t numel = 1;  // of the non-zero dimensions
  size_t pos = 0;
  const auto skip_spaces = [&]() {
    while (pos < inner.size() && (inner[pos] == ' ' || inner[pos] == '\t' || inner[pos] == '\n')) ++pos;
  };
  skip_spaces();
  while (pos < inner.size()) {
    if (!std::isdigit(static_cast<unsigned char>(inner[pos]))) bad();
    int64_t dim = 0;
    while (pos < inner.size() && std::isdigit(static_cast<unsigned char>(inner[pos]))) {
      if (__builtin_mul_overflow(dim, 10, &dim) || __builtin_add_overflow(dim, inner[pos] - '0', &dim)) bad();
      ++pos;
    }
    if (pos < inner.size() && inner[pos] == 'L') ++pos;
    // The product skips zeros: (0, 2^40, 2^40) holds nothing but still overflows a size computation.
    if (__builtin_mul_overflow(numel, std::max<int64_t>(dim, 1), &numel)) bad();
    shape.push_back(dim);
    skip_spaces();
    if (pos < inner.size() && inner[pos] != ',') bad();  // "(2 3)" is not a tuple
    ++pos;
    skip_spaces();
  }
  return shape;
}

}  // namespace

at::Tensor read_npy(const std::filesystem::path& path) {
  const std::string data = read_all(path);
  if (data.size() < 10 || std::string_view(data).substr(0, 6) != kMagic) fail(path, "not a .npy file (bad magic)");
  const auto major = static_cast<uint8_t>(data[6]);
  size_t header_len = 0;
  size_t offset = 0;
  if (major == 1) {
    header_len = static_cast<uint8_t>(data[8]) | (static_cast<size_t>(static_cast<uint8_t>(data[9])) << 8);
    offset = 10;
  } else if (major == 2 || major == 3) {
    if (data.size() < 12) fail(path, "truncated header");
    for (int i = 0; i < 4; ++i) header_len |= static_cast<size_t>(static_cast<uint8_t>(data[8 + i])) << (8 * i);
    offset = 12;
  } else {
    fail(path, "unsupported .npy version " + std::to_string(major));
  }
  if (header_len > kMaxNpyHeaderBytes) {
    fail(path, "header of " + std::to_string(header_len) + " bytes is longer than the " +
                   std::to_string(kMaxNpyHeaderBytes) + "-byte limit (numpy writes a few hundred)");
  }
  if (header_len > data.size() - offset) fail(path, "truncated header");
  const HeaderFields fields = HeaderParser(path, std::string_view(data).substr(offset, header_len)).parse();
  offset += header_len;

  const std::string& descr = fields.descr;
  const bool quoted = descr.size() >= 2 && (descr.front() == '\'' || descr.front() == '"');
  const std::string code = quoted ? descr.substr(1, descr.size() - 2) : "";
  if (code.size() != 3 || (code[0] != '<' && code[0] != '|' && code[0] != '=')) {
    fail(path, "unsupported dtype " + excerpt(descr) + " (expected a little-endian numeric type such as '<f4')");
  }
  const NpyType* type = nullptr;
  for (const auto& t : kTypes) {
    if (t.code == std::string_view(code).substr(1)) type = &t;
  }
  if (type == nullptr) fail(path, "unsupported dtype " + descr);
  if (fields.fortran_order == "True") {
    fail(path, "Fortran-order arrays are not supported; save with np.ascontiguousarray");
  }
  if (fields.fortran_order != "False") {
    fail(path, "bad fortran_order " + excerpt(fields.fortran_order) + " (expected True or False)");
  }
  const std::string& shape_text = fields.shape;
  if (shape_text.front() != '(') fail(path, "bad shape " + excerpt(shape_text) + " (expected a tuple)");
  const std::vector<int64_t> shape = parse_shape(path, shape_text);
  // The size is checked against the file before anything is allocated.
  const size_t available = data.size() - offset;
  const size_t element_size = c10::elementSize(type->dtype);
  const auto numel = static_cast<size_t>(c10::multiply_integers(shape));  // parse_shape keeps it within int64_t
  const bool overflows = numel > std::numeric_limits<size_t>::max() / element_size;
  if (overflows || numel * element_size != available) {
    const std::string needed = overflows ? "more than 2^64" : std::to_string(numel * element_size);
    fail(path, "data holds " + std::to_string(available) + " bytes, the shape " + shape_text + " of " + descr +
                   " needs " + needed);
  }
  at::Tensor out = at::empty(shape, at::TensorOptions().dtype(type->dtype));
  if (available > 0) std::memcpy(out.data_ptr(), data.data() + offset, available);
  return out;
}

void write_npy(const std::filesystem::path& path, const at::Tensor& tensor) {
  const at::Tensor t = tensor.detach().to(at::kCPU).contiguous();
  std::string descr;
  for (const auto& type : kTypes) {
    if (type.dtype == t.scalar_type()) {
      descr.assign(1, type.dtype == at::kBool || type.code[1] == '1' ? '|' : '<');
      descr.append(type.code);
    }
  }
  if (descr.empty())
    throw Error("npy file " + in_quotes(path.string()) + ": cannot write dtype " +
                std::string(c10::toString(t.scalar_type())));
  std::string shape = "(";
  for (int64_t d = 0; d < t.dim(); ++d)
    shape += std::to_string(t.size(d)) + (t.dim() == 1 ? "," : d + 1 < t.dim() ? ", " : "");
  shape += ")";
  std::string header = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
  // Magic (6) + version (2) + length (2) + header + '\n', padded to 64 bytes.
  const size_t unpadded = 10 + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header += '\n';
  std::string bytes(kMagic);
  bytes += '\x01';
  bytes += '\x00';
  bytes += static_cast<char>(header.size() & 0xff);
  bytes += static_cast<char>((header.size() >> 8) & 0xff);
  bytes += header;
  bytes.append(static_cast<const char*>(t.data_ptr()), static_cast<size_t>(t.numel()) * t.element_size());
  write_file_atomically(path, bytes);
}

}  // namespace timm
