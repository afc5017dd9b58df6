#include "timm/dist/sync_batchnorm.hpp"

#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <torch/autograd.h>
#include <torch/csrc/autograd/custom_function.h>

#include "timm/base/error.hpp"

namespace timm::dist {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Statistics accumulate in float for half and bfloat16 inputs, as torch's.
at::ScalarType compute_type(const at::Tensor& x) {
  return at::isReducedFloatingType(x.scalar_type()) ? at::kFloat : x.scalar_type();
}

// Per-channel view for broadcasting against (N, C, ...) inputs.
at::Tensor per_channel(const at::Tensor& t, int64_t dims) {
  std::vector<int64_t> shape(dims, 1);
  shape[1] = t.size(0);
  return t.view(shape);
}

std::vector<int64_t> reduce_dims(const at::Tensor& x) {
  std::vector<int64_t> dims{0};
  for (int64_t d = 2; d < x.dim(); ++d) dims.push_back(d);
  return dims;
}

struct GlobalStats {
  at::Tensor mean, invstd;  // per channel, compute type
  double count = 0;         // samples per channel over the group
};

// torch's batch_norm_gather_stats_with_counts: merges the gathered (mean,
// invstd, count) rows of the ranks with count >= 1 (Chan's parallel variance),
// in double, and moves the running stats (unbiased variance).
GlobalStats merge_stats(const at::Tensor& gathered, int64_t channels, const layers::BatchNormState& bn, double factor,
                        at::ScalarType type) {
  const auto all = gathered.to(at::kDouble);
  const auto counts = all.select(1, 2 * channels);
  const auto keep = counts >= 1;
  const auto n_j = counts.index({keep}).unsqueeze(1);
  const auto mean_j = all.narrow(1, 0, channels).index({keep});
  const auto var_j = all.narrow(1, channels, channels).index({keep}).pow(-2) - bn.eps;
  const double n = n_j.sum().item<double>();
  if (n < 1) throw Error("SyncBatchNorm got an empty batch on every rank: there is nothing to normalise");
  const auto mean = (n_j * mean_j).sum(0) / n;
  const auto m2 = (n_j * var_j + n_j * (mean_j - mean).pow(2)).sum(0);
  if (bn.tracks_running_stats()) {
    auto running_mean = bn.running_mean, running_var = bn.running_var;  // handles to the module's buffers
    running_mean.mul_(1 - factor).add_(mean.to(running_mean.scalar_type()), factor);
    running_var.mul_(1 - factor).add_((m2 / (n - 1)).to(running_var.scalar_type()), factor);
  }
  return {mean.to(type), (m2 / n + bn.eps).rsqrt().to(type), n};
}

struct SyncBatchNormFunction : public torch::autograd::Function<SyncBatchNormFunction> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                            const layers::BatchNormState& bn, double factor, const GroupPtr& group) {
    const auto type = compute_type(x);
    const int64_t channels = x.size(1);
    const auto xc = x.to(type);
    const int64_t local_count = x.numel() / channels;
    at::Tensor mean, invstd;
    if (local_count > 0) {
      auto [var, m] = at::var_mean(xc, reduce_dims(x), /*correction=*/0);
      mean = m;
      invstd = (var + bn.eps).rsqrt();
    } else {  // an empty batch still joins the all-gather, with count 0
      mean = at::zeros({channels}, xc.options());
      invstd = at::zeros({channels}, xc.options());
    }
    const auto combined = at::cat({mean, invstd, at::full({1}, static_cast<double>(local_count), xc.options())});
    const auto stats = merge_stats(at::stack(all_gather(group, combined)), channels, bn, factor, type);

    auto scale = stats.invstd;
    if (weight.defined()) scale = scale * weight.to(type);
    auto y = (xc - per_channel(stats.mean, x.dim())) * per_channel(scale, x.dim());
    if (bias.defined()) y = y + per_channel(bias.to(type), x.dim());

    ctx->save_for_backward({x, weight, stats.mean, stats.invstd});
    ctx->saved_data["count"] = stats.count;
    ctx->saved_data["group"] = c10::IValue::make_capsule(group);
    return y.to(x.scalar_type());
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const auto saved = ctx->get_saved_variables();
    const auto &x = saved[0], &weight = saved[1], &mean = saved[2], &invstd = saved[3];
    const auto type = compute_type(x);
    const int64_t dims = x.dim();
    const auto dy = grad_outputs[0].to(type);
    const auto xmu = x.to(type) - per_channel(mean, dims);
    const auto sum_dy = dy.sum(reduce_dims(x));  // zeros for an empty batch
    const auto sum_dy_xmu = (dy * xmu).sum(reduce_dims(x));

    at::Tensor grad_input, grad_weight, grad_bias;
    if (ctx->needs_input_grad(0)) {
      const auto group = c10::static_intrusive_pointer_cast<c10d::Backend>(ctx->saved_data["group"].toCapsule());
      const double n = ctx->saved_data["count"].toDouble();
      const int64_t channels = mean.size(0);
      auto combined = at::cat({sum_dy, sum_dy_xmu});
      all_reduce_sum(group, combined);
      const auto mean_dy = combined.narrow(0, 0, channels) / n;
      const auto mean_dy_xmu = combined.narrow(0, channels, channels) / n;
      auto scale = invstd;
      if (weight.defined()) scale = scale * weight.to(type);
      grad_input = ((dy - per_channel(mean_dy, dims) - xmu * per_channel(invstd.pow(2) * mean_dy_xmu, dims)) *
                    per_channel(scale, dims))
                       .to(x.scalar_type());
    }
    // Local, as torch's: DDP all-reduces them with the other gradients.
    if (weight.defined() && ctx->needs_input_grad(1)) grad_weight = (sum_dy_xmu * invstd).to(weight.scalar_type());
    if (ctx->needs_input_grad(2)) grad_bias = sum_dy.to(x.scalar_type());
    return {grad_input, grad_weight, grad_bias, at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

at::Tensor sync_batch_norm(const layers::BatchNormState& bn, const at::Tensor& x, const GroupPtr& group) {
  // torch's need_sync: only batch statistics in training mode are shared.
  if (!bn.training || group->getSize() < 2) return layers::batch_norm(bn, x);
  const double factor = layers::next_average_factor(bn);
  return SyncBatchNormFunction::apply(x, bn.weight, bn.bias, bn, factor, group);
}

layers::NormalizeFn sync_normalization(GroupPtr group) {
  return [group = std::move(group)](const layers::BatchNormState& bn, const at::Tensor& x) {
    return sync_batch_norm(bn, x, group);
  };
}

int64_t convert_sync_batchnorm(torch::nn::Module& model, const GroupPtr& group) {
  const auto norms = layers::convertible_batch_norms(model, "--sync-bn");
  for (const auto& entry : norms) entry.norm->swap_normalization(sync_normalization(group));
  return static_cast<int64_t>(norms.size());
}

SyncBatchNormImpl::SyncBatchNormImpl(const torch::nn::BatchNormOptions& options, GroupPtr group)
    : layers::BatchNorm2dImpl(options), group_(std::move(group)) {
  swap_normalization(sync_normalization(group_));
}

}  // namespace timm::dist
