#include "timm/train/clip_grad.hpp"

#include <vector>

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include "timm/base/error.hpp"

namespace timm {
namespace {

std::vector<at::Tensor> defined_grads(const std::vector<at::Tensor>& parameters) {
  std::vector<at::Tensor> grads;
  for (const auto& p : parameters) {
    if (p.grad().defined()) grads.push_back(p.grad());
  }
  return grads;
}

// timm's unitwise_norm: the norm over all dimensions but the first.
at::Tensor unitwise_norm(const at::Tensor& x, double norm_type) {
  if (x.dim() <= 1) return at::linalg_vector_norm(x, norm_type);
  std::vector<int64_t> dims;
  for (int64_t d = 1; d < x.dim(); ++d) dims.push_back(d);
  return at::linalg_vector_norm(x, norm_type, dims, /*keepdim=*/true);
}

}  // namespace

at::Tensor clip_grad_norm_(const std::vector<at::Tensor>& parameters, double max_norm, double norm_type) {
  torch::NoGradGuard no_grad;
  std::vector<at::Tensor> grads = defined_grads(parameters);
  if (grads.empty()) return at::zeros({});
  const std::vector<at::Tensor> norms = at::_foreach_norm(grads, norm_type);
  const at::Tensor total_norm = at::linalg_vector_norm(at::stack(norms), norm_type);
  const at::Tensor clip_coef = at::clamp_max(max_norm / (total_norm + 1e-6), 1.0);
  at::_foreach_mul_(grads, clip_coef);
  return total_norm;
}

void clip_grad_value_(const std::vector<at::Tensor>& parameters, double value) {
  torch::NoGradGuard no_grad;
  std::vector<at::Tensor> grads = defined_grads(parameters);
  if (grads.empty()) return;
  at::_foreach_clamp_min_(grads, -value);
  at::_foreach_clamp_max_(grads, value);
}

void adaptive_clip_grad_(const std::vector<at::Tensor>& parameters, double clip_factor, double eps, double norm_type) {
  torch::NoGradGuard no_grad;
  for (const auto& p : parameters) {
    if (!p.grad().defined()) continue;
    const at::Tensor weight = p.detach();
    at::Tensor grad = p.grad().detach();
    const at::Tensor max_norm = unitwise_norm(weight, norm_type).clamp_(eps).mul_(clip_factor);
    const at::Tensor grad_norm = unitwise_norm(grad, norm_type);
    const at::Tensor clipped = grad * (max_norm / grad_norm.clamp(1e-6));
    grad.copy_(at::where(grad_norm < max_norm, grad, clipped));
  }
}

std::vector<at::Tensor> model_parameters(const torch::nn::Module& model, bool exclude_head) {
  std::vector<at::Tensor> params = model.parameters();
  if (exclude_head && params.size() >= 2) params.resize(params.size() - 2);
  return params;
}

void dispatch_clip_grad(const std::vector<at::Tensor>& parameters, double value, const std::string& mode,
                        double norm_type) {
  if (mode == "norm") {
    clip_grad_norm_(parameters, value, norm_type);
  } else if (mode == "value") {
    clip_grad_value_(parameters, value);
  } else if (mode == "agc") {
    adaptive_clip_grad_(parameters, value, /*eps=*/1e-3, norm_type);
  } else {
    throw UsageError("--clip-mode " + in_quotes(mode) + ": expected norm, value or agc");
  }
}

}  // namespace timm
