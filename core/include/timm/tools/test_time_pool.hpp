// timm's test-time pooling (validate.py / inference.py --test-pool): a CNN
// evaluated on images larger than it was trained at averages its features
// over windows of the training-size feature map, classifies each window
// with its classifier as a 1x1 conv, and pools the window logits by
// avg + max, as timm's TestTimePoolHead.
//
//   auto [model, pooled] = timm::apply_test_time_pool(model, data_config);
//   if (pooled) data_config.crop_pct = 1.0;  // as validate.py
#pragma once

#include <array>
#include <cstdint>
#include <utility>

#include <torch/nn/modules/conv.h>

#include "timm/data/data_config.hpp"
#include "timm/models/model.hpp"

namespace timm {

// timm's TestTimePoolHead around `base`: forward is forward_features, an
// avg_pool2d of `original_pool` at stride 1, the base's classifier as a 1x1
// conv (its weights, shared), then the mean of the global average and max of
// the window logits. The base's own head is skipped, as timm's.
class TestTimePoolHeadImpl : public ClassifierImpl {
 public:
  // Throws UsageError when `base`'s pretrained cfg names no classifier
  // weight it has (a model without a head).
  TestTimePoolHeadImpl(ModelPtr base, std::array<int64_t, 2> original_pool);

  torch::Tensor forward(torch::Tensor x) override;
  int64_t num_classes() const override { return base_->num_classes(); }
  const PretrainedCfg& pretrained_cfg() const override { return base_->pretrained_cfg(); }

 private:
  ModelPtr base_;
  std::array<int64_t, 2> original_pool_;
  torch::nn::Conv2d fc_{nullptr};
};

// timm's apply_test_time_pool(model, config): `model` wrapped in a
// TestTimePoolHead, and true, when the input size of `config` exceeds the
// model's pretrained cfg input_size in both height and width; else `model`
// as it is, and false. The window (timm's cfg pool_size) is the size of the
// model's feature map at its cfg input size, measured with one forward of
// zeros. Throws UsageError naming the model when its features are not NCHW
// maps (a transformer's tokens: timm has no pool_size for them and fails).
std::pair<ModelPtr, bool> apply_test_time_pool(ModelPtr model, const std::string& model_name, const DataConfig& config);

}  // namespace timm
