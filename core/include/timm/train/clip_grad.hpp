// Gradient clipping as timm's dispatch_clip_grad (--clip-grad, --clip-mode).
#pragma once

#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

namespace timm {

// torch.nn.utils.clip_grad_norm_: scales all gradients by
// min(max_norm / (total_norm + 1e-6), 1), the total norm being the p-norm
// of the per-tensor p-norms. Returns the total norm before clipping.
at::Tensor clip_grad_norm_(const std::vector<at::Tensor>& parameters, double max_norm, double norm_type = 2.0);

// torch.nn.utils.clip_grad_value_: clamps every gradient to [-value, value].
void clip_grad_value_(const std::vector<at::Tensor>& parameters, double value);

// timm's adaptive_clip_grad (AGC, Brock et al. 2021): per output unit (the
// whole tensor for 1-D ones), a gradient whose norm reaches
// clip_factor * max(|W|, eps) is scaled down to it.
void adaptive_clip_grad_(const std::vector<at::Tensor>& parameters, double clip_factor, double eps = 1e-3,
                         double norm_type = 2.0);

// timm's model_parameters: `model`'s parameters, without the last two (the
// classifier's weight and bias) when `exclude_head` (train.py and
// benchmark.py exclude them for AGC: 'agc' in --clip-mode).
std::vector<at::Tensor> model_parameters(const torch::nn::Module& model, bool exclude_head);

// dispatch_clip_grad: mode "norm", "value" or "agc"; anything else is a
// UsageError naming --clip-mode.
void dispatch_clip_grad(const std::vector<at::Tensor>& parameters, double value, const std::string& mode,
                        double norm_type = 2.0);

}  // namespace timm
