#include "timm/data/naflex_random_erasing.hpp"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <cmath>

#include "timm/base/error.hpp"
#include "timm/base/python_repr.hpp"
#include "timm/data/image_ops.hpp"

namespace timm {

PatchRandomErasing::PatchRandomErasing(PatchRandomErasingOptions options) : options_(std::move(options)) {
  // RandomErasing checks and completes the shared options (mode, counts).
  options_.erasing = RandomErasing(options_.erasing).options();
  if (options_.spatial_mode != "region" && options_.spatial_mode != "patch") {
    throw UsageError("patch random erasing: spatial mode " + in_quotes(options_.spatial_mode) +
                     " is not one of region, patch");
  }
  const RandomErasingOptions& o = options_.erasing;
  if (!(o.min_area > 0 && o.min_area <= o.max_area)) {
    throw UsageError("patch random erasing: expected 0 < min_area <= max_area, got " + python_float_repr(o.min_area) +
                     " and " + python_float_repr(o.max_area));
  }
  log_aspect_lo_ = std::log(o.min_aspect);
  log_aspect_hi_ = std::log(o.max_aspect.value_or(1.0 / o.min_aspect));
}

std::vector<std::vector<int64_t>> PatchRandomErasing::plan(const at::Tensor& patch_coord, const at::Tensor& patch_valid,
                                                           PatchEraseDraws& draws) const {
  TORCH_CHECK(patch_coord.dim() == 2 && patch_coord.size(1) == 2 && patch_valid.dim() == 1 &&
                  patch_valid.size(0) == patch_coord.size(0),
              "patch random erasing expects (N, 2) coordinates and an (N) mask, got ", patch_coord.sizes(), " and ",
              patch_valid.sizes());
  const at::Tensor coord = patch_coord.to(at::kCPU, at::kLong).contiguous();
  const at::Tensor valid = patch_valid.to(at::kCPU, at::kBool).contiguous();
  if (options_.spatial_mode == "patch") return plan_patches(valid, draws);
  return plan_region(coord, valid, draws);
}

// timm's _erase_region: up to `count` rectangles of the grid spanned by the
// valid patches, each of an area in [min_area, max_area] of the grid and a
// log-uniform aspect, up to 10 attempts each; an attempt whose rectangle
// holds no valid patch is retried.
std::vector<std::vector<int64_t>> PatchRandomErasing::plan_region(const at::Tensor& coord, const at::Tensor& valid,
                                                                  EraseDraws& draws) const {
  const RandomErasingOptions& o = options_.erasing;
  std::vector<std::vector<int64_t>> sets;
  if (draws.random() > o.probability) return sets;
  const int64_t n = coord.size(0);
  const int64_t* yx = coord.data_ptr<int64_t>();
  const bool* ok = valid.data_ptr<bool>();
  int64_t grid_h = 0, grid_w = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (!ok[i]) continue;
    grid_h = std::max(grid_h, yx[2 * i] + 1);
    grid_w = std::max(grid_w, yx[2 * i + 1] + 1);
  }
  if (grid_h == 0) return sets;  // no valid patch
  const auto total_area = static_cast<double>(grid_h * grid_w);
  auto uniform = [&](double a, double b) { return a + (b - a) * draws.random(); };
  const int64_t count = draws.randint(o.min_count, *o.max_count);
  for (int64_t c = 0; c < count; ++c) {
    for (int attempt = 0; attempt < 10; ++attempt) {
      const double target_area = uniform(o.min_area, o.max_area) * total_area;
      const double aspect = std::exp(uniform(log_aspect_lo_, log_aspect_hi_));
      const int64_t h = round_half_even(std::sqrt(target_area * aspect));
      const int64_t w = round_half_even(std::sqrt(target_area / aspect));
      if (h > grid_h || w > grid_w) continue;
      const int64_t top = draws.randint(0, grid_h - h);
      const int64_t left = draws.randint(0, grid_w - w);
      std::vector<int64_t> selected;
      for (int64_t i = 0; i < n; ++i) {
        const int64_t y = yx[2 * i], x = yx[2 * i + 1];
        if (ok[i] && y >= top && y < top + h && x >= left && x < left + w) selected.push_back(i);
      }
      if (selected.empty()) continue;
      sets.push_back(std::move(selected));
      break;
    }
  }
  return sets;
}

// timm's _erase_patches: count x [min_area, max_area] of the valid patches
// (at least one), chosen by torch.randperm. timm's randint fails when the
// lower bound passes the upper (count x min_area > 1); it is capped there.
std::vector<std::vector<int64_t>> PatchRandomErasing::plan_patches(const at::Tensor& valid,
                                                                   PatchEraseDraws& draws) const {
  const RandomErasingOptions& o = options_.erasing;
  if (draws.random() > o.probability) return {};
  std::vector<int64_t> valid_indices;
  const bool* ok = valid.data_ptr<bool>();
  for (int64_t i = 0; i < valid.size(0); ++i) {
    if (ok[i]) valid_indices.push_back(i);
  }
  const auto num_valid = static_cast<int64_t>(valid_indices.size());
  if (num_valid == 0) return {};
  const int64_t count = draws.randint(o.min_count, *o.max_count);
  const double scaled = static_cast<double>(num_valid * count);
  const int64_t max_erase = std::min(num_valid, std::max<int64_t>(1, static_cast<int64_t>(scaled * o.max_area)));
  const int64_t min_erase = std::min(max_erase, std::max<int64_t>(1, static_cast<int64_t>(scaled * o.min_area)));
  const int64_t num_erase = draws.randint(min_erase, max_erase);
  const std::vector<int64_t> perm = draws.randperm(num_valid);
  std::vector<int64_t> erased;
  for (int64_t k = 0; k < num_erase; ++k) erased.push_back(valid_indices.at(static_cast<size_t>(perm.at(k))));
  return {erased};
}

void PatchRandomErasing::apply(at::Tensor& patches, const at::Tensor& patch_coord, const at::Tensor& patch_valid,
                               int64_t channels, Rng& rng) const {
  TORCH_CHECK(patches.dim() == 3 && patches.is_floating_point() && channels > 0 && patches.size(2) % channels == 0,
              "patch random erasing expects float (B, N, P*P*C) patches of ", channels, " channels, got ",
              patches.sizes());
  const int64_t batch = patches.size(0), dim = patches.size(2);
  const int64_t num_splits = options_.erasing.num_splits;
  const int64_t start = num_splits > 1 ? batch / num_splits : 0;
  const at::Tensor coord = patch_coord.to(at::kCPU);
  const at::Tensor valid = patch_valid.to(at::kCPU);
  RngEraseDraws draws(rng);
  // Normal values from a CPU generator seeded by the Rng: a run repeats
  // whatever the device.
  at::Generator gen = at::detail::createCPUGenerator(rng.engine()());
  const auto cpu_float = at::TensorOptions().dtype(at::kFloat);
  const std::string& mode = options_.erasing.mode;
  for (int64_t i = start; i < batch; ++i) {
    for (const std::vector<int64_t>& set : plan(coord[i], valid[i], draws)) {
      const auto count = static_cast<int64_t>(set.size());
      const at::Tensor index = at::tensor(set, at::TensorOptions().dtype(at::kLong)).to(patches.device());
      at::Tensor sample = patches[i];
      if (mode == "const") {
        sample.index_fill_(0, index, 0.0);
        continue;
      }
      // rand: one value per channel, the same in every pixel (channels vary
      // fastest in a patch); pixel: a value per pixel and channel.
      const at::Tensor values =
          mode == "rand" ? at::normal(0.0, 1.0, {1, channels}, gen, cpu_float).repeat({count, dim / channels})
                         : at::normal(0.0, 1.0, {count, dim}, gen, cpu_float);
      sample.index_copy_(0, index, values.to(patches.device(), patches.scalar_type()));
    }
  }
}

std::string PatchRandomErasing::repr() const {
  const RandomErasingOptions& o = options_.erasing;
  // timm's repr, its unbalanced parentheses included.
  return "PatchRandomErasing(p=" + python_float_repr(o.probability) + ", mode=" + o.mode +
         ", spatial=" + options_.spatial_mode + ", area=(" + python_float_repr(o.min_area) + ", " +
         python_float_repr(o.max_area) + ")), count=(" + std::to_string(o.min_count) + ", " +
         std::to_string(*o.max_count) + "))";
}

}  // namespace timm
