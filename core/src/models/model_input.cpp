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

PatchBatch patch_input(const NaFlexBatch& batch, const PatchInputOptions& options,
                       const std::function<void(at::Tensor& patches)>& erase) {
  const bool non_blocking = true;
  at::Tensor patches =
      normalize_patches(batch.patches.to(options.device, non_blocking), options.mean, options.std, options.dtype);
  if (erase) erase(patches);
  const auto channels = static_cast<int64_t>(options.mean.size());
  if (!options.channels_last) patches = patches_channels_first(patches, channels);
  if (const auto& hw = options.unflatten) {
    const auto [ph, pw] = *hw;
    const int64_t b = patches.size(0), n = patches.size(1);
    patches = options.channels_last ? patches.view({b, n, ph, pw, channels}) : patches.view({b, n, channels, ph, pw});
  }
  return PatchBatch{patches, batch.patch_coord.to(options.device, non_blocking),
                    batch.patch_valid.to(options.device, non_blocking)};
}

}  // namespace timm
