// Image operations shared by every augmentation plugin, matching Pillow.
//
// resize() ports Pillow's ImagingResample (separable, antialiased: the filter
// support is scaled by the downscale factor, 22-bit fixed-point coefficients,
// the same rounding) so results equal PIL's Image.resize; nearest follows
// PIL's affine nearest-neighbour path. The colour ops follow PIL's
// ImageEnhance (Image.blend in float), as torchvision's PIL backend does.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "timm/data/image.hpp"

namespace timm {

enum class Interpolation { kNearest, kBilinear, kBicubic, kBox, kHamming, kLanczos };

// timm's names: "nearest", "bilinear", "bicubic", "box", "hamming",
// "lanczos". An unknown name throws UsageError listing the known ones.
Interpolation interpolation_from_name(std::string_view name);
std::string_view interpolation_name(Interpolation interpolation);

// PIL's Image.resize((out_w, out_h), filter): same-size input is copied.
Image resize(const Image& src, int64_t out_h, int64_t out_w, Interpolation interpolation);

// PIL's Image.crop((left, top, left + width, top + height)): the window may
// reach outside the image; those pixels are `fill` (zero by default).
Image crop(const Image& src, int64_t top, int64_t left, int64_t height, int64_t width, std::uint8_t fill = 0);

// torchvision's resized_crop on a PIL image: crop, then resize. A window
// inside the image is resampled in place, without copying the crop.
Image resized_crop(const Image& src, int64_t top, int64_t left, int64_t height, int64_t width, int64_t out_h,
                   int64_t out_w, Interpolation interpolation);

// --jpeg-dct-scale's speed path: the largest d in {1, 2, 4, 8} with
// crop_h >= d * out_h and crop_w >= d * out_w, i.e. the JPEG can be decoded
// at 1/d and still be downscaled (never upscaled) to the output.
int jpeg_dct_denominator(int64_t crop_h, int64_t crop_w, int64_t out_h, int64_t out_w);

// resized_crop of a JPEG through a 1/d scaled decode (d as above): the crop
// window (in full-size pixels) becomes a sub-pixel box of the scaled image,
// resampled to out_h x out_w with the antialiased filter over that box (as
// PIL's resize(box=...)). d = 1 is decode + resized_crop exactly; d > 1
// differs by the scaled IDCT and the two-stage filtering
// (docs/data-mixup.md gives the measured difference). Only the part of the
// scaled image that the resampling reads is decoded (decode_jpeg_region),
// with the same output bytes as decoding all of it. `bytes` must be a JPEG.
// dct_scale false: d = 1 whatever the window, so the output equals
// resized_crop(decode_image(bytes), ...) byte for byte (the loader's path
// without --jpeg-dct-scale: only the window is decoded).
Image jpeg_dct_resized_crop(std::span<const std::uint8_t> bytes, const std::string& source, int64_t channels,
                            int64_t top, int64_t left, int64_t height, int64_t width, int64_t out_h, int64_t out_w,
                            Interpolation interpolation, bool dct_scale = true);

void hflip(Image& image);
void vflip(Image& image);

// Python's round(): half to even.
int64_t round_half_even(double value);

// torchvision's Resize(int) rule: the shorter side becomes `size`, the
// longer int(size * long / short). Returns (height, width).
std::pair<int64_t, int64_t> shorter_side_size(int64_t height, int64_t width, int64_t size);

// torchvision's CenterCrop: zero-pads when the image is smaller (left/top
// padding (d) // 2), then crops at int(round((H - h) / 2)), int(round((W - w) / 2)).
Image center_crop(const Image& src, int64_t height, int64_t width);

// timm's center_crop_or_pad with a per-channel fill (size 1 or C).
Image center_crop_or_pad(const Image& src, int64_t height, int64_t width, std::span<const std::uint8_t> fill);

// PIL's convert("L") / convert("RGB") between 1 and 3 channels.
Image convert_channels(const Image& src, int64_t channels);

// PIL ImageEnhance with a factor: Brightness, Contrast, Color (saturation).
// On 1-channel images saturation is a no-op, as PIL's Color on "L".
void adjust_brightness(Image& image, double factor);
void adjust_contrast(Image& image, double factor);
void adjust_saturation(Image& image, double factor);

}  // namespace timm
