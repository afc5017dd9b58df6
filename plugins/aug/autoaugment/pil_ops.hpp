// The PIL operations that timm's AutoAugment, RandAugment and AugMix apply
// (timm/data/auto_augment.py), matching Pillow 13 value for value.
//
// Geometry follows Image.transform(AFFINE) (libImaging/Geometry.c: the
// inverse map is sampled at pixel centres, bilinear truncates, bicubic clips,
// nearest uses the 16.16 fixed-point path); pixels that map outside the image
// keep `fill`. Point ops follow ImageOps (lookup tables built as PIL builds
// them), Sharpness and GaussianBlur follow Filter.c and BoxBlur.c.
//
// Private to the autoaugment plugin: no other code applies these ops.
#pragma once

#include <array>
#include <cstdint>
#include <span>

#include "timm/data/image.hpp"
#include "timm/data/image_ops.hpp"

namespace timm::autoaugment {

// The coefficients (a, b, c, d, e, f) of Image.transform(size, AFFINE, ...):
// output pixel (x, y) takes the input at (a x + b y + c, d x + e y + f).
using AffineMatrix = std::array<double, 6>;

// Image.transform(img.size, Image.AFFINE, matrix, resample, fillcolor=fill).
// `fill` holds 1 or C values (a gray fill is spread over the channels).
// Only nearest, bilinear and bicubic are valid, as in PIL (UsageError).
Image affine_transform(const Image& src, const AffineMatrix& matrix, Interpolation resample,
                       std::span<const std::uint8_t> fill);

// Image.rotate(degrees, resample, fillcolor=fill): counter-clockwise about
// the centre, same size; 0 and 180 degrees (and 90/270 on square images)
// are exact transposes, as PIL's fast paths.
Image rotate(const Image& src, double degrees, Interpolation resample, std::span<const std::uint8_t> fill);

// timm's shear_x / shear_y: the matrices (1, f, 0, 0, 1, 0) and (1, 0, 0, f, 1, 0).
Image shear_x(const Image& src, double factor, Interpolation resample, std::span<const std::uint8_t> fill);
Image shear_y(const Image& src, double factor, Interpolation resample, std::span<const std::uint8_t> fill);
// timm's translate_x_abs / translate_y_abs: (1, 0, px, 0, 1, 0) and
// (1, 0, 0, 0, 1, px). translate_*_rel is these with pct * width / height.
Image translate_x(const Image& src, double pixels, Interpolation resample, std::span<const std::uint8_t> fill);
Image translate_y(const Image& src, double pixels, Interpolation resample, std::span<const std::uint8_t> fill);

// ImageOps.autocontrast(img) (no cutoff): each channel stretched to 0..255.
void autocontrast(Image& image);
// ImageOps.equalize(img): each channel's histogram equalised.
void equalize(Image& image);
// ImageOps.posterize(img, bits) for bits 1..7 keeps the top bits; 8 or more
// is a no-op. bits 0 yields black: the lookup table PIL built before Pillow
// 10.3, which now refuses 0 (timm's 'PosterizeIncreasing' at magnitude 10
// and 'Posterize' below 2.5 ask for it).
void posterize(Image& image, int bits);
// ImageOps.solarize(img, threshold): values >= threshold become 255 - v.
void solarize(Image& image, int threshold);
// timm's solarize_add: values < threshold get min(255, v + add).
void solarize_add(Image& image, int add, int threshold = 128);
// ImageOps.invert(img).
void invert(Image& image);
// ImageEnhance.Sharpness(img).enhance(factor): blends with the SMOOTH filter.
void adjust_sharpness(Image& image, double factor);
// img.filter(ImageFilter.SMOOTH): the 3x3 kernel (1 1 1, 1 5 1, 1 1 1) / 13,
// border pixels copied.
Image smooth_filter(const Image& src);
// img.filter(ImageFilter.GaussianBlur(radius)): three box blurs per axis.
Image gaussian_blur(const Image& src, double radius);

}  // namespace timm::autoaugment
