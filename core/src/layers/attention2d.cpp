#include "timm/layers/attention2d.hpp"

#include <ostream>
#include <string>
#include <vector>

#include <torch/nn/init.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/pooling.h>
#include <torch/nn/modules/upsampling.h>

#include "timm/base/error.hpp"
#include "timm/layers/batch_norm.hpp"
#include "timm/layers/conv2d_same.hpp"
#include "timm/layers/norm_act.hpp"

namespace timm::layers {
namespace {

namespace nn = torch::nn;

// timm's create_conv2d(in, out, 1, bias=use_bias): a 1x1 projection, unpadded whatever the padding string.
nn::Conv2d mqa_projection(int64_t in, int64_t out, bool bias) {
  return nn::Conv2d(nn::Conv2dOptions(in, out, 1).bias(bias));
}

// timm's norm_layer(dim): the SDK's BatchNorm2d, so SyncBatchNorm / SplitBatchNorm conversions reach it.
BatchNorm2d mqa_norm(const MultiQueryAttention2dOptions& o) {
  return BatchNorm2d(nn::BatchNorm2dOptions(o.dim()).eps(o.norm_eps()).momentum(o.norm_momentum()));
}

// The "weight" parameter of a conv held in a Sequential (a Conv2d or a Conv2dSame).
at::Tensor mqa_weight(const nn::Sequential& seq, const std::string& name) {
  return seq->named_children()[name]->named_parameters(
      /*recurse=*/false)["weight"];
}

}  // namespace

MultiQueryAttention2dImpl::MultiQueryAttention2dImpl(const MultiQueryAttention2dOptions& options_) : options(options_) {
  reset();
}

int64_t MultiQueryAttention2dImpl::key_dim() const {
  return options.key_dim().value_or(options.dim() / options.num_heads());
}

int64_t MultiQueryAttention2dImpl::value_dim() const {
  return options.value_dim().value_or(options.dim() / options.num_heads());
}

void MultiQueryAttention2dImpl::reset() {
  const auto& o = options;
  const std::string what = "MultiQueryAttention2d";
  if (o.dim() < 1 || o.num_heads() < 1 || o.query_strides() < 1 || o.kv_stride() < 1 || o.dw_kernel_size() < 1 ||
      o.dilation() < 1) {
    throw UsageError(what + ": dim, num_heads, query_strides, kv_stride, dw_kernel_size and dilation must be >= 1");
  }
  if (key_dim() < 1 || value_dim() < 1 || o.dim_out().value_or(1) < 1) {
    throw UsageError(what + ": key_dim, value_dim and dim_out must be >= 1 (key_dim / value_dim default to dim / " +
                     "num_heads, " + std::to_string(o.dim()) + " / " + std::to_string(o.num_heads()) + ")");
  }
  if (o.padding() != "" && o.padding() != "same") {
    throw UsageError(what + ": padding " + in_quotes(o.padding()) + " is not supported (expected '' or 'same')");
  }
  if (o.query_strides() > 1 && o.padding() == "same") {
    throw UsageError(what + ": query_strides with padding 'same' are not supported");
  }
  if (o.attn_drop() < 0.0 || o.attn_drop() >= 1.0 || o.proj_drop() < 0.0 || o.proj_drop() >= 1.0) {
    throw UsageError(what + ": attn_drop and proj_drop must be in [0, 1)");
  }
  const int64_t dim = o.dim();
  const int64_t dim_out = o.dim_out().value_or(dim);

  nn::Sequential q;
  if (o.query_strides() > 1) {
    // timm: no padding when not 'same', as kernel = stride.
    q->push_back("down_pool", nn::AvgPool2d(nn::AvgPool2dOptions(o.query_strides())));
    q->push_back("norm", mqa_norm(o));
  }
  q->push_back("proj", mqa_projection(dim, o.num_heads() * key_dim(), o.use_bias()));
  query = register_module("query", q);

  auto kv = [&](int64_t out) {
    nn::Sequential seq;
    if (o.kv_stride() > 1) {
      Conv2dArgs args;
      args.stride = o.kv_stride();
      args.dilation = o.dilation();
      args.groups = dim;  // depthwise
      seq->push_back("down_conv", create_conv2d_pad(dim, dim, o.dw_kernel_size(), args, o.padding()));
      seq->push_back("norm", mqa_norm(o));
    }
    seq->push_back("proj", mqa_projection(dim, out, o.use_bias()));
    return seq;
  };
  key = register_module("key", kv(key_dim()));
  value = register_module("value", kv(value_dim()));
  attn_drop = register_module("attn_drop", nn::Dropout(o.attn_drop()));

  nn::Sequential out;
  if (o.query_strides() > 1) {
    const auto s = static_cast<double>(o.query_strides());
    out->push_back(
        "upsample",
        nn::Upsample(
            nn::UpsampleOptions().scale_factor(std::vector<double>{s, s}).mode(torch::kBilinear).align_corners(false)));
  }
  out->push_back("proj", mqa_projection(value_dim() * o.num_heads(), dim_out, o.use_bias()));
  out->push_back("drop", nn::Dropout(o.proj_drop()));
  output = register_module("output", out);

  // timm's init_weights (it found xavier more stable for MobileNetV4 hybrids); biases keep torch's init.
  for (auto* seq : {&query, &key, &value, &output}) nn::init::xavier_uniform_(mqa_weight(*seq, "proj"));
  if (o.kv_stride() > 1) {
    nn::init::xavier_uniform_(mqa_weight(key, "down_conv"));
    nn::init::xavier_uniform_(mqa_weight(value, "down_conv"));
  }
}

void MultiQueryAttention2dImpl::pretty_print(std::ostream& stream) const {
  stream << "timm::layers::MultiQueryAttention2d(" << options.dim()
         << ", dim_out=" << options.dim_out().value_or(options.dim()) << ", num_heads=" << options.num_heads()
         << ", key_dim=" << key_dim() << ", value_dim=" << value_dim() << ", query_strides=" << options.query_strides()
         << ", kv_stride=" << options.kv_stride() << ")";
}

at::Tensor MultiQueryAttention2dImpl::forward(const at::Tensor& x) {
  if (x.dim() != 4 || x.size(1) != options.dim()) {
    std::string got = std::to_string(x.dim()) + " dimensions";
    if (x.dim() >= 2) got += ", " + std::to_string(x.size(1)) + " channels";
    throw UsageError("MultiQueryAttention2d: expected a (B, " + std::to_string(options.dim()) + ", H, W) input, got " +
                     got);
  }
  const int64_t batch = x.size(0);
  const int64_t heads = options.num_heads();
  const int64_t kd = key_dim();
  const int64_t vd = value_dim();
  // (B, heads * key_dim, H', W') -> (B, heads, H' * W', key_dim)
  const at::Tensor q = query->forward(x).reshape({batch, heads, kd, -1}).transpose(-1, -2).contiguous();
  // (B, d, h, w) -> (B, 1, h * w, d): one key / value head, which attention
  // broadcasts to every query head. Contiguous and not expanded, as timm's:
  // an expanded (B, heads, ...) view takes another kernel, whose sums differ
  // in the last bits (train-mode logits off by 3e-4 at 64x96).
  auto shared_head = [&](const at::Tensor& t, int64_t d) {
    return t.reshape({batch, d, -1}).transpose(1, 2).unsqueeze(1).contiguous();
  };
  const at::Tensor k = shared_head(key->forward(x), kd);
  const at::Tensor v = shared_head(value->forward(x), vd);
  const double dropout_p = is_training() ? options.attn_drop() : 0.0;
  const at::Tensor o = at::scaled_dot_product_attention(q, k, v, /*attn_mask=*/std::nullopt, dropout_p);
  // (B, heads, H' * W', value_dim) -> (B, heads * value_dim, H', W'), H' = H / query_strides (floor, as timm's).
  const int64_t h_px = x.size(2) / options.query_strides();
  const int64_t w_px = x.size(3) / options.query_strides();
  const at::Tensor out = o.transpose(1, 2).reshape({batch, h_px, w_px, heads * vd}).permute({0, 3, 1, 2}).contiguous();
  return output->forward(out);
}

}  // namespace timm::layers
