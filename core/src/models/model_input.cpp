#include "timm/models/model_input.hpp"

#include <string>

#include "timm/base/error.hpp"

namespace timm {

const at::Tensor& ModelInput::images(std::string_view user) const {
  if (is_patches()) {
    throw UsageError(std::string(user) +
                     " takes image batches, not the NaFlex patch batches of --naflex-loader (timm's neither)");
  }
  return std::get<at::Tensor>(value_);
}

const PatchBatch& ModelInput::patches() const {
  if (!is_patches()) throw Error("the model input is an image batch, not a NaFlex patch batch");
  return std::get<PatchBatch>(value_);
}

int64_t ModelInput::batch_size() const {
  return is_patches() ? std::get<PatchBatch>(value_).patches.size(0) : std::get<at::Tensor>(value_).size(0);
}

at::Tensor forward_input(ClassifierImpl& model, const ModelInput& input) {
  if (input.is_patches()) return model.forward_patches(input.patches());
  return model.forward(input.images("the model"));
}

}  // namespace timm
