#include "timm/layers/patch_embed.hpp"

#include <ostream>
#include <string>

#include "timm/base/error.hpp"

namespace timm::layers {

PatchEmbedImpl::PatchEmbedImpl(const PatchEmbedOptions& options_) : options(options_) {
  if (options.img_size() < 1 || options.patch_size() < 1 || options.in_chans() < 1 || options.embed_dim() < 1) {
    throw UsageError("PatchEmbed: img_size, patch_size, in_chans and embed_dim must be >= 1");
  }
  if (options.img_size() % options.patch_size() != 0) {
    throw UsageError("PatchEmbed: patch_size " + std::to_string(options.patch_size()) + " must divide img_size " +
                     std::to_string(options.img_size()));
  }
  reset();
}

void PatchEmbedImpl::reset() {
  namespace nn = torch::nn;
  const int64_t p = options.patch_size();
  proj = register_module(
      "proj", nn::Conv2d(nn::Conv2dOptions(options.in_chans(), options.embed_dim(), p).stride(p).bias(options.bias())));
}

void PatchEmbedImpl::pretty_print(std::ostream& stream) const {
  stream << "timm::layers::PatchEmbed(img_size=" << options.img_size() << ", patch_size=" << options.patch_size()
         << ", embed_dim=" << options.embed_dim() << ")";
}

at::Tensor PatchEmbedImpl::forward(const at::Tensor& x) {
  const int64_t size = options.img_size();
  if (x.dim() != 4 || x.size(2) != size || x.size(3) != size) {
    throw Error("PatchEmbed: input of shape " + std::string(c10::str(x.sizes())) + " does not match the model's " +
                std::to_string(size) + "x" + std::to_string(size) + " (N, C, H, W) image size");
  }
  at::Tensor y = proj(x);
  return options.flatten() ? y.flatten(2).transpose(1, 2) : y;
}

}  // namespace timm::layers
