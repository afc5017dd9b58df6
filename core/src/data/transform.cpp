#include "timm/data/transform.hpp"

#include <algorithm>

#include <ATen/Parallel.h>

#include "timm/base/error.hpp"
#include "timm/plugin/registry.hpp"

namespace timm {
namespace {

std::string where(const RegistryEntry& entry) {
  return "augmentation " + in_quotes(entry.name) + " from " + in_quotes(entry.origin);
}

// Builds one registered stage and checks that it made what the caller needs.
Augmentation make_stage(const RegistryEntry& entry, const TransformArgs& args) {
  const auto& factory = Registry::global().factory<AugmentationFactory>(PluginKind::kAugmentation, entry.name);
  Augmentation stage;
  try {
    stage = factory(args);
  } catch (const UsageError&) {
    throw;
  } catch (const std::exception& e) {
    throw Error(where(entry) + ": " + e.what());
  }
  if (!stage.image && !stage.batch) throw Error(where(entry) + " made no transform");
  return stage;
}

struct Selected {
  const RegistryEntry* entry;
  AugmentationStage stage;
  int order;
};

// The registered stages that apply to `args`, by stage and order (ties in
// the registry's name order).
std::vector<Selected> select_stages(const TransformArgs& args) {
  std::vector<Selected> selected;
  for (const RegistryEntry* entry : Registry::global().entries(PluginKind::kAugmentation)) {
    const AugmentationTraits* traits = traits_of<AugmentationTraits>(*entry);
    if (traits == nullptr || !traits->applies) continue;
    bool applies = false;
    try {
      applies = traits->applies(args);
    } catch (const UsageError&) {
      throw;
    } catch (const std::exception& e) {
      throw Error(where(*entry) + ": " + e.what());
    }
    if (applies) selected.push_back({entry, traits->stage, traits->order});
  }
  std::stable_sort(selected.begin(), selected.end(), [](const Selected& a, const Selected& b) {
    return a.stage != b.stage ? a.stage < b.stage : a.order < b.order;
  });
  return selected;
}

// Exactly one crop: none is an unknown crop mode, two are plugins that claim
// the same one.
void check_crop(const std::vector<Selected>& selected, const TransformArgs& args) {
  std::vector<const RegistryEntry*> crops;
  for (const Selected& s : selected) {
    if (s.stage == AugmentationStage::kCrop) crops.push_back(s.entry);
  }
  if (crops.size() > 1) {
    throw Error(where(*crops[0]) + " and " + where(*crops[1]) + " both crop the same images");
  }
  if (!crops.empty()) return;
  std::string known;
  for (const RegistryEntry* entry : Registry::global().entries(PluginKind::kAugmentation)) {
    const AugmentationTraits* traits = traits_of<AugmentationTraits>(*entry);
    if (traits != nullptr && traits->stage == AugmentationStage::kCrop) {
      known += (known.empty() ? "" : ", ") + entry->name;
    }
  }
  const std::string what = !args.is_training ? "crop mode " + in_quotes(args.crop_mode)
                           : args.no_aug     ? std::string("--no-aug training")
                                             : "--train-crop-mode " + in_quotes(args.train_crop_mode);
  throw UsageError("no registered crop for " + what + "; the crops: " + (known.empty() ? "none" : known) +
                   " (see --list-augmentations)");
}

// apply_splits from image stage `first` on (the stages before it have made
// `img`); `first` is at most the first secondary stage.
std::vector<Image> run_splits(const TransformPipeline& pipeline, Image img, Rng& rng, std::size_t first) {
  const auto& stages = pipeline.image;
  if (pipeline.num_splits() == 1) {
    for (std::size_t i = first; i < stages.size(); ++i) stages[i]->apply(img, rng);
    return {std::move(img)};
  }
  const std::size_t split = std::min(pipeline.secondary_begin, stages.size());
  for (std::size_t i = first; i < split; ++i) stages[i]->apply(img, rng);
  std::vector<Image> out{img};
  for (int64_t s = 1; s < pipeline.aug_splits; ++s) {
    Image aug = img;
    for (std::size_t i = split; i < stages.size(); ++i) stages[i]->apply(aug, rng);
    out.push_back(std::move(aug));
  }
  return out;
}

}  // namespace

// A stage that says takes_jpeg() must override this: a bug, not a bad file.
Image ImageTransform::apply_jpeg(const JpegSample& jpeg, Rng&) const {
  TORCH_CHECK(false, "the image transform ", repr(), " takes a JPEG but does not implement apply_jpeg (sample ",
              jpeg.source, ")");
  return {};
}

void TransformPipeline::apply(Image& img, Rng& rng) const {
  for (const auto& t : image) t->apply(img, rng);
}

std::vector<Image> TransformPipeline::apply_splits(Image img, Rng& rng) const {
  return run_splits(*this, std::move(img), rng, 0);
}

bool TransformPipeline::takes_jpeg() const {
  return !image.empty() && image.front()->takes_jpeg() && (num_splits() == 1 || secondary_begin >= 1);
}

std::vector<Image> TransformPipeline::apply_splits_jpeg(const JpegSample& jpeg, Rng& rng) const {
  TORCH_CHECK(takes_jpeg(), "TransformPipeline::apply_splits_jpeg: the first stage does not take a JPEG");
  return run_splits(*this, image.front()->apply_jpeg(jpeg, rng), rng, 1);
}

void TransformPipeline::apply(at::Tensor& tensor, Rng& rng) const {
  for (const auto& t : batch) t->apply(tensor, rng);
}

namespace {

// Holds the calling thread to one intra-op thread while in scope. The batch
// stages on the CPU are a few memory-bound passes over the batch, while the
// loader's worker threads need every core; each OpenMP region they would run
// leaves its helper threads spinning for milliseconds afterwards (libgomp's
// GOMP_SPINCOUNT), taking those cores from the workers. On 2 cores the train
// pipeline gave 13% more images/s on the calling thread alone
// (docs/performance.md).
class SingleIntraOpThread {
 public:
  SingleIntraOpThread() : threads_(at::get_num_threads()) {
    if (threads_ > 1) at::set_num_threads(1);
  }
  ~SingleIntraOpThread() {
    if (threads_ > 1) at::set_num_threads(threads_);
  }
  SingleIntraOpThread(const SingleIntraOpThread&) = delete;
  SingleIntraOpThread& operator=(const SingleIntraOpThread&) = delete;

 private:
  int threads_;
};

at::Tensor transform_on_device(const at::Tensor& images, const TransformPipeline& transform, Rng& rng,
                               const InputOptions& options) {
  at::Tensor input = images.to(options.device, /*non_blocking=*/true).to(options.dtype);
  transform.apply(input, rng);
  if (options.channels_last) input = input.contiguous(at::MemoryFormat::ChannelsLast);
  return input;
}

}  // namespace

at::Tensor prepare_input(const at::Tensor& images, const TransformPipeline& transform, Rng& rng,
                         const InputOptions& options) {
  if (!options.device.is_cpu()) return transform_on_device(images, transform, rng, options);
  const SingleIntraOpThread single_thread;
  return transform_on_device(images, transform, rng, options);
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
  const std::vector<Selected> selected = select_stages(args);
  check_crop(selected, args);
  TransformPipeline pipeline;
  // Training: the secondary stages begin after the crop and primary ones,
  // where timm's AugMixDataset splits.
  bool secondary = !args.augmenting();
  auto begin_secondary = [&] {
    secondary = true;
    pipeline.secondary_begin = pipeline.image.size();
    if (args.aug_splits == 1 || args.aug_splits < 0) {
      throw UsageError("--aug-splits must be 0 or >= 2, got " + std::to_string(args.aug_splits));
    }
    pipeline.aug_splits = args.aug_splits;
  };
  for (const Selected& s : selected) {
    if (!secondary && s.stage >= AugmentationStage::kSecondary) begin_secondary();
    Augmentation stage = make_stage(*s.entry, args);
    if (stage.image) pipeline.image.push_back(std::move(stage.image));
    if (stage.batch) pipeline.batch.push_back(std::move(stage.batch));
  }
  if (!secondary) begin_secondary();
  return pipeline;
}

}  // namespace timm
