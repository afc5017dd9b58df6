// Image to patch embedding, as timm's layers/patch_embed.py PatchEmbed:
// a Conv2d "proj" with kernel and stride patch_size, then (flatten) NCHW ->
// NLC tokens. The input must be img_size x img_size (timm's
// strict_img_size); a wrong size throws timm::Error naming both sizes.
// State_dict keys: proj.{weight,bias}.
#pragma once

#include <cstdint>

#include <ATen/ATen.h>
#include <torch/arg.h>
#include <torch/nn/cloneable.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/pimpl.h>

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
};

class PatchEmbedImpl : public torch::nn::Cloneable<PatchEmbedImpl> {
 public:
  // Throws UsageError unless patch_size divides img_size and sizes are positive.
  explicit PatchEmbedImpl(const PatchEmbedOptions& options);
  void reset() override;
  void pretty_print(std::ostream& stream) const override;
  at::Tensor forward(const at::Tensor& x);

  int64_t grid_size() const { return options.img_size() / options.patch_size(); }
  int64_t num_patches() const { return grid_size() * grid_size(); }

  PatchEmbedOptions options;
  torch::nn::Conv2d proj{nullptr};
};
TORCH_MODULE(PatchEmbed);

}  // namespace timm::layers
