#include "timm/data/image_ops.hpp"

#include <c10/util/Exception.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "timm/base/error.hpp"
#include "timm/base/simd.hpp"

namespace timm {
namespace {

// ---- Pillow's resampling filters (Resample.c), kept bit-for-bit. ----------

double box_filter(double x) { return (x > -0.5 && x <= 0.5) ? 1.0 : 0.0; }

double bilinear_filter(double x) {
  x = std::fabs(x);
  return x < 1.0 ? 1.0 - x : 0.0;
}

double hamming_filter(double x) {
  x = std::fabs(x);
  if (x == 0.0) return 1.0;
  if (x >= 1.0) return 0.0;
  x = x * M_PI;
  // Pillow writes the constants as floats; keep them floats.
  return std::sin(x) / x * (0.54f + 0.46f * std::cos(x));
}

double bicubic_filter(double x) {
  constexpr double a = -0.5;
  x = std::fabs(x);
  if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1;
  if (x < 2.0) return (((x - 5) * x + 8) * x - 4) * a;
  return 0.0;
}

double sinc_filter(double x) {
  if (x == 0.0) return 1.0;
  x = x * M_PI;
  return std::sin(x) / x;
}

double lanczos_filter(double x) {
  if (-3.0 <= x && x < 3.0) return sinc_filter(x) * sinc_filter(x / 3);
  return 0.0;
}

struct FilterSpec {
  double (*fn)(double);
  double support;
};

FilterSpec filter_spec(Interpolation interpolation) {
  switch (interpolation) {
    case Interpolation::kBox:
      return {box_filter, 0.5};
    case Interpolation::kBilinear:
      return {bilinear_filter, 1.0};
    case Interpolation::kHamming:
      return {hamming_filter, 1.0};
    case Interpolation::kBicubic:
      return {bicubic_filter, 2.0};
    case Interpolation::kLanczos:
      return {lanczos_filter, 3.0};
    case Interpolation::kNearest:
      break;
  }
  TORCH_INTERNAL_ASSERT(false, "nearest has no resampling filter");
}

// 8 bits of result, 2 bits of headroom for negative lobes and overshoot.
constexpr int kPrecisionBits = 32 - 8 - 2;

// Fixed-point coefficients of one axis: output i reads `count[i]` inputs
// starting at `first[i]` with weights k[i * ksize ...].
struct AxisCoeffs {
  int ksize = 0;
  std::vector<int> first;
  std::vector<int> count;
  std::vector<std::int32_t> k;
};

// Pillow's precompute_coeffs + normalize_coeffs_8bpc for resizing the box
// [in0, in1) of `in_size` samples (default: all of them) to `out_size`.
AxisCoeffs precompute_coeffs(int in_size, int out_size, const FilterSpec& filter, double in0 = 0.0, double in1 = -1.0) {
  if (in1 < 0.0) in1 = in_size;
  const double scale = (in1 - in0) / out_size;
  const double filterscale = std::max(scale, 1.0);
  const double support = filter.support * filterscale;
  AxisCoeffs c;
  c.ksize = static_cast<int>(std::ceil(support)) * 2 + 1;
  c.first.resize(out_size);
  c.count.resize(out_size);
  c.k.assign(static_cast<std::size_t>(out_size) * c.ksize, 0);
  std::vector<double> w(c.ksize);
  for (int xx = 0; xx < out_size; ++xx) {
    const double center = in0 + (xx + 0.5) * scale;
    const double ss = 1.0 / filterscale;
    int xmin = static_cast<int>(center - support + 0.5);
    xmin = std::max(xmin, 0);
    int xmax = static_cast<int>(center + support + 0.5);
    xmax = std::min(xmax, in_size) - xmin;
    double ww = 0.0;
    for (int x = 0; x < xmax; ++x) {
      w[x] = filter.fn((x + xmin - center + 0.5) * ss);
      ww += w[x];
    }
    std::int32_t* k = &c.k[static_cast<std::size_t>(xx) * c.ksize];
    for (int x = 0; x < xmax; ++x) {
      const double v = ww != 0.0 ? w[x] / ww : w[x];
      k[x] = static_cast<std::int32_t>(v < 0 ? -0.5 + v * (1 << kPrecisionBits) : 0.5 + v * (1 << kPrecisionBits));
    }
    c.first[xx] = xmin;
    c.count[xx] = std::max(xmax, 0);
  }
  return c;
}

inline std::uint8_t clip8(int v) {
  v >>= kPrecisionBits;
  return static_cast<std::uint8_t>(v < 0 ? 0 : (v > 255 ? 255 : v));
}

// A read-only window of an image: `rows` rows of `cols` pixels.
struct View {
  const std::uint8_t* data;
  int64_t stride;  // bytes per row
  int rows;
  int cols;
};

template <int C>
void resample_horizontal(const View& in, const AxisCoeffs& c, Image& out) {
  const int out_w = static_cast<int>(out.width);
  for (int y = 0; y < in.rows; ++y) {
    const std::uint8_t* src = in.data + y * in.stride;
    std::uint8_t* dst = out.row(y);
    for (int xx = 0; xx < out_w; ++xx) {
      const std::int32_t* k = &c.k[static_cast<std::size_t>(xx) * c.ksize];
      const std::uint8_t* s = src + static_cast<int64_t>(c.first[xx]) * C;
      int ss[C];
      for (int ch = 0; ch < C; ++ch) ss[ch] = 1 << (kPrecisionBits - 1);
      for (int x = 0; x < c.count[xx]; ++x) {
        for (int ch = 0; ch < C; ++ch) ss[ch] += s[x * C + ch] * k[x];
      }
      for (int ch = 0; ch < C; ++ch) dst[xx * C + ch] = clip8(ss[ch]);
    }
  }
}

#if defined(__x86_64__)
// resample_horizontal<3> with one SSE4.1 multiply-add per tap for all three
// channels (a 32-bit lane each; the fourth lane takes the next pixel's first
// byte and is dropped): the same 32-bit integer sums, bit for bit. A tap on
// the row's last pixel is added on its own, so that no load passes the row.
__attribute__((target("sse4.1"))) void resample_horizontal_rgb_sse41(const View& in, const AxisCoeffs& c, Image& out) {
  const int out_w = static_cast<int>(out.width);
  for (int y = 0; y < in.rows; ++y) {
    const std::uint8_t* src = in.data + y * in.stride;
    std::uint8_t* dst = out.row(y);
    for (int xx = 0; xx < out_w; ++xx) {
      const std::int32_t* k = &c.k[static_cast<std::size_t>(xx) * c.ksize];
      const std::uint8_t* s = src + static_cast<int64_t>(c.first[xx]) * 3;
      const int count = c.count[xx];
      const int vector_taps = c.first[xx] + count < in.cols ? count : count - 1;
      __m128i acc = _mm_set1_epi32(1 << (kPrecisionBits - 1));
      for (int x = 0; x < vector_taps; ++x) {
        std::int32_t bytes;
        std::memcpy(&bytes, s + x * 3, sizeof(bytes));
        const __m128i pixel = _mm_cvtepu8_epi32(_mm_cvtsi32_si128(bytes));
        acc = _mm_add_epi32(acc, _mm_mullo_epi32(pixel, _mm_set1_epi32(k[x])));
      }
      alignas(16) int ss[4];
      _mm_store_si128(reinterpret_cast<__m128i*>(ss), acc);
      for (int x = vector_taps; x < count; ++x) {
        for (int ch = 0; ch < 3; ++ch) ss[ch] += s[x * 3 + ch] * k[x];
      }
      for (int ch = 0; ch < 3; ++ch) dst[xx * 3 + ch] = clip8(ss[ch]);
    }
  }
}

bool has_sse41() {
  static const bool supported = __builtin_cpu_supports("sse4.1");
  return supported;
}
#endif

// Rows outer, taps inner over a whole row: the same integer sums as Pillow's
// loop order (integer addition commutes), but contiguous and vectorisable
// (an AVX2 clone where the CPU has it: 32-bit multiplies in one instruction).
TIMM_AVX2_CLONES
void resample_vertical(const View& in, int channels, const AxisCoeffs& c, Image& out) {
  const int n = in.cols * channels;
  std::vector<int> acc(n);
  for (int yy = 0; yy < static_cast<int>(out.height); ++yy) {
    std::fill(acc.begin(), acc.end(), 1 << (kPrecisionBits - 1));
    const std::int32_t* k = &c.k[static_cast<std::size_t>(yy) * c.ksize];
    for (int y = 0; y < c.count[yy]; ++y) {
      const std::uint8_t* src = in.data + (c.first[yy] + y) * in.stride;
      const int ky = k[y];
      for (int i = 0; i < n; ++i) acc[i] += src[i] * ky;
    }
    std::uint8_t* dst = out.row(yy);
    for (int i = 0; i < n; ++i) dst[i] = clip8(acc[i]);
  }
}

// PIL's nearest resize: ImagingScaleAffine, with its accumulated positions.
std::vector<int> nearest_table(int in_size, int out_size) {
  const double a = static_cast<double>(in_size) / out_size;
  std::vector<int> table(out_size);
  double pos = a * 0.5;
  for (int i = 0; i < out_size; ++i) {
    const int v = pos < 0.0 ? -1 : static_cast<int>(pos);
    table[i] = std::clamp(v, 0, in_size - 1);
    pos += a;
  }
  return table;
}

Image resize_nearest(const View& in, int channels, int out_h, int out_w) {
  const std::vector<int> xs = nearest_table(in.cols, out_w);
  const std::vector<int> ys = nearest_table(in.rows, out_h);
  Image out(out_h, out_w, channels);
  for (int y = 0; y < out_h; ++y) {
    const std::uint8_t* src = in.data + ys[y] * in.stride;
    std::uint8_t* dst = out.row(y);
    for (int x = 0; x < out_w; ++x) std::memcpy(dst + x * channels, src + xs[x] * channels, channels);
  }
  return out;
}

Image copy_view(const View& in, int channels) {
  Image out(in.rows, in.cols, channels);
  for (int y = 0; y < in.rows; ++y) std::memcpy(out.row(y), in.data + y * in.stride, in.cols * channels);
  return out;
}

View whole(const Image& image) {
  return View{image.pixels.data(), image.width * image.channels, static_cast<int>(image.height),
              static_cast<int>(image.width)};
}

Image resample_horizontal_pass(const View& in, int channels, int out_w, const FilterSpec& filter) {
  const AxisCoeffs horiz = precompute_coeffs(in.cols, out_w, filter);
  Image out(in.rows, out_w, channels);
  if (channels == 1) {
    resample_horizontal<1>(in, horiz, out);
  } else if (channels == 3) {
#if defined(__x86_64__)
    if (has_sse41()) {
      resample_horizontal_rgb_sse41(in, horiz, out);
      return out;
    }
#endif
    resample_horizontal<3>(in, horiz, out);
  } else {
    TORCH_CHECK(false, "resize: unsupported channel count ", channels);
  }
  return out;
}

// ImagingResampleInner over a window that lies inside the image.
Image resample_view(const View& in, int channels, int out_h, int out_w, Interpolation interpolation) {
  if (out_h == in.rows && out_w == in.cols) return copy_view(in, channels);
  if (interpolation == Interpolation::kNearest) return resize_nearest(in, channels, out_h, out_w);
  const FilterSpec filter = filter_spec(interpolation);
  const bool need_horizontal = out_w != in.cols;
  const bool need_vertical = out_h != in.rows;

  AxisCoeffs vert = precompute_coeffs(in.rows, out_h, filter);
  // Only the source rows the vertical pass reads are resampled horizontally.
  const int y_first = vert.first.front();
  const int y_last = vert.first.back() + vert.count.back();

  // Pillow 13 (python-pillow/Pillow#9549) runs the vertical pass first when
  // the height shrinks by more than twice the pixels the width does. The
  // order matters for filters with negative lobes: the intermediate image is
  // clipped to 8 bits.
  const bool vertical_first =
      need_horizontal && need_vertical && out_h < in.rows && 2 * (in.cols - out_w) < (in.rows - out_h);
  if (vertical_first) {
    Image temp(out_h, in.cols, channels);
    resample_vertical(in, channels, vert, temp);
    return resample_horizontal_pass(whole(temp), channels, out_w, filter);
  }

  View src = in;
  Image temp;
  if (need_horizontal) {
    const View rows{in.data + y_first * in.stride, in.stride, y_last - y_first, in.cols};
    temp = resample_horizontal_pass(rows, channels, out_w, filter);
    for (int& f : vert.first) f -= y_first;
    src = whole(temp);
  }
  if (!need_vertical) return need_horizontal ? std::move(temp) : copy_view(in, channels);
  Image out(out_h, src.cols, channels);
  resample_vertical(src, channels, vert, out);
  return out;
}

void check_size(int64_t h, int64_t w, const char* what) {
  if (h <= 0 || w <= 0) {
    throw Error(std::string(what) + ": size must be positive, got " + std::to_string(h) + "x" + std::to_string(w));
  }
}

// Crop with a per-channel fill for pixels outside the image.
Image crop_filled(const Image& src, int64_t top, int64_t left, int64_t height, int64_t width,
                  std::span<const std::uint8_t> fill) {
  const int64_t c = src.channels;
  Image out(height, width, c);
  for (int64_t x = 0; x < width; ++x) {
    for (int64_t ch = 0; ch < c; ++ch) out.pixels[x * c + ch] = fill.empty() ? 0 : fill[fill.size() == 1 ? 0 : ch];
  }
  for (int64_t y = 1; y < height; ++y) std::memcpy(out.row(y), out.row(0), width * c);
  const int64_t x0 = std::max<int64_t>(left, 0), x1 = std::min(left + width, src.width);
  const int64_t y0 = std::max<int64_t>(top, 0), y1 = std::min(top + height, src.height);
  if (x0 >= x1) return out;
  for (int64_t y = y0; y < y1; ++y) {
    std::memcpy(out.row(y - top) + (x0 - left) * c, src.row(y) + x0 * c, (x1 - x0) * c);
  }
  return out;
}

// PIL's L = (R*19595 + G*38470 + B*7471 + 0x8000) >> 16 (ITU-R 601-2 luma).
inline std::uint8_t luma(const std::uint8_t* p) {
  return static_cast<std::uint8_t>((p[0] * 19595 + p[1] * 38470 + p[2] * 7471 + 0x8000) >> 16);
}

// PIL's Image.blend(degenerate, image, alpha), computed in float as Blend.c.
inline std::uint8_t blend(int degenerate, int value, float alpha, bool interpolating) {
  const float v = static_cast<float>(degenerate) + alpha * static_cast<float>(value - degenerate);
  if (interpolating) return static_cast<std::uint8_t>(v);
  if (v <= 0.0f) return 0;
  if (v >= 255.0f) return 255;
  return static_cast<std::uint8_t>(v);
}

// Blends every byte of `image` towards `degenerate(i)`.
template <class Degenerate>
void blend_with(Image& image, double factor, Degenerate degenerate) {
  const float alpha = static_cast<float>(factor);
  if (alpha == 1.0f) return;
  const bool interpolating = alpha >= 0.0f && alpha <= 1.0f;
  std::uint8_t* p = image.pixels.data();
  const std::size_t n = image.pixels.size();
  for (std::size_t i = 0; i < n; ++i) p[i] = blend(degenerate(i), p[i], alpha, interpolating);
}

}  // namespace

Interpolation interpolation_from_name(std::string_view name) {
  if (name == "nearest") return Interpolation::kNearest;
  if (name == "bilinear") return Interpolation::kBilinear;
  if (name == "bicubic") return Interpolation::kBicubic;
  if (name == "box") return Interpolation::kBox;
  if (name == "hamming") return Interpolation::kHamming;
  if (name == "lanczos") return Interpolation::kLanczos;
  throw UsageError("unknown interpolation " + in_quotes(std::string(name)) +
                   "; expected one of nearest, bilinear, bicubic, box, hamming, lanczos");
}

std::string_view interpolation_name(Interpolation interpolation) {
  switch (interpolation) {
    case Interpolation::kNearest:
      return "nearest";
    case Interpolation::kBilinear:
      return "bilinear";
    case Interpolation::kBicubic:
      return "bicubic";
    case Interpolation::kBox:
      return "box";
    case Interpolation::kHamming:
      return "hamming";
    case Interpolation::kLanczos:
      return "lanczos";
  }
  return "?";
}

Image resize(const Image& src, int64_t out_h, int64_t out_w, Interpolation interpolation) {
  check_size(out_h, out_w, "resize");
  return resample_view(whole(src), static_cast<int>(src.channels), static_cast<int>(out_h), static_cast<int>(out_w),
                       interpolation);
}

Image crop(const Image& src, int64_t top, int64_t left, int64_t height, int64_t width, std::uint8_t fill) {
  check_size(height, width, "crop");
  const std::uint8_t f[1] = {fill};
  return crop_filled(src, top, left, height, width, f);
}

Image resized_crop(const Image& src, int64_t top, int64_t left, int64_t height, int64_t width, int64_t out_h,
                   int64_t out_w, Interpolation interpolation) {
  check_size(height, width, "resized_crop");
  check_size(out_h, out_w, "resized_crop");
  const bool inside = top >= 0 && left >= 0 && top + height <= src.height && left + width <= src.width;
  if (!inside) return resize(crop(src, top, left, height, width), out_h, out_w, interpolation);
  // Resampling the window as its own image keeps the filter clipped at the
  // crop's edges, exactly as resizing a copy of the crop would.
  const View window{src.row(top) + left * src.channels, src.width * src.channels, static_cast<int>(height),
                    static_cast<int>(width)};
  return resample_view(window, static_cast<int>(src.channels), static_cast<int>(out_h), static_cast<int>(out_w),
                       interpolation);
}

int jpeg_dct_denominator(int64_t crop_h, int64_t crop_w, int64_t out_h, int64_t out_w) {
  for (int d : {8, 4, 2}) {
    if (crop_h >= d * out_h && crop_w >= d * out_w) return d;
  }
  return 1;
}

Image jpeg_dct_resized_crop(std::span<const std::uint8_t> bytes, const std::string& source, int64_t channels,
                            int64_t top, int64_t left, int64_t height, int64_t width, int64_t out_h, int64_t out_w,
                            Interpolation interpolation, bool dct_scale) {
  const int d = dct_scale ? jpeg_dct_denominator(height, width, out_h, out_w) : 1;
  // The scaled image's size, to plan which of its pixels the resampling
  // reads; only those are decoded (decode_jpeg_region).
  int64_t scaled_h = 0, scaled_w = 0;
  if (const auto dims = jpeg_dimensions(bytes)) {
    scaled_h = (dims->first + d - 1) / d;
    scaled_w = (dims->second + d - 1) / d;
  } else {
    // Not a readable JPEG: the decode throws the error it always did.
    const Image scaled = decode_jpeg_scaled(bytes, source, channels, d);
    scaled_h = scaled.height;
    scaled_w = scaled.width;
  }
  const bool inside = top >= 0 && left >= 0 && top + height <= scaled_h * d && left + width <= scaled_w * d;
  if (d == 1 || !inside || interpolation == Interpolation::kNearest) {
    // Whole scaled pixels: the window rounded to the 1/d grid.
    auto scale = [d](int64_t v) { return round_half_even(static_cast<double>(v) / d); };
    const int64_t t = std::clamp<int64_t>(scale(top), 0, scaled_h - 1);
    const int64_t l = std::clamp<int64_t>(scale(left), 0, scaled_w - 1);
    const int64_t h = std::clamp<int64_t>(scale(top + height) - t, 1, scaled_h - t);
    const int64_t w = std::clamp<int64_t>(scale(left + width) - l, 1, scaled_w - l);
    const ImageRegion region = decode_jpeg_region(bytes, source, channels, d, t, l, h, w);
    return resized_crop(region.image, t - region.top, l - region.left, h, w, out_h, out_w, interpolation);
  }
  // The window as a sub-pixel box of the scaled image, as PIL's
  // resize(box=...): the filter is centred where the full-size one would be.
  const FilterSpec filter = filter_spec(interpolation);
  AxisCoeffs horiz = precompute_coeffs(static_cast<int>(scaled_w), static_cast<int>(out_w), filter,
                                       static_cast<double>(left) / d, static_cast<double>(left + width) / d);
  AxisCoeffs vert = precompute_coeffs(static_cast<int>(scaled_h), static_cast<int>(out_h), filter,
                                      static_cast<double>(top) / d, static_cast<double>(top + height) / d);
  const int y_first = vert.first.front();
  const int y_last = vert.first.back() + vert.count.back();
  int x_first = horiz.first.front(), x_last = horiz.first.back() + horiz.count.back();
  for (std::size_t i = 0; i < horiz.first.size(); ++i) {
    x_first = std::min(x_first, horiz.first[i]);
    x_last = std::max(x_last, horiz.first[i] + horiz.count[i]);
  }
  const ImageRegion region =
      decode_jpeg_region(bytes, source, channels, d, y_first, x_first, y_last - y_first, x_last - x_first);
  const Image& pixels = region.image;
  TORCH_INTERNAL_ASSERT(region.top <= y_first && region.top + pixels.height >= y_last && region.left <= x_first &&
                            region.left + pixels.width >= x_last && (pixels.channels == 1 || pixels.channels == 3),
                        "jpeg_dct_resized_crop: the decoded region misses the pixels the resampling reads");
  for (int& f : horiz.first) f -= static_cast<int>(region.left);
  const View rows{pixels.row(y_first - region.top), pixels.width * pixels.channels, y_last - y_first,
                  static_cast<int>(pixels.width)};
  Image temp(rows.rows, out_w, pixels.channels);
  if (pixels.channels == 1) {
    resample_horizontal<1>(rows, horiz, temp);
  } else {
    resample_horizontal<3>(rows, horiz, temp);
  }
  for (int& f : vert.first) f -= y_first;
  Image out(out_h, out_w, pixels.channels);
  resample_vertical(whole(temp), static_cast<int>(pixels.channels), vert, out);
  return out;
}

void hflip(Image& image) {
  const int64_t c = image.channels;
  for (int64_t y = 0; y < image.height; ++y) {
    std::uint8_t* row = image.row(y);
    for (int64_t a = 0, b = image.width - 1; a < b; ++a, --b) {
      for (int64_t ch = 0; ch < c; ++ch) std::swap(row[a * c + ch], row[b * c + ch]);
    }
  }
}

void vflip(Image& image) {
  const int64_t bytes = image.width * image.channels;
  for (int64_t a = 0, b = image.height - 1; a < b; ++a, --b)
    std::swap_ranges(image.row(a), image.row(a) + bytes, image.row(b));
}

int64_t round_half_even(double value) { return static_cast<int64_t>(std::nearbyint(value)); }

std::pair<int64_t, int64_t> shorter_side_size(int64_t height, int64_t width, int64_t size) {
  const bool portrait = width <= height;
  const int64_t shorter = portrait ? width : height;
  const int64_t longer = portrait ? height : width;
  // torchvision: int(size * long / short), in Python floats.
  const int64_t new_long = static_cast<int64_t>(static_cast<double>(size) * static_cast<double>(longer) / shorter);
  return portrait ? std::pair{new_long, size} : std::pair{size, new_long};
}

Image center_crop_or_pad(const Image& src, int64_t height, int64_t width, std::span<const std::uint8_t> fill) {
  check_size(height, width, "center_crop");
  // Pad as torchvision (left/top get the floor half), then crop centred.
  const int64_t pad_left = width > src.width ? (width - src.width) / 2 : 0;
  const int64_t pad_top = height > src.height ? (height - src.height) / 2 : 0;
  const int64_t padded_w = width > src.width ? width : src.width;
  const int64_t padded_h = height > src.height ? height : src.height;
  const int64_t top = round_half_even((padded_h - height) / 2.0);
  const int64_t left = round_half_even((padded_w - width) / 2.0);
  if (top - pad_top == 0 && left - pad_left == 0 && height == src.height && width == src.width) return src;
  return crop_filled(src, top - pad_top, left - pad_left, height, width, fill);
}

Image center_crop(const Image& src, int64_t height, int64_t width) {
  return center_crop_or_pad(src, height, width, {});
}

Image convert_channels(const Image& src, int64_t channels) {
  if (src.channels == channels) return src;
  const int64_t n = src.height * src.width;
  Image out(src.height, src.width, channels);
  if (src.channels == 3 && channels == 1) {
    for (int64_t i = 0; i < n; ++i) out.pixels[i] = luma(&src.pixels[i * 3]);
  } else if (src.channels == 1 && channels == 3) {
    for (int64_t i = 0; i < n; ++i) std::memset(&out.pixels[i * 3], src.pixels[i], 3);
  } else {
    throw Error("convert: cannot convert " + std::to_string(src.channels) + " channels to " + std::to_string(channels) +
                "; expected 1 or 3");
  }
  return out;
}

void adjust_brightness(Image& image, double factor) {
  blend_with(image, factor, [](std::size_t) { return 0; });
}

void adjust_contrast(Image& image, double factor) {
  // The degenerate image is the mean of the L image, int(mean + 0.5).
  const int64_t n = image.height * image.width;
  if (n == 0) return;
  std::uint64_t sum = 0;
  if (image.channels == 3) {
    for (int64_t i = 0; i < n; ++i) sum += luma(&image.pixels[i * 3]);
  } else {
    for (int64_t i = 0; i < n; ++i) sum += image.pixels[i];
  }
  const int mean = static_cast<int>(static_cast<double>(sum) / static_cast<double>(n) + 0.5);
  blend_with(image, factor, [mean](std::size_t) { return mean; });
}

void adjust_saturation(Image& image, double factor) {
  if (image.channels != 3) return;
  const int64_t n = image.height * image.width;
  std::vector<std::uint8_t> gray(n);
  for (int64_t i = 0; i < n; ++i) gray[i] = luma(&image.pixels[i * 3]);
  blend_with(image, factor, [&gray](std::size_t i) { return gray[i / 3]; });
}

}  // namespace timm
