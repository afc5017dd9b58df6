#include "timm/data/naflex.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "timm/base/error.hpp"

namespace timm {

SeqImageSize image_size_for_seq(std::array<int64_t, 2> image_hw, std::array<int64_t, 2> patch_size, int64_t max_seq_len,
                                bool divisible_by_patch, std::optional<double> max_ratio) {
  const auto [ph, pw] = patch_size;
  if (ph < 1 || pw < 1 || image_hw[0] < 1 || image_hw[1] < 1 || max_seq_len < 1) {
    throw UsageError("NaFlex resize: expected positive image, patch and sequence sizes, got image " +
                     std::to_string(image_hw[0]) + "x" + std::to_string(image_hw[1]) + ", patch " + std::to_string(ph) +
                     "x" + std::to_string(pw) + ", max_seq_len " + std::to_string(max_seq_len));
  }
  // timm's prepare_target_hw: scaled, rounded up to whole patches, at least one patch.
  const auto target = [&](double ratio) -> std::array<int64_t, 2> {
    double h = static_cast<double>(image_hw[0]) * ratio;
    double w = static_cast<double>(image_hw[1]) * ratio;
    if (divisible_by_patch) {
      h = static_cast<double>(ph) * std::ceil(h / static_cast<double>(ph));
      w = static_cast<double>(pw) * std::ceil(w / static_cast<double>(pw));
    }
    return {static_cast<int64_t>(std::max(h, static_cast<double>(ph))),
            static_cast<int64_t>(std::max(w, static_cast<double>(pw)))};
  };
  const auto fits = [&](double ratio) {
    const auto [h, w] = target(ratio);
    return (h / ph) * (w / pw) <= max_seq_len;
  };
  constexpr double kEps = 1e-5;
  double lb = kEps / 10.0;
  double rb = 100.0;
  while (rb - lb >= kEps) {
    const double mid = (lb + rb) / 2.0;
    if (fits(mid)) {
      lb = mid;
    } else {
      rb = mid;
    }
  }
  double ratio = lb;
  if (max_ratio) ratio = std::min(ratio, *max_ratio);
  if (ratio <= kEps || ratio >= 100.0) {
    throw UsageError("NaFlex resize: no scale in (1e-5, 100) fits a " + std::to_string(image_hw[0]) + "x" +
                     std::to_string(image_hw[1]) + " image into " + std::to_string(max_seq_len) + " patches of " +
                     std::to_string(ph) + "x" + std::to_string(pw));
  }
  return {ratio, target(ratio)};
}

ImagePatches patchify_image(const Image& image, std::array<int64_t, 2> patch_size) {
  const auto [ph, pw] = patch_size;
  if (image.empty() || ph < 1 || pw < 1) {
    throw UsageError("patchify_image: expected a non-empty image and a positive patch size, got " +
                     std::to_string(image.height) + "x" + std::to_string(image.width) + " and " + std::to_string(ph) +
                     "x" + std::to_string(pw));
  }
  const int64_t nh = (image.height + ph - 1) / ph, nw = (image.width + pw - 1) / pw, c = image.channels;
  const at::Tensor pixels =
      at::from_blob(const_cast<std::uint8_t*>(image.pixels.data()), {image.height, image.width, c}, at::kByte);
  at::Tensor padded = at::zeros({nh * ph, nw * pw, c}, at::kByte);
  padded.slice(0, 0, image.height).slice(1, 0, image.width).copy_(pixels);
  ImagePatches out;
  out.patches = padded.view({nh, ph, nw, pw, c}).permute({0, 2, 1, 3, 4}).reshape({nh * nw, ph * pw * c});
  out.patch_coord = at::stack({at::arange(nh).repeat_interleave(nw), at::arange(nw).repeat(nh)}, 1);
  return out;
}

NaFlexBatch collate_patches(const std::vector<ImagePatches>& samples, int64_t seq_len) {
  if (samples.empty() || seq_len < 1) {
    throw UsageError("collate_patches: expected samples and a positive sequence length, got " +
                     std::to_string(samples.size()) + " samples and " + std::to_string(seq_len));
  }
  const auto batch = static_cast<int64_t>(samples.size());
  const int64_t dim = samples.front().patches.size(1);
  NaFlexBatch out;
  out.patches = at::zeros({batch, seq_len, dim}, at::kByte);
  out.patch_coord = at::zeros({batch, seq_len, 2}, at::kLong);
  out.patch_valid = at::zeros({batch, seq_len}, at::kBool);
  for (int64_t b = 0; b < batch; ++b) {
    const ImagePatches& sample = samples[static_cast<size_t>(b)];
    if (sample.patches.size(1) != dim) {
      throw UsageError("collate_patches: sample " + std::to_string(b) + " has patches of " +
                       std::to_string(sample.patches.size(1)) + " values, the first " + std::to_string(dim));
    }
    const int64_t n = std::min(sample.patches.size(0), seq_len);
    out.patches[b].slice(0, 0, n).copy_(sample.patches.slice(0, 0, n));
    out.patch_coord[b].slice(0, 0, n).copy_(sample.patch_coord.slice(0, 0, n));
    out.patch_valid[b].slice(0, 0, n).fill_(true);
  }
  return out;
}

at::Tensor normalize_patches(const at::Tensor& patches, const std::vector<double>& mean, const std::vector<double>& std,
                             at::ScalarType dtype) {
  const auto channels = static_cast<int64_t>(mean.size());
  if (patches.dim() != 3 || channels < 1 || std.size() != mean.size() || patches.size(2) % channels != 0) {
    throw UsageError("normalize_patches: expected (B, N, P*P*C) patches and C means and stds, got shape " +
                     std::string(c10::str(patches.sizes())) + " with " + std::to_string(mean.size()) + " means and " +
                     std::to_string(std.size()) + " stds");
  }
  std::vector<double> mean255, std255;
  for (size_t i = 0; i < mean.size(); ++i) {
    mean255.push_back(mean[i] * 255);
    std255.push_back(std[i] * 255);
  }
  const auto options = patches.options().dtype(dtype);
  const at::Tensor m = at::tensor(mean255, options);
  const at::Tensor s = at::tensor(std255, options);
  const auto sizes = patches.sizes();
  return patches.to(dtype).view({sizes[0], sizes[1], -1, channels}).sub(m).div(s).view(sizes);
}

at::Tensor patches_channels_first(const at::Tensor& patches, int64_t channels) {
  if (patches.dim() != 3 || channels < 1 || patches.size(2) % channels != 0) {
    throw UsageError("patches_channels_first: expected (B, N, P*P*C) patches with C = " + std::to_string(channels) +
                     ", got shape " + std::string(c10::str(patches.sizes())));
  }
  const auto sizes = patches.sizes();
  return patches.view({sizes[0], sizes[1], -1, channels}).transpose(2, 3).contiguous().view(sizes);
}

}  // namespace timm
