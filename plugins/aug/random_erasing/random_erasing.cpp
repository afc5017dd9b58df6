// timm's RandomErasing on the normalised batch (--reprob, --remode,
// --recount, --resplit), where timm's PrefetchLoader applies it. The
// geometry lives in the SDK (timm/data/random_erasing.hpp).
#include <memory>

#include "timm/data/random_erasing.hpp"
#include "timm/plugin/plugin.hpp"

namespace timm {
namespace {

class RandomErasingStage final : public BatchTransform {
 public:
  explicit RandomErasingStage(const TransformArgs& args) : erasing_(options(args)) {}
  void apply(at::Tensor& batch, Rng& rng) const override { erasing_.apply(batch, rng); }
  std::string repr() const override { return erasing_.repr(); }

 private:
  static RandomErasingOptions options(const TransformArgs& args) {
    RandomErasingOptions o;
    o.probability = args.re_prob;
    o.mode = args.re_mode;
    o.max_count = args.re_count;
    o.num_splits = args.re_num_splits;
    return o;
  }
  RandomErasing erasing_;
};

}  // namespace
}  // namespace timm

TIMM_PLUGIN("aug_random_erasing") {
  using namespace timm;
  registrar.add_augmentation("random_erasing",
                             "batch: RandomErasing with probability --reprob, mode --remode, up to --recount boxes",
                             [](const TransformArgs& a) {
                               return Augmentation{nullptr, std::make_shared<const RandomErasingStage>(a)};
                             },
                             // After normalize (10), as timm's final transforms; not on
                             // NaFlex batches, which are patches (timm's PatchRandomErasing).
                             {.stage = AugmentationStage::kFinal, .order = 20, .applies = [](const TransformArgs& a) {
                                return a.augmenting() && a.re_prob > 0.0 && !a.naflex;
                              }});
}
