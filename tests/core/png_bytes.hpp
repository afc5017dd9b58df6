// PNG files written by hand for the data tests: valid ones from an image,
// and hostile ones whose header and data disagree (test_hostile_data).
// Header-only; the test links zlib.
#pragma once

#include <cstdint>
#include <string>

#include <zlib.h>

#include "timm/data/image.hpp"

// Last: c10/util/Logging.h defines a CHECK macro that doctest must override.
#include <doctest/doctest.h>

namespace timm::test {

inline void put_be32(std::string& out, std::uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out += static_cast<char>((v >> shift) & 0xFF);
}

// One chunk: length, type, data, CRC-32 of type and data.
inline void add_png_chunk(std::string& png, const char* type, const std::string& data) {
  put_be32(png, static_cast<std::uint32_t>(data.size()));
  const std::string body = std::string(type, 4) + data;
  png += body;
  put_be32(png, static_cast<std::uint32_t>(crc32(0, reinterpret_cast<const Bytef*>(body.data()), body.size())));
}

// An 8-bit PNG declaring width x height of `color_type` (0: gray, 2: RGB),
// non-interlaced, whose data is the zlib stream of `rows` as given (each
// row its filter byte, then its pixels; a hostile test passes rows that do
// not match the declared size).
inline std::string png_bytes(std::uint32_t width, std::uint32_t height, int color_type, const std::string& rows) {
  std::string png("\x89PNG\r\n\x1a\n", 8);
  std::string ihdr;
  put_be32(ihdr, width);
  put_be32(ihdr, height);
  ihdr += '\x08';                         // bit depth
  ihdr += static_cast<char>(color_type);  // 0 gray, 2 RGB
  ihdr += std::string(3, '\0');           // deflate, no filter method, no interlace
  add_png_chunk(png, "IHDR", ihdr);
  uLongf size = compressBound(rows.size());
  std::string idat(size, '\0');
  REQUIRE(compress(reinterpret_cast<Bytef*>(idat.data()), &size, reinterpret_cast<const Bytef*>(rows.data()),
                   rows.size()) == Z_OK);
  idat.resize(size);
  add_png_chunk(png, "IDAT", idat);
  add_png_chunk(png, "IEND", "");
  return png;
}

// An 8-bit RGB or L PNG of `image` (no row filters).
inline std::string png_of(const Image& image) {
  std::string rows;
  const auto row_bytes = static_cast<std::size_t>(image.width * image.channels);
  for (int64_t y = 0; y < image.height; ++y) {
    rows += '\0';
    rows.append(reinterpret_cast<const char*>(image.row(y)), row_bytes);
  }
  return png_bytes(static_cast<std::uint32_t>(image.width), static_cast<std::uint32_t>(image.height),
                   image.channels == 3 ? 2 : 0, rows);
}

}  // namespace timm::test
