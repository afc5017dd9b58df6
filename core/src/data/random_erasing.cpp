#include "timm/data/random_erasing.hpp"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <cmath>

#include "timm/base/error.hpp"
#include "timm/base/names.hpp"
#include "timm/base/python_repr.hpp"
#include "timm/base/torch_random.hpp"
#include "timm/data/image_ops.hpp"

namespace timm {

std::vector<int64_t> RngEraseDraws::randperm(int64_t n) {
  at::Generator generator = seeded_generator(static_cast<int64_t>(rng_.engine()() >> 1));
  return timm::randperm(n, generator);
}

RandomErasing::RandomErasing(RandomErasingOptions options) : options_(std::move(options)) {
  std::string mode = ascii_lower(options_.mode);
  if (mode.empty()) mode = "const";
  if (mode != "const" && mode != "rand" && mode != "pixel") {
    throw UsageError("random erasing mode (--remode) " + in_quotes(options_.mode) +
                     " is not one of const, rand, pixel");
  }
  options_.mode = mode;
  if (options_.probability < 0 || options_.probability > 1) {
    throw UsageError("random erasing probability (--reprob) must be in [0, 1], got " +
                     python_float_repr(options_.probability));
  }
  if (options_.min_aspect <= 0) throw UsageError("random erasing: min_aspect must be > 0");
  if (!options_.max_count) options_.max_count = options_.min_count;
  if (options_.min_count < 1 || *options_.max_count < options_.min_count) {
    throw UsageError("random erasing count (--recount) must be >= 1, got " + std::to_string(*options_.max_count));
  }
  log_aspect_lo_ = std::log(options_.min_aspect);
  log_aspect_hi_ = std::log(options_.max_aspect.value_or(1.0 / options_.min_aspect));
}

std::vector<EraseRect> RandomErasing::plan(int64_t img_h, int64_t img_w, EraseDraws& draws) const {
  std::vector<EraseRect> rects;
  if (draws.random() > options_.probability) return rects;
  const double area = static_cast<double>(img_h * img_w);
  const int64_t count = options_.min_count == *options_.max_count
                            ? options_.min_count
                            : draws.randint(options_.min_count, *options_.max_count);
  auto uniform = [&](double a, double b) { return a + (b - a) * draws.random(); };
  for (int64_t i = 0; i < count; ++i) {
    for (int attempt = 0; attempt < 10; ++attempt) {
      const double target_area = uniform(options_.min_area, options_.max_area) * area / static_cast<double>(count);
      const double aspect = std::exp(uniform(log_aspect_lo_, log_aspect_hi_));
      const int64_t h = round_half_even(std::sqrt(target_area * aspect));
      const int64_t w = round_half_even(std::sqrt(target_area / aspect));
      if (w < img_w && h < img_h) {
        const int64_t top = draws.randint(0, img_h - h);
        const int64_t left = draws.randint(0, img_w - w);
        rects.push_back({top, left, h, w});
        break;
      }
    }
  }
  return rects;
}

void RandomErasing::apply(at::Tensor& batch, Rng& rng) const {
  TORCH_CHECK(batch.dim() == 4 && batch.is_floating_point(), "random erasing expects a float (N, C, H, W) batch, got ",
              batch.sizes());
  const int64_t n = batch.size(0), c = batch.size(1), h = batch.size(2), w = batch.size(3);
  const int64_t start = options_.num_splits > 1 ? n / options_.num_splits : 0;
  RngEraseDraws draws(rng);
  // Normal values come from a CPU generator seeded by the Rng, so a run is
  // reproducible whatever the device.
  at::Generator gen = at::detail::createCPUGenerator(rng.engine()());
  const auto cpu_float = at::TensorOptions().dtype(at::kFloat);
  for (int64_t i = start; i < n; ++i) {
    for (const EraseRect& r : plan(h, w, draws)) {
      at::Tensor region = batch[i].slice(1, r.top, r.top + r.height).slice(2, r.left, r.left + r.width);
      if (options_.mode == "const") {
        region.zero_();
      } else if (options_.mode == "rand") {
        region.copy_(at::normal(0.0, 1.0, {c, 1, 1}, gen, cpu_float).to(batch.device(), batch.scalar_type()));
      } else {
        region.copy_(
            at::normal(0.0, 1.0, {c, r.height, r.width}, gen, cpu_float).to(batch.device(), batch.scalar_type()));
      }
    }
  }
}

std::string RandomErasing::repr() const {
  return "RandomErasing(p=" + python_float_repr(options_.probability) + ", mode=" + options_.mode + ", count=(" +
         std::to_string(options_.min_count) + ", " + std::to_string(*options_.max_count) + "))";
}

}  // namespace timm
