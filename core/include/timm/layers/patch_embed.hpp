// Image to patch embedding, as timm's layers/patch_embed.py PatchEmbed:
// a Conv2d "proj" with kernel and stride patch_size, then (flatten) NCHW ->
// NLC tokens, or the layout output_fmt names. The token grid is img_size //
// patch_size (as timm, img_size need not be a multiple: the conv leaves the
// rest out). With strict_img_size the
// input must be img_size x img_size; without it any size a multiple of
// patch_size, or any size with dynamic_img_pad (zeros padded at the bottom
// and right up to the next multiple, as timm). A wrong size throws
// timm::Error naming both sizes. With norm_layer "layernorm" a LayerNorm over
// embed_dim follows (timm's norm_layer=nn.LayerNorm, Swin's). State_dict
// keys: proj.{weight,bias}, [norm.{weight,bias}].
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include <ATen/ATen.h>
#include <torch/arg.h>
#include <torch/nn/cloneable.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/pimpl.h>

#include "timm/layers/norm.hpp"

namespace timm::layers {

struct PatchEmbedOptions {
  PatchEmbedOptions(int64_t img_size, int64_t patch_size, int64_t in_chans, int64_t embed_dim)
      : img_size_(img_size), patch_size_(patch_size), in_chans_(in_chans), embed_dim_(embed_dim) {}
  TORCH_ARG(int64_t, img_size);
  TORCH_ARG(int64_t, patch_size);
  TORCH_ARG(int64_t, in_chans);
  TORCH_ARG(int64_t, embed_dim);
  TORCH_ARG(bool, bias) = true;
  TORCH_ARG(bool, flatten) = true;  // NLC output; NCHW when false
  // timm's output_fmt: "NCHW", "NHWC", "NCL" or "NLC" (disables flatten);
  // "" keeps flatten's choice.
  TORCH_ARG(std::string, output_fmt) = "";
  TORCH_ARG(bool, strict_img_size) = true;
  TORCH_ARG(bool, dynamic_img_pad) = false;
  // "" (none) or "layernorm": torch's nn.LayerNorm(embed_dim) after the
  // layout change, so the output must be channels last (NHWC, NLC, flatten).
  TORCH_ARG(std::string, norm_layer) = "";
  TORCH_ARG(double, norm_eps) = 1e-5;  // nn.LayerNorm's default
};

class PatchEmbedImpl : public torch::nn::Cloneable<PatchEmbedImpl> {
 public:
  // Throws UsageError unless sizes are positive, img_size is at least
  // patch_size (a multiple of it with dynamic_img_pad), output_fmt and
  // norm_layer are known and a norm has a channels-last output.
  explicit PatchEmbedImpl(const PatchEmbedOptions& options);
  void reset() override;
  void pretty_print(std::ostream& stream) const override;
  at::Tensor forward(const at::Tensor& x);

  int64_t grid_size() const { return options.img_size() / options.patch_size(); }
  int64_t num_patches() const { return grid_size() * grid_size(); }
  // timm's dynamic_feat_size: the token grid {h, w} of an h x w input (rounded
  // up with dynamic_img_pad).
  std::array<int64_t, 2> dynamic_feat_size(int64_t height, int64_t width) const;

  PatchEmbedOptions options;
  torch::nn::Conv2d proj{nullptr};
  LayerNorm norm{nullptr};  // null without norm_layer

 private:
  at::Tensor to_output_fmt(const at::Tensor& y) const;
};
TORCH_MODULE(PatchEmbed);

}  // namespace timm::layers
