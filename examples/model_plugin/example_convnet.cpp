// A small convolutional classifier as a third-party model plugin: everything
// it needs comes from the installed SDK headers.
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/options/conv.h>

#include "timm/models/model.hpp"
#include "timm/plugin/plugin.hpp"

namespace example {

struct ConvNetOptions {
  TORCH_ARG(int64_t, num_classes) = 1000;
  TORCH_ARG(int64_t, in_chans) = 3;
  TORCH_ARG(int64_t, width) = 32;
};

class ConvNetImpl : public timm::ClassifierImpl {
 public:
  explicit ConvNetImpl(const ConvNetOptions& options) : options_(options) {
    const int64_t w = options.width();
    conv1 = register_module("conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(options.in_chans(), w, 3).padding(1)));
    bn1 = register_module("bn1", torch::nn::BatchNorm2d(w));
    conv2 = register_module("conv2", torch::nn::Conv2d(torch::nn::Conv2dOptions(w, 2 * w, 3).stride(2).padding(1)));
    bn2 = register_module("bn2", torch::nn::BatchNorm2d(2 * w));
    // timm's num_classes 0: no classifier, forward returns the pooled features.
    if (options.num_classes() > 0) fc = register_module("fc", torch::nn::Linear(2 * w, options.num_classes()));
    cfg_.input_size = {options.in_chans(), 28, 28};
    cfg_.first_conv = "conv1";
    cfg_.classifier = "fc";
  }

  // timm's split of forward: forward_features gives the unpooled feature map
  // (N, 2 * width, H / 2, W / 2); forward_head pools it and applies the
  // classifier, or stops before it with pre_logits. Without these two the
  // model still loads; the base class's versions throw when called.
  torch::Tensor forward_features(torch::Tensor x) override {
    x = torch::relu(bn1->forward(conv1->forward(x)));
    return torch::relu(bn2->forward(conv2->forward(x)));
  }
  torch::Tensor forward_head(torch::Tensor x, bool pre_logits = false) override {
    x = x.mean({2, 3});
    return pre_logits || !fc ? x : fc->forward(x);
  }
  torch::Tensor forward(torch::Tensor x) override { return forward_head(forward_features(x)); }
  int64_t num_classes() const override { return options_.num_classes(); }
  const timm::PretrainedCfg& pretrained_cfg() const override { return cfg_; }

  torch::nn::Conv2d conv1{nullptr}, conv2{nullptr};
  torch::nn::BatchNorm2d bn1{nullptr}, bn2{nullptr};
  torch::nn::Linear fc{nullptr};  // null when num_classes is 0

 private:
  ConvNetOptions options_;
  timm::PretrainedCfg cfg_;
};

timm::ModelPtr make_convnet(const timm::ModelArgs& args) {
  timm::validate_model_args("example_convnet", args);
  return std::make_shared<ConvNetImpl>(ConvNetOptions().num_classes(args.num_classes).in_chans(args.in_chans));
}

}  // namespace example

TIMM_PLUGIN("example_convnet") {
  registrar.add_model("example_convnet", "A two-layer convnet built out of tree against the SDK",
                      example::make_convnet);
}
