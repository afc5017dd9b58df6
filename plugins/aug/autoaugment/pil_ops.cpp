#include "pil_ops.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "timm/base/error.hpp"

namespace timm::autoaugment {
namespace {

// ---- Geometry (libImaging/Geometry.c) --------------------------------------

// Geometry.c's COORD and FLOOR: truncation towards zero, except below zero.
inline int coord(double v) { return v < 0.0 ? -1 : static_cast<int>(v); }
inline int floor_int(double v) { return v < 0.0 ? static_cast<int>(std::floor(v)) : static_cast<int>(v); }

// An output image of src's size, every pixel `fill`.
Image filled_like(const Image& src, std::span<const std::uint8_t> fill) {
  const int64_t c = src.channels;
  if (!fill.empty() && fill.size() != 1 && static_cast<int64_t>(fill.size()) != c) {
    throw UsageError("fill color has " + std::to_string(fill.size()) + " values; expected 1 or " + std::to_string(c));
  }
  Image out(src.height, src.width, c);
  for (int64_t i = 0; i < src.height * src.width; ++i) {
    for (int64_t ch = 0; ch < c; ++ch) {
      out.pixels[i * c + ch] = fill.empty() ? 0 : fill[fill.size() == 1 ? 0 : ch];
    }
  }
  return out;
}

struct Sampler {
  const Image& im;
  int xclip(int x) const { return x < 0 ? 0 : (x < im.width ? x : static_cast<int>(im.width) - 1); }
  int yclip(int y) const { return y < 0 ? 0 : (y < im.height ? y : static_cast<int>(im.height) - 1); }
  bool inside_row(int y) const { return y >= 0 && y < im.height; }
  const std::uint8_t* row(int y) const { return im.pixels.data() + static_cast<int64_t>(y) * im.width * im.channels; }
};

// bilinear_filter8 / bilinear_filter32RGB: the value is truncated. C > 0
// fixes the channel count at compile time (the loops unroll), 0 reads it.
template <int C>
struct BilinearSample {
  bool operator()(const Sampler& s, double xin, double yin, std::uint8_t* out) const {
    if (xin < 0.0 || xin >= s.im.width || yin < 0.0 || yin >= s.im.height) return false;
    xin -= 0.5;
    yin -= 0.5;
    const int x = floor_int(xin), y = floor_int(yin);
    const double dx = xin - x, dy = yin - y;
    const int c = C > 0 ? C : static_cast<int>(s.im.channels);
    const int x0 = s.xclip(x) * c, x1 = s.xclip(x + 1) * c;
    const std::uint8_t* r0 = s.row(s.yclip(y));
    const std::uint8_t* r1 = s.inside_row(y + 1) ? s.row(y + 1) : nullptr;
    for (int ch = 0; ch < c; ++ch) {
      const int a = r0[x0 + ch], b = r0[x1 + ch];
      double v1 = a + (b - a) * dx;
      double v2 = v1;
      if (r1 != nullptr) {
        const int cc = r1[x0 + ch], d = r1[x1 + ch];
        v2 = cc + (d - cc) * dx;
      }
      v1 = v1 + (v2 - v1) * dy;
      out[ch] = static_cast<std::uint8_t>(v1);
    }
    return true;
  }
};

inline double cubic(double v1, double v2, double v3, double v4, double d) {
  const double p1 = v2;
  const double p2 = -v1 + v3;
  const double p3 = 2 * (v1 - v2) + v3 - v4;
  const double p4 = -v1 + v2 - v3 + v4;
  return p1 + d * (p2 + d * (p3 + d * p4));
}

// bicubic_filter8 / bicubic_filter32RGB: clipped, then truncated.
template <int C>
struct BicubicSample {
  bool operator()(const Sampler& s, double xin, double yin, std::uint8_t* out) const {
    if (xin < 0.0 || xin >= s.im.width || yin < 0.0 || yin >= s.im.height) return false;
    xin -= 0.5;
    yin -= 0.5;
    int x = floor_int(xin), y = floor_int(yin);
    const double dx = xin - x, dy = yin - y;
    --x;
    --y;
    const int c = C > 0 ? C : static_cast<int>(s.im.channels);
    const int xs[4] = {s.xclip(x) * c, s.xclip(x + 1) * c, s.xclip(x + 2) * c, s.xclip(x + 3) * c};
    // Rows past the edges repeat the previous row's value, as PIL's.
    const std::uint8_t* rows[4] = {s.row(s.yclip(y)), s.inside_row(y + 1) ? s.row(y + 1) : nullptr,
                                   s.inside_row(y + 2) ? s.row(y + 2) : nullptr,
                                   s.inside_row(y + 3) ? s.row(y + 3) : nullptr};
    for (int ch = 0; ch < c; ++ch) {
      auto line = [&](const std::uint8_t* r) {
        return cubic(r[xs[0] + ch], r[xs[1] + ch], r[xs[2] + ch], r[xs[3] + ch], dx);
      };
      const double v1 = line(rows[0]);
      const double v2 = rows[1] ? line(rows[1]) : v1;
      const double v3 = rows[2] ? line(rows[2]) : v2;
      const double v4 = rows[3] ? line(rows[3]) : v3;
      const double v = cubic(v1, v2, v3, v4, dy);
      out[ch] = v <= 0.0 ? 0 : (v >= 255.0 ? 255 : static_cast<std::uint8_t>(v));
    }
    return true;
  }
};

// ImagingGenericTransform with affine_transform: the bilinear and bicubic path.
template <class Sample>
void generic_affine(const Image& src, const AffineMatrix& a, Image& out, Sample sample) {
  const Sampler s{src};
  const int64_t c = src.channels;
  for (int64_t y = 0; y < out.height; ++y) {
    std::uint8_t* row = out.row(y);
    const double yin = y + 0.5;
    for (int64_t x = 0; x < out.width; ++x) {
      const double xin = x + 0.5;
      const double xx = a[0] * xin + a[1] * yin + a[2];
      const double yy = a[3] * xin + a[4] * yin + a[5];
      sample(s, xx, yy, row + x * c);
    }
  }
}

// ImagingScaleAffine: nearest for a matrix without rotation or shear.
void scale_affine(const Image& src, const AffineMatrix& a, Image& out) {
  const int64_t c = src.channels;
  std::vector<int> xintab(out.width, 0);
  int64_t xmin = out.width, xmax = 0;
  double xo = a[2] + a[0] * 0.5;
  double yo = a[5] + a[4] * 0.5;
  for (int64_t x = 0; x < out.width; ++x) {
    const int xin = coord(xo);
    if (xin >= 0 && xin < src.width) {
      xmax = x + 1;
      xmin = std::min(xmin, x);
      xintab[x] = xin;
    }
    xo += a[0];
  }
  for (int64_t y = 0; y < out.height; ++y) {
    const int yi = coord(yo);
    if (yi >= 0 && yi < src.height) {
      for (int64_t x = xmin; x < xmax; ++x) std::memcpy(out.row(y) + x * c, src.row(yi) + xintab[x] * c, c);
    }
    yo += a[4];
  }
}

bool fits_fixed(const AffineMatrix& a, double x, double y) {
  return std::fabs(x * a[0] + y * a[1] + a[2]) < 32768.0 && std::fabs(x * a[3] + y * a[4] + a[5]) < 32768.0;
}

// affine_fixed: nearest in 16.16 fixed point.
void affine_fixed(const Image& src, const AffineMatrix& a, Image& out) {
  auto fix = [](double v) { return floor_int(v * 65536.0 + 0.5); };
  const int a0 = fix(a[0]), a1 = fix(a[1]), a3 = fix(a[3]), a4 = fix(a[4]);
  int a2 = fix(a[2] + a[0] * 0.5 + a[1] * 0.5);
  int a5 = fix(a[5] + a[3] * 0.5 + a[4] * 0.5);
  const int64_t c = src.channels;
  for (int64_t y = 0; y < out.height; ++y) {
    int xx = a2, yy = a5;
    std::uint8_t* row = out.row(y);
    for (int64_t x = 0; x < out.width; ++x) {
      const int xin = xx >> 16;
      if (xin >= 0 && xin < src.width) {
        const int yin = yy >> 16;
        if (yin >= 0 && yin < src.height) std::memcpy(row + x * c, src.row(yin) + xin * c, c);
      }
      xx += a0;
      yy += a3;
    }
    a2 += a1;
    a5 += a4;
  }
}

// The float nearest path, for matrices too large for 16.16.
void affine_float_nearest(const Image& src, const AffineMatrix& a, Image& out) {
  const int64_t c = src.channels;
  double xo = a[2] + a[1] * 0.5 + a[0] * 0.5;
  double yo = a[5] + a[4] * 0.5 + a[3] * 0.5;
  for (int64_t y = 0; y < out.height; ++y) {
    double xx = xo, yy = yo;
    for (int64_t x = 0; x < out.width; ++x) {
      const int xin = coord(xx);
      if (xin >= 0 && xin < src.width) {
        const int yin = coord(yy);
        if (yin >= 0 && yin < src.height) std::memcpy(out.row(y) + x * c, src.row(yin) + xin * c, c);
      }
      xx += a[0];
      yy += a[3];
    }
    xo += a[1];
    yo += a[4];
  }
}

Image rotate180(const Image& src) {
  Image out = src;
  hflip(out);
  vflip(out);
  return out;
}

// PIL's Transpose.ROTATE_90 (counter-clockwise) and ROTATE_270.
Image rotate_quarter(const Image& src, bool counter_clockwise) {
  const int64_t c = src.channels, h = src.height, w = src.width;
  Image out(w, h, c);
  for (int64_t y = 0; y < h; ++y) {
    for (int64_t x = 0; x < w; ++x) {
      const int64_t oy = counter_clockwise ? w - 1 - x : x;
      const int64_t ox = counter_clockwise ? y : h - 1 - y;
      std::memcpy(out.row(oy) + ox * c, src.row(y) + x * c, c);
    }
  }
  return out;
}

// Python's round(x, 15): correctly rounded through the decimal text.
double round15(double x) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.15f", x);
  return std::strtod(buf, nullptr);
}

// Applies a 256-entry table to every channel.
void apply_lut(Image& image, const std::array<std::uint8_t, 256>& lut) {
  for (auto& v : image.pixels) v = lut[v];
}

// One lookup table per channel, built from that channel's histogram.
template <class MakeLut>
void per_channel_lut(Image& image, MakeLut make_lut) {
  const int64_t c = image.channels;
  std::vector<std::array<int64_t, 256>> hist(c);
  for (auto& h : hist) h.fill(0);
  const std::size_t n = image.pixels.size();
  std::uint8_t* px = image.pixels.data();
  for (std::size_t i = 0; i < n; i += c) {
    for (int64_t ch = 0; ch < c; ++ch) ++hist[ch][px[i + ch]];
  }
  std::vector<std::array<std::uint8_t, 256>> luts(c);
  for (int64_t ch = 0; ch < c; ++ch) luts[ch] = make_lut(hist[ch]);
  for (std::size_t i = 0; i < n; i += c) {
    for (int64_t ch = 0; ch < c; ++ch) px[i + ch] = luts[ch][px[i + ch]];
  }
}

std::array<std::uint8_t, 256> identity_lut() {
  std::array<std::uint8_t, 256> lut{};
  for (int i = 0; i < 256; ++i) lut[i] = static_cast<std::uint8_t>(i);
  return lut;
}

// PIL's Image.blend(degenerate, image, alpha) in float (Blend.c).
void blend_into(Image& image, const Image& degenerate, double factor) {
  const float alpha = static_cast<float>(factor);
  if (alpha == 1.0f) return;
  const bool interpolating = alpha >= 0.0f && alpha <= 1.0f;
  for (std::size_t i = 0; i < image.pixels.size(); ++i) {
    const int d = degenerate.pixels[i];
    const float v = static_cast<float>(d) + alpha * static_cast<float>(image.pixels[i] - d);
    if (interpolating) {
      image.pixels[i] = static_cast<std::uint8_t>(v);
    } else {
      image.pixels[i] = v <= 0.0f ? 0 : (v >= 255.0f ? 255 : static_cast<std::uint8_t>(v));
    }
  }
}

inline std::uint8_t clip8_float(float v) {
  v = v < 0.0f ? 0.0f : v;
  v = v > 255.0f ? 255.0f : v;
  return static_cast<std::uint8_t>(v);
}

// BoxBlur.c's ImagingLineBoxBlur8 on one channel of a line: `in` and `out`
// are strided views of `n` samples.
void box_blur_line(const std::uint8_t* in, std::uint8_t* out, int n, int radius, std::uint32_t ww, std::uint32_t fw) {
  const int lastx = n - 1;
  const int edge_a = std::min(radius + 1, n);
  const int edge_b = std::max(n - radius - 1, 0);
  std::uint32_t acc = in[0] * (radius + 1);
  for (int x = 0; x < edge_a - 1; ++x) acc += in[x];
  acc += in[lastx] * (radius - edge_a + 1);
  auto step = [&](int x, int sub, int add, int left, int right) {
    acc += in[add] - in[sub];
    const std::uint32_t bulk = acc * ww + (in[left] + in[right]) * fw;
    out[x] = static_cast<std::uint8_t>((bulk + (1u << 23)) >> 24);
  };
  if (edge_a <= edge_b) {
    for (int x = 0; x < edge_a; ++x) step(x, 0, x + radius, 0, x + radius + 1);
    for (int x = edge_a; x < edge_b; ++x) step(x, x - radius - 1, x + radius, x - radius - 1, x + radius + 1);
    for (int x = edge_b; x <= lastx; ++x) step(x, x - radius - 1, lastx, x - radius - 1, lastx);
  } else {
    for (int x = 0; x < edge_b; ++x) step(x, 0, x + radius, 0, x + radius + 1);
    for (int x = edge_b; x < edge_a; ++x) step(x, 0, lastx, 0, lastx);
    for (int x = edge_a; x <= lastx; ++x) step(x, x - radius - 1, lastx, x - radius - 1, lastx);
  }
}

// ImagingHorizontalBoxBlur in place on an H x W x C image.
void horizontal_box_blur(Image& image, float float_radius) {
  const int radius = static_cast<int>(float_radius);
  const std::uint32_t ww = static_cast<std::uint32_t>(static_cast<float>(1u << 24) / (float_radius * 2 + 1));
  const std::uint32_t fw = ((1u << 24) - (radius * 2 + 1) * ww) / 2;
  const int w = static_cast<int>(image.width), c = static_cast<int>(image.channels);
  std::vector<std::uint8_t> line_in(w), line_out(w);
  for (int64_t y = 0; y < image.height; ++y) {
    std::uint8_t* row = image.row(y);
    for (int ch = 0; ch < c; ++ch) {
      for (int x = 0; x < w; ++x) line_in[x] = row[x * c + ch];
      box_blur_line(line_in.data(), line_out.data(), w, radius, ww, fw);
      for (int x = 0; x < w; ++x) row[x * c + ch] = line_out[x];
    }
  }
}

Image transpose(const Image& src) {
  const int64_t c = src.channels;
  Image out(src.width, src.height, c);
  for (int64_t y = 0; y < src.height; ++y) {
    for (int64_t x = 0; x < src.width; ++x) std::memcpy(out.row(x) + y * c, src.row(y) + x * c, c);
  }
  return out;
}

// BoxBlur.c's _gaussian_blur_radius, in its float/double mix.
float gaussian_box_radius(float radius, int passes) {
  const float sigma2 = radius * radius / passes;
  const float big_l = static_cast<float>(std::sqrt(12.0 * sigma2 + 1.0));
  const float l = static_cast<float>(std::floor((big_l - 1.0) / 2.0));
  float a = (2 * l + 1) * (l * (l + 1) - 3 * sigma2);
  a /= 6 * (sigma2 - (l + 1) * (l + 1));
  return l + a;
}

}  // namespace

Image affine_transform(const Image& src, const AffineMatrix& matrix, Interpolation resample,
                       std::span<const std::uint8_t> fill) {
  Image out = filled_like(src, fill);
  switch (resample) {
    case Interpolation::kBilinear:
      if (src.channels == 3) {
        generic_affine(src, matrix, out, BilinearSample<3>{});
      } else if (src.channels == 1) {
        generic_affine(src, matrix, out, BilinearSample<1>{});
      } else {
        generic_affine(src, matrix, out, BilinearSample<0>{});
      }
      break;
    case Interpolation::kBicubic:
      if (src.channels == 3) {
        generic_affine(src, matrix, out, BicubicSample<3>{});
      } else if (src.channels == 1) {
        generic_affine(src, matrix, out, BicubicSample<1>{});
      } else {
        generic_affine(src, matrix, out, BicubicSample<0>{});
      }
      break;
    case Interpolation::kNearest: {
      const AffineMatrix& a = matrix;
      const double w = static_cast<double>(src.width), h = static_cast<double>(src.height);
      if (a[1] == 0 && a[3] == 0) {
        scale_affine(src, a, out);
      } else if (fits_fixed(a, 0, 0) && fits_fixed(a, w, h) && fits_fixed(a, 0, h) && fits_fixed(a, w, 0)) {
        affine_fixed(src, a, out);
      } else {
        affine_float_nearest(src, a, out);
      }
      break;
    }
    default:
      throw UsageError("affine transforms support nearest, bilinear and bicubic resampling, not " +
                       in_quotes(std::string(interpolation_name(resample))));
  }
  return out;
}

Image rotate(const Image& src, double degrees, Interpolation resample, std::span<const std::uint8_t> fill) {
  // Python's angle % 360.0: the result takes the divisor's sign.
  double angle = std::fmod(degrees, 360.0);
  if (angle < 0) angle += 360.0;
  if (angle == 0.0) return src;
  if (angle == 180.0) return rotate180(src);
  if ((angle == 90.0 || angle == 270.0) && src.width == src.height) return rotate_quarter(src, angle == 90.0);
  const double w = static_cast<double>(src.width), h = static_cast<double>(src.height);
  const double cx = w / 2, cy = h / 2;
  const double rad = -(angle * (M_PI / 180.0));  // math.radians
  AffineMatrix m{round15(std::cos(rad)),  round15(std::sin(rad)), 0.0,
                 round15(-std::sin(rad)), round15(std::cos(rad)), 0.0};
  m[2] = m[0] * -cx + m[1] * -cy + m[2];
  m[5] = m[3] * -cx + m[4] * -cy + m[5];
  m[2] += cx;
  m[5] += cy;
  return affine_transform(src, m, resample, fill);
}

Image shear_x(const Image& src, double factor, Interpolation resample, std::span<const std::uint8_t> fill) {
  return affine_transform(src, {1, factor, 0, 0, 1, 0}, resample, fill);
}

Image shear_y(const Image& src, double factor, Interpolation resample, std::span<const std::uint8_t> fill) {
  return affine_transform(src, {1, 0, 0, factor, 1, 0}, resample, fill);
}

Image translate_x(const Image& src, double pixels, Interpolation resample, std::span<const std::uint8_t> fill) {
  return affine_transform(src, {1, 0, pixels, 0, 1, 0}, resample, fill);
}

Image translate_y(const Image& src, double pixels, Interpolation resample, std::span<const std::uint8_t> fill) {
  return affine_transform(src, {1, 0, 0, 0, 1, pixels}, resample, fill);
}

void autocontrast(Image& image) {
  per_channel_lut(image, [](const std::array<int64_t, 256>& h) {
    int lo = 0, hi = 255;
    while (lo < 255 && h[lo] == 0) ++lo;
    while (hi > 0 && h[hi] == 0) --hi;
    if (hi <= lo) return identity_lut();
    const double scale = 255.0 / (hi - lo);
    const double offset = -lo * scale;
    std::array<std::uint8_t, 256> lut{};
    for (int i = 0; i < 256; ++i) {
      // Python's int() truncates towards zero.
      const int v = static_cast<int>(i * scale + offset);
      lut[i] = static_cast<std::uint8_t>(std::clamp(v, 0, 255));
    }
    return lut;
  });
}

void equalize(Image& image) {
  per_channel_lut(image, [](const std::array<int64_t, 256>& h) {
    int64_t sum = 0, last = 0, nonzero = 0;
    for (int64_t v : h) {
      if (v == 0) continue;
      sum += v;
      last = v;
      ++nonzero;
    }
    if (nonzero <= 1) return identity_lut();
    const int64_t step = (sum - last) / 255;
    if (step == 0) return identity_lut();
    std::array<std::uint8_t, 256> lut{};
    int64_t n = step / 2;
    for (int i = 0; i < 256; ++i) {
      // n // step stays within 0..255 (n < sum + step / 2); clamp anyway.
      lut[i] = static_cast<std::uint8_t>(std::min<int64_t>(n / step, 255));
      n += h[i];
    }
    return lut;
  });
}

void posterize(Image& image, int bits) {
  if (bits >= 8) return;
  if (bits < 0) throw UsageError("posterize: bits must be >= 0, got " + std::to_string(bits));
  const int mask = ~((1 << (8 - bits)) - 1);
  std::array<std::uint8_t, 256> lut{};
  for (int i = 0; i < 256; ++i) lut[i] = static_cast<std::uint8_t>(i & mask);
  apply_lut(image, lut);
}

void solarize(Image& image, int threshold) {
  std::array<std::uint8_t, 256> lut{};
  for (int i = 0; i < 256; ++i) lut[i] = static_cast<std::uint8_t>(i < threshold ? i : 255 - i);
  apply_lut(image, lut);
}

void solarize_add(Image& image, int add, int threshold) {
  std::array<std::uint8_t, 256> lut{};
  for (int i = 0; i < 256; ++i) lut[i] = static_cast<std::uint8_t>(i < threshold ? std::min(255, i + add) : i);
  apply_lut(image, lut);
}

void invert(Image& image) {
  for (auto& v : image.pixels) v = static_cast<std::uint8_t>(255 - v);
}

Image smooth_filter(const Image& src) {
  // PIL's filter returns a copy when the image is smaller than the kernel.
  if (src.width < 3 || src.height < 3) return src;
  // _imaging's filter divides the float32 kernel by the scale; offset + 0.5 rounds.
  const float k_side = 1.0f / 13.0f, k_mid = 5.0f / 13.0f;
  const float kernel[9] = {k_side, k_side, k_side, k_side, k_mid, k_side, k_side, k_side, k_side};
  const float offset = 0.5f;
  Image out = src;  // borders stay as they are
  const int64_t c = src.channels, w = src.width;
  auto k1x3 = [&](const std::uint8_t* row, int64_t i, const float* k) {
    return static_cast<float>(row[i - c]) * k[0] + static_cast<float>(row[i]) * k[1] +
           static_cast<float>(row[i + c]) * k[2];
  };
  for (int64_t y = 1; y < src.height - 1; ++y) {
    const std::uint8_t* up = src.row(y - 1);
    const std::uint8_t* mid = src.row(y);
    const std::uint8_t* down = src.row(y + 1);
    std::uint8_t* o = out.row(y);
    for (int64_t x = 1; x < w - 1; ++x) {
      for (int64_t ch = 0; ch < c; ++ch) {
        const int64_t i = x * c + ch;
        // Filter.c's order: the row below with kernel[0..2] first.
        float ss = offset;
        ss += k1x3(down, i, &kernel[0]);
        ss += k1x3(mid, i, &kernel[3]);
        ss += k1x3(up, i, &kernel[6]);
        o[i] = clip8_float(ss);
      }
    }
  }
  return out;
}

void adjust_sharpness(Image& image, double factor) {
  const Image degenerate = smooth_filter(image);
  blend_into(image, degenerate, factor);
}

Image gaussian_blur(const Image& src, double radius) {
  if (radius == 0.0) return src;
  constexpr int kPasses = 3;
  const float box_radius = gaussian_box_radius(static_cast<float>(radius), kPasses);
  if (box_radius < 0) throw UsageError("gaussian_blur: radius must be >= 0");
  if (box_radius == 0.0f) return src;
  Image out = src;
  for (int i = 0; i < kPasses; ++i) horizontal_box_blur(out, box_radius);
  Image t = transpose(out);
  for (int i = 0; i < kPasses; ++i) horizontal_box_blur(t, box_radius);
  return transpose(t);
}

}  // namespace timm::autoaugment
