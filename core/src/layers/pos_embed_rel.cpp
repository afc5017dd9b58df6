#include "timm/layers/pos_embed_rel.hpp"

#include <cmath>
#include <ostream>
#include <string>

#include <c10/core/GradMode.h>
#include <torch/nn/modules/dropout.h>

#include "timm/base/error.hpp"
#include "timm/layers/weight_init.hpp"
#include "timm/layers/window_attention.hpp"

namespace timm::layers {
namespace {

void check_window(const char* what, WindowSize window, int64_t num_heads) {
  if (window[0] < 1 || window[1] < 1 || num_heads < 1) {
    throw UsageError(std::string(what) + ": the window size (" + std::to_string(window[0]) + "x" +
                     std::to_string(window[1]) + ") and num_heads (" + std::to_string(num_heads) + ") must be >= 1");
  }
}

// timm's generate_lookup_tensor(length): (length, length, 2 * length - 1),
// entry (i, x, x - i + length - 1) one, the others zero.
at::Tensor lookup_tensor(int64_t length) {
  const at::Tensor i = at::arange(length, at::kLong).view({length, 1});
  const at::Tensor x = at::arange(length, at::kLong).view({1, length});
  const at::Tensor v = x - i + (length - 1);
  return at::one_hot(v, 2 * length - 1).to(at::kFloat);
}

// A non-persistent buffer following `like`'s device and dtype (the module's .to() does not see a plain member).
void follow(at::Tensor& buffer, const at::Tensor& like, bool dtype_too) {
  if (buffer.device() != like.device() || (dtype_too && buffer.scalar_type() != like.scalar_type())) {
    buffer = dtype_too ? buffer.to(like.device(), like.scalar_type()) : buffer.to(like.device());
  }
}

}  // namespace

at::Tensor gen_relative_log_coords(WindowSize win_size, WindowSize pretrained_win_size, const std::string& mode) {
  if (mode != "swin" && mode != "cr") {
    throw UsageError("gen_relative_log_coords: mode " + in_quotes(mode) + " is not one of 'swin', 'cr'");
  }
  check_window("gen_relative_log_coords", win_size, 1);
  c10::NoGradGuard no_grad;
  const at::Tensor h = at::arange(-(win_size[0] - 1), win_size[0], at::kLong).to(at::kFloat);
  const at::Tensor w = at::arange(-(win_size[1] - 1), win_size[1], at::kLong).to(at::kFloat);
  const auto grid = at::meshgrid({h, w}, "ij");
  at::Tensor table = at::stack({grid[0], grid[1]}).permute({1, 2, 0}).contiguous();  // (2h-1, 2w-1, 2)
  if (mode == "swin") {
    const bool pretrained = pretrained_win_size[0] > 0;
    const int64_t div_h = (pretrained ? pretrained_win_size[0] : win_size[0]) - 1;
    const int64_t div_w = (pretrained ? pretrained_win_size[1] : win_size[1]) - 1;
    table.select(2, 0).div_(static_cast<double>(div_h));
    table.select(2, 1).div_(static_cast<double>(div_w));
    table.mul_(8.0);
    return at::sign(table) * at::log2(1.0 + table.abs()) / std::log2(8.0);
  }
  return at::sign(table) * at::log(1.0 + table.abs());
}

// ---- RelPosBias ----

RelPosBiasImpl::RelPosBiasImpl(const RelPosBiasOptions& options_) : options(options_) {
  check_window("RelPosBias", options.window_size(), options.num_heads());
  reset();
}

void RelPosBiasImpl::reset() {
  const auto& window = options.window_size();
  relative_position_bias_table = register_parameter(
      "relative_position_bias_table", at::empty({(2 * window[0] - 1) * (2 * window[1] - 1), options.num_heads()}));
  trunc_normal_(relative_position_bias_table, 0.0, 0.02);
  relative_position_index = layers::relative_position_index(window[0], window[1]).view(-1);
}

void RelPosBiasImpl::pretty_print(std::ostream& stream) const {
  stream << "timm::layers::RelPosBias(window_size=(" << options.window_size()[0] << ", " << options.window_size()[1]
         << "), num_heads=" << options.num_heads() << ")";
}

at::Tensor RelPosBiasImpl::get_bias() {
  follow(relative_position_index, relative_position_bias_table, /*dtype_too=*/false);
  const int64_t area = options.window_size()[0] * options.window_size()[1];
  // Advanced indexing as timm's table[index] (the same backward, index_put_ with accumulate).
  return relative_position_bias_table.index({relative_position_index})
      .view({area, area, options.num_heads()})
      .permute({2, 0, 1})
      .unsqueeze(0)
      .contiguous();
}

// ---- RelPosMlp ----

RelPosMlpImpl::RelPosMlpImpl(const RelPosMlpOptions& options_) : options(options_) {
  check_window("RelPosMlp", options.window_size(), options.num_heads());
  if (options.hidden_dim() < 1) {
    throw UsageError("RelPosMlp: hidden_dim must be >= 1, got " + std::to_string(options.hidden_dim()));
  }
  reset();
}

void RelPosMlpImpl::reset() {
  const auto& window = options.window_size();
  mlp = register_module(
      "mlp",
      Mlp(MlpOptions(2).hidden_features(options.hidden_dim()).out_features(options.num_heads()).act_layer("relu")));
  // timm's drop=(0.125, 0.): dropout after the hidden layer only.
  mlp->drop1 = mlp->replace_module("drop1", torch::nn::Dropout(0.125));
  relative_position_index = layers::relative_position_index(window[0], window[1]).view(-1);
  rel_coords_log = gen_relative_log_coords(window, {0, 0}, "cr");
}

void RelPosMlpImpl::pretty_print(std::ostream& stream) const {
  stream << "timm::layers::RelPosMlp(window_size=(" << options.window_size()[0] << ", " << options.window_size()[1]
         << "), num_heads=" << options.num_heads() << ", hidden_dim=" << options.hidden_dim() << ")";
}

at::Tensor RelPosMlpImpl::get_bias() {
  const at::Tensor weight = mlp->fc1.ptr()->parameters().front();  // a copy: parameters() is a temporary
  follow(rel_coords_log, weight, /*dtype_too=*/true);
  follow(relative_position_index, weight, /*dtype_too=*/false);
  const int64_t area = options.window_size()[0] * options.window_size()[1];
  return mlp(rel_coords_log)
      .view({-1, options.num_heads()})
      .index({relative_position_index})
      .view({area, area, options.num_heads()})
      .permute({2, 0, 1})
      .unsqueeze(0)
      .contiguous();
}

// ---- RelPosBiasTf ----

RelPosBiasTfImpl::RelPosBiasTfImpl(const RelPosBiasOptions& options_) : options(options_) {
  check_window("RelPosBiasTf", options.window_size(), options.num_heads());
  reset();
}

void RelPosBiasTfImpl::reset() {
  const auto& window = options.window_size();
  relative_position_bias_table = register_parameter(
      "relative_position_bias_table", at::empty({options.num_heads(), 2 * window[0] - 1, 2 * window[1] - 1}));
  {
    c10::NoGradGuard no_grad;
    relative_position_bias_table.normal_(0.0, 0.02);
  }
  height_lookup = lookup_tensor(window[0]);
  width_lookup = lookup_tensor(window[1]);
}

void RelPosBiasTfImpl::pretty_print(std::ostream& stream) const {
  stream << "timm::layers::RelPosBiasTf(window_size=(" << options.window_size()[0] << ", " << options.window_size()[1]
         << "), num_heads=" << options.num_heads() << ")";
}

at::Tensor RelPosBiasTfImpl::get_bias() {
  follow(height_lookup, relative_position_bias_table, /*dtype_too=*/true);
  follow(width_lookup, relative_position_bias_table, /*dtype_too=*/true);
  // timm's reindex_2d_einsum_lookup.
  const at::Tensor by_height = at::einsum("nhw,ixh->nixw", {relative_position_bias_table, height_lookup});
  const at::Tensor both = at::einsum("nixw,jyw->nijxy", {by_height, width_lookup});
  const int64_t area = options.window_size()[0] * options.window_size()[1];
  return both.reshape({options.num_heads(), area, area});
}

}  // namespace timm::layers
