// What a classifier takes in training and evaluation: a batch of images, or
// with --naflex-loader a NaFlex batch of patches (timm passes its dict of
// patches to model(input) where it passes an image tensor otherwise).
//
//   timm::ModelInput input = images;           // or a timm::PatchBatch
//   at::Tensor logits = timm::forward_input(*model, input);
#pragma once

#include <cstdint>
#include <string_view>
#include <variant>

#include <ATen/core/Tensor.h>

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

}  // namespace timm
