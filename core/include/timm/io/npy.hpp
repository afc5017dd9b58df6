// Reading and writing NumPy's .npy format (version 1.0 to 3.0), without NumPy.
//
// Layout: the magic "\x93NUMPY", a version, a header length, a Python dict
// literal {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), } padded
// with spaces to a 64-byte boundary, then the packed data. The reader accepts
// little-endian (or byte-order-free) bool, int8..int64, uint8..uint64,
// float16/32/64 in C order, checks that the data size matches the shape and
// throws timm::Error naming the file and the problem otherwise (Fortran order,
// big-endian data, object arrays, a truncated file, a header over 1 MiB, a
// shape whose size overflows), before allocating anything beyond the file's
// own bytes. The writer is atomic.
#pragma once

#include <filesystem>

#include <ATen/core/Tensor.h>

namespace timm {

// The array in `path` as a CPU tensor that owns its memory.
at::Tensor read_npy(const std::filesystem::path& path);

// Writes `tensor` (any device, strides; copied to CPU, C order) as .npy 1.0.
void write_npy(const std::filesystem::path& path, const at::Tensor& tensor);

}  // namespace timm
