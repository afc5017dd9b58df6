// The SDK's ViT input layers: PatchEmbed (strict size, multiples of the patch,
// dynamic_img_pad, output_fmt) and resample_abs_pos_embed, against timm's
// definitions written out with the ATen ops timm's calls reach
// (F.interpolate's antialiased bicubic, F.pad). The ViT plugin's parity
// cases compare both with timm through whole models.
#include <array>
#include <optional>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include "timm/base/error.hpp"
#include "timm/layers/patch_embed.hpp"
#include "timm/layers/pos_embed.hpp"

// Last: c10/util/Logging.h defines a CHECK macro that doctest must override.
#include <doctest/doctest.h>

namespace test_patch_embed {

namespace layers = timm::layers;

TEST_CASE("resample_abs_pos_embed keeps the prefix tokens and interpolates the grid as F.interpolate") {
  at::manual_seed(0);
  const at::Tensor posemb = at::randn({1, 2 + 3 * 4, 5});
  // The same grid: the same tensor back, as timm.
  CHECK(layers::resample_abs_pos_embed(posemb, {3, 4}, std::array<int64_t, 2>{3, 4}, 2).is_same(posemb));
  const at::Tensor resized = layers::resample_abs_pos_embed(posemb, {6, 2}, std::array<int64_t, 2>{3, 4}, 2);
  CHECK((resized.sizes() == at::IntArrayRef{1, 2 + 6 * 2, 5}));
  CHECK(at::equal(resized.slice(1, 0, 2), posemb.slice(1, 0, 2)));
  // The grid part: (1, C, H, W) through antialiased bicubic, back to tokens.
  const at::Tensor grid = posemb.slice(1, 2).reshape({1, 3, 4, 5}).permute({0, 3, 1, 2});
  const at::Tensor expected = at::_upsample_bicubic2d_aa(grid, {6, 2}, false).permute({0, 2, 3, 1}).reshape({1, 12, 5});
  CHECK(at::allclose(resized.slice(1, 2), expected));
  // No old size: a square grid from the token count; no prefix tokens.
  const at::Tensor square = at::randn({1, 16, 3});
  CHECK((layers::resample_abs_pos_embed(square, {2, 3}, std::nullopt, 0, "bilinear", false).sizes() ==
         at::IntArrayRef{1, 6, 3}));
  CHECK_THROWS_AS(layers::resample_abs_pos_embed(square, {2, 3}, std::array<int64_t, 2>{3, 4}, 0), timm::UsageError);
  CHECK_THROWS_WITH_AS(layers::resample_abs_pos_embed(square, {2, 3}, std::nullopt, 0, "area"),
                       doctest::Contains("'area'"), timm::UsageError);
}

TEST_CASE("PatchEmbed: strict size, multiples of the patch, dynamic_img_pad's zeros, output_fmt") {
  at::manual_seed(0);
  c10::NoGradGuard no_grad;
  layers::PatchEmbed strict(layers::PatchEmbedOptions(32, 16, 3, 8));
  CHECK((strict(at::randn({2, 3, 32, 32})).sizes() == at::IntArrayRef{2, 4, 8}));
  CHECK_THROWS_WITH_AS(strict(at::randn({2, 3, 48, 32})), doctest::Contains("32x32"), timm::Error);

  layers::PatchEmbed dynamic(layers::PatchEmbedOptions(32, 16, 3, 8).strict_img_size(false).output_fmt("NHWC"));
  CHECK((dynamic(at::randn({2, 3, 48, 32})).sizes() == at::IntArrayRef{2, 3, 2, 8}));
  CHECK_THROWS_WITH_AS(dynamic(at::randn({2, 3, 40, 32})), doctest::Contains("multiples"), timm::Error);

  layers::PatchEmbed padded(
      layers::PatchEmbedOptions(32, 16, 3, 8).strict_img_size(false).dynamic_img_pad(true).output_fmt("NCHW"));
  const at::Tensor x = at::randn({2, 3, 40, 20});
  CHECK((padded->dynamic_feat_size(40, 20) == std::array<int64_t, 2>{3, 2}));
  const at::Tensor y = padded(x);
  CHECK((y.sizes() == at::IntArrayRef{2, 8, 3, 2}));
  // timm's F.pad(x, (0, pad_w, 0, pad_h)): zeros at the right and the bottom.
  CHECK(at::allclose(y, padded->proj(at::constant_pad_nd(x, {0, 12, 0, 8}, 0.0))));
  CHECK_THROWS_WITH_AS(layers::PatchEmbed(layers::PatchEmbedOptions(32, 16, 3, 8).output_fmt("NDHWC")),
                       doctest::Contains("'NDHWC'"), timm::UsageError);
}

TEST_CASE("PatchEmbed: an img_size no multiple of the patch gives timm's img_size // patch grid, the rest left out") {
  at::manual_seed(0);
  c10::NoGradGuard no_grad;
  layers::PatchEmbed embed(layers::PatchEmbedOptions(38, 16, 3, 8).output_fmt("NCHW"));
  CHECK(embed->grid_size() == 2);
  CHECK(embed->num_patches() == 4);
  const at::Tensor x = at::randn({2, 3, 38, 38});
  const at::Tensor y = embed(x);
  CHECK((y.sizes() == at::IntArrayRef{2, 8, 2, 2}));
  CHECK(at::allclose(y, embed->proj(x.slice(2, 0, 32).slice(3, 0, 32))));
  // Still the model's size only (strict_img_size).
  CHECK_THROWS_WITH_AS(embed(at::randn({2, 3, 32, 32})), doctest::Contains("38x38"), timm::Error);
  // Padded, such an image would give one patch more than the grid; smaller
  // than one patch, none.
  CHECK_THROWS_WITH_AS(layers::PatchEmbed(layers::PatchEmbedOptions(38, 16, 3, 8).dynamic_img_pad(true)),
                       doctest::Contains("img_size 38: expected a multiple of patch_size 16"), timm::UsageError);
  CHECK_THROWS_WITH_AS(layers::PatchEmbed(layers::PatchEmbedOptions(8, 16, 3, 8)),
                       doctest::Contains("img_size 8: expected at least patch_size 16"), timm::UsageError);
}

TEST_CASE(
    "PatchEmbed norm_layer: torch's LayerNorm (eps 1e-5) over embed_dim after the layout change, keys proj, norm") {
  at::manual_seed(0);
  c10::NoGradGuard no_grad;
  layers::PatchEmbed embed(layers::PatchEmbedOptions(32, 16, 3, 8).output_fmt("NHWC").norm_layer("layernorm"));
  std::vector<std::string> keys;
  for (const auto& item : embed->named_parameters()) keys.push_back(item.key());
  CHECK(keys == std::vector<std::string>{"proj.weight", "proj.bias", "norm.weight", "norm.bias"});
  embed->norm->weight.normal_();
  const at::Tensor x = at::randn({2, 3, 32, 32});
  const at::Tensor expected =
      at::layer_norm(embed->proj(x).permute({0, 2, 3, 1}), {8}, embed->norm->weight, embed->norm->bias, 1e-5);
  CHECK(at::allclose(embed(x), expected));
  // A norm over the last dimension needs channels last.
  CHECK_THROWS_WITH_AS(
      layers::PatchEmbed(layers::PatchEmbedOptions(32, 16, 3, 8).output_fmt("NCHW").norm_layer("layernorm")),
      doctest::Contains("output_fmt"), timm::UsageError);
  CHECK_THROWS_WITH_AS(layers::PatchEmbed(layers::PatchEmbedOptions(32, 16, 3, 8).norm_layer("batchnorm")),
                       doctest::Contains("'batchnorm'"), timm::UsageError);
}

}  // namespace test_patch_embed
