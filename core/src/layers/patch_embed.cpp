#include "timm/layers/patch_embed.hpp"

#include <ostream>
#include <string>

#include "timm/base/error.hpp"

namespace timm::layers {

PatchEmbedImpl::PatchEmbedImpl(const PatchEmbedOptions& options_) : options(options_) {
  if (options.img_size() < 1 || options.patch_size() < 1 || options.in_chans() < 1 || options.embed_dim() < 1) {
    throw UsageError("PatchEmbed: img_size, patch_size, in_chans and embed_dim must be >= 1");
  }
  // timm's _init_img_size: the grid is img_size // patch_size, and the conv
  // leaves the rest of the image out (vit_so400m_patch14_siglip_384: 27 x 27
  // patches over 378 of the 384 pixels). Padded, such an image would give
  // one patch more than the grid.
  if (options.img_size() < options.patch_size() ||
      (options.dynamic_img_pad() && options.img_size() % options.patch_size() != 0)) {
    throw UsageError("PatchEmbed: img_size " + std::to_string(options.img_size()) + ": expected " +
                     (options.dynamic_img_pad() ? "a multiple of" : "at least") + " patch_size " +
                     std::to_string(options.patch_size()));
  }
  const std::string& fmt = options.output_fmt();
  if (!fmt.empty() && fmt != "NCHW" && fmt != "NHWC" && fmt != "NCL" && fmt != "NLC") {
    throw UsageError("PatchEmbed: output_fmt " + in_quotes(fmt) + ": expected 'NCHW', 'NHWC', 'NCL' or 'NLC'");
  }
  const std::string& norm_layer = options.norm_layer();
  if (!norm_layer.empty() && norm_layer != "layernorm") {
    throw UsageError("PatchEmbed: norm_layer " + in_quotes(norm_layer) + ": expected '' or 'layernorm'");
  }
  const bool channels_last = fmt.empty() ? options.flatten() : (fmt == "NHWC" || fmt == "NLC");
  if (!norm_layer.empty() && !channels_last) {
    throw UsageError(
        "PatchEmbed: norm_layer 'layernorm' normalises the last dimension: output_fmt must be 'NHWC' or "
        "'NLC' (or flatten)");
  }
  reset();
}

void PatchEmbedImpl::reset() {
  namespace nn = torch::nn;
  const int64_t p = options.patch_size();
  proj = register_module(
      "proj", nn::Conv2d(nn::Conv2dOptions(options.in_chans(), options.embed_dim(), p).stride(p).bias(options.bias())));
  if (!options.norm_layer().empty()) {
    norm = register_module("norm", LayerNorm(torch_layer_norm_options(options.embed_dim()).eps(options.norm_eps())));
  }
}

void PatchEmbedImpl::pretty_print(std::ostream& stream) const {
  stream << "timm::layers::PatchEmbed(img_size=" << options.img_size() << ", patch_size=" << options.patch_size()
         << ", embed_dim=" << options.embed_dim() << ")";
}

std::array<int64_t, 2> PatchEmbedImpl::dynamic_feat_size(int64_t height, int64_t width) const {
  const int64_t p = options.patch_size();
  if (options.dynamic_img_pad()) return {(height + p - 1) / p, (width + p - 1) / p};
  return {height / p, width / p};
}

at::Tensor PatchEmbedImpl::forward(const at::Tensor& x) {
  const int64_t size = options.img_size();
  const int64_t p = options.patch_size();
  const std::string shape = c10::str(x.sizes());
  if (x.dim() != 4) throw Error("PatchEmbed: input of shape " + shape + " is not an (N, C, H, W) image");
  const int64_t height = x.size(2), width = x.size(3);
  if (options.strict_img_size() && (height != size || width != size)) {
    throw Error("PatchEmbed: input of shape " + shape + " does not match the model's " + std::to_string(size) + "x" +
                std::to_string(size) + " (N, C, H, W) image size");
  }
  if (!options.strict_img_size() && !options.dynamic_img_pad() && (height % p != 0 || width % p != 0)) {
    throw Error("PatchEmbed: input of shape " + shape + ": height and width must be multiples of the patch size " +
                std::to_string(p) + " (or pad them: dynamic_img_pad)");
  }
  at::Tensor padded = x;
  if (options.dynamic_img_pad()) {
    const int64_t pad_h = (p - height % p) % p, pad_w = (p - width % p) % p;
    if (pad_h > 0 || pad_w > 0) padded = at::constant_pad_nd(x, {0, pad_w, 0, pad_h}, 0.0);
  }
  at::Tensor y = to_output_fmt(proj(padded));
  return norm ? norm(y) : y;
}

// timm's flatten / nchw_to.
at::Tensor PatchEmbedImpl::to_output_fmt(const at::Tensor& y) const {
  const std::string& fmt = options.output_fmt();
  if (fmt.empty()) return options.flatten() ? y.flatten(2).transpose(1, 2) : y;
  if (fmt == "NHWC") return y.permute({0, 2, 3, 1});
  if (fmt == "NLC") return y.flatten(2).transpose(1, 2);
  if (fmt == "NCL") return y.flatten(2);
  return y;  // "NCHW"
}

}  // namespace timm::layers
