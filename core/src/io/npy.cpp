#include "timm/io/npy.hpp"

#include <cstring>
#include <regex>
#include <string>
#include <string_view>
#include <vector>

#include <ATen/ATen.h>

#include "timm/core/error.hpp"
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

// The value of 'key' in the header dict literal, as raw text.
std::string header_field(const std::filesystem::path& path, const std::string& header, const std::string& key,
                         const std::string& value_pattern) {
  const std::regex pattern("['\"]" + key + "['\"]\\s*:\\s*(" + value_pattern + ")");
  std::smatch match;
  if (!std::regex_search(header, match, pattern)) fail(path, "header has no valid '" + key + "': " + header);
  return match[1].str();
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

  const std::string descr = header_field(path, header, "descr", "'[^']*'|\"[^\"]*\"");
  const std::string code = descr.substr(1, descr.size() - 2);
  if (code.size() != 3 || (code[0] != '<' && code[0] != '|' && code[0] != '=')) {
    fail(path, "unsupported dtype " + descr + " (expected a little-endian numeric type such as '<f4')");
  }
  const NpyType* type = nullptr;
  for (const auto& t : kTypes) {
    if (t.code == std::string_view(code).substr(1)) type = &t;
  }
  if (type == nullptr) fail(path, "unsupported dtype " + descr);
  if (header_field(path, header, "fortran_order", "True|False") == "True") {
    fail(path, "Fortran-order arrays are not supported; save with np.ascontiguousarray");
  }
  const std::string shape_text = header_field(path, header, "shape", "\\([^)]*\\)");
  std::vector<int64_t> shape;
  const std::regex number("\\d+");
  for (auto it = std::sregex_iterator(shape_text.begin(), shape_text.end(), number); it != std::sregex_iterator();
       ++it) {
    shape.push_back(std::stoll(it->str()));
  }
  at::Tensor out = at::empty(shape, at::TensorOptions().dtype(type->dtype));
  const size_t nbytes = static_cast<size_t>(out.numel()) * out.element_size();
  if (data.size() - offset != nbytes) {
    fail(path, "data holds " + std::to_string(data.size() - offset) + " bytes, the shape " + shape_text + " of " +
                   descr + " needs " + std::to_string(nbytes));
  }
  if (nbytes > 0) std::memcpy(out.data_ptr(), data.data() + offset, nbytes);
  return out;
}

void write_npy(const std::filesystem::path& path, const at::Tensor& tensor) {
  const at::Tensor t = tensor.detach().to(at::kCPU).contiguous();
  std::string descr;
  for (const auto& type : kTypes) {
    if (type.dtype == t.scalar_type())
      descr = std::string(type.dtype == at::kBool || type.code[1] == '1' ? "|" : "<") + std::string(type.code);
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
