// What a classifier takes in training and evaluation: a batch of images, or
// with --naflex-loader a NaFlex batch of patches (timm passes its dict of
// patches to model(input) where it passes an image tensor otherwise).
//
//   timm::ModelInput input = images;           // or a timm::PatchBatch
//   at::Tensor logits = timm::forward_input(*model, input);
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string_view>
#include <variant>
#include <vector>

#include <ATen/core/Tensor.h>

#include "timm/data/naflex.hpp"
#include "timm/models/model.hpp"

namespace timm {

class ModelInput {
 public:
  // Implicit: an image batch (N, C, H, W) is what most code passes.
  ModelInput(at::Tensor images) : value_(std::move(images)) {}    // NOLINT(google-explicit-constructor)
  ModelInput(PatchBatch patches) : value_(std::move(patches)) {}  // NOLINT(google-explicit-constructor)

  bool is_patches() const { return std::holds_alternative<PatchBatch>(value_); }
  // The image batch. Throws UsageError naming `user` (who needs images: a
  // distillation task, --save-images) when the input is patches.
  const at::Tensor& images(std::string_view user) const;
  // The patch batch; throws Error when the input is images.
  const PatchBatch& patches() const;
  // Samples in the batch (dimension 0 of the images or of the patches).
  int64_t batch_size() const;

 private:
  std::variant<at::Tensor, PatchBatch> value_;
};

// The model's logits for `input`: model.forward(images), or
// model.forward_patches(patches), which a model that takes images only
// refuses by name.
at::Tensor forward_input(ClassifierImpl& model, const ModelInput& input);

// How patch_input makes a NaFlex loader batch the model's PatchBatch.
struct PatchInputOptions {
  std::vector<double> mean, std;      // per channel: the data config's
  at::ScalarType dtype = at::kFloat;  // the model's input dtype
  at::Device device = at::kCPU;       // copied there non-blocking (pinned batches on CUDA)
  bool channels_last = true;          // the model's patchify_channels_last()
  // (Ph, Pw): the patches unflattened to (B, N, Ph, Pw, C), or (B, N, C, Ph,
  // Pw) channels first, for a model that reads each batch's patch size
  // (--naflex-patch-sizes); nullopt keeps them flat.
  std::optional<std::array<int64_t, 2>> unflatten{};
};

// timm's NaFlexPrefetchLoader: the batch's uint8 (Ph, Pw, C) patches moved
// to `options.device`, normalised in its dtype (normalize_patches), passed to
// `erase` when given (still (B, N, P*P*C) channels last, as timm's
// PatchRandomErasing reads them in either layout), then laid out as the
// model takes them; the coordinates and mask moved beside them.
PatchBatch patch_input(const NaFlexBatch& batch, const PatchInputOptions& options,
                       const std::function<void(at::Tensor& patches)>& erase = {});

}  // namespace timm
