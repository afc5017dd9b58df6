#include "timm/data/transform.hpp"

#include "timm/core/error.hpp"
#include "timm/core/registry.hpp"

namespace timm {
namespace {

// Builds one registered stage and checks that it made what the caller needs.
Augmentation make_stage(const std::string& name, const TransformArgs& args) {
  const Registry& registry = Registry::global();
  const RegistryEntry& entry = registry.get(PluginKind::kAugmentation, name);
  const auto& factory = registry.factory<AugmentationFactory>(PluginKind::kAugmentation, name);
  Augmentation stage;
  try {
    stage = factory(args);
  } catch (const UsageError&) {
    throw;
  } catch (const std::exception& e) {
    throw Error("augmentation " + in_quotes(name) + " from " + in_quotes(entry.origin) + ": " + e.what());
  }
  if (!stage.image && !stage.batch) {
    throw Error("augmentation " + in_quotes(name) + " from " + in_quotes(entry.origin) + " made no transform");
  }
  return stage;
}

void add_stage(TransformPipeline& pipeline, const std::string& name, const TransformArgs& args) {
  Augmentation stage = make_stage(name, args);
  if (stage.image) pipeline.image.push_back(std::move(stage.image));
  if (stage.batch) pipeline.batch.push_back(std::move(stage.batch));
}

}  // namespace

void TransformPipeline::apply(Image& img, Rng& rng) const {
  for (const auto& t : image) t->apply(img, rng);
}

std::vector<Image> TransformPipeline::apply_splits(Image img, Rng& rng) const {
  if (num_splits() == 1) {
    apply(img, rng);
    return {std::move(img)};
  }
  const std::size_t split = std::min(secondary_begin, image.size());
  for (std::size_t i = 0; i < split; ++i) image[i]->apply(img, rng);
  std::vector<Image> out{img};
  for (int64_t s = 1; s < aug_splits; ++s) {
    Image aug = img;
    for (std::size_t i = split; i < image.size(); ++i) image[i]->apply(aug, rng);
    out.push_back(std::move(aug));
  }
  return out;
}

void TransformPipeline::apply(at::Tensor& tensor, Rng& rng) const {
  for (const auto& t : batch) t->apply(tensor, rng);
}

std::string TransformPipeline::repr() const {
  std::string out = "Compose(\n";
  for (const auto& t : image) out += "    " + t->repr() + "\n";
  out += "    MaybePILToTensor()\n)";
  if (!batch.empty()) {
    out += "\nBatch(\n";
    for (const auto& t : batch) out += "    " + t->repr() + "\n";
    out += ")";
  }
  return out;
}

TransformPipeline create_transform(const TransformArgs& args) {
  TransformPipeline pipeline;
  if (args.is_training && args.no_aug) {
    add_stage(pipeline, "resize_center", args);
  } else if (args.is_training) {
    add_stage(pipeline, args.train_crop_mode.empty() ? "rrc" : args.train_crop_mode, args);
    if (args.hflip > 0.0) add_stage(pipeline, "hflip", args);
    if (args.vflip > 0.0) add_stage(pipeline, "vflip", args);
    pipeline.secondary_begin = pipeline.image.size();
    if (args.aug_splits == 1 || args.aug_splits < 0) {
      throw UsageError("--aug-splits must be 0 or >= 2, got " + std::to_string(args.aug_splits));
    }
    pipeline.aug_splits = args.aug_splits;
    if (!args.auto_augment.empty()) add_stage(pipeline, "auto_augment", args);
    // Colour jitter is off with auto-augment, except for 3-Augment.
    const bool jitter_off = !args.auto_augment.empty() && args.auto_augment.find("3a") == std::string::npos;
    if (!jitter_off && args.color_jitter.has_value() && *args.color_jitter > 0.0) {
      add_stage(pipeline, "color_jitter", args);
    }
  } else {
    add_stage(pipeline, args.crop_mode.empty() ? "center" : args.crop_mode, args);
  }
  add_stage(pipeline, "normalize", args);
  if (args.is_training && !args.no_aug && args.re_prob > 0.0) add_stage(pipeline, "random_erasing", args);
  return pipeline;
}

}  // namespace timm
