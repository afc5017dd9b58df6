#include "timm/train/amp.hpp"

#include <map>
#include <utility>

#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>
#include <c10/core/GradMode.h>

#include "timm/base/error.hpp"
#include "timm/optim/optimizer.hpp"
#include "timm/train/model_dtype_flag.hpp"

namespace timm {

c10::ScalarType parse_amp_dtype(const std::string& name) {
  if (name == "float16") return at::kHalf;
  if (name == "bfloat16") return at::kBFloat16;
  throw UsageError("--amp-dtype " + in_quotes(name) + ": expected float16 or bfloat16");
}

c10::ScalarType parse_model_dtype(const std::string& name) {
  check_model_dtype_name(name);
  if (name == "float16") return at::kHalf;
  return name == "bfloat16" ? at::kBFloat16 : at::kFloat;
}

void check_amp_model_dtype(bool amp, c10::ScalarType model_dtype) {
  check_amp_with_model_dtype(amp, dtype_name(model_dtype));
}

std::string dtype_name(c10::ScalarType dtype) {
  switch (dtype) {
    case at::kFloat:
      return "float32";
    case at::kHalf:
      return "float16";
    case at::kBFloat16:
      return "bfloat16";
    case at::kDouble:
      return "float64";
    case at::kLong:
      return "int64";
    default:
      return c10::toString(dtype);
  }
}

AutocastGuard::AutocastGuard(c10::DeviceType device_type, c10::ScalarType dtype, bool enabled)
    : device_type_(device_type),
      prev_enabled_(at::autocast::is_autocast_enabled(device_type)),
      prev_dtype_(at::autocast::get_autocast_dtype(device_type)) {
  at::autocast::set_autocast_enabled(device_type_, enabled);
  at::autocast::set_autocast_dtype(device_type_, dtype);
  at::autocast::increment_nesting();
}

AutocastGuard::~AutocastGuard() {
  // As torch.autocast.__exit__: the cast cache lives until the outermost exit.
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
  at::autocast::set_autocast_enabled(device_type_, prev_enabled_);
  at::autocast::set_autocast_dtype(device_type_, prev_dtype_);
}

GradScaler::GradScaler(c10::Device device, GradScalerOptions options, std::function<void(at::Tensor&)> reduce_found_inf)
    : options_(options),
      scale_(at::full({}, options.init_scale, at::TensorOptions().dtype(at::kFloat).device(device))),
      growth_tracker_(at::zeros({}, at::TensorOptions().dtype(at::kInt).device(device))),
      reduce_found_inf_(std::move(reduce_found_inf)) {}

at::Tensor GradScaler::scale(const at::Tensor& loss) const { return loss * scale_.to(loss.device()); }

void GradScaler::unscale_(const std::vector<at::Tensor>& parameters) {
  if (found_inf_.defined()) throw Error("GradScaler: unscale_() was already called since the last update()");
  torch::NoGradGuard no_grad;
  found_inf_ = at::zeros({}, scale_.options());
  // As GradScaler._unscale_grads_: the fused check-and-unscale takes tensors
  // of one dtype at a time.
  const at::Tensor inv_scale = scale_.to(at::kDouble).reciprocal().to(at::kFloat);
  std::map<c10::ScalarType, std::vector<at::Tensor>> grads_by_dtype;
  for (const auto& p : parameters) {
    if (p.grad().defined()) grads_by_dtype[p.grad().scalar_type()].push_back(p.grad());
  }
  for (auto& [dtype, grads] : grads_by_dtype) {
    at::_amp_foreach_non_finite_check_and_unscale_(grads, found_inf_, inv_scale);
  }
  if (reduce_found_inf_) reduce_found_inf_(found_inf_);
}

bool GradScaler::step(Optimizer& optimizer, const std::vector<at::Tensor>& parameters) {
  if (!found_inf_.defined()) unscale_(parameters);
  if (found_inf_.item<float>() != 0.0f) return false;
  optimizer.step();
  return true;
}

void GradScaler::update() {
  if (!found_inf_.defined()) throw Error("GradScaler: update() without a step since the last update()");
  at::_amp_update_scale_(scale_, growth_tracker_, found_inf_, options_.growth_factor, options_.backoff_factor,
                         options_.growth_interval);
  found_inf_ = at::Tensor();
}

double GradScaler::current_scale() const { return scale_.item<double>(); }

void GradScaler::save(torch::serialize::OutputArchive& archive) const {
  archive.write("scale", scale_.cpu());
  archive.write("growth_tracker", growth_tracker_.cpu());
}

void GradScaler::load(torch::serialize::InputArchive& archive) {
  at::Tensor scale, tracker;
  archive.read("scale", scale);
  archive.read("growth_tracker", tracker);
  scale_.copy_(scale);
  growth_tracker_.copy_(tracker);
}

}  // namespace timm
