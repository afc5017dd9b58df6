#include "timm/data/save_image.hpp"

#include <algorithm>
#include <string>

#include <ATen/ATen.h>

#include "timm/base/error.hpp"
#include "timm/base/names.hpp"
#include "timm/data/image.hpp"
#include "timm/io/atomic_file.hpp"

namespace timm {

at::Tensor make_grid(const at::Tensor& images, const GridOptions& options) {
  at::Tensor tensor = images;
  if (tensor.dim() == 2) tensor = tensor.unsqueeze(0);
  if (tensor.dim() == 3) {
    if (tensor.size(0) == 1) tensor = at::cat({tensor, tensor, tensor}, 0);
    tensor = tensor.unsqueeze(0);
  }
  if (tensor.dim() != 4) {
    throw Error("make_grid: a " + std::to_string(images.dim()) +
                "-dimensional tensor; expected images (N, C, H, W), (C, H, W) or (H, W)");
  }
  if (tensor.numel() == 0) throw Error("make_grid: an empty batch of images");
  if (tensor.size(1) == 1) tensor = at::cat({tensor, tensor, tensor}, 1);
  if (options.normalize) {
    tensor = tensor.clone();
    // torchvision's norm_ip(img, float(t.min()), float(t.max())).
    const double low = tensor.min().item<double>();
    const double high = tensor.max().item<double>();
    tensor.clamp_(low, high);
    tensor.sub_(low).div_(std::max(high - low, 1e-5));
  }
  if (tensor.size(0) == 1) return tensor.squeeze(0);
  const int64_t count = tensor.size(0);
  const int64_t padding = options.padding;
  const int64_t columns = std::min(options.nrow, count);
  const int64_t rows = (count + columns - 1) / columns;
  const int64_t height = tensor.size(2) + padding, width = tensor.size(3) + padding;
  at::Tensor grid = at::full({tensor.size(1), height * rows + padding, width * columns + padding}, options.pad_value,
                             tensor.options());
  for (int64_t k = 0; k < count; ++k) {
    const int64_t y = k / columns, x = k % columns;
    grid.narrow(1, y * height + padding, height - padding)
        .narrow(2, x * width + padding, width - padding)
        .copy_(tensor[k]);
  }
  return grid;
}

void save_image(const at::Tensor& images, const std::filesystem::path& path, const GridOptions& options) {
  const std::string extension = ascii_lower(path.extension().string());
  if (extension != ".jpg" && extension != ".jpeg") {
    throw Error("save_image " + in_quotes(path.string()) + ": only JPEG files (.jpg, .jpeg) are written");
  }
  const at::Tensor grid = make_grid(images, options);
  if (grid.size(0) != 1 && grid.size(0) != 3) {
    throw Error("save_image " + in_quotes(path.string()) + ": " + std::to_string(grid.size(0)) +
                "-channel images; JPEG takes 1 (L) or 3 (RGB)");
  }
  const at::Tensor pixels =
      grid.mul(255).add_(0.5).clamp_(0, 255).permute({1, 2, 0}).to(at::kCPU, at::kByte).contiguous();
  Image image(pixels.size(0), pixels.size(1), pixels.size(2));
  std::copy_n(pixels.data_ptr<std::uint8_t>(), image.pixels.size(), image.pixels.data());
  write_file_atomically(path, encode_jpeg(image), "image");
}

}  // namespace timm
