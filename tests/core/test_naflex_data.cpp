// The NaFlex input pipeline's pieces (timm/data/naflex.hpp) against timm,
// run by tests/oracle/naflex_data_oracle.py at test time: the image size for a
// sequence length over 3000 (image, patch, length, max_ratio) combinations
// (sizes and ratios exactly); six images (RGB and L, most no multiple of the
// patch) cut into patches; the batch of the RGB ones padded and cut to 12
// patches; its normalisation as timm's prefetcher.
#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include "test_support.hpp"
#include "timm/base/error.hpp"
#include "timm/data/dataset.hpp"
#include "timm/data/image_ops.hpp"
#include "timm/data/loader.hpp"
#include "timm/data/naflex.hpp"
#include "timm/data/naflex_sampler.hpp"
#include "timm/models/model_input.hpp"

// Last: c10/util/Logging.h defines a CHECK macro that doctest must override.
#include <doctest/doctest.h>

namespace test_naflex_data {

namespace {

using namespace timm;

constexpr int64_t kImages = 6;
constexpr int64_t kSeqLen = 12;
const std::vector<double> kMean = {0.485, 0.456, 0.406};
const std::vector<double> kStd = {0.229, 0.224, 0.225};

}  // namespace

TEST_CASE("NaFlex pieces equal timm's: image size for a sequence, patchify, collate, normalise") {
  nlohmann::json cases = nlohmann::json::array();
  for (const int64_t h : {1, 7, 16, 100, 224, 333, 480, 640, 1000, 4000}) {
    for (const int64_t w : {1, 7, 16, 100, 224, 333, 480, 640, 1000, 4000}) {
      for (const int64_t patch : {14, 16, 32}) {
        for (const int64_t seq : {1, 64, 256, 576, 1024}) {
          cases.push_back({h, w, patch, seq, nullptr});
          cases.push_back({h, w, patch, seq, 1.0});
        }
      }
    }
  }
  const auto timm_out = test::oracle_tensors("naflex_data_oracle.py", {cases.dump()});
  const at::Tensor sizes = timm_out.at("seq.sizes");
  const at::Tensor ratios = timm_out.at("seq.ratios");
  int64_t refused = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const auto& c = cases[i];
    CAPTURE(c.dump());
    const int64_t patch = c[2];
    std::optional<double> max_ratio;
    if (!c[4].is_null()) max_ratio = c[4].get<double>();
    const auto idx = static_cast<int64_t>(i);
    if (ratios[idx].item<double>() < 0) {
      CHECK_THROWS_AS(image_size_for_seq({c[0], c[1]}, {patch, patch}, c[3], true, max_ratio), UsageError);
      ++refused;
      continue;
    }
    const SeqImageSize ours = image_size_for_seq({c[0], c[1]}, {patch, patch}, c[3], true, max_ratio);
    CHECK(ours.ratio == ratios[idx].item<double>());
    CHECK(ours.size[0] == sizes[idx][0].item<int64_t>());
    CHECK(ours.size[1] == sizes[idx][1].item<int64_t>());
  }
  CHECK(refused < static_cast<int64_t>(cases.size()) / 2);  // most combinations have a size

  std::vector<ImagePatches> rgb;
  for (int64_t i = 0; i < kImages; ++i) {
    CAPTURE(i);
    const std::string n = std::to_string(i);
    const ImagePatches ours = patchify_image(test::image_from_tensor(timm_out.at("img" + n)), {16, 16});
    CHECK(at::equal(ours.patches, timm_out.at("patches" + n)));
    CHECK(at::equal(ours.patch_coord, timm_out.at("coord" + n)));
    if (timm_out.at("img" + n).size(2) == 3) rgb.push_back(ours);
  }
  const NaFlexBatch batch = collate_patches(rgb, kSeqLen);
  CHECK(at::equal(batch.patches.to(at::kFloat), timm_out.at("batch.patches")));
  CHECK(at::equal(batch.patch_coord, timm_out.at("batch.coord")));
  CHECK(at::equal(batch.patch_valid, timm_out.at("batch.valid")));
  CHECK(at::allclose(normalize_patches(batch.patches, kMean, kStd), timm_out.at("batch.normalized"), 1e-6, 1e-6));
  // The model's input, channels last and first, flat and unflattened.
  const PatchBatch last = patch_input(batch, {.mean = kMean, .std = kStd});
  CHECK(at::allclose(last.patches, timm_out.at("batch.normalized"), 1e-6, 1e-6));
  CHECK(at::equal(last.patch_coord, batch.patch_coord));
  CHECK(at::equal(last.patch_valid, batch.patch_valid));
  const at::Tensor& cf = timm_out.at("batch.normalized_cf");
  CHECK(at::allclose(patch_input(batch, {.mean = kMean, .std = kStd, .channels_last = false}).patches, cf, 1e-6, 1e-6));
  const at::Tensor unflat =
      patch_input(batch, {.mean = kMean, .std = kStd, .channels_last = false, .unflatten = {{16, 16}}}).patches;
  CHECK(at::allclose(unflat, cf.view({cf.size(0), cf.size(1), 3, 16, 16}), 1e-6, 1e-6));
  // Erasing sees the normalised patches channels last, before the relayout.
  const PatchBatch erased = patch_input(batch, {.mean = kMean, .std = kStd, .channels_last = false},
                                        [](at::Tensor& patches) { patches.select(2, 0).fill_(7); });
  CHECK(at::equal(erased.patches.view({cf.size(0), cf.size(1), 3, 256}).select(2, 0).select(2, 0),
                  at::full({cf.size(0), cf.size(1)}, 7.0)));
}

TEST_CASE("NaFlex pieces refuse bad input with a message naming it") {
  CHECK_THROWS_WITH_AS(image_size_for_seq({0, 10}, {16, 16}, 64), doctest::Contains("image 0x10"), UsageError);
  CHECK_THROWS_AS(image_size_for_seq({10, 10}, {16, 16}, 0), UsageError);
  CHECK_THROWS_AS(patchify_image(Image(), {16, 16}), UsageError);
  CHECK_THROWS_AS(patchify_image(Image(4, 4, 3), {0, 16}), UsageError);
  CHECK_THROWS_AS(collate_patches({}, 4), UsageError);
  const ImagePatches rgb = patchify_image(Image(16, 32, 3), {16, 16});
  const ImagePatches gray = patchify_image(Image(16, 16, 1), {16, 16});
  CHECK_THROWS_WITH_AS(collate_patches({rgb, gray}, 4), doctest::Contains("sample 1 has patches of 256 values"),
                       UsageError);
  CHECK_THROWS_AS(
      normalize_patches(collate_patches({rgb}, 4).patches, std::vector<double>(5, 0.5), std::vector<double>(5, 0.5)),
      UsageError);
  CHECK_THROWS_WITH_AS(patches_channels_first(at::zeros({1, 2, 10}), 3), doctest::Contains("got shape [1, 2, 10]"),
                       UsageError);
}

namespace {

// Sample i is an RGB image of its own size, every pixel i.
class VariedDataset final : public Dataset {
 public:
  std::size_t size() const override { return 23; }
  Image image(std::size_t index) const override {
    const auto i = static_cast<int64_t>(index);
    Image image(20 + 7 * i, 90 - 3 * i, 3);
    std::fill(image.pixels.begin(), image.pixels.end(), static_cast<std::uint8_t>(index));
    return image;
  }
  int64_t target(std::size_t index) const override { return static_cast<int64_t>(index); }
  int64_t num_classes() const override { return 23; }
  std::string describe(std::size_t index) const override { return "sample " + std::to_string(index); }
};

// ResizeToSequence without the plugin: the image resized to its sequence size.
class ResizeToSeq final : public ImageTransform {
 public:
  explicit ResizeToSeq(NaFlexTransformArgs naflex) : naflex_(naflex) {}
  void apply(Image& image, Rng&) const override {
    const auto size = image_size_for_seq({image.height, image.width}, naflex_.patch_size, naflex_.max_seq_len).size;
    image = resize(image, size[0], size[1], Interpolation::kBilinear);
  }
  std::string repr() const override { return "ResizeToSeq()"; }

 private:
  NaFlexTransformArgs naflex_;
};

}  // namespace

TEST_CASE("a NaFlex Loader gives the sampler's batches as padded patches, the same with any number of workers") {
  NaFlexSamplerOptions sampler_options;
  sampler_options.seq_lens = {4, 9, 16};
  sampler_options.max_tokens_per_batch = 48;
  sampler_options.batch_divisor = 1;
  sampler_options.patch_size_probs = std::vector<double>{1.0, 1.0};  // patch 8 or 16
  auto sampler = std::make_shared<NaFlexBatchSampler>(23, sampler_options);
  const std::vector<int64_t> patches = {8, 16};
  std::vector<TransformPipeline> transforms;
  LoaderOptions options;
  for (const int64_t seq_len : sampler->seq_lens()) {
    for (const int64_t patch : patches) {
      const NaFlexTransformArgs naflex{{patch, patch}, seq_len};
      TransformPipeline t;
      t.image.push_back(std::make_shared<ResizeToSeq>(naflex));
      transforms.push_back(std::move(t));
      options.naflex.push_back(naflex);
    }
  }
  std::vector<std::vector<at::Tensor>> runs;
  for (const int64_t workers : {0, 2}) {
    options.num_workers = workers;
    Loader loader(std::make_shared<VariedDataset>(), sampler, transforms, options);
    CHECK(loader.num_batches() == sampler->size());
    std::vector<at::Tensor> run;
    for (const int64_t epoch : {0, 1}) {
      loader.start_epoch(epoch);
      const auto expected = sampler->batches(epoch);
      std::size_t b = 0;
      while (auto batch = loader.next()) {
        REQUIRE(b < expected.size());
        const auto& [choice, indices] = expected[b];
        CHECK(batch->choice == static_cast<std::size_t>(choice));
        CHECK_FALSE(batch->images.defined());
        const int64_t n = static_cast<int64_t>(indices.size());
        const int64_t seq_len = sampler->seq_len_of(choice);
        const int64_t patch = patches[static_cast<size_t>(sampler->patch_index_of(choice))];
        const NaFlexBatch& p = batch->patches;
        CHECK(p.patches.sizes() == at::IntArrayRef({n, seq_len, patch * patch * 3}));
        CHECK(std::vector<int64_t>(batch->targets.data_ptr<int64_t>(), batch->targets.data_ptr<int64_t>() + n) ==
              indices);
        for (int64_t k = 0; k < n; ++k) {
          // Each sample's patches are its resized image's, then padding.
          Image image = VariedDataset().image(static_cast<std::size_t>(indices[static_cast<size_t>(k)]));
          Rng rng(0);
          ResizeToSeq({{patch, patch}, seq_len}).apply(image, rng);
          const ImagePatches mine = patchify_image(image, {patch, patch});
          const int64_t valid = mine.patches.size(0);
          CHECK(valid <= seq_len);
          CHECK(p.patch_valid[k].sum().item<int64_t>() == valid);
          CHECK(at::equal(p.patches[k].slice(0, 0, valid), mine.patches));
          CHECK(at::equal(p.patch_coord[k].slice(0, 0, valid), mine.patch_coord));
          CHECK(p.patches[k].slice(0, valid).eq(0).all().item<bool>());
        }
        run.push_back(p.patches);
        ++b;
      }
      CHECK(b == expected.size());
    }
    runs.push_back(run);
  }
  REQUIRE(runs[0].size() == runs[1].size());
  for (size_t i = 0; i < runs[0].size(); ++i) CHECK(at::equal(runs[0][i], runs[1][i]));

  LoaderOptions mismatched;
  mismatched.naflex = {NaFlexTransformArgs{}};
  CHECK_THROWS_WITH_AS(Loader(std::make_shared<VariedDataset>(), sampler, transforms, mismatched),
                       doctest::Contains("expected one per transform"), UsageError);
}

TEST_CASE("a NaFlex Loader with NaFlexMixup: soft targets of each sample and its partner, any number of workers") {
  NaFlexSamplerOptions sampler_options;
  sampler_options.seq_lens = {4, 9};
  sampler_options.max_tokens_per_batch = 36;
  sampler_options.batch_divisor = 1;
  auto sampler = std::make_shared<NaFlexBatchSampler>(23, sampler_options);
  std::vector<TransformPipeline> transforms;
  LoaderOptions options;
  for (const int64_t seq_len : sampler->seq_lens()) {
    const NaFlexTransformArgs naflex{{8, 8}, seq_len};
    TransformPipeline t;
    t.image.push_back(std::make_shared<ResizeToSeq>(naflex));
    transforms.push_back(std::move(t));
    options.naflex.push_back(naflex);
  }
  NaFlexMixupOptions mixup;
  mixup.num_classes = 23;
  mixup.mixup_off_epoch = 1;  // epoch 1: one-hot targets
  options.naflex_mixup = std::make_shared<const NaFlexMixup>(mixup);
  std::vector<std::vector<at::Tensor>> runs;
  for (const int64_t workers : {0, 2}) {
    options.num_workers = workers;
    Loader loader(std::make_shared<VariedDataset>(), sampler, transforms, options);
    std::vector<at::Tensor> run;
    int64_t mixed_rows = 0;
    for (const int64_t epoch : {0, 1}) {
      loader.start_epoch(epoch);
      const auto expected = sampler->batches(epoch);
      std::size_t b = 0;
      while (auto batch = loader.next()) {
        const std::vector<int64_t>& indices = expected.at(b).second;
        const auto n = static_cast<int64_t>(indices.size());
        const at::Tensor& targets = batch->targets;
        REQUIRE(targets.sizes() == at::IntArrayRef({n, 23}));
        CHECK(at::allclose(targets.sum(1), at::ones({n})));
        for (int64_t k = 0; k < n; ++k) {
          // Mass on the sample's class and at most one partner's, all in the batch.
          const at::Tensor classes = targets[k].nonzero().flatten();
          CHECK(classes.numel() <= 2);
          for (int64_t c = 0; c < classes.numel(); ++c) {
            CHECK(std::find(indices.begin(), indices.end(), classes[c].item<int64_t>()) != indices.end());
          }
          if (epoch == 1) CHECK(targets[k][indices[static_cast<size_t>(k)]].item<float>() == 1.0f);
          if (classes.numel() == 2) ++mixed_rows;
        }
        run.push_back(targets);
        run.push_back(batch->patches.patches);
        ++b;
      }
      CHECK(b == expected.size());
    }
    CHECK(mixed_rows > 10);  // epoch 0 mixed
    runs.push_back(run);
  }
  REQUIRE(runs[0].size() == runs[1].size());
  for (size_t i = 0; i < runs[0].size(); ++i) CHECK(at::equal(runs[0][i], runs[1][i]));

  LoaderOptions images_only;
  images_only.naflex_mixup = options.naflex_mixup;
  CHECK_THROWS_WITH_AS(Loader(std::make_shared<VariedDataset>(), sampler, transforms.front(), images_only),
                       doctest::Contains("needs a NaFlex loader"), UsageError);
}

}  // namespace test_naflex_data
