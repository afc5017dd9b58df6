#include "timm/tools/test_time_pool.hpp"

#include <ATen/ATen.h>
#include <torch/utils.h>

#include "timm/base/error.hpp"
#include "timm/log/log.hpp"

namespace timm {
namespace {

std::string size_text(int64_t h, int64_t w) { return "(" + std::to_string(h) + ", " + std::to_string(w) + ")"; }

}  // namespace

TestTimePoolHeadImpl::TestTimePoolHeadImpl(ModelPtr base, std::array<int64_t, 2> original_pool)
    : base_(std::move(base)), original_pool_(original_pool) {
  const std::string& classifier = base_->pretrained_cfg().classifier;
  const auto params = base_->named_parameters();
  const at::Tensor* weight = params.find(classifier + ".weight");
  if (weight == nullptr || (weight->dim() != 2 && weight->dim() != 4)) {
    throw UsageError("--test-pool: the model has no classifier weight '" + classifier +
                     ".weight' (a Linear or 1x1 conv) to apply to the pooled windows");
  }
  const at::Tensor* bias = params.find(classifier + ".bias");
  fc_ = torch::nn::Conv2d(torch::nn::Conv2dOptions(weight->size(1), weight->size(0), 1).bias(bias != nullptr));
  torch::NoGradGuard no_grad;
  fc_->weight.copy_(weight->reshape(fc_->weight.sizes()));
  if (bias != nullptr) fc_->bias.copy_(*bias);
  register_module("base", base_);
  register_module("fc", fc_);
}

torch::Tensor TestTimePoolHeadImpl::forward(torch::Tensor x) {
  x = base_->forward_features(x);
  x = at::avg_pool2d(x, {original_pool_[0], original_pool_[1]}, /*stride=*/{1, 1});
  x = fc_(x);
  // timm's adaptive_avgmax_pool2d(x, 1).
  x = 0.5 * (at::adaptive_avg_pool2d(x, {1, 1}) + std::get<0>(at::adaptive_max_pool2d(x, {1, 1})));
  return x.flatten(1);
}

std::pair<ModelPtr, bool> apply_test_time_pool(ModelPtr model, const std::string& model_name,
                                               const DataConfig& config) {
  const std::vector<int64_t>& trained = model->pretrained_cfg().input_size;
  const int64_t h = config.input_size.at(1), w = config.input_size.at(2);
  if (!(h > trained.at(1) && w > trained.at(2))) return {std::move(model), false};
  at::Tensor features;
  {
    torch::NoGradGuard no_grad;
    const bool training = model->is_training();
    model->eval();
    features = model->forward_features(at::zeros({1, config.input_size.at(0), trained.at(1), trained.at(2)}));
    model->train(training);
  }
  if (features.dim() != 4) {
    throw UsageError("--test-pool: " + model_name + "'s forward_features gives a " + std::to_string(features.dim()) +
                     "-D tensor, not NCHW feature maps; test-time pooling pools a CNN's feature maps");
  }
  const std::array<int64_t, 2> pool{features.size(2), features.size(3)};
  log_info("Target input size " + size_text(h, w) + " > pretrained default " + size_text(trained.at(1), trained.at(2)) +
           ", using test time pooling");
  return {std::make_shared<TestTimePoolHeadImpl>(std::move(model), pool), true};
}

}  // namespace timm
