#include "timm/layers/non_local_attn.hpp"

#include <ostream>
#include <string>
#include <tuple>
#include <vector>

#include "timm/base/error.hpp"
#include "timm/layers/squeeze_excite.hpp"

namespace timm::layers {
namespace {

ConvNormAct conv_bn_act_1x1(int64_t in, int64_t out, const std::string& act) {
  return ConvNormAct(ConvNormActOptions(in, out, 1).act_layer(act));
}

// timm's BilinearAttnTransform.resize_mat: (B, C, n, n) -> (B, C, n * t, n * t),
// entry (i, j) spread to the t x t block (i, j) times an identity, with
// timm's ops (view, broadcast product with eye, split and cat).
at::Tensor resize_mat(const at::Tensor& x, int64_t t) {
  if (t <= 1) return x;
  const int64_t b = x.size(0), c = x.size(1), n = x.size(2);
  at::Tensor y = x.view({b * c, -1, 1, 1}) * at::eye(t, t, x.options());
  y = y.view({b * c, n, n, t, t});
  y = at::cat(at::split(y, 1, 1), 3);
  y = at::cat(at::split(y, 1, 2), 4);
  return y.view({b, c, n * t, n * t});
}

}  // namespace

BilinearAttnTransformImpl::BilinearAttnTransformImpl(const BilinearAttnTransformOptions& options_) : options(options_) {
  if (options.in_channels() < 1 || options.block_size() < 1 || options.groups() < 1 ||
      options.in_channels() % options.groups() != 0) {
    throw UsageError("BilinearAttnTransform: in_channels " + std::to_string(options.in_channels()) + ", block_size " +
                     std::to_string(options.block_size()) + ", groups " + std::to_string(options.groups()) +
                     ": expected positive sizes, groups dividing in_channels");
  }
  reset();
}

void BilinearAttnTransformImpl::reset() {
  namespace nn = torch::nn;
  const int64_t bs = options.block_size(), groups = options.groups();
  conv1 = register_module("conv1", conv_bn_act_1x1(options.in_channels(), groups, options.act_layer()));
  conv_p = register_module("conv_p", nn::Conv2d(nn::Conv2dOptions(groups, bs * bs * groups, {bs, 1})));
  conv_q = register_module("conv_q", nn::Conv2d(nn::Conv2dOptions(groups, bs * bs * groups, {1, bs})));
  conv2 = register_module("conv2", conv_bn_act_1x1(options.in_channels(), options.in_channels(), options.act_layer()));
}

void BilinearAttnTransformImpl::pretty_print(std::ostream& stream) const {
  stream << "timm::layers::BilinearAttnTransform(in_channels=" << options.in_channels()
         << ", block_size=" << options.block_size() << ", groups=" << options.groups() << ")";
}

at::Tensor BilinearAttnTransformImpl::forward(const at::Tensor& x) {
  const int64_t bs = options.block_size(), groups = options.groups();
  if (x.dim() != 4 || x.size(1) != options.in_channels() || x.size(2) % bs != 0 || x.size(3) % bs != 0) {
    throw UsageError("BilinearAttnTransform: expected an (N, " + std::to_string(options.in_channels()) +
                     ", H, W) map with H and W multiples of the block size " + std::to_string(bs) + ", got shape " +
                     std::string(c10::str(x.sizes())));
  }
  const int64_t b = x.size(0), c = x.size(1), h = x.size(2), w = x.size(3);
  const at::Tensor out = conv1(x);
  const at::Tensor rp = std::get<0>(at::adaptive_max_pool2d(out, {bs, 1}));
  const at::Tensor cp = std::get<0>(at::adaptive_max_pool2d(out, {1, bs}));
  at::Tensor p = conv_p(rp).view({b, groups, bs, bs}).sigmoid();
  at::Tensor q = conv_q(cp).view({b, groups, bs, bs}).sigmoid();
  p = p / p.sum(3, /*keepdim=*/true);
  q = q / q.sum(2, /*keepdim=*/true);
  // Each group's matrices shared by its C / groups channels.
  p = p.view({b, groups, 1, bs, bs}).expand({b, groups, c / groups, bs, bs}).contiguous().view({b, c, bs, bs});
  q = q.view({b, groups, 1, bs, bs}).expand({b, groups, c / groups, bs, bs}).contiguous().view({b, c, bs, bs});
  p = resize_mat(p, h / bs);
  q = resize_mat(q, w / bs);
  return conv2(p.matmul(x).matmul(q));
}

BatNonLocalAttnImpl::BatNonLocalAttnImpl(const BatNonLocalAttnOptions& options_) : options(options_) {
  if (options.in_channels() < 1) {
    throw UsageError("BatNonLocalAttn: in_channels must be >= 1, got " + std::to_string(options.in_channels()));
  }
  if (options.drop_rate() < 0.0 || options.drop_rate() > 1.0) {
    throw UsageError("BatNonLocalAttn: drop_rate must be in [0, 1], got " + std::to_string(options.drop_rate()));
  }
  reset();
}

void BatNonLocalAttnImpl::reset() {
  const auto rd = options.rd_channels();
  rd_channels_ =
      rd ? *rd : make_divisible(static_cast<double>(options.in_channels()) * options.rd_ratio(), options.rd_divisor());
  conv1 = register_module("conv1", conv_bn_act_1x1(options.in_channels(), rd_channels_, options.act_layer()));
  ba = register_module(
      "ba", BilinearAttnTransform(BilinearAttnTransformOptions(rd_channels_, options.block_size(), options.groups())
                                      .act_layer(options.act_layer())));
  conv2 = register_module("conv2", conv_bn_act_1x1(rd_channels_, options.in_channels(), options.act_layer()));
  dropout = register_module("dropout", torch::nn::Dropout2d(options.drop_rate()));
}

void BatNonLocalAttnImpl::pretty_print(std::ostream& stream) const {
  stream << "timm::layers::BatNonLocalAttn(in_channels=" << options.in_channels() << ", rd_channels=" << rd_channels_
         << ", block_size=" << options.block_size() << ", groups=" << options.groups() << ")";
}

at::Tensor BatNonLocalAttnImpl::forward(const at::Tensor& x) { return dropout(conv2(ba(conv1(x)))) + x; }

}  // namespace timm::layers
