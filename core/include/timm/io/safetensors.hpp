// Reading and writing the safetensors format, without a third-party library.
//
// Layout: an 8-byte little-endian header length N, N bytes of JSON
// {name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {str: str}},
// then the data: packed, C-order, little-endian, offsets relative to its start.
// The reader validates everything before it copies a byte (header length,
// JSON, dtypes, shape x element size == byte span, offsets in bounds, the
// data covered exactly with no gap or overlap, BOOL bytes 0/1) and throws
// timm::Error naming the file and the problem. The writer is atomic: a temp
// file beside the target, fsync, rename; readers never see half a file.
//
// dtypes: F64 F32 F16 BF16 F8_E4M3 F8_E5M2 I64 I32 I16 I8 U64 U32 U16 U8 BOOL.
#pragma once

#include <filesystem>
#include <map>
#include <string>

#include "timm/io/named_tensors.hpp"

namespace timm {

struct SafetensorsFile {
  NamedTensors tensors;                         // CPU, contiguous, in header order
  std::map<std::string, std::string> metadata;  // "__metadata__", empty if absent
};

// The tensors and metadata of a safetensors file; tensors own their memory.
SafetensorsFile read_safetensors_file(const std::filesystem::path& path);

// The tensors of a safetensors file, in header order.
NamedTensors read_safetensors(const std::filesystem::path& path);

// Writes `tensors` (any device, any strides; detached and copied to CPU) and
// `metadata`. The data is laid out by element size, largest first (as the
// Python writer does), so every tensor starts aligned for zero-copy readers;
// the header lists the tensors in that order. Throws timm::Error on a
// duplicate or empty name, an unsupported dtype or an I/O failure, leaving no
// file behind and any previous file at `path` untouched.
void write_safetensors(const std::filesystem::path& path, const NamedTensors& tensors,
                       const std::map<std::string, std::string>& metadata = {});

}  // namespace timm
