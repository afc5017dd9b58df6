// JPEG (TurboJPEG; libjpeg's partial decoding for crop windows) and PNG
// (libpng) decoding with PIL's conversions, so a decoded image equals PIL's
// Image.open(f).convert("RGB" | "L"); JPEG encoding with PIL's defaults.
#include "timm/data/image.hpp"

#include <c10/util/Exception.h>
#include <png.h>
#include <turbojpeg.h>

#include <algorithm>
#include <atomic>
#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>

// After <cstdio>: jpeglib.h needs FILE and size_t. Its generic helper macros
// would leak into the files a unity build compiles after this one.
#include <jpeglib.h>
#undef LOCAL
#undef GLOBAL
#undef EXTERN
#undef METHODDEF
#undef FAR
#undef JMETHOD
#undef JPP
#undef MULTIPLIER

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

struct JpegHeader {
  int width = 0;
  int height = 0;
  int subsamp = 0;
  int colorspace = 0;
};

// The header as TurboJPEG reads it (its errors, e.g. an unknown subsampling,
// are decode errors here), checked against the pixel limit.
JpegHeader read_jpeg_header(std::span<const std::uint8_t> bytes, const std::string& source) {
  tjhandle tj = thread_decompressor();
  JpegHeader h;
  // TurboJPEG's API takes a non-const pointer but does not write through it.
  if (tjDecompressHeader3(tj, const_cast<unsigned char*>(bytes.data()), static_cast<unsigned long>(bytes.size()),
                          &h.width, &h.height, &h.subsamp, &h.colorspace) != 0) {
    const std::string message = tjGetErrorStr2(tj);
    discard_thread_decompressor();
    fail(source, "corrupt JPEG header: " + message);
  }
  check_pixel_count(h.width, h.height, source);
  return h;
}

// The whole image at 1/denominator, after read_jpeg_header.
Image decode_jpeg_body(std::span<const std::uint8_t> bytes, const std::string& source, int64_t channels,
                       int denominator, const JpegHeader& header) {
  tjhandle tj = thread_decompressor();
  auto* data = const_cast<unsigned char*>(bytes.data());
  const auto size = static_cast<unsigned long>(bytes.size());
  int width = header.width, height = header.height;
  const int colorspace = header.colorspace;
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

Image decode_jpeg(std::span<const std::uint8_t> bytes, const std::string& source, int64_t channels,
                  int denominator = 1) {
  return decode_jpeg_body(bytes, source, channels, denominator, read_jpeg_header(bytes, source));
}

// ---- JPEG regions (libjpeg's partial decoding) -----------------------------

// One region decode's libjpeg state. libjpeg reports a fatal error through
// error_exit, which must not return: ours longjmps to the setjmp in
// run_jpeg_step. Between the two there are only libjpeg's C frames and the
// step functions, which hold no object with a destructor, so the longjmp
// skips no C++ cleanup; this struct lives in the caller's frame and its
// destructor frees libjpeg's memory on every way out.
struct JpegRegionDecoder {
  struct ErrorManager {
    jpeg_error_mgr pub;  // first: libjpeg's cinfo->err points at it
    void (*std_emit_message)(j_common_ptr, int);
    std::jmp_buf jump;
    bool warning;
    char message[JMSG_LENGTH_MAX];
  };
  jpeg_decompress_struct cinfo{};
  ErrorManager err{};
  jpeg_progress_mgr progress{};
  bool created = false;
  // The steps' inputs and results.
  const std::uint8_t* data = nullptr;
  unsigned long size = 0;
  int denominator = 1;
  J_COLOR_SPACE out_color_space = JCS_UNKNOWN;
  JDIMENSION xoffset = 0;
  JDIMENSION xwidth = 0;
  JDIMENSION skip = 0;
  JDIMENSION rows = 0;
  JDIMENSION rows_read = 0;
  JSAMPARRAY row_pointers = nullptr;

  JpegRegionDecoder() = default;
  JpegRegionDecoder(const JpegRegionDecoder&) = delete;
  JpegRegionDecoder& operator=(const JpegRegionDecoder&) = delete;
  ~JpegRegionDecoder() {
    if (created) jpeg_destroy_decompress(&cinfo);
  }
};

JpegRegionDecoder::ErrorManager& jpeg_region_errors(j_common_ptr cinfo) {
  return *reinterpret_cast<JpegRegionDecoder::ErrorManager*>(cinfo->err);
}

void jpeg_region_output_message(j_common_ptr cinfo) {
  (*cinfo->err->format_message)(cinfo, jpeg_region_errors(cinfo).message);
}

[[noreturn]] void jpeg_region_error_exit(j_common_ptr cinfo) {
  jpeg_region_output_message(cinfo);
  std::longjmp(jpeg_region_errors(cinfo).jump, 1);
}

// As TurboJPEG's: libjpeg's own (which keeps the first warning's text), and
// a note that there was a warning.
void jpeg_region_emit_message(j_common_ptr cinfo, int level) {
  JpegRegionDecoder::ErrorManager& err = jpeg_region_errors(cinfo);
  err.std_emit_message(cinfo, level);
  if (level < 0) err.warning = true;
}

// TJFLAG_LIMITSCANS: a progressive JPEG of more than 500 scans is an error.
void jpeg_region_progress(j_common_ptr cinfo) {
  if (cinfo->is_decompressor && reinterpret_cast<j_decompress_ptr>(cinfo)->input_scan_number > 500) {
    JpegRegionDecoder::ErrorManager& err = jpeg_region_errors(cinfo);
    std::snprintf(err.message, sizeof(err.message), "Progressive JPEG image has more than 500 scans");
    err.warning = false;
    std::longjmp(err.jump, 1);
  }
}

using JpegRegionStep = void (*)(JpegRegionDecoder&);

// Runs one step; false when libjpeg signalled a fatal error.
bool run_jpeg_step(JpegRegionDecoder& d, JpegRegionStep step) {
  if (setjmp(d.err.jump) != 0) return false;
  step(d);
  return true;
}

void jpeg_region_read_header(JpegRegionDecoder& d) {
  d.created = true;
  jpeg_create_decompress(&d.cinfo);
  d.cinfo.progress = &d.progress;
  jpeg_mem_src(&d.cinfo, d.data, d.size);
  jpeg_read_header(&d.cinfo, TRUE);
  // TurboJPEG's settings: its pixel format's colour space, the scale; the
  // ISLOW IDCT, fancy upsampling and block smoothing are libjpeg's defaults.
  d.cinfo.out_color_space = d.out_color_space;
  d.cinfo.scale_num = 1;
  d.cinfo.scale_denom = static_cast<unsigned int>(d.denominator);
  jpeg_calc_output_dimensions(&d.cinfo);
}

void jpeg_region_start(JpegRegionDecoder& d) {
  jpeg_start_decompress(&d.cinfo);
  if (d.xwidth < d.cinfo.output_width) jpeg_crop_scanline(&d.cinfo, &d.xoffset, &d.xwidth);
}

void jpeg_region_read_rows(JpegRegionDecoder& d) {
  if (d.skip > 0) jpeg_skip_scanlines(&d.cinfo, d.skip);
  while (d.rows_read < d.rows) {
    const JDIMENSION n = jpeg_read_scanlines(&d.cinfo, d.row_pointers + d.rows_read, d.rows - d.rows_read);
    if (n == 0) break;
    d.rows_read += n;
  }
}

// A complete JPEG ends with EOI. One that does not may be truncated, which
// only the rows past the cut would show: such files take the whole decode,
// which reports truncation as decode_image does.
bool ends_with_eoi(std::span<const std::uint8_t> b) {
  return b.size() >= 2 && b[b.size() - 2] == 0xFF && b[b.size() - 1] == 0xD9;
}

// The region path decodes the window widened by this many iMCUs where the
// image continues, left, right and above. jpeg_crop_scanline makes the
// cropped columns' edges image edges for fancy upsampling, which reads the
// neighbouring chroma sample: one iMCU keeps that off the window
// (tests/core/test_data_jpeg_region.cpp fails with none). The block
// smoothing of progressive files that stop before the last refinement scans
// makes the first two blocks of each cropped component row edge blocks, and
// upsampling reads one sample beyond: three iMCUs (it fails with two). Above,
// jpeg_skip_scanlines itself decodes the iMCU row before the first one it
// returns when upsampling needs context (the tests pass without a margin
// there too; it costs nothing measurable); below, nothing is needed: libjpeg
// decodes every row it returns with its context.
constexpr int kRegionMarginImcus = 1;
constexpr int kProgressiveRegionMarginImcus = 3;

// A region covering this share of the image costs what the whole decode does
// (measured): take the whole one and skip the copy out of it.
constexpr double kRegionMaxShare = 0.95;

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

ImageRegion decode_jpeg_region(std::span<const std::uint8_t> bytes, const std::string& source, int64_t channels,
                               int denominator, int64_t top, int64_t left, int64_t height, int64_t width) {
  TORCH_CHECK(denominator == 1 || denominator == 2 || denominator == 4 || denominator == 8,
              "decode_jpeg_region: denominator must be 1, 2, 4 or 8, got ", denominator);
  if (!is_jpeg(bytes)) fail(source, "not a JPEG file");
  const JpegHeader header = read_jpeg_header(bytes, source);
  auto decode_whole = [&] { return ImageRegion{decode_jpeg_body(bytes, source, channels, denominator, header), 0, 0}; };
  const int64_t image_h = (static_cast<int64_t>(header.height) + denominator - 1) / denominator;
  const int64_t image_w = (static_cast<int64_t>(header.width) + denominator - 1) / denominator;
  const int64_t t0 = std::clamp<int64_t>(top, 0, image_h);
  const int64_t t1 = std::clamp<int64_t>(top + height, t0, image_h);
  const int64_t l0 = std::clamp<int64_t>(left, 0, image_w);
  const int64_t l1 = std::clamp<int64_t>(left + width, l0, image_w);
  const bool gray = header.colorspace == TJCS_GRAY;
  const bool color = header.colorspace == TJCS_YCbCr || header.colorspace == TJCS_RGB;
  if (t0 == t1 || l0 == l1 || !(gray || color) || !ends_with_eoi(bytes)) return decode_whole();

  JpegRegionDecoder d;
  d.cinfo.err = jpeg_std_error(&d.err.pub);
  d.err.std_emit_message = d.err.pub.emit_message;
  d.err.pub.error_exit = jpeg_region_error_exit;
  d.err.pub.output_message = jpeg_region_output_message;
  d.err.pub.emit_message = jpeg_region_emit_message;
  d.progress.progress_monitor = jpeg_region_progress;
  d.data = bytes.data();
  d.size = static_cast<unsigned long>(bytes.size());
  d.denominator = denominator;
  d.out_color_space = gray ? JCS_GRAYSCALE : JCS_EXT_RGB;
  if (!run_jpeg_step(d, jpeg_region_read_header) || d.err.warning) return decode_whole();
  const jpeg_decompress_struct& c = d.cinfo;
  bool plain_sampling = c.num_components == (gray ? 1 : 3);
  for (int i = 0; plain_sampling && i < c.num_components; ++i) {
    const jpeg_component_info& comp = c.comp_info[i];
    plain_sampling =
        comp.h_samp_factor >= 1 && comp.h_samp_factor <= 2 && comp.v_samp_factor >= 1 && comp.v_samp_factor <= 2;
  }
  if (c.arith_code || !plain_sampling || c.output_height != image_h || c.output_width != image_w ||
      c.output_components != (gray ? 1 : 3)) {
    return decode_whole();
  }
#if JPEG_LIB_VERSION >= 70
  const int64_t dct_size = c.min_DCT_h_scaled_size;
#else
  const int64_t dct_size = c.min_DCT_scaled_size;
#endif
  const int64_t imcu_h = dct_size * c.max_v_samp_factor;
  const int64_t imcu_w = dct_size * c.max_h_samp_factor;
  const int margin = c.progressive_mode ? kProgressiveRegionMarginImcus : kRegionMarginImcus;
  // Rows: from an iMCU boundary `margin` iMCUs above the window's; libjpeg
  // decodes each row with its context, so none are needed below.
  const int64_t r0 = std::max<int64_t>(0, (t0 / imcu_h - margin) * imcu_h);
  const int64_t r1 = t1;
  // Columns: libjpeg moves the left edge down to an iMCU boundary itself.
  const int64_t x0 = std::max<int64_t>(0, l0 - margin * imcu_w);
  const int64_t x1 = std::min(image_w, l1 + margin * imcu_w);
  const int64_t x0_aligned = x0 / imcu_w * imcu_w;
  if (static_cast<double>((r1 - r0) * (x1 - x0_aligned)) >= kRegionMaxShare * static_cast<double>(image_h * image_w)) {
    return decode_whole();
  }
  d.xoffset = static_cast<JDIMENSION>(x0);
  d.xwidth = static_cast<JDIMENSION>(x1 - x0);
  if (!run_jpeg_step(d, jpeg_region_start) || d.err.warning) return decode_whole();
  // Where libjpeg put the region's columns (x0 moved down to an iMCU
  // boundary); it must hold the window.
  const int64_t left_out = d.xoffset;
  const int64_t width_out = c.output_width;
  if (left_out > l0 || left_out + width_out < l1) return decode_whole();
  const int64_t comps = gray ? 1 : 3;
  const int64_t row_bytes = width_out * comps;
  std::vector<std::uint8_t> raw(static_cast<std::size_t>((r1 - r0) * row_bytes));
  std::vector<JSAMPROW> rows(static_cast<std::size_t>(r1 - r0));
  for (int64_t y = 0; y < r1 - r0; ++y) rows[y] = raw.data() + y * row_bytes;
  d.skip = static_cast<JDIMENSION>(r0);
  d.rows = static_cast<JDIMENSION>(r1 - r0);
  d.row_pointers = rows.data();
  // Any warning or error: the whole decode decides, as decode_image would.
  if (!run_jpeg_step(d, jpeg_region_read_rows) || d.err.warning || d.rows_read != d.rows) return decode_whole();

  // Keep only the window: move its rows to the front of the buffer.
  const int64_t out_h = t1 - t0, out_w = l1 - l0;
  const int64_t out_row_bytes = out_w * comps;
  for (int64_t y = 0; y < out_h; ++y) {
    std::memmove(raw.data() + y * out_row_bytes, raw.data() + (y + t0 - r0) * row_bytes + (l0 - left_out) * comps,
                 static_cast<std::size_t>(out_row_bytes));
  }
  raw.resize(static_cast<std::size_t>(out_h * out_row_bytes));
  ImageRegion region;
  region.top = t0;
  region.left = l0;
  region.image.height = out_h;
  region.image.width = out_w;
  region.image.channels = comps;
  region.image.pixels = std::move(raw);
  if (comps != channels) region.image = convert_channels(region.image, channels);
  return region;
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
