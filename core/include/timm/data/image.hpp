// An 8-bit image in memory, decoding from JPEG and PNG, encoding to JPEG.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace timm {

// Interleaved 8-bit pixels, row-major, H x W x C with C = 1 (L) or 3 (RGB).
struct Image {
  int64_t height = 0;
  int64_t width = 0;
  int64_t channels = 0;
  std::vector<std::uint8_t> pixels;

  Image() = default;
  Image(int64_t h, int64_t w, int64_t c) : height(h), width(w), channels(c), pixels(h * w * c) {}
  std::uint8_t* row(int64_t y) { return pixels.data() + y * width * channels; }
  const std::uint8_t* row(int64_t y) const { return pixels.data() + y * width * channels; }
  bool empty() const { return pixels.empty(); }
};

// An image file as stored, not decoded (Dataset::encoded): JPEG or PNG
// bytes, and the channels its decode converts to (1: L, 3: RGB).
struct EncodedImage {
  std::vector<std::uint8_t> bytes;
  int64_t channels = 3;
};

// PIL's Image.MAX_IMAGE_PIXELS (1 GiB / 4 / 3). Decoding an image whose
// header declares more pixels logs a warning (once per process); more than
// twice as many throws Error before any pixel buffer is allocated (PIL's
// DecompressionBombError), so that the loader skips the file as a bad one.
constexpr int64_t kMaxImagePixels = 89478485;

// Decodes JPEG (libjpeg-turbo) or PNG (libpng), chosen by the file's magic
// bytes, converting to `channels` (1: PIL "L", 3: PIL "RGB"; alpha dropped,
// palettes expanded, grayscale expanded). A corrupt or unsupported file, or
// one over the pixel limit (kMaxImagePixels), throws Error naming `source`.
Image decode_image(std::span<const std::uint8_t> bytes, const std::string& source, int64_t channels);

// A JPEG's (height, width) from its header; nullopt when `bytes` is not a
// readable JPEG.
std::optional<std::pair<int64_t, int64_t>> jpeg_dimensions(std::span<const std::uint8_t> bytes);

// Decodes a JPEG at 1/denominator of its size (1, 2, 4 or 8) with
// libjpeg-turbo's DCT-domain scaling: ceil(width / d) x ceil(height / d),
// much cheaper than a full decode. Not PIL's pixels for d > 1 (PIL's
// draft mode would be the counterpart). Errors and the pixel limit (on the
// full size, as PIL checks it at open) as decode_image.
Image decode_jpeg_scaled(std::span<const std::uint8_t> bytes, const std::string& source, int64_t channels,
                         int denominator);

// Rows [top, top + image.height) and columns [left, left + image.width) of
// the JPEG decoded at 1/denominator (1, 2, 4 or 8), with pixels equal to
// decode_jpeg_scaled's (decode_image's when denominator is 1) there.
struct ImageRegion {
  Image image;
  int64_t top = 0;
  int64_t left = 0;
};

// Decodes at least the window [top, top + height) x [left, left + width) of
// the 1/denominator image (in its pixels, clamped to it), bit-identical to
// decode_jpeg_scaled there, doing only the work that window needs: libjpeg
// (jpeg_skip_scanlines, jpeg_crop_scanline) skips the inverse DCT, upsampling
// and colour conversion outside it (rows above and columns beside are still
// entropy-decoded) and stops after its last row. The decoded area is widened
// by one iMCU (three for progressive files) where the image continues, so
// that the edge effects of cropping (fancy chroma upsampling, progressive
// block smoothing) stay outside the window; the result is cut to the window.
// Takes the whole decode instead (returned with top = left = 0) for CMYK and
// YCCK, arithmetic coding, sampling factors over 2, a file that does not end
// with the EOI marker (possibly truncated: the whole decode reports it as
// decode_image does), any libjpeg warning or error (the whole decode then
// decides, with decode_image's errors and messages), an empty window, and a
// decoded area of 95% of the image or more. Header errors and the pixel
// limit as decode_jpeg_scaled; data corruption below the window goes
// unnoticed.
ImageRegion decode_jpeg_region(std::span<const std::uint8_t> bytes, const std::string& source, int64_t channels,
                               int denominator, int64_t top, int64_t left, int64_t height, int64_t width);

// A file's bytes, for decode_image. Throws Error naming `path` when it
// cannot be read.
std::vector<std::uint8_t> read_image_file(const std::filesystem::path& path);

// Reads and decodes a file: decode_image(read_image_file(path), path, channels).
Image read_image(const std::filesystem::path& path, int64_t channels);

// Encodes `image` (1 or 3 channels) as a baseline JPEG file's bytes with
// PIL's Image.save defaults: `quality` (PIL's 75 by default), 4:2:0 chroma
// subsampling for RGB, grayscale for L, libjpeg's accurate integer DCT.
// Throws Error for another channel count or a side over 65500 pixels.
std::string encode_jpeg(const Image& image, int quality = 75);

}  // namespace timm
