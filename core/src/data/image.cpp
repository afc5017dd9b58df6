// JPEG (TurboJPEG) and PNG (libpng) decoding with PIL's conversions, so a
// decoded image equals PIL's Image.open(f).convert("RGB" | "L"); JPEG
// encoding with PIL's defaults.
#include "timm/data/image.hpp"

#include <c10/util/Exception.h>
#include <png.h>
#include <turbojpeg.h>

#include <algorithm>
#include <atomic>
#include <csetjmp>
#include <cstring>
#include <fstream>
#include <memory>

#include "timm/base/error.hpp"
#include "timm/data/image_ops.hpp"
#include "timm/log/log.hpp"

namespace timm {
namespace {

bool is_jpeg(std::span<const std::uint8_t> b) { return b.size() >= 3 && b[0] == 0xFF && b[1] == 0xD8 && b[2] == 0xFF; }

bool is_png(std::span<const std::uint8_t> b) {
  static constexpr std::uint8_t kMagic[8] = {0x89, 'P', 'N', 'G', 0x0D, 0x0A, 0x1A, 0x0A};
  return b.size() >= 8 && std::memcmp(b.data(), kMagic, 8) == 0;
}

[[noreturn]] void fail(const std::string& source, const std::string& what) {
  throw Error("image " + in_quotes(source) + ": " + what);
}

// PIL's _decompression_bomb_check, on the size a header declares and before
// any pixel buffer exists: a JPEG or PNG of a few hundred bytes may declare
// 65000x65000 pixels (12.7 GB as RGB, per loader worker).
void check_pixel_count(int64_t width, int64_t height, const std::string& source) {
  const int64_t pixels = width * height;
  const std::string size =
      std::to_string(width) + "x" + std::to_string(height) + " (" + std::to_string(pixels) + " pixels)";
  if (pixels > 2 * kMaxImagePixels) {
    fail(source, size + " exceeds the limit of " + std::to_string(2 * kMaxImagePixels) +
                     " pixels; refused as a possible decompression bomb, as PIL does");
  }
  // PIL warns through Python's warnings, which show it once per place.
  static std::atomic<bool> warned{false};
  if (pixels > kMaxImagePixels && !warned.exchange(true)) {
    log_warning("image " + in_quotes(source) + ": " + size + " exceeds PIL's MAX_IMAGE_PIXELS (" +
                std::to_string(kMaxImagePixels) + "), could be a decompression bomb; decoding it (warned once)");
  }
}

// ---- JPEG ------------------------------------------------------------------

// One decompressor per thread: creating one costs more than a small decode.
struct TjHandle {
  tjhandle handle = tjInitDecompress();
  ~TjHandle() {
    if (handle != nullptr) tjDestroy(handle);
  }
};

TjHandle& thread_handle() {
  thread_local TjHandle h;
  return h;
}

tjhandle thread_decompressor() {
  TjHandle& h = thread_handle();
  if (h.handle == nullptr) h.handle = tjInitDecompress();
  if (h.handle == nullptr) throw Error(std::string("TurboJPEG: cannot create a decompressor: ") + tjGetErrorStr());
  return h.handle;
}

// libjpeg-turbo's tjDecompressHeader3 (2.1.5 here) leaves the handle in the failed
// stream's state after an error: every later header read on it fails with
// the same message (a bad file would make the thread's next files "bad"
// too). After a failure the thread takes a fresh decompressor. Call it after
// reading the handle's error message.
void discard_thread_decompressor() {
  TjHandle& h = thread_handle();
  if (h.handle != nullptr) tjDestroy(h.handle);
  h.handle = nullptr;
}

// PIL reads CMYK JPEGs as Adobe-inverted ("CMYK;I") and converts with cmyk2rgb.
void cmyk_to_rgb(const std::uint8_t* in, std::uint8_t* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i, in += 4, out += 3) {
    const int nk = in[3];  // 255 - K after undoing the inversion
    for (int c = 0; c < 3; ++c) {
      const int v = 255 - in[c];
      int tmp = v * nk + 128;
      tmp = ((tmp >> 8) + tmp) >> 8;
      out[c] = static_cast<std::uint8_t>(std::clamp(nk - tmp, 0, 255));
    }
  }
}

Image decode_jpeg(std::span<const std::uint8_t> bytes, const std::string& source, int64_t channels,
                  int denominator = 1) {
  tjhandle tj = thread_decompressor();
  // TurboJPEG's API takes a non-const pointer but does not write through it.
  auto* data = const_cast<unsigned char*>(bytes.data());
  const auto size = static_cast<unsigned long>(bytes.size());
  int width = 0, height = 0, subsamp = 0, colorspace = 0;
  if (tjDecompressHeader3(tj, data, size, &width, &height, &subsamp, &colorspace) != 0) {
    const std::string message = tjGetErrorStr2(tj);
    discard_thread_decompressor();
    fail(source, "corrupt JPEG header: " + message);
  }
  check_pixel_count(width, height, source);
  const bool gray = colorspace == TJCS_GRAY;
  const bool cmyk = colorspace == TJCS_CMYK || colorspace == TJCS_YCCK;
  const int pixel_format = gray ? TJPF_GRAY : (cmyk ? TJPF_CMYK : TJPF_RGB);
  const int decoded_channels = gray ? 1 : (cmyk ? 4 : 3);
  // DCT-domain downscaling: libjpeg-turbo's scaled IDCT at 1/2, 1/4 or 1/8.
  const tjscalingfactor factor{1, denominator};
  width = TJSCALED(width, factor);
  height = TJSCALED(height, factor);
  std::vector<std::uint8_t> raw(static_cast<std::size_t>(width) * height * decoded_channels);
  // Exact (ISLOW, fancy upsampling) by default, as PIL decodes. A progressive
  // JPEG of thousands of tiny scans costs minutes: over 500, an error.
  if (tjDecompress2(tj, data, size, raw.data(), width, 0, height, pixel_format, TJFLAG_LIMITSCANS) != 0) {
    const std::string message = tjGetErrorStr2(tj);
    // libjpeg warnings (extraneous bytes, ...) leave a usable image and PIL
    // accepts them; a truncated file is an error in PIL and here.
    const bool warning = tjGetErrorCode(tj) == TJERR_WARNING;
    if (!warning || message.find("Premature end") != std::string::npos) {
      discard_thread_decompressor();
      fail(source, "corrupt JPEG data: " + message);
    }
  }
  Image image;
  if (cmyk) {
    image = Image(height, width, 3);
    cmyk_to_rgb(raw.data(), image.pixels.data(), static_cast<int64_t>(width) * height);
  } else {
    image.height = height;
    image.width = width;
    image.channels = decoded_channels;
    image.pixels = std::move(raw);
  }
  // Already in the wanted mode: hand the buffer over instead of copying it.
  if (image.channels == channels) return image;
  return convert_channels(image, channels);
}

// ---- PNG -------------------------------------------------------------------

struct PngReader {
  std::span<const std::uint8_t> bytes;
  std::size_t offset = 0;
  std::string error;
};

void png_read_callback(png_structp png, png_bytep out, png_size_t length) {
  auto* reader = static_cast<PngReader*>(png_get_io_ptr(png));
  if (reader->offset + length > reader->bytes.size()) png_error(png, "truncated file");
  std::memcpy(out, reader->bytes.data() + reader->offset, length);
  reader->offset += length;
}

void png_error_callback(png_structp png, png_const_charp message) {
  auto* reader = static_cast<PngReader*>(png_get_error_ptr(png));
  reader->error = message;
  png_longjmp(png, 1);
}

void png_warning_callback(png_structp, png_const_charp) {}

// Frees libpng's structs on every way out, the longjmp-then-throw one too.
struct PngStructs {
  png_structp png = nullptr;
  png_infop info = nullptr;
  ~PngStructs() {
    if (png != nullptr) png_destroy_read_struct(&png, info != nullptr ? &info : nullptr, nullptr);
  }
};

// Converts one decoded row to RGB or L as PIL's modes do: 16-bit samples keep
// their high byte, except 16-bit grayscale, which PIL opens as "I;16" and
// clips to 255 when converting.
void convert_png_row(const std::uint8_t* in, std::uint8_t* out, int64_t width, int color_type, int bit_depth,
                     int64_t channels) {
  const int samples = (color_type & PNG_COLOR_MASK_COLOR ? 3 : 1) + (color_type & PNG_COLOR_MASK_ALPHA ? 1 : 0);
  const int bytes = bit_depth == 16 ? 2 : 1;
  const bool clip16 = bit_depth == 16 && color_type == PNG_COLOR_TYPE_GRAY;
  auto sample = [&](int64_t x, int s) -> std::uint8_t {
    const std::uint8_t* p = in + (x * samples + s) * bytes;
    if (bytes == 1) return p[0];
    if (clip16) return p[0] != 0 ? 255 : p[1];
    return p[0];
  };
  const bool color = color_type & PNG_COLOR_MASK_COLOR;
  for (int64_t x = 0; x < width; ++x) {
    if (color) {
      const std::uint8_t rgb[3] = {sample(x, 0), sample(x, 1), sample(x, 2)};
      if (channels == 3) {
        std::memcpy(out + x * 3, rgb, 3);
      } else {
        out[x] = static_cast<std::uint8_t>((rgb[0] * 19595 + rgb[1] * 38470 + rgb[2] * 7471 + 0x8000) >> 16);
      }
    } else {
      const std::uint8_t v = sample(x, 0);
      if (channels == 3) {
        std::memset(out + x * 3, v, 3);
      } else {
        out[x] = v;
      }
    }
  }
}

Image decode_png(std::span<const std::uint8_t> bytes, const std::string& source, int64_t channels) {
  PngReader reader{bytes, 0, {}};
  PngStructs structs;
  structs.png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &reader, png_error_callback, png_warning_callback);
  png_structp png = structs.png;
  if (png == nullptr) fail(source, "libpng: out of memory");
  structs.info = png_create_info_struct(png);
  png_infop info = structs.info;
  // Buffers live outside the setjmp scope so a longjmp cannot skip their
  // destructors' bookkeeping.
  std::vector<std::uint8_t> raw;
  std::vector<png_bytep> rows;
  Image image;
  if (info == nullptr || setjmp(png_jmpbuf(png))) {
    fail(source, "corrupt PNG: " + (reader.error.empty() ? std::string("libpng failed") : reader.error));
  }
  png_set_read_fn(png, &reader, png_read_callback);
  // PIL does not check CRCs of ancillary chunks strictly either; keep
  // critical-chunk CRC errors fatal.
  png_read_info(png, info);
  const png_uint_32 width = png_get_image_width(png, info);
  const png_uint_32 height = png_get_image_height(png, info);
  check_pixel_count(width, height, source);
  int color_type = png_get_color_type(png, info);
  int bit_depth = png_get_bit_depth(png, info);
  if (color_type == PNG_COLOR_TYPE_PALETTE) {
    png_set_palette_to_rgb(png);
  } else if (bit_depth < 8) {
    png_set_expand_gray_1_2_4_to_8(png);  // scales as PIL's "1", "L;2", "L;4"
  }
  png_set_interlace_handling(png);
  png_read_update_info(png, info);
  // The row layout after the transforms: palette expansion adds an alpha
  // channel when there is a tRNS chunk, which the conversion then drops.
  color_type = png_get_color_type(png, info);
  bit_depth = png_get_bit_depth(png, info);
  const std::size_t rowbytes = png_get_rowbytes(png, info);
  raw.resize(rowbytes * height);
  rows.resize(height);
  for (png_uint_32 y = 0; y < height; ++y) rows[y] = raw.data() + y * rowbytes;
  png_read_image(png, rows.data());
  png_read_end(png, nullptr);

  image = Image(height, width, channels);
  for (png_uint_32 y = 0; y < height; ++y)
    convert_png_row(rows[y], image.row(y), width, color_type, bit_depth, channels);
  return image;
}

}  // namespace

Image decode_image(std::span<const std::uint8_t> bytes, const std::string& source, int64_t channels) {
  if (channels != 1 && channels != 3) {
    throw Error("image " + in_quotes(source) + ": cannot convert to " + std::to_string(channels) +
                " channels; expected 1 (L) or 3 (RGB)");
  }
  if (is_jpeg(bytes)) return decode_jpeg(bytes, source, channels);
  if (is_png(bytes)) return decode_png(bytes, source, channels);
  fail(source, bytes.empty() ? "empty file" : "unsupported image format; expected JPEG or PNG");
}

std::optional<std::pair<int64_t, int64_t>> jpeg_dimensions(std::span<const std::uint8_t> bytes) {
  if (!is_jpeg(bytes)) return std::nullopt;
  tjhandle tj = thread_decompressor();
  int width = 0, height = 0, subsamp = 0, colorspace = 0;
  if (tjDecompressHeader3(tj, const_cast<unsigned char*>(bytes.data()), static_cast<unsigned long>(bytes.size()),
                          &width, &height, &subsamp, &colorspace) != 0) {
    discard_thread_decompressor();
    return std::nullopt;
  }
  return std::pair<int64_t, int64_t>{height, width};
}

Image decode_jpeg_scaled(std::span<const std::uint8_t> bytes, const std::string& source, int64_t channels,
                         int denominator) {
  TORCH_CHECK(denominator == 1 || denominator == 2 || denominator == 4 || denominator == 8,
              "decode_jpeg_scaled: denominator must be 1, 2, 4 or 8, got ", denominator);
  if (!is_jpeg(bytes)) fail(source, "not a JPEG file");
  return decode_jpeg(bytes, source, channels, denominator);
}

std::string encode_jpeg(const Image& image, int quality) {
  if (image.channels != 1 && image.channels != 3) {
    throw Error("JPEG encoding: " + std::to_string(image.channels) + "-channel image; expected 1 (L) or 3 (RGB)");
  }
  TORCH_CHECK(quality >= 1 && quality <= 100, "encode_jpeg: quality must be in [1, 100], got ", quality);
  TORCH_CHECK(image.height > 0 && image.width > 0 &&
                  image.pixels.size() == static_cast<std::size_t>(image.height * image.width * image.channels),
              "encode_jpeg: ", image.height, "x", image.width, "x", image.channels, " image with ", image.pixels.size(),
              " bytes");
  constexpr int64_t kMaxSide = 65500;  // libjpeg's JPEG_MAX_DIMENSION
  if (image.height > kMaxSide || image.width > kMaxSide) {
    throw Error("JPEG encoding: " + std::to_string(image.width) + "x" + std::to_string(image.height) +
                " exceeds JPEG's 65500 pixels per side");
  }
  struct Compressor {
    tjhandle handle = tjInitCompress();
    unsigned char* buffer = nullptr;
    ~Compressor() {
      tjFree(buffer);
      if (handle != nullptr) tjDestroy(handle);
    }
  } tj;
  if (tj.handle == nullptr) throw Error(std::string("TurboJPEG: cannot create a compressor: ") + tjGetErrorStr());
  const bool gray = image.channels == 1;
  unsigned long size = 0;
  // PIL's defaults: 4:2:0 chroma subsampling for RGB, the accurate DCT, no
  // optimised Huffman tables, baseline.
  if (tjCompress2(tj.handle, image.pixels.data(), static_cast<int>(image.width), 0, static_cast<int>(image.height),
                  gray ? TJPF_GRAY : TJPF_RGB, &tj.buffer, &size, gray ? TJSAMP_GRAY : TJSAMP_420, quality,
                  TJFLAG_ACCURATEDCT) != 0) {
    throw Error(std::string("JPEG encoding failed: ") + tjGetErrorStr2(tj.handle));
  }
  return std::string(reinterpret_cast<const char*>(tj.buffer), size);
}

std::vector<std::uint8_t> read_image_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) throw Error("image " + in_quotes(path.string()) + ": cannot open file");
  const std::streamsize size = in.tellg();
  in.seekg(0);
  std::vector<std::uint8_t> bytes(static_cast<std::size_t>(std::max<std::streamsize>(size, 0)));
  if (size > 0 && !in.read(reinterpret_cast<char*>(bytes.data()), size)) {
    throw Error("image " + in_quotes(path.string()) + ": read failed");
  }
  return bytes;
}

Image read_image(const std::filesystem::path& path, int64_t channels) {
  return decode_image(read_image_file(path), path.string(), channels);
}

}  // namespace timm
