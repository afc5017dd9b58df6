#include "timm/layers/window_attention.hpp"

#include <algorithm>
#include <cmath>
#include <optional>
#include <ostream>
#include <string>

#include <c10/core/GradMode.h>

#include "timm/base/error.hpp"
#include "timm/layers/linear.hpp"
#include "timm/layers/weight_init.hpp"

namespace timm::layers {
namespace {

// Python's normalisation of a slice bound over `length` items (a negative
// bound counts from the end; -0 is 0); nullopt is the end.
int64_t slice_bound(std::optional<int64_t> bound, int64_t length) {
  if (!bound) return length;
  const int64_t b = *bound < 0 ? *bound + length : *bound;
  return std::clamp<int64_t>(b, 0, length);
}

}  // namespace

at::Tensor window_partition(const at::Tensor& x, WindowSize window) {
  const int64_t batch = x.size(0), height = x.size(1), width = x.size(2), channels = x.size(3);
  return x.view({batch, height / window[0], window[0], width / window[1], window[1], channels})
      .permute({0, 1, 3, 2, 4, 5})
      .contiguous()
      .view({-1, window[0], window[1], channels});
}

at::Tensor window_reverse(const at::Tensor& windows, WindowSize window, int64_t height, int64_t width) {
  const int64_t channels = windows.size(-1);
  return windows.view({-1, height / window[0], width / window[1], window[0], window[1], channels})
      .permute({0, 1, 3, 2, 4, 5})
      .contiguous()
      .view({-1, height, width, channels});
}

at::Tensor relative_position_index(int64_t win_h, int64_t win_w) {
  // As timm: the coordinates' pairwise offsets, shifted to start at 0, row
  // offset scaled by the number of column offsets.
  const auto grid = at::meshgrid({at::arange(win_h, at::kLong), at::arange(win_w, at::kLong)}, "ij");
  const at::Tensor coords = at::stack(grid).flatten(1);                                               // (2, N)
  at::Tensor relative = (coords.unsqueeze(2) - coords.unsqueeze(1)).permute({1, 2, 0}).contiguous();  // (N, N, 2)
  relative.select(2, 0).add_(win_h - 1).mul_(2 * win_w - 1);
  relative.select(2, 1).add_(win_w - 1);
  return relative.sum(-1);
}

at::Tensor shifted_window_attn_mask(int64_t height, int64_t width, WindowSize window, WindowSize shift,
                                    const at::TensorOptions& options) {
  if (shift[0] == 0 && shift[1] == 0) return {};
  c10::NoGradGuard no_grad;
  const int64_t padded_h = (height + window[0] - 1) / window[0] * window[0];
  const int64_t padded_w = (width + window[1] - 1) / window[1] * window[1];
  at::Tensor img_mask = at::zeros({1, padded_h, padded_w, 1}, options);
  // timm's three slices per axis: (0, -window), (-window, -shift), (-shift, None).
  using Slice = std::pair<std::optional<int64_t>, std::optional<int64_t>>;
  auto slices = [](int64_t w, int64_t s) {
    return std::array<Slice, 3>{Slice{0, -w}, Slice{-w, -s}, Slice{-s, std::nullopt}};
  };
  double region = 0.0;
  for (const auto& [h0, h1] : slices(window[0], shift[0])) {
    for (const auto& [w0, w1] : slices(window[1], shift[1])) {
      const int64_t top = slice_bound(h0, padded_h), bottom = slice_bound(h1, padded_h);
      const int64_t left = slice_bound(w0, padded_w), right = slice_bound(w1, padded_w);
      if (bottom > top && right > left)
        img_mask.narrow(1, top, bottom - top).narrow(2, left, right - left).fill_(region);
      region += 1.0;
    }
  }
  const at::Tensor windows = window_partition(img_mask, window).view({-1, window[0] * window[1]});
  const at::Tensor diff = windows.unsqueeze(1) - windows.unsqueeze(2);
  return diff.masked_fill(diff != 0, -100.0).masked_fill(diff == 0, 0.0);
}

WindowAttentionImpl::WindowAttentionImpl(const WindowAttentionOptions& options_) : options(options_) {
  const auto& window = options.window_size();
  if (options.dim() < 1 || options.num_heads() < 1 || window[0] < 1 || window[1] < 1 || options.head_dim() < 0) {
    throw UsageError("WindowAttention: dim, num_heads and the window size must be >= 1");
  }
  if (options.head_dim() == 0 && options.dim() % options.num_heads() != 0) {
    throw UsageError("WindowAttention: num_heads (" + std::to_string(options.num_heads()) + ") must divide dim (" +
                     std::to_string(options.dim()) + ")");
  }
  if (options.attn_drop() < 0.0 || options.attn_drop() > 1.0 || options.proj_drop() < 0.0 ||
      options.proj_drop() > 1.0) {
    throw UsageError("WindowAttention: attn_drop and proj_drop must be in [0, 1]");
  }
  reset();
}

// Registration order is timm's attribute order: the table, qkv, attn_drop, proj, proj_drop.
void WindowAttentionImpl::reset() {
  namespace nn = torch::nn;
  const auto& window = options.window_size();
  const int64_t attn_dim = head_dim() * options.num_heads();
  relative_position_bias_table = register_parameter(
      "relative_position_bias_table", at::empty({(2 * window[0] - 1) * (2 * window[1] - 1), options.num_heads()}));
  trunc_normal_(relative_position_bias_table, 0.0, 0.02);
  relative_position_index = layers::relative_position_index(window[0], window[1]);
  qkv = register_module("qkv", layers::Linear(nn::LinearOptions(options.dim(), 3 * attn_dim).bias(options.qkv_bias())));
  attn_drop = register_module("attn_drop", nn::Dropout(options.attn_drop()));
  proj = register_module("proj", layers::Linear(attn_dim, options.dim()));
  proj_drop = register_module("proj_drop", nn::Dropout(options.proj_drop()));
}

void WindowAttentionImpl::pretty_print(std::ostream& stream) const {
  stream << "timm::layers::WindowAttention(dim=" << options.dim() << ", num_heads=" << options.num_heads()
         << ", window_size=(" << options.window_size()[0] << ", " << options.window_size()[1] << "))";
}

at::Tensor WindowAttentionImpl::relative_position_bias() {
  // The index follows the table to its device once (the module's .to() does not see it).
  if (relative_position_index.device() != relative_position_bias_table.device()) {
    relative_position_index = relative_position_index.to(relative_position_bias_table.device());
  }
  const int64_t area = window_area();
  // Advanced indexing as timm's table[index.view(-1)] (the same backward, index_put_ with accumulate).
  return relative_position_bias_table.index({relative_position_index.view(-1)})
      .view({area, area, -1})
      .permute({2, 0, 1})
      .contiguous()
      .unsqueeze(0);
}

at::Tensor WindowAttentionImpl::forward(const at::Tensor& x, const at::Tensor& mask) {
  const int64_t batch_windows = x.size(0), tokens = x.size(1), heads = options.num_heads();
  // (B_, N, 3 * attn_dim) -> (3, B_, heads, N, head_dim)
  const auto qkv_heads = qkv(x).reshape({batch_windows, tokens, 3, heads, -1}).permute({2, 0, 3, 1, 4}).unbind(0);
  const double scale = std::pow(static_cast<double>(head_dim()), -0.5);  // timm's head_dim ** -0.5
  at::Tensor attn = at::matmul(qkv_heads[0] * scale, qkv_heads[1].transpose(-2, -1));
  attn = attn + relative_position_bias();
  if (mask.defined()) {
    const int64_t num_windows = mask.size(0);
    attn = attn.view({-1, num_windows, heads, tokens, tokens}) + mask.unsqueeze(1).unsqueeze(0);
    attn = attn.view({-1, heads, tokens, tokens});
  }
  attn = attn_drop(at::softmax(attn, -1));
  at::Tensor out = at::matmul(attn, qkv_heads[2]).transpose(1, 2).reshape({batch_windows, tokens, -1});
  return proj_drop(proj(out));
}

}  // namespace timm::layers
