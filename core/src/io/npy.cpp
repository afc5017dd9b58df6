#include "timm/io/npy.hpp"

#include <cctype>
#include <cstring>
#include <limits>
#include <string>
#include <string_view>
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

std::string read_all(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) fail(path, "no such file");
  std::vector<char> bytes(std::filesystem::file_size(path));
  FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) fail(path, "cannot open it");
  const size_t got = std::fread(bytes.data(), 1, bytes.size(), f);
  std::fclose(f);
  if (got != bytes.size()) fail(path, "short read");
  return {bytes.begin(), bytes.end()};
}

// The value of 'key' in the header's dict literal, as raw text: a quoted
// string with its quotes, a parenthesised tuple with its parentheses, or a
// bare word (True, False). Hand-parsed: the header is file content.
std::string header_field(const std::filesystem::path& path, const std::string& header, const std::string& key) {
  const auto missing = [&]() { fail(path, "header has no valid '" + key + "': " + header); };
  size_t pos = std::string::npos;
  for (const char quote : {'\'', '"'}) {
    const std::string quoted_key = std::string(1, quote) + key + quote;
    pos = header.find(quoted_key);
    if (pos != std::string::npos) {
      pos += quoted_key.size();
      break;
    }
  }
  if (pos == std::string::npos) missing();
  const auto skip_spaces = [&]() {
    while (pos < header.size() && (header[pos] == ' ' || header[pos] == '\t')) ++pos;
  };
  skip_spaces();
  if (pos >= header.size() || header[pos] != ':') missing();
  ++pos;
  skip_spaces();
  if (pos >= header.size()) missing();
  const char first = header[pos];
  size_t end = std::string::npos;
  if (first == '\'' || first == '"') {
    end = header.find(first, pos + 1);
  } else if (first == '(') {
    end = header.find(')', pos + 1);
  } else {
    end = pos;
    while (end < header.size() && std::isalnum(static_cast<unsigned char>(header[end]))) ++end;
    if (end == pos) missing();
    return header.substr(pos, end - pos);
  }
  if (end == std::string::npos) missing();
  return header.substr(pos, end + 1 - pos);
}

// The dimensions of a shape tuple such as "(3, 224, 224)" or "(10,)", each
// checked so that the element count cannot overflow.
std::vector<int64_t> parse_shape(const std::filesystem::path& path, const std::string& text) {
  std::vector<int64_t> shape;
  const auto bad = [&]() { fail(path, "bad shape " + text + " (expected a tuple of non-negative integers)"); };
  int64_t numel = 1;
  size_t pos = 1;  // after '('
  while (pos + 1 < text.size()) {
    const char c = text[pos];
    if (c == ' ' || c == ',') {
      ++pos;
      continue;
    }
    if (!std::isdigit(static_cast<unsigned char>(c))) bad();
    int64_t dim = 0;
    while (pos + 1 < text.size() && std::isdigit(static_cast<unsigned char>(text[pos]))) {
      if (dim > (std::numeric_limits<int64_t>::max() - 9) / 10) bad();
      dim = dim * 10 + (text[pos] - '0');
      ++pos;
    }
    if (dim > 0 && numel > std::numeric_limits<int64_t>::max() / dim) bad();
    numel *= dim;
    shape.push_back(dim);
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
  if (header_len > data.size() - offset) fail(path, "truncated header");
  const std::string header = data.substr(offset, header_len);
  offset += header_len;

  const std::string descr = header_field(path, header, "descr");
  const std::string code = descr.substr(1, descr.size() - 2);
  if (code.size() != 3 || (code[0] != '<' && code[0] != '|' && code[0] != '=')) {
    fail(path, "unsupported dtype " + descr + " (expected a little-endian numeric type such as '<f4')");
  }
  const NpyType* type = nullptr;
  for (const auto& t : kTypes) {
    if (t.code == std::string_view(code).substr(1)) type = &t;
  }
  if (type == nullptr) fail(path, "unsupported dtype " + descr);
  if (header_field(path, header, "fortran_order") == "True") {
    fail(path, "Fortran-order arrays are not supported; save with np.ascontiguousarray");
  }
  const std::string shape_text = header_field(path, header, "shape");
  if (shape_text.front() != '(') fail(path, "bad shape " + shape_text + " (expected a tuple)");
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
